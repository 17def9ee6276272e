"""Single-center K-anonymous bin tables (seed 001, Algorithms 1-3; NOTES §2b).

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

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared import _greedy
from shared._sorting import ascending
from shared._validation import as_finite_1d, check_int

FloatArray = NDArray[np.float64]
Extreme = Literal["infinite", "buffer"] | float
"""How to close a table at one end: ``"infinite"``, ``"buffer"`` (the seed's privacy buffer:
the extreme value moved out by the mean gap between consecutive values of the extreme bin), or a
number: a natural limit such as 0 for a variable that cannot be negative."""


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


def extreme_limit(
    choice: Extreme, side: Literal["lower", "upper"], edge: float, gap: float
) -> float:
    """Close the table at one end.

    ``edge`` is the extreme data value and ``gap`` the mean gap of its bin.
    """
    if choice == "infinite":
        return -np.inf if side == "lower" else np.inf
    if choice == "buffer":
        return edge - gap if side == "lower" else edge + gap
    natural = float(choice)
    if (side == "lower" and natural > edge) or (side == "upper" and natural < edge):
        raise ValueError(
            f"natural `{side}` limit {natural} excludes data ({'min' if side == 'lower' else 'max'}"
            f" is {edge}); a natural limit must hold every value"
        )
    return natural


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

    Seed 001 Algorithms 1-3 as NOTES §2b states them: greedy limits from the smallest value up,
    each per-group count 0 or >= ``k``; leftovers at the end join the last bin (merging further
    back if that is needed to stay K-anonymous); interior limits randomized with a fresh
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
        How to close the table at each end (see :data:`Extreme`).

    Raises
    ------
    KAnonymityError
        If a group holds between 1 and k-1 values.
    """
    k = check_int(k, "k", 2)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("`rng` must be a numpy.random.Generator")
    lower = check_extreme(lower, "lower")
    upper = check_extreme(upper, "upper")
    groups = [as_finite_1d(x, "x", allow_empty=y is not None)]
    if y is not None:
        groups.append(as_finite_1d(y, "y", allow_empty=True))
    check_group_sizes([g.size for g in groups], k)

    sorted_groups = [ascending(g) for g in groups]
    u, counts = _greedy.pooled_cuts(sorted_groups)
    n_distinct = u.size
    seg_end = np.full(n_distinct + 1, n_distinct, dtype=counts.dtype)
    nxt = _greedy.transitions(counts, seg_end, k)
    start = np.zeros(1, dtype=np.int64)
    end = np.full(1, n_distinct, dtype=np.int64)
    chain, visited, final = _greedy.walk(nxt, start, seg_end)
    _, cuts = _greedy.close_chains(counts, chain, visited, final, start, end, k)
    return _assemble(u, counts, cuts, k, rng, lower, upper)


def _assemble(
    u: FloatArray,
    counts: NDArray[np.signedinteger[Any]],
    cuts: NDArray[np.signedinteger[Any]],
    k: int,
    rng: np.random.Generator,
    lower: Extreme,
    upper: Extreme,
) -> BinTable:
    """Limits and counts of a table whose bins end at ``cuts`` (the last one being D)."""
    bounds = np.concatenate([[0], cuts])
    at = counts[:, bounds]
    bin_counts = np.diff(at, axis=1).astype(np.float64)
    interior = cuts[:-1]
    inner = randomized_limits(u[interior - 1], u[interior], rng)
    pooled = at.sum(axis=0)
    first_gap = mean_gap(u[0], u[bounds[1] - 1], float(pooled[1] - pooled[0]))
    last_gap = mean_gap(u[bounds[-2]], u[-1], float(pooled[-1] - pooled[-2]))
    lo = extreme_limit(lower, "lower", float(u[0]), first_gap)
    hi = extreme_limit(upper, "upper", float(u[-1]), last_gap)
    if lo >= hi:
        # One bin whose values are all equal: a zero buffer would give c_0 = c_1. Open the
        # buffered sides instead (nothing about the data is released beyond the count).
        lo = -np.inf if lower == "buffer" else lo
        hi = np.inf if upper == "buffer" else hi
        if lo >= hi:
            raise ValueError("natural limits `lower` and `upper` must differ")
    limits = np.concatenate([[lo], inner, [hi]])
    return BinTable(limits=limits, counts=bin_counts, k=k)
