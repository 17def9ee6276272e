"""Pieces shared by the DP quantile algorithms: the interval view of the data, exact log-space
sampling, and the result type.

The quantile mechanisms of Smith (2011) and Gillenwater et al. (2021) both see the data through the
n + 1 intervals between consecutive order statistics of the clipped, sorted data,
a = x_0 <= x_1 <= ... <= x_n <= x_{n+1} = b. Interval i is [x_i, x_{i+1}]; an output inside it has
exactly i data points at or below it. Zero-width intervals (ties) carry probability 0: their log
width is -inf and every weight built from it stays -inf, so no special case is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_levels,
    check_neighbouring,
)
from shared.privacy import Neighbouring, PrivacySpent

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

SortedQuantiles = Callable[
    [FloatArray, tuple[float, ...], float, tuple[float, float], Neighbouring, np.random.Generator],
    FloatArray,
]
"""A quantile mechanism on validated input: (sorted data, levels, ε, bounds, neighbouring, rng)
→ the estimates, one per level."""


@dataclass(frozen=True)
class QuantilesResult:
    """DP estimates ``values[i]`` of the quantiles at ``levels[i]`` and the budget they used."""

    levels: tuple[float, ...]
    values: tuple[float, ...]
    spent: PrivacySpent
    method: str


def quantiles_result(
    mechanism: SortedQuantiles, method: str, x: ArrayLike, levels: tuple[float, ...], *,
    epsilon: float, bounds: tuple[float, float], neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> QuantilesResult:
    """The public face of every DP quantile mechanism: the arguments validated once, the data
    sorted, ``mechanism`` run, its estimates wrapped with the ε they spent (``levels`` are
    checked by the caller, which knows whether it takes one level or several)."""
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    data = ascending(as_finite_1d(x, "x"))
    values = mechanism(data, levels, epsilon, bounds, neighbouring, rng)
    return QuantilesResult(
        levels=levels,
        values=tuple(float(v) for v in values),
        spent=PrivacySpent(epsilon),
        method=method,
    )


def check_single_level(q: Any) -> float:
    """One quantile level in [0, 1] (the single-quantile mechanisms refuse sequences)."""
    if np.ndim(q) != 0:
        raise ValueError(f"`q` must be a single level in [0, 1], got {q!r}")
    return check_levels(q, "q")[0]


def interval_edges(
    x_sorted: FloatArray, a: float, b: float, lo: int = 0, hi: int | None = None
) -> FloatArray:
    """Edges of intervals lo..hi-1 (default all n + 1): x_lo, ..., x_hi with x_0 = a, x_{n+1} = b.

    ``x_sorted`` must be sorted; values are clipped to [a, b]. Only the slice is touched.
    """
    n = x_sorted.size
    hi = n + 1 if hi is None else hi
    edges = np.empty(hi - lo + 1)
    # edge k is x_(k) (1-based order statistic) for 1 <= k <= n
    first, last = max(lo, 1), min(hi, n)
    if first <= last:
        np.clip(x_sorted[first - 1 : last], a, b, out=edges[first - lo : last - lo + 1])
    if lo == 0:
        edges[0] = a
    if hi == n + 1:
        edges[-1] = b
    return edges


def log_widths(
    x_sorted: FloatArray, a: float, b: float, lo: int = 0, hi: int | None = None
) -> FloatArray:
    """log |I_i| for intervals lo..hi-1 (default all n + 1); -inf for the zero-width ones."""
    with np.errstate(divide="ignore"):
        return np.log(np.diff(interval_edges(x_sorted, a, b, lo, hi)))


def sample_rows(log_w: FloatArray, rng: np.random.Generator) -> IntArray:
    """For each row r, an index i drawn with probability exp(log_w[r, i]) / sum_i exp(log_w[r, i]).

    Inverse-CDF sampling after subtracting the row maximum: every weight within a factor e^-745 of
    the largest is represented with full relative precision (a Gumbel-max draw resolves only
    about e^-40, the range of a Gumbel variate built from a 53-bit uniform).
    """
    top = log_w.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise RuntimeError("no output has positive probability; this is a bug")
    p = np.exp(log_w - top)
    cdf = np.cumsum(p, axis=1)
    u = rng.random(log_w.shape[0]) * cdf[:, -1]
    idx = np.sum(cdf <= u[:, None], axis=1)
    # u * total can round up to total; fall back to the last index that has positive weight.
    last_positive = log_w.shape[1] - 1 - np.argmax(p[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last_positive).astype(np.intp)


def uniform_in_intervals(
    x_sorted: FloatArray, a: float, b: float, intervals: IntArray, rng: np.random.Generator
) -> FloatArray:
    """One uniform draw inside each chosen interval [x_i, x_{i+1}] (of the clipped data)."""
    n = x_sorted.size
    if n == 0:  # a single interval, [a, b]
        x_sorted = np.array([a])
    lo = np.where(intervals == 0, a, np.clip(x_sorted[np.maximum(intervals - 1, 0)], a, b))
    hi = np.where(intervals == n, b, np.clip(x_sorted[np.minimum(intervals, n - 1)], a, b))
    out: FloatArray = lo + (hi - lo) * rng.random(intervals.shape)
    return out
