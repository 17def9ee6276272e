"""Quantile-loss benchmark (seed 001 §7; docs/methods.md §8.7). LEAKS DATA: benchmark only.

The q-quantile minimizes the summed check loss L(u) = Σ_l Σ_i ρ_q(x_i − u) with
ρ_q(r) = r·(q − 1{r < 0}). Each center returns its own L_l(u) for a candidate u
(:func:`quantile_loss`); the coordinator minimizes Σ_l L_l(u) by bounded Brent between the
table's buffers (:func:`quantile_loss_quantiles`).

L_l is piecewise linear with a kink at every value the center holds, so a handful of calls
reveals data values exactly (seed 001 §7): centers must keep this off by default. It is here
so that simulations can compare against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from shared._validation import as_finite_1d, check_bounds, check_int, check_open_unit
from shared.quantiles._common import QuantileResult, check_open_levels

DEFAULT_MAX_EVALUATIONS = 200


@dataclass(frozen=True)
class QuantileLoss:
    """One center's loss Σ_i ρ_level(x_i − u) at one candidate ``u``."""

    u: float
    level: float
    n: int
    loss: float


def quantile_loss(x: ArrayLike, u: float, level: float) -> QuantileLoss:
    """The center half (leaks data; benchmark only): Σ_i ρ_q(x_i − u), ρ_q(r) = r·(q − 1{r < 0})."""
    values = as_finite_1d(x, "x")
    tau = check_open_unit(level, "level")
    cand = float(u)
    if not math.isfinite(cand):
        raise ValueError(f"`u` must be a finite number, got {u!r}")
    r = values - cand
    loss = float(np.sum(r * (tau - (r < 0))))
    return QuantileLoss(u=cand, level=tau, n=int(values.size), loss=loss)


LossQuery = Callable[[float, float], Sequence[QuantileLoss]]
"""Ask every center for its :class:`QuantileLoss` at (u, level)."""


def quantile_loss_quantiles(
    query: LossQuery,
    q: Any,
    *,
    bounds: tuple[float, float],
    xtol: float = 1e-9,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
) -> QuantileResult:
    """The coordinator half (leaks data; benchmark only): for each level, bounded Brent
    (``scipy.optimize.fminbound``) on Σ_l L_l(u) over ``bounds`` (the table's buffers).

    ``xtol`` is relative to the width of ``bounds``. Not converging within ``max_evaluations``
    calls for one level raises ``RuntimeError``.
    """
    levels = check_open_levels(q)
    lo, hi = check_bounds(bounds, "bounds")
    cap = check_int(max_evaluations, "max_evaluations", 3)
    if not (isinstance(xtol, float | int) and 0 < xtol < 1):
        raise ValueError(f"`xtol` must be a number in (0, 1), got {xtol!r}")
    if not callable(query):
        raise ValueError("`query` must be a callable (u, level) -> sequence of QuantileLoss")

    out = np.empty(len(levels))
    for i, tau in enumerate(levels):

        def total(u: float, tau: float = tau) -> float:
            answers = query(float(u), tau)
            if len(answers) == 0:
                raise ValueError("the loss query returned no centers")
            return math.fsum(a.loss for a in answers)

        x, _, ierr, _ = optimize.fminbound(
            total, lo, hi, xtol=xtol * (hi - lo), maxfun=cap, full_output=True, disp=0
        )
        if ierr:
            raise RuntimeError(
                f"the quantile loss did not converge within max_evaluations={cap} calls at "
                f"level {tau}"
            )
        out[i] = x
    return QuantileResult(method="quantile_loss", levels=levels, quantiles=out)


def in_process_loss_query(centers: Sequence[ArrayLike]) -> LossQuery:
    """A :data:`LossQuery` over in-memory centers (for simulations and tests)."""
    data = [as_finite_1d(x, f"centers[{i}]") for i, x in enumerate(centers)]
    if not data:
        raise ValueError("`centers` must hold at least one center")

    def query(u: float, level: float) -> list[QuantileLoss]:
        return [quantile_loss(x, u, level) for x in data]

    return query
