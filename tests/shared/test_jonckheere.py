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
    r = jt.jonckheere_terpstra(*arms, method="asymptotic")
    assert r.statistic == pytest.approx(j_by_definition(arms))
    assert r.zstatistic == pytest.approx((r.statistic - r.mean) / np.sqrt(r.variance))
    assert r.pvalue == pytest.approx(stats.norm.sf(r.zstatistic), rel=1e-12)
    assert r.null == "normal" and r.exact is None
    dec = jt.jonckheere_terpstra(*arms, alternative="decreasing", method="asymptotic")
    assert dec.pvalue == pytest.approx(stats.norm.cdf(r.zstatistic), rel=1e-12)
    two = jt.jonckheere_terpstra(*arms, alternative="two-sided", method="asymptotic")
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
    raw = jt.jonckheere_terpstra(*arms, method="asymptotic")  # pairs carry no tie order
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


def exact_law_by_enumeration(values, sizes):
    """{2J: probability} over every assignment of ``values`` to arms of ``sizes``."""
    values = np.asarray(values, dtype=float)

    def splits(left, arm):  # every choice of records for arms arm, arm + 1, ...
        if arm == len(sizes) - 1:
            yield [left]
            return
        for chosen in itertools.combinations(left, sizes[arm]):
            rest = [i for i in left if i not in chosen]
            for tail in splits(rest, arm + 1):
                yield [list(chosen), *tail]

    counts: dict[int, int] = {}
    for split in splits(list(range(values.size)), 0):
        two_j = round(2 * j_by_definition([values[idx] for idx in split]))
        counts[two_j] = counts.get(two_j, 0) + 1
    total = sum(counts.values())
    return {k: c / total for k, c in counts.items()}


ENUMERATED = [
    ([1.0, 2, 3, 4, 5, 6, 7, 8, 9], (3, 3, 3)),         # no ties
    ([1.0, 1, 2, 3, 3, 3, 4, 5, 5], (3, 3, 3)),         # ties
    ([0.0, 0, 0, 1, 1, 2, 2, 2, 3, 3], (3, 3, 4)),      # heavy ties, unequal arms
    ([1.0, 2, 2, 3, 4, 4, 4, 5], (2, 2, 2, 2)),         # four arms
    ([0.0, 0, 0, 0, 1, 1, 1], (2, 4, 1)),               # two values only
    ([1.0, 2, 3, 4, 5], (1, 1, 3)),                     # arms of one record
]


@pytest.mark.parametrize("values, sizes", ENUMERATED)
def test_exact_null_equals_enumeration(values, sizes):
    """The DP's law of 2J against every assignment, given the ties (N <= 10): the same
    rationals, to rounding."""
    ref = exact_law_by_enumeration(values, sizes)
    _, t = np.unique(values, return_counts=True)
    law = jt.exact_null(sizes, t)
    ours = {law.low + i: float(p) for i, p in enumerate(law.pmf) if p > 0}
    assert set(ours) == set(ref)
    for k, p in ref.items():
        assert ours[k] == pytest.approx(p, rel=1e-12)
    mean, var = jt.null_moments(sizes, t)
    support = (law.low + np.arange(law.pmf.size)) / 2.0
    assert float(law.pmf @ support) == pytest.approx(mean, rel=1e-12)
    assert float(law.pmf @ (support - mean) ** 2) == pytest.approx(var, rel=1e-12)


@pytest.mark.parametrize("sizes", [(3, 4, 5), (6, 2, 7, 3), (10, 10, 10)])
def test_exact_null_without_ties_is_the_convolution_of_mann_whitney_laws(sizes):
    """Without ties the U of arm i against arms 1..i−1 are independent (Terpstra 1952): J's law
    is the convolution of those Mann-Whitney laws (``shared.mwu.exact_null``; 2·U_count =
    U^± + n·m)."""
    ours = jt.exact_null(sizes)
    low, pmf, before = 0, np.ones(1), sizes[0]
    for n in sizes[1:]:
        u = mwu.exact_null(before, n)  # U^± of (earlier arms as X, arm i as Y)
        step = np.zeros(u.pmf.size)
        step[:] = u.pmf
        low += u.low + before * n
        pmf = np.convolve(pmf, step)
        before += n
    # U^± moves in steps of 2 without ties: keep the reachable 2J's
    assert ours.low == low
    np.testing.assert_allclose(ours.pmf, pmf[:ours.pmf.size], rtol=1e-10, atol=1e-15)
    assert pmf[ours.pmf.size:].sum() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("values, sizes", ENUMERATED[:4])
@pytest.mark.parametrize("alternative", ["increasing", "decreasing", "two-sided"])
def test_small_samples_take_the_exact_pvalue(values, sizes, alternative):
    """N <= 50: ``auto`` is exact; the p-value is the enumerated tail at the observed J (two-
    sided: twice the smaller tail), not the normal one."""
    values = np.asarray(values)
    g = np.random.default_rng(len(values))
    values = g.permutation(values)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    arms = [values[labels == i] for i in range(len(sizes))]
    r = jt.jonckheere_terpstra(*arms, alternative=alternative)
    assert r.null == "exact" and r.exact is not None
    ref = exact_law_by_enumeration(values, sizes)
    two_j = round(2 * r.statistic)
    up = sum(p for k, p in ref.items() if k >= two_j)
    down = sum(p for k, p in ref.items() if k <= two_j)
    expected = {"increasing": up, "decreasing": down,
                "two-sided": min(1.0, 2 * min(up, down))}[alternative]
    assert r.pvalue == pytest.approx(expected, rel=1e-12)
    assert jt.jonckheere_terpstra(*arms, alternative=alternative,
                                  method="exact").pvalue == r.pvalue


def test_exact_and_normal_differ_at_small_n():
    """Three arms of three (J = 22 of 27): the exact p is .0369, the normal .0295."""
    arms = [[1.0, 3, 2], [4, 2.5, 6], [5, 3.5, 4.5]]
    exact = jt.jonckheere_terpstra(*arms)
    normal = jt.jonckheere_terpstra(*arms, method="asymptotic")
    assert exact.statistic == normal.statistic == 22
    # 62 of the 1680 assignments have J >= 22 (enumerated by the test above's helper)
    ref = exact_law_by_enumeration(np.concatenate(arms), (3, 3, 3))
    assert exact.pvalue == pytest.approx(sum(p for k, p in ref.items() if k >= 44), rel=1e-12)
    assert exact.pvalue == pytest.approx(62 / 1680, rel=1e-12)
    assert normal.pvalue == pytest.approx(stats.norm.sf(normal.zstatistic), rel=1e-12)
    assert abs(exact.pvalue - normal.pvalue) > 0.005


def test_table_and_sum_tests_are_exact_on_whole_small_tables():
    counts = [np.array([[2, 1, 0, 1], [1, 1, 2, 0], [0, 1, 1, 2]], dtype=float),
              np.array([[1, 2, 0], [0, 1, 2], [1, 0, 2]], dtype=float)]
    parts = [jt.table_test(c) for c in counts]
    assert all(p.null == "exact" for p in parts)
    # a table is the raw test on the bin numbers
    for c, part in zip(counts, parts, strict=True):
        arms = [np.repeat(np.arange(c.shape[1]), row.astype(int)).astype(float) for row in c]
        raw = jt.jonckheere_terpstra(*arms)
        assert part.pvalue == pytest.approx(raw.pvalue, rel=1e-12)
    # the sum over centers: the law of J_1 + J_2 for independent centers, by enumeration
    laws = []
    for c in counts:
        values = np.repeat(np.arange(c.shape[1]), c.sum(axis=0).astype(int)).astype(float)
        laws.append(exact_law_by_enumeration(values, tuple(int(v) for v in c.sum(axis=1))))
    total = sum(p.statistic for p in parts)
    up = sum(p1 * p2 for k1, p1 in laws[0].items() for k2, p2 in laws[1].items()
             if k1 + k2 >= round(2 * total))
    fed = jt.sum_test(parts)
    assert fed.null == "exact"
    assert fed.pvalue == pytest.approx(up, rel=1e-12)
    # a center with a normal law makes the sum normal
    mixed = jt.sum_test([parts[0], jt.table_test(counts[1], method="asymptotic")])
    assert mixed.null == "normal"
    assert mixed.pvalue == pytest.approx(stats.norm.sf(mixed.zstatistic), rel=1e-12)


def test_when_the_law_is_not_exact():
    # shared-out (non-integer) counts: normal under auto, refused under exact
    shared_out = np.array([[2.5, 1, 0.5], [1, 1.5, 2], [0, 1, 2]])
    assert jt.table_test(shared_out).null == "normal"
    with pytest.raises(ValueError, match="whole counts"):
        jt.table_test(shared_out, method="exact")
    # N > EXACT_MAX_N: normal under auto
    g = np.random.default_rng(8)
    big = [g.normal(size=17) for _ in range(3)]
    assert sum(a.size for a in big) > jt.EXACT_MAX_N
    assert jt.jonckheere_terpstra(*big).null == "normal"
    assert jt.jonckheere_terpstra(*big, method="exact").null == "exact"
    # beyond the work bound: exact refuses, auto is normal
    many = [g.normal(size=8) for _ in range(6)]
    assert jt.exact_work((8,) * 6, (1,) * 48) > jt.EXACT_MAX_WORK
    assert jt.jonckheere_terpstra(*many).null == "normal"
    with pytest.raises(ValueError, match="too large"):
        jt.jonckheere_terpstra(*many, method="exact")
    with pytest.raises(ValueError, match="method"):
        jt.jonckheere_terpstra([1.0], [2.0], method="permutation")


@pytest.mark.slow
def test_exact_level_by_simulation():
    """Under H0 with ties (3 arms of 3, 4, 5 records rounded to 4 values), 4000 seeded
    replications: the exact test (two-sided, α = .05) rejects at the rate its own law
    predicts — the mean over replications of the size P(p <= α | ties) — within 4 binomial
    SEs (SE <= 0.0035), and at no more than α + 4 SE; the normal test's rate is printed."""
    g = np.random.default_rng(2024)
    reps, alpha = 4000, 0.05
    exact_rejects = normal_rejects = 0
    sizes = []
    for _ in range(reps):
        arms = [np.clip(np.round(g.normal(size=n)), -1, 2) for n in (3, 4, 5)]
        r = jt.jonckheere_terpstra(*arms, alternative="two-sided")
        assert r.exact is not None
        exact_rejects += r.pvalue <= alpha
        normal_rejects += jt.jonckheere_terpstra(
            *arms, alternative="two-sided", method="asymptotic").pvalue <= alpha
        support = (r.exact.low + np.arange(r.exact.pmf.size)) / 2.0
        p_at = np.array([r.exact.pvalue(j, "two-sided") for j in support])
        sizes.append(float(r.exact.pmf[p_at <= alpha].sum()))
    rate, predicted = exact_rejects / reps, float(np.mean(sizes))
    se = np.sqrt(max(predicted, 0.01) * (1 - predicted) / reps)
    print(f"exact {rate:.4f} (its law: {predicted:.4f}), normal {normal_rejects / reps:.4f}")
    assert abs(rate - predicted) < 4 * se
    assert rate <= alpha + 4 * np.sqrt(alpha * (1 - alpha) / reps)
