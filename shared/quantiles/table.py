"""Quantile estimators on a one-group federated table (seed 001 §7; docs/methods.md §8).

The table has limits c_0 < c_1 < ... < c_B and counts f_1..f_B (bin j is (c_{j−1}, c_j]); F_j is
the cumulative share at c_j (F_0 = 0, F_B = 1). c_0 and c_B are privacy buffers (or ±inf); the
interior limits are randomized. Each estimator uses only these released numbers.

* :func:`yj_table_quantiles` ("YJ table", one pass): over interior limits with 0 < F_j < 1 let
  z_j = Φ⁻¹(F_j); choose λ in [0, 2] maximizing corr(YJ(c_j; λ), z_j); fit the OLS line
  YJ(c_j; λ) = a + b·z_j; q̂ = YJ⁻¹(a + b·Φ⁻¹(q); λ).
* :func:`interpolation_quantiles` ("interpolation with buffers"): the inverse of the piecewise
  linear CDF through (c_0, 0), (c_j, F_j), (c_B, 1).
* :func:`extrapolation_quantiles` ("interpolation/extrapolation"): the same through the interior
  points (c_j, F_j), 0 < F_j < 1, with the first and last segments extended beyond them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from shared.quantiles._common import (
    QuantileResult,
    YJQuantileResult,
    bin_of,
    check_open_levels,
    cumulative,
)
from shared.quantiles.yeojohnson import YJNormal, yeojohnson

FloatArray = NDArray[np.float64]

LAMBDA_BOUNDS = (0.0, 2.0)
"""λ range of the table-based YJ fits (docs/methods.md §8.2); on it YJ(·; λ) maps R onto R."""


def _neg_correlation(lmbda: float, c: FloatArray, z: FloatArray) -> float:
    y = yeojohnson(c, lmbda)
    yc = y - y.mean()
    zc = z - z.mean()
    denom = np.sqrt((yc @ yc) * (zc @ zc))
    if not np.isfinite(denom) or denom <= 0:
        return 1.0  # the worst possible value of −corr (overflow at extreme λ)
    return float(-(yc @ zc) / denom)


def fit_yj_table(table: Any) -> YJNormal:
    """The YJ table fit (formula in the module docstring): λ by bounded Brent on [0, 2], then
    (μ, σ) = (a, b) from ordinary least squares of YJ(c_j; λ) on z_j.

    Needs at least 3 interior limits with 0 < F_j < 1 (with two, every λ gives corr = 1).
    """
    cum = cumulative(table)
    c, f = cum.interior
    if c.size < 3:
        raise ValueError(
            f"the YJ table fit needs at least 3 interior limits with 0 < F < 1; `table` has "
            f"{c.size}"
        )
    z = special.ndtri(f)
    res = optimize.minimize_scalar(
        _neg_correlation,
        bounds=LAMBDA_BOUNDS,
        method="bounded",
        args=(c, z),
        options={"xatol": 1e-10},
    )
    lmbda = float(res.x)
    y = yeojohnson(c, lmbda)
    zc = z - z.mean()
    slope = float(zc @ (y - y.mean()) / (zc @ zc))
    intercept = float(y.mean() - slope * z.mean())
    return YJNormal(lmbda=lmbda, loc=intercept, scale=slope, evaluations=int(res.nfev))


def yj_table_quantiles(table: Any, q: Any) -> YJQuantileResult:
    """YJ table ("one pass") quantiles at levels ``q`` in (0, 1): YJ⁻¹(a + b·Φ⁻¹(q); λ)."""
    levels = check_open_levels(q)
    fit = fit_yj_table(table)
    return YJQuantileResult(
        method="yj_table", levels=levels, quantiles=fit.ppf(np.asarray(levels)), fit=fit
    )


def interpolation_quantiles(table: Any, q: Any) -> QuantileResult:
    """Interpolation with buffers: for F_j < q <= F_{j+1},
    q̂ = c_j + (q − F_j)/(F_{j+1} − F_j)·(c_{j+1} − c_j), with (c_0, 0) and (c_B, 1) at the buffers
    (a uniform distribution inside each bin). Needs finite extreme limits (buffers or natural).
    """
    levels = check_open_levels(q)
    cum = cumulative(table)
    if not (np.isfinite(cum.limits[0]) and np.isfinite(cum.limits[-1])):
        raise ValueError(
            "interpolation with buffers needs finite extreme limits; build the table with "
            "lower/upper = 'buffer' or a natural limit"
        )
    lv = np.asarray(levels)
    j = bin_of(cum.shares, lv)
    c, f = cum.limits, cum.shares
    frac = (lv - f[j]) / (f[j + 1] - f[j])
    return QuantileResult(
        method="interpolation", levels=levels, quantiles=c[j] + frac * (c[j + 1] - c[j])
    )


def extrapolation_quantiles(table: Any, q: Any) -> QuantileResult:
    """Interpolation/extrapolation: linear interpolation of (c_j, F_j) over interior limits with
    0 < F_j < 1, the first/last segment extended below/above them (the buffers are not used).

    Where empty bins repeat a share, the smallest limit with that share is kept (the left
    end of a flat stretch of the CDF). Needs two distinct interior shares.
    """
    levels = check_open_levels(q)
    c, f = cumulative(table).interior
    first = np.concatenate([[True], np.diff(f) > 0]) if f.size else f.astype(bool)
    c, f = c[first], f[first]
    if f.size < 2:
        raise ValueError(
            "interpolation/extrapolation needs at least 2 interior limits with distinct "
            f"shares 0 < F < 1; `table` has {f.size}"
        )
    lv = np.asarray(levels)
    s = np.clip(np.searchsorted(f, lv, side="left") - 1, 0, f.size - 2)
    slope = (c[s + 1] - c[s]) / (f[s + 1] - f[s])
    return QuantileResult(
        method="extrapolation", levels=levels, quantiles=c[s] + (lv - f[s]) * slope
    )


def table_brackets(table: Any, q: Any) -> list[tuple[float, float]]:
    """For each level q in (0, 1), the bin (c_j, c_{j+1}] whose cumulative share crosses q: the
    table's own statement of where the q-quantile lies, whatever estimator reads a value inside
    it (docs/methods.md §8.9). With whole counts (one center, or bins no later center split) the
    sample quantile x_(⌈qN⌉) lies in it for certain; where a joining center split bins, the
    counts are shared out in proportion (seed 001, Algorithm 6), so the crossing may be a bin
    off: with fractional counts the bracket holds the bins on either side too (conservative).
    An end at ±inf is an open table end: the table says nothing beyond its last limit."""
    cum = cumulative(table)
    levels = np.asarray(check_open_levels(q), dtype=np.float64)
    j = bin_of(cum.shares, levels)
    if np.allclose(cum.counts, np.round(cum.counts), rtol=0.0, atol=1e-9):
        return [(float(cum.limits[i]), float(cum.limits[i + 1])) for i in j]
    # Shared-out counts can put the crossing one bin off either way: the bins on both sides
    # are added (measured coverage: tests/shared/quantiles/test_table_brackets.py).
    last = cum.limits.size - 1
    return [(float(cum.limits[max(i - 1, 0)]), float(cum.limits[min(i + 2, last)])) for i in j]
