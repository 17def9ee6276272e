"""The unbounded quantile (Durfee, NeurIPS 2023, arXiv 2305.01177, Algorithm "Unbounded"):
one AboveThreshold walk over a geometric grid above an anchor.

With anchor l and base β, bucket k holds the values with ⌊log_β(x − l + 1)⌋ = k (values below l go
to bucket 0), so c_k = #{x < l − 1 + β^(k+1)}. Draw T = q·n + Z_T and walk k = 0, 1, ...; stop at
the first k with c_k + Z_k > T and release l + β^k − 1. Z_T and every Z_k are Laplace(2/ε).

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

from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_levels,
    check_neighbouring,
    check_positive,
)
from shared.dp._common import FloatArray, QuantilesResult
from shared.privacy import Neighbouring, PrivacySpent


def geometric_edges(anchor: float, top: float, beta: float) -> FloatArray:
    """Bucket upper edges l − 1 + β^(k+1) for the buckets k whose release l + β^k − 1 is < top."""
    n_buckets = max(1, math.ceil(math.log(top - anchor + 1.0) / math.log(beta)))
    edges: FloatArray = anchor - 1.0 + np.power(beta, np.arange(1, n_buckets + 1, dtype=float))
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
        # −x sorted ascending is x reversed; the count of −x below −e is the count of x above e.
        edges = geometric_edges(-b, -a, beta)
        counts = n - np.searchsorted(data, -edges, side="right")
        anchor = -b
    else:
        edges = geometric_edges(a, b, beta)
        counts = np.searchsorted(data, edges, side="left")
        anchor = a
    k = above_threshold_bucket(counts.astype(np.float64), threshold, epsilon, rng)
    release = anchor + beta**k - 1.0 if k < edges.size else math.inf
    value = min(release, -a if reflect else b)
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
    if np.ndim(q) != 0:
        raise ValueError(f"`q` must be a single level in [0, 1], got {q!r}")
    (level,) = check_levels(q, "q")
    rng = check_generator(rng)
    beta = check_positive(beta, "beta")
    if beta <= 1.0:
        raise ValueError(f"`beta` must be a finite number > 1, got {beta!r}")
    data = np.sort(as_finite_1d(x, "x"))
    threshold = threshold_for_level(level, data.size, reflect)
    value = unbounded_sorted(data, threshold, epsilon, bounds, rng, beta, reflect)
    return QuantilesResult(
        levels=(level,),
        values=(value,),
        spent=PrivacySpent(epsilon),
        method="unbounded_reflected" if reflect else "unbounded",
    )
