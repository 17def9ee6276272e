"""A categorical variable over the centers: each center's counts per category and arm, pooled
(docs/methods.md §12.5-§12.7; the center's side: docs/privacy.md, guarantee 15).

Two modes, the analyst's choice:

* ``table`` — each center's K-anonymous counts (``POST .../categorical``, no ε): every count 0
  or >= K, small cells merged with their neighbours in the declared order (the missing cell
  last). Centers may merge differently; the pooled table uses the finest cells every center's
  cells are unions of (``shared.category_counts.common_cells``), so every center's table adds
  up there (post-processing of released counts).
* ``dp`` — each center's ε-DP counts per arm (``POST .../dp/categorical``, ε per arm): every
  category and the missing cell alone, each with two-sided geometric noise whose variance the
  release states. Each center's arm is shown as the nonnegative integers closest to its noisy
  counts that add up to its size (the arm's noisy total, or a Table 1's one size per center
  and arm: ``shared.consistency``); pooled and overall counts are sums of the shown ones, the
  intervals read off the noisy counts (noise variances add).

The missing cell, when released alone, is each arm's *missing* count, not a category: shares
are of the records with a category. Merged with the last categories (a center released it so),
it stays in that merged cell, which is then labelled "... or missing".

A center failing any request is left out (``allow_partial``) or fails the analysis, so every
pooled count holds the same centers.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from coordinator.core.errors import AnalysisFailed, CenterFailure
from coordinator.models import CategoricalTest, CategoryArm, CategoryCell
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require
from shared import kinds
from shared.categorical import (
    cmh_noise_inflation,
    fisher_exact_2x2,
    generalized_cmh,
    mantel_haenszel,
    noisy_share_interval,
    pearson_chi2,
    pearson_noise_inflation,
    wilson_interval,
)
from shared.category_counts import common_cells, regroup
from shared.consistency import projected
from shared.protocol import (
    RELEASE_RTOL,
    CategoricalRelease,
    CategoricalRequest,
    DPCategoricalRelease,
    DPCategoricalRequest,
)

ALL = "all"
POOLED = "pooled"
FISHER_BELOW = 5.0
"""Fisher's exact test is added to a 2×2 table whose smallest expected count is below this
(Cochran 1954, "Some methods for strengthening the common χ² tests": the χ² approximation is
doubtful there)."""
Z95 = float(special.ndtri(0.975))


@dataclass(frozen=True)
class FederatedCounts:
    """Per usable center, its counts (arms × ``cells``) of ``variable``; ``variances`` (dp) the
    noise variance of each count. ``cells`` are runs of codes (0..C-1 the ``categories``, C
    the missing cell), the same for every center."""

    variable: str
    mode: str
    categories: tuple[str, ...]
    arms: tuple[str, ...]
    cells: tuple[tuple[int, ...], ...]
    counts: dict[str, NDArray[np.float64]]
    variances: dict[str, NDArray[np.float64]] | None
    spent: dict[str, float]
    excluded: tuple[CenterFailure, ...]

    @property
    def missing_alone(self) -> bool:
        """Whether the last cell is the missing cell alone (then not a category)."""
        return self.cells[-1] == (len(self.categories),)


def _codes(center: str, release: CategoricalRelease) -> tuple[tuple[int, ...], ...]:
    index = {c: i for i, c in enumerate(release.categories)}
    return tuple(tuple(index[c] if c is not None else len(release.categories) for c in cell)
                 for cell in release.cells)


def check_counts(center: str, release: CategoricalRelease, *, k: int, n_rows: int,
                 floors: Sequence[int] | None, bounds: Sequence[int] | None) -> None:
    """A plausible K-anonymous release: one row per arm asked, the study's K, and each row's
    total (every record of the level falls in one cell) between the size the center declared
    for the level and the most it can hold (``Survey``)."""
    def implausible(detail: str) -> CenterFailure:
        return CenterFailure(center, "implausible", detail)

    if len(release.counts) != n_rows:
        raise implausible(f"released {len(release.counts)} rows for {n_rows} arms")
    if release.k != k:
        raise implausible(f"released counts for K = {release.k}, K = {k} was asked")
    for g, row in enumerate(release.counts):
        total = sum(row)
        if floors is not None and total < floors[g]:
            raise implausible(f"its counts total {total}, below the {floors[g]} it declares")
        if bounds is not None and total > bounds[g]:
            raise implausible(f"its counts total {total}, more than its size allows")


def check_dp_counts(center: str, release: DPCategoricalRelease,
                    asked: DPCategoricalRequest) -> None:
    """A plausible ε-DP release: the ε asked, and the noise its α implies."""
    if not math.isclose(release.epsilon, asked.epsilon, rel_tol=RELEASE_RTOL):
        raise CenterFailure(center, "implausible",
                            f"reports ε = {release.epsilon:g}, {asked.epsilon:g} was asked")
    alpha = release.alpha
    expected = 2 * alpha / (1 - alpha) ** 2
    if not math.isclose(release.variance, expected, rel_tol=1e-6, abs_tol=1e-12):
        raise CenterFailure(center, "implausible", "its noise variance is not its α's")
    if not math.isclose(alpha, math.exp(-asked.epsilon / release.sensitivity), rel_tol=1e-6):
        raise CenterFailure(center, "implausible", "its noise is not that of the ε asked")


def _same_categories(found: dict[str, tuple[str, ...]], variable: str) -> tuple[str, ...]:
    distinct = set(found.values())
    if len(distinct) != 1:
        said = "; ".join(f"{c}: {list(v)}" for c, v in found.items())
        raise AnalysisFailed(f"the centers declare different categories of {variable!r} "
                             f"({said}): their counts cannot be pooled")
    return distinct.pop()


async def federated_counts(
    survey: Survey, *, dataset: str, variable: str, groups: tuple[str, str] | None, k: int,
    mode: str, epsilon: float | None, min_centers: int, allow_partial: bool,
) -> FederatedCounts:
    """Every usable center's counts of ``variable`` per arm (module docstring)."""
    arms = tuple(groups) if groups is not None else (ALL,)
    if mode == "dp":
        assert epsilon is not None
        return await _dp(survey, dataset=dataset, variable=variable, groups=groups, arms=arms,
                         epsilon=epsilon, min_centers=min_centers, allow_partial=allow_partial)
    request = CategoricalRequest(variable=variable, groups=groups, k=k)

    def check(center: str, release: CategoricalRelease) -> None:
        check_counts(center, release, k=k, n_rows=len(arms),
                     floors=survey.declared.get(center), bounds=survey.bounds.get(center))

    released, failed = await ask_all(
        survey.usable, lambda p: p.release(kinds.CATEGORICAL, dataset, request), check,
        allow_partial=allow_partial)
    good = [p.center_id for p in survey.usable if p.center_id in released]
    excluded = (*survey.excluded, *failed)
    require(max(1, min_centers), good, list(excluded))
    categories = _same_categories({c: tuple(released[c].categories) for c in good}, variable)
    own = {c: _codes(c, released[c]) for c in good}
    cells = common_cells(list(own.values()), len(categories) + 1)
    counts = {c: regroup(released[c].counts, own[c], cells) for c in good}
    return FederatedCounts(variable, "table", categories, arms, cells, counts, None,
                           {c: 0.0 for c in good}, tuple(excluded))


async def _dp(survey: Survey, *, dataset: str, variable: str, groups: tuple[str, str] | None,
              arms: tuple[str, ...], epsilon: float, min_centers: int,
              allow_partial: bool) -> FederatedCounts:
    asks = [DPCategoricalRequest(variable=variable, group=arm if groups is not None else None,
                                 epsilon=epsilon) for arm in arms]

    async def ask(request: DPCategoricalRequest) -> tuple[dict[str, DPCategoricalRelease],
                                                          list[CenterFailure]]:
        return await ask_all(
            survey.usable, lambda p: p.release(kinds.DP_CATEGORICAL, dataset, request),
            lambda c, r: check_dp_counts(c, r, request), allow_partial=allow_partial)

    answers = await asyncio.gather(*(ask(r) for r in asks))
    failures = {f.center: f for _, failed in answers for f in failed}
    good = [p.center_id for p in survey.usable if p.center_id not in failures]
    excluded = (*survey.excluded, *failures.values())
    require(max(1, min_centers), good, list(excluded))
    categories = _same_categories(
        {c: tuple(got[c].categories) for got, _ in answers for c in good}, variable)
    cells = tuple((j,) for j in range(len(categories) + 1))
    counts, variances, spent = {}, {}, {}
    for c in good:
        rows = [answers[i][0][c] for i in range(len(arms))]
        counts[c] = np.array([[*r.counts, r.missing] for r in rows], dtype=np.float64)
        variances[c] = np.array([[r.variance] * len(cells) for r in rows])
        spent[c] = sum(r.epsilon for r in rows)
    return FederatedCounts(variable, "dp", categories, arms, cells, counts, variances, spent,
                           tuple(excluded))


# -- what is shown: n (%) per arm, and the tests ------------------------------------------------


def cell_label(cell: tuple[int, ...], categories: Sequence[str]) -> str:
    names = [categories[c] if c < len(categories) else "missing" for c in cell]
    return " or ".join(names)


def _arm(fed: FederatedCounts, center: str, arm: str, shown_counts: NDArray[np.float64],
         counts: NDArray[np.float64], variances: NDArray[np.float64] | None) -> CategoryArm:
    """One arm's row: its shown cells (the missing cell apart when alone) with n (%) and the
    share's 95 % interval. ``shown_counts`` are the counts shown (table: the released ones;
    dp: the consistent ones, :func:`shown_counts`), ``counts`` the released (dp: noisy,
    unclamped) ones the intervals are read from: Wilson's (table), the noisy score interval
    (dp, ``shared.categorical.noisy_share_interval``)."""
    shown = len(fed.cells) - 1 if fed.missing_alone else len(fed.cells)
    raw = counts[:shown]
    n = float(shown_counts[:shown].sum())
    cells = []
    for j in range(shown):
        count = float(shown_counts[j])
        percent = low = high = None
        if n > 0:
            percent = 100.0 * count / n
            if variances is None:
                lo, hi = wilson_interval(count, n)
            else:
                lo, hi = noisy_share_interval(raw, variances[:shown], j)
            low, high = 100.0 * lo, 100.0 * hi
        interval = None
        if variances is not None:
            h = Z95 * math.sqrt(float(variances[j]))
            interval = (max(0.0, float(raw[j]) - h), max(0.0, float(raw[j]) + h))
        cells.append(CategoryCell(
            label=cell_label(fed.cells[j], fed.categories),
            categories=[fed.categories[c] if c < len(fed.categories) else None
                        for c in fed.cells[j]],
            count=count, percent=percent, low=low, high=high, count_interval=interval))
    missing = missing_interval = None
    if fed.missing_alone:
        missing = float(shown_counts[-1])
        if variances is not None:
            h = Z95 * math.sqrt(float(variances[-1]))
            missing_interval = (max(0.0, float(counts[-1]) - h), max(0.0, float(counts[-1]) + h))
    return CategoryArm(variable=fed.variable, center=center, arm=arm, n=n, missing=missing,
                       missing_interval=missing_interval, cells=cells)


def shown_counts(fed: FederatedCounts, sizes: Mapping[str, Sequence[int]] | None = None,
                 ) -> dict[str, NDArray[np.float64]]:
    """The counts shown per center (arms × cells). Table mode: the released ones. DP: each
    center's arm made to add up to its size (``sizes[center][arm]``, the Table 1's one size
    per center and arm; without it, the arm's own noisy total rounded): the nonnegative
    integers closest to its noisy cells with that total (``shared.consistency.projected``),
    so no count is below 0 and every row of the arm, categories and missing together, holds
    the same records (docs/methods.md, "One consistent DP Table 1")."""
    if fed.variances is None:
        return dict(fed.counts)
    out = {}
    for c, counts in fed.counts.items():
        rows = []
        for g, row in enumerate(counts):
            size = (sizes[c][g] if sizes is not None and c in sizes
                    else max(0, round(float(row.sum()))))
            rows.append(projected(row, size))
        out[c] = np.array(rows, dtype=np.float64)
    return out


def _arms_of(fed: FederatedCounts, center: str, shown: NDArray[np.float64],
             counts: NDArray[np.float64],
             variances: NDArray[np.float64] | None) -> list[CategoryArm]:
    """Each arm of one table, then both together ("all", the sum of the arms' shown counts)
    when there are two."""
    rows = [_arm(fed, center, arm, shown[g], counts[g],
                 None if variances is None else variances[g])
            for g, arm in enumerate(fed.arms)]
    if len(fed.arms) > 1:
        rows.append(_arm(fed, center, ALL, shown.sum(axis=0), counts.sum(axis=0),
                         None if variances is None else variances.sum(axis=0)))
    return rows


def category_arms(fed: FederatedCounts, *, per_center: bool, pooled: bool = True,
                  sizes: Mapping[str, Sequence[int]] | None = None) -> list[CategoryArm]:
    """The rows shown: each center's arms (``per_center``), then the pooled arms; every
    overall row the sum of its arms, every pooled row the sum of its centers (shown counts:
    :func:`shown_counts`, made consistent with ``sizes`` in DP)."""
    shown = shown_counts(fed, sizes)
    rows: list[CategoryArm] = []
    if per_center:
        for c, counts in fed.counts.items():
            rows += _arms_of(fed, c, shown[c], counts, None if fed.variances is None
                             else fed.variances[c])
    if pooled:
        zero = np.zeros((len(fed.arms), len(fed.cells)))
        total = sum(fed.counts.values(), zero)
        noise = (None if fed.variances is None else sum(fed.variances.values(), zero))
        rows += _arms_of(fed, POOLED, sum(shown.values(), zero), total, noise)
    return rows


def merge_notes(fed: FederatedCounts) -> list[str]:
    """What the cells say beyond the categories: merged cells, the missing cell's place."""
    notes = []
    merged = [cell_label(c, fed.categories) for c in fed.cells if len(c) > 1]
    if merged:
        notes.append("Cells merged so that every count any center released is 0 or at least K "
                     "(the finest cells every center's counts add up in): "
                     + "; ".join(merged) + ".")
    if not fed.missing_alone:
        notes.append("The missing cell was merged with the last categories at some center: "
                     "those records are counted in that cell, and no missing count is shown.")
    return notes


def association_tests(fed: FederatedCounts) -> tuple[list[CategoricalTest], list[str]]:
    """Arm by category: Pearson's X² on the pooled table (Fisher's exact test too for a 2×2
    table with an expected count below 5, table mode), and CMH stratified by center (the MH
    test and common odds ratio for 2×2, the generalized CMH otherwise). The missing cell
    apart (when alone); categories empty in every center dropped. DP: the noisy counts
    (clamped at 0) with the first-order noise correction (docs/methods.md §12.7)."""
    if len(fed.arms) < 2:
        return [], ["No test of association: the study compares no groups."]
    shown = len(fed.cells) - 1 if fed.missing_alone else len(fed.cells)
    strata = np.stack([np.maximum(fed.counts[c][:, :shown], 0.0) for c in fed.counts])
    noise = (None if fed.variances is None
             else np.stack([fed.variances[c][:, :shown] for c in fed.counts]))
    keep = strata.sum(axis=(0, 1)) > 0
    strata = strata[:, :, keep]
    noise = noise[:, :, keep] if noise is not None else None
    labels = [cell_label(c, fed.categories) for c, k in zip(fed.cells[:shown], keep,
                                                            strict=True) if k]
    if strata.shape[2] < 2:
        return [], ["No test of association: fewer than two categories hold records."]
    pooled = strata.sum(axis=0)
    if np.any(pooled.sum(axis=1) == 0):
        return [], ["No test of association: an arm holds no record with a category."]
    tests: list[CategoricalTest] = []
    notes: list[str] = []
    shape = f"{pooled.shape[0]}×{pooled.shape[1]} ({', '.join(labels)})"
    chi2 = pearson_chi2(pooled)
    if noise is None:
        tests.append(CategoricalTest(name="chi2", method=f"Pearson's χ² on the pooled {shape} "
                                     "table, no continuity correction",
                                     statistic=chi2.statistic, df=chi2.df, pvalue=chi2.pvalue))
        if pooled.shape == (2, 2) and float(chi2.expected.min()) < FISHER_BELOW:
            fisher = fisher_exact_2x2(pooled)
            tests.append(CategoricalTest(
                name="fisher", method="Fisher's exact test on the pooled 2×2 table (an "
                "expected count below 5); statistic the sample odds ratio",
                statistic=fisher.statistic, pvalue=fisher.pvalue, odds_ratio=fisher.statistic))
    else:
        delta = pearson_noise_inflation(pooled, noise.sum(axis=0))
        tests.append(_noisy("chi2", f"Pearson's χ² on the pooled noisy {shape} table, divided "
                            f"by the noise's inflation δ = {delta:.4g}", chi2.statistic / delta,
                            chi2.df))
    informative = [t for t in strata if t.sum() >= 2]
    if len(informative) < 1:
        return tests, [*notes, "No CMH test: no center holds 2 records."]
    try:
        if pooled.shape == (2, 2):
            mh = mantel_haenszel(strata, correction=noise is None)
            if noise is None:
                tests.append(CategoricalTest(
                    name="cmh", method="Cochran-Mantel-Haenszel M² stratified by center, "
                    "continuity-corrected; Mantel-Haenszel common odds ratio (Robins-Breslow-"
                    "Greenland interval)", statistic=mh.statistic, df=1, pvalue=mh.pvalue,
                    odds_ratio=mh.odds_ratio, low=mh.low, high=mh.high))
            else:
                assert noise is not None
                delta = cmh_noise_inflation(strata, noise)
                tests.append(_noisy("cmh", "Cochran-Mantel-Haenszel M² stratified by center "
                                    f"on the noisy counts, divided by the noise's inflation "
                                    f"δ = {delta:.4g}; Mantel-Haenszel common odds ratio",
                                    mh.statistic / delta, 1, odds_ratio=mh.odds_ratio))
        else:
            q = generalized_cmh(strata)
            if noise is None:
                tests.append(CategoricalTest(
                    name="cmh", method="generalized Cochran-Mantel-Haenszel (general "
                    "association) stratified by center", statistic=q.statistic, df=q.df,
                    pvalue=q.pvalue))
            else:
                delta = cmh_noise_inflation(strata, noise)
                tests.append(_noisy("cmh", "generalized Cochran-Mantel-Haenszel stratified by "
                                    f"center on the noisy counts, divided by the noise's "
                                    f"inflation δ = {delta:.4g}", q.statistic / delta, q.df))
    except ValueError as exc:
        notes.append(f"No CMH test: {exc}.")
    return tests, notes


def _noisy(name: str, method: str, statistic: float, df: int,
           odds_ratio: float | None = None) -> CategoricalTest:
    from scipy import stats

    return CategoricalTest(name=name, method=method, statistic=statistic, df=df,
                           pvalue=float(stats.chi2.sf(statistic, df)), odds_ratio=odds_ratio)
