"""A study: the analyst's typed spec, how it runs over the centers, and its result as stored.

A spec names one dataset and variable, optionally two group levels (X, Y), the anonymity
threshold K and a list of analyses. Each analysis is a model with a ``kind``; today::

    {"kind": "table", "lower": "buffer", "upper": "buffer"}
    {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"], "alternative": "two-sided",
     "epsilon": 0.5}      # optional: noisy local U, ε spent by each center
    {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 300], "group": "treated",
     "per_center": true, "pooled": true}

    {"kind": "quantiles", "levels": [0.25, 0.5, 0.75],
     "estimators": ["yj_table", "interpolation", "extrapolation", "yj_shaped"]}

The ε is per DP analysis, not per study (each center spends it once per box asked). Quantiles are
read from the study's federated table and spend nothing.

:func:`run_study` surveys the centers once (sizes, declared names), then runs each analysis in
order; its result is a list with one entry per analysis. A study builds one federated table: the
table analyses and the MWU table test share it (the centers' auditors would refuse a second table
of the same variable with other limits, and the recorded releases make the reuse free).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols import (
    FederatedBoxplot,
    FederatedMWU,
    FederatedTable,
    federated_bin_table,
    federated_dp_boxplot,
    federated_mwu,
    survey_centers,
)
from coordinator.protocols.mwu import MWU_TESTS, MWUTest
from coordinator.protocols.quantiles import (
    ESTIMATOR_NAMES,
    Estimate,
    Estimator,
    table_quantiles,
)
from shared.binning import BinTable
from shared.dp.boxplot import BoxplotResult
from shared.mwu import Alternative, FederatedMWUResult
from shared.protocol import DPBoxplotRelease

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


class DPBoxplotAnalysis(_Spec):
    """ε-DP boxplots of one group level (or every record): each center's own and/or the pooled
    box (NOTES §3). Each center spends ``epsilon`` per box asked (so 2ε for both)."""

    kind: Literal["dp_boxplot"]
    epsilon: float = Field(gt=0, le=100, allow_inf_nan=False)
    bounds: tuple[float, float] = Field(description="public bounds the data are clipped to")
    group: str | None = Field(default=None, min_length=1, max_length=128,
                              description="one declared level; none for every record")
    per_center: bool = True
    pooled: bool = True
    depth: int = Field(default=6, ge=1, le=16, description="pooled grid: branching**depth leaves")
    branching: int = Field(default=4, ge=2, le=16)

    @model_validator(mode="after")
    def _valid(self) -> Self:
        a, b = self.bounds
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError("bounds must be finite with lower < upper")
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center boxes, the pooled box, or both")
        if self.branching**self.depth > 2**16:
            raise ValueError("branching**depth must be at most 65536 leaves")
        return self


class QuantilesAnalysis(_Spec):
    """Quantiles from the study's federated table (no further release: costs the centers
    nothing); with ``groups``, each group's own."""

    kind: Literal["quantiles"]
    levels: list[float] = Field(min_length=1, max_length=64,
                                description="strictly increasing, each in (0, 1)")
    estimators: list[Estimator] = Field(
        default_factory=lambda: list(ESTIMATOR_NAMES), min_length=1, max_length=4
    )

    @field_validator("levels")
    @classmethod
    def _levels(cls, levels: list[float]) -> list[float]:
        if not all(0 < q < 1 for q in levels) or any(b <= a for a, b in pairwise(levels)):
            raise ValueError("levels must be strictly increasing and inside (0, 1)")
        return levels

    @field_validator("estimators")
    @classmethod
    def _distinct(cls, estimators: list[Estimator]) -> list[Estimator]:
        if len(set(estimators)) != len(estimators):
            raise ValueError("estimators must be distinct")
        return estimators


Analysis = Annotated[
    TableAnalysis | MWUAnalysis | DPBoxplotAnalysis | QuantilesAnalysis,
    Field(discriminator="kind"),
]


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
    lower_branch: str
    upper_branch: str
    epsilon: float
    method: str

    @classmethod
    def of(cls, box: DPBoxplotRelease | BoxplotResult) -> Box:
        eps = box.epsilon if isinstance(box, DPBoxplotRelease) else box.spent.epsilon
        return cls(
            lower_outliers=box.lower_outliers, lower_whisker=box.lower_whisker, q1=box.q1,
            median=box.median, q3=box.q3, upper_whisker=box.upper_whisker,
            upper_outliers=box.upper_outliers, n=box.n, lower_branch=box.lower_branch,
            upper_branch=box.upper_branch, epsilon=eps, method=box.method,
        )


class PooledBoxResult(Box):
    grid: tuple[float, float]
    centers: list[str] = Field(description="the centers whose records the box holds")


class DPBoxplotResult(_Result):
    kind: Literal["dp_boxplot"] = "dp_boxplot"
    group: str | None
    per_center: dict[str, Box]
    pooled: PooledBoxResult | None
    spent: dict[str, float] = Field(description="ε each center reported spending")
    excluded: list[ExcludedCenter]

    @classmethod
    def of(cls, fed: FederatedBoxplot, group: str | None) -> DPBoxplotResult:
        pooled = None
        if fed.pooled is not None:
            pooled = PooledBoxResult(**Box.of(fed.pooled.box).model_dump(),
                                     grid=fed.pooled.grid, centers=list(fed.pooled.centers))
        return cls(
            group=group,
            per_center={c: Box.of(r) for c, r in fed.per_center.items()},
            pooled=pooled,
            spent=dict(fed.spent),
            excluded=[ExcludedCenter.of(f) for f in fed.excluded],
        )


class EstimateResult(_Result):
    quantiles: list[float] | None
    error: str | None = None


class QuantilesResult(_Result):
    kind: Literal["quantiles"] = "quantiles"
    levels: list[float]
    estimates: dict[str, dict[str, EstimateResult]] = Field(
        description="estimator -> group ('all' without groups) -> quantiles or the reason"
    )
    table_totals: list[float] = Field(description="records per group in the federated table")

    @classmethod
    def of(
        cls, estimates: dict[str, dict[str, Estimate]], levels: list[float], table: BinTable
    ) -> QuantilesResult:
        return cls(
            levels=levels,
            estimates={
                name: {g: EstimateResult(
                    quantiles=list(e.quantiles) if e.quantiles is not None else None,
                    error=e.error,
                ) for g, e in by_group.items()}
                for name, by_group in estimates.items()
            },
            table_totals=table.totals.tolist(),
        )


AnalysisResult = Annotated[
    TableResult | MWUResult | DPBoxplotResult | QuantilesResult, Field(discriminator="kind")
]


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
    results: list[TableResult | MWUResult | DPBoxplotResult | QuantilesResult] = []
    for analysis in spec.analyses:
        if isinstance(analysis, TableAnalysis):
            table = await federated_bin_table(
                centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                k=spec.k, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            )
            results.append(TableResult.of(table))
        elif isinstance(analysis, QuantilesAnalysis):
            table = await federated_bin_table(
                centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                k=spec.k, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            )
            names = list(spec.groups) if spec.groups is not None else ["all"]
            estimates = table_quantiles(table.table, analysis.levels,
                                        estimators=analysis.estimators, groups=names)
            results.append(QuantilesResult.of(estimates, analysis.levels, table.table))
        elif isinstance(analysis, DPBoxplotAnalysis):
            boxes = await federated_dp_boxplot(
                centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
                epsilon=analysis.epsilon, bounds=analysis.bounds,
                per_center=analysis.per_center, pooled=analysis.pooled, depth=analysis.depth,
                branching=analysis.branching, min_centers=min_centers,
                allow_partial=spec.allow_partial, survey=survey,
            )
            results.append(DPBoxplotResult.of(boxes, analysis.group))
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
