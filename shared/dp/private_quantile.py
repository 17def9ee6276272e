"""PrivateQuantile: the exponential mechanism for one quantile (Smith, STOC 2011, Algorithm 2).

See also docs/methods.md §5.1-§5.2.

Interval i of the clipped sorted data (see :mod:`shared.dp._common`) is chosen with probability

    P(I_i) ∝ |I_i| · exp(-(ε / (2Δ)) · |i − q·n|),

and the output is uniform inside it. The utility -|#{x <= o} − q·n| of an output o changes by at
most Δ between neighbours: Δ = 1 under swap, Δ = max(q, 1 − q) under add/remove (one more point
moves the count by 0 or 1 and the target q·n by q). The sampler is exact in log space.

With a public resolution (``resolution=r``) the output is a grid point instead (the multiples of
r clipped into [a, b]): the candidates are grouped by their mid-rank C (ties counted half,
:class:`~shared.dp._common.GridLattice`), 2n + 1 positions in place of n + 1 intervals, each
weighing its number of grid points, and the output is a uniform grid point of the chosen group.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from shared.dp._common import (
    FloatArray,
    QuantilesResult,
    check_single_level,
    log_widths,
    make_grid,
    quantiles_result,
    sample_rows,
    uniform_in_intervals,
)
from shared.privacy import Neighbouring


def private_quantile_sensitivity(q: float, neighbouring: Neighbouring) -> float:
    """Sensitivity Δ of the utility -|i − q·n| under the given neighbouring relation."""
    return 1.0 if neighbouring == "swap" else max(q, 1.0 - q)


def private_quantile_log_weights(
    x_sorted: FloatArray,
    q: float,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    resolution: float | None = None,
) -> FloatArray:
    """Unnormalised log-probabilities of the n + 1 intervals (inputs already validated, sorted).

    With ``resolution``: of the 2n + 1 positions of the grid's lattice
    (:class:`~shared.dp._common.GridLattice`; position p holds the grid points of mid-rank
    C = p/2), each weighing its number of grid points, exp(−(ε/(2Δ))·|p/2 − q·n|)."""
    a, b = bounds
    n = x_sorted.size
    scale = epsilon / (2.0 * private_quantile_sensitivity(q, neighbouring))
    grid = make_grid(bounds, resolution)
    if grid is not None:
        positions = np.arange(2 * n + 1, dtype=np.float64)
        on_grid: FloatArray = grid.lattice(x_sorted).log_sizes() - (scale / 2.0) * np.abs(
            positions - 2.0 * q * n)
        return on_grid
    ranks = np.arange(n + 1, dtype=np.float64)
    out: FloatArray = log_widths(x_sorted, a, b) - scale * np.abs(ranks - q * n)
    return out


def private_quantile(
    x: ArrayLike,
    q: float,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    resolution: float | None = None,
) -> QuantilesResult:
    """ε-DP estimate of the q-quantile of ``x`` (Smith 2011), data clipped to ``bounds``.

    Privacy: ε-DP under ``neighbouring`` (the exponential mechanism with the utility's
    sensitivity Δ, module docstring). With ``resolution`` r the output is a point g of the
    public grid of r within the bounds (the multiples of r clipped into [a, b],
    :class:`shared.dp._common.Grid`; docs/methods.md §5.10), P(g) ∝ exp(−ε·|C(g) − q·n|/(2Δ)) with
    C(g) = #{x below g} + ½·#{x at g}, the mid-rank (a tied run counted half; for a g with no
    value at it C(g) = #{x <= g}, Smith's count): a finite, public candidate set and a utility of
    the same sensitivity Δ (one record moves C by 0, ½ or 1), so ε-DP for the same reason.

    Parameters
    ----------
    x : the data (one value per patient); finite, non-empty.
    q : quantile level in [0, 1].
    epsilon : privacy budget spent, > 0.
    bounds : public (a, b), a < b; values outside are clipped, outputs lie in [a, b].
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.
    resolution : the variable's public resolution (> 0), or None for a continuous output.

    Time O(n log n) (the sort).
    """
    return quantiles_result(
        lambda data, levels, *rest: private_quantile_sorted(data, levels[0], *rest,
                                                            resolution=resolution),
        "private_quantile", x, (check_single_level(q),), epsilon=epsilon, bounds=bounds,
        neighbouring=neighbouring, rng=rng)


def private_quantile_sorted(
    data: FloatArray,
    q: float,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    size: int = 1,
    *,
    resolution: float | None = None,
) -> FloatArray:
    """``size`` independent releases on validated, sorted data (``size`` > 1 serves the tests);
    on the grid of ``resolution`` when given (a uniform grid point of the chosen cell)."""
    grid = make_grid(bounds, resolution)
    log_w = private_quantile_log_weights(
        data, q, epsilon=epsilon, bounds=bounds, neighbouring=neighbouring,
        resolution=resolution,
    )
    intervals = sample_rows(np.broadcast_to(log_w, (size, log_w.size)), rng)
    if grid is not None:
        lattice = grid.lattice(data)
        return grid.points(lattice.starts[intervals] + rng.integers(0, lattice.sizes[intervals]))
    return uniform_in_intervals(data, *bounds, intervals, rng)
