"""JointExp: m quantiles from one exponential mechanism (Gillenwater, Joseph, Kulesza, ICML 2021).

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
time and O(m²·n) memory, within the O(m·n·log n + m²·n) of the FFT version.
The remaining rounding comes from the offsets c·i added in log space, a relative error of about
c·n·1e-16 per weight (1e-9 at n = 10^7, ε = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_levels,
    check_neighbouring,
)
from shared.dp._common import (
    FloatArray,
    IntArray,
    QuantilesResult,
    interval_edges,
    log_widths,
    sample_rows,
    uniform_in_intervals,
)
from shared.privacy import Neighbouring, PrivacySpent


def joint_exp_sensitivity(levels: tuple[float, ...], neighbouring: Neighbouring) -> float:
    """Δ of JointExp's utility: 2 under swap, 2(1 − smallest level gap) under add/remove."""
    if neighbouring == "swap":
        return 2.0
    gaps = np.diff(np.concatenate(([0.0], levels, [1.0])))
    return 2.0 * (1.0 - float(gaps.min()))


@dataclass(frozen=True)
class JointExpTables:
    """Forward messages of the sampler: ``log_alpha[j][i, k]`` (see the module docstring)."""

    log_alpha: tuple[FloatArray, ...]
    scale: float  # c = ε / (2Δ)
    targets: FloatArray  # t_p = (q_p − q_{p−1})·n, p = 0..m
    n: int


def log_toeplitz_lower(h: FloatArray, c: float, t: float) -> FloatArray:
    """out[i] = log Σ_{i' < i} exp(-c·|i − i' − t| + h[i']), exactly, in O(len(h)).

    ``h`` may hold -inf. c > 0, t >= 0.
    """
    size = h.size
    idx = np.arange(size, dtype=np.float64)
    out = np.full(size, -np.inf)
    d_window = int(np.floor(t))  # offsets 1 <= d <= d_window have weight exp(-c(t − d))
    d_right = d_window + 1  # offsets d >= d_right have weight exp(-c(d − t))

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
    c = epsilon / (2.0 * joint_exp_sensitivity(levels, neighbouring))
    targets = np.diff(np.concatenate(([0.0], levels, [1.0]))) * n
    log_w = log_widths(interval_edges(x_sorted, *bounds))
    ranks = np.arange(n + 1, dtype=np.float64)

    log_alpha = [(log_w - c * np.abs(ranks - targets[0]))[:, None]]
    for j in range(1, m):
        prev = log_alpha[-1]
        hat = prev[:, 0]
        for k in range(1, prev.shape[1]):
            hat = np.logaddexp(hat, prev[:, k])
        fresh = log_w + log_toeplitz_lower(hat, c, float(targets[j]))
        # k more quantiles already in interval i: φ_j(0)·|I_i| times the previous entry, and the
        # volume of k + 1 ordered points in one interval gains a factor 1/(k + 1).
        repeat = (log_w - c * targets[j])[:, None] + prev - np.log(np.arange(2.0, j + 2.0))
        log_alpha.append(np.column_stack((fresh, repeat)))
    return JointExpTables(tuple(log_alpha), c, targets, n)


def joint_exp_sample_intervals(
    tables: JointExpTables, rng: np.random.Generator, size: int = 1
) -> IntArray:
    """``size`` independent draws of the intervals (i_0 <= ... <= i_{m-1}), shape (size, m)."""
    log_alpha, c, targets, n = tables.log_alpha, tables.scale, tables.targets, tables.n
    m = len(log_alpha)
    ranks = np.arange(n + 1)
    out = np.empty((size, m), dtype=np.intp)
    j = np.full(size, m - 1)
    last = np.full(size, n)  # interval of the quantile after j (n: "all points below")
    first = np.ones(size, dtype=bool)
    while (j >= 0).any():
        for jj in np.unique(j[j >= 0]):  # ascending: a draw moved to a lower j waits a round
            sel = np.flatnonzero(j == jj)
            gap = last[sel, None] - ranks[None, :]
            log_phi = -c * np.abs(gap - targets[jj + 1])
            # Later quantiles sharing an interval are counted by k, so after the first step the
            # next interval must be strictly to the left.
            allowed = gap >= np.where(first[sel], 0, 1)[:, None]
            logits = log_alpha[jj][None, :, :] + np.where(allowed, log_phi, -np.inf)[:, :, None]
            flat = sample_rows(logits.reshape(sel.size, -1), rng)
            i_chosen, k_chosen = np.divmod(flat, jj + 1)
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
) -> QuantilesResult:
    """ε-DP estimates of the quantiles at levels ``q`` of ``x`` jointly (JointExp), in [a, b].

    Parameters
    ----------
    x : the data (one value per patient); finite, non-empty; clipped to ``bounds``.
    q : strictly increasing levels in [0, 1].
    epsilon : total privacy budget, > 0 (one mechanism; no split across levels).
    bounds : public (a, b), a < b.
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.

    Returns sorted estimates. Time O(n log n + m²·n).
    """
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    levels = check_levels(q, "q")
    rng = check_generator(rng)
    data = np.sort(as_finite_1d(x, "x"))
    values = joint_exp_sorted(data, levels, epsilon, bounds, neighbouring, rng)
    return QuantilesResult(
        levels=levels,
        values=tuple(float(v) for v in values),
        spent=PrivacySpent(epsilon),
        method="joint_exp",
    )


def joint_exp_sorted(
    data: FloatArray,
    levels: tuple[float, ...],
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> FloatArray:
    """JointExp on validated, sorted data; returns the sorted estimates."""
    tables = joint_exp_tables(
        data, levels, epsilon=epsilon, bounds=bounds, neighbouring=neighbouring
    )
    intervals = joint_exp_sample_intervals(tables, rng)[0]
    return np.sort(uniform_in_intervals(interval_edges(data, *bounds), intervals, rng))
