"""How uncertain a DP number is: noise scales and 95 % intervals a release carries with it.

See also docs/methods.md §9.

Post-processing only: every figure here is a function of ε, the algorithm, the neighbouring
relation and the levels asked — public — never of the data, so it costs no ε.

* **Laplace counts** (DPBoxplot's outlier counts, the pooled boxplot's threshold counts): a count
  released as c + Laplace(b) lies within c ± b·ln(1/(1 − level)) with the given probability
  (P(|w| > t) = e^{−t/b}). Rounding and flooring at 0 (post-processing) keep it inside.
* **Quantiles by the exponential mechanism** (PrivateQuantile, Smith 2011; JointExp, Gillenwater
  et al. 2021): the output interval's probability falls by e for each 2Δ/ε ranks of error, times
  the lengths of the data's gaps. Where the data are locally evenly spread, PrivateQuantile's
  rank error is close to Laplace(2Δ/ε), so its ``rank_halfwidth`` is (2Δ/ε)·ln(1/(1 − level))
  ranks. JointExp's utility is −Σ_p |(r_p − r_{p−1}) − t_p| over the m + 1 gaps between the
  released ranks, so the rank errors e_1..e_m form a bridge of m + 1 Laplace(2Δ/ε) steps from
  e_0 = 0 to e_{m+1} = 0: e_j has density ∝ f_j(e)·f_{m+1−j}(e), f_k the law of a sum of k
  Laplace (a variance-gamma law, |e|^{k−½}·K_{k−½}(|e|/b)); we give the widest level's
  half-width. Both are guides, not bounds: a gap much wider than its neighbours draws the
  output towards it. Checked by simulation (``tests/shared/dp/test_uncertainty.py``).
* **Quantiles by the unbounded walk** (Durfee 2023; docs/methods.md §9.3): the release v = e_K
  is a point of the walk's geometric grid, and the walk only learns on which step [e_(K−1), e_K)
  the count crossed its noisy threshold; the records inside that step are counted below v
  whatever the noise, so no statement about #{x < v} alone can hold without the data (a step
  may hold any number of records). The stated rank error is therefore about the step:
  #{x < v} >= q·n − h and #{x < e_(K−1)} <= q·n + h, e_(K−1) = a − 1 + (v − a + 1)/β the grid
  point below v (public: a function of the release). Its h covers both ways the walk errs, for
  any data: stopping late needs the first step past q·n + h not to fire (one difference of two
  Laplace); stopping early needs one of the steps below q·n − h to fire, and there may be as
  many of them as the grid has steps (N = ⌈log_β(b − a + 1)⌉), all just below — h solves
  E_Z_T[1 − (1 − P(Z > Z_T + h))^N] + P(Z − Z_T < −h) = 1 − level exactly
  (:func:`walk_rank_halfwidth`). Conservative where the data fill the grid (few steps compete),
  exact in the worst case.
* ApproxQuantile's recursion has no such single scale: ``None``.
"""

from __future__ import annotations

import collections
import functools
import math
from collections.abc import Sequence

from scipy import integrate, optimize, special

from shared._validation import check_open_unit, check_positive
from shared.dp.joint_exp import joint_exp_sensitivity
from shared.dp.private_quantile import private_quantile_sensitivity
from shared.privacy import Neighbouring


def laplace_halfwidth(scale: float, level: float = 0.95) -> float:
    """t with P(|Laplace(scale)| <= t) = ``level``: scale·ln(1/(1 − level))."""
    scale = check_positive(scale, "scale")
    level = check_open_unit(level, "level")
    return scale * math.log(1.0 / (1.0 - level))


def laplace_difference_halfwidth(scale: float, level: float = 0.95) -> float:
    """t with P(|L1 − L2| <= t) = ``level`` for two independent Laplace(scale):
    P(|L1 − L2| > t) = (1 + t/(2b))·e^{−t/b}."""
    scale = check_positive(scale, "scale")
    level = check_open_unit(level, "level")

    def excess(u: float) -> float:  # u = t/b
        return (1.0 + u / 2.0) * math.exp(-u) - (1.0 - level)

    return scale * float(optimize.brentq(excess, 0.0, 200.0, xtol=1e-12))


def laplace_sum_halfwidth(scales: Sequence[float], level: float = 0.95) -> float:
    """t with P(|Σ L_l| <= t) = ``level`` for independent Laplace(scales[l]) — the noise of a
    count summed over centers (the pooled boxplot's outlier counts). One scale: the closed form;
    several: Gil-Pelaez's inversion of the characteristic function Π 1/(1 + b_l² s²),
    P(|S| > t) = 1 − (2/π)·∫_0^∞ sin(s·t)/s · Π 1/(1 + b_l² s²) ds."""
    bs = [check_positive(b, "scales[i]") for b in scales]
    level = check_open_unit(level, "level")
    if not bs:
        raise ValueError("`scales` must hold at least one scale")
    # The half-width scales with the noise: invert the sum of L_l / max b (scales in (0, 1]),
    # where the integrals are well-conditioned whatever ε made the scales; a scale below 1e-12
    # of the largest moves t by less than floating point resolves.
    top = max(bs)
    bs = [b / top for b in bs if b >= 1e-12 * top]
    if len(bs) == 1:
        return top * laplace_halfwidth(1.0, level)
    # Equal scales (a tree's nodes) enter the product as one power: fast for thousands of terms.
    groups = [(b, float(k)) for b, k in collections.Counter(bs).items()]

    def cf(s: float) -> float:
        return math.exp(-sum(k * math.log1p((b * s) ** 2) for b, k in groups))

    def outside(t: float) -> float:
        cut = 1.0 / max(bs)
        near, _ = integrate.quad(lambda s: math.sin(s * t) / s * cf(s) if s > 0 else t * cf(0),
                                 0.0, cut, limit=200)
        far, _ = integrate.quad(lambda s: cf(s) / s, cut, math.inf, weight="sin", wvar=t)
        return 1.0 - 2.0 / math.pi * (near + far)

    sd = math.sqrt(sum(2.0 * b * b for b in bs))
    return top * float(optimize.brentq(lambda t: outside(t) - (1.0 - level), 1e-9 * sd,
                                       20.0 * sd, xtol=1e-9 * sd))


def laplace_bridge_halfwidth(scale: float, steps: int, position: int,
                             level: float = 0.95) -> float:
    """t with P(|e_j| <= t) = ``level`` for e_j = d_1 + ... + d_j, where d_1..d_steps are
    independent Laplace(scale) conditioned on summing to 0 (``position`` = j): the density of e_j
    is ∝ f_j(e)·f_{steps−j}(e), f_k(e) ∝ |e|^{k−½}·K_{k−½}(|e|/scale)."""
    scale = check_positive(scale, "scale")
    level = check_open_unit(level, "level")
    if not 0 < position < steps:
        raise ValueError(f"`position` must lie in 1..{steps - 1}, got {position}")
    return scale * _unit_bridge_halfwidth(steps, position, level)


@functools.lru_cache(maxsize=256)
def _unit_bridge_halfwidth(steps: int, position: int, level: float) -> float:
    """:func:`laplace_bridge_halfwidth` at scale 1 (the scale factors out). Kept: every DP
    quantile release of a center states it, and the integration costs milliseconds."""
    nu1, nu2 = position - 0.5, steps - position - 0.5

    def density(z: float) -> float:  # z = |e|/scale; kve(ν, z) = K_ν(z)·e^z keeps it finite
        if z == 0.0:  # K_ν(z) ~ Γ(ν)·2^(ν−1)·z^(−ν)
            return math.gamma(nu1) * math.gamma(nu2) * 2.0 ** (nu1 + nu2 - 2.0)
        return float(z ** (nu1 + nu2) * special.kve(nu1, z) * special.kve(nu2, z)
                     * math.exp(-2.0 * z))

    top = 40.0 + 4.0 * steps
    total, _ = integrate.quad(density, 0.0, top, limit=400)

    def outside(u: float) -> float:
        tail, _ = integrate.quad(density, u, top, limit=400)
        return tail / total - (1.0 - level)

    return float(optimize.brentq(outside, 0.0, top, xtol=1e-10))


def walk_rank_halfwidth(scale: float, steps: int, level: float = 0.95,
                        noise: str = "laplace") -> float:
    """h with P(the walk's step misses its count target by more than h ranks) <= 1 − ``level``
    for any data (module docstring): N = ``steps`` grid steps, noise of ``scale`` on the
    threshold and on every query — Laplace (the walk of
    :func:`shared.dp.unbounded.unbounded_quantile`) or one-sided exponential (DPBoxplot's
    default extremes walk: stopping late needs Z_T − Z_k > h, probability ½·e^(−h/s); early,
    one of N steps with Z_k > Z_T + h)."""
    scale = check_positive(scale, "scale")
    level = check_open_unit(level, "level")
    if steps < 1:
        raise ValueError(f"`steps` must be >= 1, got {steps}")
    if noise not in ("laplace", "exponential"):
        raise ValueError(f"`noise` must be 'laplace' or 'exponential', got {noise!r}")
    return scale * _unit_walk_halfwidth(int(steps), level, noise)


@functools.lru_cache(maxsize=256)
def _unit_walk_halfwidth(steps: int, level: float, noise: str = "laplace") -> float:
    """:func:`walk_rank_halfwidth` at scale 1."""
    if noise == "exponential":
        def early_given(z: float, h: float) -> float:  # z >= 0: N steps with Z_k > z + h
            p = math.exp(-(z + h))
            return -math.expm1(steps * math.log1p(-p)) if p < 1.0 else 1.0

        def early_exp(h: float) -> float:
            part, _ = integrate.quad(lambda z: math.exp(-z) * early_given(z, h), 0.0, math.inf,
                                     limit=200)
            return part

        return float(optimize.brentq(
            lambda h: early_exp(h) + 0.5 * math.exp(-h) - (1.0 - level), 0.0,
            60.0 + 2.0 * math.log(steps), xtol=1e-9))

    def above(y: float) -> float:  # P(Laplace(1) > y)
        return 0.5 * math.exp(-y) if y >= 0.0 else 1.0 - 0.5 * math.exp(y)

    def early(h: float) -> float:
        # Given Z_T = z, N competitors at −h fire first with 1 − (1 − P(Z > z + h))^N.
        def integrand(z: float) -> float:
            p = above(z + h)
            fired = 1.0 if p >= 1.0 else -math.expm1(steps * math.log1p(-p))
            return 0.5 * math.exp(-abs(z)) * fired

        total = 0.0
        for lo, hi in ((-math.inf, -h), (-h, 0.0), (0.0, math.inf)):
            if lo < hi:
                part, _ = integrate.quad(integrand, lo, hi, limit=200)
                total += part
        return total

    def late(h: float) -> float:  # P(L1 − L2 < −h), one side of the difference
        return 0.5 * (1.0 + h / 2.0) * math.exp(-h)

    return float(optimize.brentq(lambda h: early(h) + late(h) - (1.0 - level), 0.0,
                                 60.0 + 2.0 * math.log(steps), xtol=1e-9))


QUARTILES = (0.25, 0.5, 0.75)


def box_rank_halfwidths(method: str, epsilon: float, bounds: tuple[float, float],
                        level: float = 0.95) -> tuple[float | None, float | None]:
    """(quartiles, extremes): the 95 % rank errors a DPBoxplot states for its parts, in records
    (docs/methods.md §9.4), from public numbers (its method, ε, the bounds).

    * Quartiles, JointExp at ε/2: the Laplace bridge's widest level (where the data are
      evenly spread), at swap's Δ = 2 — not below add/remove's 1.5, whichever the center uses.
    * Extremes ψ, the walk at 3ε/16 on the β = 1.001 grid over the bounds: about the grid step
      next to ψ and the walk's count target (n − √n/20 for the default one-sided walk,
      exponential noise; n for Algorithm 1, Laplace noise), for any data
      (:func:`walk_rank_halfwidth`). A fence whisker is Q ± 1.5·IQR: its uncertainty is the
      quartiles'.

    (None, None) for a method without these parts (the naive boxplots)."""
    from shared.dp.unbounded import DEFAULT_BETA, grid_steps
    from shared.fields import METHOD_NAMES

    noise = {METHOD_NAMES["one_sided"]: "exponential",
             METHOD_NAMES["algorithm_1"]: "laplace",
             "pooled_dp_boxplot": "exponential"}.get(method)
    if noise is None:
        return None, None
    quartiles = rank_halfwidth("joint_exp", QUARTILES, epsilon / 2.0, "swap", level)
    extremes = walk_rank_halfwidth(2.0 / (3.0 * epsilon / 16.0),
                                   grid_steps(bounds, DEFAULT_BETA), level, noise)
    return quartiles, extremes


def pooled_extreme_rank_halfwidth(epsilon: float, bounds: tuple[float, float], centers: int,
                                  level: float = 0.95) -> float:
    """H, the rank error of a pooled DP box's whisker at ψ (docs/methods.md §9.4), from public
    numbers: each of the ``centers`` ran round 1's one-sided walk at 3ε/16 per extreme on the
    grid over ``bounds`` (:func:`shared.dp.pooled.center_extremes`), and the pooled ψ_max is
    the largest of their ψ_max,l (ψ_min the smallest ψ_min,l).

    Each center's walk keeps its statement (:func:`walk_rank_halfwidth`) at level^(1/L) with
    half-width h; the centers' noises are independent, so all L statements hold together with
    probability >= ``level``. Then, as ψ_max >= ψ_max,l for every l, at most Σ_l (√n_l/20 + h)
    of the pooled records lie at or above ψ_max (each center's at most √n_l/20 + h above its
    own ψ_max,l), and the center whose ψ_max it is holds at least √n/20 − h records at or
    above the grid step below it (the same for ψ_min, mirrored). Returns H = L·h; h = H/L."""
    from shared.dp.unbounded import DEFAULT_BETA, grid_steps

    if centers < 1:
        raise ValueError(f"`centers` must be >= 1, got {centers}")
    level = check_open_unit(level, "level")
    h = walk_rank_halfwidth(2.0 / (3.0 * epsilon / 16.0), grid_steps(bounds, DEFAULT_BETA),
                            level ** (1.0 / centers), "exponential")
    return centers * h


def tree_rank_halfwidth(scales: Sequence[float], branching: int, depth: int,
                        level: float = 0.95) -> float:
    """The 95 % rank error of any level read off the pooled tree (docs/methods.md §9.5), about
    the leaf holding the value, from the centers' node noise ``scales`` (public): the count
    below a leaf edge is a sum of at most (b − 1)·depth nodes of each center's tree, and the
    level's target q·total moves with the root's noise (at most one node more), so the error is
    within the half-width of a sum of (b − 1)·depth + 1 Laplace variables per center
    (:func:`laplace_sum_halfwidth`). Conservative: the consistency step (Hay et al. 2010)
    averages each node with its parent and children and only narrows it."""
    nodes = (branching - 1) * depth + 1
    return laplace_sum_halfwidth([s for s in scales for _ in range(nodes)], level)


def tree_root_halfwidth(scales: Sequence[float], branching: int, depth: int,
                        level: float = 0.95) -> float:
    """The 95 % half-width of the pooled box's n, the consistent summed tree's root count
    (docs/methods.md §9.4), from the centers' node noise ``scales`` (public). Hay et al.'s
    bottom-up pass makes the root a fixed linear combination of every node's count: a node of
    height i (leaves 1, the root depth + 1) enters with α_i·Π_{j>i}(1 − α_j), α_i =
    (b^i − b^(i−1))/(b^i − 1); its noise is a sum of independent Laplace variables, these
    coefficients times each center's scale (:func:`laplace_sum_halfwidth`). Exact, for any
    data (the root count is the total plus that noise; rounding moves it by at most ½)."""
    b = int(branching)
    if b < 2 or depth < 0:
        raise ValueError(f"need branching >= 2 and depth >= 0, got {branching}, {depth}")
    top = depth + 1
    alpha = {i: (b**i - b ** (i - 1)) / (b**i - 1) for i in range(2, top + 1)}
    alpha[1] = 1.0
    terms: list[float] = []
    for i in range(1, top + 1):
        coef = alpha[i] * math.prod(1.0 - alpha[j] for j in range(i + 1, top + 1))
        if coef <= 0:
            continue
        terms += [coef * s for s in scales for _ in range(b ** (top - i))]
    return laplace_sum_halfwidth(terms, level)


def quantile_sensitivity(algorithm: str, levels: Sequence[float],
                         neighbouring: Neighbouring) -> float | None:
    """Δ of the exponential mechanism's utility (rank error) as the DP modules calibrate it (for
    PrivateQuantile, the largest over the levels); ``None`` where the release is not one
    exponential mechanism."""
    if algorithm == "joint_exp":
        return joint_exp_sensitivity(tuple(levels), neighbouring)
    if algorithm == "private_quantile":
        return max(private_quantile_sensitivity(q, neighbouring) for q in levels)
    return None


def rank_halfwidth(algorithm: str, levels: Sequence[float], epsilon: float,
                   neighbouring: Neighbouring, level: float = 0.95,
                   grid_steps: int | None = None) -> float | None:
    """The 95 % rank error of a DP quantile release (module docstring), in records. For the
    unbounded walk ``grid_steps`` is the number of its grid's steps
    (:func:`shared.dp.unbounded.grid_steps`) and the error is about the step below the value."""
    epsilon = check_positive(epsilon, "epsilon")
    if algorithm == "unbounded":
        if grid_steps is None:
            raise ValueError("the unbounded walk's rank error needs its number of grid steps")
        return walk_rank_halfwidth(2.0 / (epsilon / len(levels)), grid_steps, level)
    delta = quantile_sensitivity(algorithm, levels, neighbouring)
    if delta is None:
        return None
    if algorithm == "joint_exp":
        m = len(levels)
        # The middle of the bridge is its widest point.
        return laplace_bridge_halfwidth(2.0 * delta / epsilon, m + 1, (m + 1) // 2, level)
    # PrivateQuantile answers each level with ε / (number of levels).
    return laplace_halfwidth(2.0 * delta / (epsilon / len(levels)), level)
