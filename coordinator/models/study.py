"""A study: its spec (the analyses' union, the primary test, the validators across analyses) and
its result (each analysis's result or why it failed, each center's part, the software and the
centers' guarantees)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from coordinator.models._base import MAX_GROUPS, ExcludedCenter, _Result, _Spec
from coordinator.models.categorical import CategoricalAnalysis, CategoricalResult
from coordinator.models.describe import DescribeAnalysis, DescribeResult
from coordinator.models.dp_boxplot import DPBoxplotAnalysis, DPBoxplotResult
from coordinator.models.dp_mwu import DPMWUAnalysis, DPMWUResult
from coordinator.models.dp_quantiles import DPQuantilesAnalysis, DPQuantilesResult
from coordinator.models.kruskal import KruskalAnalysis, KruskalResult
from coordinator.models.mwu import MWUAnalysis, MWUResult, MWUTest
from coordinator.models.quantiles import QuantilesAnalysis, QuantilesResult
from coordinator.models.shift import ShiftAnalysis, ShiftResult
from coordinator.models.survival import SurvivalAnalysis, SurvivalResult
from coordinator.models.table import TableAnalysis, TableResult
from shared.fields import Distinct, Extreme

# partially_failed: some analyses gave their result, some failed; cancelled: stopped by its owner
# or an admin (docs/coordinator.md, "Statuses and partial results", "Cancel").
StudyStatus = Literal[
    "pending", "running", "succeeded", "partially_failed", "failed", "failed_resumable",
    "cancelled",
]


STUDY_STATUSES: tuple[str, ...] = get_args(StudyStatus)


AnalysisKind = Literal["table", "mwu", "dp_boxplot", "quantiles", "dp_quantiles", "describe",
                       "shift", "categorical", "kruskal", "dp_mwu", "survival"]


Analysis = Annotated[
    TableAnalysis | MWUAnalysis | DPBoxplotAnalysis | QuantilesAnalysis | DPQuantilesAnalysis
    | DescribeAnalysis | ShiftAnalysis | CategoricalAnalysis | KruskalAnalysis | DPMWUAnalysis
    | SurvivalAnalysis,
    Field(discriminator="kind"),
]


class PrimaryTest(_Spec):
    """The test a pre-registered analysis names as its primary one: a Mann-Whitney test of one
    ``mwu`` analysis of the spec, at level ``alpha``. It changes nothing that is computed; the
    report, the exports and the Methods paragraph mark it and name it first."""

    analysis: int = Field(ge=0, le=15, description="index of an mwu (or dp_mwu) analysis in "
                                                   "`analyses`")
    test: MWUTest = Field(description="one of that analysis's `tests`")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="the test's significance level")


class StudySpec(_Spec):
    """What an analyst asks for. Nothing here is secret; it is stored and echoed as given."""

    title: str | None = Field(default=None, min_length=1, max_length=200,
                              description="a human title, shown in lists and reports")
    description: str | None = Field(default=None, min_length=1, max_length=5000,
                                    description="what the study is for (plain text)")
    primary: PrimaryTest | None = Field(
        default=None, description="the pre-registered primary test (an mwu analysis's test)")
    dataset: str = Field(min_length=1, max_length=128, pattern=r"^[a-z][a-z0-9_-]*$")
    variable: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    groups: tuple[str, ...] | None = Field(
        default=None, min_length=2, max_length=MAX_GROUPS,
        description="the declared group levels compared: two (X, Y) for most analyses, "
                    "more for those that compare several arms; none for a one-group table")
    k: int = Field(default=10, ge=2, le=100_000, description="no released count in 1..k-1")
    analyses: list[Analysis] = Field(min_length=1, max_length=16)
    centers: Annotated[list[str] | None, Distinct] = Field(
        default=None, min_length=1, description="registry ids to ask; all when absent"
    )
    allow_partial: bool = Field(
        default=False,
        description="leave out failing centers (recorded) while at least min_centers remain",
    )
    webhook_url: str | None = Field(
        default=None, min_length=8, max_length=2000, pattern=r"^https?://",
        description="POSTed a signed notice when the study ends; must lie below one of the "
                    "coordinator's webhook_allowed_prefixes (same scheme, host and port, the "
                    "path below the prefix's; no user@, dot segment, encoded dot or slash). "
                    "Shown to whoever may read the "
                    "study: put no secret in it (docs/coordinator.md, \"Completion webhook\")",
    )

    @field_validator("groups")
    @classmethod
    def _levels(cls, groups: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if groups is not None:
            if len(set(groups)) != len(groups):
                raise ValueError("the two group levels must differ" if len(groups) == 2
                                 else "the group levels must differ")
            if not all(0 < len(g) <= 128 for g in groups):
                raise ValueError("group levels must be 1 to 128 characters")
        return groups

    @model_validator(mode="after")
    def _groups_fit_analyses(self) -> Self:
        # How many levels an analysis compares is its own (``max_groups``); today's compare two.
        if self.groups is not None:
            for i, analysis in enumerate(self.analyses):
                most = type(analysis).max_groups
                if most is not None and len(self.groups) > most:
                    raise ValueError(
                        f"analysis {i} ({analysis.kind}) compares at most {most} group levels; "
                        f"the spec's `groups` names {len(self.groups)}: ask it in a study of "
                        "two levels")
        return self

    @property
    def pair(self) -> tuple[str, str] | None:
        """The groups as (X, Y), for the analyses that compare two (a spec asking one of them
        has at most two levels: ``_groups_fit_analyses``)."""
        if self.groups is None:
            return None
        assert len(self.groups) == 2, "an analysis of two groups in a spec of more"
        return self.groups[0], self.groups[1]

    @model_validator(mode="after")
    def _describe_bounds(self) -> Self:
        for analysis in self.analyses:
            if isinstance(analysis, DescribeAnalysis) and analysis.bounds:
                unknown = sorted(set(analysis.bounds) - set(analysis.described(self.variable)))
                if unknown:
                    raise ValueError(f"a describe's `bounds` names variables it does not "
                                     f"describe: {unknown}")
        return self

    @model_validator(mode="after")
    def _groups_enough(self) -> Self:
        # How few levels an analysis compares is its own too (``min_groups``); the first refused
        # in the spec's order (a property of the spec, not of how the models are laid out).
        named = len(self.groups) if self.groups is not None else 0
        for analysis in self.analyses:
            model = type(analysis)
            if named < model.min_groups:
                raise ValueError(f"{model.article} {analysis.kind} analysis needs `groups` "
                                 f"({model.groups_needed})")
        return self

    @model_validator(mode="after")
    def _primary_is_asked(self) -> Self:
        if self.primary is None:
            return self
        index = self.primary.analysis
        if index >= len(self.analyses) or not isinstance(self.analyses[index],
                                                         MWUAnalysis | DPMWUAnalysis):
            raise ValueError(f"`primary.analysis` {index} is not an mwu analysis of the spec "
                             "(nor a dp_mwu one)")
        asked = self.analyses[index]
        assert isinstance(asked, MWUAnalysis | DPMWUAnalysis)
        if self.primary.test not in asked.tests:
            raise ValueError(f"`primary.test` {self.primary.test!r} is not one of analysis "
                             f"{index}'s tests {list(asked.tests)}")
        return self

    @model_validator(mode="after")
    def _one_table(self) -> Self:
        # A study builds one federated table and every analysis that needs a table shares it.
        closings = {(a.lower, a.upper) for a in self.analyses if isinstance(a, TableAnalysis)}
        if len(closings) > 1:
            raise ValueError(
                "every table analysis of a study must close the table the same way "
                "(`lower`, `upper`): a study builds one federated table"
            )
        return self

    @property
    def table_closing(self) -> tuple[Extreme, Extreme]:
        """(lower, upper) of the study's one table; the MWU table test uses it too."""
        for analysis in self.analyses:
            if isinstance(analysis, TableAnalysis):
                return analysis.lower, analysis.upper
        return "buffer", "buffer"


AnalysisResult = Annotated[
    TableResult | MWUResult | DPBoxplotResult | QuantilesResult | DPQuantilesResult
    | DescribeResult | ShiftResult | CategoricalResult | KruskalResult | DPMWUResult
    | SurvivalResult,
    Field(discriminator="kind"),
]


class StudyError(BaseModel):
    """Why a study failed: the coordinator's error body (``center``/``kind`` for a center)."""

    model_config = ConfigDict(extra="allow")

    error: str
    detail: str


class FailedAnalysis(_Result):
    """An analysis that gave no result, and why: the error body (``center`` and ``kind`` when
    a center failed it). The study's other analyses keep their results."""

    kind: AnalysisKind
    status: Literal["failed"] = "failed"
    error: StudyError


def _outcome_tag(value: Any) -> str:
    """A failed analysis by its status, a result by its kind (results stored before analyses
    had a status have none: they succeeded)."""
    if isinstance(value, dict):
        status, kind = value.get("status", "succeeded"), value.get("kind")
    else:
        status, kind = getattr(value, "status", "succeeded"), getattr(value, "kind", None)
    return "failed" if status == "failed" else str(kind)


AnalysisOutcome = Annotated[
    Annotated[TableResult, Tag("table")]
    | Annotated[MWUResult, Tag("mwu")]
    | Annotated[DPBoxplotResult, Tag("dp_boxplot")]
    | Annotated[QuantilesResult, Tag("quantiles")]
    | Annotated[DPQuantilesResult, Tag("dp_quantiles")]
    | Annotated[DescribeResult, Tag("describe")]
    | Annotated[ShiftResult, Tag("shift")]
    | Annotated[CategoricalResult, Tag("categorical")]
    | Annotated[KruskalResult, Tag("kruskal")]
    | Annotated[DPMWUResult, Tag("dp_mwu")]
    | Annotated[SurvivalResult, Tag("survival")]
    | Annotated[FailedAnalysis, Tag("failed")],
    Discriminator(_outcome_tag),
]


class StudyCenter(_Result):
    """One center the study asked: ``included`` when its releases are in the result of at
    least one analysis, else ``excluded``; per analysis, where it was used or left out."""

    center: str
    status: Literal["included", "excluded"]
    used_in: list[int] = Field(
        description="the analyses (index in the spec) whose result holds its releases")
    left_out_of: list[int] = Field(
        description="the analyses that gave a result without it (allow_partial)")
    reason: ExcludedCenter | None = Field(
        description="why it was left out (the first analysis it was left out of); none when "
                    "every result holds it")


class Software(_Result):
    """The coordinator's software a result was computed with."""

    name: str
    version: str
    commit: str | None = Field(description="the git commit of the source (none: unknown)")
    commit_note: str | None = Field(default=None, description="why the commit is unknown")


class CenterGuarantee(_Result):
    """One center's lifetime privacy guarantee for the study's dataset, read after the study
    (its ``GET /v1/budget``'s ``guarantee``: every noisy release of the dataset to date, composed
    by the center's accountant; docs/privacy.md, "DP mode"). The numbers are none when it could
    not be read (``line`` says why)."""

    center: str
    release_mode: Literal["k_anonymous", "dp"] | None = Field(
        description="how the center releases the dataset (none: not known)")
    epsilon: float | None = None
    delta: float | None = None
    epsilon_pure: float | None = None
    releases: int | None = None
    method: str | None = Field(default=None, description="the accountant's composition method")
    line: str = Field(description="the guarantee in one sentence (coordinator.guarantees)")


class StudyResult(_Result):
    analyses: list[AnalysisOutcome] = Field(
        description="one entry per analysis of the spec, in its order: the analysis's result "
                    "(status succeeded) or why it gave none (status failed)")
    centers: list[str] = Field(description="the centers the study asked")
    excluded: list[ExcludedCenter] = Field(description="left out at the survey (sizes) step")
    center_status: list[StudyCenter] = Field(
        default_factory=list,
        description="each center asked: included or excluded, per analysis, and why")
    software: Software | None = Field(
        default=None, description="the coordinator's software that computed the result (none: "
                                  "a result stored before it was recorded)")
    guarantees: list[CenterGuarantee] = Field(
        default_factory=list,
        description="each included center's lifetime guarantee for the dataset after the study "
                    "(none: a result stored before they were collected)")
