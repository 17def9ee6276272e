"""The release auditor refuses a table whose limits, with those released before, would isolate
fewer than K records in a cell of the common refinement."""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from center_agent.auditor import Auditor, refinement_counts, small_cells
from center_agent.core.errors import DifferencingRefusal, PrivacyRefusal, UnknownDataset
from center_agent.db import Store

K = 10
A = np.arange(1.0, 31.0)  # 30 records: 1, 2, ..., 30
B = np.arange(0.5, 30.0, 1.0)  # 30 records: 0.5, 1.5, ..., 29.5


@pytest.fixture(params=["sqlite", "postgresql"])
def auditor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Auditor]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    else:
        url = request.getfixturevalue("pg_url")
    store = Store(url)
    store.ensure_budgets({"d": 1.0})
    yield Auditor(store)
    store.close()


def test_cells_are_right_closed() -> None:
    edges = np.array([10.0, 20.0])
    counts = refinement_counts(edges, [5, 10, 10.5, 20, 21, 100])
    assert counts.tolist() == [2, 2, 2]  # (-inf, 10], (10, 20], (20, inf)


def test_small_cells_finds_the_isolating_cell() -> None:
    bad = small_cells([[0, 10, 20, 30], [0, 11, 20, 30]], {"a": A}, K)
    assert list(bad) == ["a"]
    edges = np.array([0, 10, 11, 20, 30])
    # (10, 11] holds the single record 11, and (11, 20] the other nine
    assert bad["a"].tolist() == [2, 3]
    assert refinement_counts(edges, A)[2:4].tolist() == [1, 9]
    assert small_cells([[0, 10, 20, 30], [0, 20, 30]], {"a": A}, K) == {}


def test_crafted_refinement_isolating_one_record_is_refused(auditor: Auditor) -> None:
    """An analyst asks for [0,10,20,30], then shifts a limit by one record: the difference of
    the two first cells would be one patient's count."""
    auditor.admit_table("d", "age", None, [0, 10, 20, 30], {"all": A}, K)
    with pytest.raises(DifferencingRefusal) as info:
        auditor.admit_table("d", "age", None, [0, 11, 20, 30], {"all": A}, K)
    assert info.value.status_code == 409
    assert isinstance(info.value, PrivacyRefusal)
    assert info.value.body()["error"] == "differencing_refused"
    assert info.value.body()["reason"] == "small_refinement_cell"
    assert "K=10" in info.value.detail
    # the refused table was not recorded: the first one is still the only one
    assert [t.tolist() for t in auditor.released("d", "age")] == [[0, 10, 20, 30]]
    # coarser tables, and the same table again, stay allowed
    auditor.admit_table("d", "age", None, [0, 20, 30], {"all": A}, K)
    auditor.admit_table("d", "age", None, [0, 10, 20, 30], {"all": A}, K)
    assert len(auditor.released("d", "age")) == 2  # the repeat is stored once


def test_a_sequence_of_small_shifts_is_refused_at_the_first_step(auditor: Auditor) -> None:
    auditor.admit_table("d", "age", None, [0, 15, 30], {"all": A}, K)
    refused = 0
    for shift in range(1, 6):
        try:
            auditor.admit_table("d", "age", None, [0, 15 + shift, 30], {"all": A}, K)
        except DifferencingRefusal:
            refused += 1
    assert refused == 5
    assert auditor.released("d", "age")[0].tolist() == [0, 15, 30]


def test_any_group_with_a_small_cell_refuses(auditor: Auditor) -> None:
    b = np.concatenate([B[:10], B[10:] + 100])  # b: 0.5..9.5, then 110.5..129.5
    auditor.admit_table("d", "age", "arm", [0, 10, 200], {"a": A, "b": b}, K)
    with pytest.raises(DifferencingRefusal, match=r"group\(s\): b"):
        # a keeps 20 and 0 records either side of 115; b would have 5 in (10, 115]
        auditor.check_table("d", "age", "arm", [0, 10, 115, 200], {"a": A, "b": b}, K)
    auditor.check_table("d", "age", "arm", [0, 10, 200], {"a": A, "b": b}, K)


def test_the_new_table_alone_must_be_safe(auditor: Auditor) -> None:
    with pytest.raises(DifferencingRefusal):
        auditor.check_table("d", "age", None, [0, 5, 30], {"all": A}, K)


def test_limits_of_every_grouping_are_combined(auditor: Auditor) -> None:
    auditor.admit_table("d", "age", "arm", [0, 10, 30], {"a": A}, K)
    with pytest.raises(DifferencingRefusal):
        auditor.admit_table("d", "age", None, [0, 12, 30], {"all": A}, K)
    auditor.admit_table("d", "other", None, [0, 12, 30], {"all": A}, K)  # another variable


def test_check_then_record(auditor: Auditor) -> None:
    auditor.check_table("d", "age", None, [0, 10, 30], {"all": A}, K)
    assert auditor.released("d", "age") == []  # checking alone records nothing
    auditor.record_table("d", "age", None, [0, 10, 30])
    auditor.record_table("d", "age", None, [0, 10, 30])
    assert len(auditor.released("d", "age")) == 1


def test_infinite_extreme_limits_are_stored(auditor: Auditor) -> None:
    auditor.admit_table("d", "age", None, [-np.inf, 15, np.inf], {"all": A}, K)
    assert auditor.released("d", "age")[0].tolist() == [-np.inf, 15, np.inf]


@pytest.mark.parametrize("limits", [[1, 1, 2], [3, 2], [0, np.nan], [[0, 1]]])
def test_malformed_limits_are_refused(auditor: Auditor, limits: list[float]) -> None:
    with pytest.raises(ValueError, match="`limits`"):
        auditor.check_table("d", "age", None, limits, {"all": A}, K)


def test_unknown_dataset(auditor: Auditor) -> None:
    with pytest.raises(UnknownDataset):
        auditor.admit_table("nope", "age", None, [0, 30], {"all": A}, K)


def test_concurrent_conflicting_tables_admit_exactly_one(auditor: Auditor) -> None:
    """Any two of these tables together isolate < K records: only one may ever be released."""
    data = np.arange(1.0, 41.0)
    n = 10
    barrier = threading.Barrier(n)

    def one(i: int) -> bool:
        barrier.wait()
        try:
            auditor.admit_table("d", "age", None, [0, 10 + i, 40], {"all": data}, K)
            return True
        except DifferencingRefusal:
            return False

    with ThreadPoolExecutor(max_workers=n) as pool:
        assert sum(pool.map(one, range(n))) == 1
    assert len(auditor.released("d", "age")) == 1


def _reference_small_cells(limit_sets: list[list[float]], values: list[float], k: int) -> bool:
    """Plain loops: does any cell between consecutive distinct limits hold 1..k-1 values?"""
    edges = sorted({v for limits in limit_sets for v in limits})
    bounds = [-math.inf, *edges, math.inf]
    for lo, hi in itertools.pairwise(bounds):
        n = sum(1 for v in values if lo < v <= hi)
        if 0 < n < k:
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 40).map(float), min_size=0, max_size=60),
    limit_sets=st.lists(
        st.lists(st.integers(-2, 42).map(float), min_size=1, max_size=5, unique=True).map(sorted),
        min_size=1,
        max_size=4,
    ),
    k=st.integers(2, 6),
)
def test_small_cells_matches_a_plain_reference(
    values: list[float], limit_sets: list[list[float]], k: int
) -> None:
    found = small_cells(limit_sets, {"g": values}, k)
    assert bool(found) == _reference_small_cells(limit_sets, values, k)


# -- refinements: bins released in runs ---------------------------------------------------------


def _reference_small_atoms(
    limit_sets: list[list[float]], labels: list[list[int] | None], values: list[float], k: int
) -> int:
    """Plain loops: group the values by their released set in every release; count the groups
    holding 1..k-1 values."""
    def released(v: float, limits: list[float], runs: list[int] | None) -> int:
        if runs is None:
            return sum(1 for c in limits if c < v)  # the cell (c_{i-1}, c_i] holding v
        interior = limits[1:-1]
        return runs[sum(1 for c in interior if c < v)]

    atoms = Counter(tuple(released(v, lim, lab) for lim, lab in zip(limit_sets, labels,
                                                                    strict=True))
                    for v in values)
    return sum(1 for n in atoms.values() if 0 < n < k)


@st.composite
def _labelled_releases(draw: st.DrawFn) -> tuple[list[list[float]], list[list[int] | None]]:
    sets, labels = [], []
    for _ in range(draw(st.integers(1, 4))):
        limits = sorted(draw(st.lists(st.integers(-2, 42).map(float), min_size=2, max_size=6,
                                      unique=True)))
        sets.append(limits)
        bins = len(limits) - 1
        # Runs need not be contiguous (a refinement's split cells are runs of their own).
        labels.append(draw(st.none() | st.lists(st.integers(0, bins - 1), min_size=bins,
                                                  max_size=bins)))
    return sets, labels


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(-4, 44).map(float), min_size=0, max_size=60),
    releases=_labelled_releases(),
    k=st.integers(2, 6),
)
def test_small_atoms_match_a_plain_reference_with_runs(
    values: list[float], releases: tuple[list[list[float]], list[list[int] | None]], k: int
) -> None:
    limit_sets, labels = releases
    label_sets = [None if lab is None else {"g": lab} for lab in labels]
    found = small_cells(limit_sets, {"g": values}, k, label_sets)
    assert len(found.get("g", [])) == _reference_small_atoms(limit_sets, labels, values, k)


def test_runs_are_the_released_unit() -> None:
    # Ten records in (0, 10] and ten in (10, 20], released per bin: safe on their own.
    values = np.r_[np.linspace(1, 9, 10), np.linspace(11, 19, 10)]
    limits = [0.0, 3.0, 10.0, 20.0]  # (0, 3] and (3, 10] hold 3 and 7 records
    assert small_cells([limits], {"a": values}, K)  # per bin: small cells
    # Released as runs {(0,3], (3,10]} and {(10,20]}: every released set holds 10.
    runs = {"a": [0, 0, 1]}
    assert small_cells([limits], {"a": values}, K, [runs]) == {}
    # A later plain table cutting at 3 again would expose the 3 and the 7.
    assert small_cells([limits, [0.0, 3.0, 20.0]], {"a": values}, K, [runs, None])


def test_identity_labels_give_the_common_refinement() -> None:
    rng = np.random.default_rng(8)
    values = rng.normal(size=200)
    sets = [np.r_[-5.0, np.sort(rng.normal(size=6)), 5.0] for _ in range(3)]
    identity = [{"a": list(range(s.size - 1))} for s in sets]
    plain = small_cells(sets, {"a": values}, K)
    labelled = small_cells(sets, {"a": values}, K, identity)
    # Same number of small atoms (indices differ: atoms are numbered by occupancy).
    assert len(plain.get("a", [])) == len(labelled.get("a", []))


def test_refinement_then_table_is_refused(auditor: Auditor) -> None:
    values = np.r_[np.linspace(1, 9, 10), np.linspace(11, 19, 10)]
    auditor.admit_table("d", "age", None, [0.0, 3.0, 10.0, 20.0], {"all": values}, K,
                        labels={"all": [0, 0, 1]})
    with pytest.raises(DifferencingRefusal):
        auditor.admit_table("d", "age", None, [0.0, 3.0, 20.0], {"all": values}, K)
