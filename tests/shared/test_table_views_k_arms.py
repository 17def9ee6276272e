"""Tables of k arms are views of the one canonical table (docs/privacy.md, "Tables of k arms"):
an attacker asking a center for its table of every subset and order of the levels, at any K no
lower than the center's and any closing, learns nothing the canonical table does not show.

Checked on random tied data of 2 to 5 levels (``shared.releases``: the code the center runs):

* every count of a k-row view is 0 or >= the K asked, and is the true count of the arm's records
  in that bin (recounted from the raw data);
* at the center's K, the k-row view's limits are those of every two-level view (and of the
  canonical table), and its rows are theirs: a k-row view is the two-level views side by side;
* at any K, a view's bins are unions of the canonical table's bins (its limits a subset of
  the canonical ones, the extremes aside): nothing is cut where the canonical table was not.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.releases import canonical_table, table_view


@st.composite
def levels(draw: st.DrawFn) -> tuple[int, list[np.ndarray]]:
    k = draw(st.integers(2, 6))
    n_levels = draw(st.integers(2, 5))
    grid = draw(st.sampled_from([1.0, 0.5, 0.01]))
    arrays = [np.round(np.asarray(draw(st.lists(st.floats(-30, 30), min_size=k,
                                                max_size=8 * k))) / grid) * grid
              for _ in range(n_levels)]
    return k, arrays


def true_counts(limits: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Bin (a, b] of ``limits`` (the first also holds a; values beyond the extremes in the
    extreme bins, as a natural closing counts them)."""
    cells = np.clip(np.searchsorted(limits[1:-1], values, side="left"), 0, limits.size - 2)
    return np.bincount(cells, minlength=limits.size - 1).astype(float)


@settings(max_examples=120, deadline=None)
@given(levels(), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_a_k_row_view_is_the_two_level_views_and_never_isolates(
        drawn: tuple[int, list[np.ndarray]], extra_k: int, seed: int) -> None:
    k, arrays = drawn
    canonical = canonical_table(arrays, k, np.random.default_rng(seed))
    everyone = list(range(len(arrays)))
    rng = np.random.default_rng(seed)
    order = [int(i) for i in rng.permutation(everyone)]  # the arms in any order

    same_k = table_view(canonical, order, k=k)
    np.testing.assert_array_equal(same_k.limits, canonical.limits)
    for a, b in itertools.permutations(everyone, 2):
        pair = table_view(canonical, [a, b], k=k)
        np.testing.assert_array_equal(pair.limits, same_k.limits)
        np.testing.assert_array_equal(pair.counts, same_k.counts[[order.index(a),
                                                                  order.index(b)]])

    # A K no arm falls below (the center refuses a level smaller than the K asked: `require`).
    big_k = min(k + extra_k * k, min(a.size for a in arrays))
    for lower, upper in (("buffer", "buffer"), ("infinite", "buffer"), ("buffer", "infinite")):
        view = table_view(canonical, order, k=big_k, lower=lower, upper=upper)
        counts = view.counts
        assert not np.any((counts > 0) & (counts < big_k)), counts
        inner = set(view.limits[1:-1].tolist())
        assert inner <= set(canonical.limits[1:-1].tolist())
        for row, arm in zip(counts, order, strict=True):
            np.testing.assert_array_equal(row, true_counts(view.limits, arrays[arm]))
