"""Disclosure control and data versions: atoms against a per-record reference, admission by
coarsening (never by refusing), caps decided from earlier releases, the memory kept in SQLite
and PostgreSQL, the version check of a new epoch."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from center_agent.core.errors import DataChanged, DisclosureStateFull, HistoryNotSafe
from center_agent.data import Population
from center_agent.db import Store
from center_agent.gate.disclosure import (
    Disclosure,
    Partition,
    Snapshot,
    atoms,
    cell_counts,
    edges_of,
    small,
)
from center_agent.gate.epochs import Epochs
from center_agent.gate.kinds import limits_to_drop

K = 10


def population(values: Mapping[str, list[float]], variable: str = "v") -> Population:
    """A population of one variable from plain lists (sorted, read-only, as a center keeps it)."""
    arrays = {level: np.sort(np.asarray(v, dtype=np.float64)) for level, v in values.items()}
    for a in arrays.values():
        a.flags.writeable = False
    fingerprint = "-".join(f"{lv}:{a.tobytes().hex()}" for lv, a in sorted(arrays.items()))
    import hashlib

    return Population(levels=tuple(arrays), excluded=(), values={variable: arrays},
                      fingerprint=hashlib.sha256(fingerprint.encode()).hexdigest())


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = (f"sqlite:///{tmp_path / 'ledger.sqlite'}" if request.param == "sqlite"
           else request.getfixturevalue("pg_url"))
    s = Store(url)
    s.ensure_budgets({"d": 1.0})
    yield s
    s.close()


@dataclass(frozen=True)
class Bins:
    """A candidate table for the tests: coarsened by merging the bins holding bad cells."""

    partition: Partition

    def coarsen(self, bad: Mapping[str, np.ndarray]) -> Bins:
        inner = self.partition.interior
        if inner.size == 0:
            raise HistoryNotSafe("d")
        cells = np.unique(np.concatenate(list(bad.values())))
        keep = np.ones(inner.size, dtype=bool)
        keep[limits_to_drop(cells, inner.size)] = False
        return Bins(Partition.bins(inner[keep], list(self.partition.labels),
                                   self.partition.pooled))


def admit(store: Store, pop: Population, partition: Partition, key: str,
          disclosure: Disclosure | None = None) -> Partition:
    disclosure = disclosure or Disclosure(K, max_releases=64, max_limits=100_000)
    with store.locked("d") as (conn, _t, _s):
        out = disclosure.admit(conn, dataset="d", variable="v", epoch=1, population=pop,
                               candidate=Bins(partition), request_key=key)
    return out.partition


# -- a per-record reference --------------------------------------------------------------------


def reference_atoms(partitions: list[Partition], values: Mapping[str, list[float]]
                    ) -> Counter[tuple[object, ...]]:
    """Records sharing the released set of every partition, counted one record at a time."""
    counter: Counter[tuple[object, ...]] = Counter()
    for level, vs in values.items():
        for v in vs:
            key = []
            for p in partitions:
                if level not in p.labels:
                    key.append(None)
                    continue
                cell = int(np.sum(p.interior < v))  # right-closed cells
                label = int(p.labels[level][cell])
                key.append(("*", label) if p.pooled else (level, label))
            counter[tuple(key)] += 1
    return counter


@st.composite
def releases(draw: st.DrawFn) -> tuple[dict[str, list[float]], list[Partition]]:
    values = {level: draw(st.lists(st.integers(0, 30).map(float), min_size=0, max_size=40))
              for level in ("a", "b", "c")}
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        cuts = sorted(set(draw(st.lists(st.integers(0, 30), max_size=8))))
        inner = np.asarray(cuts, dtype=np.float64) + 0.5
        levels = draw(st.sampled_from([("a",), ("a", "b"), ("a", "b", "c"), ("b", "c")]))
        pooled = draw(st.booleans())
        labels = {}
        shared = np.asarray(draw(st.lists(st.integers(0, 3), min_size=inner.size + 1,
                                          max_size=inner.size + 1)), dtype=np.int64)
        for level in levels:
            labels[level] = shared if pooled else np.asarray(
                draw(st.lists(st.integers(0, 3), min_size=inner.size + 1,
                              max_size=inner.size + 1)), dtype=np.int64)
        parts.append(Partition(inner, labels, pooled))
    return values, parts


@pytest.mark.slow  # a Hypothesis property over many examples: seconds, for the CI run
@settings(max_examples=200, deadline=None)
@given(case=releases())
def test_atoms_match_a_per_record_reference(case: tuple[dict[str, list[float]], list[Partition]]
                                            ) -> None:
    values, parts = case
    levels = ("a", "b", "c")
    pop = population({lv: values[lv] for lv in levels})
    edges = edges_of(parts)
    key = atoms(parts, levels, edges)
    counts = cell_counts(pop, "v", levels, edges)
    totals = Counter()
    for i in range(len(levels)):
        for j in range(edges.size + 1):
            totals[int(key[i, j])] += int(counts[i, j])
    found = sorted(n for n in totals.values() if n)
    expected = sorted(n for n in reference_atoms(parts, values).values() if n)
    assert found == expected
    flagged = small(key, counts, K)
    assert bool(flagged[counts > 0].any()) == any(0 < n < K for n in expected)


def test_cells_are_right_closed() -> None:
    pop = population({"a": [5, 10, 10.5, 20, 21, 100]})
    counts = cell_counts(pop, "v", ("a",), np.array([10.0, 20.0]))
    assert counts.tolist() == [[2, 2, 2]]  # (-inf, 10], (10, 20], (20, inf)


# -- admission ---------------------------------------------------------------------------------

A = [float(v) for v in range(1, 31)]  # 30 records: 1, 2, ..., 30


def test_a_table_shifted_by_one_record_is_coarsened_not_refused(store: Store) -> None:
    """{0, 10, 20, 30} then {0, 11, 20, 30}: the difference of the first cells is one record.
    The second table is admitted without the limit that would isolate it."""
    pop = population({"a": A})
    first = admit(store, pop, Partition.bins([10.0, 20.0], ["a"]), "t1")
    assert first.interior.tolist() == [10.0, 20.0]
    second = admit(store, pop, Partition.bins([11.0, 20.0], ["a"]), "t2")
    assert second.interior.tolist() == [20.0]
    released = [first, second]
    assert not [n for n in reference_atoms(released, {"a": A}).values() if 0 < n < K]


def test_pooled_and_per_level_releases_are_combined(store: Store) -> None:
    """An ungrouped table and a grouped one, limits one record apart: the atoms combine levels
    (before the release gate, 'all' was a group of its own and this passed)."""
    values = {"a": A, "b": [v + 0.25 for v in A]}
    pop = population(values)
    pooled = admit(store, pop, Partition.bins([15.0], ["a", "b"], pooled=True), "p")
    grouped = admit(store, pop, Partition.bins([15.5], ["a", "b"]), "g")
    released = [pooled, grouped]
    assert not [n for n in reference_atoms(released, values).values() if 0 < n < K]
    assert grouped.interior.size == 0  # 15.5 would cut one record of b out of the pooled cell


def test_unsafe_history_is_named_not_coarsened_for_ever(store: Store) -> None:
    """Only after an operator forces an epoch over data that fail the check can the history
    itself hold a small atom; then the center refuses (409) instead of looping."""
    pop = population({"a": A})
    admit(store, pop, Partition.bins([10.0, 20.0], ["a"]), "t1")
    fewer = population({"a": A[:27]})  # three records gone: (20, inf) holds 7
    with pytest.raises(HistoryNotSafe):
        admit(store, fewer, Partition.bins([], ["a"]), "t2")


def test_caps_are_decided_from_earlier_releases(store: Store) -> None:
    pop = population({"a": A * 10})
    disclosure = Disclosure(K, max_releases=3, max_limits=5)
    admit(store, pop, Partition.bins([10.5], ["a"]), "r1", disclosure)
    admit(store, pop, Partition.bins([10.5, 20.5], ["a"]), "r2", disclosure)
    with pytest.raises(DisclosureStateFull, match="max_limits_per_variable"):
        admit(store, pop, Partition.bins([5.5, 15.5, 25.5], ["a"]), "r3", disclosure)
    admit(store, pop, Partition.bins([5.5], ["a"]), "r3", disclosure)
    with pytest.raises(DisclosureStateFull, match="max_releases_per_variable"):
        admit(store, pop, Partition.bins([], ["a"]), "r4", disclosure)


def test_concurrent_admissions_see_each_other(store: Store) -> None:
    """Two conflicting tables admitted at once: the dataset's lock serializes them, so the
    second is coarsened against the first (never both admitted blind)."""
    pop = population({"a": A})
    barrier = threading.Barrier(2)

    def go(limit: float) -> Partition:
        barrier.wait()
        return admit(store, pop, Partition.bins([limit, 20.0], ["a"]), f"t{limit}")

    with ThreadPoolExecutor(2) as pool:
        released = list(pool.map(go, [10.0, 11.0]))
    assert not [n for n in reference_atoms(released, {"a": A}).values() if 0 < n < K]


def test_partitions_and_snapshots_round_trip() -> None:
    p = Partition(np.array([1.5, 2.5]), {"a": np.array([0, 0, 1]), "b": np.array([0, 1, 1])},
                  pooled=False)
    q = Partition.from_bytes(p.to_bytes())
    assert q.interior.tolist() == [1.5, 2.5] and q.pooled is False
    assert {lv: v.tolist() for lv, v in q.labels.items()} == {"a": [0, 0, 1], "b": [0, 1, 1]}
    snap = Snapshot(("a", "b"), np.array([1.0]), np.array([[0, 1], [2, 1]]),
                    np.array([10, 20, 30]))
    back = Snapshot.from_bytes(snap.to_bytes())
    assert back.levels == ("a", "b") and back.key.tolist() == [[0, 1], [2, 1]]
    assert back.totals.tolist() == [10, 20, 30]


# -- data versions -----------------------------------------------------------------------------


def epochs_for(store: Store) -> Epochs:
    return Epochs(K, Disclosure(K, max_releases=64, max_limits=100_000))


def test_an_epoch_pins_its_data_and_a_change_is_checked(store: Store) -> None:
    pop = population({"a": A, "b": A})
    epochs = epochs_for(store)
    with store.locked("d") as (conn, _t, _s):
        first = epochs.admit(conn, "d", pop)
        assert first.number == 1 and epochs.admit(conn, "d", pop) == first
    admit(store, pop, Partition.bins([15.5], ["a", "b"]), "t")
    one_more = population({"a": [*A, 7.0], "b": A})
    with store.locked("d") as (conn, _t, _s):
        problems = epochs.check(conn, "d", one_more)
        assert any("level 'a' changed by +1" in p for p in problems)
        assert any("changed by 1..K-1" in p for p in problems)
        # The change is held: this process answers from the epoch's population ...
        held, answering = epochs.admit_population(conn, "d", one_more)
        assert held == first and answering is pop
        # ... which a process started since the change does not hold: it pauses.
        with pytest.raises(DataChanged) as paused:
            epochs_for(store).admit(conn, "d", one_more)
        assert "I corrected a value: what now?" in paused.value.detail
    block = population({"a": [*A, *[7.0] * K], "b": A})  # K records in one released cell
    with store.locked("d") as (conn, _t, _s):
        assert epochs.check(conn, "d", block) == []
        assert epochs.admit(conn, "d", block).number == 2


def test_the_operator_rolls_only_a_clean_check_unless_forced(store: Store) -> None:
    pop = population({"a": A})
    epochs = epochs_for(store)
    with store.locked("d") as (conn, _t, _s):
        epochs.admit(conn, "d", pop)
    changed = population({"a": A[:-1]})
    with store.locked("d") as (conn, _t, _s):
        new, problems = epochs.roll(conn, "d", changed)
        assert new is None and problems
        forced, again = epochs.roll(conn, "d", changed, force=True)
        assert forced is not None and forced.number == 2 and again == problems
        assert forced.reason == "operator, forced"
