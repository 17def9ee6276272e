"""``pooled_cuts``: the distinct pooled values and per-group cumulative counts, on every path
(many ties: bisection at the distinct values; few: the merge of the records)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from shared._greedy import pooled_cuts


def _reference(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    u = np.unique(np.concatenate(groups)) if groups else np.empty(0)
    counts = np.zeros((len(groups), u.size + 1), dtype=np.int64)
    for row, g in zip(counts, groups, strict=True):
        row[1:] = [np.count_nonzero(g <= v) for v in u]
    return u, counts


@given(
    sizes=st.lists(st.integers(0, 80), min_size=1, max_size=2),
    spread=st.sampled_from([1, 3, 20, 10_000]),  # few distinct values (ties) .. nearly none
    seed=st.integers(0, 2**32 - 1),
)
def test_pooled_cuts_match_plain_counting(sizes: list[int], spread: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    groups = [np.sort(rng.integers(0, spread, n).astype(np.float64)) for n in sizes]
    u, counts = pooled_cuts(groups)
    ref_u, ref_counts = _reference(groups)
    np.testing.assert_array_equal(u, ref_u)
    np.testing.assert_array_equal(counts, ref_counts)
