"""YJ data: federated maximum likelihood for the Yeo-Johnson λ (seed 001 §7; docs/methods.md §8.4).

Center half, :func:`yj_moments`: for the λ the coordinator asks about, a center releases

    n,   S_log = Σ sign(x)·log(|x| + 1),   S_1(λ) = Σ YJ(x; λ),   S_2(λ) = Σ YJ(x; λ)²

(optionally with additive noise from a :class:`~shared.mechanisms.Mechanism`).

Coordinator half, :func:`fit_yj_data`: with N, S_log, S_1, S_2 summed over centers, the profile
log-likelihood of the YJ-normal model (Yeo & Johnson 2000; ``scipy.stats.yeojohnson_llf``) is

    ℓ(λ) = −N/2 · log σ̂²(λ) + (λ − 1)·S_log,   μ̂(λ) = S_1/N,   σ̂²(λ) = S_2/N − μ̂(λ)²,

maximized by Brent's method (``scipy.optimize.brent`` from the bracket, as
``scipy.stats.yeojohnson_normmax(x, brack=...)`` does on pooled data). Then
q̂ = YJ⁻¹(μ̂ + σ̂·Φ⁻¹(q); λ̂) (:func:`yj_data_quantiles`).

Every λ evaluation is a release of four numbers by every center, so the number of distinct λ
values asked about is capped per study (``max_evaluations``); going over raises
:class:`EvaluationCapError`. From the bracket (−2, 2), on 300 federated Gamma(r, θ) samples of
1500 (r = 4, 10; 3 centers) Brent took a median of 14 evaluations, 17 at the 90th percentile,
23 at the 99th, 30 at most; the default cap of 40 leaves room for that. (A center cap of 20
would stop about 1 study in 20.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from shared._validation import as_finite_1d, check_generator, check_int
from shared.mechanisms.base import Mechanism
from shared.quantiles._common import YJQuantileResult, check_open_levels
from shared.quantiles.yeojohnson import YJNormal, _check_lmbda, yeojohnson

DEFAULT_BRACKET = (-2.0, 2.0)
DEFAULT_MAX_EVALUATIONS = 40
DP_TOL = 1e-3
"""Brent's relative tolerance on noisy sums (about 3e-3 in λ): tighter only chases the noise, and
lets a fit stay within the ``shared.fields.DP_MAX_EVALUATIONS`` releases ε is split over."""
BRENT_TOL = 1.48e-8
"""``scipy.optimize.brent``'s default relative tolerance."""
_SHIFT = 3.0
"""Brent runs on λ + 3. Its tolerance is relative to the abscissa, so near λ = 0 it asks for
~1e-11 in λ, far below what ℓ can resolve (it is flat to rounding there): on Gamma samples that
cost up to 42 evaluations instead of 30, each a release by every center. Brent's steps are
translation-equivariant, so only the stopping rule changes: about 5e-8 in λ everywhere."""


YJ_DATA_MAX_NOISE_RATIO = 0.0035
"""The most noise a DP YJ data fit is offered with (:func:`yj_data_noise_ratio`; about
ε·N >= 40,000 for bounds [0, b]): above it the fit fails or misses by a large part of the
data's spread (docs/methods.md §8.4)."""


def yj_data_noise_ratio(epsilon: float, bounds: tuple[float, float], n: int,
                        max_evaluations: int) -> float:
    """The noise SD of the pooled variance σ̂²(1) = S_2/N − (S_1/N)² at λ = 1 (YJ the identity),
    over the largest variance values in ``bounds`` can have, (b − a)²/4: public (ε, bounds, the
    centers' declared sizes N, the cap on evaluations), so it decides before anything is spent.

    Each evaluation is ε/``max_evaluations``-DP with Laplace noise of scale Δ/ε' on each sum,
    Δ the add/remove L1 sensitivity of the three sums at λ = 1,
    max|sign(x)·log(|x| + 1)| + max|x| + max x² over the bounds (``shared.releases``'s
    calibration); the noise on S_2/N has SD √2·Δ/(ε'·N). Measured on Gamma(2, 3) data (SD 4.2,
    quartiles 2.9, 5.0, 8.1), N = 1500 over three centers, bounds [0, 30], 60 fits each, the
    bounded fit and the quantiles clamped to the bounds: ratio 0.031 (ε = 3) left 2 fits
    without an estimate and 6 outside the bounds, median errors 0.9-1.4; 0.0094 (ε = 10) 1 and
    1, 0.7-1.3; 0.0031 (ε = 30) none, 0.6-0.8 (90th percentile 1.9-2.6); 0.0009 (ε = 100)
    none, 0.24-0.28."""
    a, b = bounds
    if n < 1:
        return math.inf
    ends = (abs(a), abs(b))
    sensitivity = max(math.log1p(e) for e in ends) + max(ends) + max(e * e for e in ends)
    per_call = epsilon / max_evaluations
    return math.sqrt(2.0) * sensitivity / (per_call * n) / ((b - a) ** 2 / 4.0)


class EvaluationCapError(RuntimeError):
    """The fit needed more λ evaluations (center releases) than the study allows."""


@dataclass(frozen=True)
class YJMoments:
    """One center's moment sums at one λ (see the module docstring); ``n`` is exact."""

    lmbda: float
    n: int
    sum_log: float
    sum_yj: float
    sum_yj_sq: float


def yj_moments(
    x: ArrayLike,
    lmbda: float,
    *,
    mechanism: Mechanism | None = None,
    rng: np.random.Generator | None = None,
) -> YJMoments:
    """The center half: n, Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)² of the values ``x``.

    With a ``mechanism`` (and its ``rng``), noise is added to the three sums: three independent
    draws from a one-dimensional mechanism or one draw from a three-dimensional one; ``n`` is
    released exactly. The privacy the noise buys is whatever the caller calibrated the
    mechanism for: YJ(x; λ) is unbounded, so a differential-privacy guarantee needs clipped
    values and a sensitivity computed for them; nothing here clips.
    """
    values = as_finite_1d(x, "x")
    lam = _check_lmbda(lmbda)
    y = yeojohnson(values, lam)
    sums = np.array(
        [
            np.sum(np.sign(values) * np.log1p(np.abs(values))),
            np.sum(y),
            np.sum(y * y),
        ]
    )
    if mechanism is not None:
        if not isinstance(mechanism, Mechanism):
            raise ValueError("`mechanism` must implement shared.mechanisms.Mechanism")
        gen = check_generator(rng)
        if mechanism.dim == 1:
            sums = sums + mechanism.sample(gen, 3)
        elif mechanism.dim == 3:
            sums = sums + mechanism.sample(gen, ())
        else:
            raise ValueError(
                f"`mechanism` must be 1- or 3-dimensional for the three sums, got dim="
                f"{mechanism.dim}"
            )
    if not np.isfinite(sums).all():
        raise ValueError(f"YJ(x; {lam}) overflows for these values; choose another λ")
    return YJMoments(
        lmbda=lam,
        n=int(values.size),
        sum_log=float(sums[0]),
        sum_yj=float(sums[1]),
        sum_yj_sq=float(sums[2]),
    )


MomentQuery = Callable[[float], Sequence[YJMoments]]
"""Ask every center for its :class:`YJMoments` at one λ (in-process or over the network)."""


def _pooled(releases: Sequence[YJMoments], lmbda: float) -> tuple[int, float, float, float]:
    if len(releases) == 0:
        raise ValueError("the moment query returned no centers")
    for r in releases:
        if not isinstance(r, YJMoments):
            raise ValueError(f"the moment query must return YJMoments, got {type(r).__name__}")
        if not math.isclose(r.lmbda, lmbda, rel_tol=1e-12, abs_tol=1e-15):
            raise ValueError(f"a center answered for λ={r.lmbda}, the coordinator asked {lmbda}")
    n = sum(r.n for r in releases)
    if n < 2:
        raise ValueError(f"YJ data needs at least 2 values over all centers, got {n}")
    return (
        n,
        math.fsum(r.sum_log for r in releases),
        math.fsum(r.sum_yj for r in releases),
        math.fsum(r.sum_yj_sq for r in releases),
    )


def profile_loglik(n: int, sum_log: float, sum_yj: float, sum_yj_sq: float, lmbda: float) -> float:
    """ℓ(λ) = −n/2·log σ̂² + (λ − 1)·S_log with σ̂² = S_2/n − (S_1/n)²; −inf when σ̂² is not a
    positive normal number (as ``scipy.stats.yeojohnson_llf``) or is below what the sums can
    resolve (16·eps·S_2/n: constant data leave only rounding there)."""
    mean = sum_yj / n
    mean_sq = sum_yj_sq / n
    var = mean_sq - mean * mean
    floor = max(np.finfo(np.float64).smallest_normal, 16 * np.finfo(np.float64).eps * mean_sq)
    if not (math.isfinite(var) and var >= floor):
        return -math.inf
    return -n / 2.0 * math.log(var) + (lmbda - 1.0) * sum_log


def _check_bracket(bracket: Any) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in bracket)
    except (TypeError, ValueError):
        raise ValueError(f"`bracket` must be a pair of finite numbers, got {bracket!r}") from None
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        raise ValueError(f"`bracket` must be two distinct finite numbers, got {bracket!r}")
    return a, b


def fit_yj_data(
    query: MomentQuery,
    *,
    bracket: tuple[float, float] = DEFAULT_BRACKET,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    tol: float = BRENT_TOL,
    bounded: bool = False,
) -> YJNormal:
    """The coordinator half: λ̂ maximizing ℓ(λ) by Brent from ``bracket``, then μ̂(λ̂), σ̂(λ̂).

    ``query(λ)`` must return every center's :class:`YJMoments` at λ. Each distinct λ is asked
    once (answers are cached for the study); asking more than ``max_evaluations`` times raises
    :class:`EvaluationCapError`. ``tol`` is Brent's relative tolerance on λ + 3 (see
    ``_SHIFT``); with the default (scipy's) and no noise, λ̂ equals
    ``scipy.stats.yeojohnson_normmax(pooled, brack=bracket)`` to well under 1e-6. With noisy
    sums ℓ(λ) is jagged at the noise level: pass a looser ``tol`` (e.g. 1e-3, i.e. about 3e-3
    in λ) or Brent spends the cap chasing noise; and ℓ may keep rising past every bracket Brent
    tries, when scipy raises its ``BracketError`` (a ``RuntimeError``). Callers treat
    ``RuntimeError`` and ``ValueError`` as "no estimate".

    ``bounded`` (for noisy sums; the coordinator's DP fit): λ is searched inside ``bracket``
    only (Brent's bounded method, ``scipy.optimize.minimize_scalar``, to ``tol`` times the
    bracket's width), never past it: on noisy sums ℓ(λ) at wide λ is noise, and following it
    out of the bracket is why the unbounded search failed (about half the fits on the services'
    settings) or ended at a λ whose quantiles are infinite. S_log, which does not depend on λ,
    is the first answer's for every λ: each answer carries fresh noise on it, and (λ − 1)·S_log
    with a new draw at each λ made ℓ jagged by more than its curvature.
    """
    if not callable(query):
        raise ValueError("`query` must be a callable λ -> sequence of YJMoments")
    lo, hi = _check_bracket(bracket)
    cap = check_int(max_evaluations, "max_evaluations", 3)
    if not (isinstance(tol, float | int) and 0 < tol < 1):
        raise ValueError(f"`tol` must be a number in (0, 1), got {tol!r}")
    cache: dict[float, tuple[int, float, float, float]] = {}

    def pooled(lmbda: float) -> tuple[int, float, float, float]:
        lam = float(lmbda)
        if lam not in cache:
            if len(cache) >= cap:
                raise EvaluationCapError(
                    f"YJ data needed more than max_evaluations={cap} λ evaluations; each one is "
                    "a release by every center, so the study stops here (raise the cap only if "
                    "the centers allow it)"
                )
            cache[lam] = _pooled(query(lam), lam)
        return cache[lam]

    first_sum_log: list[float] = []

    def neg_loglik(shifted: float) -> float:
        lmbda = float(shifted) - _SHIFT
        n, sum_log, s1, s2 = pooled(lmbda)
        if bounded:
            first_sum_log.append(sum_log)  # exact sums give the same S_log at every λ
            sum_log = first_sum_log[0]
        return -profile_loglik(n, sum_log, s1, s2, lmbda)

    with np.errstate(over="ignore", invalid="ignore"):
        if bounded:
            lo, hi = min(lo, hi), max(lo, hi)
            found = optimize.minimize_scalar(
                neg_loglik, bounds=(lo + _SHIFT, hi + _SHIFT), method="bounded",
                options={"xatol": tol * (hi - lo), "maxiter": cap})
            shifted = float(found.x)
        else:
            shifted = optimize.brent(neg_loglik, brack=(lo + _SHIFT, hi + _SHIFT), tol=tol)
    lmbda = float(shifted) - _SHIFT
    n, _, s1, s2 = pooled(lmbda)
    mean = s1 / n
    var = s2 / n - mean * mean
    if not (math.isfinite(var) and var > 0):
        raise ValueError(f"the pooled YJ variance at λ̂={lmbda} is not positive ({var})")
    return YJNormal(lmbda=lmbda, loc=mean, scale=math.sqrt(var), evaluations=len(cache))


def yj_data_quantiles(
    query: MomentQuery,
    q: Any,
    *,
    bracket: tuple[float, float] = DEFAULT_BRACKET,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    tol: float = BRENT_TOL,
    bounded: bool = False,
) -> YJQuantileResult:
    """YJ data quantiles q̂ = YJ⁻¹(μ̂ + σ̂·Φ⁻¹(q); λ̂) at levels ``q`` in (0, 1) (``bounded``
    as in :func:`fit_yj_data`). Raises ``ValueError`` when a quantile is not finite."""
    levels = check_open_levels(q)
    fit = fit_yj_data(query, bracket=bracket, max_evaluations=max_evaluations, tol=tol,
                      bounded=bounded)
    quantiles = fit.ppf(np.asarray(levels))
    if not np.all(np.isfinite(quantiles)):
        # For λ̂ < 0 (> 2) YJ maps [0, ∞) ((−∞, 0]) onto a bounded range: a fitted normal
        # quantile beyond it has no preimage. Not an estimate, and never passed on as one.
        level = float(np.asarray(levels)[~np.isfinite(quantiles)][0])
        raise ValueError(
            f"the YJ data fit (λ̂ = {fit.lmbda:.3g}) puts the {level:g}-quantile at "
            f"{float(fit.ppf(np.asarray([level]))[0])}: μ̂ + σ̂·Φ⁻¹(q) lies beyond what "
            "YJ(·; λ̂) can reach, so there is no finite estimate")
    return YJQuantileResult(method="yj_data", levels=levels, quantiles=quantiles, fit=fit)


def in_process_query(
    centers: Sequence[ArrayLike],
    *,
    mechanism: Mechanism | None = None,
    rng: np.random.Generator | None = None,
) -> MomentQuery:
    """A :data:`MomentQuery` over in-memory centers (for simulations and tests)."""
    data = [as_finite_1d(x, f"centers[{i}]") for i, x in enumerate(centers)]
    if not data:
        raise ValueError("`centers` must hold at least one center")

    def query(lmbda: float) -> list[YJMoments]:
        return [yj_moments(x, lmbda, mechanism=mechanism, rng=rng) for x in data]

    return query
