"""Sorting the data a function is given, without sorting it twice."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shared._validation import CHECK_CHUNK


def ascending(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``x`` in ascending order, read-only.

    ``x`` itself (a read-only view) when it is already sorted, found in one O(n) comparison,
    else a sorted copy. A center keeps each sample sorted once, so the many releases computed
    from it skip their O(n log n) sorts. ``x`` must hold no NaN (the callers have checked it).
    """
    head = x[:1024]  # unsorted data shows it here almost always: no full pass before the sort
    if x.size > 1 and not (bool(np.all(head[:-1] <= head[1:])) and in_order(x)):
        out = np.sort(x)
    else:
        out = x.view()
    out.flags.writeable = False
    return out


def in_order(x: NDArray[np.float64]) -> bool:
    """Whether ``x`` is non-decreasing, compared a chunk at a time (a boolean temporary of
    :data:`~shared._validation.CHECK_CHUNK` values, not one per value)."""
    pairs = x.size - 1  # x[i] <= x[i + 1] for every i < pairs
    for i in range(0, pairs, CHECK_CHUNK):
        stop = min(i + CHECK_CHUNK, pairs)
        if not np.all(x[i:stop] <= x[i + 1:stop + 1]):
            return False
    return True
