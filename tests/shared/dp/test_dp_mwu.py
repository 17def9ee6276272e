"""The DP twin of the Mann-Whitney release (``shared.dp.mwu``): its statistic, the coupling
behind its sensitivity (exhaustively on small neighbours), its exact privacy loss, the code's
draws replayed, its level under H0 and its power against the exact-data test (simulations,
seeded; docs/methods.md §3.10)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

from shared.dp.mwu import (
    LIFT,
    MARGIN,
    SIZE_SHARE,
    DPMannWhitney,
    dp_mann_whitney,
    keep_at_most,
    noise_cap,
    sizes_in_use,
    u_statistic,
)
from shared.protocol import DPMWURelease

# Small levels with ties, and the places a record can be added (on, between, beyond the data).
LEVELS = [(), (1.0,), (0.0, 2.0), (1.0, 1.0, 3.0), (0.0, 1.0, 2.0, 3.0)]
ADDED = (-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 4.0)


def neighbours(x: tuple[float, ...], y: tuple[float, ...]
               ) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """(x', y') one record removed from or added to x (level Y is the same by symmetry)."""
    out = [(x[:i] + x[i + 1:], y) for i in range(len(x))]
    out += [((*x, v), y) for v in ADDED]
    return out


def subsets(values: tuple[float, ...], cap: int) -> list[tuple[float, ...]]:
    """Every kept subset of a level (all of it when it fits), each equally likely."""
    if len(values) <= cap:
        return [values]
    return [tuple(values[i] for i in c) for c in itertools.combinations(range(len(values)), cap)]


def test_u_statistic_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(0)
    for n, m in ((1, 1), (3, 7), (40, 25)):
        x, y = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, m).astype(float)
        u_x = stats.mannwhitneyu(x, y, method="asymptotic").statistic  # #(x > y) + ½ ties
        assert u_statistic(x, y) == pytest.approx(n * m - 2 * u_x)
        brute = sum(np.sign(b - a) for a in x for b in y)
        assert u_statistic(x, y) == brute
    assert u_statistic(np.zeros(0), np.ones(3)) == 0.0


def test_keep_at_most_is_a_uniform_subset() -> None:
    rng = np.random.default_rng(1)
    values = np.arange(5.0)
    assert keep_at_most(values, 5, rng) is values
    seen: dict[tuple[float, ...], int] = {}
    for _ in range(20_000):
        kept = tuple(sorted(keep_at_most(values, 2, rng).tolist()))
        seen[kept] = seen.get(kept, 0) + 1
    assert len(seen) == 10  # C(5, 2), each about 2,000 times
    # χ² of uniformity, 9 df: p < 1e-6 would need a statistic above 45
    chi2 = sum((c - 2000) ** 2 / 2000 for c in seen.values())
    assert chi2 < 45


def test_the_cap_is_a_function_of_released_values() -> None:
    assert noise_cap(10.2, 7.0, 0.5, 0.0) == 11
    assert noise_cap(10.2, 7.0, 0.5, 1.0) == 13  # + t/ε₁ = 2
    assert noise_cap(-30.0, -4.0, 0.5, 0.0) == 1  # at least 1
    assert sizes_in_use(12.6, -3.0, 11) == (11, 0)
    assert sizes_in_use(5.2, 3.4, 11, lift=1.0) == (6, 4)


# -- the coupling behind the sensitivity (exhaustive) -----------------------------------------


def coupled_pairs(x: tuple[float, ...], r: float, cap: int
                  ) -> list[tuple[Fraction, tuple[float, ...], tuple[float, ...]]]:
    """The proof's coupling of X's kept subsets under D (x) and D' (x + r), with their joint
    probabilities: nothing cut in D' — S' = S ∪ {r}; else S uniform (or all of x), and with
    probability M/(n + 1) one uniform member of S replaced by r."""
    n = len(x)
    if n + 1 <= cap:
        return [(Fraction(1), x, (*x, r))]
    out = []
    kept = subsets(x, cap)
    p_in = Fraction(cap, n + 1)
    for s in kept:
        p_s = Fraction(1, len(kept))
        out.append((p_s * (1 - p_in), s, s))
        for i in range(cap):
            out.append((p_s * p_in / cap, s, (*s[:i], *s[i + 1:], r)))
    return out


@pytest.mark.parametrize("x", LEVELS)
@pytest.mark.parametrize("y", LEVELS[1:])
def test_the_coupling_has_the_right_laws_and_moves_u_by_at_most_2m(
        x: tuple[float, ...], y: tuple[float, ...]) -> None:
    """For every small X, Y, added record r and cap M: the coupling's two marginals are the
    kept subsets' laws under D and D' (exact fractions), and every coupled pair (with any kept
    subset of Y, the same in both) moves U' by at most 2M, by at most M when nothing is cut."""
    worst_cut, worst_uncut = 0.0, 0.0
    for r in ADDED:
        for cap in range(1, len(x) + 3):
            pairs = coupled_pairs(x, r, cap)
            # marginals: D's kept subsets uniform, D''s uniform over M-subsets of x + r
            left: dict[tuple[float, ...], Fraction] = {}
            right: dict[tuple[float, ...], Fraction] = {}
            for p, s, s_other in pairs:
                left[tuple(sorted(s))] = left.get(tuple(sorted(s)), Fraction(0)) + p
                right[tuple(sorted(s_other))] = right.get(tuple(sorted(s_other)),
                                                          Fraction(0)) + p
            want_left = {}
            for s in subsets(x, cap):
                key = tuple(sorted(s))
                want_left[key] = want_left.get(key, Fraction(0)) + Fraction(
                    1, len(subsets(x, cap)))
            want_right = {}
            for s in subsets((*x, r), cap):
                key = tuple(sorted(s))
                want_right[key] = want_right.get(key, Fraction(0)) + Fraction(
                    1, len(subsets((*x, r), cap)))
            assert left == want_left and right == want_right
            cut = len(x) + 1 > cap
            for _, s, s_other in pairs:
                for kept_y in subsets(y, cap):
                    move = abs(u_statistic(s_other, kept_y) - u_statistic(s, kept_y))
                    assert move <= (2 * cap if cut else cap)
                    if cut:
                        worst_cut = max(worst_cut, move / cap)
                    else:
                        worst_uncut = max(worst_uncut, move / cap)
    assert worst_cut <= 2.0 and worst_uncut <= 1.0


def test_the_bounds_are_attained() -> None:
    """2M cannot be lowered where a level may be cut, nor M where nothing is: X = (0, 0),
    Y = (1, 1), M = 2, r = 2 added to X swaps a 0 for the 2 (U' moves by 4 = 2M); X = (0,),
    M = 2, r = 2 added without a cut (U' moves by 2 = M)."""
    moves = [abs(u_statistic(s2, (1.0, 1.0)) - u_statistic(s, (1.0, 1.0)))
             for _, s, s2 in coupled_pairs((0.0, 0.0), 2.0, 2)]
    assert max(moves) == 4.0
    moves = [abs(u_statistic(s2, (1.0, 1.0)) - u_statistic(s, (1.0, 1.0)))
             for _, s, s2 in coupled_pairs((0.0,), 2.0, 2)]
    assert moves == [2.0]


# -- the exact privacy loss of the whole release -------------------------------------------


def kept_law(x: tuple[float, ...], y: tuple[float, ...], cap: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """U' over the kept subsets: its values and their probabilities (each pair of subsets
    equally likely, the two levels independent)."""
    xs, ys = subsets(x, cap), subsets(y, cap)
    values = np.array([u_statistic(a, b) for a in xs for b in ys])
    return values, np.full(values.size, 1.0 / values.size)


def log_mixture(s: np.ndarray, values: np.ndarray, probs: np.ndarray, b: float) -> np.ndarray:
    """log of Σ_i p_i·Laplace(s; v_i, b)."""
    return np.asarray(special.logsumexp(-np.abs(s[:, None] - values[None, :]) / b
                                        + np.log(probs)[None, :], axis=1) - math.log(2 * b))


def release_loss(d: tuple[tuple[float, ...], tuple[float, ...]],
                 d_other: tuple[tuple[float, ...], tuple[float, ...]], eps1: float,
                 eps2: float, margin: float, u_scale_factor: float) -> float:
    """max |log p_D(o) − log p_D'(o)| over a grid of outputs o = (n̂_X, n̂_Y, Ũ), the law written
    from the definition: n̂ ~ n + Laplace(1/ε₁) each, M = max(1, ⌈max(n̂) + t/ε₁⌉), Ũ ~ the mixture
    over kept subsets of U' + Laplace(factor·M/ε₂)."""
    (x, y), (x2, y2) = d, d_other
    grid = np.arange(-3.0, 8.0 + 1e-9, 0.1)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    size_ratio = eps1 * (np.abs(a - len(x2)) - np.abs(a - len(x))
                         + np.abs(b - len(y2)) - np.abs(b - len(y)))  # log p_D − log p_D'
    caps = np.maximum(1, np.ceil(np.maximum(a, b) + margin / eps1)).astype(int)
    worst = 0.0
    for cap in np.unique(caps):
        scale = u_scale_factor * cap / eps2
        values, probs = kept_law(x, y, int(cap))
        values2, probs2 = kept_law(x2, y2, int(cap))
        lo, hi = min(values.min(), values2.min()), max(values.max(), values2.max())
        s = np.linspace(lo - 30 * scale, hi + 30 * scale, 6001)
        mix = log_mixture(s, values, probs, scale) - log_mixture(s, values2, probs2, scale)
        here = size_ratio[caps == cap]
        worst = max(worst, float(np.max(np.abs(here + mix.max()))),
                    float(np.max(np.abs(here + mix.min()))))
    return worst


# Every pair of these levels, and one where a cut level sits wholly below the other (there a
# swapped record moves U' by the full 2M, with M = 3).
PRIVACY_DATA = [(x, y) for x in LEVELS[1:4] for y in LEVELS[1:4]] + [((0.0, 0.0, 0.0),
                                                                      (1.0, 1.0, 1.0))]


@pytest.mark.parametrize("noise", ["as_implemented", "m_not_2m"])
@pytest.mark.parametrize(("epsilon", "share", "margin"), [
    (1.0, SIZE_SHARE, MARGIN),
    pytest.param(1.0, 0.5, 1.0, marks=pytest.mark.slow),
    pytest.param(0.4, 0.1, 0.0, marks=pytest.mark.slow),
])
def test_exact_privacy_loss(noise: str, epsilon: float, share: float, margin: float) -> None:
    """Every add/remove neighbour of small X, Y (records removed, added on, between and beyond
    the data): the release's privacy loss is at most ε (1e-9 for rounding). Negative control:
    the noise on U' at M/ε₂ (the sensitivity were nothing ever cut) loses more than ε."""
    eps1, eps2 = epsilon * share, epsilon * (1 - share)
    factor = 2.0 if noise == "as_implemented" else 1.0
    worst = 0.0
    for x, y in PRIVACY_DATA:
        for x2, y2 in neighbours(x, y):
            worst = max(worst, release_loss((x, y), (x2, y2), eps1, eps2, margin, factor))
            # the neighbours in level Y, by symmetry: the roles swapped
            worst = max(worst, release_loss((y, x), (y2, x2), eps1, eps2, margin, factor))
    if noise == "as_implemented":
        assert worst <= epsilon + 1e-9
        assert worst >= epsilon * 0.6  # the check sees most of the budget being used
    else:
        assert worst > epsilon + 1e-3


def test_the_code_draws_what_the_definition_says() -> None:
    """The release replayed from a seeded generator: sizes, cap, kept subsets and noise."""
    x = np.array([0.0, 1.0, 1.0, 3.0, 5.0, 8.0, 2.0])
    y = np.array([2.0, 4.0, 4.0, 9.0])
    for seed in range(30):
        eps, share, margin = 0.8, 0.3, 0.5
        got = dp_mann_whitney(x, y, epsilon=eps, rng=np.random.default_rng(seed),
                              size_share=share, margin=margin)
        replay = np.random.default_rng(seed)
        eps1, eps2 = eps * share, eps * (1 - share)
        noisy = replay.laplace(0.0, 1.0 / eps1, 2)
        n_hat, m_hat = x.size + noisy[0], y.size + noisy[1]
        cap = max(1, math.ceil(max(n_hat, m_hat) + margin / eps1))
        kx = x if x.size <= cap else x[replay.choice(x.size, cap, replace=False)]
        ky = y if y.size <= cap else y[replay.choice(y.size, cap, replace=False)]
        u = sum(np.sign(b - a) for a in kx for b in ky) + replay.laplace(0.0, 2 * cap / eps2)
        assert (got.n_x_hat, got.n_y_hat, got.cap) == (n_hat, m_hat, cap)
        assert got.statistic == pytest.approx(u, abs=1e-9)
        assert got.noise.kind == "laplace" and got.noise.scale == pytest.approx(2 * cap / eps2)
        assert got.epsilon == pytest.approx(eps)


def test_the_release_states_only_released_values() -> None:
    rng = np.random.default_rng(3)
    got = dp_mann_whitney(rng.normal(size=50), rng.normal(size=60), epsilon=1.0, rng=rng)
    wire = DPMWURelease.from_result(got)
    assert set(wire.model_dump()) == {"statistic", "n_x_hat", "n_y_hat", "cap", "epsilon",
                                      "size_epsilon", "u_epsilon", "margin", "neighbouring",
                                      "noise"}
    assert wire.to_dp_result() == got
    result = wire.to_result()
    a, b = sizes_in_use(got.n_x_hat, got.n_y_hat, got.cap, LIFT / got.size_epsilon)
    assert (result.n_x, result.n_y) == (a, b)
    assert result.variance == pytest.approx(a * b * (a + b + 1) / 3)
    assert result.noise == got.noise and result.null == "normal+noise"


def test_bad_arguments_are_refused() -> None:
    rng = np.random.default_rng(0)
    for kwargs in ({"epsilon": 0.0}, {"epsilon": 1.0, "size_share": 1.0},
                   {"epsilon": 1.0, "margin": -1.0}, {"epsilon": math.inf}):
        with pytest.raises(ValueError):
            dp_mann_whitney([1.0], [2.0], rng=rng, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        dp_mann_whitney([1.0], [2.0], epsilon=1.0, rng=None)  # type: ignore[arg-type]


def test_an_empty_or_tiny_level_gives_a_valid_p_value() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        got = dp_mann_whitney(rng.normal(size=1), rng.normal(size=2), epsilon=0.5, rng=rng)
        p = got.to_result().pvalue
        assert 0.0 <= p <= 1.0


# -- level and power by simulation ------------------------------------------------------------


def rejections(n: int, shift: float, reps: int, seed: int, *, ties: bool) -> tuple[float, float]:
    """(the DP twin's, scipy's exact-data test's) two-sided rejection rates at α = 0.05 over
    ``reps`` data sets of n per arm, X ~ N(0, 1), Y ~ N(shift, 1) (rounded to ~8 values with
    ``ties``), ε = 1."""
    rng = np.random.default_rng(seed)
    dp = exact = 0
    for _ in range(reps):
        x, y = rng.normal(size=n), rng.normal(shift, size=n)
        if ties:
            x, y = np.round(1.5 * x), np.round(1.5 * y)
        dp += dp_mann_whitney(x, y, epsilon=1.0, rng=rng).to_result().pvalue < 0.05
        exact += stats.mannwhitneyu(x, y, method="asymptotic").pvalue < 0.05
    return dp / reps, exact / reps


@pytest.mark.slow
@pytest.mark.parametrize(("n", "ties", "seed"),
                         [(10, True, 11), (30, False, 12), (30, True, 13), (200, True, 14),
                          (1000, False, 15)])
def test_level_under_h0(n: int, ties: bool, seed: int) -> None:
    """The level stays at or below α = 0.05 within 3 standard errors of the simulation
    (4,000 data sets at n <= 200, SE 0.0034; 2,000 at 1,000), ties or not, ε = 1."""
    reps = 4000 if n <= 200 else 2000
    level, _ = rejections(n, 0.0, reps, seed, ties=ties)
    assert level <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


@pytest.mark.slow
def test_power_within_5_points_of_the_exact_test_at_1000_per_arm() -> None:
    """n = 1,000 per arm, ε = 1, a normal shift of 0.12 SD (the exact test's power about 0.75):
    over 1,000 seeded data sets the DP twin's power is at most 0.05 below scipy's on the same
    data (the project's goal; measured 0.01-0.02 below, docs/methods.md §3.10)."""
    dp, exact = rejections(1000, 0.12, 1000, 21, ties=False)
    assert 0.6 < exact < 0.9
    assert exact - dp <= 0.05


def test_dp_result_is_frozen_and_carries_its_epsilon() -> None:
    r = DPMannWhitney(statistic=3.0, n_x_hat=10.4, n_y_hat=-2.0, cap=11, size_epsilon=0.2,
                      u_epsilon=0.8, margin=0.0)
    assert r.epsilon == pytest.approx(1.0)
    assert r.sizes == (11, 0)  # 10.4 + 0.5/0.2 clipped to M; −2 + 2.5 = 0.5 rounds to 0
    assert r.variance == 0.0
    with pytest.raises(AttributeError):
        r.cap = 3  # type: ignore[misc]
