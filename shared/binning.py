"""Single-center K-anonymous bin tables (seed 001, Algorithms 1-3; docs/methods.md §1).

A table has limits ``c_0 < c_1 < ... < c_B`` and per-group counts; bin ``j`` is
``(c_j, c_{j+1}]`` (the first one closed on the left). Every released per-group count is 0 or
at least ``k``; interior limits are randomized between the two data values they separate, so no
interior limit is a data value; the extreme limits are infinite, natural (given by the data
owner) or privacy buffers.

Where a limit falls between two values is the caller's :data:`Placement`: the core decides
*which* gaps of the data get a limit (from ranks and counts only), the placement *which number*
inside each gap. By default it is the seed's fresh uniform draw (:func:`random_placement`); a
center passes its own, one keyed number per gap reused by every release
(``center_agent.gate.gaps``, docs/privacy.md "One number per gap").

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(1)
>>> table = bin_table(rng.normal(size=100), rng.normal(size=80), k=10, rng=rng)
>>> bool(np.all((table.counts == 0) | (table.counts >= 10)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared import _greedy, _walk
from shared._sorting import ascending
from shared._validation import as_finite_1d, check_int
from shared.privacy import isolating

FloatArray = NDArray[np.float64]
Extreme = Literal["infinite", "buffer"] | float
"""How to close a table at one end: ``"infinite"``, ``"buffer"`` (the seed's privacy buffer:
the extreme value moved out by about the mean gap between consecutive values near it; see
:func:`outer_point`), or a number: a natural limit such as 0 for a variable that cannot be
negative."""
ExtremeKind = Literal["buffer", "natural", "infinite"]
"""How a table's extreme limit was made: a privacy buffer (data-derived: a center with values
beyond it moves it out), a natural limit (public: values beyond it are counted in the extreme
bin) or infinite."""


Placement = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]
"""Where the limits between data fall: ``place(below, above)`` returns one number strictly inside
each gap ``(below[i], above[i])`` between two consecutive distinct values (``below[i]`` may be
-inf: the gap below the smallest value, where a lower buffer goes; ``above[i]`` may be +inf:
above the largest). An outer gap may get ±inf: no buffer (every value is equal)."""


class KAnonymityError(ValueError):
    """The data cannot be released as a K-anonymous table (a group holds 1..K-1 records)."""


@dataclass(frozen=True)
class BinTable:
    """A K-anonymous bin table: ``limits`` (B + 1,) and ``counts`` (groups, B).

    Counts are floats because federation shares existing counts out proportionally.
    """

    limits: FloatArray
    counts: FloatArray
    k: int

    @property
    def n_bins(self) -> int:
        return int(self.counts.shape[1])

    @property
    def n_groups(self) -> int:
        return int(self.counts.shape[0])

    @property
    def totals(self) -> FloatArray:
        return np.asarray(self.counts.sum(axis=1), dtype=np.float64)


def check_group_sizes(sizes: list[int], k: int) -> None:
    """Refuse groups whose size alone would break K-anonymity (1..k-1 records)."""
    for g, n in enumerate(sizes):
        if 0 < n < k:
            raise KAnonymityError(
                f"group {g} holds {n} records; a K-anonymous table needs 0 or at least "
                f"k={k} per group"
            )
    if sum(sizes) == 0:
        raise ValueError("no data: every group is empty")


def randomized_limits(
    below: FloatArray, above: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """c = w·a + (1 − w)·v with a fresh w ~ U(0, 1) per limit (seed 001, §5); see
    :func:`point_in_gap` for how rounding is handled."""
    return point_in_gap(below, above, rng.random(below.size))


def point_in_gap(below: FloatArray, above: FloatArray, w: FloatArray) -> FloatArray:
    """The point a fraction ``w`` (in [0, 1)) of the way from ``above`` down to ``below``:
    c = w·below + (1 − w)·above, for finite gaps.

    Rounding can land c on a or v when they are close; those points fall back to the midpoint,
    then to the next double above ``below``, and stay equal to ``below`` only when the two are
    adjacent doubles (nothing lies between them). Written as a weighted sum (no ``above −
    below``), so no gap overflows.
    """
    below = np.asarray(below, dtype=np.float64)
    above = np.asarray(above, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    c = w * below + (1.0 - w) * above
    bad = ~((c > below) & (c < above))
    if bad.any():
        b, a = below[bad], above[bad]
        mid = b / 2.0 + a / 2.0
        step = np.nextafter(b, np.inf)
        c[bad] = np.where((mid > b) & (mid < a), mid, np.where(step < a, step, b))
    return c


def outer_point(extreme: FloatArray, scale: float, w: FloatArray, side: int) -> FloatArray:
    """A privacy buffer beyond the data's ``extreme`` value (``side`` −1: below the smallest,
    +1: above the largest): moved out by (½ + w)·``scale``, w in [0, 1), so by the scale on
    average as the seed's buffer is (docs/methods.md §1.5); ±inf when ``scale`` is 0 (every value
    equal: a buffer of 0 would be a data value, the end is opened instead)."""
    extreme = np.asarray(extreme, dtype=np.float64)
    if not scale > 0:
        return np.full(extreme.shape, side * np.inf)
    out = extreme + side * (0.5 + np.asarray(w, dtype=np.float64)) * scale
    # Rounding on a value far from 0 with a tiny scale: the next double out, never the value.
    stuck = out == extreme
    out[stuck] = np.nextafter(extreme[stuck], side * np.inf)
    return out


def place_points(below: FloatArray, above: FloatArray, w: FloatArray, lower_scale: float,
                 upper_scale: float) -> FloatArray:
    """One point in each gap (see :data:`Placement`) at the fractions ``w``: inside a finite gap
    by :func:`point_in_gap`, beyond the data by :func:`outer_point` with each end's scale."""
    below = np.asarray(below, dtype=np.float64)
    above = np.asarray(above, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    out = np.empty(below.size)
    low = np.isneginf(below)
    high = np.isposinf(above) & ~low
    inner = ~(low | high)
    out[inner] = point_in_gap(below[inner], above[inner], w[inner])
    out[low] = outer_point(above[low], lower_scale, w[low], -1)
    out[high] = outer_point(below[high], upper_scale, w[high], +1)
    return out


def buffer_scales(lowest: float, kth_lowest: float, kth_highest: float, highest: float,
                  n: int, k: int) -> tuple[float, float]:
    """How far out the buffers of data go (before the random factor of :func:`outer_point`):
    the mean gap between the ``k`` smallest (largest) records — a gap over fewer could give a
    raw value back (docs/methods.md §2.6) —, or of all ``n`` records when those are all equal."""
    m = min(k, n)
    return (buffer_gap(mean_gap(lowest, kth_lowest, m), lowest, highest, n),
            buffer_gap(mean_gap(kth_highest, highest, m), lowest, highest, n))


def sorted_scales(values: FloatArray, k: int) -> tuple[float, float]:
    """:func:`buffer_scales` of sorted ``values`` (at least one)."""
    n = values.size
    m = min(k, n)
    return buffer_scales(float(values[0]), float(values[m - 1]), float(values[n - m]),
                         float(values[-1]), n, k)


def random_placement(rng: np.random.Generator, lower_scale: float,
                     upper_scale: float) -> Placement:
    """The seed's placement: a fresh uniform fraction per gap and per call (seed 001, §5).
    Asked twice, it places two numbers in a gap: fine for one table, not for a center that
    answers many requests (it passes its keyed placement instead)."""
    def place(below: FloatArray, above: FloatArray) -> FloatArray:
        return place_points(below, above, rng.random(np.asarray(below).size), lower_scale,
                            upper_scale)
    return place


def mean_gap(lowest: float, highest: float, count: float) -> float:
    """Mean difference between consecutive sorted values of a bin with ``count`` records."""
    return (highest - lowest) / (count - 1) if count > 1 else 0.0


def check_extreme(choice: object, name: str) -> Extreme:
    if choice in ("infinite", "buffer"):
        return choice
    if isinstance(choice, (int, float, np.floating)) and not isinstance(choice, bool):
        if np.isfinite(choice):
            return float(choice)
    raise ValueError(
        f"`{name}` must be 'infinite', 'buffer' or a finite natural limit, got {choice!r}"
    )


def bin_table(
    x: ArrayLike,
    y: ArrayLike | None = None,
    *,
    k: int = 10,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> BinTable:
    """K-anonymous bin table of one group (``x``) or two groups (``x``, ``y``).

    Seed 001 Algorithms 1-3 as docs/methods.md §1 states them: greedy limits from the smallest
    value up, each per-group count 0 or >= ``k``; leftovers at the end join the last bin (merging
    further back if that is needed to stay K-anonymous); interior limits randomized with a fresh
    w ~ U(0, 1) each (or placed by ``place``); extreme limits by ``lower``/``upper``.

    Parameters
    ----------
    x, y : array_like
        Raw values of each group (finite; each group must hold 0 or at least ``k`` values).
    k : int
        The anonymity threshold K (>= 2).
    rng : numpy.random.Generator
        Source of the limits' randomization (:func:`random_placement`), unless ``place``.
    place : Placement
        Where the limits between data fall (one of ``rng`` and ``place``).
    lower, upper : {"infinite", "buffer"} or float
        How to close the table at each end (see :data:`Extreme`). A natural limit that leaves
        values outside counts them in the extreme bin (see :func:`close_table`).

    Raises
    ------
    KAnonymityError
        If a group holds between 1 and k-1 values.
    """
    groups = [as_finite_1d(x, "x", allow_empty=y is not None)]
    if y is not None:
        groups.append(as_finite_1d(y, "y", allow_empty=True))
    return bin_groups(groups, k=k, rng=rng, place=place, lower=lower, upper=upper)


def bin_groups(
    groups: Sequence[ArrayLike],
    *,
    k: int = 10,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
    max_bins: int | None = None,
) -> BinTable:
    """K-anonymous bin table of any number of groups (one row of counts each).

    The greedy rule of :func:`bin_table` with the two-group rule generalized: take the smallest
    group candidate when every candidate is valid for every group, else the largest when it is
    valid for all, else close the table (docs/methods.md §1.3). With one or two groups this is
    :func:`bin_table`. A center bins every declared level at once, so that every table it
    releases of a variable, whichever levels it shows, has the same limits (no two of its
    tables can be subtracted).

    With ``max_bins``, runs of adjacent bins are merged as :func:`cap_bins` merges them, before
    any limit is placed (a limit merged away is never drawn).

    The walk is compiled (:mod:`shared._walk`); :func:`_reference` is the numpy implementation
    it must agree with, cut for cut and number for number.
    """
    return _bin_groups(groups, k=k, rng=rng, place=place, lower=lower, upper=upper,
                       max_bins=max_bins, compiled=_walk.AVAILABLE)


def _reference(
    groups: Sequence[ArrayLike],
    *,
    k: int = 10,
    rng: np.random.Generator | None = None,
    place: Placement | None = None,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
    max_bins: int | None = None,
) -> BinTable:
    """:func:`bin_groups` by the numpy reference (:mod:`shared._greedy`: the next cut from every
    cut, vectorized); the compiled walk's tests compare against it."""
    return _bin_groups(groups, k=k, rng=rng, place=place, lower=lower, upper=upper,
                       max_bins=max_bins, compiled=False)


def _bin_groups(
    groups: Sequence[ArrayLike],
    *,
    k: int,
    rng: np.random.Generator | None,
    place: Placement | None,
    lower: Extreme,
    upper: Extreme,
    max_bins: int | None,
    compiled: bool,
) -> BinTable:
    k = check_int(k, "k", 2)
    check_placement(rng, place)
    lower = check_extreme(lower, "lower")
    upper = check_extreme(upper, "upper")
    arrays = [as_finite_1d(g, f"groups[{i}]", allow_empty=True) for i, g in enumerate(groups)]
    if not arrays:
        raise ValueError("`groups` must hold at least one group")
    check_group_sizes([g.size for g in arrays], k)
    if max_bins is not None:
        max_bins = check_int(max_bins, "max_bins", 1)
    if compiled:
        table = _bin_compiled(arrays, k, rng, place, max_bins)
    else:
        table = _bin_reference(arrays, k, rng, place, max_bins)
    return close_table(table, lower, upper)


def _bin_compiled(arrays: list[FloatArray], k: int, rng: np.random.Generator | None,
                  place: Placement | None, max_bins: int | None) -> BinTable:
    """The table's limits and counts by the compiled walk (no pooled cuts are made)."""
    buf, off = _walk.sorted_buffer(arrays)
    lo, hi = off[:-1, None], off[1:, None]
    _, have, below, above = _walk.walk_segments(buf, off, lo, hi, k)
    if max_bins is not None and have.shape[1] + 1 > max_bins:
        step = -(-(have.shape[1] + 1) // max_bins)
        have, below, above = have[:, step - 1::step], below[step - 1::step], above[step - 1::step]
    n = int(off[-1])
    lowest, kth_low, kth_high, highest = _walk.extremes(buf, off, min(k, n))
    del buf  # the sorted copy (when one was made) is not needed for the limits and counts
    if place is None:
        assert rng is not None
        place = random_placement(rng, *buffer_scales(lowest, kth_low, kth_high, highest, n, k))
    sizes = np.diff(off)
    at = np.concatenate([np.zeros((len(arrays), 1), dtype=np.int64), have, sizes[:, None]],
                        axis=1)
    bin_counts = np.diff(at, axis=1).astype(np.float64)
    limits = np.asarray(place(np.concatenate([[-np.inf], below, [highest]]) + 0.0,
                              np.concatenate([[lowest], above, [np.inf]]) + 0.0),
                        dtype=np.float64)
    return BinTable(limits=limits, counts=bin_counts, k=k)


def _bin_reference(arrays: list[FloatArray], k: int, rng: np.random.Generator | None,
                   place: Placement | None, max_bins: int | None) -> BinTable:
    """The table's limits and counts by the numpy reference (pooled cuts, every transition)."""
    sorted_groups = [ascending(g) for g in arrays]
    u, counts = _greedy.pooled_cuts(sorted_groups)
    n_distinct = u.size
    seg_end = np.full(n_distinct + 1, n_distinct, dtype=counts.dtype)
    nxt = _greedy.transitions(counts, seg_end, k)
    start = np.zeros(1, dtype=np.int64)
    end = np.full(1, n_distinct, dtype=np.int64)
    chain, visited, final = _greedy.walk(nxt, start, seg_end)
    _, cuts = _greedy.close_chains(counts, chain, visited, final, start, end, k)
    if max_bins is not None:
        cuts = _cap_cuts(cuts, max_bins)
    if place is None:
        assert rng is not None
        pooled = counts.sum(axis=0)
        n = int(pooled[-1])
        m = min(k, n)
        # The m-th smallest record lies at the first cut holding m records, the m-th largest
        # at the first holding n - m + 1.
        kth_low = u[np.searchsorted(pooled, m, side="left") - 1]
        kth_high = u[np.searchsorted(pooled, n - m + 1, side="left") - 1]
        place = random_placement(rng, *buffer_scales(float(u[0]), float(kth_low),
                                                     float(kth_high), float(u[-1]), n, k))
    return _assemble(u, counts, cuts, k, place)


def check_placement(rng: object, place: object) -> None:
    """Exactly one of ``rng`` (a Generator) and ``place`` (a callable)."""
    if (rng is None) == (place is None):
        raise ValueError("give exactly one of `rng` and `place`")
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise ValueError("`rng` must be a numpy.random.Generator")
    if place is not None and not callable(place):
        raise ValueError("`place` must be callable")


def _cap_cuts(cuts: NDArray[np.signedinteger[Any]], max_bins: int
              ) -> NDArray[np.signedinteger[Any]]:
    """Bin ends keeping every ``m``-th interior one, ``m = ceil(B / max_bins)`` (as
    :func:`cap_bins`)."""
    if cuts.size <= max_bins:
        return cuts
    step = -(-cuts.size // max_bins)
    return np.concatenate([cuts[:-1][step - 1::step], cuts[-1:]])


def merge_bins(table: BinTable, keep: NDArray[np.bool_]) -> BinTable:
    """``table`` with only the interior limits where ``keep`` is true (the bins in between merged;
    counts add up). Post-processing: it releases nothing the table does not."""
    keep = np.asarray(keep, dtype=bool)
    if keep.size != table.n_bins - 1:
        raise ValueError(f"`keep` must hold one flag per interior limit ({table.n_bins - 1})")
    limits = np.concatenate([table.limits[:1], table.limits[1:-1][keep], table.limits[-1:]])
    owner = np.concatenate([[0], np.cumsum(keep)])  # the merged bin of each original bin
    counts = np.zeros((table.n_groups, limits.size - 1))
    for g in range(table.n_groups):
        counts[g] = np.bincount(owner, weights=table.counts[g], minlength=limits.size - 1)
    return BinTable(limits=limits, counts=counts, k=table.k)


def cap_bins(table: BinTable, max_bins: int) -> BinTable:
    """``table`` with at most ``max_bins`` bins: every ``m``-th interior limit kept, with
    ``m = ceil(B / max_bins)`` (so runs of ``m`` adjacent bins merged). A sum of counts that are
    each 0 or >= K is 0 or >= K, so the result stays K-anonymous; post-processing, it releases
    nothing the table does not."""
    max_bins = check_int(max_bins, "max_bins", 1)
    if table.n_bins <= max_bins:
        return table
    step = -(-table.n_bins // max_bins)
    keep = np.zeros(table.n_bins - 1, dtype=bool)
    keep[step - 1::step] = True
    return merge_bins(table, keep)


def coarsen_table(table: BinTable, k: int) -> BinTable:
    """``table`` with adjacent bins merged, left to right, until every count is 0 or >= ``k``
    (a tail below ``k`` joins the bin before it). For a study whose K is above the table's.

    Every group total must be 0 or >= ``k``. Post-processing of the table: it releases nothing
    the table does not.
    """
    k = check_int(k, "k", 2)
    totals = table.totals
    if isolating(totals, k).any():
        raise KAnonymityError(f"a group total is between 1 and k-1 = {k - 1}")
    if _walk.AVAILABLE:
        return merge_bins(table, _walk.coarsen_keep(table.counts, totals, k))
    return merge_bins(table, _coarsen_keep(table, totals, k))


def _coarsen_keep(table: BinTable, totals: FloatArray, k: int) -> NDArray[np.bool_]:
    """The numpy reference of :func:`coarsen_table`'s merge (``shared._walk.coarsen_keep`` is
    the compiled one; tests/shared/test_walk.py holds them equal)."""
    keep = np.zeros(max(table.n_bins - 1, 0), dtype=bool)
    running = np.zeros(table.n_groups)
    for j in range(table.n_bins):
        running += table.counts[:, j]
        left = totals - running  # what lies above limit j + 1, per group
        closes = np.all((running == 0) | (running >= k)) and np.all((left == 0) | (left >= k))
        if j < table.n_bins - 1 and closes:
            keep[j] = True
            totals = left
            running = np.zeros(table.n_groups)
    return keep


def close_table(table: BinTable, lower: Extreme, upper: Extreme) -> BinTable:
    """Close a table whose extreme limits are privacy buffers as ``lower``/``upper`` ask.

    ``"buffer"`` keeps the buffer, ``"infinite"`` opens the end, and a natural limit (a public
    number) becomes the extreme limit: the bins entirely beyond it are merged into the extreme
    bin, i.e. values beyond a natural limit are counted in the extreme bin (clipped to it),
    never refused. An opposite buffer that a natural limit passes opens (the table stays
    ordered). Post-processing: only released numbers and the public limits are used.
    """
    lower = check_extreme(lower, "lower")
    upper = check_extreme(upper, "upper")
    if isinstance(lower, float) and isinstance(upper, float) and not lower < upper:
        raise ValueError("natural limits must satisfy `lower` < `upper`")
    inner = table.limits[1:-1]
    keep = np.ones(inner.size, dtype=bool)
    if isinstance(lower, float):
        keep &= inner > lower
    if isinstance(upper, float):
        keep &= inner < upper
    merged = merge_bins(table, keep)
    lim = merged.limits.copy()
    lo, hi = lim[0], lim[-1]
    lo = -np.inf if lower == "infinite" else lower if isinstance(lower, float) else lo
    hi = np.inf if upper == "infinite" else upper if isinstance(upper, float) else hi
    inner_kept = lim[1:-1]
    first_inner = inner_kept[0] if inner_kept.size else hi
    last_inner = inner_kept[-1] if inner_kept.size else lo
    if lower == "buffer" and not lo < first_inner:
        lo = -np.inf
    if upper == "buffer" and not hi > last_inner:
        hi = np.inf
    if not lo < hi:  # one bin between two buffers that met
        lo, hi = -np.inf, np.inf
    lim[0], lim[-1] = lo, hi
    return BinTable(limits=lim, counts=merged.counts, k=table.k)


def buffer_gap(extreme_gap: float, lowest: float, highest: float, count: float) -> float:
    """The scale a privacy buffer moves an extreme limit out by: the mean gap of the extreme
    records (:func:`buffer_scales`), or, when their values are all equal (gap 0: the limit
    would be a data value), the mean gap of all the values (``count`` of them, from ``lowest``
    to ``highest``); 0 only when every value is equal, and then the end is opened instead."""
    return extreme_gap if extreme_gap > 0 else mean_gap(lowest, highest, count)


def _assemble(
    u: FloatArray,
    counts: NDArray[np.signedinteger[Any]],
    cuts: NDArray[np.signedinteger[Any]],
    k: int,
    place: Placement,
) -> BinTable:
    """Limits and counts of a table whose bins end at ``cuts`` (the last one being D), its ends
    closed by privacy buffers (:func:`close_table` then closes them as the caller asked).

    Every limit is placed in one gap: the interior ones between the values they separate, the
    buffers below the smallest and above the largest value (±inf, an open end, when the
    placement has no buffer: every value equal)."""
    bounds = np.concatenate([[0], cuts])
    at = counts[:, bounds]
    bin_counts = np.diff(at, axis=1).astype(np.float64)
    interior = cuts[:-1]
    below = np.concatenate([[-np.inf], u[interior - 1], [u[-1]]])
    above = np.concatenate([[u[0]], u[interior], [np.inf]])
    # + 0.0: a zero is handed over as +0.0, whichever of the tied records (0.0 or -0.0) the
    # cut was found at (a keyed placement hashes the gap's ends as exact doubles).
    limits = np.asarray(place(below + 0.0, above + 0.0), dtype=np.float64)
    return BinTable(limits=limits, counts=bin_counts, k=k)
