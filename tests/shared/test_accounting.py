"""The accountant against the exact composition of randomized-response pairs (Kairouz, Oh &
Viswanath 2015): the dominating pair of an ε-DP mechanism is P = (e^ε, 1)/(1 + e^ε) against
Q = (1, e^ε)/(1 + e^ε); over k releases the privacy loss is Σ ±ε_i, and
δ(ε') = E_P[max(0, 1 − e^(ε' − L))]. Computed here by enumeration, independently of
dp_accounting; the accountant must never state less than the exact ε (it is pessimistic) and
may state more by at most its grid (1e-4 per release); "never less" is checked to a
relative 1e-6, the precision of its FFT convolutions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shared.accounting import PrivacyGuarantee, compose_pure


def _exact_delta_homogeneous(epsilon: float, k: int, eps_prime: float) -> float:
    minus = np.arange(k + 1)  # releases whose outcome carries loss −ε
    p = stats.binom.pmf(minus, k, 1 / (1 + math.exp(epsilon)))
    loss = (k - 2 * minus) * epsilon
    return float(np.sum(p * np.maximum(0.0, -np.expm1(eps_prime - loss))))


def _exact_delta(epsilons: list[float]):
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(epsilons))))
    eps = np.asarray(epsilons)
    prob = np.prod(1 / (1 + np.exp(-signs * eps)), axis=1)
    loss = signs @ eps

    def delta_of(eps_prime: float) -> float:
        return float(np.sum(prob * np.maximum(0.0, -np.expm1(eps_prime - loss))))
    return delta_of


def _exact_epsilon(delta_of, upper: float, delta: float) -> float:
    lo, hi = 0.0, upper
    if delta_of(0.0) <= delta:
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_of(mid) <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize(("epsilon", "k", "delta"), [
    (0.1, 1, 1e-6), (0.1, 30, 1e-6), (0.05, 200, 1e-6), (0.5, 10, 1e-5), (1.0, 3, 1e-3),
    (0.01, 1000, 1e-6),
])
def test_equal_epsilons_match_the_exact_composition(epsilon: float, k: int,
                                                    delta: float) -> None:
    exact = _exact_epsilon(lambda e: _exact_delta_homogeneous(epsilon, k, e), k * epsilon, delta)
    got = compose_pure([epsilon] * k, delta=delta)
    assert got.epsilon_pure == pytest.approx(k * epsilon, rel=1e-12)
    assert got.releases == k
    assert exact * (1 - 1e-6) <= got.epsilon <= min(k * epsilon, exact + k * 1e-4 + 1e-6)


def test_different_epsilons_match_the_exact_composition() -> None:
    epsilons = [0.3, 0.05, 0.05, 0.2, 0.1, 0.7, 0.01, 0.4, 0.25, 0.15, 0.05, 0.5]
    delta = 1e-3
    exact = _exact_epsilon(_exact_delta(epsilons), sum(epsilons), delta)
    got = compose_pure(epsilons, delta=delta)
    assert exact * (1 - 1e-6) <= got.epsilon <= exact + len(epsilons) * 1e-4 + 1e-6
    assert got.epsilon < got.epsilon_pure  # many releases: the composition theorem gains


def test_many_small_releases_gain_over_the_sum() -> None:
    got = compose_pure({0.01: 1000}, delta=1e-6)
    # Advanced composition (Dwork, Rothblum & Vadhan 2010) already gives
    # ε√(2k ln(1/δ)) + kε(e^ε − 1) ≈ 1.76 for these; the optimal one is below it.
    advanced = 0.01 * math.sqrt(2 * 1000 * math.log(1e6)) + 1000 * 0.01 * math.expm1(0.01)
    assert got.epsilon < advanced < got.epsilon_pure == pytest.approx(10.0)


def test_a_single_release_is_its_own_epsilon() -> None:
    got = compose_pure([0.5], delta=1e-6)
    assert got.epsilon == pytest.approx(0.5, abs=1e-4)


def test_zero_delta_and_nothing_released_are_the_basic_bound() -> None:
    assert compose_pure([0.2, 0.3], delta=0.0) == PrivacyGuarantee(0.5, 0.0, 0.5, 2)
    nothing = compose_pure([0.0, 0.0], delta=1e-6)
    assert (nothing.epsilon, nothing.releases) == (0.0, 0)
    assert "nothing released" in nothing.line("each patient at center A, dataset d")


def test_many_distinct_epsilons_are_rounded_up_never_down() -> None:
    rng = np.random.default_rng(3)
    epsilons = list(rng.uniform(0.001, 0.05, size=300))
    got = compose_pure(epsilons, delta=1e-6)
    assert got.epsilon_pure == pytest.approx(math.fsum(epsilons))
    assert got.epsilon <= got.epsilon_pure
    # The rounded composition dominates the exact one: larger than the same releases each
    # rounded down a whole step (a lower bound computed the same way).
    lower = compose_pure([e * 0.9 for e in epsilons[:64]], delta=1e-6)
    assert got.epsilon > lower.epsilon


def test_the_line_says_who_what_and_how() -> None:
    got = compose_pure({0.05: 60}, delta=1e-6)
    line = got.line("each patient at center A, dataset stays")
    assert line.startswith("each patient at center A, dataset stays: (")
    assert "-DP over all 60 noisy releases to date" in line and "ε = 3 with δ = 0" in line
    # One release: no (ε, δ) form that says the same as its pure ε at the digits shown.
    one = compose_pure([0.5], delta=1e-6).line("each patient at center A, dataset stays")
    assert one == "each patient at center A, dataset stays: ε = 0.5-DP over all 1 noisy " \
                  "releases to date"


@pytest.mark.parametrize("bad", [[-0.1], [math.inf], [math.nan]])
def test_invalid_epsilons_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="every ε"):
        compose_pure(bad, delta=1e-6)


@pytest.mark.parametrize("delta", [-1e-6, 1.0, math.nan])
def test_invalid_delta_is_refused(delta: float) -> None:
    with pytest.raises(ValueError, match="delta"):
        compose_pure([0.1], delta=delta)
