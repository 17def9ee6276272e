"""PrivateQuantile: the exponential mechanism for one quantile (Smith, STOC 2011, Algorithm 2).

See also docs/methods.md §5.1-§5.2.

Interval i of the clipped sorted data (see :mod:`shared.dp._common`) is chosen with probability

    P(I_i) ∝ |I_i| · exp(-(ε / (2Δ)) · |i − q·n|),

and the output is uniform inside it. The utility -|#{x <= o} − q·n| of an output o changes by at
most Δ between neighbours: Δ = 1 under swap, Δ = max(q, 1 − q) under add/remove (one more point
moves the count by 0 or 1 and the target q·n by q). The sampler is exact in log space.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from shared.dp._common import (
    FloatArray,
    QuantilesResult,
    check_single_level,
    log_widths,
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
) -> FloatArray:
    """Unnormalised log-probabilities of the n + 1 intervals (inputs already validated, sorted)."""
    a, b = bounds
    n = x_sorted.size
    scale = epsilon / (2.0 * private_quantile_sensitivity(q, neighbouring))
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
) -> QuantilesResult:
    """ε-DP estimate of the q-quantile of ``x`` (Smith 2011), data clipped to ``bounds``.

    Parameters
    ----------
    x : the data (one value per patient); finite, non-empty.
    q : quantile level in [0, 1].
    epsilon : privacy budget spent, > 0.
    bounds : public (a, b), a < b; values outside are clipped, outputs lie in [a, b].
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.

    Time O(n log n) (the sort).
    """
    return quantiles_result(
        lambda data, levels, *rest: private_quantile_sorted(data, levels[0], *rest),
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
) -> FloatArray:
    """``size`` independent releases on validated, sorted data (``size`` > 1 serves the tests)."""
    log_w = private_quantile_log_weights(
        data, q, epsilon=epsilon, bounds=bounds, neighbouring=neighbouring
    )
    intervals = sample_rows(np.broadcast_to(log_w, (size, log_w.size)), rng)
    return uniform_in_intervals(data, *bounds, intervals, rng)
