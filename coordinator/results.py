"""A study's result from the protocols' outputs: one function per analysis kind, building the
models of :mod:`coordinator.models` (what the study stores and ``GET /v1/studies/{id}`` shows),
an analysis that failed (:func:`failed_analysis`) and each center's part in the study
(:func:`center_status`: included or excluded, per analysis, and why).

The released numbers are copied as the protocols checked them; the only arithmetic here is the
effect size of the Mann-Whitney tests (``shared.effects.probabilistic_index``; for the DP twin
``shared.dp.mwu_effect.dp_probabilistic_index``) and its
heterogeneity between centers (``shared.heterogeneity``), and the Hodges-Lehmann shift the
federated table allows (``shared.hodges_lehmann``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from coordinator.core.errors import CenterFailure, ServiceError
from coordinator.models import (
    AnalysisKind,
    AnalysisOutcome,
    Box,
    CategoricalAnalysis,
    CategoricalResult,
    CategoryArm,
    DescribeAnalysis,
    DescribeResult,
    DescribeRow,
    DPBoxplotResult,
    DPMWUCenter,
    DPMWUResult,
    DPQuantilesResult,
    Effect,
    EstimateResult,
    ExcludedCenter,
    FailedAnalysis,
    Heterogeneity,
    LevelValue,
    MWUResult,
    NoisePart,
    PooledBoxResult,
    QuantilesResult,
    ShiftResult,
    StudyCenter,
    StudyError,
    TableResult,
    TestPart,
    TestResult,
)
from coordinator.protocols import (
    CenterDPQuantiles,
    FederatedBoxplot,
    FederatedDPMWU,
    FederatedMWU,
    FederatedTable,
)
from coordinator.protocols.categorical import (
    FederatedCounts,
    association_tests,
    category_arms,
    merge_notes,
)
from coordinator.protocols.describe import FederatedDescribe
from coordinator.protocols.missing import Missing, arm_missing
from coordinator.protocols.quantiles import Estimate
from coordinator.protocols.table_one import ArmSizes, consistent_rows
from shared.dp.boxplot import BoxplotResult
from shared.dp.mwu_effect import dp_probabilistic_index
from shared.dp.uncertainty import box_rank_halfwidths
from shared.effects import ProbabilisticIndex, probabilistic_index
from shared.heterogeneity import index_heterogeneity
from shared.hodges_lehmann import hodges_lehmann_table
from shared.mwu import FederatedMWUResult, MannWhitneyResult
from shared.protocol import DPBoxplotRelease


def excluded_center(failure: CenterFailure) -> ExcludedCenter:
    """A center left out (``allow_partial``), and why."""
    return ExcludedCenter(center=failure.center, kind=failure.kind, detail=failure.reason,
                          center_error=failure.center_error)


def table_result(fed: FederatedTable) -> TableResult:
    t = fed.table
    return TableResult(
        k=t.k, limits=t.limits.tolist(), counts=t.counts.tolist(), totals=t.totals.tolist(),
        order=list(fed.order),
        center_totals={c: list(v) for c, v in fed.center_totals.items()},
        excluded=[excluded_center(f) for f in fed.excluded],
        reused=fed.reused, reused_from=fed.reused_from,
    )


def mwu_test_result(result: FederatedMWUResult, centers: Sequence[str]) -> TestResult:
    return TestResult(
        method=result.method, statistic=result.statistic, pvalue=result.pvalue,
        df=result.df, null=result.null,
        parts=[
            TestPart.of(p, center=c)
            for c, p in zip(centers, result.parts, strict=True)
        ],
    )


def effect(center: str, index: ProbabilisticIndex) -> Effect:
    return Effect.of(index, center=center)


def mwu_result(fed: FederatedMWU, alternative: str) -> MWUResult:
    tests = {
        name: mwu_test_result(
            result, ["federated-table"] if name == "table" else list(fed.centers)
        )
        for name, result in fed.tests.items()
    }
    local = [fed.releases[c].to_result() for c in fed.centers if c in fed.releases]
    effects = [effect(c, probabilistic_index([fed.releases[c].to_result()]))
               for c in fed.centers if c in fed.releases]
    if len(local) > 1:
        effects.append(effect("stratified", probabilistic_index(local)))
    centers = [c for c in fed.centers if c in fed.releases]
    between, note = heterogeneity(centers, local)
    return MWUResult(
        alternative=alternative, tests=tests, effects=effects,
        table=table_result(fed.table) if fed.table is not None else None,
        excluded=[excluded_center(f) for f in fed.excluded],
        heterogeneity=between, heterogeneity_note=note,
    )


def heterogeneity(centers: Sequence[str], local: Sequence[MannWhitneyResult]
                  ) -> tuple[Heterogeneity | None, str | None]:
    """Cochran's Q and I² of the centers' probabilistic indices, or why there are none: fewer
    than two centers, or every center's θ̂ at the same 0 or 1 without noise (one arm entirely
    above the other everywhere: the pooled θ̄ is 0 or 1, where Newcombe's variance is 0, an
    infinite weight that no Q can hold)."""
    if not local:  # the table test alone: no center released its U
        return None, None
    if len(local) == 1:
        return None, "one center released U: there is no between-center heterogeneity"
    try:
        h = index_heterogeneity(local)
    except ValueError:
        flat = [c for c, r in zip(centers, local, strict=True)
                if r.noise_variance == 0 and abs(r.statistic) >= r.n_x * r.n_y]
        if not flat:
            raise
        return None, (f"not computed: at {', '.join(flat)} one arm lies entirely above the "
                      "other (θ̂ = 0 or 1) and so does the pooled θ, where the index's "
                      "variance is 0 — an infinite weight (docs/methods.md §12.4)")
    return Heterogeneity(
        centers=list(centers), estimates=list(h.estimates), variances=list(h.variances),
        statistic=h.statistic, df=h.df, pvalue=h.pvalue, i_squared=h.i_squared,
        i_squared_interval=h.i_squared_interval, tau_squared=h.tau_squared, level=h.level,
        variance_at=h.variance_at, tau_squared_interval=h.tau_squared_interval,
    ), None


def shift_result(fed: FederatedTable, level: float) -> ShiftResult:
    """What the study's two-arm federated table allows of the Hodges-Lehmann shift."""
    counts = fed.table.counts
    found = hodges_lehmann_table(fed.table, level=level)
    return ShiftResult.of(
        found, estimate=None if math.isnan(found.estimate) else found.estimate,
        whole_counts=bool(np.array_equal(counts, np.round(counts))),
        excluded=[excluded_center(f) for f in fed.excluded],
    )


def box(released: DPBoxplotRelease | BoxplotResult,
        outlier_halfwidth: float | None = None,
        bounds: tuple[float, float] | None = None) -> Box:
    """A center's released box or the pooled one (the core's result), as shown; with the
    public ``bounds``, a center's box states its quartiles' and extremes' rank errors
    (``shared.dp.uncertainty.box_rank_halfwidths``: public numbers only)."""
    if isinstance(released, DPBoxplotRelease):
        eps = released.epsilon
        if outlier_halfwidth is None:
            outlier_halfwidth = released.outlier_halfwidth
    else:
        eps = released.spent.epsilon
    quartiles = extremes = None
    if bounds is not None and isinstance(released, DPBoxplotRelease):
        quartiles, extremes = box_rank_halfwidths(released.method, eps, bounds)
    return Box.of(released, epsilon=eps, outlier_halfwidth=outlier_halfwidth,
                  quartile_rank_halfwidth=quartiles, extreme_rank_halfwidth=extremes)


def dp_boxplot_result(fed: FederatedBoxplot, group: str | None,
                      bounds: tuple[float, float] | None = None) -> DPBoxplotResult:
    pooled = None
    if fed.pooled is not None:
        pooled = PooledBoxResult(
            **{**box(fed.pooled.box, fed.pooled.outlier_halfwidth).model_dump(),
               "quartile_rank_halfwidth": fed.pooled.level_rank_halfwidth,
               "extreme_rank_halfwidth": fed.pooled.extreme_rank_halfwidth,
               "n_halfwidth": fed.pooled.n_halfwidth},
            grid=fed.pooled.grid, centers=list(fed.pooled.centers),
            levels=[LevelValue(level=q, value=v) for q, v in fed.pooled.levels])
    return DPBoxplotResult(
        group=group,
        per_center={c: box(r, bounds=bounds) for c, r in fed.per_center.items()},
        pooled=pooled,
        spent=dict(fed.spent),
        excluded=[excluded_center(f) for f in fed.excluded],
    )


def quantiles_result(
    estimates: dict[str, dict[str, Estimate]], levels: list[float], table: FederatedTable,
    brackets: dict[str, list[tuple[float, float]]] | None = None,
) -> QuantilesResult:
    """The quantiles read from ``table`` (and the centers' YJ moment sums, which every center
    usable for the table gave: a failing one fails the analysis), with the table's brackets."""
    return QuantilesResult(
        brackets=brackets or {},
        levels=levels,
        estimates={
            name: {g: EstimateResult(
                quantiles=list(e.quantiles) if e.quantiles is not None else None,
                error=e.error,
            ) for g, e in by_group.items()}
            for name, by_group in estimates.items()
        },
        table_totals=table.table.totals.tolist(),
        excluded=[excluded_center(f) for f in table.excluded],
    )


def dp_quantiles_result(fed: CenterDPQuantiles, group: str | None) -> DPQuantilesResult:
    releases = list(fed.per_center.values())
    return DPQuantilesResult(
        group=group,
        algorithm=releases[0].algorithm,
        levels=releases[0].levels,
        per_center={c: r.values for c, r in fed.per_center.items()},
        spent={c: r.epsilon for c, r in fed.per_center.items()},
        rank_halfwidth={c: r.rank_halfwidth for c, r in fed.per_center.items()},
        n={c: r.n_public for c, r in fed.per_center.items()},
        excluded=[excluded_center(f) for f in fed.excluded],
    )


def _missing_of(missing: dict[str, Missing], variable: str, center: str, arm: str,
                groups: tuple[str, str] | None, centers: list[str]) -> int | None:
    """A row's missing count: its center's in the arm, or the sum over ``centers`` (pooled;
    none when a center does not release it)."""
    found = missing.get(variable) or {}
    parts = [arm_missing(found.get(c), arm, groups)
             for c in (centers if center == "pooled" else [center])]
    return None if not parts or any(p is None for p in parts) else sum(
        p for p in parts if p is not None)


def describe_result(fed: FederatedDescribe, analysis: DescribeAnalysis, k: int, *,
                    missing: dict[str, Missing] | None = None,
                    groups: tuple[str, str] | None = None,
                    categorical: Sequence[CategoryArm] = (), notes: Sequence[str] = (),
                    excluded: Sequence[CenterFailure] = (),
                    sizes: ArmSizes | None = None) -> DescribeResult:
    """The describe rows as released (``coordinator.protocols.describe``), each with its
    ``missing`` count: a DP row's from its description where every center released one (the
    noisy twin, with its 95 % interval: ``shared.describe.dp_describe``), else from the centers'
    exact missing counts (``coordinator.protocols.missing``; none where a center does not
    release them); and the categorical variables' rows. With ``sizes`` (a DP Table 1) every
    row's n and missing add up to its column's one N, overall and pooled rows the sums of
    theirs (``coordinator.protocols.table_one``)."""
    centers = list(fed.spent)
    rows = [
        DescribeRow(
            variable=line.variable, center=line.center, arm=line.arm, n=line.summary.n,
            missing=(line.summary.missing if line.summary.missing is not None else
                     _missing_of(missing or {}, line.variable, line.center, line.arm, groups,
                                 centers)),
            missing_interval=line.summary.missing_interval,
            mean=line.summary.mean, sd=line.summary.sd, median=line.summary.median,
            q1=line.summary.q1, q3=line.summary.q3, edges=list(line.summary.edges),
            counts=list(line.summary.counts), method=line.method, epsilon=line.epsilon,
            n_interval=line.summary.n_interval, mean_interval=line.summary.mean_interval,
            sd_interval=line.summary.sd_interval, q1_interval=line.summary.q1_interval,
            median_interval=line.summary.median_interval,
            q3_interval=line.summary.q3_interval, rank_halfwidth=line.summary.rank_halfwidth,
            clip=line.summary.clip, uncertainty=line.summary.uncertainty or None,
            notes=list(line.summary.notes),
        )
        for line in fed.lines
    ]
    if sizes is not None:
        exact = {(line.variable, c, arm): _missing_of(missing or {}, line.variable, c, arm,
                                                      groups, centers)
                 for line in fed.lines for c in sizes.sizes for arm in sizes.arms}
        rows = consistent_rows(rows, fed, sizes, exact)
    return DescribeResult(
        mode=analysis.method, k=k, epsilon=analysis.epsilon, rows=rows, units=dict(fed.units),
        noise={v: [NoisePart(name=p.name, epsilon=p.epsilon, mechanism=p.mechanism,
                             sensitivity=p.sensitivity, scale=p.scale) for p in parts]
               for v, parts in fed.noise.items()},
        spent=dict(fed.spent),
        excluded=[excluded_center(f) for f in [*fed.excluded, *excluded]],
        categorical=list(categorical), notes=list(notes),
        sizes=sizes.rows() if sizes is not None else [],
    )


def categorical_result(fed: FederatedCounts, analysis: CategoricalAnalysis,
                       k: int) -> CategoricalResult:
    """A categorical analysis: n (%) per arm (each center's, pooled) and the tests
    (``coordinator.protocols.categorical``)."""
    tests, notes = association_tests(fed)
    return CategoricalResult(
        variable=fed.variable, mode=analysis.method, k=k, epsilon=analysis.epsilon,
        categories=list(fed.categories),
        arms=category_arms(fed, per_center=analysis.per_center), tests=tests,
        notes=[*merge_notes(fed), *notes], spent=dict(fed.spent),
        excluded=[excluded_center(f) for f in fed.excluded])


def failed_analysis(kind: AnalysisKind, error: ServiceError) -> FailedAnalysis:
    """An analysis that gave no result: its error body (naming the center and its ``kind``
    when a center failed it), as a failed study's ``error`` is."""
    return FailedAnalysis(kind=kind, error=StudyError.model_validate(error.body()))


def center_status(
    centers: Sequence[str],
    analyses: Sequence[AnalysisOutcome],
    surveyed_out: Sequence[ExcludedCenter] = (),
) -> list[StudyCenter]:
    """Each center asked: where its releases were used and where it was left out.

    A center is ``included`` when the result of at least one analysis holds it, ``excluded``
    otherwise; ``reason`` is why it was left out: at the survey (``surveyed_out``: then it is
    left out of every analysis) or else in the first analysis that went on without it. A
    failed analysis uses nobody: its error names the center that failed it.
    """
    out = []
    for center in centers:
        used: list[int] = []
        left_out: list[int] = []
        reason = next((e for e in surveyed_out if e.center == center), None)
        for index, analysis in enumerate(analyses):
            if isinstance(analysis, FailedAnalysis):
                continue
            found = next((e for e in analysis.excluded if e.center == center), None)
            if found is None:
                used.append(index)
            else:
                left_out.append(index)
                reason = reason or found
        out.append(StudyCenter(center=center, status="included" if used else "excluded",
                               used_in=used, left_out_of=left_out, reason=reason))
    return out


def dp_mwu_result(fed: FederatedDPMWU, alternative: str) -> DPMWUResult:
    """The DP twin's tests as an ``mwu`` result's, the probabilistic index of each center whose
    kept sizes' estimates are both >= 1 (and stratified over them), their heterogeneity, and
    what each center released."""
    tests = {name: mwu_test_result(result, list(fed.centers))
             for name, result in fed.tests.items()}
    local = {c: fed.releases[c].to_result() for c in fed.centers}
    usable = [c for c, r in local.items() if r.n_x >= 1 and r.n_y >= 1]
    # The index integrates the sizes' noise (shared.dp.mwu_effect): the tests' lifted sizes
    # would pull θ̂ towards ½ and leave that noise out of the interval.
    dp = {c: fed.releases[c].to_dp_result() for c in usable}
    effects = [effect(c, dp_probabilistic_index([dp[c]])) for c in usable]
    if len(usable) > 1:
        effects.append(effect("stratified", dp_probabilistic_index([dp[c] for c in usable])))
    between, note = heterogeneity(usable, [local[c] for c in usable])
    if len(usable) < len(local):
        left = ", ".join(c for c in local if c not in usable)
        note = (f"{note + '; ' if note else ''}no effect size at {left}: a level's noisy size "
                "is below one record")
    releases = []
    for c in fed.centers:
        r, used = fed.releases[c], local[c]
        releases.append(DPMWUCenter(
            center=c, n_x_hat=r.n_x_hat, n_y_hat=r.n_y_hat, cap=r.cap, epsilon=r.epsilon,
            size_epsilon=r.size_epsilon, u_epsilon=r.u_epsilon, noise_scale=r.noise.scale,
            n_x=used.n_x, n_y=used.n_y))
    return DPMWUResult(
        alternative=alternative, tests=tests, effects=effects, table=None,
        excluded=[excluded_center(f) for f in fed.excluded],
        heterogeneity=between, heterogeneity_note=note, releases=releases)
