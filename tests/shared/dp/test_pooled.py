"""The pooled DP boxplot protocol (docs/methods.md §6): tree histogram, consistency, reading,
budget."""

import math
from itertools import pairwise

import numpy as np
import pytest

from shared.dp.boxplot import EXTREMES_WALKS, extremes_sorted
from shared.dp.pooled import (
    COUNT_SHARE,
    PooledWhiskers,
    TreeHistogram,
    center_extremes,
    consistent_leaves,
    grid_edges,
    pooled_boxplot,
    pooled_quartiles,
    pooled_result,
    sum_trees,
    threshold_counts,
    tree_counts,
    tree_histogram,
)
from shared.dp.uncertainty import laplace_sum_halfwidth
from shared.privacy import PrivacySpent


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def design_matrix(depth: int, b: int) -> np.ndarray:
    """Rows: every node (root first, level by level); columns: leaves; 1 where leaf is below."""
    n_leaves = b**depth
    rows = []
    for d in range(depth + 1):
        width = b ** (depth - d)
        for node in range(b**d):
            row = np.zeros(n_leaves)
            row[node * width : (node + 1) * width] = 1
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize(("depth", "b"), [(3, 2), (2, 4), (3, 3)])
def test_consistency_is_the_least_squares_solution(depth, b):
    # Hay et al.'s two passes must equal ordinary least squares of all nodes on the leaves.
    g = rng(depth * b)
    noisy = g.normal(20, 5, size=sum(b**d for d in range(depth + 1)))
    split = np.cumsum([b**d for d in range(depth + 1)])[:-1]
    tree = TreeHistogram(tuple(np.split(noisy, split)), b, 1.0, PrivacySpent(1.0))
    ours = consistent_leaves(tree)
    ref, *_ = np.linalg.lstsq(design_matrix(depth, b), noisy, rcond=None)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-10)


def test_consistent_leaves_of_exact_counts_are_exact():
    data = rng().normal(size=500)
    edges = grid_edges(-3, 3, 4**3)
    exact = tree_counts(data, edges, 3, 4)
    tree = TreeHistogram(tuple(exact), 4, 0.0, PrivacySpent(1.0))
    np.testing.assert_allclose(consistent_leaves(tree), exact[-1], atol=1e-9)


@pytest.mark.parametrize("relation", ["add_remove", "swap"])
def test_tree_sensitivity(relation):
    # One record added (or changed) moves the node counts by depth + 1 (or twice that) in L1:
    # the Laplace scale is that over ε.
    depth, b = 4, 3
    edges = grid_edges(0, 1, b**depth)
    data = rng(1).random(200)
    base = np.concatenate(tree_counts(data, edges, depth, b))
    for trial in range(50):
        value = rng(trial).random()
        if relation == "add_remove":
            other = np.r_[data, value]
        else:
            other = data.copy()
            other[trial] = value
        diff = np.abs(np.concatenate(tree_counts(other, edges, depth, b)) - base).sum()
        assert diff <= (depth + 1) * (2 if relation == "swap" else 1)
    tree = tree_histogram(
        data, grid=(0, 1), depth=depth, branching=b, epsilon=0.5, neighbouring=relation, rng=rng()
    )
    assert tree.noise_scale == (depth + 1) * (2 if relation == "swap" else 1) / 0.5


def test_tree_noise_is_laplace_of_the_stated_scale():
    data = rng(2).random(100)
    tree = tree_histogram(
        data, grid=(0, 1), depth=5, branching=4, epsilon=1.0, neighbouring="add_remove", rng=rng(3)
    )
    exact = tree_counts(data, grid_edges(0, 1, 4**5), 5, 4)
    noise = np.concatenate([t - e for t, e in zip(tree.levels, exact, strict=True)])
    from scipy import stats

    assert stats.kstest(noise, stats.laplace(scale=tree.noise_scale).cdf).pvalue > 1e-3


def test_quartiles_of_exact_uniform_leaves():
    edges = grid_edges(0, 1, 1000)
    leaves = np.full(1000, 7.0)
    (q1, med, q3), total = pooled_quartiles(leaves, edges)
    assert (q1, med, q3) == pytest.approx((0.25, 0.5, 0.75), abs=1e-12)
    assert total == 7000
    with pytest.raises(ValueError, match="holds no records"):
        pooled_quartiles(-np.ones(10), grid_edges(0, 1, 10))


def test_threshold_counts():
    data = np.arange(100.0)
    exact = threshold_counts(
        data, lower=10, upper=89.5, epsilon=1e9, neighbouring="swap", rng=rng()
    )
    assert (exact.below, exact.above) == (10, 10) and exact.spent == PrivacySpent(1e9)
    with pytest.raises(ValueError, match="lower <= upper"):
        threshold_counts(data, lower=5, upper=1, epsilon=1, neighbouring="swap", rng=rng())


def test_pooled_outlier_counts_are_summed_before_they_are_floored():
    """Three centers, true counts 2, 0 and 5 below and 22, 1, 3 above, ε = 1 for the box (the
    counts get ε/8, Laplace(16) each under swap, Laplace(8) under add/remove: here swap, the
    wider): the pooled count is the centers' noisy counts summed,
    then rounded and floored once. The noisy sum is unbiased (its mean over 4000 seeded draws
    within 4 standard errors of the truth) and the shown count median-unbiased (flooring is
    monotone): its median within 2 of the truth, where summing the centers' floored counts,
    as before, puts it 10 or more above (and its mean 15-21 above). The shown interval, count
    ± ⌈h⌉ clipped at 0 with h the Laplace-sum half-width, holds the truth at least 95 % of the
    time (less 1.4 %, 4 standard errors): conservative where the count is near 0, whose floor
    only widens it (0.976 and 0.979 here)."""
    data = [np.concatenate([np.full(b, -1.0), np.full(50, 5.0), np.full(a, 11.0)])
            for b, a in ((2, 22), (0, 1), (5, 3))]
    truth = np.array([7, 26])
    box = PooledWhiskers(4.0, 5.0, 6.0, 150, 0.0, "fence", 10.0, "fence")
    generator = rng(11)
    eps3 = 2 * COUNT_SHARE * 1.0
    h = math.ceil(laplace_sum_halfwidth([2.0 / eps3] * 3))
    draws = 4000
    noisy, shown, old = (np.zeros((draws, 2)) for _ in range(3))
    for i in range(draws):
        counts = [threshold_counts(x, lower=0.0, upper=10.0, epsilon=eps3,
                                   neighbouring="swap", rng=generator) for x in data]
        result = pooled_result(box, [(c.below_noisy, c.above_noisy) for c in counts], 1.0)
        noisy[i] = sum(c.below_noisy for c in counts), sum(c.above_noisy for c in counts)
        shown[i] = result.lower_outliers, result.upper_outliers
        old[i] = sum(c.below for c in counts), sum(c.above for c in counts)
    np.testing.assert_array_equal(shown, np.maximum(0, np.round(noisy)))
    se = math.sqrt(3 * 2 * 16.0**2 / draws)
    assert np.abs(noisy.mean(axis=0) - truth).max() < 4 * se
    assert np.abs(np.median(shown, axis=0) - truth).max() <= 2
    assert (np.median(old, axis=0) - truth).min() >= 10  # the old pooled count
    covered = ((np.maximum(0, shown - h) <= truth) & (truth <= shown + h)).mean(axis=0)
    assert ((covered > 0.95 - 0.014) & (covered < 0.99)).all(), covered


def test_sum_trees_refuses_different_grids():
    data = rng().random(50)
    t1 = tree_histogram(
        data, grid=(0, 1), depth=2, branching=2, epsilon=1, neighbouring="swap", rng=rng()
    )
    t2 = tree_histogram(
        data, grid=(0, 1), depth=3, branching=2, epsilon=1, neighbouring="swap", rng=rng()
    )
    with pytest.raises(ValueError, match="same grid"):
        sum_trees([t1, t2])
    both = sum_trees([t1, t1])
    assert both.noise_scale == pytest.approx(math.sqrt(2) * t1.noise_scale)
    assert both.spent == t1.spent  # disjoint patients: parallel composition


def test_pooled_boxplot_tracks_the_pooled_data_and_spends_epsilon_per_center():
    g = rng(11)
    centers = [g.normal(0, 1, 4000), g.normal(0.5, 1.5, 2500), g.normal(-0.5, 1, 1500)]
    result = pooled_boxplot(
        centers, epsilon=2.0, bounds=(-50, 50), neighbouring="add_remove", rng=rng(12)
    )
    pooled = np.concatenate(centers)
    box = result.box
    ref = np.quantile(pooled, [0.25, 0.5, 0.75])
    # Grid leaves are (range)/4096 wide and the noise is small at n = 8000, ε = 2.
    np.testing.assert_allclose([box.q1, box.median, box.q3], ref, atol=0.05)
    assert box.lower_whisker <= box.q1 <= box.median <= box.q3 <= box.upper_whisker
    assert abs(box.n - pooled.size) < 200
    for spent in result.per_center_spent:
        assert spent.epsilon == pytest.approx(2.0, rel=1e-12)
    assert math.fsum(part.epsilon for _, part in box.budget) == pytest.approx(2.0, rel=1e-15)
    assert all(a <= b for a, b in pairwise([box.q1, box.median, box.q3]))


@pytest.mark.parametrize("extremes", EXTREMES_WALKS)
def test_center_extremes_is_dpboxplots_step_one(extremes):
    # Round 1 runs DPBoxplot's walks (default: the one-sided walk) at ε/2 each.
    x = rng(3).normal(size=700)
    e = center_extremes(x, epsilon=0.8, bounds=(-50, 50), neighbouring="add_remove", rng=rng(4),
                        extremes=extremes)
    assert (e.psi_min, e.psi_max) == extremes_sorted(np.sort(x), 0.4, (-50, 50), rng(4),
                                                     extremes=extremes)
    assert e.spent == PrivacySpent(0.8)
    default = center_extremes(x, epsilon=0.8, bounds=(-50, 50), neighbouring="swap", rng=rng(4))
    assert default == center_extremes(x, epsilon=0.8, bounds=(-50, 50), neighbouring="swap",
                                      rng=rng(4), extremes="one_sided")
    with pytest.raises(ValueError, match="`extremes` must be one of"):
        center_extremes(x, epsilon=0.8, bounds=(-50, 50), neighbouring="swap", rng=rng(4),
                        extremes="laplace")


@pytest.mark.parametrize(("extremes", "walk"), [("one_sided", "one-sided walk"),
                                                ("algorithm_1", "Algorithm 1's walk")])
def test_pooled_budget_names_the_walk(extremes, walk):
    g = rng(13)
    centers = [g.normal(0, 1, 3000), g.normal(0.3, 1, 2000)]
    result = pooled_boxplot(centers, epsilon=1.0, bounds=(-50, 50), neighbouring="swap",
                            rng=rng(14), extremes=extremes)
    assert result.box.budget[0][0] == f"minimum and maximum (unbounded, {walk})"
    assert result.box.method == "pooled_dp_boxplot"
