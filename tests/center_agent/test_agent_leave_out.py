"""The rows a level leaves out beyond its own (``center_agent.data.leave_out``,
docs/privacy.md "No count in 1..K−1"): K - e more when e in 1..K-1 would be left out, of least
keyed rank; deterministic, the same whatever the rows' order, another key another choice; and the
version check compares each level's left-out rows (``gate.epochs``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from center_agent.core.config import DatasetConfig
from center_agent.data import Dataset
from center_agent.data.leave_out import dataset_key, least_ranked, macs
from center_agent.db import Store
from center_agent.gate.disclosure import Disclosure
from center_agent.gate.epochs import Epochs
from center_agent.gate.keys import population_secret
from tests.helpers import leave_out as ref
from tests.helpers.center import write_csv

K = 5


@pytest.fixture
def open_dataset() -> Iterator[Callable[..., Dataset]]:
    made: list[Dataset] = []

    def make(path: Path, *, secret: bytes = ref.SECRET, missing: str = "complete_cases",
             mode: str = "k_anonymous") -> Dataset:
        config = DatasetConfig.model_validate({
            "source": {"kind": "csv", "path": str(path)}, "variables": ["x", "y"],
            "group": {"column": "arm", "levels": ["a", "b"]}, "missing": missing,
            "release_mode": mode, "epsilon_total": 1.0})
        made.append(Dataset("d", config, K, secret=secret))
        return made[-1]

    yield make
    for dataset in made:
        dataset.source.close()


def rows_with(missing_a: int, n_a: int = 40, n_b: int = 30, seed: int = 1) -> pa.Table:
    """Arm a: ``n_a`` records, ``missing_a`` of them missing y; arm b: ``n_b``, none missing.
    Values on a coarse grid, so that equal records occur."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, n_a + n_b).astype(float)
    y = rng.integers(0, 4, n_a + n_b).astype(float)
    y[:missing_a] = np.nan
    arm = ["a"] * n_a + ["b"] * n_b
    return pa.table({"x": x, "y": pa.array(y, from_pandas=True), "arm": arm})


def contents(dataset: Dataset) -> dict[str, tuple[list[float], ...]]:
    """Each level's sorted values of x and of y (what releases read)."""
    population = dataset.population()
    return {level: (population.level("x", level).tolist(), population.level("y", level).tolist())
            for level in population.levels}


def columns(records: list[tuple[float, float]]) -> tuple[list[float], ...]:
    return sorted(r[0] for r in records), sorted(r[1] for r in records)


@pytest.mark.parametrize("missing", range(K + 3))
def test_a_level_leaves_out_zero_or_at_least_k(open_dataset: Callable[..., Dataset],
                                               tmp_path: Path, missing: int) -> None:
    population = open_dataset(write_csv(rows_with(missing), tmp_path / "d.csv")).population()
    left = population.left_out()
    assert left == {"a": missing if missing == 0 or missing >= K else K, "b": 0}
    assert population.sizes == {"a": 40 - left["a"], "b": 30}
    assert population.enrolled == {"a": 40, "b": 30}


def test_the_rows_left_out_are_the_reference_choice(open_dataset: Callable[..., Dataset],
                                                    tmp_path: Path) -> None:
    """3 of arm a miss y: exactly K - 3 = 2 complete ones more leave, those of least keyed rank
    by the per-record reference (its own MAC, record by record)."""
    table = rows_with(3)
    dataset = open_dataset(write_csv(table, tmp_path / "d.csv"))
    complete = [(x, y) for x, y, arm in zip(*(table.column(c).to_pylist() for c in
                                              ("x", "y", "arm")), strict=True)
                if arm == "a" and y is not None and not np.isnan(y)]
    kept = ref.fill_up(40, complete, K, ref.key_of("d"))
    assert kept is not None and len(kept) == len(complete) - 2
    assert contents(dataset)["a"] == columns(kept)


def test_the_choice_is_deterministic_and_the_same_in_any_row_order(
        open_dataset: Callable[..., Dataset], tmp_path: Path) -> None:
    table = rows_with(2)
    first = open_dataset(write_csv(table, tmp_path / "one.csv"))
    again = open_dataset(write_csv(table, tmp_path / "two.csv"))
    order = np.random.default_rng(7).permutation(table.num_rows)
    shuffled = open_dataset(write_csv(table.take(pa.array(order)), tmp_path / "three.csv"))
    assert contents(first) == contents(again) == contents(shuffled)
    assert (first.population().fingerprint == again.population().fingerprint
            == shuffled.population().fingerprint)


def test_another_key_leaves_out_other_rows(open_dataset: Callable[..., Dataset],
                                           tmp_path: Path) -> None:
    """Over a few keys, the two records left out differ: the choice is the key's, not a rule
    a caller could predict (like "the largest values")."""
    path = write_csv(rows_with(3, seed=3), tmp_path / "d.csv")
    chosen = {repr(contents(open_dataset(path, secret=bytes([i]) * 32))["a"])
              for i in range(6)}
    assert len(chosen) > 1


def test_equal_rows_tie_and_are_taken_in_order() -> None:
    key = dataset_key(b"s" * 32, "d")
    content = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, np.nan], [3.0, float("nan")]])
    mac = macs(key, content)
    assert mac[0].tobytes() == mac[1].tobytes() and mac[2].tobytes() == mac[3].tobytes()
    assert mac[0].tobytes() != mac[2].tobytes()
    for count in range(5):
        picked = least_ranked(key, content, count)
        assert picked.size == count
        expected = ref.least_ranked(key, [tuple(r) for r in content.tolist()], count)
        assert set(picked.tolist()) == expected
    with pytest.raises(ValueError, match="cannot leave out"):
        least_ranked(key, content, 5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.one_of(st.none(), st.integers(-2, 2))),
                min_size=1, max_size=30), st.integers(0, 30), st.binary(min_size=32,
                                                                          max_size=32))
def test_the_macs_are_the_per_record_reference(records: list[tuple[int, int | None]],
                                               count: int, secret: bytes) -> None:
    content = np.array([[x, np.nan if y is None else y] for x, y in records], dtype=float)
    key = dataset_key(secret, "d")
    for row, mac in zip(content.tolist(), macs(key, content), strict=True):
        assert ref.mac(key, row) == mac.tobytes()
    count = min(count, len(records))
    assert set(least_ranked(key, content, count).tolist()) == ref.least_ranked(
        key, [tuple(r) for r in content.tolist()], count)


def test_a_level_too_small_after_leaving_out_is_out_whole(
        open_dataset: Callable[..., Dataset], tmp_path: Path) -> None:
    """Arm a: 8 records, 2 missing y: 6 complete, K - 2 = 3 more would leave 3 < K: the level
    is out (its size 0 in /v1/info), never a size of 3."""
    population = open_dataset(write_csv(rows_with(2, n_a=8), tmp_path / "d.csv")).population()
    assert population.levels == ("b",) and population.excluded == ("a",)


@pytest.mark.parametrize("missing", [1, 3, K, K + 2])
def test_per_variable_missing_leaves_out_zero_or_at_least_k(
        open_dataset: Callable[..., Dataset], tmp_path: Path, missing: int) -> None:
    """``missing = "per_variable"``: the 1..K-1 records missing y leave (available cases) and
    K - e more with them; K or more missing stay, as a released missing count."""
    table = rows_with(missing)
    dataset = open_dataset(write_csv(table, tmp_path / "d.csv"), missing="per_variable")
    population = dataset.population()
    left = population.left_out()["a"]
    assert left == 0 or left >= K
    records = [(x, y) for x, y, arm in zip(*(table.column(c).to_pylist() for c in
                                             ("x", "y", "arm")), strict=True) if arm == "a"]
    expected = ref.per_variable(records, 2, K, ref.key_of("d"))
    assert expected is not None
    kept, withheld = expected
    assert not withheld and population.sizes["a"] == len(kept)
    assert population.level("y", "a").tolist() == sorted(
        y for _, y in kept if y is not None and not np.isnan(y))
    assert population.missing("y", "a") in (0, *range(K, 41))


def test_dp_mode_leaves_out_no_more(open_dataset: Callable[..., Dataset],
                                    tmp_path: Path) -> None:
    """DP mode has no K rule: a row's membership is a function of that row alone."""
    population = open_dataset(write_csv(rows_with(3), tmp_path / "d.csv"),
                              mode="dp").population()
    assert population.sizes == {"a": 37, "b": 30} and population.enrolled is None


def test_the_secret_is_kept_in_the_ledger(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'l.sqlite'}")
    try:
        secret = population_secret(store)
        assert len(secret) == 32 and population_secret(store) == secret
    finally:
        store.close()
    assert ref.ledger_secret(tmp_path / "l.sqlite") == secret


# -- the version check --------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    made = Store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    made.ensure_budgets({"d": 1.0})
    yield made
    made.close()


def epochs() -> Epochs:
    return Epochs(K, Disclosure(K, max_releases=100, max_limits=1000))


def test_a_change_of_the_rows_left_out_by_1_to_k_minus_1_fails_the_check(
        open_dataset: Callable[..., Dataset], store: Store, tmp_path: Path) -> None:
    """Arm a leaves out K (its size 35 of 40); 2 records added, both missing y: its size stays
    35 (no release changes) but its left-out rows go to K + 2 — a public enrolment of 42 would
    tell 2 new records missing a value. Then K added, all complete: left out unchanged."""
    path = tmp_path / "d.csv"
    write_csv(rows_with(K), path)
    gate = epochs()
    with store.locked("d") as (conn, _t, _s):
        first = gate.admit(conn, "d", open_dataset(path).population())
        assert first.enrolled == {"a": 40, "b": 30}
    added = pa.table({"x": [1.0, 2.0], "y": pa.array([None, None], pa.float64()),
                      "arm": ["a", "a"]})
    write_csv(pa.concat_tables([rows_with(K), added]), path)
    grown = open_dataset(path).population()
    assert grown.sizes == {"a": 35, "b": 30} and grown.left_out() == {"a": K + 2, "b": 0}
    with store.locked("d") as (conn, _t, _s):
        problems = gate.check(conn, "d", grown)
    assert "epoch 1: the rows left out of level 'a' changed by +2" in problems
    assert "epoch 1: the rows left out of all levels changed by +2" in problems
    complete = pa.table({"x": [float(i) + 0.5 for i in range(K)], "y": [1.0] * K,
                         "arm": ["a"] * K})
    write_csv(pa.concat_tables([rows_with(K), complete]), path)
    with store.locked("d") as (conn, _t, _s):
        problems = gate.check(conn, "d", open_dataset(path).population())
    assert not [p for p in problems if "left out" in p], problems


def test_an_epoch_without_enrolled_rows_is_unknown_until_the_operator_rolls(
        open_dataset: Callable[..., Dataset], store: Store, tmp_path: Path) -> None:
    """A ledger from before enrolled rows were kept: its epoch is not taken for unchanged. The
    check fails against it (the change is held) until the operator's epoch keeps them; later
    checks compare through that epoch."""
    path = tmp_path / "d.csv"
    write_csv(rows_with(0), path)
    gate = epochs()
    with store.locked("d") as (conn, _t, _s):
        gate.admit(conn, "d", open_dataset(path).population())
        conn.execute(sa.text("UPDATE fedstats_epoch SET enrolled = NULL"))
    more = pa.table({"x": [float(i) for i in range(K)], "y": [1.0] * K, "arm": ["b"] * K})
    write_csv(pa.concat_tables([rows_with(0), more]), path)
    grown = open_dataset(path).population()
    with store.locked("d") as (conn, _t, _s):
        problems = gate.check(conn, "d", grown)
        assert any("enrolled rows were not kept" in p for p in problems), problems
        epoch, problems = gate.roll(conn, "d", grown)
        assert epoch is None and problems
        epoch, _ = gate.roll(conn, "d", grown, force=True)
        assert epoch is not None and epoch.enrolled == {"a": 40, "b": 30 + K}
        stored = conn.execute(sa.text("SELECT enrolled FROM fedstats_epoch WHERE epoch = 2"))
        assert json.loads(stored.scalar_one()) == {"a": 40, "b": 30 + K}
    write_csv(pa.concat_tables([rows_with(0), more, more]), path)
    with store.locked("d") as (conn, _t, _s):
        assert gate.check(conn, "d", open_dataset(path).population()) == []


def test_an_older_ledger_gets_the_enrolled_column(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE fedstats_epoch (dataset VARCHAR(128) NOT NULL, epoch INTEGER NOT NULL, "
            "fingerprint VARCHAR(64) NOT NULL, sizes TEXT NOT NULL, present TEXT, "
            "reason VARCHAR(32) NOT NULL, started_at DATETIME NOT NULL, "
            "PRIMARY KEY (dataset, epoch))")
        conn.exec_driver_sql(
            "INSERT INTO fedstats_epoch VALUES ('d', 1, 'f', '{\"a\": 10}', NULL, 'first', "
            "'2026-01-01 00:00:00')")
    engine.dispose()
    store = Store(url)
    try:
        store.ensure_budgets({"d": 1.0})
        with store.locked("d") as (conn, _t, _s):
            (old,) = epochs().all(conn, "d")
        assert old.enrolled is None and old.sizes == {"a": 10}
    finally:
        store.close()
