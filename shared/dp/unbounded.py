"""The unbounded quantile (Durfee, NeurIPS 2023, arXiv 2305.01177, Algorithm "Unbounded"):
one AboveThreshold walk over a geometric grid above an anchor.

See also docs/methods.md §5.5.

With anchor l and base β the candidate releases are l − 1 + β^k, k = 0, 1, ...; the query at step k
is the number of values strictly below the candidate, c_k = #{x < l − 1 + β^k} (values below l
count from k = 0 on). Given a count target t, draw a noisy threshold t + Z_T and walk
k = 0, 1, ...; stop at the first k with c_k + Z_k > t + Z_T and release l − 1 + β^k. (In the
bucket description — x in bucket ⌊log_β(x − l + 1)⌋, accumulate c_k, return l + β^k − 1 — c_k is
the count of the buckets before k, as in Durfee's algorithm. Counting bucket k itself would
release the lower edge of the bucket where the threshold was crossed, one grid step too low: with
bounds [−50, 50] and β = 1.001 that step is 0.05, and a DP maximum of Uniform(−√3, √3) data would
sit below about 300 of 10^5 points.)

Two kinds of noise (``noise``), the same kind and the same scale s = 2/ε on the threshold and on
every query:

* ``"laplace"``: Z_T, Z_k ~ Laplace(s), Durfee's AboveThreshold (DPBoxplot's seed walk).
* ``"exponential"`` (one-sided): Z_T, Z_k ~ Exp with mean s, density e^(−z/s)/s on z >= 0, as in
  the DPBoxplot authors' code (github jairoadiazr/DPBoxplot,
  ``private_quantiles/unboundedQuantile.py``, ε/2 each for the threshold and the queries).

Why one-sided noise for a maximum. With the target t = n (the seed's "1-quantile"), every query
past the maximum is c_k − t = 0, so the walk stops there only when a query's noise beats the
threshold's: with Laplace noise each step stops with probability 1/2·e^(−Z_T/s) when Z_T > 0, a
probability that is itself uniform on (0, 1/2), so the overshoot past the maximum has a heavy tail
(on an endless grid its mean number of steps would be infinite). The authors' code targets the
(1 − 1/(20√n))-quantile, t(n) = n − √n/20 (:func:`one_sided_max_target`), with exponential noise:
past the maximum c_k − t = √n/20 > 0 and Z_k >= 0, so the walk stops at the first grid step past
the maximum whenever Z_T < √n/20 (probability 1 − e^(−√n/(20s)): 0.77 at n = 10^5 and DPBoxplot's
walk budget 3/16 of ε = 1; otherwise the overshoot has the same kind of tail), while below the top
√n/20 values c_k − t < 0 and an early stop needs Z_k − Z_T (a Laplace(s) variable) to cover the
gap.

Privacy (our proof, both relations, both kinds of noise). The walk's output is the stopping index
K (or "no stop"); the release, edges[K] clamped to the bounds, is post-processing with public
(a, b, β). Write g_k(D) = c_k(D) − t(D), where t may depend on the size n = |D| (private under
add/remove; the walk uses it, see below), and for neighbours D, D' let Δ_k = g_k(D') − g_k(D).

1. Sensitivity. Swap (n fixed, t fixed): replacing x by x' > x lowers c_k by 1 exactly for
   x < e_k <= x', so every Δ_k is in [−1, 0] (x' < x: in [0, 1]). Add, D' = D ∪ {x}: c_k rises
   by [x < e_k] ∈ {0, 1} and t by τ = t(n + 1) − t(n), so Δ_k ∈ {−τ, 1 − τ}. For the targets we
   use, 0 <= τ <= 1: q·n gives τ = q; the reflected (1 − q)·n + 1 gives τ = 1 − q; and
   t(n) = n − √n/20 gives τ = 1 − (√(n + 1) − √n)/20 ∈ [0.95, 1), since 0 < √(n + 1) − √n <= 1
   for n >= 0. So in every case all Δ_k lie in one interval [−d, u] with u, d >= 0 and
   u + d <= 1: swap (u, d) = (0, 1) or (1, 0); adding (u, d) = (1 − τ, τ); removing, the same
   pair read from D' to D, (u, d) = (τ, 1 − τ). (A target with τ outside [0, 1] is not covered.)
2. Shift. Fix k and let A_k(D) be the noise draws (z_T, z_0, ..., z_k) that stop at k on D:
   g_j(D) + z_j <= z_T for j < k and g_k(D) + z_k > z_T. The translation
   φ(z_T, z_0, ..., z_k) = (z_T + u, z_0, ..., z_(k−1), z_k + u + d) maps A_k(D) into A_k(D'):
   for j < k, g_j(D') + z_j <= g_j(D) + u + z_j <= z_T + u; and
   g_k(D') + z_k + u + d >= g_k(D) − d + z_k + u + d > z_T + u. Both shifts are upward, so φ maps
   the support of either noise into itself — the exponential density is 0 below 0, which is why
   only upward shifts may be used — and its Jacobian is 1. Per coordinate p(z)/p(z + h) <= e^(h/s)
   for h >= 0 (Laplace: for every z; exponential: for z >= 0, with equality). Hence
   P_D(K = k) <= e^((u + (u + d))/s)·P_D'(K = k) = e^((2u + d)·ε/2)·P_D'(K = k). "No stop" needs
   only the threshold shift: factor e^(u·ε/2).
3. Reverse. From D' to D the changes are −Δ_k ∈ [−u, d]: the same map with u and d exchanged,
   factor e^((u + 2d)·ε/2). When all Δ_k have one sign (swap), one of the two directions needs
   only the query shift (d = 0 reversed: factor e^(ε/2)).
4. Since u + d <= 1, both 2u + d <= 2 and u + 2d <= 2: every output's probability changes by at
   most e^ε between neighbours, under swap and under add/remove, with either noise. For the
   one-sided maximum under add/remove the factors are e^((2 − τ)ε/2) <= e^(0.525ε) one way and
   e^((1 + τ)ε/2) < e^ε the other.

The size inside the walk. Under add/remove n is private; the walk's target uses the data's own n
(covered by step 1: τ ∈ [0, 1]). A public size there would be ε-DP as well (τ = 0), but a target
that misses the data's count by more than about √n/20 either stops inside the data or loses the
quick stop past the maximum, so the walk keeps the private n; DPBoxplot uses a public size only for
its whisker buffer (:mod:`shared.dp.boxplot`). The tests check every output's probability ratio
between neighbours against e^ε by exact integration (``tests/shared/dp/test_unbounded.py``).

What we implement of "unbounded". The anchor is the lower public bound a; the walk never needs
b, but a release above b is clamped to b (post-processing), which lets the walk stop after
⌈log_β(b − a + 1)⌉ buckets. The fully unbounded variant (no anchor: a first AboveThreshold pass
to find the scale) is not implemented; DPBoxplot has public bounds. ``reflect=True`` walks down
from b instead (the walk on −x, anchored at −b, at the mirrored threshold (1 − q)·n + 1), which
is how DPBoxplot estimates the minimum.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_choice,
    check_epsilon,
    check_generator,
    check_neighbouring,
    check_positive,
)
from shared.dp._common import FloatArray, QuantilesResult, check_single_level
from shared.privacy import Neighbouring, PrivacySpent

Noise = Literal["laplace", "exponential"]
NOISES: tuple[Noise, ...] = ("laplace", "exponential")
DEFAULT_BETA = 1.001  # Durfee's default grid base, also the seed's
TARGET_SHORTFALL = 20.0  # t(n) = n − √n/20: the authors' (1 − 1/(20√n))-quantile


def geometric_edges(anchor: float, top: float, beta: float) -> FloatArray:
    """The candidate releases l − 1 + β^k that lie below ``top`` (k = 0, 1, ...; at least l)."""
    n_candidates = max(1, math.ceil(math.log(top - anchor + 1.0) / math.log(beta)))
    edges: FloatArray = anchor - 1.0 + np.power(beta, np.arange(n_candidates, dtype=float))
    return edges


def grid_steps(bounds: tuple[float, float], beta: float) -> int:
    """The number of the walk's candidates (its queries) between the public bounds: the walk
    upward from a and the reflected one from b have the same number (public)."""
    return int(geometric_edges(bounds[0], bounds[1], beta).size)


def step_below(value: float, anchor: float, beta: float) -> float:
    """The grid point one step below a released ``value`` of the upward walk anchored at
    ``anchor``: a − 1 + (v − a + 1)/β. The walk knows only that its count crossed the threshold
    on [step_below(v), v), which is what its stated rank error is about
    (:func:`shared.dp.uncertainty.walk_rank_halfwidth`)."""
    return anchor - 1.0 + (value - anchor + 1.0) / beta


def above_threshold_bucket(
    cumulative_counts: FloatArray,
    threshold: float,
    epsilon: float,
    rng: np.random.Generator,
    noise: Noise = "laplace",
) -> int:
    """First k with counts[k] + Z_k > threshold + Z_T; len(counts) if none.

    Z_T and every Z_k are i.i.d. at scale 2/ε: Laplace, or exponential (one-sided, mean 2/ε).
    """
    scale = 2.0 / epsilon
    size = cumulative_counts.size
    if noise == "exponential":
        noisy_threshold = threshold + rng.exponential(scale)
        above = cumulative_counts + rng.exponential(scale, size=size)
    else:
        noisy_threshold = threshold + rng.laplace(0.0, scale)
        above = cumulative_counts + rng.laplace(0.0, scale, size=size)
    hits = np.flatnonzero(above > noisy_threshold)
    return int(hits[0]) if hits.size else size


def unbounded_sorted(
    data: FloatArray,
    threshold: float,
    epsilon: float,
    bounds: tuple[float, float],
    rng: np.random.Generator,
    beta: float,
    reflect: bool,
    noise: Noise = "laplace",
) -> float:
    """The walk on validated, sorted data; returns the release clamped to ``bounds``.

    ``threshold`` is the count target t(n): q·n upward, (1 − q)·n + 1 when reflected; DPBoxplot
    passes n (seed walk, Laplace) or n − √n/20 (one-sided walk) for both extremes (the maximum,
    and the maximum of −x). ε-DP under both relations if t(n + 1) − t(n) ∈ [0, 1] (module
    docstring).
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
    k = above_threshold_bucket(counts.astype(np.float64), threshold, epsilon, rng, noise)
    value = min(float(edges[k]), -a if reflect else b) if k < edges.size else (-a if reflect else b)
    return -value if reflect else value


def threshold_for_level(q: float, n: int, reflect: bool) -> float:
    """Count target of the walk for level q: q·n, or (1 − q)·n + 1 on the reflected data."""
    return (1.0 - q) * n + 1.0 if reflect else q * n


def one_sided_max_target(n: int) -> float:
    """Count target of the one-sided walk for a maximum (of x, or of −x for a minimum):
    t(n) = n − √n/20; t(n + 1) − t(n) ∈ [0.95, 1) (module docstring, step 1)."""
    return n - math.sqrt(n) / TARGET_SHORTFALL


def unbounded_quantile(
    x: ArrayLike,
    q: float,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    beta: float = DEFAULT_BETA,
    reflect: bool = False,
    noise: Noise = "laplace",
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
    noise : ``"laplace"`` (Durfee) or ``"exponential"`` (one-sided), both at scale 2/ε and both
        ε-DP; the count target is q·n either way (for DPBoxplot's lowered target of the maximum
        see :func:`one_sided_max_target`).

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
    check_choice(noise, "noise", NOISES)
    data = ascending(as_finite_1d(x, "x", allow_empty=True))
    threshold = threshold_for_level(level, data.size, reflect)
    value = unbounded_sorted(data, threshold, epsilon, bounds, rng, beta, reflect, noise)
    method = "unbounded" + ("_one_sided" if noise == "exponential" else "")
    return QuantilesResult(
        levels=(level,),
        values=(value,),
        spent=PrivacySpent(epsilon),
        method=method + ("_reflected" if reflect else ""),
    )
