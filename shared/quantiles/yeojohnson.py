"""The Yeo-Johnson power transform, its inverse and the YJ-normal model (Yeo & Johnson 2000).

    YJ(x; λ) = ((x + 1)^λ − 1)/λ            x >= 0, λ != 0     (log(x + 1) if λ = 0)
    YJ(x; λ) = −((1 − x)^(2−λ) − 1)/(2 − λ)  x < 0,  λ != 2     (−log(1 − x) if λ = 2)

the definition of seed 001 §7 and of ``scipy.stats.yeojohnson`` (docs/methods.md §8.1). Both
branches are computed as ``expm1(λ·log1p(x))/λ`` so that they stay accurate for λ near 0 or 2 and
x near 0. For λ in [0, 2] the transform maps the real line onto itself; outside that range one
branch is bounded and the inverse of a value beyond the bound is ±inf.

A YJ-normal variable X has YJ(X; λ) ~ N(μ, σ²); its q-quantile is YJ⁻¹(μ + σ·Φ⁻¹(q); λ) and its
CDF is Φ((YJ(x; λ) − μ)/σ) (:class:`YJNormal`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

FloatArray = NDArray[np.float64]


def _check_lmbda(lmbda: float) -> float:
    try:
        lam = float(lmbda)
    except (TypeError, ValueError):
        raise ValueError(f"`lmbda` must be a finite number, got {lmbda!r}") from None
    if not math.isfinite(lam):
        raise ValueError(f"`lmbda` must be a finite number, got {lmbda!r}")
    return lam


def _as_float(x: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if np.isnan(arr).any():
        raise ValueError(f"`{name}` contains NaN")
    return arr


def yeojohnson(x: ArrayLike, lmbda: float) -> FloatArray:
    """YJ(x; λ) elementwise (formula in the module docstring); ±inf map to ±inf for λ in [0, 2].

    Agrees with ``scipy.stats.yeojohnson(x, lmbda)`` (scipy switches to the log branches when
    |λ| or |λ − 2| is below machine epsilon; so do we).
    """
    lam = _check_lmbda(lmbda)
    arr = _as_float(x, "x")
    eps = np.finfo(np.float64).eps
    pos = arr >= 0
    with np.errstate(over="ignore", invalid="ignore"):
        xp = np.log1p(np.where(pos, arr, 0.0))
        xn = np.log1p(np.where(pos, 0.0, -arr))
        up = xp if abs(lam) < eps else np.expm1(lam * xp) / lam
        mu = 2.0 - lam
        down = -xn if abs(mu) < eps else -np.expm1(mu * xn) / mu
    return np.asarray(np.where(pos, up, down), dtype=np.float64)


def inverse_yeojohnson(y: ArrayLike, lmbda: float) -> FloatArray:
    """x with YJ(x; λ) = y, elementwise.

    For y >= 0: x = (1 + λ·y)^(1/λ) − 1 (expm1(y) if λ = 0); for y < 0:
    x = 1 − (1 − (2 − λ)·y)^(1/(2−λ)) (−expm1(−y) if λ = 2). YJ(·; λ) is increasing and
    sign-preserving, so the branch is chosen by the sign of y. When λ < 0 (λ > 2) the image of
    x >= 0 (x < 0) is bounded by −1/λ (1/(λ − 2)); beyond it the result is +inf (−inf).
    """
    lam = _check_lmbda(lmbda)
    arr = _as_float(y, "y")
    eps = np.finfo(np.float64).eps
    pos = arr >= 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        yp = np.where(pos, arr, 0.0)
        yn = np.where(pos, 0.0, arr)
        if abs(lam) < eps:
            up = np.expm1(yp)
        else:
            base = lam * yp
            up = np.where(base > -1.0, np.expm1(np.log1p(np.maximum(base, -1.0)) / lam), np.inf)
        mu = 2.0 - lam
        if abs(mu) < eps:
            down = -np.expm1(-yn)
        else:
            base = -mu * yn
            down = np.where(
                base > -1.0, -np.expm1(np.log1p(np.maximum(base, -1.0)) / mu), -np.inf
            )
    return np.asarray(np.where(pos, up, down), dtype=np.float64)


@dataclass(frozen=True)
class YJNormal:
    """The YJ-normal model: YJ(X; ``lmbda``) ~ N(``loc``, ``scale``²).

    ``evaluations`` counts the likelihood evaluations that went into a fit (for YJ data: the
    λ values the centers were asked about); 0 when not applicable.
    """

    lmbda: float
    loc: float
    scale: float
    evaluations: int = 0

    def __post_init__(self) -> None:
        for name in ("lmbda", "loc", "scale"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"`{name}` must be finite, got {value!r}")
        if self.scale <= 0:
            raise ValueError(f"`scale` must be > 0, got {self.scale!r}")

    def ppf(self, q: ArrayLike) -> FloatArray:
        """YJ⁻¹(μ + σ·Φ⁻¹(q); λ) (docs/methods.md §8.1)."""
        z = special.ndtri(np.asarray(q, dtype=np.float64))
        return inverse_yeojohnson(self.loc + self.scale * z, self.lmbda)

    def z(self, x: ArrayLike) -> FloatArray:
        """(YJ(x; λ) − μ)/σ: the standard-normal score of x under the model."""
        return (yeojohnson(x, self.lmbda) - self.loc) / self.scale

    def cdf(self, x: ArrayLike) -> FloatArray:
        """Φ((YJ(x; λ) − μ)/σ)."""
        return np.asarray(special.ndtr(self.z(x)), dtype=np.float64)
