"""Hodges-Lehmann shift and Moses interval: against R's wilcox.test and the inverted scipy test,
the rank c against exhaustive enumeration, the bin table's bounds against the raw data behind the
table, and the coverage of the interval the coordinator reports (from a federated table)."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shared.binning import BinTable, bin_table
from shared.federation import federated_table
from shared.hodges_lehmann import hodges_lehmann, hodges_lehmann_table, moses_rank
from shared.mwu import exact_null

# R 4.x: x <- c(0.8, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46)
#        y <- c(1.15, 0.88, 0.90, 0.74, 1.21)   (R's ?wilcox.test example data)
R_X = [0.8, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
R_Y = [1.15, 0.88, 0.90, 0.74, 1.21]


def test_against_r_wilcox_test():
    # wilcox.test(x, y, conf.int = TRUE, exact = TRUE): estimate 0.305, CI (-0.150, 0.760)
    # (R's differences are x − y: our shift of the second argument against the first).
    r = hodges_lehmann(R_Y, R_X)
    assert (r.estimate, r.low, r.high) == pytest.approx((0.305, -0.150, 0.760), abs=1e-12)
    assert r.method == "exact"
    # wilcox.test(y, x, conf.int = TRUE, exact = TRUE, conf.level = 0.9): -0.305, (-0.720, 0.080)
    r = hodges_lehmann(R_X, R_Y, level=0.9)
    assert (r.estimate, r.low, r.high) == pytest.approx((-0.305, -0.720, 0.080), abs=1e-12)


@pytest.mark.parametrize("n, m, level", [(3, 4, 0.8), (4, 4, 0.9), (5, 3, 0.95), (2, 2, 0.95)])
def test_rank_by_exhaustive_enumeration(n, m, level):
    """c is the largest c >= 1 with P(U < c) <= α/2 under every split of 1..N equally likely,
    U = #{y > x}; the achieved level is 1 − 2·P(U < c)."""
    values = np.arange(n + m)
    us = []
    for xs in itertools.combinations(range(n + m), n):
        x = values[list(xs)]
        y = np.setdiff1d(values, x)
        us.append(int(np.sum(np.subtract.outer(y, x) > 0)))
    us = np.array(us)
    alpha = 1 - level
    ok = [c for c in range(1, n * m + 1) if np.mean(us < c) <= alpha / 2]
    expected_c = max(ok) if ok else 1
    c, achieved, method = moses_rank(n, m, level)
    assert method == "exact"
    assert c == expected_c
    assert achieved == pytest.approx(1 - 2 * np.mean(us < c), abs=1e-12)


def test_normal_rank_for_large_samples():
    c, achieved, method = moses_rank(40, 60, 0.95)
    assert method == "normal"
    nm = 2400
    assert c == math.floor(nm / 2 - 1.959963984540054 * math.sqrt(nm * 101 / 12) + 0.5)
    assert achieved >= 0.95 and achieved == pytest.approx(0.95, abs=0.002)


@pytest.mark.parametrize("n, m", [(25, 26), (40, 60)])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_normal_rank_is_at_most_a_few_ranks_below_the_exact_one(n, m, level):
    """Above N = 50 c comes from the normal law; the exact law (still computable here) gives
    a c at most 3 ranks larger (the normal c is conservative) and never smaller."""
    law = exact_null(n, m)
    nm = n * m
    u = (law.low + np.arange(law.pmf.size) + nm) / 2
    cdf = np.cumsum(law.pmf[u == np.round(u)])
    exact_c = int(np.count_nonzero(cdf <= (1 - level) / 2))
    c, _, method = moses_rank(n, m, level)
    assert method == "normal"
    assert 0 <= exact_c - c <= 3


def test_interval_is_the_order_statistics_of_the_differences():
    g = np.random.default_rng(3)
    x, y = g.normal(size=37), g.normal(0.5, size=45)
    r = hodges_lehmann(x, y)
    d = np.sort((y[:, None] - x[None, :]).ravel())
    assert r.estimate == np.median(d)
    assert (r.low, r.high) == (d[r.rank - 1], d[d.size - r.rank])
    assert r.low <= r.estimate <= r.high


def test_unreachable_level_says_so():
    r = hodges_lehmann([1.0], [2.0, 3.0], level=0.95)  # P(U = 0) = 1/3 > 0.025
    assert r.rank == 1 and r.achieved_level < 0.95


def _table_from(x, y, limits):
    counts = np.array([np.histogram(v, bins=limits)[0] for v in (x, y)], dtype=float)
    # np.histogram's bins are [a, b) but the table's are (a, b]; no value sits on a limit here.
    return BinTable(np.asarray(limits, dtype=float), counts, 2)


@pytest.mark.parametrize("seed", range(6))
def test_table_bounds_contain_the_raw_estimate_and_interval(seed):
    g = np.random.default_rng(seed)
    x, y = g.normal(size=40 + seed), g.gamma(2.0, size=50) - 1.0 + 0.2 * seed
    table = bin_table(x, y, k=5, rng=g)
    raw = hodges_lehmann(x, y)
    b = hodges_lehmann_table(table)
    assert b.rank == raw.rank
    assert b.estimate_low <= raw.estimate <= b.estimate_high
    assert b.low_low <= raw.low <= b.low_high
    assert b.high_low <= raw.high <= b.high_high
    lo, hi = b.interval
    assert lo <= raw.low and raw.high <= hi


def test_table_bounds_are_attained_by_data_at_the_bin_edges():
    """Every X at the top of its bin and every Y at the bottom of its bin (just above it): the
    raw estimate and interval ends approach the lower bounds; the mirror image gives the upper
    bounds."""
    limits = np.array([0.0, 1.0, 2.5, 4.0, 7.0])
    fx, fy = np.array([3, 4, 2, 0]), np.array([0, 3, 5, 2])
    table = BinTable(limits, np.array([fx, fy], dtype=float), 2)
    b = hodges_lehmann_table(table, level=0.9)
    eps = 1e-9
    x_top = np.repeat(limits[1:], fx)
    y_bottom = np.repeat(limits[:-1] + eps, fy)
    low = hodges_lehmann(x_top, y_bottom, level=0.9)
    assert low.estimate == pytest.approx(b.estimate_low, abs=1e-8)
    assert low.low == pytest.approx(b.low_low, abs=1e-8)
    assert low.high == pytest.approx(b.high_low, abs=1e-8)
    x_bottom = np.repeat(limits[:-1] + eps, fx)
    y_top = np.repeat(limits[1:], fy)
    high = hodges_lehmann(x_bottom, y_top, level=0.9)
    assert high.estimate == pytest.approx(b.estimate_high, abs=1e-8)
    assert high.low == pytest.approx(b.low_high, abs=1e-8)
    assert high.high == pytest.approx(b.high_high, abs=1e-8)


def test_infinite_limits_give_infinite_bounds_only_where_reached():
    """X: 10 in (−∞, 0], 10 in (0, 1]; Y: 10 in (0, 1], 10 in (1, ∞). Lower bounds lo_y − hi_x
    use finite limits only: −1 (100 pairs), 0 (200), 1 (100). Upper bounds hi_y − lo_x: 1 for
    (x in (0, 1], y in (0, 1]) (100 pairs), +∞ for the other 300."""
    limits = np.array([-np.inf, 0.0, 1.0, np.inf])
    table = BinTable(limits, np.array([[10.0, 10.0, 0.0], [0.0, 10.0, 10.0]]), 10)
    b = hodges_lehmann_table(table)
    assert b.rank == 128  # n = m = 20, 95 %: ranks 128 and 273 of 400
    assert (b.estimate_low, b.low_low, b.high_low) == (0.0, 0.0, 0.0)
    assert b.low_high == np.inf and b.estimate_high == np.inf and b.high_high == np.inf


def test_table_refusals():
    limits = np.array([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="two groups"):
        hodges_lehmann_table(BinTable(limits, np.ones((3, 2)) * 5, 5))
    with pytest.raises(ValueError, match="both arms"):
        hodges_lehmann_table(BinTable(limits, np.array([[5.0, 5.0], [0.0, 0.0]]), 5))
    with pytest.raises(ValueError, match="whole numbers"):
        hodges_lehmann_table(BinTable(limits, np.array([[5.5, 5.0], [5.0, 5.0]]), 5))
    with pytest.raises(ValueError, match="level"):
        hodges_lehmann([1.0], [2.0], level=1.0)
    with pytest.raises(ValueError, match="`x` must not be empty"):
        hodges_lehmann([], [2.0])


@pytest.mark.slow
def test_coverage_of_the_raw_and_table_intervals():
    """95 % intervals for a normal shift Δ = 0.5, n = 15, m = 20 (exact c) and n = m = 40
    (normal c), tables at K = 5. 1500 replications each: SE of a coverage near 0.95 is
    √(.95·.05/1500) = 0.0056. The raw interval's coverage must be within 3.5 SE of its achieved
    level; the table's interval contains the raw one, so its coverage is at least the raw's
    (checked replication by replication)."""
    g = np.random.default_rng(28)
    reps, shift = 1500, 0.5
    for n, m in ((15, 20), (40, 40)):
        raw_hits = table_hits = 0
        achieved = None
        for _ in range(reps):
            x, y = g.normal(size=n), g.normal(shift, size=m)
            raw = hodges_lehmann(x, y)
            achieved = raw.achieved_level
            lo, hi = hodges_lehmann_table(bin_table(x, y, k=5, rng=g)).interval
            assert lo <= raw.low and raw.high <= hi
            raw_hits += raw.low <= shift <= raw.high
            table_hits += lo <= shift <= hi
        assert abs(raw_hits / reps - achieved) < 3.5 * 0.0056, (n, m, raw_hits / reps)
        assert table_hits >= raw_hits


def moses_by_inversion(x, y, level):
    """Moses's interval as the set of shifts Δ the two-sided exact Mann-Whitney test of y − Δ
    against x (scipy) does not reject at 1 − level, found by brute force over the gaps between
    the sorted pairwise differences (continuous data: all distinct): its closure."""
    d = np.sort(np.subtract.outer(np.asarray(y), np.asarray(x)).ravel())
    assert np.unique(d).size == d.size
    mids = (d[:-1] + d[1:]) / 2
    kept = [i for i, delta in enumerate(mids)
            if stats.mannwhitneyu(np.asarray(y) - delta, x, method="exact").pvalue > 1 - level]
    return float(np.median(d)), float(d[kept[0]]), float(d[kept[-1] + 1])


@pytest.mark.parametrize("n, m", [(3, 8), (5, 7), (4, 10), (8, 10), (10, 10)])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_moses_interval_is_the_inverted_scipy_test(n, m, level):
    """n, m <= 10: the estimate is the median of the brute-force differences and the interval
    is exactly the set of shifts scipy's exact test does not reject (to the last bit: both are
    order statistics of the same differences)."""
    g = np.random.default_rng(100 * n + m)
    x, y = g.normal(size=n), g.lognormal(size=m)
    r = hodges_lehmann(x, y, level=level)
    assert (r.estimate, r.low, r.high) == moses_by_inversion(x, y, level)


def test_table_bounds_hold_with_ties_and_ten_records():
    """Tied values (rounded data) at n = m = 10 and K = 3: the records' estimate and interval
    lie within the table's bounds, and the outer interval contains theirs."""
    g = np.random.default_rng(11)
    for _ in range(200):
        x, y = np.round(g.normal(size=10)), np.round(g.normal(0.7, size=10))
        assert np.unique(np.r_[x, y]).size < 20  # there are ties
        raw = hodges_lehmann(x, y)
        b = hodges_lehmann_table(bin_table(x, y, k=3, rng=g))
        assert b.estimate_low <= raw.estimate <= b.estimate_high
        assert b.low_low <= raw.low <= b.low_high
        assert b.high_low <= raw.high <= b.high_high


def federated_coverage(model, sizes, k, reps, shift, g):
    """(raw coverage, table coverage, median table width / raw width) of the 95 % intervals over
    ``reps`` replications: each center draws X and Y of ``sizes[c]`` records per arm from
    ``model`` (Y shifted by ``shift``); the table is the federated K-anonymous table built as
    the services build it (``shared.federation.federated_table``: the largest center bins, the
    others refine)."""
    raw_hits = table_hits = 0
    ratios = []
    for _ in range(reps):
        centers = [(model(g, s), model(g, s) + shift) for s in sizes]
        x = np.concatenate([c[0] for c in centers])
        y = np.concatenate([c[1] for c in centers])
        raw = hodges_lehmann(x, y)
        lo, hi = hodges_lehmann_table(federated_table(centers, k=k, rng=g)).interval
        raw_hits += raw.low <= shift <= raw.high
        table_hits += lo <= shift <= hi
        ratios.append((hi - lo) / (raw.high - raw.low))
    return raw_hits / reps, table_hits / reps, float(np.median(ratios))


MODELS = {
    "normal": lambda g, n: g.normal(size=n),
    "lognormal": lambda g, n: g.lognormal(0.0, 1.0, size=n),
}


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("sizes, k", [((40, 30, 20), 10), ((10, 10), 5)])
def test_federated_table_interval_covers_at_least_the_nominal_level(model, sizes, k):
    """The shift result's sure interval (the outer ends from the federated table) covers the
    true shift Δ = 0.5 at >= 95 % for a shifted normal and a shifted lognormal (skewed), at
    three centers of 40/30/20 records per arm (K = 10, normal rank) and two of 10 (K = 5, exact
    rank). 1000 seeded replications each (SE of a coverage near 0.95: 0.0069). Measured
    figures in docs/methods.md §12.3 (``-s`` prints them)."""
    g = np.random.default_rng(2028 + sum(sizes) + k)
    raw, table, ratio = federated_coverage(MODELS[model], sizes, k, 1000, 0.5, g)
    print(f"\n{model} sizes={sizes} K={k}: raw {raw:.3f}, table {table:.3f}, "
          f"width ratio {ratio:.2f}")
    assert raw >= 0.95 - 3 * 0.0069
    assert table >= 0.95 and table >= raw
