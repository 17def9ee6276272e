"""DP boxplots: each center's own DPBoxplot, and the pooled box (docs/methods.md §6).

* per center — ``POST .../dp/boxplot`` to every center in parallel (ε each);
* pooled — three rounds, every center in parallel within a round (``shared.dp.pooled``):

  1. each center's DP minimum and maximum (3ε/8);
  2. the coordinator cuts the pooled range R = [min ψ_min, max ψ_max] (widened by 1.5·|R| each
     side, clamped to the public bounds) into a public grid; each center sends a DP tree
     histogram on it (ε/2); the coordinator sums the trees, makes them consistent (Hay et al.
     2010), reads the pooled quartiles, Tukey's fences and whiskers (the most extreme records
     inside the fences, estimated from the tree), and reads the further ``levels`` (default
     0.05 and 0.95) off the same tree — post-processing: the centers are asked exactly the
     same releases whatever the levels (tested), so they cost no ε;
  3. each center's DP counts below and above the fences, Tukey's outliers (ε/8): the unrounded
     noisy counts summed, then the sum rounded and floored at 0 (a center that releases only
     floored counts is summed as it released).

  Every center spends ε for the pooled box (sequential composition of its rounds; centers hold
  disjoint patients, so across centers the rounds compose in parallel).

The arithmetic is ``shared.dp.pooled``'s coordinator half (``pooled_range``,
``pooled_whiskers``, ``pooled_result``): the pooled box is those functions applied to the rounds'
releases (tested). Each release is checked: the ε it reports equals the ε asked, a tree has the
grid's shape, counts are >= 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coordinator.core.errors import AnalysisFailed, CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require, survey_centers
from shared import kinds
from shared.dp.boxplot import BoxplotResult
from shared.dp.pooled import (
    COUNT_SHARE,
    EXTRA_LEVELS,
    EXTREMES_SHARE,
    HISTOGRAM_SHARE,
    TreeHistogram,
    pooled_range,
    pooled_result,
    pooled_whiskers,
)
from shared.dp.uncertainty import (
    laplace_halfwidth,
    laplace_sum_halfwidth,
    tree_rank_halfwidth,
    tree_root_halfwidth,
)
from shared.fields import check_levels
from shared.protocol import (
    RELEASE_RTOL,
    DPBoxplotRelease,
    DPBoxplotRequest,
    ExtremesRequest,
    ThresholdCountsRelease,
    ThresholdCountsRequest,
    TreeHistogramRelease,
    TreeHistogramRequest,
)


@dataclass(frozen=True)
class PooledBox:
    """The pooled box, the public grid it was read on, and the centers whose data it holds."""

    box: BoxplotResult
    grid: tuple[float, float]
    centers: tuple[str, ...]
    outlier_halfwidth: float | None = None
    """Each pooled outlier count (a sum of the centers' Laplace counts) is within ± this of the
    true count with probability 95 %."""
    levels: tuple[tuple[float, float], ...] = ()
    """((level, value), ...): the further levels read off the pooled tree (no ε)."""
    level_rank_halfwidth: float | None = None
    """Every level read off the pooled tree (the quartiles and ``levels``) is within ± this many
    records of its rank, about the leaf holding it, with probability >= 95 %
    (``shared.dp.uncertainty.tree_rank_halfwidth``, conservative)."""
    extreme_rank_halfwidth: float | None = None
    """None: the pooled whiskers are Tukey's (``shared.dp.pooled.tukey_whiskers``), never at a
    walk's ψ. (Results stored before carry the bound for a whisker at the most extreme
    center's ψ, ``shared.dp.uncertainty.pooled_extreme_rank_halfwidth``.)"""
    n_halfwidth: float | None = None
    """The box's n (the consistent tree's root count) is within ± this of the pooled records'
    number with probability 95 % (``shared.dp.uncertainty.tree_root_halfwidth``)."""


@dataclass(frozen=True)
class FederatedBoxplot:
    """Per-center boxes and/or the pooled box; ``spent[c]`` is the ε center ``c`` reported
    spending for this analysis."""

    per_center: dict[str, DPBoxplotRelease]
    pooled: PooledBox | None
    spent: dict[str, float]
    excluded: tuple[CenterFailure, ...]


def _check_box(
    center: str, box: DPBoxplotRelease, asked: float, bounds: tuple[float, float]
) -> None:
    """A center's own box: the ε asked, every point inside the public bounds (the data were
    clipped to them; the wire model already checks order, finiteness and counts >= 0), and the
    outlier counts' stated noise: Δ/(ε/8) with the pair's sensitivity Δ = 1 (add/remove) or 2
    (swap, and every box released before the counts were noised as a pair), its 95 %
    half-width the one that scale gives (what the report shows is read off the scale)."""
    _check_epsilon(center, box.epsilon, asked)
    if not box.within(bounds):
        raise CenterFailure(center, "implausible", f"a DP box outside the bounds {bounds}")
    scale = box.outlier_scale
    if scale is not None and not any(
            math.isclose(scale, d / (asked / 8.0), rel_tol=RELEASE_RTOL) for d in (1.0, 2.0)):
        raise CenterFailure(center, "implausible",
                            f"states an outlier count noise scale {scale:g} at ε = {asked:g}")
    if scale is not None and box.outlier_halfwidth is not None and not math.isclose(
            box.outlier_halfwidth, laplace_halfwidth(scale), rel_tol=RELEASE_RTOL):
        raise CenterFailure(center, "implausible",
                            "states an outlier count half-width its noise scale does not give")


def _check_epsilon(center: str, reported: float, asked: float) -> None:
    if not math.isclose(reported, asked, rel_tol=RELEASE_RTOL):
        raise CenterFailure(center, "implausible",
                            f"reports spending ε = {reported:g} for a release asked at {asked:g}")


def _as_tree(center: str, release: TreeHistogramRelease, depth: int, branching: int,
             asked: float) -> TreeHistogram:
    _check_epsilon(center, release.epsilon, asked)
    shape = [len(level) for level in release.levels]
    if release.branching != branching or shape != [branching**d for d in range(depth + 1)]:
        raise CenterFailure(center, "implausible", "tree histogram does not have the grid's shape")
    levels = tuple(np.asarray(level, dtype=np.float64) for level in release.levels)
    if not all(np.isfinite(level).all() for level in levels) or not (
        math.isfinite(release.noise_scale) and release.noise_scale > 0
    ):
        raise CenterFailure(center, "implausible", "tree histogram holds non-finite numbers")
    return release.to_result()


async def federated_dp_boxplot(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    group: str | None,
    epsilon: float,
    bounds: tuple[float, float],
    per_center: bool = True,
    pooled: bool = True,
    depth: int = 6,
    branching: int = 4,
    levels: Sequence[float] = EXTRA_LEVELS,
    min_centers: int = 1,
    allow_partial: bool = False,
    survey: Survey | None = None,
) -> FederatedBoxplot:
    """DP boxplots of ``variable`` (one declared level ``group``, or every record for None).

    Each center spends ``epsilon`` for its own box and ``epsilon`` for the pooled one. With
    ``allow_partial`` a center that fails its own box, or round 1 or 2 of the pooled box, is left
    out; a failure in round 3 fails the pooled box (the histogram already holds that center).
    ``levels`` (none: ``()``) are read off the pooled tree besides the quartiles, at no ε.
    """
    if not (per_center or pooled):
        raise ValueError("ask for the per-center boxes, the pooled box, or both")
    extra = tuple(check_levels(list(levels)))
    if survey is None:
        survey = await survey_centers(centers, dataset=dataset, variable=variable,
                                      min_centers=min_centers, allow_partial=allow_partial)
    needed = max(1, min_centers)
    excluded = list(survey.excluded)
    ports = list(survey.usable)
    spent: dict[str, float] = {}

    def spend(center: str, eps: float) -> None:
        spent[center] = spent.get(center, 0.0) + eps

    boxes: dict[str, DPBoxplotRelease] = {}
    if per_center:
        request = DPBoxplotRequest(variable=variable, group=group, epsilon=epsilon, bounds=bounds)
        boxes, failures = await ask_all(
            ports, lambda p: p.release(kinds.DP_BOXPLOT, dataset, request),
            lambda c, r: _check_box(c, r, epsilon, bounds), allow_partial=allow_partial,
        )
        excluded += failures
        require(needed, list(boxes), excluded)
        for cid, own in boxes.items():
            spend(cid, own.epsilon)

    pooled_box: PooledBox | None = None
    if pooled:
        eps1 = 2 * EXTREMES_SHARE * epsilon
        ask1 = ExtremesRequest(variable=variable, group=group, epsilon=eps1, bounds=bounds)
        extremes, failures = await ask_all(
            ports, lambda p: p.release(kinds.DP_EXTREMES, dataset, ask1),
            lambda c, r: _check_epsilon(c, r.epsilon, eps1), allow_partial=allow_partial,
        )
        excluded += failures
        require(needed, list(extremes), excluded)
        for cid, ext in extremes.items():
            spend(cid, ext.epsilon)
        pairs = [(e.psi_min, e.psi_max) for e in extremes.values()]
        lo, hi = pooled_range(pairs, bounds)

        eps2 = HISTOGRAM_SHARE * epsilon
        ask2 = TreeHistogramRequest(variable=variable, group=group, epsilon=eps2, bounds=bounds,
                                    grid=(lo, hi), depth=depth, branching=branching)
        round1 = [p for p in ports if p.center_id in extremes]
        trees: dict[str, TreeHistogram] = {}
        released, failures = await ask_all(
            round1, lambda p: p.release(kinds.DP_TREE_HISTOGRAM, dataset, ask2),
            lambda c, r: trees.__setitem__(c, _as_tree(c, r, depth, branching, eps2)),
            allow_partial=allow_partial,
        )
        excluded += failures
        require(needed, list(released), excluded)
        for cid in released:
            spend(cid, eps2)
        try:
            box = pooled_whiskers([trees[c] for c in released], grid=(lo, hi), extremes=pairs,
                                  bounds=bounds, levels=extra)
        except ValueError as exc:  # e.g. a histogram empty after its noise (ε too small)
            raise AnalysisFailed(f"pooled DP boxplot: {exc}") from None
        # Round 3 counts Tukey's outliers: the records beyond the fences (inside the bounds).
        lower, upper = box.lower_fence, box.upper_fence

        eps3 = 2 * COUNT_SHARE * epsilon
        ask3 = ThresholdCountsRequest(variable=variable, group=group, epsilon=eps3,
                                      bounds=bounds, lower=lower, upper=upper)

        def check3(center: str, r: ThresholdCountsRelease) -> None:
            _check_epsilon(center, r.epsilon, eps3)
            if r.below < 0 or r.above < 0:
                raise CenterFailure(center, "implausible", "a negative count")
            # The scale the half-width is read from: Δ/ε with Δ = 1 (add/remove) or 2 (swap).
            if r.scale is not None and not any(
                    math.isclose(r.scale, d / eps3, rel_tol=RELEASE_RTOL) for d in (1.0, 2.0)):
                raise CenterFailure(center, "implausible",
                                    f"states a count noise scale {r.scale:g} at ε = {eps3:g}")

        round2 = [p for p in ports if p.center_id in released]
        counts, _ = await ask_all(
            round2, lambda p: p.release(kinds.DP_THRESHOLD_COUNTS, dataset, ask3), check3,
            allow_partial=False,
        )
        for cid, c in counts.items():
            spend(cid, c.epsilon)
        # Each center's count carries Laplace noise of the scale it states (1/eps3 under
        # add/remove, 2/eps3 under swap); a center older than the field used 2/eps3.
        pooled_box = PooledBox(
            pooled_result(box, [c.to_pair() for c in counts.values()], epsilon),
            (lo, hi),
            tuple(counts),
            laplace_sum_halfwidth([c.scale or 2.0 / eps3 for c in counts.values()]),
            box.levels,
            tree_rank_halfwidth([trees[c].noise_scale for c in released], branching, depth),
            None,  # no pooled whisker is at a walk's ψ (round 1 sets the grid only)
            tree_root_halfwidth([trees[c].noise_scale for c in released], branching, depth),
        )
    return FederatedBoxplot(boxes, pooled_box, spent, tuple(excluded))
