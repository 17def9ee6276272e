"""The unbounded quantile (Durfee, NeurIPS 2023, arXiv 2305.01177, Algorithm "Unbounded"):
one AboveThreshold walk over a geometric grid above an anchor.

With anchor l and base β the candidate releases are l − 1 + β^k, k = 0, 1, ...; the query at step k
is the number of values strictly below the candidate, c_k = #{x < l − 1 + β^k} (values below l
count from k = 0 on). Draw T = q·n + Z_T and walk k = 0, 1, ...; stop at the first k with
c_k + Z_k > T and release l − 1 + β^k. Z_T and every Z_k are Laplace(2/ε). (``NOTES.md`` says
"bucket x into ⌊log_β(x − l + 1)⌋, accumulate c_k, return l + β^k − 1"; we read c_k as the count
of the buckets before k, as in Durfee's algorithm. Counting bucket k itself would release the
lower edge of the bucket where the threshold was crossed, one grid step too low: with bounds
[−50, 50] and β = 1.001 that step is 0.05, and a DP maximum of Uniform(−√3, √3) data would sit
below about 300 of 10^5 points.)

Privacy (our proof of the noise scale, both relations). Let g_k = c_k − q·n. Under swap the g_k move
by at most 1, all in the same direction; under add/remove by +(1 − q) or −q (adding) and −(1 − q)
or +q (removing). Shifting the noisy threshold by the largest move (<= max(q, 1 − q) <= 1) and the
stopping query's noise by at most 1 maps every noise draw that stops at k on one data set to one
that stops at k on the other, at a density cost of e^(ε/2) each: ε-DP.

What we implement of "unbounded". The anchor is the lower public bound a; the walk never needs
b, but a release above b is clamped to b (post-processing), which lets the walk stop after
⌈log_β(b − a + 1)⌉ buckets. The fully unbounded variant (no anchor: a first AboveThreshold pass
to find the scale) is not implemented; DPBoxplot has public bounds. ``reflect=True`` walks down
from b instead (the walk on −x, anchored at −b, at the mirrored threshold (1 − q)·n + 1), which
is how DPBoxplot estimates the minimum.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_neighbouring,
    check_positive,
)
from shared.dp._common import FloatArray, QuantilesResult, check_single_level
from shared.privacy import Neighbouring, PrivacySpent


def geometric_edges(anchor: float, top: float, beta: float) -> FloatArray:
    """The candidate releases l − 1 + β^k that lie below ``top`` (k = 0, 1, ...; at least l)."""
    n_candidates = max(1, math.ceil(math.log(top - anchor + 1.0) / math.log(beta)))
    edges: FloatArray = anchor - 1.0 + np.power(beta, np.arange(n_candidates, dtype=float))
    return edges


def above_threshold_bucket(
    cumulative_counts: FloatArray,
    threshold: float,
    epsilon: float,
    rng: np.random.Generator,
) -> int:
    """First k with counts[k] + Lap(2/ε) > threshold + Lap(2/ε); len(counts) if none."""
    scale = 2.0 / epsilon
    noisy_threshold = threshold + rng.laplace(0.0, scale)
    above = cumulative_counts + rng.laplace(0.0, scale, size=cumulative_counts.size)
    hits = np.flatnonzero(above > noisy_threshold)
    return int(hits[0]) if hits.size else cumulative_counts.size


def unbounded_sorted(
    data: FloatArray,
    threshold: float,
    epsilon: float,
    bounds: tuple[float, float],
    rng: np.random.Generator,
    beta: float,
    reflect: bool,
) -> float:
    """The walk on validated, sorted data; returns the release clamped to ``bounds``.

    ``threshold`` is the count target: q·n upward, (1 − q)·n + 1 when reflected; DPBoxplot passes
    n for both extremes (the maximum, and the maximum of −x).
    """
    a, b = bounds
    n = data.size
    if reflect:
        # The walk on −x anchored at −b: #{−x < e} = #{x > −e}.
        edges = geometric_edges(-b, -a, beta)
        counts = n - np.searchsorted(data, -edges, side="right")
    else:
        edges = geometric_edges(a, b, beta)
        counts = np.searchsorted(data, edges, side="left")
    k = above_threshold_bucket(counts.astype(np.float64), threshold, epsilon, rng)
    value = min(float(edges[k]), -a if reflect else b) if k < edges.size else (-a if reflect else b)
    return -value if reflect else value


def threshold_for_level(q: float, n: int, reflect: bool) -> float:
    """Count target of the walk for level q: q·n, or (1 − q)·n + 1 on the reflected data."""
    return (1.0 - q) * n + 1.0 if reflect else q * n


def unbounded_quantile(
    x: ArrayLike,
    q: float,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    beta: float = 1.001,
    reflect: bool = False,
) -> QuantilesResult:
    """ε-DP estimate of the q-quantile of ``x`` by one AboveThreshold walk (Durfee 2023).

    Parameters
    ----------
    x : the data (one value per patient); finite, non-empty.
    q : level in [0, 1]; q = 1 estimates the maximum.
    epsilon : privacy budget spent, > 0; the same noise serves both relations (module docstring).
    bounds : public (a, b): a anchors the upward walk, b caps the release (``reflect`` swaps roles).
    neighbouring : ``"add_remove"`` or ``"swap"`` (recorded; the noise is the same for both).
    rng : the only source of randomness.
    beta : grid base > 1; the release is within a factor β of the target's distance to the anchor.
    reflect : walk downward from b (use for minima and low quantiles).

    Time O(n log n) (sort) plus O(log_β(b − a + 1)).
    """
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    check_neighbouring(neighbouring)
    level = check_single_level(q)
    rng = check_generator(rng)
    beta = check_positive(beta, "beta")
    if beta <= 1.0:
        raise ValueError(f"`beta` must be a finite number > 1, got {beta!r}")
    data = ascending(as_finite_1d(x, "x"))
    threshold = threshold_for_level(level, data.size, reflect)
    value = unbounded_sorted(data, threshold, epsilon, bounds, rng, beta, reflect)
    return QuantilesResult(
        levels=(level,),
        values=(value,),
        spent=PrivacySpent(epsilon),
        method="unbounded_reflected" if reflect else "unbounded",
    )
