"""Data sources: CSV, Parquet, SQLite and PostgreSQL give the same arrays under one policy."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from center_helpers import K, make_table, write_csv, write_parquet, write_sql

from center_agent.core.config import DatasetConfig
from center_agent.core.errors import DataSourceError, UnknownVariable
from center_agent.data import Dataset, Sample, dropped_report, round_down

TABLE = make_table()


@pytest.fixture
def open_dataset() -> Iterator[Callable[..., Dataset]]:
    """Datasets made in a test, their sources closed afterwards whatever happens."""
    made: list[Dataset] = []

    def make(config: DatasetConfig, name: str = "cohort") -> Dataset:
        made.append(Dataset(name, config))
        return made[-1]

    yield make
    for dataset in made:
        dataset.source.close()


def _config(source: dict[str, Any], levels: Sequence[str] = ("a", "b")) -> DatasetConfig:
    return DatasetConfig.model_validate(
        {
            "source": source,
            "variables": ["x", "y"],
            "group": {"column": "arm", "levels": list(levels)},
            "epsilon_total": 1.0,
        }
    )


def _expected(variable: str, grouped: bool) -> tuple[list[tuple[str, float]], int]:
    """The policy applied row by row, as a plain reference (the code under test is vectorized)."""
    rows = TABLE.to_pylist()
    kept, dropped = [], 0
    for row in rows:
        v, g = row[variable], row["arm"]
        finite = v is not None and np.isfinite(v)
        if not grouped:
            kept += [("", v)] if finite else []
            dropped += not finite
        elif g is None:
            dropped += 1
        elif g in ("a", "b"):
            kept += [(g, v)] if finite else []
            dropped += not finite
    return sorted(kept), dropped


def _pairs(sample: Sample) -> list[tuple[str, float]]:
    labels = sample.groups if sample.groups is not None else [""] * sample.values.size
    return sorted(zip((str(g) for g in labels), sample.values.tolist(), strict=True))


@pytest.fixture(params=["csv", "parquet", "sqlite-table", "sqlite-query", "pg-table", "pg-query"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    kind = request.param
    if kind == "csv":
        return {"kind": "csv", "path": str(write_csv(TABLE, tmp_path / "d.csv"))}
    if kind == "parquet":
        return {"kind": "parquet", "path": str(write_parquet(TABLE, tmp_path / "d.parquet"))}
    if kind.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    else:
        url = request.getfixturevalue("pg_url")
    write_sql(TABLE, url, "cohort_rows")
    if kind.endswith("table"):
        return {"kind": "sql", "url": url, "table": "cohort_rows"}
    return {"kind": "sql", "url": url, "query": "SELECT x, y, arm FROM cohort_rows WHERE 1 = 1"}


@pytest.mark.parametrize("variable", ["x", "y"])
@pytest.mark.parametrize("grouped", [False, True])
def test_every_source_gives_the_same_arrays(
    open_dataset: Callable[..., Dataset], source: dict[str, Any], variable: str, grouped: bool
) -> None:
    dataset = open_dataset(_config(source), "cohort")
    sample = dataset.load(variable, "arm" if grouped else None)
    expected, dropped = _expected(variable, grouped)
    assert sample.values.dtype == np.float64
    assert np.isfinite(sample.values).all()
    assert _pairs(sample) == expected
    assert sample.n_dropped == dropped
    if grouped:
        assert sample.groups is not None and set(sample.groups.tolist()) <= {"a", "b"}
        assert sample.levels == ("a", "b")
        parts = sample.by_group()
        assert sorted(parts) == ["a", "b"]
        assert sum(p.size for p in parts.values()) == sample.values.size
    else:
        assert sample.groups is None


def test_sizes_count_rows_and_declared_levels(
    open_dataset: Callable[..., Dataset], source: dict[str, Any]
) -> None:
    dataset = open_dataset(_config(source), "cohort")
    n, by_group = dataset.sizes()
    arm = TABLE.column("arm").to_pylist()
    assert n == TABLE.num_rows
    assert by_group == {"a": arm.count("a"), "b": arm.count("b")}


def test_only_the_needed_columns_are_read(
    open_dataset: Callable[..., Dataset], source: dict[str, Any]
) -> None:
    dataset = open_dataset(_config(source), "cohort")
    seen: list[list[str]] = []
    read = dataset.source.read

    def spy(columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        seen.append(list(columns))
        table = read(columns, text=text)
        assert table.column_names == list(columns)
        return table

    dataset.source.read = spy  # type: ignore[method-assign]
    dataset.load("y")
    dataset.load("x", "arm")
    if dataset.source.version() is None:  # a database: both columns in one query
        assert seen == [["y"], ["x", "arm"]]
    else:  # a file: the group column's codes are kept apart from the variables
        assert seen == [["y"], ["arm"], ["x"]]


def test_undeclared_names_never_reach_the_source(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_csv(TABLE, tmp_path / "d.csv")
    dataset = open_dataset(_config({"kind": "csv", "path": str(path)}), "cohort")
    dataset.source.read = None  # type: ignore[assignment,method-assign]  # any read would fail
    for variable in ("notes", "arm", "x; DROP TABLE cohort_rows", 'x" --'):
        with pytest.raises(UnknownVariable):
            dataset.load(variable)
    with pytest.raises(UnknownVariable):
        dataset.load("x", "y")  # only the declared group column groups


def test_sql_identifiers_are_quoted_not_formatted(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """A (declared) column named like an SQL keyword is read as a column, not as SQL."""
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql('CREATE TABLE "select" ("order" REAL, "group" INTEGER)')
        conn.exec_driver_sql('INSERT INTO "select" VALUES (1.5, 1), (2.5, 2), (NULL, 1)')
    engine.dispose()
    config = DatasetConfig.model_validate(
        {
            "source": {"kind": "sql", "url": url, "table": "select"},
            "variables": ["order"],
            "group": {"column": "group", "levels": ["1", "2"]},  # integer labels, text levels
            "epsilon_total": 1.0,
        }
    )
    dataset = open_dataset(config, "d")
    dataset.check_columns()
    sample = dataset.load("order", "group")
    assert sample.values.tolist() == [1.5, 2.5]
    assert sample.groups is not None and sample.groups.tolist() == ["1", "2"]
    assert sample.n_dropped == 1


def test_sql_integer_and_decimal_columns_become_floats(
    open_dataset: Callable[..., Dataset], pg_url: str
) -> None:
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE typed (i INTEGER, d NUMERIC(6, 2), g TEXT)")
        conn.exec_driver_sql(
            "INSERT INTO typed VALUES (1, 1.25, 'a'), (2, NULL, 'b'), (NULL, 'NaN', 'a')"
        )
    engine.dispose()
    config = DatasetConfig.model_validate(
        {
            "source": {"kind": "sql", "url": pg_url, "table": "typed"},
            "variables": ["i", "d"],
            "epsilon_total": 1.0,
        }
    )
    dataset = open_dataset(config, "d")
    assert dataset.load("i").values.tolist() == [1.0, 2.0]
    d = dataset.load("d")
    assert d.values.tolist() == [1.25] and d.n_dropped == 2


def test_declared_column_missing_from_the_source_fails_at_start(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_csv(TABLE.drop_columns(["y"]), tmp_path / "d.csv")
    dataset = open_dataset(_config({"kind": "csv", "path": str(path)}), "cohort")
    with pytest.raises(DataSourceError, match=r"\['y'\]"):
        dataset.check_columns()


def test_a_text_variable_is_a_data_source_error(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = tmp_path / "d.csv"
    path.write_text("x,y,arm\n1,oops,a\n2,3,b\n")
    dataset = open_dataset(_config({"kind": "csv", "path": str(path)}), "cohort")
    with pytest.raises(DataSourceError) as info:
        dataset.load("y")
    assert str(path) not in info.value.detail


def test_dropped_count_is_reported_only_if_zero_or_at_least_k() -> None:
    assert dropped_report(0, K) == 0
    assert [dropped_report(n, K) for n in range(1, K)] == ["<K"] * (K - 1)
    assert dropped_report(K, K) == K
    assert dropped_report(123, K) == 123


def test_round_down() -> None:
    assert [round_down(n, 10) for n in (0, 9, 10, 157)] == [0, 0, 10, 150]


def _counting_reads(dataset: Dataset) -> list[list[str]]:
    seen: list[list[str]] = []
    read = dataset.source.read

    def spy(columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        seen.append(list(columns))
        return read(columns, text=text)

    dataset.source.read = spy  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_file_is_read_once_until_it_changes(
    open_dataset: Callable[..., Dataset], tmp_path: Path, kind: str
) -> None:
    path = tmp_path / f"d.{kind}"
    write = write_csv if kind == "csv" else write_parquet
    write(TABLE, path)
    dataset = open_dataset(_config({"kind": kind, "path": str(path)}))
    seen = _counting_reads(dataset)
    first = dataset.load("x", "arm")
    assert dataset.load("x", "arm") is first
    assert dataset.sizes() == dataset.sizes()  # from the kept group codes
    dataset.load("y")
    assert seen == [["arm"], ["x"], ["y"]]
    with pytest.raises(ValueError, match="read-only"):
        first.by_group()["a"][0] = 0.0  # shared between requests: nobody may change it

    smaller = TABLE.slice(0, TABLE.num_rows - 7)  # a rewritten file: new size, new version
    write(smaller, path)
    again = dataset.load("x", "arm")
    assert seen[-2:] == [["arm"], ["x"]] and again is not first
    assert again.values.size < first.values.size


def test_a_database_is_read_on_every_request(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    write_sql(TABLE, url, "cohort_rows")
    dataset = open_dataset(_config({"kind": "sql", "url": url, "table": "cohort_rows"}))
    seen = _counting_reads(dataset)
    dataset.load("x")
    dataset.load("x")
    assert seen == [["x"], ["x"]]


def test_concurrent_requests_read_once(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_parquet(TABLE, tmp_path / "d.parquet")
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    seen = _counting_reads(dataset)
    with ThreadPoolExecutor(8) as pool:
        samples = list(pool.map(lambda _: dataset.load("x", "arm"), range(16)))
    assert seen == [["arm"], ["x"]]
    assert all(s is samples[0] for s in samples)


def test_parquet_row_groups_give_the_same_arrays(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """Many row groups: the labels come as several dictionary-encoded chunks."""
    path = tmp_path / "d.parquet"
    pq.write_table(TABLE, path, row_group_size=20)
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    sample = dataset.load("y", "arm")
    assert _pairs(sample) == _expected("y", True)[0]
    assert sample.n_dropped == _expected("y", True)[1]
    arm = TABLE.column("arm").to_pylist()
    assert dataset.sizes() == (TABLE.num_rows, {"a": arm.count("a"), "b": arm.count("b")})


def test_a_file_changed_between_two_reads_is_read_again_as_one(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """The kept group codes and a variable read later must come from one version of the file:
    if the version moved meanwhile, both columns are read again in one read."""
    path = write_parquet(TABLE, tmp_path / "d.parquet")
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    dataset.sizes()  # the codes are kept
    versions = iter(range(100))
    dataset.source.version = lambda: next(versions)  # type: ignore[method-assign]
    seen = _counting_reads(dataset)
    sample = dataset.load("x", "arm")
    assert seen[-1] == ["x", "arm"]
    assert _pairs(sample) == _expected("x", True)[0]
