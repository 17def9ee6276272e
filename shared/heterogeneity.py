"""Heterogeneity of the probabilistic index between centers: Cochran's Q, I² with its Q-profile
interval, DerSimonian-Laird τ² (docs/methods.md §12.4).

Each center c gives θ̂_c = ½ + U_c/(2·n_c·m_c) (= U_c^count/(n_c·m_c), ties ½; ``shared.effects``).
Its variance is Newcombe's symmetrized Hanley-McNeil variance (``shared.effects.
newcombe_variance``) evaluated at the pooled θ̄, not at θ̂_c, plus σ_c²/(2·n_c·m_c)² for a noisy
release: v_c = V_c(θ̄). Under homogeneity every θ̂_c estimates the same θ, so its variance is
V_c(θ); taken at θ̂_c instead, the weights 1/V_c(θ̂_c) grow with |θ̂_c − ½| and correlate with
the deviations Q sums, and Q rejected far too often at small n (L = 3-10 centers of n = m =
10-20: .073-.195 at a nominal .05; at θ̄ .044-.056, docs/methods.md §12.4). This is the
homogeneity test with weights at the common effect of Kulinskaya, Dollinger & Bjørkestøl (2011).
θ̄ depends on the weights, so it is the root of the estimating equation

    Σ_c (θ̂_c − θ̄)/v_c(θ̄) = 0,

the fixed-effect estimate with its own weights (found by bracketing between min θ̂_c and
max θ̂_c; with equal n_c·m_c it is the mean of the θ̂_c). Every number below uses these v_c:
with w_c = 1/v_c (inverse-variance weights, Cochran 1954),

    θ̄_FE = Σ w_c θ̂_c / Σ w_c (= θ̄),     SE = 1/√Σ w_c,
    Q = Σ w_c (θ̂_c − θ̄_FE)²  ~ χ²_{L−1} under homogeneity,
    I² = max(0, (Q − (L − 1))/Q)                                  (Higgins & Thompson 2002),
    τ²_DL = max(0, (Q − (L − 1)) / (Σ w − Σ w²/Σ w))              (DerSimonian & Laird 1986),
    θ̄_RE = Σ w*_c θ̂_c / Σ w*_c with w*_c = 1/(v_c + τ²),  SE = 1/√Σ w*_c,

the estimates metafor's ``rma(yi, vi, method = "FE")`` / ``method = "DL"`` report for these
variances. Only when θ̄ itself is 0 or 1 (every center with one arm entirely above the other,
the same way, no noise) is v_c = 0, an infinite weight: refused, naming the center.

I²'s interval (:func:`q_profile_interval`) is the Q-profile interval for τ² (Viechtbauer 2007):
the generalized Q,

    Q_gen(τ²) = Σ_c (θ̂_c − θ̄(τ²))²/(v_c + τ²),  θ̄(τ²) = Σ θ̂_c/(v_c + τ²) / Σ 1/(v_c + τ²),

decreases in τ² and is χ²_{L−1} at the true τ²; the bounds are the τ² where it crosses the
χ²_{L−1} quantiles 1 − α/2 (lower) and α/2 (upper), 0 where it is already below at τ² = 0. I²
follows from τ² as I² = τ²/(τ² + s²) with the typical within-center variance
s² = (L − 1)·Σw/((Σw)² − Σw²) (Higgins & Thompson 2002, eq. 9), as metafor's
``confint(rma(yi, vi))`` reports it. Higgins & Thompson's test-based interval undercovers
with many centers (docs/methods.md §12.4): it is kept as a function, no longer reported.

Higgins & Thompson's interval (:func:`i_squared_interval`): (H² − 1)/H² at the ends of
exp(ln max(H, 1) ± z·SE(ln H)), H = √(Q/(L − 1)),

    SE(ln H) = ½(ln Q − ln(L − 1))/(√(2Q) − √(2L − 3))            if Q > L,
             = √(1/(2(L − 2))·(1 − 1/(3(L − 2)²)))                  if Q <= L and L > 2,

none when Q <= L = 2 (Higgins & Thompson 2002, Appendix; the test-based interval of R's meta,
``calcH``/``isquared``).

References: Cochran WG (1954) Biometrics 10:101-129. DerSimonian R, Laird N (1986) Control. Clin.
Trials 7:177-188. Higgins JPT, Thompson SG (2002) Stat. Med. 21:1539-1558. Kulinskaya E,
Dollinger MB, Bjørkestøl K (2011) Biometrics 67:203-212. Viechtbauer W (2007) Stat. Med.
26:37-52.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from shared._validation import as_finite_1d, check_open_unit
from shared.effects import newcombe_variance
from shared.mwu import MannWhitneyResult, released_centers

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class HeterogeneityResult:
    """Cochran's Q (``statistic``, χ²_{``df``} ``pvalue``), ``i_squared`` (a share in [0, 1]),
    ``tau_squared`` (DerSimonian-Laird), the fixed- and random-effects pooled estimates with
    standard errors and ``level`` intervals, and the per-center ``estimates`` and
    ``variances`` used."""

    statistic: float
    pvalue: float
    df: int
    i_squared: float
    tau_squared: float
    fixed: float
    fixed_se: float
    fixed_interval: tuple[float, float]
    random: float
    random_se: float
    random_interval: tuple[float, float]
    level: float
    estimates: tuple[float, ...]
    variances: tuple[float, ...]
    # The Q-profile ``level`` interval of I² (Viechtbauer 2007; I² from τ² with the typical
    # within-center variance, as metafor's confint). None only in results built elsewhere.
    i_squared_interval: tuple[float, float] | None = None
    # The θ the variances were evaluated at (:func:`index_heterogeneity`: the pooled θ̄); None
    # for variances given to :func:`cochran_q`.
    variance_at: float | None = None
    # The Q-profile ``level`` interval of τ².
    tau_squared_interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class QProfileInterval:
    """Viechtbauer's (2007) Q-profile ``level`` interval of τ² and the I² interval it implies
    (``typical_variance`` s², I² = τ²/(τ² + s²))."""

    tau_squared: tuple[float, float]
    i_squared: tuple[float, float]
    typical_variance: float
    level: float


def typical_variance(variances: ArrayLike) -> float:
    """Higgins & Thompson's (2002, eq. 9) typical within-center variance
    s² = (L − 1)·Σw/((Σw)² − Σw²), w = 1/v (metafor's ``vt``)."""
    w = 1.0 / as_finite_1d(variances, "variances")
    return float((w.size - 1) * w.sum() / (w.sum() ** 2 - np.sum(w * w)))


def generalized_q(tau2: float, estimates: FloatArray, variances: FloatArray) -> float:
    """Q_gen(τ²) = Σ (θ̂_c − θ̄(τ²))²/(v_c + τ²), θ̄(τ²) the weighted mean with those weights."""
    w = 1.0 / (variances + tau2)
    mean = float(np.sum(w * estimates) / w.sum())
    return float(np.sum(w * (estimates - mean) ** 2))


def q_profile_interval(estimates: ArrayLike, variances: ArrayLike, *,
                       level: float = 0.95) -> QProfileInterval:
    """The Q-profile interval of τ² (Viechtbauer 2007; module docstring): the τ² where the
    generalized Q, decreasing in τ², equals χ²_{L−1, 1−α/2} (lower end) and χ²_{L−1, α/2}
    (upper end), an end at 0 when Q_gen(0) is already below its quantile; I² = τ²/(τ² + s²) at
    each end. Equals metafor's ``confint(rma(yi, vi))`` for τ² and I² (as a share, not %)."""
    level = check_open_unit(level, "level")
    y = as_finite_1d(estimates, "estimates")
    v = as_finite_1d(variances, "variances")
    if y.size != v.size or y.size < 2 or np.any(v <= 0):
        raise ValueError("need at least two centers, one variance > 0 per estimate")
    df = y.size - 1
    alpha = 1.0 - level

    def end(quantile: float) -> float:
        if generalized_q(0.0, y, v) <= quantile:
            return 0.0
        # Q_gen falls from Q_gen(0) towards 0 as τ² grows: double until it is below.
        hi = max(float(np.max(v)), float(np.var(y)), 1e-12)
        while generalized_q(hi, y, v) > quantile:
            hi *= 2.0
        return float(optimize.brentq(lambda t: generalized_q(t, y, v) - quantile, 0.0, hi,
                                     xtol=1e-15 * hi, rtol=4 * np.finfo(float).eps))

    low = end(float(stats.chi2.isf(alpha / 2.0, df)))
    high = end(float(stats.chi2.ppf(alpha / 2.0, df)))
    s2 = typical_variance(v)
    return QProfileInterval((low, high), (low / (low + s2), high / (high + s2)), s2, level)


def i_squared_interval(q: float, df: int, *, level: float = 0.95) -> tuple[float, float] | None:
    """Higgins & Thompson's (2002, Appendix) test-based interval of I² from Cochran's ``q`` on
    ``df`` = L − 1 degrees of freedom (module docstring): the interval of ln H, H = √(Q/df),
    centred at ln max(H, 1), mapped by I² = (H² − 1)/H² with H below 1 read as 1. None where
    the standard error is undefined (L = 2 and Q <= 2)."""
    level = check_open_unit(level, "level")
    if df < 1 or not math.isfinite(q) or q < 0:
        raise ValueError(f"need df >= 1 and a finite Q >= 0, got Q = {q}, df = {df}")
    k = df + 1
    if q > k:
        se = 0.5 * (math.log(q) - math.log(df)) / (math.sqrt(2 * q) - math.sqrt(2 * k - 3))
    elif k > 2:
        se = math.sqrt(1 / (2 * (k - 2)) * (1 - 1 / (3 * (k - 2) ** 2)))
    else:
        return None
    z = float(special.ndtri(0.5 + level / 2.0))
    centre = math.log(max(math.sqrt(q / df), 1.0))

    def i2(h: float) -> float:
        return (h * h - 1.0) / (h * h)

    return (i2(max(math.exp(centre - z * se), 1.0)), i2(max(math.exp(centre + z * se), 1.0)))


def cochran_q(estimates: ArrayLike, variances: ArrayLike, *,
              level: float = 0.95) -> HeterogeneityResult:
    """Q, I², τ²_DL and the pooled estimates for any per-center estimates and their variances
    (module docstring); at least two centers, every variance > 0."""
    level = check_open_unit(level, "level")
    y = as_finite_1d(estimates, "estimates")
    v = as_finite_1d(variances, "variances")
    if y.size != v.size:
        raise ValueError(f"`estimates` ({y.size}) and `variances` ({v.size}) must have one "
                         "entry per center")
    if y.size < 2:
        raise ValueError("heterogeneity needs at least two centers")
    bad = np.nonzero(v <= 0)[0]
    if bad.size:
        raise ValueError(f"center {int(bad[0])}'s variance is {v[bad[0]]:g}; every variance must "
                         "be > 0 (an estimate at 0 or 1 has variance 0: it cannot be weighted)")
    w = 1.0 / v
    fixed = float(np.sum(w * y) / w.sum())
    q = float(np.sum(w * (y - fixed) ** 2))
    df = y.size - 1
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    tau2 = max(0.0, (q - df) / float(w.sum() - np.sum(w * w) / w.sum()))
    ws = 1.0 / (v + tau2)
    random = float(np.sum(ws * y) / ws.sum())
    z = float(special.ndtri(0.5 + level / 2.0))
    fse, rse = float(1.0 / np.sqrt(w.sum())), float(1.0 / np.sqrt(ws.sum()))
    profile = q_profile_interval(y, v, level=level)
    return HeterogeneityResult(
        statistic=q, pvalue=float(stats.chi2.sf(q, df)), df=df, i_squared=i2, tau_squared=tau2,
        fixed=fixed, fixed_se=fse, fixed_interval=(fixed - z * fse, fixed + z * fse),
        random=random, random_se=rse, random_interval=(random - z * rse, random + z * rse),
        level=level, estimates=tuple(float(t) for t in y),
        variances=tuple(float(t) for t in v),
        i_squared_interval=profile.i_squared, tau_squared_interval=profile.tau_squared,
    )


def pooled_index(estimates: ArrayLike, n: ArrayLike, m: ArrayLike,
                 extra: ArrayLike | float = 0.0) -> float:
    """θ̄ solving Σ_c (θ̂_c − θ̄)/(V_c(θ̄) + extra_c) = 0, V_c Newcombe's variance for n_c × m_c
    records (module docstring): the fixed-effect estimate whose weights are taken at itself.
    The left side is >= 0 at min θ̂_c and <= 0 at max θ̂_c (both clipped to [0, 1]), so a root
    lies between; the ends are moved inwards by 1e-10 of the span, where a variance of 0 would
    make the sum undefined. A root outside [0, 1] (noisy θ̂_c) is read as the nearer end."""
    theta = np.asarray(estimates, dtype=np.float64)
    nn, mm = np.asarray(n, dtype=np.float64), np.asarray(m, dtype=np.float64)
    add = np.broadcast_to(np.asarray(extra, dtype=np.float64), theta.shape)
    lo, hi = max(float(theta.min()), 0.0), min(float(theta.max()), 1.0)
    if hi - lo <= 1e-14:
        return min(1.0, max(0.0, float(np.mean(theta))))

    def score(t: float) -> float:
        return float(np.sum((theta - t) / (newcombe_variance(t, nn, mm) + add)))

    step = 1e-10 * (hi - lo)
    lo, hi = lo + step, hi - step
    if score(lo) <= 0:
        return lo
    if score(hi) >= 0:
        return hi
    return float(optimize.brentq(score, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps))


def index_heterogeneity(centers: Sequence[MannWhitneyResult], *,
                        level: float = 0.95) -> HeterogeneityResult:
    """Heterogeneity of the probabilistic index θ̂_c over the centers' MWU releases, with
    Newcombe's variance at the pooled θ̄ (:func:`pooled_index`; + the noise's share for a noisy
    release)."""
    released = released_centers(centers)
    n, m = released.n, released.m
    if np.any(n < 1) or np.any(m < 1):
        raise ValueError("every center must hold records of both arms")
    pairs = n * m
    theta = 0.5 + released.u / (2.0 * pairs)
    noise = (released.total - released.v) / (2.0 * pairs) ** 2
    at = pooled_index(theta, n, m, noise)
    var = np.asarray(newcombe_variance(at, n, m)) + noise
    return replace(cochran_q(theta, var, level=level), variance_at=at)
