"""Any level from the pooled tree (docs/methods.md §6.4): ``tree_quantiles`` against a brute-force
inversion of the tree's CDF, the quartiles read the same way, and the extra levels costing no ε
(the centers' releases and randomness are the same with or without them)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.dp.pooled import (
    EXTRA_LEVELS,
    QUARTILES,
    TreeHistogram,
    consistent_leaves,
    grid_edges,
    pooled_boxplot,
    pooled_quartiles,
    pooled_whiskers,
    tree_counts,
    tree_histogram,
    tree_quantiles,
)
from shared.privacy import PrivacySpent


def pava(y: list[float]) -> list[float]:
    """Least-squares non-decreasing fit by pool-adjacent-violators (unit weights), written out
    here so the reference shares no code with ``scipy.optimize.isotonic_regression``."""
    blocks: list[list[float]] = []  # [mean, size]
    for v in y:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    out: list[float] = []
    for mean, size in blocks:
        out += [mean] * round(size)
    return out


def brute_quantile(leaves: np.ndarray, edges: np.ndarray, q: float) -> float:
    """inf{x : F(x) >= q·total} by bisection, F the tree's CDF: the monotone fit of the running
    sums of the leaves at the edges (clipped to [0, total]), linear between edges."""
    running = [0.0]
    for leaf in leaves:
        running.append(running[-1] + float(leaf))
    total = running[-1]
    cdf = np.clip(pava(running), 0.0, total)

    def F(x: float) -> float:
        return float(np.interp(x, edges, cdf))

    target = q * total
    lo, hi = float(edges[0]), float(edges[-1])
    if F(lo) >= target:
        return lo
    for _ in range(200):  # F(lo) < target <= F(hi) throughout
        mid = 0.5 * (lo + hi)
        if F(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def test_pava_reference_is_the_least_squares_monotone_fit() -> None:
    # The reference's own check: a known answer.
    np.testing.assert_allclose(pava([1.0, 3.0, 2.0]), [1.0, 2.5, 2.5])
    np.testing.assert_allclose(pava([5.0, 1.0, 0.0]), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(pava([1.0, 3.0, 2.0, 4.0, 0.0]), [1.0, 2.25, 2.25, 2.25, 2.25])
    np.testing.assert_allclose(pava([0.0, 1.0, 2.0]), [0.0, 1.0, 2.0])


@settings(max_examples=150, deadline=None)
@given(
    leaves=st.lists(st.floats(-30.0, 60.0, allow_nan=False), min_size=1, max_size=40),
    lo=st.floats(-100.0, 100.0),
    width=st.floats(0.5, 50.0),
    levels=st.lists(st.floats(0.001, 0.999), min_size=1, max_size=6, unique=True),
)
def test_levels_are_the_inverse_of_the_trees_cdf(
    leaves: list[float], lo: float, width: float, levels: list[float]
) -> None:
    # Noisy consistent leaves may be negative: the CDF is the monotone fit of the running sums.
    arr = np.asarray(leaves)
    if arr.sum() <= 1.0:
        arr = arr + (1.0 - arr.sum()) / arr.size + 1.0  # a histogram holding records
    edges = grid_edges(lo, lo + width, arr.size)
    qs = sorted(levels)
    read = tree_quantiles(arr, edges, qs)
    assert read.levels == tuple(qs) and read.total == pytest.approx(arr.sum(), rel=1e-12)
    for q, value in read.pairs():
        assert value == pytest.approx(brute_quantile(arr, edges, q), abs=1e-9 * width)
    # Monotone in the level, inside the grid, and each level read alone as in a set.
    assert all(a <= b for a, b in zip(read.values, read.values[1:], strict=False))
    assert edges[0] <= read.values[0] and read.values[-1] <= edges[-1]
    for q, value in read.pairs():
        assert tree_quantiles(arr, edges, [q]).values == (value,)


def test_quartiles_are_tree_quantiles_at_the_quartiles() -> None:
    leaves = np.random.default_rng(3).normal(40.0, 15.0, size=256)
    edges = grid_edges(-2.0, 9.0, 256)
    quartiles, total = pooled_quartiles(leaves, edges)
    read = tree_quantiles(leaves, edges, QUARTILES)
    assert quartiles == read.values and total == read.total
    for q, value in zip(QUARTILES, quartiles, strict=True):
        assert value == pytest.approx(brute_quantile(leaves, edges, q), abs=1e-9 * 11)


def test_exact_counts_give_the_sample_quantile_within_one_leaf() -> None:
    # No noise: the tree's q-level lies in the leaf holding the sample's q-quantile (or at an
    # edge of it), so within one leaf width of numpy's inverted-CDF quantile.
    data = np.random.default_rng(4).lognormal(1.5, 0.6, size=20_000)
    depth, b = 5, 4
    grid = (0.0, float(data.max()))
    edges = grid_edges(*grid, b**depth)
    tree = TreeHistogram(tuple(tree_counts(data, edges, depth, b)), b, 1.0, PrivacySpent(1.0))
    levels = (0.01, 0.05, 0.5, 0.95, 0.99)
    read = tree_quantiles(consistent_leaves(tree), edges, levels)
    width = edges[1] - edges[0]
    for q, value in read.pairs():
        assert abs(value - np.quantile(data, q, method="inverted_cdf")) <= width * (1 + 1e-9)


def test_uniform_leaves_give_the_level_itself() -> None:
    read = tree_quantiles(np.full(1000, 3.0), grid_edges(0.0, 1.0, 1000), (0.05, 0.95))
    assert read.values == pytest.approx((0.05, 0.95), abs=1e-12)


@pytest.mark.parametrize(
    ("leaves", "edges", "levels", "match"),
    [
        (np.ones(4), np.linspace(0, 1, 5), (0.5, 0.25), "strictly increasing"),
        (np.ones(4), np.linspace(0, 1, 5), (1.5,), r"\[0, 1\]"),
        (np.ones(4), np.linspace(0, 1, 4), (0.5,), "one more than the leaves"),
        (np.ones(4), np.array([0.0, 0.5, 0.4, 0.8, 1.0]), (0.5,), "strictly increasing"),
        (np.array([1.0, np.nan]), np.linspace(0, 1, 3), (0.5,), "NaN"),
        (-np.ones(4), np.linspace(0, 1, 5), (0.5,), "holds no records"),
    ],
)
def test_bad_input_is_refused(leaves, edges, levels, match) -> None:
    with pytest.raises(ValueError, match=match):
        tree_quantiles(leaves, edges, levels)


def three_centers(seed: int, n: int = 4000) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    return [np.round(g.lognormal(mu, 0.6, size=n), 1) for mu in (1.6, 1.5, 1.8)]


@pytest.mark.parametrize("relation", ["add_remove", "swap"])
def test_extra_levels_cost_nothing_in_process(relation: str) -> None:
    # The same generator stream with and without levels: the same box, the same per-center ε,
    # and the generator left in the same state (no further random draw, so no further release).
    centers = three_centers(5)
    args = {"epsilon": 1.0, "bounds": (0.0, 60.0), "neighbouring": relation}
    g1, g2 = np.random.default_rng(6), np.random.default_rng(6)
    plain = pooled_boxplot(centers, rng=g1, levels=(), **args)
    more = pooled_boxplot(centers, rng=g2, levels=(0.01, 0.05, 0.1, 0.9, 0.95, 0.99), **args)
    assert plain.box == more.box and plain.grid == more.grid
    assert plain.per_center_spent == more.per_center_spent
    assert [s.epsilon for s in more.per_center_spent] == pytest.approx([1.0] * 3)
    assert g1.bit_generator.state == g2.bit_generator.state
    assert plain.levels == () and [q for q, _ in more.levels] == [0.01, 0.05, 0.1, 0.9, 0.95, 0.99]
    # The default reads EXTRA_LEVELS.
    default = pooled_boxplot(centers, rng=np.random.default_rng(6), **args)
    assert [q for q, _ in default.levels] == list(EXTRA_LEVELS)
    assert default.levels == tuple(p for p in more.levels if p[0] in EXTRA_LEVELS)


def test_pooled_whiskers_reads_levels_off_the_summed_consistent_tree() -> None:
    centers = three_centers(7)
    grid, depth, b = (0.0, 60.0), 4, 4
    g = np.random.default_rng(8)
    trees = [tree_histogram(x, grid=grid, depth=depth, branching=b, epsilon=0.5,
                            neighbouring="add_remove", rng=g) for x in centers]
    box = pooled_whiskers(trees, grid=grid, extremes=[(0.1, 50.0)] * 3, bounds=(0.0, 60.0),
                          levels=(0.05, 0.95))
    summed = [sum(levels) for levels in zip(*(t.levels for t in trees), strict=True)]
    leaves = consistent_leaves(TreeHistogram(tuple(summed), b, 1.0, trees[0].spent))
    edges = grid_edges(*grid, b**depth)
    for q, value in box.levels:
        assert value == pytest.approx(brute_quantile(leaves, edges, q), abs=1e-9 * 60)
    assert box.levels[0][1] <= box.q1 <= box.median <= box.q3 <= box.levels[1][1]
    with pytest.raises(ValueError, match="strictly increasing"):
        pooled_whiskers(trees, grid=grid, extremes=[(0.1, 50.0)] * 3, bounds=(0.0, 60.0),
                        levels=(0.95, 0.05))


def test_pooled_levels_are_close_to_the_sample_quantiles() -> None:
    # 3 × 20,000 rounded log-normal stays, ε = 1: the 0.05 and 0.95 levels from the tree are
    # within 0.1 day of the pooled sample's (leaf width 60/4096 ≈ 0.015 day; noise on ~3 % of
    # a leaf's count). A wrong reading (a level swapped, the total mis-scaled) misses by days.
    centers = three_centers(9, n=20_000)
    pooled = np.concatenate(centers)
    out = pooled_boxplot(centers, epsilon=1.0, bounds=(0.0, 60.0), neighbouring="add_remove",
                         rng=np.random.default_rng(10))
    for q, value in out.levels:
        assert value == pytest.approx(np.quantile(pooled, q), abs=0.1)
