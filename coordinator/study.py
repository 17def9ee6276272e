"""A study: the analyst's typed spec, how it runs over the centers, and its result as stored.

A spec names one dataset and variable, optionally two group levels (X, Y), the anonymity
threshold K and a list of analyses. Each analysis is a model with a ``kind``; today::

    {"kind": "table", "lower": "buffer", "upper": "buffer"}
    {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"], "alternative": "two-sided",
     "epsilon": 0.5}      # optional: noisy local U, ε spent by each center

DP analyses (``quantiles``, ``dp_boxplot``) join the :data:`Analysis` union as they land, each
with its own ``epsilon`` (> 0, finite), as the noisy MWU has: the ε is per DP analysis, not per
study.

:func:`run_study` surveys the centers once (sizes, declared names), then runs each analysis in
order; its result is a list with one entry per analysis. A study builds one federated table: the
table analyses and the MWU table test share it (the centers' auditors would refuse a second table
of the same variable with other limits, and the recorded releases make the reuse free).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols import (
    FederatedMWU,
    FederatedTable,
    federated_bin_table,
    federated_mwu,
    survey_centers,
)
from coordinator.protocols.mwu import MWU_TESTS, MWUTest
from shared.mwu import Alternative, FederatedMWUResult

Extreme = Literal["infinite", "buffer"] | float


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _finite_extreme(value: Extreme) -> Extreme:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a natural limit must be a finite number")
    return value


class TableAnalysis(_Spec):
    """The federated K-anonymous bin table of the variable (one group, or X and Y)."""

    kind: Literal["table"]
    lower: Extreme = "buffer"
    upper: Extreme = "buffer"

    _finite = field_validator("lower", "upper")(_finite_extreme)


class MWUAnalysis(_Spec):
    """Federated Mann-Whitney tests of X against Y (needs ``groups``)."""

    kind: Literal["mwu"]
    tests: list[MWUTest] = Field(
        default_factory=lambda: list(MWU_TESTS), min_length=1,
        max_length=4,
    )
    alternative: Alternative = "two-sided"
    epsilon: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="ε each center spends to noise its local U (none: no noise, no spending)",
    )

    @field_validator("tests")
    @classmethod
    def _distinct(cls, tests: list[MWUTest]) -> list[MWUTest]:
        if len(set(tests)) != len(tests):
            raise ValueError("tests must be distinct")
        return tests


Analysis = Annotated[TableAnalysis | MWUAnalysis, Field(discriminator="kind")]


class StudySpec(_Spec):
    """What an analyst asks for. Nothing here is secret; it is stored and echoed as given."""

    dataset: str = Field(min_length=1, max_length=128, pattern=r"^[a-z][a-z0-9_-]*$")
    variable: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    groups: tuple[str, str] | None = Field(
        default=None, description="the two group levels (X, Y); none for a one-group table"
    )
    k: int = Field(default=10, ge=2, le=100_000, description="no released count in 1..k-1")
    analyses: list[Analysis] = Field(min_length=1, max_length=16)
    centers: list[str] | None = Field(
        default=None, min_length=1, description="registry ids to ask; all when absent"
    )
    allow_partial: bool = Field(
        default=False,
        description="leave out failing centers (recorded) while at least min_centers remain",
    )

    @field_validator("groups")
    @classmethod
    def _levels(cls, groups: tuple[str, str] | None) -> tuple[str, str] | None:
        if groups is not None:
            if groups[0] == groups[1]:
                raise ValueError("the two group levels must differ")
            if not all(0 < len(g) <= 128 for g in groups):
                raise ValueError("group levels must be 1 to 128 characters")
        return groups

    @field_validator("centers")
    @classmethod
    def _distinct_centers(cls, centers: list[str] | None) -> list[str] | None:
        if centers is not None and len(set(centers)) != len(centers):
            raise ValueError("centers must be distinct")
        return centers

    @model_validator(mode="after")
    def _mwu_needs_groups(self) -> Self:
        if self.groups is None and any(a.kind == "mwu" for a in self.analyses):
            raise ValueError("an mwu analysis needs `groups` (the two levels X and Y)")
        return self

    @model_validator(mode="after")
    def _one_table(self) -> Self:
        # A center's auditor refuses a second table of the same variable whose limits could be
        # differenced against the first, so a study asks for one table and reuses it.
        closings = {(a.lower, a.upper) for a in self.analyses if isinstance(a, TableAnalysis)}
        if len(closings) > 1:
            raise ValueError(
                "every table analysis of a study must close the table the same way "
                "(`lower`, `upper`): centers refuse a second, differently limited table"
            )
        return self

    @property
    def table_closing(self) -> tuple[Extreme, Extreme]:
        """(lower, upper) of the study's one table; the MWU table test uses it too."""
        for analysis in self.analyses:
            if isinstance(analysis, TableAnalysis):
                return analysis.lower, analysis.upper
        return "buffer", "buffer"


# -- results, as stored and returned ---------------------------------------------------------


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")


class ExcludedCenter(_Result):
    """A center left out of an analysis (``allow_partial``), and why."""

    center: str
    kind: str
    detail: str
    center_error: str | None = None

    @classmethod
    def of(cls, failure: CenterFailure) -> ExcludedCenter:
        return cls(center=failure.center, kind=failure.kind, detail=failure.reason,
                   center_error=failure.center_error)


class TableResult(_Result):
    kind: Literal["table"] = "table"
    k: int
    limits: list[float]
    counts: list[list[float]]
    totals: list[float]
    order: list[str] = Field(description="the builder first, then each refining center")
    center_totals: dict[str, list[float]] = Field(description="per-group totals each released")
    excluded: list[ExcludedCenter]

    @classmethod
    def of(cls, fed: FederatedTable) -> TableResult:
        t = fed.table
        return cls(
            k=t.k, limits=t.limits.tolist(), counts=t.counts.tolist(), totals=t.totals.tolist(),
            order=list(fed.order),
            center_totals={c: list(v) for c, v in fed.center_totals.items()},
            excluded=[ExcludedCenter.of(f) for f in fed.excluded],
        )


class TestPart(_Result):
    """One center's part of a test (for the table test: the federated table as a whole)."""

    center: str
    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    weight: float


class TestResult(_Result):
    method: str
    statistic: float
    pvalue: float
    parts: list[TestPart]

    @classmethod
    def of(cls, result: FederatedMWUResult, centers: Sequence[str]) -> TestResult:
        return cls(
            method=result.method, statistic=result.statistic, pvalue=result.pvalue,
            parts=[
                TestPart(center=c, statistic=p.statistic, variance=p.variance,
                         zstatistic=p.zstatistic, pvalue=p.pvalue, weight=p.weight)
                for c, p in zip(centers, result.parts, strict=True)
            ],
        )


class MWUResult(_Result):
    kind: Literal["mwu"] = "mwu"
    alternative: str
    tests: dict[str, TestResult]
    table: TableResult | None = Field(description="the federated table behind the table test")
    excluded: list[ExcludedCenter]

    @classmethod
    def of(cls, fed: FederatedMWU, alternative: str) -> MWUResult:
        tests = {
            name: TestResult.of(
                result, ["federated-table"] if name == "table" else list(fed.centers)
            )
            for name, result in fed.tests.items()
        }
        return cls(
            alternative=alternative, tests=tests,
            table=TableResult.of(fed.table) if fed.table is not None else None,
            excluded=[ExcludedCenter.of(f) for f in fed.excluded],
        )


AnalysisResult = Annotated[TableResult | MWUResult, Field(discriminator="kind")]


class StudyResult(_Result):
    analyses: list[AnalysisResult]
    centers: list[str] = Field(description="the centers the study asked")
    excluded: list[ExcludedCenter] = Field(description="left out at the survey (sizes) step")


async def run_study(
    spec: StudySpec, centers: Sequence[CenterPort], *, min_centers: int
) -> StudyResult:
    """Run every analysis of ``spec`` over ``centers`` (already the selected ones)."""
    survey = await survey_centers(
        centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups, k=spec.k,
        min_centers=min_centers, allow_partial=spec.allow_partial
    )
    lower, upper = spec.table_closing
    results: list[TableResult | MWUResult] = []
    for analysis in spec.analyses:
        if isinstance(analysis, TableAnalysis):
            table = await federated_bin_table(
                centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                k=spec.k, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            )
            results.append(TableResult.of(table))
        else:
            assert spec.groups is not None  # StudySpec refuses mwu without groups
            mwu = await federated_mwu(
                centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                k=spec.k, tests=analysis.tests, alternative=analysis.alternative,
                epsilon=analysis.epsilon, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            )
            results.append(MWUResult.of(mwu, analysis.alternative))
    return StudyResult(
        analyses=results,
        centers=[c.center_id for c in centers],
        excluded=[ExcludedCenter.of(f) for f in survey.excluded],
    )
