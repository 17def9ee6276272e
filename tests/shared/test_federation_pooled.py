"""``shared.federation.refine_pooled``: one row of runs over several groups, each set K-anonymous
in all and per group; and ``merge_runs`` coarsening a stretch of runs two by two."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.binning import bin_table
from shared.federation import (
    Refinement,
    Runs,
    _pooled_runs,
    apply_refinement,
    merge_runs,
    refine_pooled,
    refine_table,
    refined_limits,
)


def per_group_sets(limits: np.ndarray, release: Refinement, groups: list[np.ndarray]
                   ) -> np.ndarray:
    """Records of each group (rows) in each released set (columns), counted from the raw data
    by brute force: the refined cells' memberships, then the runs'."""
    lim = refined_limits(limits, release)
    run_of = np.asarray(release.runs[0].run_of_cell)
    out = np.zeros((len(groups), len(release.runs[0].totals)), dtype=np.int64)
    for g, x in enumerate(groups):
        cell = np.searchsorted(lim[1:-1], x, side="left")  # (lim[j], lim[j+1]] is cell j
        np.add.at(out[g], run_of[cell], 1)
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 12), level_k=st.integers(2, 12),
       sizes=st.lists(st.integers(0, 200), min_size=1, max_size=4))
def test_every_set_is_k_anonymous_in_all_and_per_group(seed: int, k: int, level_k: int,
                                                         sizes: list[int]) -> None:
    rng = np.random.default_rng(seed)
    if sum(sizes) < max(k, level_k) or any(0 < n < level_k for n in sizes):
        sizes = [max(n, level_k) for n in sizes]
    groups = [np.round(rng.lognormal(1.5, 0.6, n), 1) for n in sizes]
    table = bin_table(np.round(rng.lognormal(1.6, 0.5, 300), 1), k=k, rng=rng)
    release = refine_pooled(table.limits, groups, k=k, level_k=level_k, rng=rng)
    sets = per_group_sets(table.limits, release, groups)
    assert np.array_equal(sets.sum(axis=0), release.runs[0].totals)  # the totals are true
    assert np.all((sets == 0) | (sets >= level_k))
    totals = sets.sum(axis=0)
    assert np.all((totals == 0) | (totals >= k))
    apply_refinement(table, release)  # fits the table


def test_one_group_is_refine_table() -> None:
    rng = np.random.default_rng(7)
    x = np.round(rng.lognormal(1.5, 0.6, 400), 1)
    table = bin_table(np.round(rng.lognormal(1.6, 0.5, 500), 1), k=10, rng=rng)
    seed = int(rng.integers(2**32))
    pooled = refine_pooled(table.limits, [x], k=10, rng=np.random.default_rng(seed))
    assert pooled == refine_table(table.limits, x, k=10, rng=np.random.default_rng(seed))


def test_groups_kept_apart_give_more_runs_than_a_stretch_merged_after_the_fact() -> None:
    """Two groups of 30 records interleaved one by one: pooled runs of 10 records hold 5 of
    each, so the pooled-value refinement needs coarsening; built per group it does not, and
    still has one run per 20 records."""
    x = np.arange(1.0, 61.0)
    groups = [x[0::2], x[1::2]]
    limits = np.array([0.0, 61.0])
    release = refine_pooled(limits, groups, k=10, rng=np.random.default_rng(1))
    sets = per_group_sets(limits, release, groups)
    assert np.all((sets == 0) | (sets >= 10))
    assert len(release.runs[0].totals) + len(release.split_bins) >= 3


def test_a_group_too_small_to_keep_apart_refines_the_pooled_values() -> None:
    rng = np.random.default_rng(3)
    x, y = np.round(rng.normal(5, 1, 100), 1), np.round(rng.normal(5, 1, 4), 1)
    limits = np.array([0.0, 5.0, 10.0])
    seed = int(rng.integers(2**32))
    got = refine_pooled(limits, [x, y], k=10, rng=np.random.default_rng(seed))
    assert got == refine_table(limits, np.concatenate([x, y]), k=10,
                               rng=np.random.default_rng(seed))


def test_merge_runs_merges_a_stretch_two_by_two() -> None:
    release = Refinement(k=10, split_bins=[], split_limits=[], runs=[
        Runs(run_of_cell=list(range(7)), totals=[10.0] * 7)])
    merged = merge_runs(release, 0, [1, 2, 3, 4, 5])
    # (1, 2), (3, 4, 5): the odd last one joins the pair before it; 0 and 6 untouched.
    assert merged.runs[0].run_of_cell == [0, 1, 1, 2, 2, 2, 3]
    assert merged.runs[0].totals == [10.0, 20.0, 30.0, 10.0]
    lone = merge_runs(release, 0, [6])
    assert lone.runs[0].run_of_cell == [0, 1, 2, 3, 4, 5, 5]


def test_merge_runs_refuses_a_release_with_splits() -> None:
    release = Refinement(k=10, split_bins=[0], split_limits=[0.5], runs=[
        Runs(run_of_cell=[0, 1], totals=[10.0, 10.0])])
    with pytest.raises(ValueError, match="splits"):
        merge_runs(release, 0, [0])


def greedy_ends(counts: np.ndarray, fixed: np.ndarray, k: int, level_k: int) -> list[int]:
    """The runs' ends over the loose cells by the plain cell-by-cell loop (the reference)."""
    def closed(part: list[int]) -> bool:
        return (sum(part) == 0 or sum(part) >= k) and all(c == 0 or c >= level_k for c in part)

    ends: list[int] = []
    parts: list[list[int]] = []
    open_part = [0] * counts.shape[0]
    cols = counts[:, ~fixed].T.tolist()
    for j, col in enumerate(cols):
        open_part = [a + b for a, b in zip(open_part, col, strict=True)]
        if closed(open_part):
            ends.append(j + 1)
            parts.append(open_part)
            open_part = [0] * counts.shape[0]
    if any(open_part):
        while not closed(open_part):
            ends.pop()
            open_part = [a + b for a, b in zip(open_part, parts.pop(), strict=True)]
        ends.append(len(cols))
    return ends


def test_pooled_runs_are_the_greedy_loops() -> None:
    checked = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        n_groups, m = int(rng.integers(1, 4)), int(rng.integers(1, 60))
        counts = rng.integers(0, 5, (n_groups, m)) * (rng.random((n_groups, m)) < 0.6)
        k, level_k = int(rng.integers(2, 9)), int(rng.integers(2, 9))
        fixed = rng.random(m) < 0.1
        loose = counts[:, ~fixed].sum(axis=1)
        if np.any((loose > 0) & (loose < level_k)) or 0 < loose.sum() < k:
            continue  # refine_pooled never gets here with such totals
        got = np.asarray(_pooled_runs(counts, fixed, k, level_k).run_of_cell)[~fixed]
        ends = np.asarray(greedy_ends(counts, fixed, k, level_k), dtype=np.int64)
        assert np.array_equal(got, np.searchsorted(ends, np.arange(got.size), side="right"))
        checked += 1
    assert checked > 100
