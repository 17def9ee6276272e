"""Effect sizes for the Mann-Whitney tests: the probabilistic index, per center and federated.

See also docs/methods.md §4.

The effect the Mann-Whitney tests are about is the **probabilistic index** (Acion et al. 2006;
the AUC, the "common-language effect size")

    θ = P(Y > X) + ½·P(Y = X),

estimated from a center's statistic U = Σ_i Σ_j sign(Y_j − X_i) as θ̂ = ½ + U/(2·n·m) (ties count
½). θ = ½ is H0; θ > ½ means Y tends to exceed X.

**Federated estimand** (:func:`probabilistic_index` over several centers): the *stratified*
index θ = ½ + Σ U_l / (2·Σ n_l·m_l), the weighted mean of the centers' θ_l with weights n_l·m_l —
the quantity the sum test tests (its Z is Σ U_l / √Σ V_l). We do not offer a pooled index from
the federated table: records in one K-anonymous bin count as ties there, so it estimates θ of a
coarsened variable, closer to ½ than the data's; and pooling across centers mixes center
differences into the comparison, which stratifying by center avoids.

**Interval.** The variance of θ̂ under the alternative needs more than the released numbers, so
we use Hanley & McNeil's (1982) approximation as Newcombe (2006, "Method 5") symmetrized it,

    V(θ) = θ(1 − θ)/(n·m) · [1 + (N/2 − 1)·((1 − θ)/(2 − θ) + θ/(1 + θ))],   N = n + m,

and invert it as a score interval: the θ with (θ̂ − θ)² = z²·V(θ), which stays inside [0, 1] and
is not degenerate at θ̂ = 0 or 1. There (one group entirely above the other) V(θ̂) = 0 makes θ̂
itself a root; it is the interval's end, and the other end is the equation's other root:
at θ̂ = 1, θ_L solves 1 − θ = z²·V(θ)/(1 − θ), so the interval is [θ_L, 1] (n = m = 10:
[0.800, 1]). Coverage at n = m = 5 and 10, θ = 0.9 and 0.95: 0.952-0.969.
For the stratified index V(θ) = Σ (n_l·m_l/Σ n·m)²·V_l(θ).
A center's DP noise w_l (``shared.mwu``) enters θ̂ as w_l/(2·Σ n·m); then the interval is the θ
whose two-sided test by the exact law of normal + Σ w_l (``shared.noisy_null``) does not reject,
since Laplace noise's tails are heavier than a normal of the same variance. Should the noise put
θ̂ so far outside [0, 1] that every θ is rejected, the interval is inverted from θ̂ clipped to
[0, 1] (a superset of the unclipped one; ``method`` ends in ``_clipped``). Coverage is checked
by simulation (``tests/shared/test_effects.py``, slow).

References: Hanley JA, McNeil BJ (1982) Radiology 143:29–36. Newcombe RG (2006) Confidence
intervals for an effect size measure based on the Mann-Whitney statistic. Part 2: asymptotic
methods and evaluation. Stat Med 25:559–573.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from shared._validation import check_open_unit
from shared.mwu import MannWhitneyResult, released_centers
from shared.noisy_null import NoisyNormal


@dataclass(frozen=True)
class ProbabilisticIndex:
    """θ̂ = P(Y > X) + ½P(Y = X) and its ``level`` interval [``low``, ``high``].

    ``n_x``, ``n_y``: the records behind it (summed over centers for a federated index).
    ``estimate`` may lie outside [0, 1] when DP noise was added to U; the interval does not.
    """

    estimate: float
    low: float
    high: float
    level: float
    n_x: int
    n_y: int
    method: str


def newcombe_variance(theta: float | NDArray[np.float64], n_x: NDArray[np.float64],
                      n_y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Hanley-McNeil's variance of θ̂ at θ, symmetrized (Newcombe 2006, Method 5), per center."""
    half = (n_x + n_y) / 2.0 - 1.0
    shape = (1.0 - theta) / (2.0 - theta) + theta / (1.0 + theta)
    return np.asarray(theta * (1.0 - theta) / (n_x * n_y) * (1.0 + half * shape))


def probabilistic_index(
    centers: Sequence[MannWhitneyResult], *, level: float = 0.95
) -> ProbabilisticIndex:
    """The (stratified) probabilistic index of one or several centers' releases, with a score
    interval (module docstring). A center's release is U (possibly noised), n, m and its noise
    variance; nothing else is used."""
    level = check_open_unit(level, "level")
    released = released_centers(centers)
    u, n, m = released.u, released.n, released.m
    noise = np.array([c.noise_variance for c in centers], dtype=np.float64)
    if np.any(n < 1) or np.any(m < 1):
        raise ValueError("every center must hold records of both groups")
    pairs = n * m
    total = float(pairs.sum())
    weights = pairs / total
    estimate = 0.5 + float(u.sum()) / (2.0 * total)
    noise_var = float(noise.sum()) / (2.0 * total) ** 2
    alpha = 1.0 - level
    z = float(special.ndtri(1.0 - alpha / 2.0))

    laws = tuple(law for law in released.noise if law is not None)

    def variance(theta: float) -> float:
        return float(np.sum(weights**2 * newcombe_variance(theta, n, m))) + noise_var

    def solve(estimate: float) -> tuple[float, float] | None:
        def normal_gap(theta: float) -> float:  # > 0 while θ is outside the interval
            return (estimate - theta) ** 2 - z * z * variance(theta)

        interval = _score_interval(normal_gap, estimate, 2001)
        if laws:
            # θ̂ − θ = (S + Σ w_l)/(2·Σ n·m), S ~ N(0, Σ (2 n_l m_l)² V_l(θ)): the score interval
            # under the exact law of normal + noise (``shared.noisy_null``), not a normal with
            # the noise's variance, which Laplace tails would make too short. gap > 0 where the
            # test of θ rejects: one tail probability per θ; the normal interval brackets it.
            def gap(theta: float) -> float:
                normal = float(np.sum((2.0 * pairs) ** 2 * newcombe_variance(theta, n, m)))
                law = NoisyNormal(normal, laws)
                return math.log(alpha / 2.0) - float(
                    law.logsf(2.0 * total * abs(estimate - theta)))

            interval = _score_interval(gap, estimate, 101, guess=interval)
        return interval

    method = "newcombe_score" + ("_stratified" if len(centers) > 1 else "")
    interval = solve(estimate)
    if interval is None:
        # Noise put θ̂ so far outside [0, 1] that every θ in it is rejected. Inverting from θ̂
        # clipped to [0, 1] instead accepts every θ the unclipped test accepts (|1 − θ| <=
        # |θ̂ − θ| for θ <= 1 <= θ̂), so it keeps coverage and is never empty: [θ_L, 1].
        interval = solve(min(1.0, max(0.0, estimate)))
        method += "_clipped"
    if interval is None:  # not reached: the clipped estimate's own θ is accepted
        raise ArithmeticError("the score interval of a clipped estimate is empty")
    low, high = interval
    return ProbabilisticIndex(
        estimate=estimate, low=low, high=high, level=level, n_x=int(n.sum()), n_y=int(m.sum()),
        method=method,
    )


def _score_interval(
    gap: Callable[[float], float], estimate: float, grid: int,
    guess: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """The θ in [0, 1] around θ̂ with ``gap(θ) <= 0`` (None if there are none); ``guess``, an
    approximate interval, narrows the root searches to a few evaluations of ``gap``."""
    centre = min(1.0, max(0.0, estimate))
    if gap(centre) > 0:
        # Noise put θ̂ outside [0, 1] by more than the interval allows at the nearest end: the
        # interval is the part of [0, 1] closest to θ̂ that the equation admits, if any.
        inside = [float(t) for t in np.linspace(0.0, 1.0, grid) if gap(float(t)) <= 0]
        if not inside:
            return None
        centre = min(inside, key=lambda t: abs(t - estimate))
    if centre in (0.0, 1.0):
        # θ̂ at 0 or 1 (one group entirely above the other): V(θ̂) = 0, so θ̂ itself solves the
        # equation, yet it is the interval's end, not its inside. Newcombe's Method 5 interval
        # is [θ_L, 1] (or [0, θ_U]): start the search for the other end from a point strictly
        # inside, where the test does not reject.
        centre = _step_inside(gap, centre)
    ends = []
    for limit, near in ((0.0, guess[0] if guess else None), (1.0, guess[1] if guess else None)):
        ends.append(_end(gap, centre, limit, near))
    return ends[0], ends[1]


def _step_inside(gap: Callable[[float], float], edge: float) -> float:
    """A θ in (0, 1) near ``edge`` (0 or 1) with ``gap(θ) < 0``, or ``edge`` when none is found.

    Halving the distance from the edge: near θ̂ = 1 the gap is (1 − θ)² − z²·V(θ) with V(θ) of
    order 1 − θ, negative on (θ_L, 1), so some step of 2^-k lands inside it.
    """
    for k in range(1, 60):
        theta = abs(edge - 2.0**-k)
        if gap(theta) < 0:
            return theta
    return edge


def _end(gap: Callable[[float], float], centre: float, limit: float,
         near: float | None) -> float:
    """The root of ``gap`` between ``centre`` (inside) and ``limit``, or ``limit`` when that is
    inside too; ``near`` (an approximate root) gives a tight bracket first."""
    inner = centre
    if near is not None and near != centre and (near - centre) * (limit - centre) > 0:
        # The exact end usually lies a little beyond the approximate one.
        for trial in (near, near + 0.25 * (near - centre)):
            trial = min(1.0, max(0.0, trial))
            if gap(trial) > 0:
                return float(optimize.brentq(gap, min(inner, trial), max(inner, trial),
                                             xtol=1e-9))
            inner = trial
    if inner == limit or gap(limit) <= 0:
        return limit
    return float(optimize.brentq(gap, min(inner, limit), max(inner, limit), xtol=1e-9))
