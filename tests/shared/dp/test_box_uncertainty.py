"""The uncertainty a DP boxplot states for its parts (``shared.dp.uncertainty``,
docs/methods.md §9.4-§9.5), checked by simulation: a center's quartiles (JointExp at ε/2), its
extremes ψ (the walks at 3ε/16, about the grid step next to ψ), and the levels read off the
pooled tree (about the leaf holding them). Goal: 0.93-0.97 at 95 %, or at least 0.95 where the
statement is conservative (said so)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.dp.boxplot import dp_boxplot, extremes_sorted
from shared.dp.pooled import grid_edges, pooled_boxplot
from shared.dp.unbounded import one_sided_max_target, step_below
from shared.dp.uncertainty import (
    box_rank_halfwidths,
    pooled_extreme_rank_halfwidth,
    tree_rank_halfwidth,
)
from shared.fields import METHOD_NAMES

QUARTILES = np.array([0.25, 0.5, 0.75])
DEFAULT = METHOD_NAMES["one_sided"]


def test_the_parts_uncertainty_is_public_and_named_by_method() -> None:
    q, e = box_rank_halfwidths(DEFAULT, 1.0, (-50.0, 50.0))
    assert q is not None and e is not None and 0 < q < e
    q1, e1 = box_rank_halfwidths(METHOD_NAMES["algorithm_1"], 1.0, (-50.0, 50.0))
    assert q1 == q and e1 is not None and e1 != e  # Laplace noise on Algorithm 1's walk
    assert box_rank_halfwidths("naive_joint_exp", 1.0, (-50.0, 50.0)) == (None, None)
    # Both scale as 1/ε.
    q2, e2 = box_rank_halfwidths(DEFAULT, 2.0, (-50.0, 50.0))
    assert q2 == pytest.approx(q / 2) and e2 == pytest.approx(e / 2)


def test_the_pooled_whiskers_rank_error_splits_the_level_over_the_centers() -> None:
    """One center: its own walk's statement; L centers: L times the half-width at 0.95^(1/L)
    (all L statements hold together), so more than L times one center's."""
    _, one = box_rank_halfwidths(DEFAULT, 1.0, (-50.0, 50.0))
    assert pooled_extreme_rank_halfwidth(1.0, (-50.0, 50.0), 1) == pytest.approx(one)
    three = pooled_extreme_rank_halfwidth(1.0, (-50.0, 50.0), 3)
    assert one is not None and three > 3 * one
    assert pooled_extreme_rank_halfwidth(2.0, (-50.0, 50.0), 3) == pytest.approx(three / 2)
    with pytest.raises(ValueError, match="centers"):
        pooled_extreme_rank_halfwidth(1.0, (-50.0, 50.0), 0)


@pytest.mark.slow  # 200 × 3 walk pairs over ~9000 grid steps: about 20 s
def test_the_pooled_whiskers_at_psi_cover_at_their_stated_rank_error() -> None:
    # Round 1 of the pooled box (each center's one-sided walks at 3ε/16, ε = 1, bounds
    # [−50, 50]) at three centers of 700, 500 and 300 records of N(μ_l, 1). The pooled ψ_max is
    # the largest ψ_max,l: at most Σ_l √n_l/20 + H pooled records lie at or above it, and its
    # own center holds at least √n/20 − H/L at or above the grid step below it (ψ_min
    # mirrored); both together, with probability >= 95 %.
    epsilon, bounds = 1.0, (-50.0, 50.0)
    rng = np.random.default_rng(2727)
    big_h = pooled_extreme_rank_halfwidth(epsilon, bounds, 3)
    reps, covered = 200, np.zeros(2)
    for _ in range(reps):
        centers = [np.sort(rng.normal(mu, 1.0, size))
                   for mu, size in ((0.0, 700), (0.3, 500), (-0.2, 300))]
        psis = [extremes_sorted(x, 3 * epsilon / 16, bounds, rng, extremes="one_sided")
                for x in centers]
        for i, sign, anchor in ((0, 1.0, bounds[0]), (1, -1.0, -bounds[1])):
            values = [np.sort(sign * x) for x in centers]  # ψ_min: the maximum of −x
            own = [sign * p[1 - i] for p in psis]
            star = int(np.argmax(own))
            psi = own[star]
            tails = [x.size - one_sided_max_target(x.size) for x in values]
            beyond = sum(x.size - np.searchsorted(x, psi, side="left") for x in values)
            x = values[star]
            at_step = x.size - np.searchsorted(x, step_below(psi, anchor, 1.001), side="left")
            covered[i] += beyond <= sum(tails) + big_h and at_step >= tails[star] - big_h / 3
    # Conservative (each walk's statement holds for any data; the level is split over the
    # centers).
    print(f"pooled ψ_max, ψ_min, H = {big_h:.1f} ranks: coverage {covered / reps}")
    assert np.all(covered / reps >= 0.95), covered / reps


@pytest.mark.slow  # 1600 boxplots of 1000 values: about 5 s
def test_a_centers_quartiles_cover_at_their_stated_rank_error() -> None:
    # Evenly spread data (where JointExp's bridge is the law of the rank errors) and normal
    # data, ε = 1 (the quartiles get ε/2), bounds [−50, 50] (or [0, n]).
    n, epsilon = 1000, 1.0
    rng = np.random.default_rng(41)
    for data, bounds in ((np.arange(n) + 0.5, (0.0, float(n))),
                         (np.sort(rng.normal(0.0, 1.0, n)), (-50.0, 50.0))):
        h, _ = box_rank_halfwidths(DEFAULT, epsilon, bounds)
        assert h is not None
        covered = np.zeros(3)
        reps = 800
        for _ in range(reps):
            box = dp_boxplot(data, epsilon=epsilon, bounds=bounds, neighbouring="swap", rng=rng)
            ranks = np.searchsorted(data, [box.q1, box.median, box.q3], side="right")
            covered += np.abs(ranks - QUARTILES * n) <= h
        # The stated half-width is the middle level's (the widest point of the bridge).
        rate = covered / reps
        print(f"quartiles ± {h:.1f} ranks: coverage {rate}")
        assert np.all(rate >= 0.93), rate
        assert rate[1] <= 0.985, rate


@pytest.mark.slow  # 2 × 300 walk pairs over ~9000 grid steps: about 10 s
@pytest.mark.parametrize("n", [100, 5000])
def test_a_centers_extremes_cover_at_their_stated_rank_error(n: int) -> None:
    # ψ_max and ψ_min of the default (one-sided) walk at 3ε/16, bounds [−50, 50]: the grid step
    # next to ψ holds the walk's count target n − √n/20 within ± h (of x, or of −x).
    epsilon, bounds = 1.0, (-50.0, 50.0)
    rng = np.random.default_rng(n)
    data = np.sort(rng.normal(0.0, 1.0, n))
    _, h = box_rank_halfwidths(DEFAULT, epsilon, bounds)
    assert h is not None
    target = one_sided_max_target(n)
    reps, covered = 300, np.zeros(2)
    for _ in range(reps):
        psi_min, psi_max = extremes_sorted(data, 3 * epsilon / 16, bounds, rng,
                                           extremes="one_sided")
        for i, (values, psi, anchor) in enumerate(((data, psi_max, bounds[0]),
                                                   (np.sort(-data), -psi_min, -bounds[1]))):
            at = np.searchsorted(values, psi, side="left")
            below = np.searchsorted(values, step_below(psi, anchor, 1.001), side="left")
            covered[i] += at >= target - h and below <= target + h
    # Conservative by construction (every step of the grid counted as a competitor).
    print(f"n = {n}: ψ_max, ψ_min ± {h:.1f} ranks: coverage {covered / reps}")
    assert np.all(covered / reps >= 0.95), covered / reps


@pytest.mark.slow  # 150 pooled boxplots over three centers: about 20 s
def test_pooled_tree_levels_cover_at_their_stated_rank_error() -> None:
    # Three centers (700, 500, 300 records of N(μ_l, 1)), ε = 1, the default 4**6 leaves: the
    # quartiles and the 5 % and 95 % levels read off the consistent tree, each about the leaf
    # holding it (the records below the leaf's ends bracket q·N within ± h).
    rng = np.random.default_rng(77)
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    epsilon, bounds = 1.0, (-50.0, 50.0)
    reps, covered = 150, np.zeros(levels.size)
    # Each center's node noise: Laplace((depth + 1)/(ε/2)) under add/remove.
    h = tree_rank_halfwidth([7.0 / (epsilon / 2)] * 3, 4, 6)
    for _ in range(reps):
        centers = [rng.normal(mu, 1.0, size) for mu, size in ((0.0, 700), (0.3, 500),
                                                              (-0.2, 300))]
        result = pooled_boxplot(centers, epsilon=epsilon, bounds=bounds,
                                neighbouring="add_remove", rng=rng, levels=(0.05, 0.95))
        read = dict(result.levels)
        values = [read[0.05], result.box.q1, result.box.median, result.box.q3, read[0.95]]
        edges = grid_edges(*result.grid, 4**6)
        pooled = np.sort(np.concatenate(centers))
        n = pooled.size
        for i, (q, v) in enumerate(zip(levels, values, strict=True)):
            leaf = min(max(int(np.searchsorted(edges, v, side="right")) - 1, 0), edges.size - 2)
            lo, hi = edges[leaf], edges[leaf + 1]
            covered[i] += (np.searchsorted(pooled, hi, side="right") >= q * n - h
                           and np.searchsorted(pooled, lo, side="left") <= q * n + h)
    # Conservative (the consistency step only narrows the noise the bound sums).
    print(f"pooled levels ± {h:.1f} ranks: coverage {covered / reps}")
    assert np.all(covered / reps >= 0.95), covered / reps


@pytest.mark.slow  # 2000 consistency passes over 5461 nodes: about 15 s
def test_the_pooled_boxs_root_count_covers_at_its_stated_halfwidth() -> None:
    """The consistent summed tree's root count (the pooled box's n) is a fixed linear
    combination of the nodes (Hay et al.'s bottom-up pass): its 95 % half-width is that of the
    weighted Laplace sum. Three centers of node scale 14 (ε = 1 under add/remove: 7/(ε/2)),
    4**6 leaves, 2000 noise draws through ``consistent_leaves``: coverage 0.95 within 3 SE
    (0.0049), where the tree levels' rank error (a bound on another quantity) is 5 times wider."""
    import math

    from shared.dp.pooled import TreeHistogram, consistent_leaves
    from shared.dp.uncertainty import tree_root_halfwidth
    from shared.privacy import PrivacySpent

    b, depth, scale = 4, 6, 14.0
    h = tree_root_halfwidth([scale] * 3, b, depth)
    assert h < tree_rank_halfwidth([scale] * 3, b, depth) / 4
    rng = np.random.default_rng(59)
    reps, inside = 2000, 0
    for _ in range(reps):
        levels = tuple(rng.laplace(0.0, scale, (3, b**k)).sum(axis=0) for k in range(depth + 1))
        tree = TreeHistogram(levels, b, scale * math.sqrt(3), PrivacySpent(1.0))
        inside += abs(float(consistent_leaves(tree).sum())) <= h
    print(f"pooled n ± {h:.1f}: coverage {inside / reps}")
    assert abs(inside / reps - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / reps)
