"""Federated quantiles from the federated bin table (seed 001 §7; ``shared.quantiles``).

The table-based estimators need nothing but the study's federated table, so they cost the
centers nothing more: YJ table (one pass), interpolation with buffers, interpolation /
extrapolation, and our YJ-shaped estimator. A two-group table gives each group's quantiles from
its own row. An estimator that cannot run on this table (say interpolation on a table with
infinite ends) records its reason instead of failing the study.

The YJ-data and quantile-loss estimators need center endpoints (moment sums per λ, loss values)
that the centers do not serve yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shared.binning import BinTable
from shared.quantiles import (
    QuantileResult,
    extrapolation_quantiles,
    interpolation_quantiles,
    yj_shaped_quantiles,
    yj_table_quantiles,
)

Estimator = Literal["yj_table", "interpolation", "extrapolation", "yj_shaped"]
ESTIMATOR_NAMES: tuple[Estimator, ...] = ("yj_table", "interpolation", "extrapolation", "yj_shaped")
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
    for name in estimators:
        estimate = ESTIMATORS[name]
        out[name] = {}
        for g, group in enumerate(groups):
            row = BinTable(limits=table.limits, counts=table.counts[g : g + 1], k=table.k)
            try:
                result = estimate(row, list(levels))
            except ValueError as exc:
                out[name][group] = Estimate(None, str(exc))
            else:
                out[name][group] = Estimate(tuple(float(v) for v in result.quantiles))
    return out
