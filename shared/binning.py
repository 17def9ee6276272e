"""Single-center K-anonymous bin tables (seed 001, Algorithms 1-3; docs/methods.md §1).

A table has limits ``c_0 < c_1 < ... < c_B`` and per-group counts; bin ``j`` is
``(c_j, c_{j+1}]`` (the first one closed on the left). Every released per-group count is 0 or
at least ``k``; interior limits are randomized between the two data values they separate, so no
interior limit is a data value; the extreme limits are infinite, natural (given by the data
owner) or privacy buffers.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(1)
>>> table = bin_table(rng.normal(size=100), rng.normal(size=80), k=10, rng=rng)
>>> bool(np.all((table.counts == 0) | (table.counts >= 10)))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared import _greedy
from shared._sorting import ascending
from shared._validation import as_finite_1d, check_int
from shared.privacy import isolating

FloatArray = NDArray[np.float64]
Extreme = Literal["infinite", "buffer"] | float
"""How to close a table at one end: ``"infinite"``, ``"buffer"`` (the seed's privacy buffer:
the extreme value moved out by the mean gap between consecutive values of the extreme bin), or a
number: a natural limit such as 0 for a variable that cannot be negative."""
ExtremeKind = Literal["buffer", "natural", "infinite"]
"""How a table's extreme limit was made: a privacy buffer (data-derived: a center with values
beyond it moves it out), a natural limit (public: values beyond it are counted in the extreme
bin) or infinite."""


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
    """c = w·a + (1 − w)·v with a fresh w ~ U(0, 1) per limit (seed 001, §5).

    ``below`` holds the largest value of each bin, ``above`` the smallest value of the next.
    Rounding can land c on a or v when they are close; those limits fall back to the midpoint,
    and stay equal to ``a`` only when a and v are adjacent doubles (nothing lies between them).
    """
    w = rng.random(below.size)
    c = w * below + (1.0 - w) * above
    bad = ~((c > below) & (c < above))
    if bad.any():
        mid = below[bad] + (above[bad] - below[bad]) / 2.0
        ok = (mid > below[bad]) & (mid < above[bad])
        c[bad] = np.where(ok, mid, below[bad])
    return c


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
    rng: np.random.Generator,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> BinTable:
    """K-anonymous bin table of one group (``x``) or two groups (``x``, ``y``).

    Seed 001 Algorithms 1-3 as docs/methods.md §1 states them: greedy limits from the smallest
    value up, each per-group count 0 or >= ``k``; leftovers at the end join the last bin (merging
    further back if that is needed to stay K-anonymous); interior limits randomized with a fresh
    w ~ U(0, 1) each; extreme limits by ``lower``/``upper``.

    Parameters
    ----------
    x, y : array_like
        Raw values of each group (finite; each group must hold 0 or at least ``k`` values).
    k : int
        The anonymity threshold K (>= 2).
    rng : numpy.random.Generator
        Source of the limits' randomization.
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
    return bin_groups(groups, k=k, rng=rng, lower=lower, upper=upper)


def bin_groups(
    groups: Sequence[ArrayLike],
    *,
    k: int = 10,
    rng: np.random.Generator,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> BinTable:
    """K-anonymous bin table of any number of groups (one row of counts each).

    The greedy rule of :func:`bin_table` with the two-group rule generalized: take the smallest
    group candidate when every candidate is valid for every group, else the largest when it is
    valid for all, else close the table (docs/methods.md §1.3). With one or two groups this is
    :func:`bin_table`. A center bins every declared level at once, so that every table it
    releases of a variable, whichever levels it shows, has the same limits (no two of its
    tables can be subtracted).
    """
    k = check_int(k, "k", 2)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("`rng` must be a numpy.random.Generator")
    lower = check_extreme(lower, "lower")
    upper = check_extreme(upper, "upper")
    arrays = [as_finite_1d(g, f"groups[{i}]", allow_empty=True) for i, g in enumerate(groups)]
    if not arrays:
        raise ValueError("`groups` must hold at least one group")
    check_group_sizes([g.size for g in arrays], k)

    sorted_groups = [ascending(g) for g in arrays]
    u, counts = _greedy.pooled_cuts(sorted_groups)
    n_distinct = u.size
    seg_end = np.full(n_distinct + 1, n_distinct, dtype=counts.dtype)
    nxt = _greedy.transitions(counts, seg_end, k)
    start = np.zeros(1, dtype=np.int64)
    end = np.full(1, n_distinct, dtype=np.int64)
    chain, visited, final = _greedy.walk(nxt, start, seg_end)
    _, cuts = _greedy.close_chains(counts, chain, visited, final, start, end, k)
    table = _assemble(u, counts, cuts, k, rng)
    return close_table(table, lower, upper)


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
    return merge_bins(table, keep)


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
    """The gap a privacy buffer moves an extreme limit out by: the mean gap of the extreme bin,
    or, when its values are all equal (gap 0: the limit would be a data value), the mean gap of
    all the values (``count`` of them, from ``lowest`` to ``highest``); 0 only when every value
    is equal, and then the end is opened instead."""
    return extreme_gap if extreme_gap > 0 else mean_gap(lowest, highest, count)


def _assemble(
    u: FloatArray,
    counts: NDArray[np.signedinteger[Any]],
    cuts: NDArray[np.signedinteger[Any]],
    k: int,
    rng: np.random.Generator,
) -> BinTable:
    """Limits and counts of a table whose bins end at ``cuts`` (the last one being D), its ends
    closed by privacy buffers (:func:`close_table` then closes them as the caller asked)."""
    bounds = np.concatenate([[0], cuts])
    at = counts[:, bounds]
    bin_counts = np.diff(at, axis=1).astype(np.float64)
    interior = cuts[:-1]
    inner = randomized_limits(u[interior - 1], u[interior], rng)
    pooled = at.sum(axis=0)
    n = float(pooled[-1])
    first_gap = buffer_gap(mean_gap(u[0], u[bounds[1] - 1], float(pooled[1] - pooled[0])),
                           float(u[0]), float(u[-1]), n)
    last_gap = buffer_gap(mean_gap(u[bounds[-2]], u[-1], float(pooled[-1] - pooled[-2])),
                          float(u[0]), float(u[-1]), n)
    # A buffer of 0 (every value equal) would put a data value in the table: open that end.
    lo = float(u[0]) - first_gap if first_gap > 0 else -np.inf
    hi = float(u[-1]) + last_gap if last_gap > 0 else np.inf
    limits = np.concatenate([[lo], inner, [hi]])
    return BinTable(limits=limits, counts=bin_counts, k=k)
