"""JointExp: m quantiles from one exponential mechanism (Gillenwater, Joseph, Kulesza, ICML 2021).

See also docs/methods.md §5.3.

An ordered output o_1 <= ... <= o_m has utility

    u(o) = -Σ_{p=0}^{m} | #{x in (o_{p-1}, o_p]} − (q_p − q_{p-1})·n |,   q_{-1} = 0, q_m = 1,

and density ∝ exp(ε·u(o) / (2Δ)) with Δ = 2 under swap and Δ = 2(1 − min gap) under add/remove,
min gap = min(q_1, q_{p+1} − q_p, 1 − q_m) (paper, Lemma 3.1 and its add/remove remark).

Sampling (paper §3.2). Put quantile p in interval i_p of the data (i_0 <= ... <= i_{m-1}); the
mass of that configuration is Π_p φ_p(i_p − i_{p-1}) · Π_groups |I|^k / k!, with
φ_p(d) = exp(-c·|d − t_p|), c = ε / (2Δ), t_p = (q_p − q_{p-1})·n, and the 1/k! the volume of k
ordered points sharing one interval. A forward pass builds α_j[i, k] (quantile j in interval i
together with the k quantiles before it); we then sample backwards from the last quantile.

Exactness. The forward pass needs the lower-triangular Toeplitz products
Σ_{i' < i} φ_p(i − i')·h[i']. The reference implementation (google-research dp_multiq) does them
by FFT on exp(log − max), which carries an absolute error of about 1e-16 times the row maximum:
every weight smaller than that is noise or 0. That is not harmless. With ties (a detection limit,
integer-valued measurements) the mass sits on few positive-width intervals far from where φ
peaks, and whole configurations whose true probability is large end up computed from that noise.
Because φ_p is a two-sided exponential in d, the product splits into a causal geometric sum
(d > t_p) and a geometric sum over a window of fixed length (1 <= d <= t_p). Both are computed
in log space with ``np.logaddexp.accumulate``, the window by the van Herk/Gil-Werman block trick
(a suffix in one block plus a prefix in the next), so no difference of large sums is ever taken.
Every weight keeps its relative precision, however small, in O(n) per product: O(m·n + m²·n)
time and O(m²·n) memory, within the O(m·n·log n + m²·n) of the FFT version. The remaining
rounding comes from the offsets c·i added in log space, a relative error of about c·w·1e-16 per
weight for a window of w intervals.

Pruning (what makes it fast). Far from its target q_j·n a quantile's probability falls like
exp(-2c·|i − q_j·n|). A provable bound (see ``_windows``) gives, per quantile, a window of
intervals outside which all configurations together carry less than e^-760 of the mass, below
the smallest positive double; the forward pass and the sampler work on these windows only, and
sample exactly from the distribution conditioned on them. For n = 10^7 and ε = 1 a window holds
a few thousand intervals, so after the sort JointExp costs O(m²·w). With heavy ties the windows
widen by themselves (up to the whole data), never at the cost of exactness. The windows depend on
the data, so formally the release is (ε, δ)-DP with δ < e^-740, an event no double-precision
sampler can produce anyway.

On a grid (``resolution=r``, docs/methods.md §5.10). Values recorded at r come in runs of ties,
and any utility that scores a grid point by a count of the values at or below it is off by up to
a run's length there; JointExp's utility adds the *differences* of consecutive levels' errors,
so one forced error flattens its neighbours' utility between them (measured: whole-day stays,
the 0.95 level two days off). Instead each clipped value gets an independent uniform jitter in
(−r/2, r/2) — the ties become a continuum over their grid cell, in the order the jitter gives —
JointExp runs on the jittered data with bounds [a − r/2, b + r/2], and each output is moved to the
nearest grid point. ε-DP: the jitter is drawn per record independently of the others, so for
neighbouring datasets (coupling the shared records' jitter) the jittered datasets are neighbours
whatever the jitter, JointExp is ε-DP on each pair, and the mixture over the jitter keeps the
e^ε ratio; the rounding is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from shared._validation import (
    check_bounds,
    check_levels,
)
from shared.dp._common import (
    FloatArray,
    IntArray,
    QuantilesResult,
    log_widths,
    make_grid,
    quantiles_result,
    sample_rows,
    uniform_in_intervals,
)
from shared.privacy import Neighbouring


def joint_exp_sensitivity(levels: tuple[float, ...], neighbouring: Neighbouring) -> float:
    """Δ of JointExp's utility: 2 under swap, 2(1 − smallest level gap) under add/remove."""
    if neighbouring == "swap":
        return 2.0
    gaps = np.diff(np.concatenate(([0.0], levels, [1.0])))
    return 2.0 * (1.0 - float(gaps.min()))


@dataclass(frozen=True)
class JointExpTables:
    """Forward messages of the sampler: ``log_alpha[j][r, k]`` is α_j at interval
    ``starts[j] + r`` (see the module docstring); intervals outside are pruned (probability 0)."""

    log_alpha: tuple[FloatArray, ...]
    starts: tuple[int, ...]
    scale: float  # c = ε / (2Δ)
    targets: FloatArray  # t_p = (q_p − q_{p−1})·n, p = 0..m
    n: int


def log_toeplitz_lower(h: FloatArray, c: float, t: float) -> FloatArray:
    """out[i] = log Σ_{i' < i} exp(-c·|i − i' − t| + h[i']), exactly, in O(len(h)).

    ``h`` may hold -inf; c > 0; t any real.
    """
    size = h.size
    idx = np.arange(size, dtype=np.float64)
    out = np.full(size, -np.inf)
    d_window = max(0, math.floor(t))  # offsets 1 <= d <= d_window weigh exp(-c(t − d))
    d_right = max(1, math.floor(t) + 1)  # offsets d >= d_right weigh exp(-c(d − t))

    if d_right < size:
        # Σ_{i' <= k} exp(-c(k − i') + h[i']) = exp(-c·k) · Σ_{i' <= k} exp(c·i' + h[i'])
        decayed = np.logaddexp.accumulate(h + c * idx) - c * idx
        out[d_right:] = decayed[: size - d_right] - c * (d_right - t)

    if d_window >= 1:
        width = d_window
        # Pad so that output i's window is padded[i : i + width] with weights exp(-c·(u − i)).
        n_blocks = -(-(size + width) // width) + 1
        padded = np.full(n_blocks * width, -np.inf)
        padded[width : width + size] = h
        offset = c * np.arange(width, dtype=np.float64)
        blocks = padded.reshape(n_blocks, width) - offset
        suffix = np.logaddexp.accumulate(blocks[:, ::-1], axis=1)[:, ::-1] + offset
        prefix = np.logaddexp.accumulate(blocks, axis=1).ravel()
        u0 = np.arange(size)
        pos = u0 % width
        head = suffix.ravel()[:size]  # window start .. end of its block
        tail = prefix[u0 + width - 1] - c * (width - pos)  # start of next block .. window end
        tail[pos == 0] = -np.inf  # window aligned with a block: no tail
        window = np.logaddexp(head, tail) - c * (t - d_window)
        out = np.logaddexp(out, window)
    return out


def log_toeplitz_between(
    h: FloatArray, in_lo: int, out_lo: int, out_size: int, c: float, t: float
) -> FloatArray:
    """out[r] = log Σ_{i'} exp(-c·|i − i' − t| + h[i' − in_lo]) over i' < i, i = out_lo + r.

    Inputs live on [in_lo, in_lo + len(h)), outputs on [out_lo, out_lo + out_size). When the
    outputs start beyond the inputs, the gap is cut out and t shifted by its length, so the cost
    is O(len(h) + out_size), not O(distance).
    """
    in_hi = in_lo + h.size - 1
    out_hi = out_lo + out_size - 1
    cut = max(0, out_lo - in_hi - 1)
    length = max(in_hi, out_hi) - in_lo - cut + 1
    arr = np.full(length, -np.inf)
    arr[: h.size] = h
    full = log_toeplitz_lower(arr, c, t - cut)
    out = np.full(out_size, -np.inf)
    first = max(out_lo, in_lo + 1)  # outputs at or before in_lo receive nothing
    if first <= out_hi:
        out[first - out_lo :] = full[first - in_lo - cut : out_hi - in_lo - cut + 1]
    return out


# Intervals whose every configuration lies this far (in log) below a known configuration carry,
# all together, less than e^-760 of the mass: below the smallest positive double (e^-745).
_PRUNE_MARGIN = 760.0


def _windows(
    x_sorted: FloatArray, bounds: tuple[float, float], c: float, targets: FloatArray
) -> list[tuple[int, int]]:
    """Per quantile j, the interval range [lo, hi) outside which it has negligible probability.

    Bound. A configuration with quantile j in interval i scores at most
    m·log(b − a) − 2c·|i − q_j·n| (triangle inequality on the pieces before and after j;
    widths <= b − a; 1/k! <= 1), and there
    are at most (n + 1)^m of them. The total Z is at least the weight W of any one configuration;
    we take the best interval near each target. Pruning every (j, i) with
    m·log(b − a) − 2c·|i − q_j·n| < W − margin − (m + 1)·log(n + 1) − log m removes less than
    e^-margin·Z in all, and the sampler is then exact for the distribution conditioned on the rest.
    """
    n = x_sorted.size
    m = targets.size - 1
    a, b = bounds
    centres = np.cumsum(targets[:-1])  # q_j·n
    half = max(1000, math.ceil(100.0 / c))
    config = []
    for centre in centres:
        lo = max(0, math.floor(centre) - half)
        hi = min(n + 1, math.ceil(centre) + half + 1)
        score = log_widths(x_sorted, a, b, lo, hi) - 2 * c * np.abs(np.arange(lo, hi) - centre)
        if not np.isfinite(score).any():  # all tied near the target: look everywhere
            lo, hi = 0, n + 1
            score = log_widths(x_sorted, a, b) - 2 * c * np.abs(np.arange(lo, hi) - centre)
        config.append(lo + int(np.argmax(score)))
    config.sort()
    counts = np.diff(np.concatenate(([0], config, [n])))
    chosen, repeats = np.unique(config, return_counts=True)
    widths = (
        log_widths(x_sorted, a, b)[chosen]
        if n < 4096
        else np.array([log_widths(x_sorted, a, b, i, i + 1)[0] for i in chosen])
    )
    known = float(
        -c * np.abs(counts - targets).sum()
        + (repeats * widths).sum()
        - sum(math.lgamma(k + 1) for k in repeats)
    )
    slack = m * math.log(b - a) - known + _PRUNE_MARGIN + (m + 1) * math.log(n + 1.0) + math.log(m)
    reach = slack / (2 * c)
    return [
        (max(0, math.floor(centre - reach)), min(n + 1, math.ceil(centre + reach) + 1))
        for centre in centres
    ]


def joint_exp_tables(
    x_sorted: FloatArray,
    levels: tuple[float, ...],
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
) -> JointExpTables:
    """Forward pass of the exact sampler (inputs already validated; ``x_sorted`` sorted)."""
    n = x_sorted.size
    m = len(levels)
    a, b = bounds
    c = epsilon / (2.0 * joint_exp_sensitivity(levels, neighbouring))
    targets = np.diff(np.concatenate(([0.0], levels, [1.0]))) * n
    windows = _windows(x_sorted, bounds, c, targets)

    lo, hi = windows[0]
    rows = np.arange(lo, hi, dtype=np.float64)
    log_alpha = [(log_widths(x_sorted, a, b, lo, hi) - c * np.abs(rows - targets[0]))[:, None]]
    for j in range(1, m):
        prev, (prev_lo, prev_hi) = log_alpha[-1], windows[j - 1]
        lo, hi = windows[j]
        hat = prev[:, 0]
        for k in range(1, prev.shape[1]):
            hat = np.logaddexp(hat, prev[:, k])
        w_here = log_widths(x_sorted, a, b, lo, hi)
        fresh = w_here + log_toeplitz_between(hat, prev_lo, lo, hi - lo, c, float(targets[j]))
        # k more quantiles already in interval i: φ_j(0)·|I_i| times the previous entry, and the
        # volume of k + 1 ordered points in one interval gains a factor 1/(k + 1).
        repeat = np.full((hi - lo, j), -np.inf)
        both_lo, both_hi = max(lo, prev_lo), min(hi, prev_hi)
        if both_lo < both_hi:
            repeat[both_lo - lo : both_hi - lo] = (
                (w_here[both_lo - lo : both_hi - lo] - c * targets[j])[:, None]
                + prev[both_lo - prev_lo : both_hi - prev_lo]
                - np.log(np.arange(2.0, j + 2.0))
            )
        log_alpha.append(np.column_stack((fresh, repeat)))
    starts = tuple(lo for lo, _ in windows)
    return JointExpTables(tuple(log_alpha), starts, c, targets, n)


def joint_exp_sample_intervals(
    tables: JointExpTables, rng: np.random.Generator, size: int = 1
) -> IntArray:
    """``size`` independent draws of the intervals (i_0 <= ... <= i_{m-1}), shape (size, m)."""
    log_alpha, starts = tables.log_alpha, tables.starts
    c, targets, n = tables.scale, tables.targets, tables.n
    m = len(log_alpha)
    out = np.empty((size, m), dtype=np.intp)
    j = np.full(size, m - 1)
    last = np.full(size, n)  # interval of the quantile after j (n: "all points below")
    first = np.ones(size, dtype=bool)
    while (j >= 0).any():
        for jj in np.unique(j[j >= 0]):  # ascending: a draw moved to a lower j waits a round
            sel = np.flatnonzero(j == jj)
            ranks = starts[jj] + np.arange(log_alpha[jj].shape[0])
            gap = last[sel, None] - ranks[None, :]
            log_phi = -c * np.abs(gap - targets[jj + 1])
            # Later quantiles sharing an interval are counted by k, so after the first step the
            # next interval must be strictly to the left.
            allowed = gap >= np.where(first[sel], 0, 1)[:, None]
            logits = log_alpha[jj][None, :, :] + np.where(allowed, log_phi, -np.inf)[:, :, None]
            flat = sample_rows(logits.reshape(sel.size, -1), rng)
            row, k_chosen = np.divmod(flat, jj + 1)
            i_chosen = starts[jj] + row
            for back in range(jj + 1):
                hit = k_chosen >= back
                out[sel[hit], jj - back] = i_chosen[hit]
            j[sel] = jj - k_chosen - 1
            last[sel] = i_chosen
            first[sel] = False
    return out


def joint_exp(
    x: ArrayLike,
    q: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    resolution: float | None = None,
) -> QuantilesResult:
    """ε-DP estimates of the quantiles at levels ``q`` of ``x`` jointly (JointExp), in [a, b].

    Privacy: ε-DP under ``neighbouring`` (Gillenwater et al. 2021, Lemma 3.1: utility sensitivity
    2, or 2(1 − smallest level gap) under add/remove), up to the δ < e^-740 of the pruning, with or
    without a grid.

    With ``resolution`` r the estimates are points of the public grid of r within the bounds
    (the multiples of r clipped into [a, b], :class:`shared.dp._common.Grid`): JointExp on the
    values jittered by independent U(−r/2, r/2), each estimate moved to the nearest grid point
    (module docstring; docs/methods.md §5.10) — the same ε, the same neighbouring relation.
    Values recorded at r then get estimates on their own values, a quantile inside a run of ties
    that run's value.

    Parameters
    ----------
    x : the data (one value per patient); finite, non-empty; clipped to ``bounds``.
    q : strictly increasing levels in [0, 1].
    epsilon : total privacy budget, > 0 (one mechanism; no split across levels).
    bounds : public (a, b), a < b.
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.
    resolution : the variable's public resolution (> 0), or None for continuous estimates.

    Returns sorted estimates. Time O(n log n + m²·n).
    """
    if resolution is not None:  # a bad resolution fails before anything is drawn
        make_grid(check_bounds(bounds), resolution)

    def mechanism(data: FloatArray, levels: tuple[float, ...], eps: float,
                  checked: tuple[float, float], relation: Neighbouring,
                  gen: np.random.Generator) -> FloatArray:
        return joint_exp_sorted(data, levels, eps, checked, relation, gen, resolution=resolution)

    return quantiles_result(mechanism, "joint_exp", x, check_levels(q, "q"),
                            epsilon=epsilon, bounds=bounds, neighbouring=neighbouring, rng=rng)


def joint_exp_sorted(
    data: FloatArray,
    levels: tuple[float, ...],
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    resolution: float | None = None,
) -> FloatArray:
    """JointExp on validated, sorted data; returns the sorted estimates (on the grid of
    ``resolution`` when given: jitter, JointExp, nearest grid point; module docstring)."""
    grid = make_grid(bounds, resolution)
    if grid is not None:
        a, b = bounds
        half = grid.resolution / 2.0
        jittered = np.clip(data, a, b) + rng.uniform(-half, half, data.size)
        estimates = joint_exp_sorted(np.sort(jittered), levels, epsilon, (a - half, b + half),
                                     neighbouring, rng)
        return np.sort(grid.nearest(estimates))
    tables = joint_exp_tables(
        data, levels, epsilon=epsilon, bounds=bounds, neighbouring=neighbouring
    )
    intervals = joint_exp_sample_intervals(tables, rng)[0]
    return np.sort(uniform_in_intervals(data, *bounds, intervals, rng))
