import numpy as np
import pytest
from scipy import stats

from shared.binning import BinTable
from shared.mwu import (
    MannWhitneyResult,
    fisher_test,
    mann_whitney,
    sum_test,
    table_test,
    weighted_test,
)

ALTERNATIVES = ["two-sided", "less", "greater"]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sizes", [(7, 9), (40, 33), (500, 800)])
def test_local_test_equals_scipy(alternative, ties, sizes):
    g = rng(sum(sizes))
    x = g.normal(size=sizes[0])
    y = g.normal(0.2, size=sizes[1])
    if ties:
        x, y = np.round(x * 2), np.round(y * 2)
    ours = mann_whitney(x, y, alternative=alternative, method="asymptotic")
    ref = stats.mannwhitneyu(x, y, alternative=alternative, method="asymptotic",
                             use_continuity=False)
    n, m = sizes
    # U = Σ sign(Y − X) = n·m − 2·U_x (scipy reports U_x).
    assert ours.statistic == pytest.approx(n * m - 2 * ref.statistic, abs=1e-10)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10, abs=1e-12)
    # Z against scipy's own normal approximation: z_scipy = (U_x − nm/2)/σ_x = −Z.
    _, t = np.unique(np.r_[x, y], return_counts=True)
    big_n = n + m
    sigma_x = np.sqrt(n * m / 12 * ((big_n + 1) - (t**3 - t).sum() / (big_n * (big_n - 1))))
    assert ours.zstatistic == pytest.approx(-(ref.statistic - n * m / 2) / sigma_x, rel=1e-10)
    assert ours.variance == pytest.approx(4 * sigma_x**2, rel=1e-10)


def test_local_statistic_by_definition():
    x = np.array([1.0, 2, 2, 5])
    y = np.array([2.0, 3, 0])
    brute = np.sign(y[None, :] - x[:, None]).sum()
    assert mann_whitney(x, y).statistic == brute


def test_all_tied_has_no_evidence():
    r = mann_whitney(np.ones(5), np.ones(4))
    assert r.statistic == 0 and r.variance == 0 and r.pvalue == 1.0


def test_bad_input():
    with pytest.raises(ValueError, match="`alternative` must be one of"):
        mann_whitney([1.0], [2.0], alternative="bigger")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`y` must not be empty"):
        mann_whitney([1.0], [])
    with pytest.raises(ValueError, match="at least one center"):
        sum_test([])


def one_value_per_bin_table(x, y):
    values = np.unique(np.r_[x, y])
    mids = (values[1:] + values[:-1]) / 2
    limits = np.r_[-np.inf, mids, np.inf]
    counts = np.array([np.bincount(np.searchsorted(values, v), minlength=values.size)
                       for v in (x, y)])
    return BinTable(limits=limits, counts=counts.astype(float), k=2)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_table_test_equals_pooled_test_when_bins_hold_one_value(alternative):
    g = rng(4)
    x = np.round(g.normal(size=120), 1)
    y = np.round(g.normal(0.3, size=90), 1)
    table = one_value_per_bin_table(x, y)
    fed = table_test(table, alternative=alternative)
    pooled = mann_whitney(x, y, alternative=alternative)
    assert fed.statistic == pytest.approx(pooled.zstatistic, rel=1e-12)
    assert fed.pvalue == pytest.approx(pooled.pvalue, rel=1e-12)
    assert fed.parts[0].statistic == pytest.approx(pooled.statistic, rel=1e-12)


def test_table_test_with_non_integer_counts():
    # Two bins; X: 2.5 in the low bin, 1.5 in the high; Y: 1 and 3. U = fx_0·fy_1 − fx_1·fy_0.
    table = BinTable(np.array([0.0, 1, 2]), np.array([[2.5, 1.5], [1.0, 3.0]]), k=1)
    r = table_test(table)
    assert r.parts[0].statistic == pytest.approx(2.5 * 3 - 1.5 * 1)
    t = np.array([3.5, 4.5])
    n, m, big_n = 4.0, 4.0, 8.0
    var = n * m * (big_n + 1) / 3 * (1 - (t**3 - t).sum() / (big_n * (big_n**2 - 1)))
    assert r.parts[0].variance == pytest.approx(var)


def centers(seed, shifts=(0.0, 0.3, 0.1), sizes=((30, 40), (50, 20), (25, 25)),
            method="asymptotic"):
    g = rng(seed)
    return [mann_whitney(g.normal(size=n), g.normal(s, size=m), method=method)
            for s, (n, m) in zip(shifts, sizes, strict=True)]


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_sum_and_weighted_tests_by_formula(alternative):
    parts = centers(1)
    u = np.array([p.statistic for p in parts])
    v = np.array([p.variance for p in parts])
    z_sum = u.sum() / np.sqrt(v.sum())
    w = np.array([p.n_x * p.n_y for p in parts]) / np.sqrt(v)
    z_w = (w * u / np.sqrt(v)).sum() / np.sqrt((w**2).sum())
    tail = {"less": stats.norm.sf, "greater": stats.norm.cdf,
            "two-sided": lambda z: 2 * stats.norm.sf(abs(z))}[alternative]
    s = sum_test(parts, alternative=alternative)
    assert s.statistic == pytest.approx(z_sum) and s.pvalue == pytest.approx(tail(z_sum))
    wt = weighted_test(parts, alternative=alternative)
    assert wt.statistic == pytest.approx(z_w) and wt.pvalue == pytest.approx(tail(z_w))
    assert [p.weight for p in wt.parts] == pytest.approx(w)


def test_fisher_method():
    parts = centers(2)
    z = np.array([p.zstatistic for p in parts])
    p_less = stats.norm.sf(z)
    t = -2 * np.log(p_less).sum()
    r = fisher_test(parts, alternative="less")
    assert r.statistic == pytest.approx(t)
    assert r.pvalue == pytest.approx(stats.chi2.sf(t, 6))
    # scipy's own Fisher combination agrees.
    assert r.pvalue == pytest.approx(stats.combine_pvalues(p_less, method="fisher").pvalue)
    two = fisher_test(parts, alternative="two-sided")
    one_sided = min(r.pvalue, fisher_test(parts, alternative="greater").pvalue)
    assert two.pvalue == pytest.approx(min(1.0, 2 * one_sided))


def test_weighted_test_has_at_least_the_sum_tests_noncentrality():
    # Common effect: the weighted noncentrality Σ w δ / √Σ w² >= Σ U-mean / √Σ V (Cauchy-Schwarz).
    parts = [MannWhitneyResult(0, v, 0, 1, n, m, ) for v, n, m in
             [(1000.0, 10, 10), (90000.0, 60, 50), (5e6, 300, 200)]]
    effect = 0.2
    means = np.array([effect * p.n_x * p.n_y for p in parts])
    v = np.array([p.variance for p in parts])
    w = np.array([p.n_x * p.n_y for p in parts]) / np.sqrt(v)
    assert (w * means / np.sqrt(v)).sum() / np.sqrt((w**2).sum()) >= means.sum() / np.sqrt(v.sum())


def test_wire_release_round_trip_gives_the_same_federated_tests():
    from shared.protocol import MWURelease

    parts = centers(5, method="auto")  # the (25, 25) center has U's exact law, on both sides
    wired = [MWURelease.model_validate_json(MWURelease.from_result(p).model_dump_json())
             for p in parts]
    for test in (sum_test, weighted_test, fisher_test):
        a = test(parts, alternative="less")
        b = test([w.to_result("less") for w in wired], alternative="less")
        assert a.statistic == b.statistic and a.pvalue == b.pvalue
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        MWURelease(statistic=1.0, variance=-1.0, n_x=3, n_y=3)
