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


# 2×2×K tables drawn at random (cells 0-6, K = 2-5; the first 16 with |Σ(a − E a)| < ½, where
# R leaves M² uncorrected; the last two hand-made with Σ(a − E a) = ½ exactly and just above),
# and R 4.2.2's mantelhaen.test(x, correct = TRUE) on each, x the same table as an R array:
#   x <- array(c(a1, c1, b1, d1, a2, c2, ...), dim = c(2, 2, K)); r <- mantelhaen.test(x)
#   cat(sprintf("%.15g %.15g\n", r$statistic, r$p.value))
# (a_k = tables[k][0][0], b_k = [k][0][1], c_k = [k][1][0], d_k = [k][1][1]).
CMH_R_CORRECTED = [
    ([[[1, 3], [0, 6]], [[2, 4], [1, 1]], [[5, 3], [6, 4]], [[5, 5], [2, 2]], [[0, 5], [1, 2]]],
     0.00971847108773413, 0.921469919217414),
    ([[[5, 3], [5, 3]], [[2, 2], [3, 0]], [[2, 0], [5, 3]], [[4, 1], [0, 1]]],
     0.0836992440360327, 0.772345525317443),
    ([[[0, 1], [0, 2]], [[0, 1], [2, 6]], [[5, 2], [0, 5]], [[4, 5], [1, 0]], [[0, 4], [6, 3]]],
     0.121161434932527, 0.727778217728895),
    ([[[0, 1], [2, 2]], [[0, 0], [4, 4]], [[3, 4], [4, 1]], [[5, 4], [0, 4]]],
     0.00176342560444732, 0.966504149721409),
    ([[[6, 6], [0, 0]], [[0, 5], [6, 4]], [[6, 0], [6, 4]], [[1, 0], [1, 1]]],
     0.0151843817787419, 0.901928989847462),
    ([[[5, 5], [3, 0]], [[4, 5], [0, 1]], [[4, 3], [0, 2]], [[3, 3], [1, 1]], [[3, 2], [4, 4]]],
     0.0777591278177657, 0.780357456921752),
    ([[[4, 0], [6, 3]], [[0, 2], [5, 2]], [[5, 3], [2, 2]]],
     0.0126288608600655, 0.910523536088905),
    ([[[5, 6], [3, 4]], [[2, 4], [4, 1]], [[2, 0], [2, 0]], [[4, 1], [5, 6]]],
     0.000242347101787052, 0.987579432616185),
    ([[[4, 4], [0, 3]], [[1, 5], [6, 6]], [[0, 1], [1, 5]]],
     0.0881296310646266, 0.766568545782014),
    ([[[1, 1], [6, 5]], [[1, 2], [3, 5]]],
     0.0278613510820458, 0.867435200721382),
    ([[[4, 2], [0, 2]], [[5, 3], [0, 3]], [[0, 3], [6, 6]], [[1, 3], [6, 6]]],
     0.0704600622589472, 0.790668104315964),
    ([[[4, 6], [1, 6]], [[0, 3], [5, 2]]],
     0.13048521167601, 0.717929484424649),
    ([[[1, 5], [1, 6]], [[5, 2], [4, 2]], [[4, 2], [3, 1]]],
     0.000537562155624248, 0.981502395213228),
    ([[[5, 4], [2, 2]], [[1, 4], [0, 2]], [[0, 5], [0, 6]]],
     0.203458799593083, 0.65194336905984),
    ([[[3, 3], [0, 1]], [[4, 6], [2, 2]]],
     0.020440251572327, 0.886314341975607),
    ([[[5, 4], [2, 3]], [[5, 6], [5, 3]], [[1, 1], [2, 5]]],
     0.000777833888188167, 0.977750144590895),
    ([[[1, 3], [6, 1]], [[4, 6], [5, 1]], [[1, 6], [0, 5]]],
     2.70857210184124, 0.099810294453214),
    ([[[5, 2], [4, 3]], [[1, 0], [6, 4]], [[4, 1], [0, 3]], [[6, 2], [6, 1]], [[2, 2], [6, 3]]],
     0.336690354847699, 0.561745870192272),
    ([[[6, 4], [3, 0]], [[5, 2], [5, 2]], [[6, 6], [3, 1]]],
     0.65865401635572, 0.417035528622548),
    ([[[1, 5], [3, 6]], [[6, 1], [3, 6]]],
     0.518159231931283, 0.471627959202985),
    ([[[2, 3], [4, 3]], [[2, 0], [1, 3]]],
     0, 1),
    ([[[3, 3], [2, 4]], [[2, 2], [5, 2]], [[4, 3], [4, 5]], [[6, 1], [4, 6]], [[3, 1], [2, 6]]],
     2.35915979465197, 0.124549255100318),
    ([[[1, 0], [4, 0]], [[0, 4], [5, 4]], [[0, 2], [3, 3]]],
     2.8768353528154, 0.0898624703207869),
    ([[[6, 1], [6, 4]], [[1, 3], [5, 6]], [[0, 3], [5, 0]], [[3, 3], [2, 2]]],
     0.296444492178565, 0.586120038619583),
    ([[[5, 3], [4, 5]], [[5, 5], [1, 2]], [[4, 5], [6, 1]], [[0, 3], [6, 2]]],
     0.782305002836227, 0.376437113768859),
    ([[[3, 4], [5, 0]], [[2, 3], [6, 3]], [[1, 5], [2, 6]], [[0, 4], [0, 1]]],
     2.45072456904717, 0.117470632391651),
    ([[[5, 2], [4, 3]], [[2, 5], [4, 2]]],
     0.030690537084399, 0.860932581994413),
    ([[[2, 0], [1, 6]], [[4, 3], [0, 2]], [[2, 3], [0, 2]], [[1, 3], [3, 0]]],
     0.615375810759253, 0.432770872374003),
    ([[[2, 6], [4, 2]], [[4, 2], [0, 0]], [[4, 0], [5, 2]]],
     0.0306800143024416, 0.860956182016053),
    ([[[1, 5], [3, 3]], [[3, 5], [4, 1]]],
     2.10053596127248, 0.147247516159184),
    ([[[0, 4], [0, 1]], [[0, 0], [1, 4]], [[3, 2], [3, 4]], [[0, 2], [0, 2]]],
     0, 1),
    ([[[3, 3], [1, 1]], [[2, 4], [0, 6]], [[3, 3], [1, 1]], [[5, 5], [4, 4]], [[5, 3], [6, 6]]],
     0.323643187427112, 0.569426404763531),
    ([[[2, 6], [0, 1]], [[4, 6], [4, 3]], [[6, 3], [3, 0]], [[3, 0], [4, 2]]],
     0.00212513824431701, 0.963231166318281),
    ([[[5, 4], [0, 2]], [[6, 3], [0, 3]], [[2, 5], [4, 2]], [[4, 2], [6, 4]], [[6, 0], [4, 3]]],
     1.53349979630189, 0.215587946738772),
    ([[[2, 1], [3, 1]], [[6, 0], [1, 2]]],
     0.598150782361308, 0.439284457458826),
    ([[[3, 1], [5, 1]], [[1, 6], [2, 3]], [[2, 1], [3, 2]]],
     0.0692400602318822, 0.792446481239415),
    ([[[6, 0], [5, 6]], [[2, 1], [3, 4]], [[4, 5], [2, 1]]],
     1.22336058039927, 0.268702143637628),
    ([[[5, 1], [0, 3]], [[0, 2], [5, 6]]],
     0.159634551495016, 0.689493199317347),
    ([[[1, 4], [5, 5]], [[6, 1], [2, 5]], [[4, 4], [0, 2]], [[4, 3], [2, 2]]],
     0.756879846498166, 0.384306733973532),
    ([[[2, 2], [4, 2]], [[5, 5], [0, 4]], [[2, 0], [6, 5]]],
     0.946038528114255, 0.330729709911788),
    ([[[1, 0], [0, 1]], [[1, 1], [1, 1]]],
     0, 1),
    ([[[2, 0], [0, 1]], [[1, 1], [1, 1]]],
     0.05, 0.823063273758121),
]


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


@pytest.mark.parametrize("tables, statistic, pvalue", CMH_R_CORRECTED)
def test_cmh_correction_as_r_on_random_tables(tables, statistic, pvalue):
    """R subtracts Yates's ½ only when |Σ(a − E a)| >= ½: below that M² is the uncorrected one
    (not 0 with p = 1). R prints 15 digits: rel 1e-9 leaves room for summation order."""
    r = mantel_haenszel(np.asarray(tables, dtype=float))
    assert r.statistic == pytest.approx(statistic, rel=1e-9, abs=1e-13)
    assert r.pvalue == pytest.approx(pvalue, rel=1e-9)


def test_cmh_small_deviation_is_left_uncorrected():
    t = np.asarray(CMH_R_CORRECTED[0][0], dtype=float)
    dev = sum(k[0, 0] - k[0].sum() * k[:, 0].sum() / k.sum() for k in t)
    assert 0 < abs(dev) < 0.5
    corrected, plain = mantel_haenszel(t), mantel_haenszel(t, correction=False)
    assert corrected.statistic == pytest.approx(plain.statistic, rel=1e-12)
    assert 0 < corrected.statistic and corrected.pvalue < 1
    # Exactly ½: corrected to 0, p = 1 (R's `>= .5`).
    half = mantel_haenszel(np.array([[[1, 0], [0, 1]], [[1, 1], [1, 1]]], dtype=float))
    assert half.statistic == 0 and half.pvalue == 1


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


# -- the share interval of noisy counts (docs/methods.md §12.7) -------------------------------


def _score_set(counts: np.ndarray, variances: np.ndarray, j: int) -> tuple[float, float]:
    """{p in [0, 1] : U(p)² <= z² V(p)} read off a fine grid of p (no algebra shared with
    the quadratic): U(p) = Y_j − p·T, V(p) = max(T, 0)·p(1 − p) + (1 − p)²σ²_j + p²Σσ²_rest."""
    z2 = stats.norm.ppf(0.975) ** 2
    p = np.linspace(0.0, 1.0, 200_001)
    total = counts.sum()
    u = counts[j] - p * total
    v = (max(total, 0.0) * p * (1 - p) + (1 - p) ** 2 * variances[j]
         + p**2 * (variances.sum() - variances[j]))
    inside = p[u * u <= z2 * v]
    return float(inside.min()), float(inside.max())


def test_the_noisy_share_interval_is_the_score_set() -> None:
    from shared.categorical import noisy_share_interval

    rng = np.random.default_rng(20261207)
    for _ in range(40):
        c = int(rng.integers(2, 6))
        variances = np.full(c, float(rng.uniform(1, 70)))
        counts = rng.multinomial(int(rng.integers(20, 300)), np.ones(c) / c) + rng.normal(
            0, np.sqrt(variances))
        j = int(rng.integers(c))
        lo, hi = noisy_share_interval(counts, variances, j)
        ref = _score_set(counts, variances, j)
        assert (lo, hi) == pytest.approx(ref, abs=2e-5)  # the grid's step is 5e-6
    # A share near 0 with a negative noisy count: the interval still reaches above 0.
    lo, hi = noisy_share_interval(np.array([-4.0, 90.0, 95.0]), np.full(3, 66.3), 0)
    assert lo == 0.0 and 0.05 < hi < 0.15
    # Noise that swamps the counts leaves every share possible.
    assert noisy_share_interval(np.array([1.0, 2.0]), np.full(2, 100.0), 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="index"):
        noisy_share_interval(np.array([1.0, 2.0]), np.ones(2), 2)
    with pytest.raises(ValueError, match="variance"):
        noisy_share_interval(np.array([1.0, 2.0]), np.array([1.0, -1.0]), 0)
