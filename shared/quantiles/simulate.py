"""The seed's quantile simulation (seed 001 §7.3; design in docs/methods.md §8.8), in-process.

Each replication draws center scales θ_l = exp(N(0, s²)) with s = ½·log((m + 0.1)/(m − 0.1)),
m the Gamma(r, 1) median, and n_l values Gamma(r, θ_l) at center l (sizes as in the seed); builds
the federated K-anonymous table as the services do; and runs every estimator. The truth is the
mixture quantile: the x with Σ_l (n_l/N)·Γ_r(x/θ_l) = q. Errors are standardized by √r.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special, stats

from shared._validation import check_generator, check_int, check_positive
from shared.binning import BinTable
from shared.federation import federated_table
from shared.quantiles._common import check_open_levels
from shared.quantiles.loss import in_process_loss_query, quantile_loss_quantiles
from shared.quantiles.shaped import yj_shaped_quantiles
from shared.quantiles.table import (
    extrapolation_quantiles,
    interpolation_quantiles,
    yj_table_quantiles,
)
from shared.quantiles.yj_data import in_process_query, yj_data_quantiles

FloatArray = NDArray[np.float64]

LEVELS = (0.02, 0.25, 0.5, 0.75, 0.98)
ESTIMATORS = (
    "sample",
    "yj_table",
    "yj_data",
    "interpolation",
    "extrapolation",
    "quantile_loss",
    "yj_shaped",
)
"""``sample`` is the pooled sample quantile (``numpy.quantile``, linear); the others are the
functions of :mod:`shared.quantiles` (``yj_shaped`` is ours)."""


def scale_sd(shape: float) -> float:
    """s = ½·log((m + 0.1)/(m − 0.1)), m the Gamma(shape, 1) median (docs/methods.md §8.8)."""
    m = float(stats.gamma.median(shape))
    return 0.5 * math.log((m + 0.1) / (m - 0.1))


def mixture_gamma_quantile(
    shape: float, scales: FloatArray, sizes: Sequence[int], levels: Sequence[float]
) -> FloatArray:
    """x with Σ_l (n_l/N)·Γ_shape(x/θ_l) = q for each level q (Brent, to 1e-12 relative)."""
    w = np.asarray(sizes, dtype=np.float64)
    w = w / w.sum()
    out = np.empty(len(levels))
    for i, q in enumerate(levels):
        comp = stats.gamma.ppf(q, shape) * scales
        lo, hi = float(comp.min()), float(comp.max())
        if hi - lo <= 1e-15 * hi:
            out[i] = lo
            continue
        out[i] = optimize.brentq(
            lambda x, q=q: float(w @ special.gammainc(shape, x / scales)) - q,
            lo,
            hi,
            xtol=1e-14,
            rtol=1e-12,
        )
    return out


@dataclass(frozen=True)
class QuantileSummary:
    """Per estimator (rows, :data:`ESTIMATORS`) and level (columns): bias, SD, MSE = bias² + SD²,
    bias²/variance, and the number of replications where the estimator failed (left out)."""

    estimators: tuple[str, ...]
    levels: tuple[float, ...]
    bias: FloatArray
    sd: FloatArray
    mse: FloatArray
    ratio: FloatArray
    failures: NDArray[np.int64]
    replications: int


@dataclass(frozen=True)
class QuantileSimulation:
    """Standardized errors (q̂ − Q)/√r, shape (replications, estimators, levels)."""

    shape: float
    sizes: tuple[int, ...]
    levels: tuple[float, ...]
    estimators: tuple[str, ...]
    errors: FloatArray

    def summary(self) -> QuantileSummary:
        e = self.errors
        failures = np.isnan(e).sum(axis=0)
        bias = np.nanmean(e, axis=0)
        sd = np.nanstd(e, axis=0, ddof=1)
        return QuantileSummary(
            estimators=self.estimators,
            levels=self.levels,
            bias=bias,
            sd=sd,
            mse=bias**2 + sd**2,
            ratio=bias**2 / sd**2,
            failures=failures.astype(np.int64),
            replications=int(e.shape[0]),
        )


def _estimate(
    name: str, xs: list[FloatArray], table: BinTable, lv: tuple[float, ...]
) -> FloatArray:
    """One estimator's quantiles in one replication (centers' raw data ``xs``, their table)."""
    if name == "sample":
        return np.asarray(np.quantile(np.concatenate(xs), lv), dtype=np.float64)
    if name == "yj_table":
        return yj_table_quantiles(table, lv).quantiles
    if name == "yj_data":
        return yj_data_quantiles(in_process_query(xs), lv).quantiles
    if name == "interpolation":
        return interpolation_quantiles(table, lv).quantiles
    if name == "extrapolation":
        return extrapolation_quantiles(table, lv).quantiles
    if name == "quantile_loss":
        bounds = (float(table.limits[0]), float(table.limits[-1]))
        return quantile_loss_quantiles(in_process_loss_query(xs), lv, bounds=bounds).quantiles
    if name == "yj_shaped":
        return yj_shaped_quantiles(table, lv).quantiles
    raise ValueError(f"unknown estimator {name!r}; known: {ESTIMATORS}")


def draw_replication(
    sizes: Sequence[int], shape: float, levels: Sequence[float], rng: np.random.Generator
) -> tuple[list[FloatArray], FloatArray]:
    """One replication of the seed's design: Gamma(r, θ_l) data of each center, θ_l =
    exp(N(0, s²)), and the true quantiles of their mixture at ``levels``."""
    scales = np.exp(rng.normal(0.0, scale_sd(shape), len(sizes)))
    xs = [rng.gamma(shape, th, n) for th, n in zip(scales, sizes, strict=True)]
    return xs, mixture_gamma_quantile(shape, scales, list(sizes), tuple(levels))


def simulate_quantiles(
    sizes: Sequence[int],
    *,
    shape: float,
    replications: int,
    rng: np.random.Generator,
    k: int = 10,
    levels: Sequence[float] = LEVELS,
    estimators: Sequence[str] = ESTIMATORS,
    progress: Callable[[int], None] | None = None,
) -> QuantileSimulation:
    """Run ``replications`` federated quantile studies with per-center ``sizes``.

    An estimator that raises ``ValueError``/``RuntimeError`` in a replication (e.g. the YJ data
    evaluation cap) gets NaN there; :meth:`QuantileSimulation.summary` counts those.
    ``estimators`` picks a subset of :data:`ESTIMATORS` (in that order in the result).
    ``progress(i)`` is called after replication i (0-based) when given.
    """
    reps = check_int(replications, "replications", 1)
    r = check_positive(shape, "shape")
    check_generator(rng)
    lv = check_open_levels(levels)
    size_list = [check_int(n, "sizes[i]", k) for n in sizes]
    if not size_list:
        raise ValueError("`sizes` must name at least one center")
    unknown = set(estimators) - set(ESTIMATORS)
    if unknown or not estimators:
        raise ValueError(f"`estimators` must be a non-empty subset of {ESTIMATORS}, got "
                         f"{tuple(estimators)!r}")
    chosen = tuple(name for name in ESTIMATORS if name in set(estimators))
    root_r = math.sqrt(r)
    errors = np.full((reps, len(chosen), len(lv)), np.nan)
    for i in range(reps):
        xs, truth = draw_replication(size_list, r, lv, rng)
        table = federated_table([(x, None) for x in xs], k=k, rng=rng)
        for e, name in enumerate(chosen):
            try:
                errors[i, e] = (_estimate(name, xs, table, lv) - truth) / root_r
            except (ValueError, RuntimeError):
                # The estimator could not run on this replication: its row stays NaN and the
                # summary counts it under ``failures`` instead of averaging it in.
                continue
        if progress is not None:
            progress(i)
    return QuantileSimulation(
        shape=r, sizes=tuple(size_list), levels=lv, estimators=chosen, errors=errors
    )
