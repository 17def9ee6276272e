"""The probabilistic index θ = P(Y > X) + ½P(Y = X) from ε-DP Mann-Whitney releases
(``shared.dp.mwu``), with an interval that accounts for every noise (docs/methods.md §3.10, §4).

A release is (n̂_X, n̂_Y, M, Ũ) with n̂ = n + L, L ~ Laplace(1/ε₁), and Ũ = U' + W, W ~
Laplace(2M/ε₂), U' = Σ sign(y − x) over a = min(n_X, M) and b = min(n_Y, M) kept records. Given
a, b and θ, U' = (2θ − 1)·a·b + S with S approximately N(0, (2ab)²·V(θ; a, b)), V the
Hanley-McNeil variance as Newcombe (2006, Method 5) symmetrized it (``shared.effects``).

**Why not the exact twin's interval on the noisy numbers.** Reading θ̂ = ½ + Ũ/(2·â·b̂) with the
kept sizes' estimates â, b̂ of the tests (n̂ + ``LIFT``/ε₁, for the null variance) and only W
as noise leaves out the sizes' own noise, which multiplies (2θ − 1): it vanishes at θ = ½ and is
the largest error at θ → 1 (at ε = 1, ε₁ = 0.2, the sizes are off by 5 records on average, 50 %
of n = 10). Worse, the lifted sizes and the cap bias â·b̂ upwards: the level that sets
M = ⌈max n̂⌉ keeps M records when its noise was negative, so â − a = max(L, n̂ − M) is never
much below 0 and averages 1/(2ε₁) above. θ̂ is pulled towards ½, the interval lies too low
(coverage 0.74-0.91 at θ = 0.82-0.96 with n = 10-100 per arm and ε = 1, the misses nearly all
above).

**The interval.** The sizes are nuisance parameters, known up to Laplace noise of a known law;
we integrate them out (the "hybrid" treatment of a nuisance parameter with a known error law,
Cousins & Highland 1992): with a flat prior on n ≥ 1, n | n̂ has density ∝ e^{−ε₁|n − n̂|} on
[1, ∞), the sampling law of the noise read backwards, and a = min(n, M) follows, the cap
included (which removes the bias above). The test of a candidate θ refers the released Ũ to the
law of (2θ − 1)·a·b + S + W with (a, b) drawn from that law:

    P_up(θ) = E_{a,b} P(S + W >= Ũ − (2θ − 1)ab),   P_lo(θ) = E_{a,b} P(S + W <= Ũ − (2θ − 1)ab),

S + W normal-Laplace (Reed & Jorgensen 2004, the closed form of ``shared.noisy_null``) with
V evaluated at the candidate θ and the drawn sizes (a score interval: no variance read at θ̂,
which would be 0 at θ̂ = 1). The interval is {θ in [0, 1]: P_up(θ) > α/2 and P_lo(θ) > α/2},
equal tails; the expectation over (a, b) is a product rule over the two sizes' laws
(:func:`size_law`: Gauss-Legendre panels, the cap one node). As ε → ∞ the sizes' law collapses to
n̂ = n, W to 0, and the interval becomes the exact twin's score interval (θ̂ − θ)² = z²·V(θ).

**At equal sizes (the selection).** The flat law is right on average over the sizes, not at n_X
= n_Y, where the level that sets M is chosen by its own noise: the lower n̂ is then low by
3/(4ε₁) on average, both levels are cut (a = b = M < n) in up to a quarter of the releases (0.17
at ε₁ = 0.2, the ceiling of M spares some), and the flat law, which cannot tell n_X = n_Y from
n_X − n_Y of a few 1/ε₁, puts too little mass there; the interval lies too high. A law
conditioned on the selection (the sizes' likelihood divided by the chance of the observed order)
is improper with Laplace noise (its tail is memoryless), so we add the law of the balanced
design instead: with n_X = n_Y = n and a flat prior on n >= 1, n | (n̂_X, n̂_Y) has density ∝
e^{−ε₁(|n − n̂_X| + |n − n̂_Y|)} and a = b = min(n, M) (:func:`equal_size_law`). It is the exact
posterior of that model, and close to right near it (with n_X + n_Y fixed, a·b moves by d²/4 at
n_X − n_Y = d). θ is accepted if either law accepts it, P_up = max of the two, P_lo likewise
(the union of two acceptance regions, as a test that maximizes its p-value over a set of
nuisance values, Berger & Boos 1994): the interval contains the flat law's, and contains the
balanced law's wherever n_X = n_Y is not rejected at level γ = ``BALANCED_LEVEL``, |n̂_X − n̂_Y|
<= q/ε₁ with e^{−q}(1 + q/2) = γ (the law of the difference of two Laplace(1/ε₁);
:func:`balance_threshold`). Far from balance the balanced law would be wide and wrong, and is
not used.

The estimate is the median of this confidence distribution, P_up(θ̂) = P_lo(θ̂) (the interval at
level 0; with two laws, the median of their equal mixture, (P_up,1 + P_up,2)/2 = ½): inside
the interval and inside [0, 1], and θ̂ = ½ + U/(2nm) itself as ε → ∞ (the ratio
Ũ/(2·E a·E b) would be biased by the selection of the level that sets M). ``n_x``, ``n_y``
report E a, E b of the flat law, rounded. If the noise put Ũ so far out that every θ is
rejected, the interval is inverted from Ũ clipped to ±E[a·b] (a superset on the side of the
miss; the ``method`` ends in ``_clipped``).

**Several centers** (the stratified index θ = ½ + Σ U_l/(2 Σ a_l b_l)): the product of every
center's product rules is too large, so the sizes enter through their moments: Ũ_tot − (2θ − 1)·Σ
E[a_l b_l] against N(0, Σ E[(2ab)² V_l] + (2θ − 1)²·Σ Var[a_l b_l]) plus every center's Laplace
W_l, by ``shared.noisy_null`` (the sum over centers makes the normal part more nearly normal).
Two sets of moments, every center's flat law, and every center's balanced law where its n_X = n_Y
is not rejected (the flat one elsewhere); θ is accepted if either accepts it.

Coverage is measured by simulation (``tests/shared/dp/test_dp_mwu_effect.py``, slow; the table
in docs/methods.md §3.10).

References: Berger RL, Boos DD (1994) P values maximised over a confidence set for the nuisance
parameter. J Am Stat Assoc 89:1012-1016. Cousins RD, Highland VL (1992) Incorporating
systematic uncertainties into an upper limit. Nucl Instrum Methods A 320:331-335. Newcombe RG
(2006) Stat Med 25:559-573. Reed WJ, Jorgensen M (2004) Commun Statist Theory Methods
33:1733-1753.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from shared._validation import check_open_unit
from shared.dp.mwu import DPMannWhitney
from shared.effects import ProbabilisticIndex, newcombe_variance
from shared.noisy_null import NoiseLaw, NoisyNormal

FloatArray = NDArray[np.float64]

PANEL = 2.5
"""The widest Gauss-Legendre panel of the sizes' law, in units of its scale 1/ε₁."""
PANEL_NODES = 6
"""Gauss-Legendre nodes per panel."""
REACH = 20.0
"""Where the sizes' law is cut, in units of 1/ε₁ (e^{−20} < 3e-9 of its mass is left out)."""
GRID = 17
"""Candidate θ evaluated at once to bracket each end before the root search."""
BALANCED_LEVEL = 0.05
"""γ: the balanced law (n_X = n_Y) joins the flat one when |n̂_X − n̂_Y| <= q/ε₁, the test of
n_X = n_Y at level γ not rejecting (module docstring); the conventional level, not tuned. The
coverage it gives is measured in docs/methods.md §3.10."""


def size_law(n_hat: float, cap: int, size_epsilon: float) -> tuple[FloatArray, FloatArray]:
    """Nodes and weights (summing to 1) of the law of a = min(n, M), n | n̂ with density
    ∝ e^{−ε₁|n − n̂|} on [1, ∞) (module docstring).

    In x = ε₁|n − n̂| the law is e^{−x} on each side of n̂; the pieces [1, n̂] and [n̂, M] are
    integrated by Gauss-Legendre on panels at most ``PANEL`` wide (``PANEL_NODES`` nodes each;
    the integrand is analytic there), cut at x = ``REACH``; beyond M, a = M, one node with the
    mass e^{−ε₁(M − n̂)}/ε₁ left there.
    """
    scale = 1.0 / size_epsilon
    gl_x, gl_w = np.polynomial.legendre.leggauss(PANEL_NODES)
    nodes: list[FloatArray] = []
    weights: list[FloatArray] = []
    for start, stop, sign in ((max(1.0, min(n_hat, cap)), 1.0, -1.0),
                              (max(1.0, n_hat), float(cap), 1.0)):
        # x runs from |start − n̂|·ε₁ to |stop − n̂|·ε₁ along the side ``sign`` of n̂.
        x0 = abs(start - n_hat) * size_epsilon
        x1 = min(abs(stop - n_hat) * size_epsilon, REACH)
        if sign * (stop - start) <= 0 or x1 <= x0:
            continue
        panels = max(1, math.ceil((x1 - x0) / PANEL))
        edges = np.linspace(x0, x1, panels + 1)
        half = np.diff(edges)[:, None] / 2.0
        x = (edges[:-1, None] + half * (gl_x[None, :] + 1.0)).ravel()
        nodes.append(n_hat + sign * x * scale)
        weights.append((half * gl_w[None, :]).ravel() * np.exp(-x) * scale)
    beyond = max(float(cap), n_hat, 1.0)
    nodes.append(np.array([float(cap)]))
    weights.append(np.array([math.exp(-(beyond - n_hat) * size_epsilon) * scale]))
    a, w = np.concatenate(nodes), np.concatenate(weights)
    return np.minimum(np.maximum(a, 1.0), float(cap)), w / w.sum()


def balance_threshold(level: float = BALANCED_LEVEL) -> float:
    """q with P(|L_X − L_Y| > q/ε₁) = e^{−q}(1 + q/2) = ``level``, L iid Laplace(1/ε₁): the
    difference has density (ε₁/4)(1 + ε₁|t|)e^{−ε₁|t|}."""
    level = check_open_unit(level, "level")
    return float(optimize.brentq(lambda q: math.exp(-q) * (1.0 + q / 2.0) - level, 0.0, 800.0,
                                 xtol=1e-12))


def equal_size_law(n_x_hat: float, n_y_hat: float, cap: int, size_epsilon: float
                   ) -> tuple[FloatArray, FloatArray]:
    """Nodes and weights (summing to 1) of the law of a = b = min(n, M) under the balanced
    model n_X = n_Y = n, n | (n̂_X, n̂_Y) with density ∝ e^{−ε₁(|n − n̂_X| + |n − n̂_Y|)} on
    [1, ∞) (module docstring).

    The density is flat between the two noisy sizes and falls at rate 2ε₁ outside. Gauss-Legendre
    on panels at most ``PANEL``/(2ε₁) wide (``PANEL_NODES`` nodes each) between the kinks, from
    ``REACH``/(2ε₁) below the lower n̂ (or 1) up to c = max(M, n̂_X, n̂_Y, 1); beyond c, a = M,
    one node with the mass e^{−ε₁(2c − n̂_X − n̂_Y)}/(2ε₁) left there.
    """
    lo, hi = sorted((float(n_x_hat), float(n_y_hat)))
    top = max(float(cap), hi, 1.0)
    start = max(1.0, min(lo, top) - REACH / (2.0 * size_epsilon))
    edges = sorted({start, top, *(v for v in (lo, hi) if start < v < top)})
    gl_x, gl_w = np.polynomial.legendre.leggauss(PANEL_NODES)
    width = PANEL / (2.0 * size_epsilon)
    nodes: list[FloatArray] = []
    weights: list[FloatArray] = []
    for left, right in itertools.pairwise(edges):
        grid = np.linspace(left, right, max(1, math.ceil((right - left) / width)) + 1)
        half = np.diff(grid)[:, None] / 2.0
        nodes.append((grid[:-1, None] + half * (gl_x[None, :] + 1.0)).ravel())
        weights.append((half * gl_w[None, :]).ravel())
    n = np.concatenate([*nodes, np.array([top])]) if nodes else np.array([top])
    # Log-density relative to its top, e^{−ε₁(hi − lo)} on the flat part.
    log_w = -size_epsilon * (np.abs(n - n_x_hat) + np.abs(n - n_y_hat) - (hi - lo))
    w = np.concatenate([*weights, np.array([1.0 / (2.0 * size_epsilon)])]) * np.exp(log_w)
    return np.minimum(n, float(cap)), w / w.sum()


def _log_tail(x: FloatArray, sigma: FloatArray, b: float) -> FloatArray:
    """log P(S + w > x) for x >= 0, S ~ N(0, σ²) (σ an array, > 0), w ~ Laplace(b): the
    normal-Laplace closed form of ``shared.noisy_null`` (Reed & Jorgensen 2004), vectorized."""
    r = sigma / b
    u = x / sigma
    log_a = special.log_ndtr(-u)
    log_c = math.log(0.5) + 0.5 * r * r + x / b + special.log_ndtr(-u - r)
    log_b = math.log(0.5) + 0.5 * r * r - x / b + special.log_ndtr(u - r)
    # C <= A/2 in exact arithmetic; where rounding makes them equal far out, A − C -> 0.
    with np.errstate(divide="ignore"):
        log_ac = log_a + np.log1p(-np.exp(np.minimum(log_c - log_a, 0.0)))
    return np.asarray(np.logaddexp(log_ac, log_b))


def _sf(t: FloatArray, sigma: FloatArray, b: float) -> FloatArray:
    """P(S + w > t) for any real t (symmetry for t < 0)."""
    tail = np.exp(_log_tail(np.abs(t), sigma, b))
    return np.where(t >= 0, tail, 1.0 - tail)


def _invert(tails: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
            alpha: float) -> tuple[float, float, float] | None:
    """{θ in [0, 1]: both ``tails(θ)`` = (P_up, P_lo) > α/2} as [low, high] (None if empty);
    P_up increases and P_lo decreases in θ (the mean (2θ − 1)·ab does)."""
    half = alpha / 2.0
    grid = np.linspace(0.0, 1.0, GRID)
    up, lo = tails(grid)
    up, lo = up - half, lo - half
    inside = (up > 0) & (lo > 0)
    if not inside.any():
        return None
    first, last = int(np.argmax(inside)), GRID - 1 - int(np.argmax(inside[::-1]))

    def end(f: Callable[[float], float], a: float, b: float) -> float:
        return float(optimize.brentq(lambda t: f(t) - half, a, b, xtol=1e-7))

    def upper(t: float) -> float:
        return float(tails(np.array([t]))[0][0])

    def lower(t: float) -> float:
        return float(tails(np.array([t]))[1][0])

    def balance(t: float) -> float:
        p_up, p_lo = tails(np.array([t]))
        return float(p_up[0] - p_lo[0])

    low = 0.0 if first == 0 else end(upper, float(grid[first - 1]), float(grid[first]))
    high = 1.0 if last == GRID - 1 else end(lower, float(grid[last]), float(grid[last + 1]))
    # The median of the confidence distribution, P_up = P_lo (the 0 % interval): inside the
    # interval, and θ̂ = ½ + U/(2nm) itself for the exact twin.
    gap = up - lo
    if gap[0] >= 0:
        middle = 0.0
    elif gap[-1] <= 0:
        middle = 1.0
    else:
        k = int(np.argmax(gap >= 0))
        middle = float(optimize.brentq(balance, float(grid[k - 1]), float(grid[k]), xtol=1e-7))
    return low, high, min(high, max(low, middle))


def _pairs(law_x: tuple[FloatArray, FloatArray], law_y: tuple[FloatArray, FloatArray]
           ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(a, b, weight) over the product of two independent sizes' laws."""
    (ax, wx), (ay, wy) = law_x, law_y
    return np.repeat(ax, ay.size), np.tile(ay, ax.size), np.outer(wx, wy).ravel()


def _balanced(r: DPMannWhitney) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(a, b = a, weight) over the balanced law of one release's sizes."""
    a, w = equal_size_law(r.n_x_hat, r.n_y_hat, r.cap, r.size_epsilon)
    return a, a, w


def _single_tails(r: DPMannWhitney, law: tuple[FloatArray, FloatArray, FloatArray]
                  ) -> Callable[[float, FloatArray], tuple[FloatArray, FloatArray]]:
    """(P_up, P_lo)(Ũ, θ) of one center over the law (a, b, weight) of its kept sizes."""
    a1, b1, wab = law
    ab = a1 * b1
    w_scale = 2.0 * r.cap / r.u_epsilon

    def tails(u: float, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        th = theta[:, None]
        sigma = 2.0 * ab * np.sqrt(newcombe_variance(th, a1, b1))
        # σ = 0 at θ in {0, 1}: S is a point mass, the tail is the Laplace noise's alone.
        sigma = np.maximum(sigma, 1e-12 * w_scale)
        t = u - (2.0 * th - 1.0) * ab
        up = _sf(t, sigma, w_scale) @ wab
        return up, 1.0 - up  # the law is continuous: P_lo = 1 − P_up

    return tails


def _stratified_tails(releases: Sequence[DPMannWhitney],
                      laws: Sequence[tuple[FloatArray, FloatArray, FloatArray]]
                      ) -> Callable[[float, FloatArray], tuple[FloatArray, FloatArray]]:
    """(P_up, P_lo)(Ũ_tot, θ) of several centers through the moments of their sizes' laws."""
    noise = tuple(NoiseLaw.laplace(2.0 * r.cap / r.u_epsilon) for r in releases)
    pairs = [a * b for a, b, _ in laws]
    mean_pairs = math.fsum(float(w @ p) for (_, _, w), p in zip(laws, pairs, strict=True))
    pair_var = math.fsum(float(w @ (p - w @ p) ** 2)
                         for (_, _, w), p in zip(laws, pairs, strict=True))

    def tails(u: float, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        up, lo = np.empty(theta.size), np.empty(theta.size)
        for i, th in enumerate(theta.tolist()):
            c = 2.0 * th - 1.0
            normal = math.fsum(float(w @ ((2.0 * p) ** 2 * newcombe_variance(th, x, y)))
                               for (x, y, w), p in zip(laws, pairs, strict=True))
            law = NoisyNormal(normal + c * c * pair_var, noise)
            t = u - c * mean_pairs
            up[i], lo[i] = float(law.sf(t)), float(law.cdf(t))
        return up, lo

    return tails


def dp_probabilistic_index(
    releases: Sequence[DPMannWhitney], *, level: float = 0.95,
    balanced_level: float | None = BALANCED_LEVEL,
) -> ProbabilisticIndex:
    """The (stratified) probabilistic index of ε-DP Mann-Whitney releases with an interval that
    integrates the sizes' noise and adds U's (module docstring). Post-processing only.

    ``balanced_level`` is γ of the balanced law's test (module docstring); ``None`` leaves the
    balanced law out (the flat law alone, the interval before docs/methods.md §3.10's
    correction, kept for comparison).

    Guarantee: none beyond post-processing (the release's ε-DP is untouched). The interval is
    approximate: it assumes U' given the kept sizes normal with Newcombe's variance, the Laplace
    noises exactly as released, and the sizes' noise integrated by a prior (flat, or balanced
    where that is not rejected); its coverage is measured by simulation (docs/methods.md
    §3.10), and it always contains the flat law's interval."""
    level = check_open_unit(level, "level")
    releases = list(releases)
    if not releases or not all(isinstance(r, DPMannWhitney) for r in releases):
        raise ValueError("`releases` must be a non-empty sequence of DPMannWhitney")
    alpha = 1.0 - level
    # Per center: (a, b, weight) over the product of the two sizes' flat laws.
    laws_x = [size_law(r.n_x_hat, r.cap, r.size_epsilon) for r in releases]
    laws_y = [size_law(r.n_y_hat, r.cap, r.size_epsilon) for r in releases]
    flat = [_pairs(lx, ly) for lx, ly in zip(laws_x, laws_y, strict=True)]
    # The balanced law where n_X = n_Y is not rejected at level γ (module docstring).
    q = None if balanced_level is None else balance_threshold(balanced_level)
    plausible = [q is not None and abs(r.n_x_hat - r.n_y_hat) * r.size_epsilon <= q
                 for r in releases]
    balanced = [_balanced(r) if ok else law
                for r, ok, law in zip(releases, plausible, flat, strict=True)]
    mean_pairs = math.fsum(float(w @ (a * b)) for a, b, w in flat)
    u_total = math.fsum(r.statistic for r in releases)
    n_x = round(sum(float(w @ a) for (a, w) in laws_x))
    n_y = round(sum(float(w @ b) for (b, w) in laws_y))

    if len(releases) == 1:
        parts = [_single_tails(releases[0], flat[0])]
        if plausible[0]:
            parts.append(_single_tails(releases[0], balanced[0]))
    else:
        parts = [_stratified_tails(releases, flat)]
        if any(plausible):
            parts.append(_stratified_tails(releases, balanced))

    def tails(u: float, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        # θ is accepted if either law accepts it: the larger of each tail.
        ups, los = zip(*(part(u, theta) for part in parts), strict=True)
        return np.max(ups, axis=0), np.max(los, axis=0)

    def solve(u: float) -> tuple[float, float, float] | None:
        return _invert(lambda t: tails(u, t), alpha)

    method = "dp_integrated_score" + ("_stratified" if len(releases) > 1 else "")
    interval = solve(u_total)
    if interval is None:
        interval = solve(max(-mean_pairs, min(mean_pairs, u_total)))
        method += "_clipped"
    if interval is None:  # not reached: at the clipped Ũ the nearest end θ is accepted
        raise ArithmeticError("the interval of a clipped estimate is empty")
    low, high, estimate = interval
    return ProbabilisticIndex(estimate=estimate, low=low, high=high, level=level, n_x=n_x,
                              n_y=n_y, method=method)
