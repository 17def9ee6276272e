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
from shared.dp.uncertainty import box_rank_halfwidths, tree_rank_halfwidth
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
