"""Kruskal-Wallis: local against scipy.stats.kruskal, the table against the same data binned,
k = 2 against the MWU tests, the stratified tests against brute-force permutation."""

import itertools

import numpy as np
import pytest
from scipy import stats

from shared import kruskal, mwu
from shared.binning import BinTable


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sizes", [(3, 4), (5, 2, 7), (30, 41, 25, 12)])
def test_local_equals_scipy(sizes, ties):
    g = rng(sum(sizes))
    arms = [g.normal(0.3 * i, size=n) for i, n in enumerate(sizes)]
    if ties:
        arms = [np.round(a * 2) for a in arms]
    ours = kruskal.kruskal_wallis(*arms)
    ref = stats.kruskal(*arms)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.df == len(sizes) - 1
    pooled = np.concatenate(arms)
    ranks = stats.rankdata(pooled)
    starts = np.cumsum([0, *sizes])
    means = [ranks[starts[i]:starts[i + 1]].mean() for i in range(len(sizes))]
    assert ours.mean_ranks == pytest.approx(means, rel=1e-12)


def test_k2_is_the_squared_mwu_z():
    g = rng(3)
    x, y = np.round(g.normal(size=13)), np.round(g.normal(0.5, size=17))
    h = kruskal.kruskal_wallis(x, y)
    z = mwu.mann_whitney(x, y, method="asymptotic").zstatistic
    assert h.statistic == pytest.approx(z * z, rel=1e-12)
    # Directly against scipy: the two-sided MWU p-value is χ²_1's tail at H.
    ref = stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False)
    assert h.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    # S_Y = U/2 (U = Σ sign(Y − X)).
    assert h.rank_sums[1] == pytest.approx(mwu.mann_whitney(x, y).statistic / 2, rel=1e-12)


def test_table_equals_raw_kw_on_data_coarsened_to_bins():
    g = rng(5)
    limits = np.array([-np.inf, -1.0, -0.2, 0.4, 1.1, np.inf])
    arms = [g.normal(0.2 * i, size=n) for i, n in enumerate((20, 25, 18))]
    counts = np.array([np.histogram(a, bins=limits)[0] for a in arms], dtype=float)
    table = BinTable(limits, counts, 10)
    ours = kruskal.table_test(table)
    coarse = [np.searchsorted(limits, a, side="left") for a in arms]  # bin index per record
    ref = stats.kruskal(*coarse)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    # The plain counts array gives the same test.
    assert kruskal.table_test(counts).statistic == ours.statistic


def test_table_with_k2_is_the_squared_mwu_table_test():
    counts = np.array([[10.0, 12.5, 0.0, 11.5], [0.0, 10.0, 14.0, 10.0]])
    table = BinTable(np.array([0.0, 1, 2, 3, 4]), counts, 10)
    z = mwu.table_test(table).statistic
    assert kruskal.table_test(table).statistic == pytest.approx(z * z, rel=1e-12)


def test_empty_arm_is_refused_with_its_number():
    with pytest.raises(ValueError, match="arm 1"):
        kruskal.kruskal_wallis([1.0, 2.0], [], [3.0])
    with pytest.raises(ValueError, match="arm 2 has no records"):
        kruskal.table_test(np.array([[1.0, 2.0], [3.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="at least two arms"):
        kruskal.kruskal_wallis([1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        kruskal.kruskal_wallis([1.0, np.nan], [2.0])


def test_all_tied_gives_zero_not_nan():
    r = kruskal.kruskal_wallis([1.0, 1.0], [1.0, 1.0, 1.0])
    assert r.statistic == 0.0 and r.pvalue == 1.0
    fed = kruskal.sum_test([r, r])
    assert fed.statistic == 0.0 and fed.pvalue == 1.0


def _centers(seed: int, sizes, k: int, ties: bool):
    g = rng(seed)
    out = []
    for n in sizes:
        arms = [g.normal(0.2 * i + g.normal(0, 0.3), size=n + i) for i in range(k)]
        out.append([np.round(a * 1.5) if ties else a for a in arms])
    return out


@pytest.mark.parametrize("ties", [False, True])
def test_stratified_k2_reduces_to_the_mwu_sum_and_weighted_tests(ties):
    data = _centers(11, (8, 15, 30), 2, ties)
    kw = [kruskal.kruskal_wallis(*c) for c in data]
    mw = [mwu.mann_whitney(*c, method="asymptotic") for c in data]
    z = mwu.sum_test(mw).statistic
    assert kruskal.sum_test(kw).statistic == pytest.approx(z * z, rel=1e-10)
    if not ties:  # the MWU weights n·m/V are ∝ 1/(N + 1) only without ties
        zw = mwu.weighted_test(mw).statistic
        assert kruskal.weighted_test(kw).statistic == pytest.approx(zw * zw, rel=1e-10)


def test_stratified_one_center_is_the_local_test():
    data = _centers(2, (12,), 3, True)[0]
    local = kruskal.kruskal_wallis(*data)
    for test in (kruskal.sum_test, kruskal.weighted_test, kruskal.additive_test):
        assert test([local]).statistic == pytest.approx(local.statistic, rel=1e-10)
    assert kruskal.fisher_test([local]).pvalue == pytest.approx(local.pvalue, rel=1e-10)


def _quadratic_form(s, cov):
    return float(s[:-1] @ np.linalg.solve(cov[:-1, :-1], s[:-1]))


def test_stratified_moments_by_brute_force_permutation():
    """Enumerate every within-center assignment of tiny centers (N_c <= 6): the mean of the
    weighted rank-sum vector is 0 and its covariance is Σ_c w_c² Cov S_c, exactly."""
    centers = [np.array([1.0, 2.0, 2.0, 3.0, 5.0]), np.array([0.5, 0.5, 4.0, 4.0, 4.0, 7.0])]
    sizes = [(2, 2, 1), (2, 1, 3)]
    per_center = []
    for values, n in zip(centers, sizes, strict=True):
        vectors = []
        labels = np.repeat(np.arange(3), n)
        for perm in set(itertools.permutations(labels)):
            arms = [values[np.array(perm) == i] for i in range(3)]
            vectors.append(np.array(kruskal.kruskal_wallis(*arms).rank_sums))
        per_center.append(np.array(vectors))
    results = [kruskal.kruskal_wallis(*[v[np.repeat(np.arange(3), n) == i] for i in range(3)])
               for v, n in zip(centers, sizes, strict=True)]
    for w in ([1.0, 1.0], [1 / 6, 1 / 7]):
        totals = np.array([w[0] * a + w[1] * b for a in per_center[0] for b in per_center[1]])
        assert np.allclose(totals.mean(axis=0), 0.0, atol=1e-12)
        cov = np.cov(totals.T, bias=True)
        expected = sum(wc * wc * r.covariance for wc, r in zip(w, results, strict=True))
        assert np.allclose(cov, expected, rtol=1e-12, atol=1e-12)


def test_weighted_test_equals_its_formula():
    data = _centers(4, (10, 40), 3, True)
    kw = [kruskal.kruskal_wallis(*c) for c in data]
    s = sum(np.array(r.rank_sums) / (r.n + 1) for r in kw)
    cov = sum(r.covariance / (r.n + 1) ** 2 for r in kw)
    res = kruskal.weighted_test(kw)
    assert res.statistic == pytest.approx(_quadratic_form(s, cov), rel=1e-10)
    assert res.df == 2
    assert res.pvalue == pytest.approx(stats.chi2.sf(res.statistic, 2), rel=1e-10)


def test_additive_and_fisher_tests():
    kw = [kruskal.kruskal_wallis(*c) for c in _centers(9, (6, 9, 14), 3, False)]
    add = kruskal.additive_test(kw)
    assert add.statistic == pytest.approx(sum(r.statistic for r in kw))
    assert add.df == 6
    fis = kruskal.fisher_test(kw)
    assert fis.statistic == pytest.approx(-2 * sum(np.log(r.pvalue) for r in kw), rel=1e-10)
    assert fis.df == 6
    assert fis.pvalue == pytest.approx(stats.combine_pvalues([r.pvalue for r in kw]).pvalue,
                                       rel=1e-10)


def test_centers_with_different_arms_are_refused():
    a = kruskal.kruskal_wallis([1.0, 2.0], [3.0])
    b = kruskal.kruskal_wallis([1.0], [2.0], [3.0])
    with pytest.raises(ValueError, match="same arms"):
        kruskal.sum_test([a, b])
    with pytest.raises(ValueError, match="at least one"):
        kruskal.weighted_test([])


@pytest.mark.slow
def test_stratified_levels_by_simulation():
    """Level of the four stratified tests at α = 0.05 under H0 with centers differing in
    location (3 centers, 3 arms, n = 8-20 per arm, rounded data: ties). 2000 replications:
    SE of a level near 0.05 is √(.05·.95/2000) = 0.0049; we accept 0.05 ± 0.016 (3.3 SE)."""
    g = rng(2026)
    reps = 2000
    rejections = dict.fromkeys(("sum", "weighted", "fisher", "additive"), 0)
    for _ in range(reps):
        kw = []
        for n, shift in ((8, 0.0), (12, 2.0), (20, -1.0)):
            arms = [np.round(g.normal(shift, size=n) * 2) for _ in range(3)]
            kw.append(kruskal.kruskal_wallis(*arms))
        for name, test in (("sum", kruskal.sum_test), ("weighted", kruskal.weighted_test),
                           ("fisher", kruskal.fisher_test), ("additive", kruskal.additive_test)):
            rejections[name] += test(kw).pvalue < 0.05
    for name, count in rejections.items():
        assert abs(count / reps - 0.05) < 0.016, (name, count / reps)


def test_weighted_test_is_cmh_row_mean_scores_with_modified_ridits():
    """Landis, Heyman & Koch (1978): per stratum, column scores a_j (here each record's
    modified ridit, mid-rank/(N_h + 1)), row score sums f_i = Σ a over arm i, E f_i = n_i·ā,
    Cov f = N²/(N − 1)·v·(D_p − p·pᵀ) with v = Σ (a − ā)²/N and p = n/N; Q = (Σ_h (f − E f))ᵀ
    (Σ_h Cov)⁻ (Σ_h (f − E f)). Written from that formula, not from shared.kruskal."""
    data = _centers(21, (7, 11, 16), 3, True)
    dev = np.zeros(3)
    cov = np.zeros((3, 3))
    for arms in data:
        pooled = np.concatenate(arms)
        big_n = pooled.size
        scores = stats.rankdata(pooled) / (big_n + 1)
        labels = np.repeat(np.arange(3), [a.size for a in arms])
        n = np.bincount(labels).astype(float)
        f = np.bincount(labels, weights=scores)
        dev += f - n * scores.mean()
        p = n / big_n
        v = np.mean((scores - scores.mean()) ** 2)
        cov += big_n**2 / (big_n - 1) * v * (np.diag(p) - np.outer(p, p))
    q = float(dev[:-1] @ np.linalg.solve(cov[:-1, :-1], dev[:-1]))
    kw = [kruskal.kruskal_wallis(*arms) for arms in data]
    assert kruskal.weighted_test(kw).statistic == pytest.approx(q, rel=1e-10)


@pytest.mark.slow
def test_what_bins_do_to_the_test_by_simulation():
    """3 arms of 50 normal records, location steps 0 (H0) and 0.3 SD, cut into 4 or 16 bins at
    the pooled quantiles; 1000 replications each (SE of a level near 0.05: 0.0069; of a power
    near 0.75: 0.014). The table test keeps its level (0.05 ± 0.021, 3 SE), its power is at most
    the raw test's + 3 SE and, with 16 bins, within 0.05 of it; the table's H exceeds the raw H
    in a sizeable share of replications, so it is no bound either way (docs/methods.md §12.1).
    ``-s`` prints the figures quoted there."""
    g = rng(12)
    reps = 1000
    for bins in (4, 16):
        for step in (0.0, 0.3):
            raw_rej = table_rej = bigger = 0
            for _ in range(reps):
                arms = [g.normal(step * i, size=50) for i in range(3)]
                limits = np.quantile(np.concatenate(arms), np.linspace(0, 1, bins + 1))
                limits[0], limits[-1] = -np.inf, np.inf
                counts = np.array([np.histogram(a, bins=limits)[0] for a in arms], dtype=float)
                raw, table = kruskal.kruskal_wallis(*arms), kruskal.table_test(counts)
                raw_rej += raw.pvalue < 0.05
                table_rej += table.pvalue < 0.05
                bigger += table.statistic > raw.statistic
            print(f"bins={bins} step={step}: raw {raw_rej / reps:.3f}, table "
                  f"{table_rej / reps:.3f}, H_table > H_raw in {bigger / reps:.2f}")
            if step == 0.0:
                assert abs(table_rej / reps - 0.05) < 0.021
            else:
                assert table_rej / reps <= raw_rej / reps + 3 * 0.014
                if bins == 16:
                    assert table_rej / reps >= raw_rej / reps - 0.05
            assert bigger / reps > 0.2
