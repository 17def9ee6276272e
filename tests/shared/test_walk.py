"""The compiled walk (shared/_walk.py) gives the numpy reference's tables and refinements: the
same cuts, the same values handed to the placement, the same placed numbers and counts."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import _walk, binning, federation
from shared.binning import KAnonymityError

pytestmark = pytest.mark.skipif(not _walk.AVAILABLE, reason="numba is not installed")

ONE = np.nextafter(1.0, 2.0)  # 1.0 and ONE are adjacent doubles: nothing lies between them
ELEMENTS = [
    st.integers(-3000, 3000).map(lambda i: i / 1000),  # a fine grid: a few ties
    st.integers(-4, 4).map(float),  # a coarse one: ties everywhere
    st.sampled_from([1.0, ONE, 2.0, -0.5]),  # adjacent doubles
    st.sampled_from([-1.0, -0.0, 0.0, 2.0]),  # both zeros, tied
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),  # continuous, any scale
]


@st.composite
def groups(draw: st.DrawFn, max_groups: int = 4) -> tuple[int, list[np.ndarray]]:
    """K and 1..max_groups groups of 0 or K..8K values (not all empty)."""
    k = draw(st.integers(2, 25))
    elements = draw(st.sampled_from(ELEMENTS))
    out = []
    for _ in range(draw(st.integers(1, max_groups))):
        n = draw(st.one_of(st.just(0), st.integers(k, 8 * k)))
        out.append(np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=float))
    if sum(g.size for g in out) == 0:
        out[0] = np.arange(float(k))
    if draw(st.booleans()):
        out = [np.sort(g) for g in out]  # sorted input (a center's kept data) takes no copy
    return k, out


def recording(seen: list[tuple[np.ndarray, np.ndarray]], w: float) -> binning.Placement:
    """A deterministic placement that remembers the gaps it was asked for."""
    def place(below: np.ndarray, above: np.ndarray) -> np.ndarray:
        seen.append((np.array(below), np.array(above)))
        return binning.place_points(below, above, np.full(np.asarray(below).size, w), 1.5, 0.5)
    return place


def same_gaps(a: list[tuple[np.ndarray, np.ndarray]], b: list[tuple[np.ndarray, np.ndarray]]
              ) -> None:
    assert len(a) == len(b)
    for (below_a, above_a), (below_b, above_b) in zip(a, b, strict=True):
        np.testing.assert_array_equal(below_a, below_b)
        np.testing.assert_array_equal(above_a, above_b)


def same_table(a: binning.BinTable, b: binning.BinTable) -> None:
    assert a.limits.tobytes() == b.limits.tobytes()  # bit for bit
    assert a.counts.tobytes() == b.counts.tobytes()


@settings(max_examples=150, deadline=None)
@given(groups(), st.integers(0, 2**32 - 1), st.floats(0.0, 0.999),
       st.sampled_from([None, 1, 2, 5]),
       st.sampled_from(["buffer", "infinite", -0.25]), st.sampled_from(["buffer", 1.5]))
def test_binning_matches_the_reference(case, seed, w, max_bins, lower, upper):
    k, data = case
    seen_c: list = []
    seen_r: list = []
    compiled = binning.bin_groups(data, k=k, place=recording(seen_c, w), max_bins=max_bins,
                                  lower=lower, upper=upper)
    reference = binning._reference(data, k=k, place=recording(seen_r, w), max_bins=max_bins,
                                   lower=lower, upper=upper)
    same_gaps(seen_c, seen_r)
    same_table(compiled, reference)
    # The seed's placement (fresh draws, scales from the extreme records) as well.
    same_table(binning.bin_groups(data, k=k, rng=np.random.default_rng(seed)),
               binning._reference(data, k=k, rng=np.random.default_rng(seed)))


@st.composite
def refinements(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray, np.ndarray | None]:
    """A table's limits (from a first center) and a second center's one or two groups."""
    k, first = draw(groups(max_groups=2))
    table = binning.bin_groups(first, k=k, rng=np.random.default_rng(draw(st.integers(0, 99))),
                               lower=draw(st.sampled_from(["buffer", "infinite"])))
    second = draw(st.lists(st.integers(0, 8 * k).filter(lambda n: n == 0 or n >= k),
                           min_size=1, max_size=2).filter(any))
    elements = draw(st.sampled_from(ELEMENTS))
    shift = draw(st.sampled_from([0.0, 0.5, -3.0, 1e3]))
    x, *rest = (np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=float) + shift
                for n in second)
    return k, table.limits, x, (rest[0] if rest else None)


@settings(max_examples=150, deadline=None)
@given(refinements(), st.integers(0, 2**32 - 1), st.floats(0.0, 0.999),
       st.sampled_from(["buffer", "natural", "infinite"]),
       st.sampled_from(["buffer", "natural", "infinite"]), st.booleans())
def test_refinement_matches_the_reference(case, seed, w, lower, upper, split):
    k, limits, x, y = case
    out = []
    for refine in (federation.refine_table, federation._reference):
        seen: list = []
        try:
            placed = refine(limits, x, y, k=k, place=recording(seen, w), lower=lower,
                            upper=upper, split=split)
        except KAnonymityError as error:
            placed = str(error)
        drawn = refine(limits, x, y, k=k, rng=np.random.default_rng(seed), split=split) if (
            not isinstance(placed, str)) else None
        out.append((placed, drawn, seen))
    (placed_c, drawn_c, seen_c), (placed_r, drawn_r, seen_r) = out
    assert placed_c == placed_r
    assert drawn_c == drawn_r
    same_gaps(seen_c, seen_r)


def test_many_small_steps_fit_the_walks_buffers():
    """K = 2 with every value tied to its neighbour: the most bins the walk can write."""
    rng = np.random.default_rng(5)
    x = np.repeat(rng.normal(size=500), 2)
    y = np.repeat(rng.normal(size=400), 2)
    same_table(binning.bin_groups([x, y, x + 1e-3], k=2, rng=np.random.default_rng(1)),
               binning._reference([x, y, x + 1e-3], k=2, rng=np.random.default_rng(1)))


def clustered(rng: np.random.Generator, k: int, n_groups: int) -> list[np.ndarray]:
    """Groups in clusters of tied values at different places: where every group's candidate
    can be valid for every other group, so the smallest one is taken (rare in random data)."""
    return [np.round(rng.normal(2 * rng.normal(), 1, size=int(rng.integers(k, 12 * k)))
                     * rng.choice([1, 3])) for _ in range(n_groups)]


def test_clustered_groups_match_the_reference():
    for seed in range(300):
        rng = np.random.default_rng(seed)
        k = int(rng.integers(2, 6))
        data = clustered(rng, k, int(rng.integers(2, 5)))
        same_table(binning.bin_groups(data, k=k, rng=np.random.default_rng(seed)),
                   binning._reference(data, k=k, rng=np.random.default_rng(seed)))
        limits = binning.bin_groups(clustered(rng, k, 2), k=k, rng=rng).limits
        x, y = clustered(rng, k, 2)
        assert (federation.refine_table(limits, x, y, k=k, rng=np.random.default_rng(seed))
                == federation._reference(limits, x, y, k=k, rng=np.random.default_rng(seed)))


def test_a_zero_is_handed_to_the_placement_as_plus_zero():
    """0.0 and -0.0 are tied values; which one a cut is found at depends on the sort's order of
    equal records, so the placement gets +0.0 either way (a keyed placement hashes the bits)."""
    x = np.array([-1.0, -1.0, -0.0, -0.0, 0.0, 2.0, 2.0, 3.0, 3.0, 3.0])
    y = np.array([0.0, 0.0, -0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 4.0])
    for k in (2, 3):
        for data in ([x, y], [y, x], [x]):
            seen: list = []
            binning.bin_groups(data, k=k, place=recording(seen, 0.5))
            (below, above), = seen
            assert not np.signbit(below[below == 0]).any()
            assert not np.signbit(above[above == 0]).any()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 120), st.integers(0, 120), st.sampled_from([0.5, 0.05, 0.0]),
       st.integers(0, 2**32 - 1))
def test_mwu_merge_matches_the_pooled_cuts(n, m, step, seed):
    """The compiled merge's U and Σ(t³ − t) equal the numpy reference's (pooled cuts) on
    continuous data, fine and coarse ties, empty samples; and the local test built on them is
    the same number for number (N > 50 takes the merge)."""
    from shared import mwu

    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=n), rng.normal(0.3, size=m)
    if step:
        x, y = np.round(x / step) * step, np.round(y / step) * step
    u, ties = _walk.mwu_merge(np.sort(x), np.sort(y))
    reference = sum(float(np.sign(b - a)) for a in x for b in y)
    _, counts = np.unique(np.concatenate([x, y]), return_counts=True)
    assert u == reference
    assert ties == float(np.sum(counts.astype(float) ** 3 - counts))
    if n and m and n + m > mwu.EXACT_MAX_N:
        merged = mwu.mann_whitney(x, y)
        try:
            _walk.AVAILABLE = False
            pooled = mwu.mann_whitney(x, y)
        finally:
            _walk.AVAILABLE = True
        assert (merged.statistic, merged.variance, merged.pvalue) == pytest.approx(
            (pooled.statistic, pooled.variance, pooled.pvalue), rel=1e-12, abs=1e-300)


def _one_buffer(parts: list[np.ndarray]) -> list[np.ndarray]:
    """``parts`` copied one after the other into one buffer (as a center keeps its levels)."""
    buffer = np.concatenate(parts) if parts else np.empty(0)
    bounds = np.cumsum([0, *(p.size for p in parts)])
    return [buffer[a:b] for a, b in pairwise(bounds)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_merge_sorted_is_a_stable_sort_bit_for_bit(sizes, seed):
    """The compiled merge of adjacent sorted levels gives the stable sort of their
    concatenation, bit for bit: ties in level order, 0.0 and -0.0 where the sort puts them
    (empty levels too); levels in separate arrays are not merged (None: the caller sorts)."""
    rng = np.random.default_rng(seed)
    parts = []
    for size in sizes:
        values = rng.choice([-1.5, -0.0, 0.0, 0.5, 2.0], size) + rng.choice([0.0, 1e-3], size)
        parts.append(np.sort(values))
    levels = _one_buffer(parts)
    merged = _walk.merge_sorted(levels)
    expected = np.sort(np.concatenate(parts), kind="stable")
    assert merged is not None and not np.shares_memory(merged, levels[0])
    assert merged.tobytes() == expected.tobytes()
    if len(parts) > 1 and all(p.size for p in parts):
        assert _walk.merge_sorted([p.copy() for p in parts]) is None
        assert _walk.merge_sorted(levels[::-1]) is None  # out of order: not one run


def test_sorted_buffer_reads_adjacent_levels_in_place():
    """Sorted levels lying one after the other in one buffer are binned where they lie (no
    copy), with the same table as from separate arrays (which are copied); an unsorted one
    among them is copied and sorted, never sorted in place."""
    rng = np.random.default_rng(3)
    parts = [np.sort(np.round(rng.normal(size=size), 1)) for size in (500, 700, 300)]
    levels = _one_buffer(parts)
    buf, off = _walk.sorted_buffer(levels)
    assert np.shares_memory(buf, levels[0]) and not buf.flags.writeable
    assert off.tolist() == [0, 500, 1200, 1500]
    copied, _ = _walk.sorted_buffer([p.copy() for p in parts])
    assert not np.shares_memory(copied, parts[0]) and buf.tobytes() == copied.tobytes()
    place = recording([], 0.25)
    here = binning.bin_groups(levels, k=7, place=place)
    there = binning.bin_groups([p.copy() for p in parts], k=7, place=place)
    assert here.limits.tobytes() == there.limits.tobytes()
    assert here.counts.tobytes() == there.counts.tobytes()
    shuffled = _one_buffer([parts[0], rng.permutation(parts[1])])
    before = shuffled[1].copy()
    buf, _ = _walk.sorted_buffer(shuffled)
    assert not np.shares_memory(buf, shuffled[0]) and np.all(np.diff(buf[500:]) >= 0)
    assert shuffled[1].tobytes() == before.tobytes()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 60), st.integers(2, 25), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_coarsening_matches_the_reference(n_groups, n_bins, k, fractional, seed):
    """``coarsen_table``'s compiled merge keeps the reference's limits, bit for bit, on integer
    tables (each count 0 or >= 2, as a K = 2 table) and on fractional ones (federation's shares),
    with empty bins and groups; every count after it is 0 or >= k."""
    rng = np.random.default_rng(seed)
    counts = rng.choice([0.0, 0.0, 2.0, 3.0, 7.0, 12.0, 30.0], size=(n_groups, n_bins))
    if fractional:
        counts = counts * rng.choice([1.0, 0.37, 1.61], size=counts.shape)
    totals = counts.sum(axis=1)
    if (totals > 0).any() and ((totals > 0) & (totals < k)).any():
        counts[(totals > 0) & (totals < k), -1] += k  # every group total 0 or >= k
    table = binning.BinTable(limits=np.arange(n_bins + 1.0), counts=counts, k=2)
    compiled = _walk.coarsen_keep(table.counts, table.totals, k)
    assert compiled.tolist() == binning._coarsen_keep(table, table.totals, k).tolist()
    out = binning.coarsen_table(table, k)
    assert np.all((out.counts == 0) | (out.counts >= k - 1e-9))
    assert out.counts.sum() == pytest.approx(counts.sum())


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 70), st.integers(0, 2**32 - 1))
def test_the_compiled_chain_walk_is_the_python_one(n_cuts, n_chains, seed):
    """``_greedy.walk`` with its sequential part compiled visits the cuts the Python walk
    visits and stops where it stops, for one long chain (a table's runs) and for many (a
    refinement's segments, more than the 64 that advance together), STOPs included."""
    from shared import _greedy

    rng = np.random.default_rng(seed)
    bounds = np.unique(np.concatenate([[0, n_cuts], rng.integers(0, n_cuts, n_chains - 1)]))
    starts, ends = bounds[:-1], bounds[1:]
    nxt = np.full(n_cuts + 1, _greedy.STOP, dtype=np.int64)
    seg_end = np.full(n_cuts + 1, n_cuts, dtype=np.int64)
    for a, b in zip(starts, ends, strict=True):
        seg_end[a:b] = b
        steps = np.arange(a, b) + rng.integers(1, 4, b - a)
        nxt[a:b] = np.where((steps <= b) & (rng.random(b - a) > 0.02), steps, _greedy.STOP)
    fast = _greedy.walk(nxt, starts.astype(np.int64), seg_end)
    slow = _greedy.walk(nxt, starts.astype(np.int64), seg_end, compiled=False)
    for a, b in zip(fast, slow, strict=True):
        assert a.tolist() == b.tolist()
