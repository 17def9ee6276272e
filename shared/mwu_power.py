"""Power of the federated Mann-Whitney sum test before a study runs, DP noise included
(docs/methods.md §3.9).

The analyst's question "is this worth the budget?" needs the power at the study's ε and the
centers' sizes. The sum test (docs/methods.md §3.2) rejects H0 when T = Σ_l (U_l + w_l) is
beyond the critical value c of its exact null law N(0, Σ V_l) + Σ_l w_l (``shared.noisy_null``;
V_l = n_l·m_l·(N_l+1)/3, w_l ~ Laplace(2·max(n_l, m_l)/ε) as the centers noise U, none without
ε). Under an alternative
with a common probabilistic index θ = P(Y > X) + ½P(Y = X) (``shared.effects``), no ties:

    E U_l = n_l·m_l·(2θ − 1),    Var U_l = (2·n_l·m_l)²·V_l(θ),

V_l(θ) the Hanley-McNeil variance of θ̂ in Newcombe's symmetrized form (the one the effect-size
interval uses), and U_l approximately normal. So T − E T ~ N(0, Σ (2 n_l m_l)² V_l(θ)) + Σ w_l,
the same kind of law, and

    power(θ) = P(T >= c) + P(T <= −c)   (two-sided; one tail for a one-sided alternative).

The θ with a given power (80 %) is found by Brent's method on θ in (½, 1) after a coarse grid
brackets it. This is a normal approximation of U under the alternative convolved exactly with
the noise; it ignores U's lattice (a noise-free sum test of small centers uses U's exact law,
which this does not model) and ties (which lower Var U: the test is then a little more
powerful).

References: Hanley JA, McNeil BJ (1982) Radiology 143:29-36. Newcombe RG (2006) Stat Med
25:559-573. Noether GE (1987) Sample size determination for some common nonparametric tests,
JASA 82:645-647 (the same normal approximation without noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from shared._validation import Alternative, check_alternative, check_open_unit
from shared.effects import newcombe_variance
from shared.noisy_null import NoiseLaw, NoisyNormal

Sizes = Sequence[tuple[int, int]]


@dataclass(frozen=True)
class SumTestPower:
    """The sum test's power at ``thetas`` (``power[i]`` at ``thetas[i]``) and the θ > ½ with
    ``target`` power (None: not reached below θ = 0.999)."""

    thetas: tuple[float, ...]
    power: tuple[float, ...]
    target: float
    theta_at_target: float | None
    alpha: float
    epsilon: float | None


def _checked(sizes: Sizes) -> tuple[np.ndarray, np.ndarray]:
    n = np.array([s[0] for s in sizes], dtype=np.float64)
    m = np.array([s[1] for s in sizes], dtype=np.float64)
    if n.size == 0 or np.any(n < 1) or np.any(m < 1):
        raise ValueError("`sizes` must hold at least one (n, m) pair, each >= 1")
    return n, m


def _noises(n: np.ndarray, m: np.ndarray, epsilon: float | None) -> tuple[NoiseLaw, ...]:
    if epsilon is None:
        return ()
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"`epsilon` must be a finite number > 0, got {epsilon!r}")
    return tuple(NoiseLaw.laplace(2.0 * max(a, b) / epsilon) for a, b in zip(n, m, strict=True))


class _SumTest:
    """The sum test of fixed sizes, ε, α and alternative: its critical value computed once."""

    def __init__(self, sizes: Sizes, epsilon: float | None, alpha: float,
                 alternative: Alternative) -> None:
        self.alternative = check_alternative(alternative)
        alpha = check_open_unit(alpha, "alpha")
        self.n, self.m = _checked(sizes)
        self.noises = _noises(self.n, self.m, epsilon)
        null = NoisyNormal(float(np.sum(self.n * self.m * (self.n + self.m + 1) / 3.0)),
                           self.noises)
        self.c = float(null.isf(alpha / 2.0 if self.alternative == "two-sided" else alpha))

    def power(self, theta: float) -> float:
        if not 0.0 <= theta <= 1.0:
            raise ValueError(f"`theta` must lie in [0, 1], got {theta!r}")
        n, m, c = self.n, self.m, self.c
        mean = float(np.sum(n * m)) * (2.0 * theta - 1.0)
        var = float(np.sum((2.0 * n * m) ** 2 * newcombe_variance(theta, n, m)))
        if var == 0.0 and not self.noises:  # θ = 0 or 1 without noise: T = its mean
            upper, lower = float(mean >= c), float(mean <= -c)
        else:
            # one evaluation of the alternative's law for both tails (P(T <= −c) = P(S >= c + μ))
            tails = NoisyNormal(var, self.noises).sf(np.array([c - mean, c + mean]))
            upper, lower = float(tails[0]), float(tails[1])
        if self.alternative == "less":  # "less": Y larger, U large
            return upper
        if self.alternative == "greater":
            return lower
        return min(1.0, upper + lower)


def sum_test_power(
    sizes: Sizes, theta: float, *, epsilon: float | None = None, alpha: float = 0.05,
    alternative: Alternative = "two-sided",
) -> float:
    """Power of the sum test at a common θ, centers of ``sizes`` (n_l, m_l), each noising U_l
    with Laplace(2·max(n_l, m_l)/ε) (none without ``epsilon``). Module docstring."""
    return _SumTest(sizes, epsilon, alpha, alternative).power(theta)


def sum_test_power_table(
    sizes: Sizes, *, epsilon: float | None = None, alpha: float = 0.05,
    alternative: Alternative = "two-sided", thetas: Sequence[float] = (0.6, 0.7),
    target: float = 0.8,
) -> SumTestPower:
    """Power at ``thetas`` and the θ with ``target`` power (to 1e-4), for ``alternative`` in
    the direction it tests (θ > ½ for ``"two-sided"`` and ``"less"``; for ``"greater"``, which
    tests θ < ½, the table's θ's are P(X > Y), i.e. the power at 1 − θ)."""
    test = _SumTest(sizes, epsilon, alpha, alternative)
    target = check_open_unit(target, "target")

    def power(t: float) -> float:
        return test.power(1.0 - t if test.alternative == "greater" else t)

    values = tuple(power(float(t)) for t in thetas)
    at_target: float | None = None
    # A coarse grid brackets the root, then a few secant-bisection steps (power rises with θ).
    grid = (0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.999)
    low = 0.5
    for high in grid[1:]:
        if power(high) >= target:
            at_target = float(optimize.brentq(lambda t: power(t) - target, low, high,
                                              xtol=1e-4))
            break
        low = high
    return SumTestPower(tuple(float(t) for t in thetas), values, target, at_target, alpha,
                        epsilon)


def normal_power(sizes: Sizes, theta: float, alpha: float = 0.05) -> float:
    """The noise-free two-sided power by the normal approximation (Noether 1987 with the
    Newcombe variance), for checks: Φ((|μ| − z·σ0)/σ1) + Φ((−|μ| − z·σ0)/σ1)."""
    n, m = _checked(sizes)
    z = float(special.ndtri(1.0 - alpha / 2.0))
    s0 = math.sqrt(float(np.sum(n * m * (n + m + 1) / 3.0)))
    s1 = math.sqrt(float(np.sum((2.0 * n * m) ** 2 * newcombe_variance(theta, n, m))))
    mu = abs(float(np.sum(n * m)) * (2.0 * theta - 1.0))
    return float(special.ndtr((mu - z * s0) / s1) + special.ndtr((-mu - z * s0) / s1))
