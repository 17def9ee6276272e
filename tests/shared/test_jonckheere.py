"""Jonckheere-Terpstra: J by its definition, its null mean and tie-corrected variance against
exhaustive enumeration of tiny data, assembly from pairwise MWU results and from a bin table."""

import itertools

import numpy as np
import pytest
from scipy import stats

from shared import jonckheere as jt
from shared import mwu
from shared.binning import BinTable


def j_by_definition(arms) -> float:
    total = 0.0
    for a in range(len(arms)):
        for b in range(a + 1, len(arms)):
            d = np.subtract.outer(arms[b], arms[a])
            total += float(np.sum(d > 0) + 0.5 * np.sum(d == 0))
    return total


@pytest.mark.parametrize("values, sizes", [
    ([1.0, 2, 3, 4, 5, 6, 7], (2, 3, 2)),           # no ties
    ([1.0, 1, 2, 3, 3, 3, 4, 5], (3, 2, 3)),        # ties
    ([0.0, 0, 0, 1, 1, 2], (2, 2, 2)),              # heavy ties
    ([1.0, 2, 2, 3, 4, 4, 4, 5], (2, 2, 2, 2)),     # four arms
])
def test_null_moments_equal_exhaustive_permutation(values, sizes):
    """Every assignment of the N <= 8 values to arms of these sizes, equally likely: the exact
    null mean and variance of J equal the formulas (to rounding)."""
    values = np.asarray(values)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    js = []
    for perm in set(itertools.permutations(labels)):
        p = np.array(perm)
        js.append(j_by_definition([values[p == i] for i in range(len(sizes))]))
    _, t = np.unique(values, return_counts=True)
    mean, var = jt.null_moments(sizes, t)
    assert mean == pytest.approx(np.mean(js), abs=1e-12)
    assert var == pytest.approx(np.var(js), rel=1e-12)
    # The statistic of the listed assignment is J's definition.
    observed = jt.jonckheere_terpstra(*[values[labels == i] for i in range(len(sizes))])
    assert observed.statistic == pytest.approx(j_by_definition(
        [values[labels == i] for i in range(len(sizes))]))


def test_raw_statistic_and_p():
    g = np.random.default_rng(1)
    arms = [np.round(g.normal(0.3 * i, size=n)) for i, n in enumerate((9, 12, 10))]
    r = jt.jonckheere_terpstra(*arms)
    assert r.statistic == pytest.approx(j_by_definition(arms))
    assert r.zstatistic == pytest.approx((r.statistic - r.mean) / np.sqrt(r.variance))
    assert r.pvalue == pytest.approx(stats.norm.sf(r.zstatistic), rel=1e-12)
    dec = jt.jonckheere_terpstra(*arms, alternative="decreasing")
    assert dec.pvalue == pytest.approx(stats.norm.cdf(r.zstatistic), rel=1e-12)
    two = jt.jonckheere_terpstra(*arms, alternative="two-sided")
    assert two.pvalue == pytest.approx(2 * min(r.pvalue, dec.pvalue), rel=1e-12)
    # Reversing the arms' order reverses the trend.
    rev = jt.jonckheere_terpstra(*arms[::-1])
    assert rev.zstatistic == pytest.approx(-r.zstatistic)


def test_two_arms_is_the_mwu_test():
    g = np.random.default_rng(2)
    x, y = np.round(g.normal(size=11)), np.round(g.normal(0.4, size=14))
    r = jt.jonckheere_terpstra(x, y)
    m = mwu.mann_whitney(x, y, method="asymptotic")
    assert r.zstatistic == pytest.approx(m.zstatistic, rel=1e-12)
    assert r.variance == pytest.approx(m.variance / 4, rel=1e-12)


def test_from_pairs_equals_the_raw_test():
    g = np.random.default_rng(3)
    arms = [np.round(g.normal(0.2 * i, size=n) * 2) for i, n in enumerate((8, 10, 7, 12))]
    pairs = {(a, b): mwu.mann_whitney(arms[a], arms[b])
             for a in range(4) for b in range(a + 1, 4)}
    _, t = np.unique(np.concatenate(arms), return_counts=True)
    raw = jt.jonckheere_terpstra(*arms)
    fed = jt.from_pairs(pairs, tie_sizes=t)
    assert fed.statistic == pytest.approx(raw.statistic)
    assert fed.variance == pytest.approx(raw.variance, rel=1e-12)
    assert fed.pvalue == pytest.approx(raw.pvalue, rel=1e-12)
    # Without the tie sizes: the no-ties variance, larger, so a smaller |z| (conservative).
    plain = jt.from_pairs(pairs)
    assert not plain.tie_corrected and plain.variance > raw.variance
    assert abs(plain.zstatistic) < abs(raw.zstatistic)


def test_from_pairs_refuses_incomplete_or_inconsistent_pairs():
    x, y, z = [1.0, 2.0], [3.0, 4.0, 5.0], [0.0]
    pairs = {(0, 1): mwu.mann_whitney(x, y), (1, 2): mwu.mann_whitney(y, z)}
    with pytest.raises(ValueError, match=r"missing \[\(0, 2\)\]"):
        jt.from_pairs(pairs)
    pairs[(0, 2)] = mwu.mann_whitney(x, [0.0, 1.0])
    with pytest.raises(ValueError, match="arm 2 has"):
        jt.from_pairs(pairs)
    with pytest.raises(ValueError, match="alternative"):
        jt.jonckheere_terpstra(x, y, alternative="up")
    with pytest.raises(ValueError, match="arm 1"):
        jt.jonckheere_terpstra(x, [])


def test_table_equals_raw_test_on_data_coarsened_to_bins():
    g = np.random.default_rng(4)
    limits = np.array([-np.inf, -0.5, 0.0, 0.6, np.inf])
    arms = [g.normal(0.25 * i, size=n) for i, n in enumerate((15, 20, 17))]
    counts = np.array([np.histogram(a, bins=limits)[0] for a in arms], dtype=float)
    coarse = [np.searchsorted(limits, a).astype(float) for a in arms]
    ref = jt.jonckheere_terpstra(*coarse)
    ours = jt.table_test(BinTable(limits, counts, 10))
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.variance == pytest.approx(ref.variance, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_sum_over_centers():
    g = np.random.default_rng(5)
    parts = [jt.jonckheere_terpstra(*[g.normal(0.2 * i, size=n) for i in range(3)])
             for n in (6, 9, 15)]
    fed = jt.sum_test(parts)
    assert fed.statistic == pytest.approx(sum(p.statistic for p in parts))
    assert fed.variance == pytest.approx(sum(p.variance for p in parts))
    assert fed.zstatistic == pytest.approx(
        (fed.statistic - sum(p.mean for p in parts)) / np.sqrt(fed.variance))


@pytest.mark.slow
def test_levels_by_simulation():
    """Level at α = 0.05 (two-sided) under H0, 3 arms of 12-20 records rounded to 6 values
    (heavy ties), 2000 replications: SE 0.0049. The tie-corrected test is within 0.05 ± 0.016
    (3.3 SE); the no-ties variance (pairwise releases without tie sizes) rejects no more often
    in any replication, since its |z| is smaller — conservative."""
    g = np.random.default_rng(77)
    reps = 2000
    corrected = plain = 0
    for _ in range(reps):
        arms = [np.clip(np.round(g.normal(size=n)), -2, 3) for n in (12, 15, 20)]
        pairs = {(a, b): mwu.mann_whitney(arms[a], arms[b], method="asymptotic")
                 for a in range(3) for b in range(a + 1, 3)}
        _, t = np.unique(np.concatenate(arms), return_counts=True)
        with_ties = jt.from_pairs(pairs, tie_sizes=t, alternative="two-sided")
        without = jt.from_pairs(pairs, alternative="two-sided")
        assert without.pvalue >= with_ties.pvalue
        corrected += with_ties.pvalue < 0.05
        plain += without.pvalue < 0.05
    assert abs(corrected / reps - 0.05) < 0.016, corrected / reps
    assert plain <= corrected
