"""Federated quantiles from the federated bin table (seed 001 §7; ``shared.quantiles``).

The table-based estimators need nothing but the study's federated table, so they cost the
centers nothing more: YJ table (one pass), interpolation with buffers, interpolation /
extrapolation, and our YJ-shaped estimator. A two-group table gives each group's quantiles from
its own row. An estimator that cannot run on this table (say interpolation on a table with
infinite ends) records its reason instead of failing the study.

YJ data (:func:`yj_data_estimates`) asks every center for its ε-DP moment sums at each λ Brent
tries (``POST .../yj-moments``: values clipped to public bounds, noise paid from each center's
budget) and fits λ, μ, σ by federated maximum likelihood (``shared.quantiles.yj_data``). The
quantile-loss benchmark is not offered here: it leaks data, and centers refuse it unless an
operator switches it on.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coordinator.ports import CenterPort
from shared import kinds
from shared.binning import BinTable
from shared.fields import DP_MAX_EVALUATIONS
from shared.quantiles import (
    QuantileResult,
    YJMoments,
    extrapolation_quantiles,
    interpolation_quantiles,
    table_brackets,
    yj_shaped_quantiles,
    yj_table_quantiles,
)
from shared.quantiles.wire import YJMomentsRequest
from shared.quantiles.yj_data import (
    DP_TOL,
    YJ_DATA_MAX_NOISE_RATIO,
    EvaluationCapError,
    yj_data_noise_ratio,
    yj_data_quantiles,
)

ESTIMATORS: dict[str, Callable[[Any, Any], QuantileResult]] = {
    "yj_table": yj_table_quantiles,
    "interpolation": interpolation_quantiles,
    "extrapolation": extrapolation_quantiles,
    "yj_shaped": yj_shaped_quantiles,
}


@dataclass(frozen=True)
class Estimate:
    """One estimator's quantiles of one group, or why it could not run."""

    quantiles: tuple[float, ...] | None
    error: str | None = None


def table_quantiles(
    table: BinTable,
    levels: Sequence[float],
    *,
    estimators: Sequence[str],
    groups: Sequence[str],
) -> dict[str, dict[str, Estimate]]:
    """``{estimator: {group: Estimate}}``; ``groups`` names the table's rows in order."""
    if len(groups) != table.n_groups:
        raise ValueError(f"{len(groups)} group names for a table of {table.n_groups} groups")
    out: dict[str, dict[str, Estimate]] = {}
    for name in (e for e in estimators if e in ESTIMATORS):
        estimate = ESTIMATORS[name]
        out[name] = {}
        for g, group in enumerate(groups):
            row = BinTable(limits=table.limits, counts=table.counts[g : g + 1], k=table.k)
            try:
                result = estimate(row, list(levels))
            except ValueError as exc:
                out[name][group] = Estimate(None, str(exc))
            else:
                out[name][group] = finite_estimate(result.quantiles, levels)
    return out


def quantile_brackets(table: BinTable, levels: Sequence[float], *,
                      groups: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    """``{group: [(low, high) per level]}``: where the table says each group's sample quantile
    lies (``shared.quantiles.table.table_brackets``); a group the table cannot bracket (say an
    empty row) is left out."""
    out: dict[str, list[tuple[float, float]]] = {}
    for g, group in enumerate(groups):
        row = BinTable(limits=table.limits, counts=table.counts[g : g + 1], k=table.k)
        try:
            out[group] = table_brackets(row, list(levels))
        except ValueError:
            continue
    return out


def finite_estimate(quantiles: Iterable[float], levels: Sequence[float]) -> Estimate:
    """The estimate, or why there is none when a quantile is not finite: an infinite value is
    never passed on as a result."""
    values = tuple(float(v) for v in quantiles)
    bad = [(lv, v) for lv, v in zip(levels, values, strict=True) if not math.isfinite(v)]
    if bad:
        return Estimate(None, f"the {bad[0][0]:g}-quantile is not finite ({bad[0][1]}): "
                              "no estimate")
    return Estimate(values)


async def yj_data_estimates(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    groups: Sequence[str | None],
    names: Sequence[str],
    levels: Sequence[float],
    epsilon: float,
    bounds: tuple[float, float],
    max_evaluations: int = DP_MAX_EVALUATIONS,
    sizes: Sequence[int] | None = None,
) -> dict[str, Estimate]:
    """``{group name: Estimate}`` of the YJ data estimator, one federated fit per group.

    Not offered where it cannot work: with ``sizes`` (each group's size over the centers, as
    they declare it) a group whose noise ratio (``shared.quantiles.yj_data.yj_data_noise_ratio``:
    public ε, bounds and sizes) exceeds ``YJ_DATA_MAX_NOISE_RATIO`` gets its reason and nothing
    is asked or spent. The fit searches λ inside (−2, 2) only (``bounded``): on noisy sums an
    unbounded search followed the noise out of the bracket and failed, or ended where the
    quantiles are infinite; a quantile that is not finite is a reason, never a result, and the
    others are clamped to the bounds (the clipped values' quantiles lie inside them).

    Each center spends at most ``epsilon`` per group: every λ Brent tries is one ε-DP release of
    the moment sums (values clipped to the public ``bounds``) at ``epsilon / max_evaluations``,
    and Brent stops at ``max_evaluations`` (recorded as the estimator's reason, not a failure).
    Brent's search is sequential and runs in a worker thread; each λ is one round of parallel
    requests to every center on the event loop. A center failure fails the study (a fit on
    fewer centers would silently be another estimate).
    """
    loop = asyncio.get_running_loop()
    per_call = epsilon / max_evaluations
    out: dict[str, Estimate] = {}
    for index, (group, name) in enumerate(zip(groups, names, strict=True)):
        if sizes is not None:
            ratio = yj_data_noise_ratio(epsilon, bounds, sizes[index], max_evaluations)
            if ratio > YJ_DATA_MAX_NOISE_RATIO:
                out[name] = Estimate(None, (
                    f"not offered: at ε = {epsilon:g} per center over {max_evaluations} λ "
                    f"evaluations, bounds [{bounds[0]:g}, {bounds[1]:g}] and {sizes[index]} "
                    f"records the noise on the fitted variance is {ratio:.2g} of the widest "
                    f"variance the bounds allow (at most {YJ_DATA_MAX_NOISE_RATIO:g} can work): "
                    "raise ε or narrow the bounds; nothing was spent"))
                continue

        async def ask(lmbda: float, group: str | None = group) -> list[YJMoments]:
            request = YJMomentsRequest(variable=variable, group=group, lmbda=lmbda,
                                       epsilon=per_call, bounds=bounds)
            released = await asyncio.gather(*(c.release(kinds.YJ_MOMENTS, dataset, request)
                                             for c in centers))
            return [r.to_result() for r in released]

        def query(lmbda: float, ask: Callable[..., Any] = ask) -> list[YJMoments]:
            return asyncio.run_coroutine_threadsafe(ask(lmbda), loop).result()

        try:
            result = await asyncio.to_thread(
                yj_data_quantiles, query, list(levels), max_evaluations=max_evaluations,
                tol=DP_TOL, bounded=True,
            )
        # The cap on λ evaluations, and on noisy sums a likelihood that keeps rising past every
        # bracket Brent tries (scipy's BracketError, a RuntimeError it does not export): the
        # estimator's reason, not a failure of the study.
        except (EvaluationCapError, ValueError, RuntimeError) as exc:
            out[name] = Estimate(None, str(exc))
        else:
            # The values were clipped to the bounds, so are their quantiles (post-processing).
            out[name] = finite_estimate(np.clip(result.quantiles, *bounds), levels)
    return out
