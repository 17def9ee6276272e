"""Checks and small pieces every quantile estimator shares: levels, one-group tables, results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shared._validation import check_levels
from shared.binning import BinTable
from shared.quantiles.yeojohnson import YJNormal

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class QuantileResult:
    """Estimates ``quantiles[i]`` of the levels ``levels[i]`` by the estimator ``method``."""

    method: str
    levels: tuple[float, ...]
    quantiles: FloatArray


@dataclass(frozen=True)
class YJQuantileResult(QuantileResult):
    """A quantile result that came from a fitted YJ-normal model ``fit``."""

    fit: YJNormal


def check_open_levels(q: Any) -> tuple[float, ...]:
    """Quantile levels: a number or a strictly increasing sequence, each strictly in (0, 1)."""
    levels = check_levels(q, "q")
    if levels[0] <= 0.0 or levels[-1] >= 1.0:
        raise ValueError(f"`q` levels must lie strictly between 0 and 1, got {q!r}")
    return levels


@dataclass(frozen=True)
class Cumulative:
    """A one-group table as points of its CDF: ``limits`` c_0..c_B, ``shares`` F_0 = 0..F_B = 1.

    ``shares[j]`` is the table's cumulative share at ``limits[j]`` (bin j is (c_j, c_{j+1}]).
    """

    limits: FloatArray
    shares: FloatArray
    counts: FloatArray
    total: float

    @property
    def interior(self) -> tuple[FloatArray, FloatArray]:
        """(c_j, F_j) over interior limits with 0 < F_j < 1 (the points the YJ table and the
        interpolation/extrapolation estimators use)."""
        c, f = self.limits[1:-1], self.shares[1:-1]
        keep = (f > 0.0) & (f < 1.0)
        return c[keep], f[keep]


def cumulative(table: Any) -> Cumulative:
    """Validate a one-group :class:`~shared.binning.BinTable` and return its cumulative shares.

    Refuses (``ValueError``) anything that is not a BinTable, two-group tables, tables with
    fewer than two bins, negative or non-finite counts, empty tables, and limits that are not
    strictly increasing or have infinite interior values.
    """
    if not isinstance(table, BinTable):
        raise ValueError(f"`table` must be a shared.binning.BinTable, got {type(table).__name__}")
    counts = np.asarray(table.counts, dtype=np.float64)
    limits = np.asarray(table.limits, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != 1:
        raise ValueError(
            f"`table` must hold exactly one group, got counts of shape {counts.shape}"
        )
    row = counts[0]
    if row.size < 2:
        raise ValueError(f"`table` must have at least 2 bins, got {row.size}")
    if limits.shape != (row.size + 1,):
        raise ValueError(
            f"`table` has {limits.size} limits for {row.size} bins; expected {row.size + 1}"
        )
    if np.isnan(limits).any() or not np.all(limits[1:] > limits[:-1]):
        raise ValueError("`table` limits must be strictly increasing")
    if not np.isfinite(limits[1:-1]).all():
        raise ValueError("`table` interior limits must be finite")
    if not np.isfinite(row).all() or (row < 0).any():
        raise ValueError("`table` counts must be finite and >= 0")
    total = float(row.sum())
    if total <= 0:
        raise ValueError("`table` is empty: its counts sum to 0")
    shares = np.concatenate([[0.0], np.cumsum(row) / total])
    shares[-1] = 1.0
    return Cumulative(limits=limits, shares=shares, counts=row, total=total)


def bin_of(shares: FloatArray, levels: FloatArray) -> NDArray[np.intp]:
    """Index j of the bin with F_j < q <= F_{j+1}, for each level q in (0, 1).

    That bin has positive mass, so F_{j+1} > F_j.
    """
    j = np.searchsorted(shares, levels, side="left") - 1
    return np.asarray(np.clip(j, 0, shares.size - 2), dtype=np.intp)
