"""The greedy K-anonymous cut engine behind single-center binning and bin refinement.

Seed 001, Algorithms 1-3 (and the splitting step of Algorithm 4), in the form of
docs/methods.md §1.2-§1.4.

Everything is expressed on *cuts* of the pooled sorted data: cut ``c`` (0 <= c <= D) puts the
``c`` smallest distinct values on the left. ``counts[g, c]`` is the number of group-``g`` records
at or below cut ``c``. A bin is the stretch between two cuts; the greedy algorithm moves from cut
to cut, and its next cut depends only on the current one. So the transition ``nxt[c]`` is
computed for every cut at once (vectorized, O(D log D)), and only the walk along the chain of
visited cuts remains sequential: one integer lookup per *bin*, never per observation.

Segments: when a new center refines an existing table, the greedy algorithm runs independently
inside each existing bin. ``seg_end[c]`` is the cut that closes the segment holding the next
value after cut ``c`` (the last cut, D, when there is a single segment).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shared import _walk

IntArray = NDArray[np.signedinteger[Any]]
FloatArray = NDArray[np.float64]

STOP = -1


def pooled_cuts(sorted_groups: list[FloatArray]) -> tuple[FloatArray, IntArray]:
    """Distinct pooled values ``u`` (sorted) and the per-group cumulative counts at every cut.

    Each group must already be sorted. Returns ``u`` of length D and ``counts`` of shape
    (G, D + 1) with ``counts[:, 0] == 0`` and ``counts[:, D]`` the group sizes. Counts are int32
    below 2**31 records: the work is memory-bound, and half the bytes is most of the time.
    """
    n_groups = len(sorted_groups)
    total = sum(g.size for g in sorted_groups)
    itype = np.int32 if total < 2**31 - 1 else np.int64
    if _many_ties(sorted_groups, total):
        # Many ties (rounded measurements): cut at the union of the groups' distinct values and
        # count each group below every cut by bisection, O(n) + O(D log n) instead of merging
        # every record.
        u = np.unique(np.concatenate([_distinct(g) for g in sorted_groups]))
        counts = np.zeros((n_groups, u.size + 1), dtype=itype)
        for row, g in zip(counts, sorted_groups, strict=True):
            row[1:] = np.searchsorted(g, u, side="right")
        return u, counts
    if n_groups > 2:
        # Several groups (a center's canonical table over every declared level): one stable
        # sort of the concatenation; the group of each record follows it.
        z_all = np.concatenate(sorted_groups)
        order = np.argsort(z_all, kind="stable")
        z = z_all[order]
        label = np.repeat(np.arange(n_groups), [g.size for g in sorted_groups])[order]
        if total == 0:
            return z, np.zeros((n_groups, 1), dtype=itype)
        last = np.empty(total, dtype=bool)
        np.not_equal(z[1:], z[:-1], out=last[:-1])
        last[-1] = True
        ends_g = np.flatnonzero(last)
        counts = np.zeros((n_groups, ends_g.size + 1), dtype=itype)
        for group in range(n_groups):
            counts[group, 1:] = np.cumsum(label == group, dtype=itype)[ends_g]
        return z[ends_g], counts
    if n_groups == 1:
        z = sorted_groups[0]
        is_y = None
    else:
        xs, ys = sorted_groups
        # Merge two sorted arrays by their ranks in each other: O(N log N) with sorted keys,
        # cheaper than re-sorting the concatenation.
        px = np.searchsorted(ys, xs, side="left")
        px += np.arange(xs.size)
        py = np.searchsorted(xs, ys, side="right")
        py += np.arange(ys.size)
        z = np.empty(total, dtype=np.float64)
        z[px] = xs
        z[py] = ys
        del px
        is_y = np.zeros(total, dtype=bool)
        is_y[py] = True
    if total == 0:
        return z, np.zeros((n_groups, 1), dtype=itype)
    last_of_tie = np.empty(total, dtype=bool)
    np.not_equal(z[1:], z[:-1], out=last_of_tie[:-1])
    last_of_tie[-1] = True
    counts = np.empty((n_groups, 1), dtype=itype)
    if last_of_tie.all():  # no ties (continuous data): every record is its own cut
        u = z
        through = np.arange(1, total + 1, dtype=itype)
        ends = None
    else:
        ends = np.flatnonzero(last_of_tie)
        u = z[ends]
        through = (ends + 1).astype(itype)
    counts = np.zeros((n_groups, u.size + 1), dtype=itype)
    if is_y is None:
        counts[0, 1:] = through
    else:
        cum_y = np.cumsum(is_y, dtype=itype)
        counts[1, 1:] = cum_y if ends is None else cum_y[ends]
        np.subtract(through, counts[1, 1:], out=counts[0, 1:])
    return u, counts


def _n_distinct(g: FloatArray) -> int:
    """How many distinct values a sorted array holds (without making them)."""
    return int(np.count_nonzero(g[1:] != g[:-1])) + 1 if g.size else 0


def _many_ties(sorted_groups: list[FloatArray], total: int) -> bool:
    """At most one distinct value in 8 records (the choice of path only: both give the same).

    A window in the middle of each group is looked at first, so continuous data is not
    scanned in full before the merge."""
    for g in sorted_groups:
        mid = g.size // 2
        window = g[max(0, mid - 2048): mid + 2048]
        if window.size >= 64 and _n_distinct(window) * 8 > window.size:
            return False
    return sum(_n_distinct(g) for g in sorted_groups) * 8 <= total


def _distinct(g: FloatArray) -> FloatArray:
    """The distinct values of a sorted array."""
    if g.size == 0:
        return g
    last_of_tie = np.empty(g.size, dtype=bool)
    np.not_equal(g[1:], g[:-1], out=last_of_tie[:-1])
    last_of_tie[-1] = True
    return g[last_of_tie]


def transitions(counts: IntArray, seg_end: IntArray, k: int) -> IntArray:
    """The next cut of the greedy algorithm from every cut 0..D-1 (``STOP`` where none exists).

    Per group (docs/methods.md §1.2): fewer than K records left in the segment -> no candidate,
    and the walk stops unless none are left; otherwise the candidate is the K-th smallest
    remaining value (ties included), or the group's largest remaining value when the K-th would
    leave 1..K-1 records above it. With several groups, take the smallest candidate if every
    candidate is valid for every other group too, else the largest one (with two groups: the
    seed's rule). Unlike the authors' code we re-check that the largest candidate is valid for
    all groups, and fall back to closing the segment in one bin (always valid here), so no step
    can release a count in 1..K-1.
    """
    n_groups, n_cuts = counts.shape
    single_segment = bool(seg_end[0] == n_cuts - 1)
    end = seg_end[:-1]
    stop = np.zeros(n_cuts - 1, dtype=bool)
    cands, haves, totals = [], [], []
    for g in range(n_groups):
        cg = counts[g]
        size = int(cg[-1])
        # first_cut[j]: the first cut with at least j records of group g at or below it.
        # Record j of the group (1-based) first appears at the cut where cg passes j: a repeat
        # of each cut by the number of the group's records it adds (linear, no search).
        first_cut = np.empty(size + 1, dtype=counts.dtype)
        first_cut[0] = 0
        first_cut[1:] = np.repeat(np.arange(1, n_cuts, dtype=counts.dtype), np.diff(cg))
        have = cg[:-1]
        total = cg[-1] if single_segment else cg[end]
        remaining = total - have
        stop |= (remaining > 0) & (remaining < k)
        kth = first_cut[np.minimum(have + k, size)]
        last = first_cut[total]
        above = total - cg[kth]
        cand = np.where((above == 0) | (above >= k), kth, last)
        cand[remaining < k] = STOP
        cands.append(cand)
        haves.append(have)
        totals.append(total)
    if n_groups == 1:
        nxt = cands[0]
    else:
        cand = np.stack(cands)
        # A group with nothing left has no candidate: the others' stand for it.
        idle = cand == STOP
        cand = np.where(idle, np.where(idle, -1, cand).max(axis=0), cand)

        def valid_for_all(cut: IntArray) -> NDArray[np.bool_]:
            ok = np.ones(cut.shape, dtype=bool)
            for g in range(n_groups):
                at = counts[g, cut]
                inside = at - haves[g]
                above = totals[g] - at
                ok &= ((inside == 0) | (inside >= k)) & ((above == 0) | (above >= k))
            return ok

        # Each candidate is valid for its own group by construction; when every candidate is
        # valid for every group (cross-valid), the smallest is taken, else the largest if it is
        # valid for all. With two groups this is the seed's rule (docs/methods.md §1.3).
        safe = np.maximum(cand, 0)
        ok = np.stack([valid_for_all(safe[g]) for g in range(n_groups)])
        lo = cand.min(axis=0)
        # The largest candidate is one of the groups' own, whose validity is already known
        # (a third pass of random reads over every cut would cost a sixth of the binning).
        top = cand.argmax(axis=0)
        hi = np.take_along_axis(cand, top[None], axis=0)[0]
        hi_ok = np.take_along_axis(ok, top[None], axis=0)[0]
        nxt = np.where(ok.all(axis=0), lo, np.where(hi_ok, hi, end))
    nxt[stop] = STOP
    return nxt


def walk(nxt: IntArray, starts: IntArray, seg_end: IntArray, *, compiled: bool = True
         ) -> tuple[IntArray, IntArray, IntArray]:
    """Follow every chain from ``starts`` until its segment end or ``STOP``.

    Returns (chain index, cut) pairs of every visited cut after its start, in chain order, and
    for each chain the cut it stopped at (its segment end when it finished normally).
    Many short chains (refinement) advance together, one vectorized step per round; the few long
    ones (single-center binning, a refinement's runs) are finished by the compiled walk
    (``shared._walk.follow``; with ``compiled=False`` or without Numba a plain integer walk in
    Python, one lookup per bin, which tests/shared/test_walk.py holds it equal to).
    """
    n_chains = starts.size
    chain_ids: list[IntArray] = []
    chain_cuts: list[IntArray] = []
    final = starts.copy()
    active = np.arange(n_chains, dtype=np.int64)
    pos = starts.copy()
    target = seg_end[starts]
    while active.size >= 64:
        step = nxt[pos]
        done_stop = step == STOP
        moved = ~done_stop
        chain_ids.append(active[moved])
        chain_cuts.append(step[moved])
        final[active[done_stop]] = pos[done_stop]
        reached = moved & (step == target)
        final[active[reached]] = step[reached]
        keep = moved & ~reached
        active, pos, target = active[keep], step[keep], target[keep]
    followed = None
    if active.size and compiled and _walk.AVAILABLE:
        followed = _walk.follow(nxt, active, pos, target)
    if followed is not None:
        chain_ids.append(followed[0])
        chain_cuts.append(followed[1])
        final[active] = followed[2]
    elif active.size:
        # Indexing a memoryview yields plain ints, ~5x cheaper than numpy scalar indexing.
        table = np.ascontiguousarray(nxt).data
        ends = np.ascontiguousarray(seg_end).data
        ids: list[int] = []
        cuts: list[int] = []
        for chain, p in zip(active.tolist(), pos.tolist(), strict=True):
            goal = ends[p]
            while True:
                q = table[p]
                if q == STOP:
                    break
                ids.append(chain)
                cuts.append(q)
                p = q
                if p == goal:
                    break
            final[chain] = p
        chain_ids.append(np.asarray(ids, dtype=np.int64))
        chain_cuts.append(np.asarray(cuts, dtype=np.int64))
    ids_all = np.concatenate(chain_ids) if chain_ids else np.zeros(0, dtype=np.int64)
    cuts_all = np.concatenate(chain_cuts) if chain_cuts else np.zeros(0, dtype=np.int64)
    order = np.lexsort((cuts_all, ids_all))
    return ids_all[order], cuts_all[order], final


def close_chains(
    counts: IntArray,
    chain: IntArray,
    cut: IntArray,
    final: IntArray,
    starts: IntArray,
    ends: IntArray,
    k: int,
) -> tuple[IntArray, IntArray]:
    """Bin ends of every chain after the end-of-data rule, as flat (chain, cut) pairs.

    A chain that stopped early (fewer than k records of some group left in its segment) folds
    its leftovers into its last bin: the last visited cut is replaced by the segment end, or the
    segment becomes one bin when nothing was visited. If that last bin now holds 1..k-1 records
    of a group (possible when that group had no records in it before), it is merged with the
    bin before it, and so on; one vectorized round per merge, all chains at once. Merging ends
    at worst in one bin per segment, which is valid because the segment totals are 0 or >= k.
    """
    n_chains = starts.size
    per_chain = np.bincount(chain, minlength=n_chains)
    offset = np.concatenate([[0], np.cumsum(per_chain)[:-1]])
    stopped = final != ends
    # keep[i]: how many leading visited cuts of chain i stay interior bin ends. The last bin
    # always ends at the segment end: a finished chain visited it last, a stopped chain's last
    # visited cut is replaced by it.
    keep = np.maximum(per_chain - 1, 0)
    todo = np.flatnonzero(stopped & (keep > 0))
    while todo.size:
        prev = cut[offset[todo] + keep[todo] - 1]
        inside = counts[:, ends[todo]] - counts[:, prev]
        bad = np.any((inside > 0) & (inside < k), axis=0)
        todo = todo[bad]
        keep[todo] -= 1
        todo = todo[keep[todo] > 0]
    rank = np.arange(chain.size) - offset[chain]
    kept = rank < keep[chain]
    out_chain = np.concatenate([chain[kept], np.arange(n_chains)])
    out_cut = np.concatenate([cut[kept], ends])
    order = np.lexsort((out_cut, out_chain))
    return out_chain[order], out_cut[order]
