"""Data sources and the one population: CSV, Parquet, SQLite and PostgreSQL give the same
population under one rule (complete cases of declared levels holding at least K rows)."""

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

from center_agent.core.config import DatasetConfig
from center_agent.core.errors import DataSourceError, KAnonymityRefusal, UnknownVariable
from center_agent.data import ALL, Dataset, Population, round_down
from tests.helpers.center import K, make_table, write_csv, write_parquet, write_sql
from tests.helpers.leave_out import SECRET, fill_up, key_of

TABLE = make_table()


@pytest.fixture
def open_dataset() -> Iterator[Callable[..., Dataset]]:
    """Datasets made in a test, their sources closed afterwards whatever happens."""
    made: list[Dataset] = []

    def make(config: DatasetConfig, name: str = "cohort", k: int = K) -> Dataset:
        made.append(Dataset(name, config, k, secret=SECRET))
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


def _expected(table: pa.Table = TABLE, levels: Sequence[str] = ("a", "b"),
              k: int = K) -> dict[str, dict[str, list[float]]]:
    """The population rule applied row by row, as a plain reference (the code is vectorized):
    complete rows, a level leaving 1..K-1 rows out leaving K - e more (tests.helpers.leave_out),
    a level of fewer than K out."""
    kept: dict[str, list[tuple[float, float]]] = {level: [] for level in levels}
    labelled = dict.fromkeys(levels, 0)
    for row in table.to_pylist():
        x, y, g = row["x"], row["y"], row["arm"]
        complete = all(v is not None and np.isfinite(v) for v in (x, y))
        if g in kept:
            labelled[g] += 1
            if complete:
                kept[g].append((x, y))
    filled = {g: fill_up(labelled[g], rows, k, key_of("cohort")) for g, rows in kept.items()}
    included = {g: rows for g, rows in filled.items() if rows is not None}
    return {variable: {g: sorted(r[i] for r in rows) for g, rows in included.items()}
            for i, variable in enumerate(("x", "y"))}


def _as_lists(population: Population) -> dict[str, dict[str, list[float]]]:
    return {v: {g: arr.tolist() for g, arr in parts.items()}
            for v, parts in population.values.items()}


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


def test_every_source_gives_the_same_population(
    open_dataset: Callable[..., Dataset], source: dict[str, Any]
) -> None:
    population = open_dataset(_config(source)).population()
    assert population.levels == ("a", "b")
    assert _as_lists(population) == _expected()
    for parts in population.values.values():
        for values in parts.values():
            assert values.dtype == np.float64 and np.isfinite(values).all()
    # One population: every variable has the same sizes, and the pooled values are the levels'.
    assert population.sizes == {g: len(v) for g, v in _expected()["x"].items()}
    pooled = sorted(v for vs in _expected()["y"].values() for v in vs)
    assert population.pooled("y").tolist() == pooled


def test_a_level_with_fewer_than_k_rows_is_left_out(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """Three complete rows of level b: b is not in the population, so no release of any kind
    (ungrouped totals included) counts them; its /v1/info size is 0 and it is refused."""
    path = tmp_path / "small.csv"
    path.write_text("x,y,arm\n" + "".join(
        f"{i},{i},{'b' if i < 3 else 'a'}\n" for i in range(25)))
    dataset = open_dataset(_config({"kind": "csv", "path": str(path)}))
    population = dataset.population()
    assert population.levels == ("a",) and population.excluded == ("b",)
    assert population.n == 22 and population.pooled("x").size == 22
    with pytest.raises(KAnonymityRefusal, match="level 'b'"):
        dataset.require(population, "b", K)
    dataset.require(population, "a", K)
    with pytest.raises(KAnonymityRefusal, match="fewer than K = 30"):
        dataset.require(population, None, 30)  # its public size, 20, is below 30


def test_without_a_group_column_one_level_holds_every_complete_row(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_csv(TABLE, tmp_path / "d.csv")
    config = DatasetConfig.model_validate({"source": {"kind": "csv", "path": str(path)},
                                           "variables": ["x"], "epsilon_total": 1.0})
    population = open_dataset(config).population()
    assert population.levels == (ALL,)
    assert population.n == sum(v is not None for v in TABLE.column("x").to_pylist())


def test_the_fingerprint_follows_the_content_not_the_file(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = tmp_path / "d.parquet"
    write_parquet(TABLE, path)
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    first = dataset.population().fingerprint
    write_parquet(TABLE.take(np.random.default_rng(1).permutation(TABLE.num_rows)), path)
    assert dataset.population().fingerprint == first  # rows in another order: the same data
    x = TABLE.column("x").to_numpy().copy()
    x[10] += 0.001
    write_parquet(TABLE.set_column(0, "x", pa.array(x)), path)
    assert dataset.population().fingerprint != first  # one value moved


def test_only_declared_columns_are_read_in_one_read(
    open_dataset: Callable[..., Dataset], source: dict[str, Any]
) -> None:
    dataset = open_dataset(_config(source))
    seen = _counting_reads(dataset)
    dataset.population()
    assert seen[0] == ["x", "y", "arm"]


def test_undeclared_names_never_reach_the_source(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_csv(TABLE, tmp_path / "d.csv")
    dataset = open_dataset(_config({"kind": "csv", "path": str(path)}), "cohort")
    for variable in ("notes", "arm", "x; DROP TABLE cohort_rows", 'x" --'):
        with pytest.raises(UnknownVariable):
            dataset.check_variable(variable)


def test_sql_identifiers_are_quoted_not_formatted(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """A (declared) column named like an SQL keyword is read as a column, not as SQL."""
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    engine = sa.create_engine(url)
    rows = ", ".join(f"({i + 0.5}, {1 + i % 2})" for i in range(40))
    with engine.begin() as conn:
        conn.exec_driver_sql('CREATE TABLE "select" ("order" REAL, "group" INTEGER)')
        conn.exec_driver_sql(f'INSERT INTO "select" VALUES {rows}, (NULL, 1)')
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
    population = dataset.population()
    # Level "1" leaves its one NULL row out, and K - 1 more of its rows with it (the rows a
    # level leaves out number 0 or >= K): 21 rows, 11 counted.
    assert population.sizes == {"1": 11, "2": 20}
    assert population.level("order", "2").tolist() == [i + 0.5 for i in range(1, 40, 2)]


def test_sql_integer_and_decimal_columns_become_floats(
    open_dataset: Callable[..., Dataset], pg_url: str
) -> None:
    engine = sa.create_engine(pg_url)
    values = ", ".join(f"({i}, {i}.25, 'a')" for i in range(12))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE typed (i INTEGER, d NUMERIC(6, 2), g TEXT)")
        conn.exec_driver_sql(
            f"INSERT INTO typed VALUES {values}, (2, NULL, 'b'), (NULL, 'NaN', 'a')"
        )
    engine.dispose()
    config = DatasetConfig.model_validate(
        {
            "source": {"kind": "sql", "url": pg_url, "table": "typed"},
            "variables": ["i", "d"],
            "epsilon_total": 1.0,
        }
    )
    population = open_dataset(config, "d").population()
    assert population.level("i", ALL).tolist() == [float(i) for i in range(12)]
    assert population.level("d", ALL).tolist() == [i + 0.25 for i in range(12)]


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
        dataset.population()
    assert str(path) not in info.value.detail


def test_round_down() -> None:
    assert [round_down(n, 10) for n in (0, 9, 10, 157)] == [0, 0, 10, 150]


def _counting_reads(dataset: Dataset) -> list[list[str]]:
    seen: list[list[str]] = []
    read = dataset.source.read

    def spy(columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        seen.append(list(columns))
        table = read(columns, text=text)
        assert table.column_names == list(columns)
        return table

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
    first = dataset.population()
    assert dataset.population() is first
    assert len(seen) == 1
    with pytest.raises(ValueError, match="read-only"):
        first.level("x", "a")[0] = 0.0  # shared between requests: nobody may change it

    smaller = TABLE.slice(0, TABLE.num_rows - 7)  # a rewritten file: new size, new version
    write(smaller, path)
    again = dataset.population()
    assert len(seen) == 2 and again is not first
    assert again.n < first.n


def test_a_database_with_ttl_0_is_read_on_every_request(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """``version_ttl_s = 0`` without a version query: the operator's choice to keep nothing
    (the kept cases are in test_agent_sql_versions.py)."""
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    write_sql(TABLE, url, "cohort_rows")
    dataset = open_dataset(_config({"kind": "sql", "url": url, "table": "cohort_rows",
                                     "version_ttl_s": 0}))
    seen = _counting_reads(dataset)
    dataset.population()
    dataset.population()
    assert len(seen) == 2


def test_concurrent_requests_read_once(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    path = write_parquet(TABLE, tmp_path / "d.parquet")
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    seen = _counting_reads(dataset)
    with ThreadPoolExecutor(8) as pool:
        populations = list(pool.map(lambda _: dataset.population(), range(16)))
    assert len(seen) == 1
    assert all(p is populations[0] for p in populations)


def test_parquet_row_groups_give_the_same_population(
    open_dataset: Callable[..., Dataset], tmp_path: Path
) -> None:
    """Many row groups: the labels come as several dictionary-encoded chunks."""
    path = tmp_path / "d.parquet"
    pq.write_table(TABLE, path, row_group_size=20)
    dataset = open_dataset(_config({"kind": "parquet", "path": str(path)}))
    assert _as_lists(dataset.population()) == _expected()


# -- PostgreSQL: COPY ... TO STDOUT read by Arrow, the same table as fetched rows -----------------

def _tricky_pg_table(pg_url: str) -> None:
    """Values whose text form is easy to get wrong: NaN, ±Infinity, -0, subnormal and 17-digit
    floats, NUMERIC and INTEGER columns, NULLs; labels with a comma, a quote, a newline, an
    empty string (not NULL) and NULL."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE tricky (f DOUBLE PRECISION, d NUMERIC(40, 20), i BIGINT, g TEXT)")
        conn.exec_driver_sql(
            "INSERT INTO tricky VALUES "
            "('NaN', 1.5, 1, 'a,b'), ('Infinity', NULL, 2, 'say \"hi\"'), "
            "('-Infinity', 0.1, NULL, E'two\\nlines'), ('-0', 12345678901.12345678901234567890,"
            " 9007199254740993, ''), (4.9e-324, -3, -4, NULL), "
            "(0.30000000000000004, 2.5, 0, 'a,b'), (NULL, 'NaN', 7, 'plain'), "
            "(1.7976931348623157e308, 0, 8, 'plain')")
    engine.dispose()


def test_postgres_copy_reads_what_fetching_rows_reads(pg_url: str) -> None:
    from center_agent.data.sources import SqlTable

    _tricky_pg_table(pg_url)
    source = SqlTable(pg_url, table="tricky")
    try:
        columns, text = ["f", "d", "i", "g"], ["g"]
        copied = source._copy(columns, text)
        fetched = source._rows(columns, text)
    finally:
        source.close()
    assert copied is not None  # the fast path ran
    for name in ("f", "d", "i"):
        a = copied.column(name).to_numpy(zero_copy_only=False)
        b = fetched.column(name).to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(a, b)  # NaN where NaN, bit-exact elsewhere
        assert np.array_equal(np.signbit(a), np.signbit(b))  # -0 stays -0
    assert copied.column("g").cast(pa.string()).to_pylist() == fetched.column("g").to_pylist()
    assert fetched.column("g").to_pylist()[3:5] == ["", None]


def test_postgres_copy_falls_back_to_rows_for_what_is_not_a_number(
    open_dataset: Callable[..., Dataset], pg_url: str
) -> None:
    """A text variable: COPY's parse fails, the rows path names the problem as before (the
    column's type, never the value)."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE texty (x TEXT, y DOUBLE PRECISION, arm TEXT)")
        conn.exec_driver_sql("INSERT INTO texty VALUES ('12', 1, 'a'), ('secret-7', 2, 'b')")
    engine.dispose()
    dataset = open_dataset(_config({"kind": "sql", "url": pg_url, "table": "texty"}))
    with pytest.raises(DataSourceError) as info:
        dataset.check_columns()
    assert "variable 'x' holds str values" in info.value.detail
    assert "secret" not in info.value.detail


def test_postgres_reads_by_copy(open_dataset: Callable[..., Dataset], pg_url: str) -> None:
    write_sql(TABLE, pg_url, "cohort_rows")
    dataset = open_dataset(_config({"kind": "sql", "url": pg_url, "table": "cohort_rows"}))
    ran: list[str] = []
    sa.event.listen(dataset.source.engine, "before_cursor_execute",
                    lambda conn, cur, statement, *rest: ran.append(statement))
    assert _as_lists(dataset.population()) == _expected()
    assert next(s for s in ran if "cohort_rows" in s).startswith("COPY (SELECT")
