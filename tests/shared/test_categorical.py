"""Tests on pooled counts against scipy, R (values pasted with the R call) and published
examples."""

import numpy as np
import pytest
from scipy import stats

from shared import kruskal
from shared.categorical import (
    category_shares,
    cmh_mean_scores,
    fisher_exact_2x2,
    generalized_cmh,
    mantel_haenszel,
    pearson_chi2,
    wilson_interval,
)


def r_array(values, dim):
    """An R array(values, dim = c(r, c, K)) (filled column-major) as numpy (K, r, c)."""
    return np.asarray(values, dtype=float).reshape(dim[::-1]).transpose(0, 2, 1)


# R's ?mantelhaen.test: penicillin and rabbits (Agresti 1990, p. 233).
RABBITS = r_array([0, 0, 6, 5, 3, 0, 3, 6, 6, 2, 0, 4, 5, 6, 1, 0, 2, 5, 0, 0], (2, 2, 5))
# R's ?mantelhaen.test: job satisfaction by income and gender (Agresti 2002, p. 288).
SATISFACTION = r_array([1, 2, 0, 0, 3, 3, 1, 2, 11, 17, 8, 4, 2, 3, 5, 2, 1, 0, 0, 0, 1, 3, 0, 1,
                        2, 5, 7, 9, 1, 1, 3, 6], (4, 4, 2))


@pytest.mark.parametrize("correction", [False, True])
@pytest.mark.parametrize("table", [
    [[12, 5], [7, 9]], [[3, 10, 7], [8, 2, 9], [5, 5, 1]], [[20.5, 11], [4, 9.5]],
])
def test_pearson_equals_scipy(table, correction):
    ours = pearson_chi2(table, correction=correction)
    ref = stats.chi2_contingency(np.asarray(table), correction=correction)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.df == ref.dof
    assert np.allclose(ours.expected, ref.expected_freq, rtol=1e-12)


def test_pearson_refuses_empty_rows_and_bad_shapes():
    with pytest.raises(ValueError, match="empty row or column"):
        pearson_chi2([[1, 0], [2, 0]])
    with pytest.raises(ValueError, match="at least 2×2"):
        pearson_chi2([[1, 2, 3]])
    with pytest.raises(ValueError, match="finite counts >= 0"):
        pearson_chi2([[1, -2], [3, 4]])


def test_fisher_against_published_tea_tasting():
    """Agresti (2013) §3.5.2, Fisher's tea tasting [[3, 1], [1, 3]]: one-sided P = 0.243,
    two-sided 0.486 (exactly 17/70 and 34/70)."""
    r = fisher_exact_2x2([[3, 1], [1, 3]], alternative="greater")
    assert r.pvalue == pytest.approx(17 / 70, rel=1e-12)
    assert r.statistic == pytest.approx(9.0)
    assert fisher_exact_2x2([[3, 1], [1, 3]]).pvalue == pytest.approx(34 / 70, rel=1e-12)
    ref = stats.fisher_exact([[8, 2], [1, 5]], alternative="less")
    assert fisher_exact_2x2([[8, 2], [1, 5]], alternative="less").pvalue == ref.pvalue
    with pytest.raises(ValueError, match="whole counts"):
        fisher_exact_2x2([[1.5, 2], [3, 4]])
    with pytest.raises(ValueError, match="2×2"):
        fisher_exact_2x2([[1, 2, 3], [3, 4, 5]])


def test_cmh_against_r_mantelhaen_test():
    # mantelhaen.test(Rabbits): Mantel-Haenszel X-squared = 3.92857142857143,
    # p-value = 0.0474722551429181, common odds ratio 7, 95 % CI 1.02671268846167 47.7251333802226
    r = mantel_haenszel(RABBITS)
    assert r.statistic == pytest.approx(3.92857142857143, rel=1e-12)
    assert r.pvalue == pytest.approx(0.0474722551429181, rel=1e-10)
    assert r.odds_ratio == pytest.approx(7.0, rel=1e-12)
    assert (r.low, r.high) == pytest.approx((1.02671268846167, 47.7251333802226), rel=1e-10)
    # mantelhaen.test(Rabbits, correct = FALSE): X-squared = 5.65714285714286,
    # p-value = 0.0173844203520662
    r = mantel_haenszel(RABBITS, correction=False)
    assert r.statistic == pytest.approx(5.65714285714286, rel=1e-12)
    assert r.pvalue == pytest.approx(0.0173844203520662, rel=1e-10)


def test_cmh_moments_are_the_hypergeometric_ones():
    """E a_k and Var a_k given the margins, against scipy's hypergeometric law: the statistic
    without correction is (Σ a − Σ E)²/Σ Var."""
    tables = np.array([[[5, 3], [2, 7]], [[1, 4], [6, 2]], [[9, 1], [3, 3]]], dtype=float)
    mean = var = 0.0
    for t in tables:
        law = stats.hypergeom(int(t.sum()), int(t[:, 0].sum()), int(t[0].sum()))
        mean += law.mean()
        var += law.var()
    dev = tables[:, 0, 0].sum() - mean
    assert mantel_haenszel(tables, correction=False).statistic == pytest.approx(
        dev * dev / var, rel=1e-12)


def test_generalized_cmh_against_r():
    # mantelhaen.test(Satisfaction): Cochran-Mantel-Haenszel M^2 = 10.2000887577686, df = 9,
    # p-value = 0.334531183397821
    r = generalized_cmh(SATISFACTION)
    assert r.statistic == pytest.approx(10.2000887577686, rel=1e-12)
    assert r.df == 9
    assert r.pvalue == pytest.approx(0.334531183397821, rel=1e-10)


def test_generalized_cmh_of_2x2_tables_is_uncorrected_mh():
    r = generalized_cmh(RABBITS)
    assert r.statistic == pytest.approx(mantel_haenszel(RABBITS, correction=False).statistic,
                                        rel=1e-12)
    assert r.df == 1


def test_one_stratum_generalized_cmh_is_pearson_times_n_minus_1_over_n():
    """With K = 1 the statistic is the (N − 1)/N-scaled Pearson X² (the randomization variance
    has N − 1 where Pearson's has N)."""
    t = np.array([[3, 10, 7], [8, 2, 9], [5, 5, 1]], dtype=float)
    n = t.sum()
    assert generalized_cmh(t[None]).statistic == pytest.approx(
        pearson_chi2(t).statistic * (n - 1) / n, rel=1e-12)


def test_cmh_degenerate_strata():
    # a stratum of one record is dropped; OR_MH = ∞ when no stratum has b·c > 0
    tables = np.array([[[3, 0], [0, 4]], [[1, 0], [0, 0]], [[2, 0], [1, 2]]], dtype=float)
    r = mantel_haenszel(tables)
    assert r.odds_ratio == np.inf and r.high == np.inf
    with pytest.raises(ValueError, match="shape"):
        mantel_haenszel(np.ones((2, 3, 2)))
    with pytest.raises(ValueError, match="constant row or column"):
        mantel_haenszel(np.array([[[3, 2], [0, 0]]], dtype=float))


@pytest.mark.parametrize("count, n", [(0, 10), (1, 10), (7, 23), (50, 50), (12, 400)])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_wilson_equals_scipy(count, n, level):
    ref = stats.binomtest(count, n).proportion_ci(confidence_level=level, method="wilson")
    assert wilson_interval(count, n, level=level) == pytest.approx((ref.low, ref.high),
                                                                   abs=1e-12)


def test_wilson_against_r_prop_test():
    # prop.test(7, 23, correct = FALSE)$conf.int: 0.156040244532140 0.508657562687592
    assert wilson_interval(7, 23) == pytest.approx((0.156040244532140, 0.508657562687592),
                                                   rel=1e-12)


def test_category_shares():
    shares = category_shares([12, 30, 0, 8])
    assert [s.percent for s in shares] == pytest.approx([24.0, 60.0, 0.0, 16.0])
    low, high = wilson_interval(30, 50)
    assert (shares[1].low, shares[1].high) == pytest.approx((100 * low, 100 * high))
    assert shares[2].low == 0.0 and shares[2].high > 0
    with pytest.raises(ValueError, match="at least one record"):
        category_shares([0, 0])
    with pytest.raises(ValueError, match="count <= n"):
        wilson_interval(5, 4)


def _center_tables(seed):
    """Three centers' 3-arm tables over 5 ordered categories (records' bins)."""
    g = np.random.default_rng(seed)
    tables = []
    for n in (12, 20, 35):
        arms = [np.clip(np.round(g.normal(0.3 * i, 1.2, size=n + 2 * i)), -2, 2) for i in range(3)]
        tables.append(np.array([np.bincount((a + 2).astype(int), minlength=5) for a in arms],
                               dtype=float))
    return np.array(tables)


@pytest.mark.parametrize("scores, test", [("rank", "sum_test"), ("modridit", "weighted_test")])
def test_mean_scores_are_the_stratified_kruskal_wallis(scores, test):
    """Rank scores give kruskal.sum_test on the centers' tables, modified ridits van Elteren's
    kruskal.weighted_test: two implementations (score sums vs rank-sum deviations) agree."""
    tables = _center_tables(5)
    ours = cmh_mean_scores(tables, scores)
    ref = getattr(kruskal, test)([kruskal.table_test(t) for t in tables])
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.df == 2


def test_fixed_scores_on_two_columns_give_the_general_association():
    """With two columns any fixed scores (a, b), a != b, are an affine map of (0, 1), so row
    mean scores is the general association statistic. (Rank scores vary between strata and
    weigh them differently: not equal.)"""
    tables = _center_tables(6)[:, :, 3:]
    for scores in ([0.0, 1.0], [2.0, -5.0]):
        assert cmh_mean_scores(tables, scores).statistic == pytest.approx(
            generalized_cmh(tables).statistic, rel=1e-10)
    with pytest.raises(ValueError, match="scores"):
        cmh_mean_scores(tables, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="scores"):
        cmh_mean_scores(tables, "ridit")
