"""U's exact permutation law at small N (``shared.mwu.exact_null``): against scipy's exact test
without ties, brute-force enumeration of every split with ties, and how the federated tests use
it (docs/methods.md §3.1)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from shared.mechanisms import Laplace
from shared.mwu import (
    EXACT_MAX_N,
    Alternative,
    exact_null,
    fisher_test,
    mann_whitney,
    public_exact_null,
    released_result,
    sum_test,
    weighted_test,
)

ALTERNATIVES = ["two-sided", "less", "greater"]


def brute_force_law(pooled: np.ndarray, m: int) -> Counter[int]:
    """P(U = u) × C(N, m): U = Σ sign(Y − X) over every choice of which m pooled values are Y."""
    law: Counter[int] = Counter()
    idx = range(pooled.size)
    for ys in itertools.combinations(idx, m):
        mask = np.zeros(pooled.size, dtype=bool)
        mask[list(ys)] = True
        law[int(np.sign(pooled[mask][None, :] - pooled[~mask][:, None]).sum())] += 1
    return law


def brute_force_pvalue(x: np.ndarray, y: np.ndarray, alternative: str) -> float:
    law = brute_force_law(np.r_[x, y], y.size)
    u = int(np.sign(y[None, :] - x[:, None]).sum())
    total = sum(law.values())
    upper = sum(c for v, c in law.items() if v >= u) / total
    lower = sum(c for v, c in law.items() if v <= u) / total
    return {"less": upper, "greater": lower, "two-sided": min(1.0, 2 * min(upper, lower))}[
        alternative]


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("sizes", [(1, 1), (3, 2), (5, 7), (10, 10), (8, 17), (25, 25)])
def test_without_ties_it_is_scipys_exact_test(sizes: tuple[int, int],
                                              alternative: Alternative) -> None:
    g = np.random.default_rng(sum(sizes))
    for shift in (0.0, 0.8, -1.5):
        x, y = g.normal(size=sizes[0]), g.normal(shift, size=sizes[1])
        ours = mann_whitney(x, y, alternative=alternative)  # auto: exact at N <= EXACT_MAX_N
        ref = stats.mannwhitneyu(x, y, alternative=alternative, method="exact")
        assert ours.null == "exact"
        assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-11, abs=1e-15)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize(("x", "y"), [
    ([1, 2, 2, 3], [2, 3, 3, 4, 5]),
    ([0, 0, 0, 1, 1], [1, 1, 2, 2, 2, 2]),             # three values: heavy ties
    ([1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 2]),             # nearly all tied
    ([5, 4, 3, 3, 3, 2], [1, 1, 1, 2, 7]),
    ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]),        # the extreme split, no ties
    ([1, 2, 2, 4, 4, 6], [4, 4, 8, 9, 9, 9]),          # the extreme split with ties
])
def test_with_ties_it_is_the_permutation_law_by_brute_force(
        x: list[int], y: list[int], alternative: Alternative) -> None:
    """Every C(N, m) split enumerated: the tie-conditional permutation p-value."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ours = mann_whitney(xa, ya, alternative=alternative)
    assert ours.null == "exact"
    assert ours.pvalue == pytest.approx(brute_force_pvalue(xa, ya, alternative), rel=1e-12)
    # and the whole law
    _, ties = np.unique(np.r_[xa, ya], return_counts=True)
    law = exact_null(xa.size, ya.size, ties)
    ref = brute_force_law(np.r_[xa, ya], ya.size)
    total = sum(ref.values())
    for i, p in enumerate(law.pmf):
        assert p == pytest.approx(ref.get(law.low + i, 0) / total, abs=1e-15)


def test_the_default_switches_to_the_normal_law_above_exact_max_n() -> None:
    g = np.random.default_rng(3)
    small = mann_whitney(g.normal(size=25), g.normal(size=EXACT_MAX_N - 25))
    big = mann_whitney(g.normal(size=25), g.normal(size=EXACT_MAX_N - 24))
    assert (small.null, big.null) == ("exact", "normal")
    forced = mann_whitney(g.normal(size=40), g.normal(size=40), method="exact")
    assert forced.null == "exact" and forced.exact is not None
    with pytest.raises(ValueError, match="`method` must be one of"):
        mann_whitney([1.0, 2.0], [3.0], method="permutation")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`tie_sizes` must be"):
        exact_null(3, 3, [2, 2, 1])
    with pytest.raises(ValueError, match="method='asymptotic'"):  # memory bounded
        mann_whitney(np.arange(300.0), np.arange(300.0), method="exact")


def test_the_exact_tests_level_at_n_10() -> None:
    """n = m = 10, no ties, α = .01 two-sided: the normal approximation rejects with probability
    .0068 (its level, from the exact law), the exact test with .0089 (the largest attainable
    level <= α); at α = .05: .0524 (above α) and .0433."""
    law = exact_null(10, 10)
    u = np.arange(law.low, law.high + 1)
    v = 10 * 10 * 21 / 3
    for alpha, normal_level, exact_level in ((0.01, 0.00684, 0.00893), (0.05, 0.05243, 0.04326)):
        z = stats.norm.isf(alpha / 2)
        assert law.pmf[np.abs(u) >= z * math.sqrt(v) - 1e-9].sum() == pytest.approx(
            normal_level, abs=5e-6)
        p = np.array([law.pvalue(float(k), "two-sided") for k in u])
        level = law.pmf[p <= alpha].sum()
        assert level <= alpha and level == pytest.approx(exact_level, abs=5e-6)


def test_a_release_without_ties_gets_its_exact_law_at_the_coordinator() -> None:
    """The released (U, V, n, m) of a small center without ties determine U's law; with ties
    (V below the no-ties V) or noise they do not, and the normal law stays."""
    g = np.random.default_rng(4)
    x, y = g.normal(size=9), g.normal(0.7, size=12)
    local = mann_whitney(x, y)
    released = released_result(local.statistic, local.variance, 9, 12, None, "less")
    assert released.null == "exact"
    assert released.pvalue == pytest.approx(
        stats.mannwhitneyu(x, y, alternative="less", method="exact").pvalue, rel=1e-11)
    xt, yt = np.round(x), np.round(y)
    tied = mann_whitney(xt, yt)
    assert tied.null == "exact"  # locally, with its ties
    assert public_exact_null(tied.statistic, tied.variance, 9, 12) is None
    assert released_result(tied.statistic, tied.variance, 9, 12).null == "normal"
    assert public_exact_null(local.statistic + 1, local.variance, 9, 12) is None  # parity
    assert public_exact_null(0.0, 30 * 31 * 62 / 3, 30, 31) is None  # N above EXACT_MAX_N


def test_the_sum_test_convolves_the_centers_exact_laws() -> None:
    """Three small centers without ties: P(Σ U_l >= s) by brute force over every split of every
    center (the product of their enumerations)."""
    g = np.random.default_rng(6)
    data = [(g.normal(size=n), g.normal(0.4, size=m)) for n, m in ((4, 5), (3, 6), (6, 4))]
    parts = [mann_whitney(x, y) for x, y in data]
    laws = [brute_force_law(np.r_[x, y], y.size) for x, y in data]
    total: Counter[int] = Counter({0: 1})
    for law in laws:
        nxt: Counter[int] = Counter()
        for (a, ca), (b, cb) in itertools.product(total.items(), law.items()):
            nxt[a + b] += ca * cb
        total = nxt
    s = int(sum(p.statistic for p in parts))
    weight = sum(total.values())
    upper = sum(c for v, c in total.items() if v >= s) / weight
    lower = sum(c for v, c in total.items() if v <= s) / weight
    result = sum_test(parts, alternative="less")
    assert result.null == "exact" and result.pvalue == pytest.approx(upper, rel=1e-12)
    assert sum_test(parts, alternative="greater").pvalue == pytest.approx(lower, rel=1e-12)
    # Fisher combines the centers' exact p-values; the weighted test stays normal
    fisher = fisher_test(parts, alternative="less")
    exact_p = [brute_force_pvalue(x, y, "less") for x, y in data]
    assert fisher.statistic == pytest.approx(-2 * sum(math.log(p) for p in exact_p), rel=1e-12)
    assert [part.null for part in fisher.parts] == ["exact"] * 3 and fisher.null == "chi2"
    assert weighted_test(parts).null == "normal"


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_a_small_noisy_release_is_referred_to_us_exact_law_plus_the_noise(
        alternative: Alternative, kind: str) -> None:
    """n = 5, m = 6 (N = 11): P(U + w >= t) = Σ_u P(U = u)·P(w >= t − u), U's law by brute
    force over all 462 splits, w's tail from scipy, summed directly."""
    from shared.noisy_null import NoiseLaw

    x, y = np.array([0.3, 1.2, -0.5, 2.2, 0.9]), np.array([1.5, 2.4, 0.1, 3.3, 1.9, 2.8])
    law = brute_force_law(np.r_[x, y], y.size)
    total = sum(law.values())
    noise = NoiseLaw.laplace(8.0) if kind == "laplace" else NoiseLaw.gaussian(6.0)
    ref_w = stats.laplace(scale=8.0) if kind == "laplace" else stats.norm(scale=6.0)
    for t in (-40.0, -3.7, 0.0, 12.5, 31.0, 70.0):
        upper = sum(c * ref_w.sf(t - u) for u, c in law.items()) / total
        lower = sum(c * ref_w.cdf(t - u) for u, c in law.items()) / total
        want = {"less": upper, "greater": lower,
                "two-sided": min(1.0, 2 * min(upper, lower))}[alternative]
        got = released_result(t, 5 * 6 * 12 / 3, 5, 6, noise, alternative)
        assert got.null == "exact+noise"
        assert got.pvalue == pytest.approx(want, rel=1e-12)
    # a far tail keeps its relative precision (log space)
    far = released_result(400.0, 5 * 6 * 12 / 3, 5, 6, NoiseLaw.laplace(8.0), "less").pvalue
    want_far = sum(c * stats.laplace(scale=8.0).sf(400.0 - u) for u, c in law.items()) / total
    assert 0 < far == pytest.approx(want_far, rel=1e-12)


def test_noisy_small_centers_in_the_federated_tests() -> None:
    """Fisher takes each small noisy center's p-value from U's exact law + its noise; the sum
    and weighted tests keep N(0, Σ V) + noise (a sum of Laplace noises has no closed form to
    convolve a lattice with); a center above EXACT_MAX_N keeps N(0, V) + noise."""
    g = np.random.default_rng(9)
    parts = [mann_whitney(g.normal(size=n), g.normal(0.5, size=m),
                          noise=Laplace(1.0, 2.0 * max(n, m)), rng=g)
             for n, m in ((10, 12), (15, 20), (40, 30))]
    assert [p.null for p in parts] == ["exact+noise", "exact+noise", "normal+noise"]
    fisher = fisher_test(parts, alternative="less")
    assert [part.null for part in fisher.parts] == ["exact+noise", "exact+noise", "normal+noise"]
    assert fisher.statistic == pytest.approx(-2 * sum(math.log(released_result(
        p.statistic, p.variance, p.n_x, p.n_y, p.noise, "less").pvalue) for p in parts))
    assert sum_test(parts).null == "normal+noise" and weighted_test(parts).null == "normal+noise"


def test_with_ties_the_no_ties_law_is_unsafe_without_noise_and_safe_with_it() -> None:
    """Why a release with ties keeps the normal law at the coordinator, and why a noisy one may
    use the no-ties law + noise. n = m = 5 with ties (2, 1, 1, 2, 1, 1, 1, 1): referring U to
    the no-ties exact law rejects with probability 1/63 = 1.59α at α = .01 (computed from the
    tie-conditional law). With Laplace noise (ε = 1, 5), over 30 random tie structures at
    n = m = 5-15, the no-ties law + noise never rejects with probability above α."""
    from scipy import optimize

    from shared.noisy_null import NoiseLaw

    tied, free = exact_null(5, 5, [2, 1, 1, 2, 1, 1, 1, 1]), exact_null(5, 5)
    u = np.arange(tied.low, tied.high + 1)
    p = np.array([free.pvalue(float(k), "two-sided") for k in u])
    assert tied.pmf[p <= 0.01].sum() == pytest.approx(1 / 63)

    g = np.random.default_rng(0)
    for _ in range(30):
        n = int(g.integers(5, 16))
        cuts = np.sort(g.choice(np.arange(1, 2 * n), int(g.integers(1, 2 * n - 1)),
                                replace=False))
        ties = np.diff(np.r_[0, cuts, 2 * n])
        tied, free = exact_null(n, n, ties), exact_null(n, n)
        grid = np.arange(tied.low, tied.high + 1, dtype=float)
        for eps in (1.0, 5.0):
            b = 2.0 * n / eps
            noise = NoiseLaw.laplace(b)
            for alpha in (0.01, 0.05):
                c = optimize.brentq(
                    lambda t, noise=noise, alpha=alpha, free=free:
                    math.exp(free.noisy_log_tails(t, noise)[0]) - alpha / 2,
                    0.0, 100.0 * (n * n + b), xtol=1e-10)
                level = float(np.sum(tied.pmf * (stats.laplace.sf(c - grid, scale=b)
                                                 + stats.laplace.sf(c + grid, scale=b))))
                assert level <= alpha * (1 + 1e-6), (n, list(ties), eps, alpha, level / alpha)


@pytest.mark.slow
def test_level_by_simulation_at_n_10_with_and_without_ties() -> None:
    """H0 at n = m = 10: normal data, and the same rounded to 5 values (heavy ties). 20 000
    replications each, standard error of a level of .01: 0.0007, of .05: 0.0015. The exact test
    (the default) must hold α within 3 SE; the normal law is shown for comparison (with -s)."""
    g = np.random.default_rng(20261202)
    reps = 20_000
    for rounded in (False, True):
        hits = {("exact", a): 0 for a in (0.01, 0.05)} | {("normal", a): 0 for a in (0.01, 0.05)}
        for _ in range(reps):
            x, y = g.normal(size=10), g.normal(size=10)
            if rounded:
                x, y = np.clip(np.round(x), -2, 2), np.clip(np.round(y), -2, 2)
            p_exact = mann_whitney(x, y).pvalue
            p_normal = mann_whitney(x, y, method="asymptotic").pvalue
            for a in (0.01, 0.05):
                hits["exact", a] += p_exact <= a
                hits["normal", a] += p_normal <= a
        print({k: v / reps for k, v in hits.items()}, "ties" if rounded else "no ties")
        for a in (0.01, 0.05):
            se = math.sqrt(a * (1 - a) / reps)
            assert hits["exact", a] / reps <= a + 3 * se


@pytest.mark.slow
def test_federated_levels_with_small_centers() -> None:
    """Three centers of n = m = 10 under H0, 10 000 replications (SE at α = .05: 0.0022, at
    .01: 0.0010): the sum test on the convolution of the exact laws and Fisher's method on exact
    p-values hold their level (Fisher's conservatively: exact p-values are discrete)."""
    g = np.random.default_rng(7)
    reps = 10_000
    hits = {(t, a): 0 for t in ("sum", "fisher") for a in (0.01, 0.05)}
    for _ in range(reps):
        parts = [mann_whitney(g.normal(size=10), g.normal(size=10)) for _ in range(3)]
        for name, test in (("sum", sum_test), ("fisher", fisher_test)):
            p = test(parts).pvalue
            for a in (0.01, 0.05):
                hits[name, a] += p <= a
    print({k: v / reps for k, v in hits.items()})
    for (_, a), v in hits.items():
        assert v / reps <= a + 3 * math.sqrt(a * (1 - a) / reps)


@pytest.mark.slow
def test_level_of_a_small_noisy_center_by_simulation() -> None:
    """n = m = 10, ε = 3 (Laplace(20/3)), H0, continuous data: U's exact law + the noise gives
    the level α itself; 10 000 replications, SE at α = .05: 0.0022, at .01: 0.0010; within
    3 SE on both sides. (N(0, V) + noise: 0.83α at α = .01 here, computed exactly.)"""
    g = np.random.default_rng(11)
    reps = 10_000
    hits = {0.01: 0, 0.05: 0}
    for _ in range(reps):
        p = mann_whitney(g.normal(size=10), g.normal(size=10), noise=Laplace(3.0, 20.0),
                         rng=g).pvalue
        for a in hits:
            hits[a] += p <= a
    print({a: h / reps for a, h in hits.items()})
    for a, h in hits.items():
        assert abs(h / reps - a) <= 3 * math.sqrt(a * (1 - a) / reps)


def _tied_pair(seed: int, n: int, m: int, values: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    return (g.integers(0, values, n).astype(float), g.integers(0, values, m).astype(float))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_tied_release_carries_its_exact_tails_to_the_coordinator(seed: int) -> None:
    """A small center with ties releases U's two exact tails at its U (given its ties, which
    the released numbers do not carry); the coordinator's p-value for every alternative is then
    the permutation test's, by brute force over all C(9, 4) = 126 splits, where the old release
    fell back to the normal law. Fisher takes it; the sum test stays normal (it convolves laws,
    which a tied release does not carry)."""
    from shared.protocol import MWURelease

    x, y = _tied_pair(seed, 4, 5, 3)
    release = MWURelease.from_result(mann_whitney(x, y))
    assert release.exact_log_tails is not None
    assert release.variance < 4 * 5 * 10 / 3  # ties: the no-ties law is not the law
    assert public_exact_null(release.statistic, release.variance, 4, 5) is None
    for alternative in ALTERNATIVES:
        got = release.to_result(alternative)
        assert got.null == "exact"
        assert got.pvalue == pytest.approx(brute_force_pvalue(x, y, alternative), rel=1e-12)
    parts = [release.to_result(), MWURelease.from_result(mann_whitney(*_tied_pair(9, 6, 7, 4)))
             .to_result()]
    fisher = fisher_test(parts, alternative="less")
    assert [p.null for p in fisher.parts] == ["exact", "exact"]
    want = [brute_force_pvalue(x, y, "less"),
            brute_force_pvalue(*_tied_pair(9, 6, 7, 4), "less")]
    assert fisher.statistic == pytest.approx(-2 * sum(math.log(p) for p in want), rel=1e-12)
    assert sum_test(parts).null == "normal"
    # a noisy release, or one above EXACT_MAX_N, carries none
    assert MWURelease.from_result(mann_whitney(
        x, y, noise=Laplace(1.0, 10.0), rng=np.random.default_rng(0))).exact_log_tails is None
    big = _tied_pair(seed, 26, 25, 5)
    assert MWURelease.from_result(mann_whitney(*big)).exact_log_tails is None


def test_released_exact_tails_that_cannot_be_are_named() -> None:
    """``check_exact_tails``: the coordinator's check of what a center released."""
    from shared.mwu import check_exact_tails

    x, y = _tied_pair(1, 4, 5, 3)
    local = mann_whitney(x, y)
    tails = local.release_tails()
    assert tails is not None
    assert check_exact_tails(tails, local.statistic, local.variance, 4, 5) is None
    assert "outside" in str(check_exact_tails((0.1, tails[1]), local.statistic,
                                              local.variance, 4, 5))
    assert "outside" in str(check_exact_tails((-math.log(126) - 1, 0.0), local.statistic,
                                              local.variance, 4, 5))
    assert "less than 1" in str(check_exact_tails((math.log(0.3), math.log(0.3)),
                                                  local.statistic, local.variance, 4, 5))
    assert "n + m <= 50" in str(check_exact_tails(tails, 0.0, 30 * 31 * 62 / 3, 30, 31))
    # without ties the numbers determine the law: released tails must be its tails
    free = mann_whitney(np.arange(4.0), np.arange(4.0, 9.0) - 2.5)
    ok = free.release_tails()
    assert ok is not None
    assert check_exact_tails(ok, free.statistic, free.variance, 4, 5) is None
    assert "without ties" in str(check_exact_tails((ok[0], math.log(0.999)), free.statistic,
                                                   free.variance, 4, 5))


@pytest.mark.slow
def test_level_of_a_tied_small_release_at_the_coordinator_by_simulation() -> None:
    """H0 at n = m = 10 with heavy ties (data on 4 values, every tie structure drawn anew):
    the released result's p-value (from the center's exact tails) holds α; 10 000
    replications (about 40 s on a loaded machine), SE .0010 at α = .01 and .0022 at .05,
    asserted <= α + 3 SE. The normal law the coordinator used before is shown beside it
    (with -s)."""
    from shared.protocol import MWURelease

    g = np.random.default_rng(27)
    reps = 10_000
    hits = {(law, a): 0 for law in ("exact", "normal") for a in (0.01, 0.05)}
    for _ in range(reps):
        x, y = g.integers(0, 4, 10).astype(float), g.integers(0, 4, 10).astype(float)
        release = MWURelease.from_result(mann_whitney(x, y))
        p_exact = release.to_result().pvalue
        p_normal = released_result(release.statistic, release.variance, 10, 10).pvalue
        for a in (0.01, 0.05):
            hits["exact", a] += p_exact <= a
            hits["normal", a] += p_normal <= a
    print({k: v / reps for k, v in hits.items()})
    for a in (0.01, 0.05):
        assert hits["exact", a] / reps <= a + 3 * math.sqrt(a * (1 - a) / reps)
