"""One consistent table from several ε-DP releases of the same records (post-processing: no ε).

A DP Table 1 releases, per center and arm, several noisy counts of the same records: each
described variable's (present, missing) pair and each categorical variable's cells (categories
and the missing cell) add up to the arm's size N. Read one by one they give as many sizes as
rows. This module makes them one table (docs/methods.md, "One consistent DP Table 1"):

* **The size** N̂ (:func:`combined_total`): the inverse-variance weighted mean of the releases'
  totals T_i = Σ_j Y_ij (each unbiased for N, var_i = Σ_j σ²_ij, independent), the minimum-
  variance unbiased linear combination (Cochran 1954, "The combination of estimates from
  different experiments"), shown rounded and at least 0.
* **Each release made to add up to it** (:func:`projected`): the nonnegative vector closest in
  Euclidean distance to its noisy counts with total N̂ (the projection onto the scaled simplex,
  Duchi, Shalev-Shwartz, Singer & Chandra 2008, Fig. 1; with equal noise variances the least-
  squares consistent estimate of Hay, Rastogi, Miklau & Suciu 2010), rounded to integers that
  keep the total (largest remainders).

Every number here is a function of released numbers only: post-processing, free under DP.
The uncertainty of a linear estimate is carried by :class:`Linear`: its value and its
coefficient on each noise draw (one per released count), so its 95 % half-width follows from
the noise laws (:meth:`Linear.halfwidth`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared.dp.uncertainty import laplace_sum_halfwidth

IntArray = NDArray[np.int64]

__all__ = [
    "Linear",
    "NoisyCounts",
    "adjusted",
    "combined_total",
    "projected",
    "shown_total",
    "simplex_projection",
]


@dataclass(frozen=True)
class NoisyCounts:
    """Released noisy counts of disjoint record sets that together are one arm's records:
    ``counts[j]`` carries independent zero-mean noise of ``variance`` (the same for each),
    its draw named ``keys[j]`` (unique across the table)."""

    keys: tuple[Hashable, ...]
    counts: tuple[float, ...]
    variance: float

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.counts) or not self.counts:
            raise ValueError("one key per count, and at least one count")
        if not all(math.isfinite(c) for c in self.counts):
            raise ValueError("`counts` must be finite")
        if not (math.isfinite(self.variance) and self.variance > 0):
            raise ValueError("`variance` must be finite and > 0")

    @property
    def total(self) -> float:
        return float(sum(self.counts))


@dataclass(frozen=True)
class Linear:
    """A linear function of released counts: ``value``, and its noise Σ_a c_a·Z_a as the
    ``coefficients`` c_a on the draws Z_a (independent, zero mean)."""

    value: float
    coefficients: Mapping[Hashable, float] = field(default_factory=dict)

    def __add__(self, other: Linear) -> Linear:
        out = dict(self.coefficients)
        for key, c in other.coefficients.items():
            out[key] = out.get(key, 0.0) + c
        return Linear(self.value + other.value, out)

    def __sub__(self, other: Linear) -> Linear:
        return self + other.times(-1.0)

    def times(self, factor: float) -> Linear:
        return Linear(self.value * factor, {k: c * factor for k, c in self.coefficients.items()})

    def variance(self, variances: Mapping[Any, float]) -> float:
        return float(sum(c * c * variances[k] for k, c in self.coefficients.items()))

    def halfwidth(self, variances: Mapping[Any, float], level: float = 0.95) -> float:
        """t with P(|noise| <= t) = ``level``, each draw taken as Laplace of its variance
        (scale √(σ²/2): exact for the Laplace counts of a description, for a two-sided
        geometric cell the continuous law of the same variance); 0 without noise."""
        scales = [abs(c) * math.sqrt(variances[k] / 2.0)
                  for k, c in self.coefficients.items() if c != 0.0 and variances[k] > 0]
        return laplace_sum_halfwidth(scales, level) if scales else 0.0


def combined_total(parts: Sequence[NoisyCounts]) -> Linear:
    """N̂ = Σ w_i T_i / Σ w_i, w_i = 1/var(T_i) (module docstring): var N̂ = 1/Σ w_i."""
    if not parts:
        raise ValueError("`parts` must hold at least one release")
    weights = [1.0 / (p.variance * len(p.counts)) for p in parts]
    whole = sum(weights)
    value = sum(w * p.total for w, p in zip(weights, parts, strict=True)) / whole
    coefficients: dict[Hashable, float] = {}
    for w, p in zip(weights, parts, strict=True):
        for key in p.keys:
            if key in coefficients:
                raise ValueError(f"the noise draw {key!r} is named twice")
            coefficients[key] = w / whole
    return Linear(value, coefficients)


def shown_total(total: Linear) -> int:
    """The size shown: N̂ rounded, at least 0."""
    return max(0, round(total.value))


def adjusted(part: NoisyCounts, total: Linear, index: int) -> Linear:
    """Count ``index`` of ``part`` moved so that the counts add up to ``total`` (the
    projection onto the hyperplane, before the clamping at 0 of :func:`projected`):
    Y_j + (N̂ − T)/m, m counts. Its noise is exact (a linear function of the draws)."""
    m = len(part.counts)
    own = Linear(part.counts[index], {part.keys[index]: 1.0})
    whole = Linear(part.total, dict.fromkeys(part.keys, 1.0))
    return own + (total - whole).times(1.0 / m)


def simplex_projection(counts: ArrayLike, total: float) -> NDArray[np.float64]:
    """The point of {x >= 0, Σx = ``total``} nearest ``counts`` in Euclidean distance: x_j =
    max(y_j − θ, 0), θ the one shift that makes them add up (Duchi, Shalev-Shwartz, Singer &
    Chandra 2008, Fig. 1: with y sorted decreasing, ρ the largest j with y_(j) − (Σ_{i<=j}
    y_(i) − total)/j > 0, θ = (Σ_{i<=ρ} y_(i) − total)/ρ)."""
    y = np.asarray(counts, dtype=np.float64)
    if y.ndim != 1 or y.size < 1 or not np.isfinite(y).all():
        raise ValueError("`counts` must be a nonempty vector of finite numbers")
    if not (math.isfinite(total) and total >= 0):
        raise ValueError(f"`total` must be finite and >= 0, got {total!r}")
    if total == 0:
        return np.zeros(y.size)
    s = np.sort(y)[::-1]
    cumulative = np.cumsum(s)
    held = s - (cumulative - total) / np.arange(1, y.size + 1) > 0
    rho = int(np.nonzero(held)[0][-1]) + 1  # j = 1 always holds: s_1 − (s_1 − total) > 0
    theta = (cumulative[rho - 1] - total) / rho
    return np.maximum(y - theta, 0.0)


def projected(counts: ArrayLike, total: int) -> IntArray:
    """The nonnegative integers nearest ``counts`` adding up to ``total`` (module docstring):
    :func:`simplex_projection`, rounded down, and the units left given to the largest
    remainders (ties: the earlier cell). Each lies within 1 of the projection."""
    if isinstance(total, bool) or not isinstance(total, (int, np.integer)) or total < 0:
        raise ValueError(f"`total` must be an integer >= 0, got {total!r}")
    x = simplex_projection(counts, float(total))
    floors = np.floor(x).astype(np.int64)
    # Σ floor(x) <= Σ x = total (to rounding), so 0 <= left <= the number of cells.
    left = max(0, int(total) - int(floors.sum()))
    order = np.argsort(-(x - floors), kind="stable")
    floors[order[:left]] += 1
    return floors
