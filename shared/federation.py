"""Adding a center to a K-anonymous table in two halves (seed 001, Alg. 4-6; docs/methods.md §2).

* :func:`refine_table` runs at the new center, on its raw values and the table's *limits* only.
  Inside every existing bin it bins its own values with the single-center rule; a bin that
  yields two or more sub-bins is split at the new randomized limits. It then makes its counts
  K-anonymous as *runs*: scanning the cells left to right, a run grows while its total is in
  1..K-1 (a tail in 1..K-1 joins the last run). It returns a :class:`Refinement` (on the wire,
  ``shared.protocol.RefinementRelease``).
* :func:`apply_refinement` runs at the coordinator, on released numbers only: it shares each
  split bin's existing counts out in proportion to the new center's sub-bin counts, spreads each
  run total over its cells in proportion to the existing counts (uniformly where those are 0),
  and adds the two tables cell by cell; counts become non-integer.

Differencing guard (our addition to the seed). The sub-bins of a split bin are released with
their own counts (0 or >= K per group, by the single-center rule), and they are the only cells
whose new counts are released one by one. A run that absorbed such a cell would let anyone
subtract the cell's count from the run total and read a count in 1..K-1, so runs are formed
over the *other* cells only (skipping over split cells, so a run need not be contiguous), and
each split sub-cell is a run of its own. If those other cells cannot be made K-anonymous on their
own (their total is in 1..K-1 for a group), the center drops all its splits. Every number a
center releases is then a sum over disjoint sets of its records, each 0 or >= K, so no
combination of them isolates fewer than K records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared import _greedy, _walk
from shared._sorting import ascending
from shared._validation import as_finite_1d, check_int
from shared.binning import (
    BinTable,
    Extreme,
    ExtremeKind,
    KAnonymityError,
    Placement,
    bin_table,
    buffer_scales,
    check_group_sizes,
    check_placement,
    random_placement,
    sorted_scales,
)
from shared.privacy import isolating

IntArray = NDArray[np.signedinteger[Any]]
FloatArray = NDArray[np.float64]


def _check_limits(limits: ArrayLike) -> FloatArray:
    lim = np.asarray(limits, dtype=np.float64)
    if lim.ndim != 1 or lim.size < 2:
        raise ValueError("`limits` must be a 1-D sequence of at least two values")
    if np.isnan(lim).any() or not np.all(lim[1:] > lim[:-1]):
        raise ValueError("`limits` must be strictly increasing")
    if not np.isfinite(lim[1:-1]).all():
        raise ValueError("interior `limits` must be finite")
    return lim


@dataclass(frozen=True)
class Runs:
    """One group's run totals: the run of each refined cell (``run_of_cell``), and the records
    of each run (``totals``, 0 or >= K); a run need not be contiguous."""

    run_of_cell: list[int]
    totals: list[float]


@dataclass(frozen=True)
class Refinement:
    """What :func:`refine_table` releases (``shared.protocol.RefinementRelease`` on the wire).

    Bin ``split_bins[i]`` of the table is cut at ``split_limits[i]`` (both increasing); the
    refined cells, numbered left to right, hold one :class:`Runs` per group; ``lower`` and
    ``upper`` are the extreme limits moved out (None: kept).
    """

    k: int
    split_bins: list[int]
    split_limits: list[float]
    runs: list[Runs]
    lower: float | None = None
    upper: float | None = None


def refine_table(
    limits: ArrayLike,
    x: ArrayLike,
    y: ArrayLike | None = None,
    *more: ArrayLike,
    k: int,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: ExtremeKind = "buffer",
    upper: ExtremeKind = "buffer",
    split: bool = True,
) -> Refinement:
    """The new center's half of adding it to a table with the given ``limits``: its records of
    one group (``x``), two (``x``, ``y``) or more (``more``: a k-arm table's further rows), each
    counted in its own runs.

    Releases only K-anonymous numbers: randomized sub-limits (placed by ``place``, or drawn
    from ``rng``: :func:`~shared.binning.random_placement`), per-group run totals that are 0 or
    >= ``k``, and the table's buffer limits moved out when the center holds values beyond them.
    A moved limit is the center's extreme value less (or plus) about the mean gap between its
    ``k`` most extreme values (docs/methods.md §2.6): a gap over fewer records could give a raw
    value back.

    Where the cuts fall never depends on the table's extreme limits: the center's values are
    binned inside the table's *interior* limits, on the data as they are. A natural limit
    (``lower``/``upper`` ``"natural"``) is then applied as a view: sub-limits at or beyond it
    are dropped (the sub-bins beyond merge into the extreme one, so values beyond it are counted
    in the extreme bin, as the table that set it counts its own). Clipping the values to it
    instead would let a caller choose where a gap starts, and a chain of natural limits would
    converge on a raw value (docs/privacy.md, "One number per gap"). With ``split=False`` no
    bin is split (a coarser release, for a center whose earlier releases it would conflict with).

    The walk inside each bin is compiled (:mod:`shared._walk`); :func:`_reference` is the numpy
    implementation it must agree with, split for split and number for number.
    """
    return _refine(limits, *_rows(x, y, more), k=k, rng=rng, place=place, lower=lower,
                   upper=upper, split=split, compiled=_walk.AVAILABLE)


def _reference(
    limits: ArrayLike,
    x: ArrayLike,
    y: ArrayLike | None = None,
    *more: ArrayLike,
    k: int,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: ExtremeKind = "buffer",
    upper: ExtremeKind = "buffer",
    split: bool = True,
) -> Refinement:
    """:func:`refine_table` by the numpy reference (:mod:`shared._greedy`: the next cut from every
    pooled cut, vectorized); the compiled walk's tests compare against it."""
    return _refine(limits, *_rows(x, y, more), k=k, rng=rng, place=place, lower=lower,
                   upper=upper, split=split, compiled=False)


def _rows(x: ArrayLike, y: ArrayLike | None, more: Sequence[ArrayLike]) -> list[ArrayLike]:
    """The groups of a refinement, one row each: ``x``, then ``y`` and the further ones."""
    if y is None:
        if more:
            raise ValueError("further groups need `y` (the second group) first")
        return [x]
    return [x, y, *more]


def refine_pooled(
    limits: ArrayLike,
    groups: Sequence[ArrayLike],
    *,
    k: int,
    level_k: int | None = None,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: ExtremeKind = "buffer",
    upper: ExtremeKind = "buffer",
    split: bool = True,
) -> Refinement:
    """A one-group refinement of the records of every group together (an ungrouped table of a
    population whose groups' sizes are known), each of whose sets holds 0 or >= ``k`` records
    and 0 or >= ``level_k`` (default ``k``; a center's own K where a study asks a larger one)
    *of every group*: splits by the multi-group rule (:func:`~shared.binning.bin_groups`' on the
    groups inside each bin, at the larger of the two), runs grown until their total and every
    group's part are K-anonymous.

    A group of 1..``level_k``-1 records cannot be kept apart: then the groups are refined as
    one (:func:`refine_table` of the pooled values), and the caller's disclosure control
    decides.

    :func:`refine_table` on the pooled values makes sets of 0 or >= ``k`` records in all, and a
    center that counts its groups' sizes as released must then coarsen them until each group's
    part is K-anonymous too (``center_agent.gate.disclosure``); merging runs after the fact
    merged whole stretches of adjacent runs into one, whose total the coordinator then spreads
    in the shape of the table's earlier centers (docs/benchmarks.md, "Pooled quantiles from the
    table"). Built with the groups from the start, the release needs no coarsening.
    """
    level_k = k if level_k is None else check_int(level_k, "level_k", 2)
    arrays = [as_finite_1d(g, f"groups[{i}]", allow_empty=True) for i, g in enumerate(groups)]
    if not arrays:
        raise ValueError("`groups` must hold at least one group")
    if isolating(np.array([a.size for a in arrays], dtype=np.float64), level_k).any():
        return refine_table(limits, np.concatenate(arrays), k=k, rng=rng, place=place,
                            lower=lower, upper=upper, split=split)
    return _refine(limits, *arrays, k=k, rng=rng, place=place, lower=lower, upper=upper,
                   split=split, compiled=_walk.AVAILABLE, pooled=level_k)


def _refine(
    limits: ArrayLike,
    *values: ArrayLike | None,
    k: int,
    rng: np.random.Generator | None,
    place: Placement | None,
    lower: ExtremeKind,
    upper: ExtremeKind,
    split: bool,
    compiled: bool,
    pooled: int | None = None,
) -> Refinement:
    """With ``pooled`` (the K of each group's part), one row of runs over the groups together
    (:func:`refine_pooled`), else one row per group."""
    k = check_int(k, "k", 2)
    check_placement(rng, place)
    lim = _check_limits(limits)
    names = ["x", "y"] if len(values) <= 2 else [f"groups[{i}]" for i in range(len(values))]
    groups = [as_finite_1d(v, name, allow_empty=True)
              for v, name in zip(values, names, strict=False) if v is not None]
    if pooled is not None:
        check_group_sizes([sum(g.size for g in groups)], k)
    else:
        check_group_sizes([g.size for g in groups], k)
    # The split sub-cells are runs of their own: each group's part must hold the larger K.
    walk_k = k if pooled is None else max(k, pooled)
    if compiled:
        cuts = _split_compiled(lim, groups, walk_k, rng, place)
    else:
        cuts = _split_reference(lim, groups, walk_k, rng, place)
    place = cuts.place
    sub_bin, sub_at = cuts.sub_bin, cuts.sub_at
    if not split:
        sub_bin, sub_at = sub_bin[:0], sub_at[:, :0]
    # + 0.0: a zero is handed over as +0.0, whichever tied record (0.0 or -0.0) the cut was
    # found at (a keyed placement hashes the gap's ends as exact doubles).
    split_limits = np.asarray(place(cuts.below[:sub_bin.size] + 0.0,
                                    cuts.above[:sub_bin.size] + 0.0), dtype=np.float64)
    # Natural limits as a view: only the sub-limits strictly inside them stay (comparisons of
    # the placed numbers with public ones; dropping a sub-limit merges two sub-bins, whose counts
    # add up to 0 or >= K).
    inside = np.ones(split_limits.size, dtype=bool)
    if lower == "natural":
        inside &= split_limits > lim[0]
    if upper == "natural":
        inside &= split_limits < lim[-1]
    sub_bin, sub_at, split_limits = sub_bin[inside], sub_at[:, inside], split_limits[inside]
    cell_counts, fixed = _cells(cuts.bin_at, sub_bin, sub_at)
    loose = cell_counts[:, ~fixed].sum(axis=1)
    if isolating(loose, k if pooled is None else pooled).any() or (
            pooled is not None and isolating(loose.sum(keepdims=True), k).any()):
        sub_bin, sub_at, split_limits = sub_bin[:0], sub_at[:, :0], split_limits[:0]
        cell_counts, fixed = _cells(cuts.bin_at, sub_bin, sub_at)

    runs = [_pooled_runs(cell_counts, fixed, k, pooled)] if pooled is not None else [
        _runs(row, fixed, k) for row in cell_counts]

    new_lower = new_upper = None
    if cuts.n_records:
        if lower == "buffer" and np.isfinite(lim[0]) and cuts.lowest < lim[0]:
            new_lower = float(place(np.array([-np.inf]), np.array([cuts.lowest + 0.0]))[0])
        if upper == "buffer" and np.isfinite(lim[-1]) and cuts.highest > lim[-1]:
            new_upper = float(place(np.array([cuts.highest + 0.0]), np.array([np.inf]))[0])
    return Refinement(
        k=k,
        split_bins=sub_bin.tolist(),
        split_limits=split_limits.tolist(),
        runs=runs,
        lower=new_lower,
        upper=new_upper,
    )


@dataclass(frozen=True)
class _SplitCuts:
    """Where a new center can split a table's bins: the split sub-cuts (existing bin of each,
    records of each group at or below it (G, M), the values on either side of it), the records
    of each group at or below each bin's end (G, bins), the center's extreme values and the
    placement to use."""

    sub_bin: IntArray
    sub_at: IntArray
    below: FloatArray
    above: FloatArray
    bin_at: IntArray
    n_records: int
    lowest: float
    highest: float
    place: Placement


def _split_compiled(lim: FloatArray, groups: list[FloatArray], k: int,
                    rng: np.random.Generator | None, place: Placement | None) -> _SplitCuts:
    """:class:`_SplitCuts` by the compiled walk: one segment per non-empty bin, each group's
    records in a bin found by bisection at the limits (no pooled cuts are made)."""
    buf, off = _walk.sorted_buffer(groups)
    n = int(off[-1])
    n_bins = lim.size - 1
    bin_at = np.empty((len(groups), n_bins), dtype=np.int64)
    for g, (a, b) in enumerate(pairwise(off)):
        # A value v is in bin j when lim[j] < v <= lim[j + 1] (interior limits only).
        bin_at[g, :-1] = np.searchsorted(buf[a:b], lim[1:-1], side="right")
        bin_at[g, -1] = b - a
    bin_from = np.concatenate([np.zeros((len(groups), 1), dtype=np.int64), bin_at[:, :-1]],
                              axis=1)
    nonempty = np.flatnonzero((bin_at > bin_from).any(axis=0))
    seg, sub_at, below, above = _walk.walk_segments(
        buf, off, bin_from[:, nonempty] + off[:-1, None], bin_at[:, nonempty] + off[:-1, None], k)
    lowest = kth_low = kth_high = highest = 0.0
    if n:
        lowest, kth_low, kth_high, highest = _walk.extremes(buf, off, min(k, n))
    if place is None:
        assert rng is not None
        place = random_placement(rng, *buffer_scales(lowest, kth_low, kth_high, highest, n, k)
                                 ) if n else random_placement(rng, 0.0, 0.0)
    return _SplitCuts(sub_bin=nonempty[seg], sub_at=sub_at, below=below, above=above,
                      bin_at=bin_at, n_records=n, lowest=lowest, highest=highest, place=place)


def _split_reference(lim: FloatArray, groups: list[FloatArray], k: int,
                     rng: np.random.Generator | None, place: Placement | None) -> _SplitCuts:
    """:class:`_SplitCuts` by the numpy reference (pooled cuts, every transition)."""
    sorted_groups = [ascending(g) for g in groups]
    u, counts = _greedy.pooled_cuts(sorted_groups)
    n_distinct = u.size
    if place is None:
        assert rng is not None
        pooled = np.sort(np.concatenate(sorted_groups))
        place = random_placement(rng, *sorted_scales(pooled, k)) if pooled.size else (
            random_placement(rng, 0.0, 0.0))
    n_bins = lim.size - 1
    seg = np.searchsorted(lim[1:-1], u, side="left")
    bin_ids = np.arange(n_bins)
    bin_start = np.searchsorted(seg, bin_ids, side="left")
    bin_end = np.searchsorted(seg, bin_ids, side="right")
    seg_end = np.empty(n_distinct + 1, dtype=counts.dtype)
    seg_end[:-1] = bin_end[seg]
    seg_end[-1] = n_distinct
    sub_bin, sub_cut = _split_cuts(counts, seg_end, bin_start, bin_end, k)
    return _SplitCuts(
        sub_bin=sub_bin, sub_at=counts[:, sub_cut], below=u[sub_cut - 1], above=u[sub_cut],
        bin_at=counts[:, bin_end], n_records=int(counts[:, -1].sum()),
        lowest=float(u[0]) if n_distinct else 0.0, highest=float(u[-1]) if n_distinct else 0.0,
        place=place)


def _split_cuts(
    counts: IntArray, seg_end: IntArray, bin_start: IntArray, bin_end: IntArray, k: int
) -> tuple[IntArray, IntArray]:
    """(existing bin, interior sub-cut) of every split the new center can make, in order.

    A bin is split when the single-center rule, run on the center's values inside it, yields
    two or more sub-bins.
    """
    nxt = _greedy.transitions(counts, seg_end, k)
    nonempty = np.flatnonzero(bin_end > bin_start)
    starts, ends = bin_start[nonempty], bin_end[nonempty]
    chain, cut, final = _greedy.walk(nxt, starts, seg_end)
    chain, cut = _greedy.close_chains(counts, chain, cut, final, starts, ends, k)
    interior = cut != ends[chain]
    return nonempty[chain[interior]], cut[interior]


def _cells(
    bin_at: IntArray, sub_bin: IntArray, sub_at: IntArray
) -> tuple[IntArray, NDArray[np.bool_]]:
    """Counts (G, cells) and 'fixed' flag (a sub-cell of a split bin) of each refined cell, in
    order, from each group's records at or below every bin end (``bin_at``) and sub-cut
    (``sub_at``)."""
    n_bins = bin_at.shape[1]
    at = np.concatenate([sub_at, bin_at], axis=1)
    owner = np.concatenate([sub_bin, np.arange(n_bins)])
    # Within a bin its sub-cuts (in order) come before its end.
    rank = np.concatenate([np.arange(sub_bin.size), np.full(n_bins, sub_bin.size)])
    order = np.lexsort((rank, owner))
    split = np.bincount(sub_bin, minlength=n_bins) > 0
    at = at[:, order]
    counts = np.diff(at, axis=1, prepend=np.zeros((at.shape[0], 1), dtype=at.dtype))
    return counts, split[owner[order]]


def _runs(cell_counts: IntArray, fixed: NDArray[np.bool_], k: int) -> Runs:
    """K-anonymous runs of one group's counts: split cells alone, the others grown greedily."""
    loose = np.flatnonzero(~fixed)
    a = cell_counts[loose]
    cum = np.concatenate([[0], np.cumsum(a)])
    m = a.size
    # From run start i: a zero cell is a run by itself; otherwise grow to the first j with
    # cum[j] - cum[i] >= k. With less than k left, the tail joins the previous run.
    reach = np.searchsorted(cum, cum[:-1] + k, side="left")
    nxt = np.where(a == 0, np.arange(1, m + 1), np.where(reach <= m, reach, _greedy.STOP))
    run_end_of = np.full(m + 1, m, dtype=np.int64)
    ends: list[int] = []
    if m:
        _, visited, final = _greedy.walk(nxt.astype(np.int64), np.zeros(1, np.int64), run_end_of)
        ends = visited.tolist()
        if int(final[0]) != m:
            # The tail (1..k-1 records) joins the last run holding records, together with the
            # empty runs in between: joining an empty run alone would release the tail's count.
            run_totals = np.diff(cum[np.concatenate([[0], ends]).astype(np.int64)])
            held = np.flatnonzero(run_totals > 0)
            if held.size == 0:
                raise KAnonymityError("the center's records outside split bins are fewer than k")
            ends = [*ends[: held[-1]], m]
    run_of_loose = np.searchsorted(np.asarray(ends, dtype=np.int64), np.arange(m), side="right")
    run_of_cell = np.empty(fixed.size, dtype=np.int64)
    run_of_cell[loose] = run_of_loose
    fixed_cells = np.flatnonzero(fixed)
    run_of_cell[fixed_cells] = len(ends) + np.arange(fixed_cells.size)
    totals = np.bincount(run_of_cell, weights=cell_counts, minlength=len(ends) + fixed_cells.size)
    return Runs(run_of_cell=run_of_cell.tolist(), totals=totals.tolist())


def _pooled_runs(cell_counts: IntArray, fixed: NDArray[np.bool_], k: int, level_k: int
                 ) -> Runs:
    """One row of runs over the groups' counts (G, cells) together: split cells alone, the
    others grown left to right until their total is 0 or >= ``k`` and every group's part 0 or
    >= ``level_k`` (a cell empty in every group is a run by itself when no run is open); a tail
    that cannot close joins the runs before it, last first, until it can (the loose cells'
    totals are K-anonymous, per group and in all, so it can)."""
    loose = np.flatnonzero(~fixed)
    a = cell_counts[:, loose]
    m = loose.size
    cums = np.concatenate([np.zeros((a.shape[0] + 1, 1), dtype=np.int64),
                           np.cumsum(np.vstack([a, a.sum(axis=0)]), axis=1)], axis=1)
    ks = [level_k] * a.shape[0] + [k]
    # From run start i, the first end j > i at which every part (cells i..j-1) is 0 or >= its
    # K: a part is 0 for j < zero_until and K-anonymous for j >= reach, so j is pushed past
    # each part's gap in turn; a part once past its gap stays past it, so G + 1 rounds settle.
    j = np.arange(1, m + 1, dtype=np.int64)
    gaps = [(np.searchsorted(c, c[:-1], side="right"), np.searchsorted(c, c[:-1] + kk))
            for c, kk in zip(cums, ks, strict=True)]
    for _ in range(len(gaps)):
        for zero_until, reach in gaps:
            j = np.where((j >= zero_until) & (j < reach), reach, j)
    nxt = np.where(j <= m, j, _greedy.STOP).astype(np.int64)
    ends: list[int] = []
    if m:
        _, visited, final = _greedy.walk(nxt, np.zeros(1, np.int64),
                                         np.full(m + 1, m, dtype=np.int64))
        ends = visited.tolist()
        if int(final[0]) != m:
            # The tail joins the runs before it, last first, until every part is K-anonymous.
            bounds = [0, *ends]
            while True:
                part = (cums[:, m] - cums[:, bounds[-1]]).astype(np.float64)
                if not (isolating(part[:-1], level_k).any() or isolating(part[-1:], k).any()):
                    break
                if len(bounds) == 1:
                    raise KAnonymityError("the center's records outside split bins are fewer "
                                          "than k in some group")
                bounds.pop()
            ends = [*bounds[1:], m]
    run_of_loose = np.searchsorted(np.asarray(ends, dtype=np.int64), np.arange(m), side="right")
    run_of_cell = np.empty(fixed.size, dtype=np.int64)
    run_of_cell[loose] = run_of_loose
    fixed_cells = np.flatnonzero(fixed)
    run_of_cell[fixed_cells] = len(ends) + np.arange(fixed_cells.size)
    totals = np.bincount(run_of_cell, weights=cell_counts.sum(axis=0),
                         minlength=len(ends) + fixed_cells.size)
    return Runs(run_of_cell=run_of_cell.tolist(), totals=totals.tolist())


def merge_runs(release: Refinement, group: int, runs: ArrayLike) -> Refinement:
    """``release`` with ``runs`` (of group ``group``) merged: adjacent ones with each other, a
    lone one into its next run (the last into the one before it). A coarser release whose run
    totals are sums of the old ones (still 0 or >= K). Only for releases without splits (every
    cell loose, runs numbered left to right)."""
    if release.split_bins:
        raise ValueError("runs of a release with splits cannot be merged")
    old = release.runs[group]
    run_of = np.asarray(old.run_of_cell, dtype=np.int64)
    totals = np.asarray(old.totals, dtype=np.float64)
    n_runs = totals.size
    target = np.arange(n_runs)
    bad = np.unique(np.asarray(runs, dtype=np.int64).ravel())
    # Adjacent runs to merge are merged with each other first, two by two (an odd last one
    # with the pair before it); a lone one with its next run (the last with the one before).
    # Merging a whole stretch into one run lost every limit inside it, although most pairs
    # already hold K of every level; the caller merges again where a pair does not.
    for block in np.split(bad, np.flatnonzero(np.diff(bad) > 1) + 1) if bad.size else []:
        if n_runs < 2:
            break
        if block.size > 1:
            firsts = block[: block.size - block.size % 2: 2]
            target[firsts + 1] = firsts
            if block.size % 2:
                target[block[-1]] = block[-3]
        else:
            r = int(block[0])
            target[target == r] = r + 1 if r + 1 < n_runs else r - 1
    # Follow chains (r -> r + 1 -> r + 2) to their end.
    for _ in range(n_runs):
        nxt = target[target]
        if np.array_equal(nxt, target):
            break
        target = nxt
    _, new_id = np.unique(target, return_inverse=True)
    merged_totals = np.bincount(new_id, weights=totals)
    runs_out = list(release.runs)
    runs_out[group] = Runs(run_of_cell=new_id[run_of].tolist(), totals=merged_totals.tolist())
    return replace(release, runs=runs_out)


def refined_limits(limits: ArrayLike, release: Refinement) -> FloatArray:
    """The limits of the refined cells: the table's, cut at the release's split limits, with
    the extreme limits moved out where the release moved them.

    Raises ``ValueError`` when a split limit does not lie strictly inside the bin it names.
    """
    lim = _check_limits(limits).copy()
    # Moved extreme limits first: a split of an extreme bin may lie beyond the old limit.
    if release.lower is not None:
        lim[0] = min(lim[0], release.lower)
    if release.upper is not None:
        lim[-1] = max(lim[-1], release.upper)
    n_bins = lim.size - 1
    sub_bin = np.asarray(release.split_bins, dtype=np.int64)
    sub_lim = np.asarray(release.split_limits, dtype=np.float64)
    if sub_bin.size:
        if not np.all((sub_bin >= 0) & (sub_bin < n_bins)):
            raise ValueError("a split names a bin the table does not have")
        if not (
            np.all(sub_lim > lim[sub_bin])
            and np.all(sub_lim < lim[sub_bin + 1])
            and np.all(sub_lim[1:] > sub_lim[:-1])
        ):
            raise ValueError("split limits must increase and lie strictly inside their bins")
    inner = np.sort(np.concatenate([lim[1:-1], sub_lim]))
    return np.concatenate([lim[:1], inner, lim[-1:]])


def apply_refinement(table: BinTable, release: Refinement) -> BinTable:
    """The coordinator's half: fold a center's :class:`Refinement` into ``table``.

    Only released numbers are used. Raises ``ValueError`` when the release does not fit the
    table (wrong K or number of groups, limits outside their bin, runs that do not cover the
    refined cells, totals that are negative or in 1..K-1).
    """
    k = table.k
    if release.k != k:
        raise ValueError(f"release was made for k={release.k}, the table has k={k}")
    if len(release.runs) != table.n_groups:
        raise ValueError(
            f"release has {len(release.runs)} groups, the table has {table.n_groups}"
        )
    n_bins = table.n_bins
    new_limits = refined_limits(table.limits, release)
    n_sub = np.bincount(np.asarray(release.split_bins, dtype=np.int64), minlength=n_bins)
    cell_bin = np.repeat(np.arange(n_bins), n_sub + 1)
    fixed = n_sub[cell_bin] > 0
    n_cells = cell_bin.size

    run_of, totals = [], []
    for g, runs in enumerate(release.runs):
        r = np.asarray(runs.run_of_cell, dtype=np.int64)
        t = np.asarray(runs.totals, dtype=np.float64)
        if r.size != n_cells or (r.size and (r.min() < 0 or r.max() >= t.size)):
            raise ValueError(f"group {g}: runs do not cover the {n_cells} refined cells")
        if not np.all(np.isfinite(t)) or np.any(t < 0) or isolating(t, k).any():
            raise ValueError(f"group {g}: a run total is negative or between 1 and k-1")
        if np.any(np.bincount(r, minlength=t.size)[r[fixed]] != 1):
            raise ValueError(f"group {g}: a sub-cell of a split bin shares its run")
        run_of.append(r)
        totals.append(t)

    old = np.empty((table.n_groups, n_cells))
    new = np.empty_like(old)
    for g in range(table.n_groups):
        # Existing counts of a split bin follow the new center's sub-bin counts.
        share_w = np.where(fixed, totals[g][run_of[g]], 1.0)
        old[g] = table.counts[g, cell_bin] * _proportions(share_w, cell_bin, n_bins)
        # Run totals follow the existing (split) counts.
        new[g] = totals[g][run_of[g]] * _proportions(old[g], run_of[g], totals[g].size)
    return BinTable(limits=new_limits, counts=old + new, k=k)


def _proportions(weights: FloatArray, group: IntArray, n_groups: int) -> FloatArray:
    """Each cell's share of its group's total weight; equal shares where the total is 0."""
    total = np.bincount(group, weights=weights, minlength=n_groups)
    size = np.bincount(group, minlength=n_groups)
    t = total[group]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, weights / np.where(t > 0, t, 1.0), 1.0 / size[group])


def federated_table(
    centers: Sequence[tuple[ArrayLike, ArrayLike | None]],
    *,
    k: int = 10,
    rng: np.random.Generator,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> BinTable:
    """The whole protocol in-process: the largest center builds the table, the others refine it
    one by one, largest first (what the coordinator does over HTTP)."""
    if not centers:
        raise ValueError("`centers` must hold at least one center")
    sizes = [
        np.asarray(x).size + (0 if y is None else np.asarray(y).size) for x, y in centers
    ]
    order = np.argsort(sizes, kind="stable")[::-1]
    x0, y0 = centers[int(order[0])]
    table = bin_table(x0, y0, k=k, rng=rng, lower=lower, upper=upper)
    for i in order[1:]:
        x, y = centers[int(i)]
        table = apply_refinement(table, refine_table(table.limits, x, y, k=k, rng=rng))
    return table
