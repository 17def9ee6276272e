"""ApproxQuantile (Kaplan, Schnapp, Stemmer, ICML 2022): m quantiles by recursive splitting.

Estimate the middle level of the remaining ones with PrivateQuantile, split the data at the
estimate v (left: x <= v, right: x > v), rescale the remaining levels to each side
(q/q_mid on the left, (q − q_mid)/(1 − q_mid) on the right) and recurse with bounds (a, v) and
(v, b). Each recursion depth touches every point at most once, so the calls of one depth compose
in parallel and the depths in sequence: ε' = ε / (⌈log2 m⌉ + 1) per call (docs/methods.md §5.4;
the divisor is at least the number of depths).

Neighbouring relations inside the recursion. The sub-data sets of a call differ by one added or
removed point when the full data sets do (add/remove), so every call uses the add/remove
sensitivity. Under swap the top call sees a swap; deeper, one swap can move a point from one side
to the other, which is a removal on one side and an addition on the other: two calls change. Those
calls therefore get ε'/2 each (add/remove sensitivity), which keeps every depth at ε'.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from shared._validation import check_levels
from shared.dp._common import FloatArray, QuantilesResult, quantiles_result
from shared.dp.private_quantile import private_quantile_sorted
from shared.privacy import Neighbouring


def approx_quantiles_sorted(
    data: FloatArray,
    levels: tuple[float, ...],
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> FloatArray:
    """ApproxQuantile on validated, sorted data; returns the sorted estimates."""
    eps_call = epsilon / (math.ceil(math.log2(len(levels))) + 1)
    out = np.empty(len(levels))
    _recurse(data, np.asarray(levels), bounds, eps_call, neighbouring, rng, out, 0, top=True)
    return np.sort(out)


def _recurse(
    data: FloatArray,
    levels: FloatArray,
    bounds: tuple[float, float],
    eps_call: float,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    out: FloatArray,
    start: int,
    *,
    top: bool,
) -> None:
    if levels.size == 0:
        return
    a, b = bounds
    if not a < b:
        # The interval collapsed onto an earlier estimate: the answer is known without the data.
        out[start : start + levels.size] = a
        return
    mid = levels.size // 2
    q_mid = float(levels[mid])
    if top:
        relation, eps = neighbouring, eps_call
    else:
        relation, eps = "add_remove", eps_call if neighbouring == "add_remove" else eps_call / 2
    # On an empty side PrivateQuantile is uniform on its single interval [a, b].
    v = float(private_quantile_sorted(data, q_mid, eps, (a, b), relation, rng)[0])
    out[start + mid] = v
    split = int(np.searchsorted(data, v, side="right"))
    left_levels = levels[:mid] / q_mid if q_mid > 0 else levels[:0]
    right_levels = (levels[mid + 1 :] - q_mid) / (1.0 - q_mid) if q_mid < 1 else levels[:0]
    _recurse(data[:split], left_levels, (a, v), eps_call, neighbouring, rng, out, start, top=False)
    _recurse(
        data[split:],
        right_levels,
        (v, b),
        eps_call,
        neighbouring,
        rng,
        out,
        start + mid + 1,
        top=False,
    )


def approx_quantiles(
    x: ArrayLike,
    q: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> QuantilesResult:
    """ε-DP estimates of the quantiles at levels ``q`` of ``x`` (ApproxQuantile), in [a, b].

    Parameters are those of :func:`shared.dp.joint_exp.joint_exp`. Time O(n log n + n log m).
    """
    return quantiles_result(approx_quantiles_sorted, "approx_quantile", x, check_levels(q, "q"),
                            epsilon=epsilon, bounds=bounds, neighbouring=neighbouring, rng=rng)
