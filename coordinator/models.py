"""The analyst API's models, in one module: the study spec an analyst sends and the names it is
written in, the result a study stores, and the bodies the routes answer with.

* the spec: :class:`StudySpec` and its analyses (``TableAnalysis``, ``MWUAnalysis``,
  ``DPBoxplotAnalysis``, ``QuantilesAnalysis``, ``DPQuantilesAnalysis``; how a study runs is
  :mod:`coordinator.study`) and its vocabulary (:data:`MWUTest`, :data:`Estimator`);
* the result: :class:`StudyResult`, one entry per analysis (built from the protocols' outputs
  by :mod:`coordinator.results`): its result, or :class:`FailedAnalysis` (why it gave none),
  and each center's part in the study (:class:`StudyCenter`);
* the answers: :class:`StudyView` (status, spec, result, error and provenance of a study),
  :class:`StudySummary`, :class:`StudyCreated`, :class:`CenterStatus`, :class:`Health`, and the
  statuses a study goes through (:data:`StudyStatus`, :mod:`coordinator.db`);
* accounts: :class:`Share`, :class:`AnalystView`, :class:`Quota`, :class:`AuditEntry` and the
  bodies that make them (docs/coordinator.md, "Analyst accounts").

A leaf: it imports no other coordinator module, only pydantic and the core's field types, so
the protocols and the store take their names from here and ``fedstats study run`` validates a
study file without loading the protocols.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from shared.fields import (
    DP_MAX_EVALUATIONS,
    MIN_EPSILON,
    Alternative,
    Bounds,
    Distinct,
    DPQuantileAlgorithm,
    Epsilon,
    Extreme,
    FiniteExtreme,
    Levels,
    VariableMeta,
    canonical_method,
    check_leaves,
    epsilon_field,
)

# -- the names a spec is written in --------------------------------------------------------------

MWUTest = Literal["sum", "weighted", "fisher", "table"]
MWU_TESTS: tuple[MWUTest, ...] = ("sum", "weighted", "fisher", "table")
# The DP twin's tests: every local one (the table test needs the K-anonymous table).
DPMWUTest = Literal["sum", "weighted", "fisher"]
DP_MWU_TESTS: tuple[DPMWUTest, ...] = ("sum", "weighted", "fisher")
Estimator = Literal["yj_table", "interpolation", "extrapolation", "yj_shaped", "yj_data"]
ESTIMATOR_NAMES: tuple[Estimator, ...] = (
    "yj_table", "interpolation", "extrapolation", "yj_shaped", "yj_data"
)
TABLE_ESTIMATORS: tuple[Estimator, ...] = (
    "yj_table", "interpolation", "extrapolation", "yj_shaped"
)
# partially_failed: some analyses gave their result, some failed; cancelled: stopped by its owner
# or an admin (docs/coordinator.md, "Statuses and partial results", "Cancel").
StudyStatus = Literal[
    "pending", "running", "succeeded", "partially_failed", "failed", "failed_resumable",
    "cancelled",
]
STUDY_STATUSES: tuple[str, ...] = get_args(StudyStatus)
AnalysisKind = Literal["table", "mwu", "dp_boxplot", "quantiles", "dp_quantiles", "describe",
                       "shift", "categorical", "kruskal", "dp_mwu"]
KruskalTest = Literal["table", "sum", "weighted"]
KRUSKAL_TESTS: tuple[KruskalTest, ...] = ("table", "sum", "weighted")
# shared.jonckheere.TREND_ALTERNATIVES (not imported: the models stay light).
TrendAlternative = Literal["increasing", "decreasing", "two-sided"]
DescribeMode = Literal["dp", "table"]

# -- the spec ------------------------------------------------------------------------------------


class _Spec(BaseModel):
    """A part of a study spec: frozen, and a field it does not declare is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# The most group levels a spec may name (``StudySpec.groups``).
MAX_GROUPS = 32


class _AnalysisSpec(_Spec):
    """One analysis of a spec (its module: ``coordinator/analyses/<kind>.py``)."""

    # The fewest group levels it compares (0: it runs on every record, or on each of the
    # spec's levels) and the most (none: any number); a spec naming fewer or more is refused.
    min_groups: ClassVar[int] = 0
    max_groups: ClassVar[int | None] = 2
    # How the refusal of a spec with fewer levels than ``min_groups`` names the analysis and
    # what it needs: "{article} {kind} analysis needs `groups` ({groups_needed})".
    article: ClassVar[str] = "a"
    groups_needed: ClassVar[str] = "the two levels X and Y"


class TableAnalysis(_AnalysisSpec):
    """The federated K-anonymous bin table of the variable (one group, or X and Y)."""

    kind: Literal["table"]
    lower: FiniteExtreme = "buffer"
    upper: FiniteExtreme = "buffer"


class MWUAnalysis(_AnalysisSpec):
    """Federated Mann-Whitney tests of X against Y (needs ``groups``)."""

    kind: Literal["mwu"]
    min_groups = 2
    article = "an"
    tests: Annotated[list[MWUTest], Distinct] = Field(
        default_factory=lambda: list(MWU_TESTS), min_length=1,
        max_length=4,
    )
    alternative: Alternative = "two-sided"
    epsilon: Epsilon | None = Field(
        default=None,
        description="ε each center spends to noise its local U (none: no noise, no spending)",
    )


class DPMWUAnalysis(_AnalysisSpec):
    """The differentially private twin of the Mann-Whitney tests (needs ``groups``): each
    center's ε-DP release under add/remove (noisy sizes, U over at most M records per level
    plus Laplace noise: docs/methods.md §3.10), the sum, weighted and Fisher tests over them.
    Centers in DP mode answer it."""

    kind: Literal["dp_mwu"]
    min_groups = 2
    tests: Annotated[list[DPMWUTest], Distinct] = Field(
        default_factory=lambda: list(DP_MWU_TESTS), min_length=1, max_length=3)
    alternative: Alternative = "two-sided"
    # Each part of the split is a release's ε on its own (shared.protocol.DPMWURequest).
    epsilon: Annotated[float, epsilon_field(100 * MIN_EPSILON)] = Field(
        description="ε each center spends (its sizes and its U together)")
    # shared.dp.mwu.SIZE_SHARE (not imported: the models stay light).
    size_share: float = Field(
        default=0.2, ge=0.01, le=0.99, allow_inf_nan=False,
        description="the share of ε spent on the two noisy sizes (the rest noises U)")


class DPBoxplotAnalysis(_AnalysisSpec):
    """ε-DP boxplots of one group level (or every record): each center's own and/or the pooled
    box (docs/methods.md §6). Each center spends ``epsilon`` per box asked (so 2ε for both)."""

    kind: Literal["dp_boxplot"]
    # The pooled box's smallest round spends ε/8, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(8 * MIN_EPSILON)]
    bounds: Bounds = Field(description="public bounds the data are clipped to")
    group: str | None = Field(default=None, min_length=1, max_length=128,
                              description="one declared level; none for every record")
    per_center: bool = True
    pooled: bool = True
    depth: int = Field(default=6, ge=1, le=16, description="pooled grid: branching**depth leaves")
    branching: int = Field(default=4, ge=2, le=16)
    # The default is shared.dp.pooled.EXTRA_LEVELS (not imported: the models stay light).
    levels: Levels = Field(
        default_factory=lambda: [0.05, 0.95],
        description="pooled box: further levels read off its tree besides the quartiles "
                    "(post-processing: no ε); strictly increasing, each in (0, 1)")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center boxes, the pooled box, or both")
        check_leaves(self.branching, self.depth)
        return self


class QuantilesAnalysis(_AnalysisSpec):
    """Quantiles from the study's federated table (no further release: costs the centers
    nothing), and with ``yj_data`` from the centers' YJ moment sums; with ``groups``, each
    group's own."""

    kind: Literal["quantiles"]
    levels: Levels = Field(description="strictly increasing, each in (0, 1)")
    estimators: Annotated[list[Estimator], Distinct] = Field(
        default_factory=lambda: list(TABLE_ESTIMATORS),
        min_length=1, max_length=len(ESTIMATOR_NAMES),
        description="yj_data asks every center for ε-DP moment sums at each λ Brent tries "
                    "(needs `epsilon` and `bounds`); the others read the federated table only",
    )
    # Each λ Brent tries spends ε / DP_MAX_EVALUATIONS, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(DP_MAX_EVALUATIONS * MIN_EPSILON)] | None = Field(
        default=None, description="yj_data: the ε each center spends per group on the fit",
    )
    bounds: Bounds | None = Field(
        default=None, description="yj_data: public bounds the values are clipped to"
    )

    @model_validator(mode="after")
    def _yj_data_needs_privacy(self) -> Self:
        if "yj_data" in self.estimators:
            if self.epsilon is None or self.bounds is None:
                raise ValueError("yj_data needs `epsilon` and `bounds`: centers release only "
                                 "ε-DP moment sums of values clipped to public bounds")
        return self


class DPQuantilesAnalysis(_AnalysisSpec):
    """Each center's ε-DP quantiles of one group level (or every record); ε per center."""

    kind: Literal["dp_quantiles"]
    epsilon: Epsilon
    bounds: Bounds = Field(description="public bounds the data are clipped to")
    levels: Levels
    algorithm: DPQuantileAlgorithm = "joint_exp"
    group: str | None = Field(default=None, min_length=1, max_length=128)


VariableName = Annotated[str, Field(min_length=1, max_length=128,
                                     pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class DescribeAnalysis(_AnalysisSpec):
    """Descriptive statistics ("Table 1") of several variables: N, mean (SD), median [IQR], a
    histogram, per center and pooled, per arm (the study's ``groups``) and overall
    (docs/coordinator.md, "Describe"). ``mode`` "table" (the default without ``epsilon``):
    read from each variable's federated K-anonymous table, no ε; "dp" (the default with
    ``epsilon``): each center's ε-DP description (``shared.describe.dp_describe``), ``epsilon``
    spent **per variable and per arm** at each center, the values clipped to ``bounds`` or,
    for a variable without, the centers' declared public bounds."""

    kind: Literal["describe"]
    variables: Annotated[list[VariableName], Distinct] | None = Field(
        default=None, min_length=1, max_length=32,
        description="the variables described (none: the study's variable)")
    mode: DescribeMode | None = Field(
        default=None, description="dp or table; none: dp when `epsilon` is given, else table")
    # The count, its smallest part, spends ε/20, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(20 * MIN_EPSILON)] | None = Field(
        default=None, description="dp: the ε each center spends per variable and per arm")
    bounds: dict[VariableName, Bounds] | None = Field(
        default=None, description="dp: public bounds per variable (default: the centers' "
                                  "declared bounds of the variable)")
    bins: int = Field(default=10, ge=1, le=200, description="dp: equal-width histogram bins")
    per_center: bool = True
    pooled: bool = True
    categorical: Annotated[list[VariableName], Distinct] | None = Field(
        default=None, min_length=1, max_length=32,
        description="categorical variables shown as n (%) rows per category and arm, with "
                    "their missing n (%): the centers' K-anonymous counts per category (table) "
                    "or their ε-DP counts (dp: `epsilon` per variable and arm, per center)")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center rows, the pooled rows, or both")
        both = sorted(set(self.categorical or ()) & set(self.variables or ()))
        if both:
            raise ValueError(f"{both} named both in `variables` (numeric) and in `categorical`")
        if self.mode == "dp" and self.epsilon is None:
            raise ValueError("a dp describe needs `epsilon` (per variable and arm, per center)")
        if self.mode == "table" and (self.epsilon is not None or self.bounds is not None):
            raise ValueError("a table describe spends no ε: drop `epsilon` and `bounds`")
        if self.bounds and self.variables is not None:
            unknown = sorted(set(self.bounds) - set(self.variables))
            if unknown:
                raise ValueError(f"`bounds` names variables not described: {unknown}")
        return self

    @property
    def method(self) -> DescribeMode:
        """The mode in force: as given, else dp with ``epsilon`` and table without."""
        return self.mode or ("dp" if self.epsilon is not None else "table")

    def described(self, study_variable: str) -> list[str]:
        """The variables described (the study's own when none is named)."""
        return list(self.variables) if self.variables is not None else [study_variable]


class ShiftAnalysis(_AnalysisSpec):
    """The Hodges-Lehmann shift of Y against X with its Moses interval, as far as the study's
    federated table allows (docs/methods.md §12.3): read from the table, no ε (needs
    ``groups``)."""

    kind: Literal["shift"]
    min_groups = 2
    level: float = Field(default=0.95, ge=0.5, le=0.999,
                         description="the Moses interval's confidence level")


class CategoricalAnalysis(_AnalysisSpec):
    """A categorical variable by arm: n (%) per category with Wilson intervals, Pearson's χ²
    (Fisher's exact test for a small 2×2 table) and the Cochran-Mantel-Haenszel test stratified
    by center (docs/methods.md §12). ``mode`` "table" (the default without ``epsilon``): each
    center's K-anonymous counts per category, no ε; "dp" (the default with ``epsilon``): each
    center's ε-DP counts, ``epsilon`` spent **per arm** at each center."""

    kind: Literal["categorical"]
    variable: VariableName = Field(description="a categorical variable the centers declare")
    mode: DescribeMode | None = Field(
        default=None, description="dp or table; none: dp when `epsilon` is given, else table")
    epsilon: Epsilon | None = Field(default=None,
                                    description="dp: the ε each center spends per arm")
    per_center: bool = Field(default=True, description="show each center's own counts too")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if self.mode == "dp" and self.epsilon is None:
            raise ValueError("a dp categorical analysis needs `epsilon` (per arm, per center)")
        if self.mode == "table" and self.epsilon is not None:
            raise ValueError("a table categorical analysis spends no ε: drop `epsilon`")
        return self

    @property
    def method(self) -> DescribeMode:
        """The mode in force: as given, else dp with ``epsilon`` and table without."""
        return self.mode or ("dp" if self.epsilon is not None else "table")


class KruskalAnalysis(_AnalysisSpec):
    """Kruskal-Wallis across the study's arms (``groups``: 2 to 32 levels) from the K-anonymous
    tables, no ε (docs/methods.md §12): the federated table's test, each center's test on its
    own table, and the stratified sum and van Elteren-type weighted tests over them. With
    ``ordered`` (the arms named in their hypothesised order), Jonckheere-Terpstra too."""

    kind: Literal["kruskal"]
    min_groups = 2
    max_groups = MAX_GROUPS
    groups_needed = f"the arms compared, 2 to {MAX_GROUPS} levels"
    ordered: bool = Field(default=False, description=(
        "the arms are ordered as `groups` names them: also test a trend (Jonckheere-Terpstra)"))
    alternative: TrendAlternative = Field(default="increasing", description=(
        "with `ordered`: increasing (later arms larger), decreasing or two-sided"))


Analysis = Annotated[
    TableAnalysis | MWUAnalysis | DPBoxplotAnalysis | QuantilesAnalysis | DPQuantilesAnalysis
    | DescribeAnalysis | ShiftAnalysis | CategoricalAnalysis | KruskalAnalysis | DPMWUAnalysis,
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
        # How few levels an analysis compares is its own too (``min_groups``). The first
        # refused in the order the analysis models are defined, whatever the spec's order.
        named = len(self.groups) if self.groups is not None else 0
        short = {type(a): a.kind for a in self.analyses if named < type(a).min_groups}
        for model in _AnalysisSpec.__subclasses__():  # in definition order
            if model in short:
                raise ValueError(f"{model.article} {short[model]} analysis needs `groups` "
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


# -- the result ----------------------------------------------------------------------------------


class _Result(BaseModel):
    """A part of a study's result: frozen; infinite table limits serialize as ``"±Infinity"``."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    @classmethod
    def of(cls, source: object, **values: Any) -> Self:
        """The part made of ``source``'s same-named attributes (a core result or a release),
        then ``values`` (what the source names otherwise or lacks)."""
        shared = {name: getattr(source, name) for name in cls.model_fields
                  if name not in values and hasattr(source, name)}
        return cls(**shared, **values)


class ExcludedCenter(_Result):
    """A center left out of an analysis (``allow_partial``), and why."""

    center: str
    kind: str
    detail: str
    center_error: str | None = None


class ReusedTable(_Result):
    """A kept table a study read instead of asking the centers (``coordinator.tables``;
    docs/coordinator.md, "Reused tables"), told by what it is — never by the study, nor the
    analyst, that obtained it: its dataset, variable, groups (in the kept order), K, closing,
    the centers that built it with the data version (epoch) each was at, and when the
    coordinator obtained it."""

    dataset: str
    variable: str
    groups: list[str] | None
    k: int
    lower: Extreme
    upper: Extreme
    centers: dict[str, int] = Field(description="each center that built it -> its epoch then")
    obtained_at: str = Field(description="when the coordinator obtained the table (UTC)")


REUSED_FROM_SEEN_BY = ("shown only to an admin and to the analyst who owns that study; null "
                       "for anyone else (`reused` says what the table is)")


class TableResult(_Result):
    kind: Literal["table"] = "table"
    status: Literal["succeeded"] = "succeeded"
    k: int
    limits: list[float]
    counts: list[list[float]]
    totals: list[float]
    order: list[str] = Field(description="the builder first, then each refining center")
    center_totals: dict[str, list[float]] = Field(description="per-group totals each released")
    excluded: list[ExcludedCenter]
    reused: ReusedTable | None = Field(
        default=None, description="the kept table this one was read from, when it was reused "
        "instead of asked of the centers again")
    reused_from: str | None = Field(
        default=None, description="the study that obtained this table, when it was reused: "
        + REUSED_FROM_SEEN_BY)


class TestPart(_Result):
    """One center's part of a test (for the table test: the federated table as a whole)."""

    center: str
    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    weight: float
    null: str | None = Field(default=None, description=(
        "the law this center's p-value comes from: exact (U's permutation law), exact+noise "
        "(that law + the DP noise), normal, normal+noise (N(0, V) + the DP noise, exact); "
        "absent in results stored before"))


class TestResult(_Result):
    method: str
    statistic: float
    pvalue: float
    df: int | None = Field(default=None, description="degrees of freedom of Fisher's χ² (T)")
    parts: list[TestPart]
    null: str | None = Field(default=None, description=(
        "the law the p-value comes from (shared.mwu.NULLS): exact, exact+noise, normal, "
        "normal+noise or chi2 (Fisher, over the parts' p-values); absent in results stored "
        "before"))


class Effect(_Result):
    """The probabilistic index θ = P(Y > X) + ½P(Y = X) with its 95 % interval
    (``shared.effects``): ``center`` one center's, or "stratified" over every center (the
    estimand of the sum test)."""

    center: str
    estimate: float
    low: float
    high: float
    level: float
    n_x: int
    n_y: int
    method: str


class Heterogeneity(_Result):
    """Between-center heterogeneity of the probabilistic index θ̂_c (``shared.heterogeneity``;
    docs/methods.md §12.4): Cochran's Q (``statistic``) with its χ²_{``df``} ``pvalue``, I²
    with its Q-profile interval (Viechtbauer 2007), DerSimonian-Laird τ² with its Q-profile
    interval, and the per-center θ̂_c and variances they weigh."""

    centers: list[str]
    estimates: list[float]
    variances: list[float]
    statistic: float
    df: int
    pvalue: float
    i_squared: float
    i_squared_interval: tuple[float, float] | None = Field(
        description="the Q-profile interval (Higgins & Thompson's test-based one in results "
        "stored before; none there for two centers with Q <= 2)")
    tau_squared: float
    level: float
    tau_squared_interval: tuple[float, float] | None = Field(
        default=None, description="τ²'s Q-profile interval at `level` (none in results "
        "stored before it was computed)")
    variance_at: float | None = Field(
        default=None, description="the pooled θ at which every center's variance was taken "
        "(none in results stored before it was)")


class MWUResult(_Result):
    kind: Literal["mwu"] = "mwu"
    status: Literal["succeeded"] = "succeeded"
    alternative: str
    tests: dict[str, TestResult]
    effects: list[Effect] = Field(
        default_factory=list,
        description="the probabilistic index of each center, then the stratified one")
    table: TableResult | None = Field(description="the federated table behind the table test")
    excluded: list[ExcludedCenter]
    heterogeneity: Heterogeneity | None = Field(
        default=None, description="Cochran's Q and I² of the centers' probabilistic indices "
        "(none: fewer than two centers released U, or see `heterogeneity_note`)")
    heterogeneity_note: str | None = Field(
        default=None, description="why there is no heterogeneity, when there is none")


class DPMWUCenter(_Result):
    """What one center released for the DP twin of the Mann-Whitney tests
    (``shared.dp.mwu``): the noisy sizes, the public cap M, the ε split, the Laplace noise's
    scale on U, and the kept sizes' estimates the tests used."""

    center: str
    n_x_hat: float = Field(description="n_X + Laplace(1/ε₁), unrounded")
    n_y_hat: float = Field(description="n_Y + Laplace(1/ε₁), unrounded")
    cap: int = Field(description="M: at most M records of each level enter U")
    epsilon: float
    size_epsilon: float
    u_epsilon: float
    noise_scale: float = Field(description="the Laplace scale 2M/ε₂ of the noise on U")
    n_x: int = Field(description="the estimate of X's kept size the tests used")
    n_y: int = Field(description="the estimate of Y's kept size the tests used")


class DPMWUResult(MWUResult):
    """The DP twin's tests, effects and heterogeneity, read as an ``mwu`` result's (no table);
    ``releases``: what each center released."""

    kind: Literal["dp_mwu"] = "dp_mwu"  # type: ignore[assignment]
    releases: list[DPMWUCenter] = Field(default_factory=list)


class Box(_Result):
    """A seven-number summary; outliers are DP counts, not points."""

    lower_outliers: int
    lower_whisker: float
    q1: float
    median: float
    q3: float
    upper_whisker: float
    upper_outliers: int
    n: int
    lower_branch: str = Field(description="where the whisker is: \"extreme\" (a center's box: "
                              "the walk's ψ), \"fence\" (Q ± 1.5·IQR) or \"record\" (the "
                              "pooled box: the tree's most extreme record inside the fence)")
    upper_branch: str = Field(description="as lower_branch")
    epsilon: float
    # DPBoxplot's version (shared.fields); the names stored studies carry are read as the
    # current ones.
    method: Annotated[str, BeforeValidator(canonical_method)]
    outlier_halfwidth: float | None = Field(
        default=None, description="each outlier count is within ± this of the true count with "
                                  "probability 95 % (Laplace noise)")
    quartile_rank_halfwidth: float | None = Field(
        default=None, description="Q1, median and Q3 are each within ± this many records of "
                                  "their level's rank with probability about 95 % (JointExp's "
                                  "Laplace bridge, where the data are evenly spread; pooled: "
                                  "about the tree leaf holding the value, conservative)")
    extreme_rank_halfwidth: float | None = Field(
        default=None, description="a whisker at the walk's ψ: the grid step next to ψ is within "
                                  "± this many records of the walk's count target with "
                                  "probability >= 95 %, for any data (the pooled box: none, its "
                                  "whiskers are Tukey's; stored before: at most the centers' "
                                  "Σ √n/20 + this many pooled records lie beyond it)")
    n_halfwidth: float | None = Field(
        default=None, description="a DP n (the pooled box's consistent root count) is within ± "
                                  "this of the true number with probability 95 %; None: n is "
                                  "the public size a center's λ_n uses, not an estimate")


class LevelValue(_Result):
    """One quantile: its level and value."""

    level: float
    value: float


class PooledBoxResult(Box):
    grid: tuple[float, float]
    centers: list[str] = Field(description="the centers whose records the box holds")
    levels: list[LevelValue] = Field(
        default_factory=list,
        description="the further levels asked, read off the pooled tree by the quartiles' "
                    "interpolation (post-processing: no ε)")


class DPBoxplotResult(_Result):
    kind: Literal["dp_boxplot"] = "dp_boxplot"
    status: Literal["succeeded"] = "succeeded"
    group: str | None
    per_center: dict[str, Box]
    pooled: PooledBoxResult | None
    spent: dict[str, float] = Field(description="ε each center reported spending")
    excluded: list[ExcludedCenter]


class EstimateResult(_Result):
    quantiles: list[float] | None
    error: str | None = None


class QuantilesResult(_Result):
    kind: Literal["quantiles"] = "quantiles"
    status: Literal["succeeded"] = "succeeded"
    levels: list[float]
    estimates: dict[str, dict[str, EstimateResult]] = Field(
        description="estimator -> group ('all' without groups) -> quantiles or the reason"
    )
    table_totals: list[float] = Field(description="records per group in the federated table")
    brackets: dict[str, list[tuple[float, float]]] = Field(
        default_factory=dict,
        description="group -> per level, the table's bins the sample quantile lies in: the "
                    "bin crossing the level (certain with whole counts), with its neighbours "
                    "where counts were shared out (conservative; docs/methods.md §8.9)")
    excluded: list[ExcludedCenter] = Field(
        default_factory=list, description="the centers the federated table was built without")


class DPQuantilesResult(_Result):
    kind: Literal["dp_quantiles"] = "dp_quantiles"
    status: Literal["succeeded"] = "succeeded"
    group: str | None
    algorithm: str
    levels: list[float]
    per_center: dict[str, list[float]]
    spent: dict[str, float] = Field(description="ε each center reported spending")
    rank_halfwidth: dict[str, float | None] = Field(
        default_factory=dict,
        description="each center's 95 % rank error of its values, in records (data locally "
                    "evenly spread; none for ApproxQuantile)")
    n: dict[str, int | None] = Field(
        default_factory=dict, description="each center's size, rounded down to its K")
    excluded: list[ExcludedCenter]


class DescribeRow(_Result):
    """One line of a describe result: one variable, one center (or "pooled"), one arm (a group
    level, or "all": every record of the arms). ``missing``: the records of the arm missing
    the variable, from the centers' exact missing counts (each 0 or >= K; docs/privacy.md,
    guarantee 15), or in a DP row the noisy count every center's description released with
    its count (``missing_interval`` its 95 % interval); none where a center releases neither
    (complete cases, a DP-mode center under a relation without it);
    ``minimum``/``maximum`` are no
    longer released (kept for results stored before: there, JointExp's 1st and 99th
    percentiles). Each ``*_interval`` is the number's 95 % interval (DP: of what the exact data
    would give; table: exact bounds), ``uncertainty`` says how; ``notes`` say why a number is
    not estimable."""

    variable: str
    center: str
    arm: str
    n: int
    missing: int | None = None
    missing_interval: tuple[float, float] | None = Field(
        default=None, description="DP: the missing count's 95 % interval (Laplace, the count's "
                                  "scale); none: exact, or not released")
    mean: float | None
    sd: float | None
    median: float | None
    q1: float | None
    q3: float | None
    minimum: float | None = None
    maximum: float | None = None
    edges: list[float]
    counts: list[float]
    method: str = Field(description="how the row was computed (mechanisms, or the table)")
    epsilon: float = Field(description="ε each center spent on the row's releases (0: table)")
    n_interval: tuple[float, float] | None = None
    mean_interval: tuple[float, float] | None = None
    sd_interval: tuple[float, float] | None = None
    q1_interval: tuple[float, float] | None = None
    median_interval: tuple[float, float] | None = None
    q3_interval: tuple[float, float] | None = None
    rank_halfwidth: float | None = Field(
        default=None, description="DP: the quartiles' 95 % rank error, in records")
    clip: tuple[float, float] | None = Field(
        default=None, description="DP, a center's row: the range its sums were clipped to")
    uncertainty: str | None = Field(default=None, description="how the intervals were made")
    notes: list[str] = Field(default_factory=list)


class NoisePart(_Result):
    """One part of a DP description's ε split: its ε, mechanism, sensitivity and Laplace scale
    (none for JointExp, an exponential mechanism)."""

    name: str
    epsilon: float
    mechanism: str
    sensitivity: float
    scale: float | None


class CategoryCell(_Result):
    """One released cell of a categorical variable in one arm: its ``label`` (the declared
    ``categories`` merged into it, "missing" for the missing cell), its count, its share of the
    arm's ``n`` in percent and that share's 95 % interval (Wilson; dp: the score interval
    with the noise variance added, docs/methods.md §12.7). ``count_interval``: dp, the 95 %
    interval of the true count."""

    label: str
    categories: list[str | None]
    count: float
    percent: float | None
    low: float | None
    high: float | None
    count_interval: tuple[float, float] | None = None


class CategoryArm(_Result):
    """A categorical variable in one arm (a group level, or "all") of one center or "pooled":
    its cells (the missing cell left out when it is released alone), ``n`` their total, and the
    records ``missing`` the variable (none when not released alone: merged with a category, or
    the center does not release it)."""

    variable: str
    center: str
    arm: str
    n: float
    missing: float | None = None
    missing_interval: tuple[float, float] | None = None
    cells: list[CategoryCell]


class CategoricalTest(_Result):
    """One test of association between arm and category: Pearson's χ², Fisher's exact 2×2,
    or Cochran-Mantel-Haenszel stratified by center (``odds_ratio`` and its 95 % interval for
    2×2 tables)."""

    name: str
    method: str
    statistic: float
    df: int | None = None
    pvalue: float
    odds_ratio: float | None = None
    low: float | None = None
    high: float | None = None


class CategoricalResult(_Result):
    kind: Literal["categorical"] = "categorical"
    status: Literal["succeeded"] = "succeeded"
    variable: str
    mode: DescribeMode
    k: int
    epsilon: float | None = Field(description="dp: ε per arm, per center")
    categories: list[str] = Field(description="the declared categories, in their order")
    arms: list[CategoryArm]
    tests: list[CategoricalTest] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list,
                             description="cells merged, tests not computed and why")
    spent: dict[str, float] = Field(default_factory=dict,
                                    description="ε each center reported spending")
    excluded: list[ExcludedCenter]


class ArmSize(_Result):
    """The one size N of a column of a DP Table 1 (one center's arm or overall, or pooled),
    shared by every row of the column (docs/methods.md, "One consistent DP Table 1"), with
    its 95 % interval (of the true size: the noise)."""

    center: str
    arm: str
    n: int
    n_interval: tuple[float, float] | None = None


class DescribeResult(_Result):
    kind: Literal["describe"] = "describe"
    status: Literal["succeeded"] = "succeeded"
    mode: DescribeMode
    k: int
    epsilon: float | None = Field(description="dp: ε per variable and arm, per center")
    rows: list[DescribeRow]
    units: dict[str, str] = Field(default_factory=dict,
                                  description="the declared unit of each variable that has one")
    noise: dict[str, list[NoisePart]] = Field(
        default_factory=dict, description="dp: per variable, the ε split of each center's "
                                          "description: every part's mechanism and noise")
    spent: dict[str, float] = Field(default_factory=dict,
                                    description="ε each center reported spending")
    excluded: list[ExcludedCenter]
    categorical: list[CategoryArm] = Field(
        default_factory=list, description="the categorical variables' n (%) per category, "
                                          "center and arm")
    sizes: list[ArmSize] = Field(
        default_factory=list, description="dp: the one N of each column (center or pooled, "
                                          "arm or all) every row of it adds up to")
    notes: list[str] = Field(default_factory=list,
                             description="what was not released, and why")


class ShiftResult(_Result):
    """The Hodges-Lehmann shift Δ of Y against X (Y ~ X + Δ) and its Moses interval, as far as
    the federated table's bins allow (``shared.hodges_lehmann.hodges_lehmann_table``;
    docs/methods.md §12.3): the estimate the records would give lies in [``estimate_low``,
    ``estimate_high``], the interval's lower end in [``low_low``, ``low_high``] and its upper
    end in [``high_low``, ``high_high``]; ``interval`` = [``low_low``, ``high_high``] contains
    the records' interval (its coverage at least theirs). Infinite where the rank falls on an
    open end bin. The printed figures are ``estimate`` (the bin midpoints' Hodges-Lehmann
    estimate) and ``binned_interval`` (the midpoints' Moses interval widened by the binning
    ``allowance`` λ: it contains the records' interval when every record lies in the central
    fraction λ of its bin, and excludes 0 exactly when the table's rank count reaches the Moses
    critical value); both absent from results made before they existed."""

    kind: Literal["shift"] = "shift"
    status: Literal["succeeded"] = "succeeded"
    estimate_low: float
    estimate_high: float
    low_low: float
    low_high: float
    high_low: float
    high_high: float
    interval: tuple[float, float]
    estimate: float | None = Field(
        default=None, description="the bin midpoints' Hodges-Lehmann estimate (the median of "
                                  "their differences); null: not estimable (an open end bin "
                                  "reaches the median)")
    binned_interval: tuple[float, float] | None = Field(
        default=None, description="the printed interval: the midpoints' Moses interval widened "
                                  "by the binning allowance (docs/methods.md §12.3)")
    allowance: float | None = Field(
        default=None, description="λ: the interval holds the records' own when each record "
                                  "lies in the central fraction λ of its bin")
    level: float
    achieved_level: float = Field(description="the records' interval's coverage for "
                                              "continuous data, 1 − 2·P(U < rank)")
    rank: int = Field(description="c: the interval is [D_(c), D_(nm+1−c)]")
    n_x: int
    n_y: int
    method: str = Field(description="how c was found: exact (U's law) or normal")
    whole_counts: bool = Field(description="false: some counts were shared out between "
                                           "limits (docs/methods.md §2.5), so the bounds hold "
                                           "for the table as shared out")
    excluded: list[ExcludedCenter] = Field(
        default_factory=list, description="the centers the federated table was built without")


class KruskalTestResult(_Result):
    """One Kruskal-Wallis test: H (tie-corrected) against χ² with ``df`` = arms − 1."""

    method: str = Field(description="table (the federated table), sum or weighted (across "
                                     "the centers' tables), or a center's id")
    statistic: float
    df: int
    pvalue: float


class KruskalArms(_Result):
    """Per arm (``groups``' order): the records counted and their mean rank, ties in one bin
    sharing the bin's mid-rank."""

    sizes: list[float]
    mean_ranks: list[float]


class KruskalCenter(KruskalArms):
    """One center's Kruskal-Wallis on its own K-anonymous table of the arms (its ``limits``,
    ``bins`` bins; docs/methods.md §12.8)."""

    center: str
    bins: int
    limits: list[float]
    statistic: float
    df: int
    pvalue: float


class TrendResult(_Result):
    """Jonckheere-Terpstra: J, its null mean and (tie-corrected) variance, z and p."""

    method: str = Field(description="table (the federated table) or sum (Σ of the centers' J "
                                    "on their own tables)")
    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    null: str = Field(default="normal", description="the law p comes from: exact (J's "
                      "permutation law given the ties, small whole tables; for sum the "
                      "convolution of the centers' laws) or normal (z)")


class KruskalResult(_Result):
    kind: Literal["kruskal"] = "kruskal"
    status: Literal["succeeded"] = "succeeded"
    groups: list[str] = Field(description="the arms, in the spec's order")
    arms: KruskalArms = Field(description="the federated table's per-arm n and mean ranks")
    tests: dict[str, KruskalTestResult] = Field(description="table, sum, weighted")
    centers: list[KruskalCenter] = Field(description="each center's test on its own table")
    ordered: bool
    alternative: TrendAlternative | None = Field(description="the trend's, when `ordered`")
    trend: dict[str, TrendResult] = Field(
        default_factory=dict, description="with `ordered`: Jonckheere-Terpstra, table and sum")
    table: TableResult = Field(description="the federated table behind the table tests")
    excluded: list[ExcludedCenter]


AnalysisResult = Annotated[
    TableResult | MWUResult | DPBoxplotResult | QuantilesResult | DPQuantilesResult
    | DescribeResult | ShiftResult | CategoricalResult | KruskalResult | DPMWUResult,
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


# -- the answers ---------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class CenterProblem(BaseModel):
    kind: str
    detail: str


DatasetState = Literal["ok", "paused", "unavailable"]


def dataset_state(*, paused: bool, available: bool) -> DatasetState:
    """A dataset's state from its ``/v1/info`` entry."""
    return "unavailable" if not available else "paused" if paused else "ok"


class CenterStatus(BaseModel):
    """One registered center as the coordinator sees it now."""

    id: str
    url: str | None = Field(description="base URL (none for an in-process center)")
    healthy: bool = Field(description="its /v1/health answers")
    serving: bool = Field(
        default=False, description="healthy and its budget and info answer too: it can take "
        "part in a study (a healthy center whose info fails is left out, as the catalog says)")
    problem: CenterProblem | None = Field(description="why health or budget failed")
    remaining_epsilon: dict[str, float] | None = Field(
        description="remaining ε per dataset (none when the budget could not be read)"
    )
    datasets: dict[str, DatasetState] | None = Field(
        default=None, description="each dataset's state as the center's /v1/info shows it: "
        "ok, paused (its data changed; releases wait for its operator; never in DP mode) or "
        "unavailable (its source cannot be read now); none when the info could not be read")


class StudyCreated(BaseModel):
    id: str
    status: StudyStatus
    status_url: str


class StudySummary(BaseModel):
    id: str
    status: StudyStatus
    title: str | None = None
    dataset: str
    variable: str
    created_by: str | None = Field(description="the id of the analyst who owns the study")
    created_at: str
    updated_at: str


class Provenance(BaseModel):
    """One answer a center gave the study. An admin gets the answer as received (after
    validation); an analyst what it needs to trust the result, without the raw numbers
    (``coordinator.provenance``)."""

    center: str
    call: str = Field(description="info or the release kind (table, refine, mwu, dp_...)")
    dataset: str | None
    request: dict[str, object] | None = Field(
        description="the body sent (none for info); for an analyst its public parameters")
    epsilon: float | None = Field(
        default=None, description="ε the center spent on it (0 for a K-anonymous release)")
    mechanism: str | None = Field(
        default=None, description="how the answer was noised (laplace, gaussian, the DP "
                                  "algorithm), where it was")
    noise_scale: float | None = Field(default=None, description="the noise's scale, if stated")
    response: dict[str, object] | None = Field(
        default=None, description="the answer as received: admins only")
    received_at: str


class CenterRecord(BaseModel):
    """One center's part in a study, as it published it: its K, neighbouring relation and the
    data version (epoch) of the dataset its releases came from, the ε it spent and the
    mechanisms its answers name."""

    center: str
    included: bool = Field(description="the result holds its releases (false: left out)")
    k: int | None = Field(description="the center's own K (none: its info was not recorded)")
    neighbouring: str | None
    epoch: int | None = Field(description="the dataset's data version its releases come from")
    data_fingerprint: str | None = Field(
        default=None, description="none: the centers publish no fingerprint of their data, "
                                  "only the epoch (a new epoch whenever the data change)")
    epsilon: float = Field(description="ε the center spent on this study's releases")
    mechanisms: list[str] = Field(description="how its answers were noised, as they state it")


class Reproducibility(BaseModel):
    """What is needed to redo a study or cite it (docs/coordinator.md, "Exports and the
    reproducibility record"): the software, the spec as submitted and its SHA-256, the centers'
    data versions and ε, K, the algorithms, and which random seeds are public (none)."""

    software: Software | None
    software_note: str | None = None
    spec_sha256: str = Field(description="SHA-256 of the spec as stored (canonical JSON)")
    k: int
    centers: list[CenterRecord]
    algorithms: list[str] = Field(description="per analysis of the spec, what computed it")
    seeds: str = Field(description="which random seeds are public")


class StudyView(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings")

    id: str
    status: StudyStatus
    spec: StudySpec
    result: StudyResult | None
    error: StudyError | None
    provenance: list[Provenance] | None = Field(
        description="every answer the centers gave, in the order received; none when the "
                    "request asked ?provenance=false (cheap polling)"
    )
    releases_received: int = Field(description="how many answers the centers gave so far")
    created_by: str | None = Field(description="the id of the analyst who owns the study")
    created_at: str
    updated_at: str
    reproducibility: Reproducibility | None = Field(
        default=None, description="the study's reproducibility record (with the provenance "
                                  "only; docs/coordinator.md, \"Exports\")")


# -- accounts ------------------------------------------------------------------------------------

AnalystRole = Literal["analyst", "admin"]
AnalystId = Annotated[str, Field(min_length=1, max_length=64,
                                 pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]


class ShareRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    analyst_id: AnalystId


class Share(BaseModel):
    """An analyst who may read (and resume) a study besides its owner."""

    study_id: str
    analyst_id: str
    shared_by: str | None
    created_at: str


class NewAnalyst(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    role: AnalystRole = "analyst"
    expires_in_days: float | None = Field(
        default=None, gt=0, le=36_600, allow_inf_nan=False,
        description="the token stops working this many days from now (default: never)")


class RotateAnalyst(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expires_in_days: float | None = Field(
        default=None, gt=0, le=36_600, allow_inf_nan=False,
        description="the new token stops working this many days from now (default: never)")


class AnalystView(BaseModel):
    id: str
    name: str
    role: str
    created_at: str
    revoked_at: str | None
    expires_at: str | None = Field(
        default=None, description="when the token stops working (UTC; null: never)")


class AnalystCreated(AnalystView):
    token: str = Field(description="the account's bearer token: shown this once, kept hashed")


class QuotaRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epsilon: float | None = Field(ge=0, le=1e6, allow_inf_nan=False,
                                  description="the most ε; null removes the quota")


class Quota(BaseModel):
    analyst_id: str
    center: str
    dataset: str
    epsilon: float | None = Field(description="the quota; none: unlimited")
    spent: float = Field(description="ε the analyst's studies spent there")


class AuditEntry(BaseModel):
    id: int
    at: str
    analyst_id: str | None = Field(description="none: the operator at the command line, or a "
                                               "refused token")
    token_id: str | None = Field(description="fingerprint of the token used")
    action: str
    target: str | None
    request_id: str | None
    detail: str | None


# -- discovery and the dry run (docs/coordinator.md, "Catalog" and "Dry run") -------------------


class CatalogEntry(BaseModel):
    """One center's declaration of a dataset: its names, its sizes rounded down to the center's
    K (never finer) and the ε its budget has left."""

    center: str
    k: int = Field(description="the center's K: it releases no count in 1..K-1")
    variables: list[str]
    group_column: str | None
    levels: list[str]
    n_records: int | None = Field(
        description="records, rounded down to a multiple of the center's K (release_mode "
                    "'dp': the declared size, or none)")
    n_by_group: dict[str, int] = Field(
        description="records per level, each rounded down to K (release_mode 'dp': the "
                    "declared sizes as declared, none for a level without one)")
    release_mode: Literal["k_anonymous", "dp"] = Field(
        default="k_anonymous", description="'dp': every release of the dataset at this center "
        "is differentially private (exact analyses are refused)")
    epoch: int
    paused: bool = Field(description="the data changed; releases wait for the operator (never "
                         "in DP mode: its releases come from the data as they are)")
    available: bool = Field(default=True, description="false: the center cannot read this "
                            "dataset's source now (its other datasets are not affected)")
    remaining_epsilon: float | None = Field(
        description="ε left in the center's budget for the dataset (none: budget unreadable)")
    metadata: dict[str, VariableMeta] = Field(
        default_factory=dict, description="public metadata the center declares per variable: "
        "bounds, unit, resolution")
    categorical: dict[str, list[str]] = Field(
        default_factory=dict, description="categorical variables and their public categories, "
        "as the center declares them (not among `variables`, which are numeric)")


class CatalogDataset(BaseModel):
    """A dataset as the centers that declare it publish it."""

    name: str
    variables: list[str] = Field(description="declared by at least one center (each center's "
                                             "own list is in `centers`)")
    levels: list[str] = Field(description="group levels declared by at least one center")
    categorical: list[str] = Field(default_factory=list,
                                   description="categorical variables declared by at least one "
                                               "center")
    centers: list[CatalogEntry]


class CatalogCenter(BaseModel):
    """A registered center and, when it could not be asked, why."""

    id: str
    url: str | None = Field(description="base URL (none for an in-process center)")
    k: int | None = Field(description="the center's K (none when its info could not be read)")
    problem: CenterProblem | None = Field(
        description="why its info (then none of its datasets is listed) or budget failed")


class Catalog(BaseModel):
    """What every registered center holds (``GET /v1/catalog``)."""

    datasets: list[CatalogDataset]
    centers: list[CatalogCenter]


PlanRefusalReason = Literal[
    "unknown_name", "center_k", "dataset_paused", "dataset_unavailable", "budget_exceeded",
    "quota_exceeded",
    "center_unavailable", "too_few_centers", "release_limit_reached", "estimator_not_offered",
    "analysis_note",
    "dp_mode_exact",
]


class PlanRefusal(BaseModel):
    """Something that would be refused if the spec were submitted."""

    reason: PlanRefusalReason
    center: str | None = Field(description="the center concerned (none: the whole study)")
    detail: str
    blocking: bool = Field(description="true: the study would be refused or fail; false: "
                                       "the center would be left out (allow_partial)")


class PlannedSpend(BaseModel):
    """The ε one analysis would make one center spend."""

    analysis: int = Field(description="index in the spec")
    kind: AnalysisKind
    epsilon: float
    exact: bool = Field(description="false: at most this (yj_data: Brent may stop early)")


class CenterPlan(BaseModel):
    """One selected center in a dry run."""

    center: str
    k: int | None
    spends: list[PlannedSpend]
    epsilon: float = Field(description="ε the study would spend there, in all")
    exact: bool = Field(description="false: `epsilon` is an upper bound")
    remaining_epsilon: float | None = Field(
        description="the center's budget left for the dataset now (none: unreadable)")
    remaining_after: float | None
    quota: float | None = Field(description="the analyst's ε quota there (none: no limit)")
    quota_spent: float
    quota_left_after: float | None


class KeptTableView(BaseModel):
    """A federated table the coordinator kept (``coordinator.tables``): what it was asked for,
    the centers that built it with their data versions (epochs), when it was obtained and, for
    an admin or the analyst who owns it, the study that obtained it. ``current``: every one of
    its centers is still at that epoch (a study asking the same table of the same centers would
    reuse it)."""

    groups: list[str] | None
    k: int
    lower: Extreme
    upper: Extreme
    centers: dict[str, int]
    study_id: str | None = Field(description="the study that obtained it: "
                                 + REUSED_FROM_SEEN_BY)
    created_at: str
    current: bool


class PlannedTable(BaseModel):
    """How the study would get its federated table: ``reused`` a kept table (nothing asked
    of the centers), or new from ``centers`` in the order they would build it (each releases
    one table or refinement, ``releases`` says which are new). ``detail`` says
    which and what follows; ``kept`` lists the tables of the variable kept so far, the ones a
    study could reuse (same groups, K, closing, centers and current data versions)."""

    reused: ReusedTable | None = Field(
        default=None, description="the kept table the study would read (none: a new table)")
    reused_from: str | None = Field(
        description="the study that obtained the kept table the study would read: "
        + REUSED_FROM_SEEN_BY)
    centers: list[str]
    releases: dict[str, Literal["stored", "new", "refused"]] = Field(
        default_factory=dict, description="per center of a new table: `stored` (it asked the "
        "same before: the center answers from its stored answer, nothing new is released), "
        "`new` (a new release, coarsened against its earlier ones) or `refused`")
    detail: str
    kept: list[KeptTableView]


class PlannedPower(BaseModel):
    """The power a Mann-Whitney analysis would have (``shared.mwu_power``; docs/methods.md
    §3.9): the sum test at level ``alpha``, ε ``epsilon`` (none: no noise), the centers' sizes
    as their info shows them (rounded down to their K), at a common probabilistic index θ.
    ``power[i]`` is at ``thetas[i]``; ``theta_at_target`` the θ with ``target`` power (none:
    no θ below 0.999 reaches it). For ``alternative = "greater"`` the θ's are P(X > Y)."""

    analysis: int
    test: Literal["sum"] = "sum"
    epsilon: float | None
    alpha: float
    alternative: str
    sizes: dict[str, tuple[int, int]]
    thetas: list[float]
    power: list[float]
    target: float
    theta_at_target: float | None
    method: str
    detail: str


class PlannedError(BaseModel):
    """One part's 95 % error at one center (or ``pooled``), before anything is spent
    (``shared.dp_utility``): in records (a rank error, a count) or in the variable's values,
    ``share`` of the size or of the bounds' width; ``uninformative`` past the threshold."""

    center: str
    arm: str | None = None
    variable: str | None = None
    part: str
    n: int
    error: float
    unit: Literal["records", "value"]
    share: float
    uninformative: bool


class PlannedUtility(BaseModel):
    """What a DP analysis' ε buys (docs/methods.md §9.6): each part's 95 % error at the sizes
    the taking-part centers show and the asked ε; ``uninformative`` when any part's error is
    above ``threshold`` of the size (records) or of the bounds (values)."""

    analysis: int
    kind: str
    epsilon: float
    threshold: float
    errors: list[PlannedError]
    uninformative: bool
    detail: str


class StudyPlan(BaseModel):
    """What a study would do, without doing it (``POST /v1/studies?dry_run=true``): nothing is
    created, released or spent."""

    dataset: str
    variable: str
    centers: list[CenterPlan]
    refusals: list[PlanRefusal]
    would_run: bool = Field(description="no blocking refusal")
    table: PlannedTable | None = Field(
        default=None, description="the federated table the study needs (none: it needs none)")
    power: list[PlannedPower] = Field(
        default_factory=list, description="per Mann-Whitney analysis, the sum test's power "
        "at the study's ε and the centers' sizes (none when no center's sizes are known)")
    utility: list[PlannedUtility] = Field(
        default_factory=list, description="per DP analysis, the 95 % error its ε buys at the "
        "centers' sizes, and whether that leaves it uninformative (docs/methods.md §9.6)")
