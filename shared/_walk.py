"""The compiled greedy walk behind binning and refinement (seed 001, Algorithms 1-4;
docs/methods.md §1.2-§1.4), the fast path of :mod:`shared._greedy`'s numpy reference.

The reference merges the sorted groups into pooled cuts (every distinct value) and computes the
greedy rule's next cut from *every* cut at once, vectorized; only the walk along the visited
cuts is sequential. Here the walk is compiled (Numba) and the rule is evaluated only at the cuts
it visits: about one per K records. No pooled array is made at all. A cut is held as the number
of records of each group at or below it, which moves forward through each sorted group; the
count of a group at or below a candidate value is found by a galloping search from the group's
current position (O(log distance), O(1) when the next value is above it). So the work after the
sort is O(n / K · G log K) and the memory O(n / K) (the cuts visited), not O(n): the result is
the same cuts, hence the same placed numbers (tests/shared/test_walk.py checks it against the
reference on random data, ties, all K and several groups).

Numba is a dependency; where it cannot be imported the numpy reference runs instead
(:data:`AVAILABLE`). Kernels are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import importlib.util
import threading
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

AVAILABLE = importlib.util.find_spec("numba") is not None
"""Whether the compiled walk runs (else the numpy reference of :mod:`shared._greedy`). Numba is
imported on the first call, not with :mod:`shared`: it costs a process about a second to import,
and most processes (the coordinator, the client) never bin raw data."""

_compiled = False
_compiling = threading.Lock()


def _count_le(data: Any, start: int, stop: int, v: float) -> int:
    """The first index in [start, stop) of sorted ``data`` holding a value above ``v`` (``stop``
    when none): galloping from ``start``, so a count that moves little costs little."""
    if start >= stop or data[start] > v:
        return start
    lo = start  # data[lo] <= v
    step = 1
    while lo + step < stop and data[lo + step] <= v:
        lo += step
        step *= 2
    hi = min(lo + step, stop)
    lo += 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if data[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _valid(buf: Any, have: Any, total: Any, v: float, k: int, cnt: Any) -> bool:
    """Whether the cut at value ``v`` leaves every group's new bin and remainder 0 or >= k;
    the counts at or below it go to ``cnt``."""
    ok = True
    for h in range(have.size):
        c = _count_le(buf, have[h], total[h], v)
        cnt[h] = c
        inside = c - have[h]
        above = total[h] - c
        if (0 < inside < k) or (0 < above < k):
            ok = False
    return ok


def _walk(buf: Any, off: Any, lo: Any, hi: Any, k: int, per_seg: Any, out_have: Any,
          out_below: Any, out_above: Any) -> int:
    """The greedy walk and the end-of-data rule in every segment; returns how many interior bin
    ends it wrote.

    ``buf`` holds the sorted groups one after the other (group g at ``off[g]:off[g + 1]``);
    segment s holds records ``lo[g, s]:hi[g, s]`` of each group (absolute indices in ``buf``).
    Interior bin ends go to ``out_*`` in order (``per_seg[s]`` of them in segment s): each
    group's records at or below the cut (relative to the group), the value below the cut and the
    next pooled value above.
    The rule is :func:`shared._greedy.transitions`' and the closing :func:`close_chains`'.
    """
    n_groups, n_segs = lo.shape
    have = np.empty(n_groups, dtype=np.int64)
    total = np.empty(n_groups, dtype=np.int64)
    cand = np.empty(n_groups, dtype=np.float64)
    cand_cnt = np.empty(n_groups, dtype=np.int64)
    active = np.zeros(n_groups, dtype=np.bool_)
    cnt = np.empty(n_groups, dtype=np.int64)
    cnt_hi = np.empty(n_groups, dtype=np.int64)
    m = 0
    for s in range(n_segs):
        for g in range(n_groups):
            have[g] = lo[g, s]
            total[g] = hi[g, s]
        first = m
        finished = False
        while True:
            done = True
            stop = False
            for g in range(n_groups):
                r = total[g] - have[g]
                if r > 0:
                    done = False
                    if r < k:
                        stop = True
            if done:
                finished = True
                break
            if stop:
                break
            # Each group's candidate: its K-th remaining value (ties included), or its largest
            # remaining value when the K-th would leave 1..K-1 records above it.
            top = -np.inf
            for g in range(n_groups):
                if total[g] - have[g] >= k:
                    v = buf[have[g] + k - 1]
                    c = _count_le(buf, have[g] + k, total[g], v)
                    above = total[g] - c
                    if 0 < above < k:
                        v = buf[total[g] - 1]
                        c = total[g]
                    cand[g] = v
                    cand_cnt[g] = c
                    active[g] = True
                    if v > top:
                        top = v
                else:
                    active[g] = False
            if n_groups == 1:
                have[0] = cand_cnt[0]
                t = cand[0]
            else:
                # A group with nothing left takes the others' largest candidate. Smallest
                # candidate when every candidate is valid for every group, else the largest if
                # it is valid for all, else the segment closes in one bin.
                low = top
                for g in range(n_groups):
                    if active[g] and cand[g] < low:
                        low = cand[g]
                hi_ok = _valid(buf, have, total, top, k, cnt_hi)
                all_ok = hi_ok
                if all_ok and low < top:
                    for g in range(n_groups):
                        if active[g] and cand[g] < top:
                            if not _valid(buf, have, total, cand[g], k, cnt):
                                all_ok = False
                                break
                if all_ok:
                    t = low
                    if low < top:
                        _valid(buf, have, total, low, k, cnt)
                        for g in range(n_groups):
                            have[g] = cnt[g]
                    else:
                        for g in range(n_groups):
                            have[g] = cnt_hi[g]
                elif hi_ok:
                    t = top
                    for g in range(n_groups):
                        have[g] = cnt_hi[g]
                else:
                    t = top
                    for g in range(n_groups):
                        have[g] = total[g]
            for g in range(n_groups):
                out_have[g, m] = have[g]
            out_below[m] = t
            m += 1
        # End of data: the last visited cut is the segment end (finished) or is replaced by it
        # (stopped); a stopped chain's last bin then merges back while it holds 1..K-1 records
        # of a group.
        keep = max(m - first - 1, 0)
        if not finished:
            while keep > 0:
                prev = first + keep - 1
                bad = False
                for g in range(n_groups):
                    inside = total[g] - out_have[g, prev]
                    if 0 < inside < k:
                        bad = True
                if not bad:
                    break
                keep -= 1
        m = first + keep
        per_seg[s] = keep
    for i in range(m):
        nxt = np.inf
        for g in range(n_groups):
            j = out_have[g, i]
            if j < off[g + 1] and buf[j] < nxt:
                nxt = buf[j]
            out_have[g, i] = j - off[g]
        out_above[i] = nxt
    return m


def _ascending(x: Any) -> bool:
    """Whether ``x`` is in ascending order (stops at the first descent)."""
    for i in range(x.size - 1):
        if x[i + 1] < x[i]:
            return False
    return True


def _mwu_merge(x: Any, y: Any) -> tuple[int, float]:
    """U = Σ_i Σ_j sign(y_j − x_i) and Σ_v (t_v³ − t_v) over the pooled tie sizes t_v, by one
    linear merge of the ascending ``x`` and ``y`` (the Mann-Whitney statistic and its tie
    correction, ``shared.mwu.mann_whitney``): each distinct value's records of X count +1 for
    every Y above and −1 for every Y below. No pooled array is made (O(1) memory)."""
    n, m = x.size, y.size
    i = 0
    j = 0
    u = 0
    ties = 0.0
    while i < n or j < m:
        if i < n and (j >= m or x[i] <= y[j]):
            v = x[i]
        else:
            v = y[j]
        a = i
        while a < n and x[a] == v:
            a += 1
        b = j
        while b < m and y[b] == v:
            b += 1
        u += (a - i) * ((m - b) - j)
        t = float((a - i) + (b - j))
        ties += t * t * t - t
        i = a
        j = b
    return u, ties


def _merge_runs(buf: Any, off: Any, out: Any) -> None:
    """The sorted runs ``buf[off[g]:off[g + 1]]`` merged into ``out``, ties in run order (what a
    stable sort of their concatenation gives, value for value and ±0.0 for ±0.0)."""
    n_runs = off.size - 1
    if n_runs == 2:  # the common case (two arms), one comparison per value
        i, end_i, j, end_j = off[0], off[1], off[1], off[2]
        t = 0
        while i < end_i and j < end_j:
            if buf[j] < buf[i]:
                out[t] = buf[j]
                j += 1
            else:
                out[t] = buf[i]
                i += 1
            t += 1
        while i < end_i:
            out[t] = buf[i]
            i += 1
            t += 1
        while j < end_j:
            out[t] = buf[j]
            j += 1
            t += 1
        return
    pos = off[:-1].copy()
    for t in range(out.size):
        best = -1
        for g in range(n_runs):
            if pos[g] < off[g + 1] and (best < 0 or buf[pos[g]] < buf[pos[best]]):
                best = g
        out[t] = buf[pos[best]]
        pos[best] += 1


def _coarsen_keep(counts: Any, totals: Any, k: int, keep: Any) -> None:
    """:func:`shared.binning.coarsen_table`'s left-to-right merge as one pass: ``keep[j]`` is
    set where limit ``j + 1`` closes a bin (every group's count since the last close and its
    remainder above are each 0 or >= ``k``). The same float operations in the same order as the
    reference, so the same limits bit for bit, fractional counts included."""
    n_groups, n_bins = counts.shape
    running = np.zeros(n_groups)
    left = totals.copy()
    for j in range(n_bins - 1):
        for g in range(n_groups):
            running[g] += counts[g, j]
        closes = True
        for g in range(n_groups):
            r = running[g]
            above = left[g] - r
            if not ((r == 0 or r >= k) and (above == 0 or above >= k)):
                closes = False
                break
        if closes:
            keep[j] = True
            for g in range(n_groups):
                left[g] = left[g] - running[g]
                running[g] = 0.0


def _follow(nxt: Any, chains: Any, pos: Any, goal: Any, ids: Any, cuts: Any, final: Any
            ) -> int:
    """``shared._greedy.walk``'s sequential part: each chain from ``pos`` along ``nxt`` until
    ``STOP`` (-1) or its ``goal``, its visited cuts written to ``ids``/``cuts`` in chain order,
    its last cut to ``final``. Returns how many were written, or -1 when the buffers are full
    (the caller walks in Python then)."""
    t = 0
    for c in range(pos.size):
        p = pos[c]
        g = goal[c]
        while True:
            q = nxt[p]
            if q == -1:
                break
            if t >= ids.size:
                return -1
            ids[t] = chains[c]
            cuts[t] = q
            t += 1
            p = q
            if p == g:
                break
        final[c] = p
    return t


def _compile() -> None:
    """Replace the kernels above by their compiled versions, once per process: compiled on
    first use (a few seconds) and kept in Numba's on-disk cache, so that later processes only
    load them (about a second, most of it Numba's own start)."""
    global _count_le, _valid, _walk, _ascending, _mwu_merge, _merge_runs, _coarsen_keep
    global _follow, _compiled
    with _compiling:
        if _compiled:
            return
        import numba

        try:
            jit = numba.njit(cache=True, nogil=True)
            jit(_ascending)  # raises when no cache directory is writable (a read-only install)
        except RuntimeError:
            jit = numba.njit(cache=False, nogil=True)  # compiled in every process instead
        # The callees first: _walk resolves them as compiled functions when it is compiled.
        _count_le = jit(_count_le)
        _valid = jit(_valid)
        _walk = jit(_walk)
        _ascending = jit(_ascending)
        _mwu_merge = jit(_mwu_merge)
        _merge_runs = jit(_merge_runs)
        _coarsen_keep = jit(_coarsen_keep)
        _follow = jit(_follow)
        _compiled = True


def warm() -> None:
    """Compile (or load from the cache) every kernel now, with the argument types the walk and
    the merge use, rather than in the first release that needs them."""
    if not AVAILABLE:
        return
    tiny = np.array([0.0, 1.0, 2.0, 3.0])
    frozen = tiny.copy()
    frozen.flags.writeable = False  # a center's kept levels are read-only: their own signature
    for data in (tiny, frozen):
        buf, off = sorted_buffer([tiny[::-1].copy(), data])
        walk_segments(buf, off, off[:-1, None], off[1:, None], 2)  # each group one segment
        mwu_merge(data, data)
    # A center's levels: sorted arms one after the other in one read-only buffer.
    levels = np.concatenate([tiny, tiny])
    levels.flags.writeable = False
    arms = [levels[:4], levels[4:]]
    buf, off = sorted_buffer(arms)
    walk_segments(buf, off, off[:-1, None], off[1:, None], 2)
    merge_sorted(arms)
    coarsen_keep(np.ones((2, 3)), np.full(2, 3.0), 2)
    follow(np.array([1, 2, -1]), np.zeros(1, np.int64), np.zeros(1, np.int64),
           np.full(1, 2, np.int64))


def adjacent(groups: list[FloatArray]) -> FloatArray | None:
    """The groups as one array when they lie one after the other in one buffer (a center keeps
    a variable's levels so, ``center_agent.data``): a read-only view spanning them, no copy;
    None otherwise."""
    # An empty slice's data pointer need not be where it was cut: empty groups hold nothing.
    parts = [g for g in groups if g.size]
    if not parts:
        return np.empty(0) if groups else None
    base = parts[0].base
    if not (isinstance(base, np.ndarray) and base.dtype == np.float64 and base.ndim == 1
            and base.flags.c_contiguous):
        return None
    start = parts[0].__array_interface__["data"][0]
    end = start
    for g in parts:
        if not (g.base is base and g.dtype == np.float64 and g.ndim == 1
                and g.flags.c_contiguous and g.__array_interface__["data"][0] == end):
            return None
        end += g.nbytes
    first = (start - base.__array_interface__["data"][0]) // base.itemsize
    if first < 0 or first * base.itemsize + end - start > base.nbytes:
        return None
    view = base[first:first + (end - start) // base.itemsize]
    view.flags.writeable = False
    return view


def sorted_buffer(groups: list[FloatArray]) -> tuple[FloatArray, IntArray]:
    """The groups sorted, one after the other in one array, and their offsets.

    Groups already sorted are used as they are when they lie one after the other in one buffer
    (one group, or a center's levels: :func:`adjacent`; read-only, no copy); otherwise each
    group is copied once into the buffer and sorted there in place (no second copy: the memory
    is the raw values once more at most).
    """
    if not _compiled:
        _compile()
    sizes = np.array([g.size for g in groups], dtype=np.int64)
    off = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    if len(groups) == 1 and _ascending(groups[0]):
        buf = groups[0].view()
    elif (kept := adjacent(groups)) is not None and all(_ascending(g) for g in groups):
        buf = kept
    else:
        buf = np.empty(int(off[-1]), dtype=np.float64)
        for g, a, b in zip(groups, off[:-1], off[1:], strict=True):
            part = buf[a:b]
            part[...] = g
            if not _ascending(g):
                part.sort()
    buf.flags.writeable = False
    return buf, off


def merge_sorted(groups: list[FloatArray]) -> FloatArray | None:
    """The ascending ``groups`` merged into one new ascending array, ties in group order (a
    stable sort of their concatenation, bit for bit) when they lie one after the other in one
    buffer (:func:`adjacent`), with no memory but the result's; None otherwise."""
    kept = adjacent(groups)
    if kept is None:
        return None
    if not _compiled:
        _compile()
    off = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([g.size for g in groups], out=off[1:])
    out = np.empty(kept.size, dtype=np.float64)
    _merge_runs(kept, off, out)
    return out


def walk_segments(buf: FloatArray, off: IntArray, lo: IntArray, hi: IntArray, k: int
                  ) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    """Interior bin ends of the greedy walk in each segment (see :func:`_walk`): segment of
    each, records of each group at or below it (G, M), the value below it and the next pooled
    value above it. The last three are views of buffers sized for the most cuts possible
    (about n / K): no copy is made."""
    if not _compiled:
        _compile()
    n_groups, n_segs = lo.shape
    # Every step but a segment's last moves one group on by K records or more.
    cap = int(off[-1]) // k + n_segs + 1
    per_seg = np.empty(n_segs, dtype=np.int64)
    out_have = np.empty((n_groups, cap), dtype=np.int32 if off[-1] < 2**31 - 1 else np.int64)
    out_below = np.empty(cap, dtype=np.float64)
    out_above = np.empty(cap, dtype=np.float64)
    m = _walk(buf, off, np.ascontiguousarray(lo, dtype=np.int64),
              np.ascontiguousarray(hi, dtype=np.int64), k, per_seg, out_have, out_below,
              out_above)
    seg = np.repeat(np.arange(n_segs), per_seg)
    return seg, out_have[:, :m], out_below[:m], out_above[:m]


def extremes(buf: FloatArray, off: IntArray, m: int) -> tuple[float, float, float, float]:
    """The pooled smallest, ``m``-th smallest, ``m``-th largest and largest values of the sorted
    groups in ``buf`` (at least ``m`` records in all), from each group's ``m`` extreme ones."""
    heads = np.sort(np.concatenate([buf[a:min(a + m, b)] for a, b in pairwise(off)]))
    tails = np.sort(np.concatenate([buf[max(a, b - m):b] for a, b in pairwise(off)]))
    return float(heads[0]), float(heads[m - 1]), float(tails[-m]), float(tails[-1])


def coarsen_keep(counts: FloatArray, totals: FloatArray, k: int) -> NDArray[np.bool_]:
    """Which interior limits :func:`shared.binning.coarsen_table` keeps (:func:`_coarsen_keep`),
    compiled: one pass, no Python step per bin."""
    if not _compiled:
        _compile()
    keep = np.zeros(max(counts.shape[1] - 1, 0), dtype=np.bool_)
    _coarsen_keep(np.ascontiguousarray(counts, dtype=np.float64),
                  np.ascontiguousarray(totals, dtype=np.float64), int(k), keep)
    return keep


def follow(nxt: IntArray, chains: IntArray, pos: IntArray, goal: IntArray
           ) -> tuple[IntArray, IntArray, IntArray] | None:
    """(chain ids, cuts, final cuts) of the chains followed by :func:`_follow`, compiled; None
    when they visit more cuts than ``nxt`` holds (not a walk of disjoint segments)."""
    if not _compiled:
        _compile()
    cap = int(nxt.size) + 1
    ids = np.empty(cap, dtype=np.int64)
    cuts = np.empty(cap, dtype=np.int64)
    final = np.empty(pos.size, dtype=np.int64)
    m = _follow(np.ascontiguousarray(nxt, dtype=np.int64),
                np.ascontiguousarray(chains, dtype=np.int64),
                np.ascontiguousarray(pos, dtype=np.int64),
                np.ascontiguousarray(goal, dtype=np.int64), ids, cuts, final)
    if m < 0:
        return None
    return ids[:m], cuts[:m], final


def mwu_merge(x: FloatArray, y: FloatArray) -> tuple[float, float]:
    """(U, Σ(t³ − t)) of the ascending ``x`` and ``y`` (:func:`_mwu_merge`), compiled."""
    if not _compiled:
        _compile()
    u, ties = _mwu_merge(x, y)
    return float(u), float(ties)
