"""A study's result, as stored and returned: one entry per analysis, built from the protocols'
results (frozen pydantic models; infinite table limits serialize as ``"±Infinity"``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.core.errors import CenterFailure
from coordinator.protocols import (
    CenterDPQuantiles,
    FederatedBoxplot,
    FederatedMWU,
    FederatedTable,
)
from coordinator.protocols.quantiles import Estimate
from shared.binning import BinTable
from shared.dp.boxplot import BoxplotResult
from shared.effects import ProbabilisticIndex, probabilistic_index
from shared.mwu import FederatedMWUResult
from shared.protocol import DPBoxplotRelease


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
    df: int | None = Field(default=None, description="degrees of freedom of Fisher's χ² (T)")
    parts: list[TestPart]

    @classmethod
    def of(cls, result: FederatedMWUResult, centers: Sequence[str]) -> TestResult:
        return cls(
            method=result.method, statistic=result.statistic, pvalue=result.pvalue,
            df=result.df,
            parts=[
                TestPart(center=c, statistic=p.statistic, variance=p.variance,
                         zstatistic=p.zstatistic, pvalue=p.pvalue, weight=p.weight)
                for c, p in zip(centers, result.parts, strict=True)
            ],
        )


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

    @classmethod
    def of(cls, center: str, index: ProbabilisticIndex) -> Effect:
        return cls(center=center, estimate=index.estimate, low=index.low, high=index.high,
                   level=index.level, n_x=index.n_x, n_y=index.n_y, method=index.method)


class MWUResult(_Result):
    kind: Literal["mwu"] = "mwu"
    alternative: str
    tests: dict[str, TestResult]
    effects: list[Effect] = Field(
        default_factory=list,
        description="the probabilistic index of each center, then the stratified one")
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
        local = [fed.releases[c].to_result() for c in fed.centers if c in fed.releases]
        effects = [Effect.of(c, probabilistic_index([fed.releases[c].to_result()]))
                   for c in fed.centers if c in fed.releases]
        if len(local) > 1:
            effects.append(Effect.of("stratified", probabilistic_index(local)))
        return cls(
            alternative=alternative, tests=tests, effects=effects,
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
    outlier_halfwidth: float | None = Field(
        default=None, description="each outlier count is within ± this of the true count with "
                                  "probability 95 % (Laplace noise)")

    @classmethod
    def of(cls, box: DPBoxplotRelease | BoxplotResult,
           outlier_halfwidth: float | None = None) -> Box:
        eps = box.epsilon if isinstance(box, DPBoxplotRelease) else box.spent.epsilon
        if isinstance(box, DPBoxplotRelease) and outlier_halfwidth is None:
            outlier_halfwidth = box.outlier_halfwidth
        return cls(
            lower_outliers=box.lower_outliers, lower_whisker=box.lower_whisker, q1=box.q1,
            median=box.median, q3=box.q3, upper_whisker=box.upper_whisker,
            upper_outliers=box.upper_outliers, n=box.n, lower_branch=box.lower_branch,
            upper_branch=box.upper_branch, epsilon=eps, method=box.method,
            outlier_halfwidth=outlier_halfwidth,
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
            pooled = PooledBoxResult(
                **Box.of(fed.pooled.box, fed.pooled.outlier_halfwidth).model_dump(),
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


class DPQuantilesResult(_Result):
    kind: Literal["dp_quantiles"] = "dp_quantiles"
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

    @classmethod
    def of(cls, fed: CenterDPQuantiles, group: str | None) -> DPQuantilesResult:
        releases = list(fed.per_center.values())
        return cls(
            group=group,
            algorithm=releases[0].algorithm,
            levels=releases[0].levels,
            per_center={c: r.values for c, r in fed.per_center.items()},
            spent={c: r.epsilon for c, r in fed.per_center.items()},
            rank_halfwidth={c: r.rank_halfwidth for c, r in fed.per_center.items()},
            n={c: r.n_public for c, r in fed.per_center.items()},
            excluded=[ExcludedCenter.of(f) for f in fed.excluded],
        )


AnalysisResult = Annotated[
    TableResult | MWUResult | DPBoxplotResult | QuantilesResult | DPQuantilesResult,
    Field(discriminator="kind"),
]


class StudyResult(_Result):
    analyses: list[AnalysisResult]
    centers: list[str] = Field(description="the centers the study asked")
    excluded: list[ExcludedCenter] = Field(description="left out at the survey (sizes) step")
