"""``ascending``: sorted data is used as it is (no copy, no sort), anything else is sorted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared._sorting import ascending


@given(st.lists(st.floats(allow_nan=False, allow_infinity=True, width=64), max_size=50))
def test_equals_a_sort_and_is_read_only(values: list[float]) -> None:
    x = np.asarray(values, dtype=np.float64)
    before = x.copy()
    out = ascending(x)
    np.testing.assert_array_equal(out, np.sort(before))
    np.testing.assert_array_equal(x, before)  # the input is never reordered
    assert not out.flags.writeable


def test_sorted_input_is_not_copied() -> None:
    x = np.sort(np.random.default_rng(3).normal(size=1000))
    out = ascending(x)
    assert np.shares_memory(out, x)
    assert x.flags.writeable  # the caller's array keeps its flags; only the view is read-only
    with pytest.raises(ValueError, match="read-only"):
        out[0] = 0.0
    unsorted = x[::-1].copy()
    assert not np.shares_memory(ascending(unsorted), unsorted)


@pytest.mark.parametrize("n", range(9))
def test_the_checks_in_chunks_see_every_pair_and_value(n: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The O(n) checks run a chunk at a time (3 values here): a descent or a non-finite value
    anywhere, across a chunk's edge or in the last one, is found."""
    from shared import _sorting, _validation

    monkeypatch.setattr(_sorting, "CHECK_CHUNK", 3)
    monkeypatch.setattr(_validation, "CHECK_CHUNK", 3)
    x = np.arange(float(n))
    assert _sorting.in_order(x) and _validation.all_finite(x)
    for i in range(n - 1):
        swapped = x.copy()
        swapped[[i, i + 1]] = swapped[[i + 1, i]]
        assert not _sorting.in_order(swapped)
    for i in range(n):
        for bad in (np.nan, np.inf):
            hole = x.copy()
            hole[i] = bad
            assert not _validation.all_finite(hole)
