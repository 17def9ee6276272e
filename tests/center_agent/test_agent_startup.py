"""Start-up checks an operator can act on (``docs/deploy.md``, "Start-up checks"): a source the
center cannot serve from stops it before it listens when it is the center's only dataset (beside
a healthy one it is left unavailable with the same line: ``test_agent_unavailable_at_start.py``),
with one line naming the dataset, the column
(and the first bad row, or the table and the role) and the fix, never a value of the data; in
process (``create_app``) and through the real ``fedstats center serve`` (exit code 2, one line on
stderr). A data problem that appears after start-up is a generic 500 to the caller, its details
in the operator's log, still without a value.

PostgreSQL cases run against the server of ``tests/helpers/postgres.py`` as a role with
column-level grants, and are skipped without it."""

from __future__ import annotations

import logging
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from center_agent.core.config import DatasetConfig, load_settings
from center_agent.core.errors import DataSourceError
from center_agent.data import Dataset
from center_agent.main import create_app
from tests.helpers.center import AUTH, K
from tests.helpers.config import write_toml
from tests.helpers.processes import clean_env, fedstats
from tests.helpers.timing import scaled

BAD = "37,25"  # a number with a decimal comma: the value no message may ever show
ROWS = 60


def rows(bad_row: int | None = None, bad: str = BAD, n: int = ROWS) -> list[tuple[str, str, str]]:
    """(x, y, arm) cells of ``n`` data rows; row ``bad_row`` (from 1) has ``bad`` as its y."""
    out = []
    for i in range(1, n + 1):
        y = bad if i == bad_row else f"{(i * 7) % 23 + 0.5}"
        out.append((f"{i}.0", y, "a" if i % 2 else "b"))
    return out


def write_cells(path: Path, cells: list[tuple[str, str, str]]) -> Path:
    path.write_text("x,y,arm\n" + "".join(",".join(f'"{c}"' for c in row) + "\n"
                                         for row in cells))
    return path


def center_toml(tmp_path: Path, base_config: dict[str, Any], source: dict[str, Any],
                **extra: Any) -> Path:
    config = {**base_config, **extra, "datasets": {"cohort": {
        "source": source, "variables": ["x", "y"],
        "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 3.0}}}
    return write_toml(tmp_path / "center.toml", config)


def start_error(config: Path) -> str:
    """The one-line detail start-up stops with (the app is never built)."""
    with pytest.raises(DataSourceError) as caught:
        create_app(load_settings(config))
    detail = caught.value.detail
    assert "\n" not in detail
    return detail


def assert_no_value(text: str, bad: str = BAD) -> None:
    assert bad not in text and bad.replace(",", ".") not in text


# -- CSV: what numeric means --------------------------------------------------------------------


def test_a_decimal_comma_stops_start_up_naming_dataset_column_row_and_fix(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    csv = write_cells(tmp_path / "d.csv", rows(bad_row=3))
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "csv", "path": str(csv)}))
    assert detail.startswith("dataset 'cohort': variable 'y' ")
    assert "(first in data row 3, the header not counted)" in detail
    assert "'.' as the decimal point" in detail and "group column" in detail  # the fixes
    assert_no_value(detail)
    assert str(csv) not in detail


@pytest.mark.parametrize("bad", ["n/a x", "unknown", "<5", "1.2.3", "12 mg", "-"])
def test_any_text_that_is_not_a_number_or_a_missing_marker_stops_start_up(
    tmp_path: Path, base_config: dict[str, Any], bad: str
) -> None:
    csv = write_cells(tmp_path / "d.csv", rows(bad_row=41, bad=bad))
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "csv", "path": str(csv)}))
    assert "variable 'y'" in detail and "first in data row 41," in detail
    assert_no_value(detail, bad)


def test_the_first_bad_row_is_found_in_a_file_of_many_blocks(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    """A file Arrow reads in many blocks (chunks): the row is counted over all of them."""
    cells = rows(n=300_000)
    cells[254_321 - 1] = (BAD, "1.0", "a")
    cells[280_000 - 1] = ("1.0", "oops", "a")
    csv = write_cells(tmp_path / "d.csv", cells)
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "csv", "path": str(csv)}))
    assert "variable 'x'" in detail and "first in data row 254321," in detail  # x is checked first
    assert_no_value(detail)


def test_missing_markers_and_padded_numbers_are_not_errors(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    """Blank, NA, n/a, NULL, NaN are missing (the row leaves the complete cases, as a blank
    always did); a number with spaces around it is a number; inf is not finite (left out)."""
    cells = rows()
    markers = ["", "NA", "n/a", "N/A", "NULL", "null", "NaN", "nan", "#N/A", "inf"]
    # Every marker in a row of level a (the even indices): the level leaves out K rows, so no
    # more are left out beside them (a level leaving out 1..K-1 would leave out K - e more of
    # keyed rank; tests/center_agent/test_agent_leave_out.py).
    marked = list(range(0, 2 * len(markers), 2))
    for i, marker in zip(marked, markers, strict=True):
        cells[i] = (cells[i][0], marker, cells[i][2])
    cells[21] = (cells[21][0], "  4.5 ", cells[21][2])
    csv = write_cells(tmp_path / "d.csv", cells)
    app = create_app(load_settings(center_toml(tmp_path, base_config,
                                               {"kind": "csv", "path": str(csv)})))
    try:
        population = app.state.services.datasets["cohort"].population()
    finally:
        app.state.services.close()
    kept = [cell for i, cell in enumerate(cells) if i not in marked]
    assert population.n == len(kept)
    expected = sorted(float(y) for _, y, arm in kept if arm == "a")
    assert population.level("y", "a").tolist() == expected
    assert 4.5 in population.level("y", cells[21][2]).tolist()


def test_the_check_and_the_requests_agree_on_what_is_numeric(tmp_path: Path) -> None:
    """What start-up accepts is read the same on a request; what it refuses is refused there
    too (a generic error to the caller; the row, never the value, in the operator's log)."""
    csv = write_cells(tmp_path / "d.csv", rows())
    config = DatasetConfig.model_validate({
        "source": {"kind": "csv", "path": str(csv)}, "variables": ["x", "y"],
        "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 1.0})
    dataset = Dataset("cohort", config, K)
    try:
        dataset.check_columns()
        assert dataset.population().n == ROWS
        write_cells(csv, rows(bad_row=17))  # the data change after start-up
        with pytest.raises(DataSourceError) as caught:
            dataset.population()
        with pytest.raises(DataSourceError) as at_start:
            dataset.check_columns()
    finally:
        dataset.source.close()
    assert "row" not in caught.value.detail and "'y'" not in caught.value.detail
    assert_no_value(caught.value.detail)
    assert "first in data row 17," in at_start.value.detail


@pytest.mark.anyio
async def test_a_file_broken_after_start_up_is_a_503_and_logged_without_its_value(
    tmp_path: Path, base_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    csv = write_cells(tmp_path / "d.csv", rows())
    app = create_app(load_settings(center_toml(tmp_path, base_config,
                                               {"kind": "csv", "path": str(csv)})))
    write_cells(csv, rows(bad_row=9))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        with caplog.at_level(logging.DEBUG):
            async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
                answer = await c.post("/v1/datasets/cohort/table",
                                      json={"variable": "x", "groups": ["a", "b"], "k": K},
                                      headers=AUTH)
    finally:
        app.state.services.close()
    assert answer.status_code == 503 and answer.json()["error"] == "data_source_error"
    assert "row" not in answer.text and "'y'" not in answer.text
    assert_no_value(answer.text)
    assert "variable 'y'" in caplog.text and "first in data row 9," in caplog.text
    assert_no_value(caplog.text)


def test_a_malformed_csv_is_named_without_its_content(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    csv = write_cells(tmp_path / "d.csv", rows())
    csv.write_text(csv.read_text() + '"7.0","1.5","a","Smith, John"\n')  # a field too many
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "csv", "path": str(csv)}))
    assert detail.startswith("dataset 'cohort': the file could not be parsed as CSV")
    assert "Smith" not in detail


# -- Parquet and SQLite -------------------------------------------------------------------------


def test_parquet_text_and_date_variables_are_named(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    cells = rows(bad_row=12)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": [float(c[0]) for c in cells], "y": [c[1] for c in cells],
                             "arm": [c[2] for c in cells]}), path)
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "parquet", "path": str(path)}))
    assert "variable 'y'" in detail and "first in data row 12," in detail
    assert_no_value(detail)

    dates = np.arange(ROWS).astype("datetime64[D]")
    pq.write_table(pa.table({"x": [float(c[0]) for c in cells], "y": pa.array(dates),
                             "arm": [c[2] for c in cells]}), path)
    detail = start_error(center_toml(tmp_path, base_config, {"kind": "parquet", "path": str(path)}))
    assert "variable 'y' holds date32[day] values, not numbers" in detail
    assert "1970" not in detail


def test_sqlite_text_values_are_named_by_type(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE cohort (x REAL, y TEXT, arm TEXT)")
        conn.execute(sa.text("INSERT INTO cohort VALUES (:x, :y, :arm)"),
                     [{"x": float(x), "y": y, "arm": arm} for x, y, arm in rows(bad_row=5)])
    engine.dispose()
    detail = start_error(center_toml(tmp_path, base_config,
                                     {"kind": "sql", "url": url, "table": "cohort"}))
    assert "variable 'y' holds str values, not numbers" in detail
    assert_no_value(detail)


def test_a_missing_table_is_named(tmp_path: Path, base_config: dict[str, Any]) -> None:
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    detail = start_error(center_toml(tmp_path, base_config,
                                     {"kind": "sql", "url": url, "table": "research_cohort"}))
    assert detail.startswith("dataset 'cohort': table research_cohort does not exist")


# -- the real process ---------------------------------------------------------------------------


@pytest.mark.process
def test_fedstats_center_serve_exits_2_with_one_line(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    csv = write_cells(tmp_path / "d.csv", rows(bad_row=3))
    config = center_toml(tmp_path, base_config, {"kind": "csv", "path": str(csv)},
                         port=0, host="127.0.0.1")
    done = subprocess.run([*fedstats(), "center", "serve", "--config", str(config)],
                          env=clean_env(), capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # no traceback, no log lines
    assert lines[0].startswith("fedstats center: dataset 'cohort': variable 'y' ")
    assert "first in data row 3," in lines[0] and "decimal point" in lines[0]
    assert_no_value(done.stderr + done.stdout)


# -- PostgreSQL: a role with column-level grants ------------------------------------------------


@pytest.fixture
def pg_role(pg_url: str, pg_base_url: str) -> Iterator[tuple[str, str, str]]:
    """A login role with USAGE on the test's schema and nothing else yet: (role, its URL, the
    schema). Dropped afterwards with every privilege it was granted."""
    role = f"fedstats_ro_{uuid.uuid4().hex[:10]}"
    schema = pg_url.rsplit("%3D", 1)[1]
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        conn.exec_driver_sql(f'CREATE TABLE "{schema}".cohort '
                             "(x DOUBLE PRECISION, y DOUBLE PRECISION, arm TEXT, notes TEXT)")
        conn.execute(sa.text(f'INSERT INTO "{schema}".cohort VALUES (:x, :y, :arm, :notes)'),
                     [{"x": float(x), "y": float(y), "arm": arm, "notes": f"secret {x}"}
                      for x, y, arm in rows()])
    url = sa.make_url(pg_url).set(username=role).render_as_string(hide_password=False)
    try:
        yield role, url, schema
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def grant(pg_base_url: str, sql: str) -> None:
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(sql)
    admin.dispose()


def test_pg_column_grants_are_enough_and_a_missing_grant_is_named(
    tmp_path: Path, base_config: dict[str, Any], pg_base_url: str,
    pg_role: tuple[str, str, str],
) -> None:
    role, url, schema = pg_role
    table = f"{schema}.cohort"
    # The declared columns but y: start-up names y, the table, the role and the GRANT.
    grant(pg_base_url, f'GRANT SELECT (x, arm) ON {table} TO "{role}"')
    config = center_toml(tmp_path, base_config, {"kind": "sql", "url": url, "table": table})
    detail = start_error(config)
    assert detail == (
        f"dataset 'cohort': role '{role}' may not read columns ['y'] of table {table} "
        "(permission denied, SQLSTATE 42501); grant them: "
        f"GRANT SELECT (y) ON {table} TO {role}")
    # Granted as it says (and never `notes`, which `SELECT *` would need): the center starts.
    grant(pg_base_url, f'GRANT SELECT (y) ON {table} TO "{role}"')
    app = create_app(load_settings(config))
    try:
        assert app.state.services.datasets["cohort"].population().n == ROWS
    finally:
        app.state.services.close()


def test_pg_a_table_without_any_grant_and_a_missing_column(
    tmp_path: Path, base_config: dict[str, Any], pg_base_url: str,
    pg_role: tuple[str, str, str],
) -> None:
    role, url, schema = pg_role
    table = f"{schema}.cohort"
    detail = start_error(center_toml(tmp_path, base_config,
                                     {"kind": "sql", "url": url, "table": table}))
    assert f"may not read columns ['x', 'y', 'arm'] of table {table}" in detail
    assert detail.endswith(f"GRANT SELECT (x, y, arm) ON {table} TO {role}")
    grant(pg_base_url, f'GRANT SELECT ON {table} TO "{role}"')
    base_config = {**base_config}
    config = center_toml(tmp_path, base_config, {"kind": "sql", "url": url, "table": table})
    text = config.read_text().replace('"y"', '"y_mg"')
    config.write_text(text)
    detail = start_error(config)
    assert detail.startswith("dataset 'cohort': declared columns ['y_mg'] are not in its source")


def test_pg_an_operator_query_that_is_denied_names_the_table(
    tmp_path: Path, base_config: dict[str, Any], pg_base_url: str,
    pg_role: tuple[str, str, str],
) -> None:
    role, url, schema = pg_role
    grant(pg_base_url, f'GRANT SELECT (x, arm) ON {schema}.cohort TO "{role}"')
    query = f"SELECT x, y, arm FROM {schema}.cohort WHERE x > 0"
    detail = start_error(center_toml(tmp_path, base_config,
                                     {"kind": "sql", "url": url, "query": query}))
    assert detail.startswith(f"dataset 'cohort': role '{role}' may not read every column the "
                             "dataset's query reads (permission denied for table cohort")
    assert f"ON cohort TO {role}" in detail


def test_pg_a_failing_query_is_told_without_the_value_it_failed_on(
    tmp_path: Path, base_config: dict[str, Any], pg_base_url: str,
    pg_role: tuple[str, str, str],
) -> None:
    """A cast in the operator's query fails on a value: PostgreSQL's message quotes it, the
    center's line gives the error class and SQLSTATE only."""
    role, url, schema = pg_role
    grant(pg_base_url, f'GRANT SELECT ON {schema}.cohort TO "{role}"')
    query = f"SELECT x, CAST(notes AS DOUBLE PRECISION) AS y, arm FROM {schema}.cohort"
    detail = start_error(center_toml(tmp_path, base_config,
                                     {"kind": "sql", "url": url, "query": query}))
    assert ("reading the dataset's query failed (InvalidTextRepresentation, SQLSTATE 22P02)"
            in detail)
    assert "secret" not in detail


# -- a declared resolution the data do not hold ---------------------------------------------------


def grid_toml(tmp_path: Path, base_config: dict[str, Any], csv: Path) -> Path:
    """y declared at resolution 0.5 (rows() records it at 0.5: (i·7) mod 23 + 0.5)."""
    config = {**base_config, "datasets": {"cohort": {
        "source": {"kind": "csv", "path": str(csv)}, "variables": ["x", "y"],
        "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 3.0,
        "metadata": {"y": {"resolution": 0.5}}}}}
    return write_toml(tmp_path / "center.toml", config)


def test_data_off_the_declared_resolution_stop_start_up_naming_only_the_variable(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    # On the grid it starts; one value of 600 off it (in a row the population counts, 37.25)
    # stops start-up: the variable, its resolution and the fix, never the value, row or count.
    config = grid_toml(tmp_path, base_config, write_cells(tmp_path / "d.csv", rows(n=600)))
    create_app(load_settings(config)).state.services.close()
    write_cells(tmp_path / "d.csv", rows(bad_row=417, bad="37.25", n=600))
    detail = start_error(config)
    assert detail == (
        "dataset 'cohort': variable 'y' holds values that are not multiples of its declared "
        "resolution 0.5; declare the resolution the values are recorded at (or none) under "
        "[datasets.<name>.metadata.y], or round the column to it")
    assert "37.25" not in detail and "417" not in detail and " 1 " not in detail


@pytest.mark.anyio
async def test_data_moved_off_the_grid_after_start_up_are_a_503_to_callers_and_logged(
    tmp_path: Path, base_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Data replaced after start-up: every request of the dataset answers the public state
    # "data source error", the same for any source problem, whatever the request asks; the
    # operator's log names the variable.
    csv = write_cells(tmp_path / "d.csv", rows(n=600))
    app = create_app(load_settings(grid_toml(tmp_path, base_config, csv)))
    write_cells(csv, rows(bad_row=9, bad="12.3", n=600))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        with caplog.at_level(logging.DEBUG):
            async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
                answers = [await c.post("/v1/datasets/cohort/table",
                                        json={"variable": v, "groups": ["a", "b"], "k": K},
                                        headers=AUTH) for v in ("x", "y")]
    finally:
        app.state.services.close()
    for answer in answers:
        assert answer.status_code == 503 and answer.json()["error"] == "data_source_error"
        assert "'y'" not in answer.text and "resolution" not in answer.text
        assert "12.3" not in answer.text
    assert answers[0].json() == answers[1].json()
    assert "variable 'y' holds values that are not multiples of its declared" in caplog.text
    assert "12.3" not in caplog.text


# -- one source, one dataset --------------------------------------------------------------------
# Two datasets over one source are two populations and two disclosure memories of the same
# patients: `cohort` (x, y) and `los_only` (y) leave different rows out (those missing x), and
# one MWU per dataset gave those rows' count per arm exactly. Start-up stops, naming both
# datasets and how to declare them as one (docs/privacy.md, "One source, one dataset").


def two_datasets(tmp_path: Path, base_config: dict[str, Any], first: dict[str, Any],
                 second: dict[str, Any]) -> Path:
    """`cohort` (x and y, grouped by arm) over ``first`` and `los_only` (y) over ``second``."""
    group = {"column": "arm", "levels": ["a", "b"]}
    return write_toml(tmp_path / "center.toml", {**base_config, "datasets": {
        "cohort": {"source": first, "variables": ["x", "y"], "group": group,
                   "epsilon_total": 3.0},
        "los_only": {"source": second, "variables": ["y"], "group": group,
                     "epsilon_total": 3.0}}})


def assert_one_source_stop(detail: str, what: str) -> None:
    assert detail.startswith(f"datasets 'cohort' and 'los_only' read {what}: "), detail
    assert "two populations, two disclosure memories and two budgets" in detail
    assert ("declare them as one dataset: [datasets.cohort] with variables ['x', 'y'], group "
            "column 'arm' and one epsilon_total, and remove [datasets.los_only]") in detail


def with_holes(path: Path) -> Path:
    """The rows of :func:`rows`, x missing in three rows of arm a and one of arm b."""
    cells = rows()
    for i in (0, 2, 4, 1):
        cells[i] = ("", cells[i][1], cells[i][2])
    return write_cells(path, cells)


@pytest.mark.parametrize("spelling", ["relative", "dot segments", "symlink", "hard link"])
def test_two_datasets_over_one_csv_file_stop_start_up_however_its_path_is_spelled(
    tmp_path: Path, base_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    csv = with_holes(tmp_path / "d.csv")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    other = {"relative": Path("d.csv"), "dot segments": Path("sub/../d.csv"),
             "symlink": tmp_path / "sub" / "link.csv",
             "hard link": tmp_path / "sub" / "hard.csv"}[spelling]
    if spelling == "symlink":
        other.symlink_to(csv)
    elif spelling == "hard link":
        other.hardlink_to(csv)
    config = two_datasets(tmp_path, base_config, {"kind": "csv", "path": str(csv)},
                          {"kind": "csv", "path": str(other)})
    detail = start_error(config)
    assert_one_source_stop(detail, "the same file")
    assert str(csv) not in detail and "d.csv" not in detail


def test_two_datasets_over_one_parquet_file_stop_start_up(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": [float(i) for i in range(ROWS)],
                             "y": [float(i % 7) for i in range(ROWS)],
                             "arm": ["a" if i % 2 else "b" for i in range(ROWS)]}), path)
    (tmp_path / "link.parquet").symlink_to(path)
    config = two_datasets(tmp_path, base_config, {"kind": "parquet", "path": str(path)},
                          {"kind": "parquet", "path": str(tmp_path / "link.parquet")})
    assert_one_source_stop(start_error(config), "the same file")


def test_datasets_over_different_files_start_and_a_third_over_one_is_named(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    """Two files start (each dataset its own population); a third dataset over the first file
    is named with it, and the fix keeps the first declared."""
    first = with_holes(tmp_path / "d.csv")
    second = with_holes(tmp_path / "e.csv")
    config = two_datasets(tmp_path, base_config, {"kind": "csv", "path": str(first)},
                          {"kind": "csv", "path": str(second)})
    app = create_app(load_settings(config))
    try:
        assert set(app.state.services.datasets) == {"cohort", "los_only"}
    finally:
        app.state.services.close()
    settings = load_settings(config).model_dump()
    settings["datasets"]["ages"] = {**settings["datasets"]["los_only"],
                                    "source": {"kind": "csv", "path": str(first)},
                                    "group": None, "variables": ["x"]}
    with pytest.raises(DataSourceError) as caught:
        create_app(type(load_settings(config)).model_validate(settings))
    assert caught.value.detail.startswith("datasets 'cohort' and 'ages' read the same file: ")
    assert caught.value.detail.endswith("declare them as one dataset: [datasets.cohort] with "
                                        "variables ['x', 'y'], group column 'arm' and one "
                                        "epsilon_total, and remove [datasets.ages]")


def sqlite_cohort(path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for table in ("cohort", "archive"):
            conn.exec_driver_sql(f"CREATE TABLE {table} (x REAL, y REAL, arm TEXT)")
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (:x, :y, :arm)"),
                         [{"x": float(x), "y": float(y), "arm": arm} for x, y, arm in rows()])
    engine.dispose()


@pytest.mark.parametrize(("first", "second", "what"), [
    ({"table": "cohort"}, {"table": "main.COHORT"}, "table cohort of one database"),
    ({"query": "SELECT x, y, arm FROM cohort WHERE x > 3"},
     {"query": "select_placeholder"}, "the same query of one database"),
])
def test_two_datasets_over_one_sqlite_table_or_query_stop_start_up(
    tmp_path: Path, base_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
    first: dict[str, str], second: dict[str, str], what: str,
) -> None:
    """The database file reached by an absolute and a relative URL; the table named with and
    without its schema (SQLite's names have no case); the query with other white space."""
    sqlite_cohort(tmp_path / "w.sqlite")
    monkeypatch.chdir(tmp_path)
    if "query" in second:
        second = {"query": "  SELECT x, y, arm\n  FROM cohort\tWHERE x > 3 "}
    config = two_datasets(
        tmp_path, base_config,
        {"kind": "sql", "url": f"sqlite:///{tmp_path / 'w.sqlite'}", **first},
        {"kind": "sql", "url": "sqlite:///w.sqlite", **second})
    assert_one_source_stop(start_error(config), what)


def test_two_tables_or_two_queries_of_one_database_start(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    sqlite_cohort(tmp_path / "w.sqlite")
    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    for first, second in [({"table": "cohort"}, {"table": "archive"}),
                          ({"query": "SELECT x, y, arm FROM cohort WHERE x > 3"},
                           {"query": "SELECT x, y, arm FROM cohort WHERE x <= 3"})]:
        config = two_datasets(tmp_path, base_config, {"kind": "sql", "url": url, **first},
                              {"kind": "sql", "url": url, **second})
        create_app(load_settings(config)).state.services.close()


def test_pg_two_datasets_over_one_table_or_query_stop_start_up(
    tmp_path: Path, base_config: dict[str, Any], pg_url: str
) -> None:
    """PostgreSQL is asked which database and table a source reads: the server reached as
    127.0.0.1 and as localhost, the table on the search path and qualified with its schema, are
    one table; the same table name in another schema is another table."""
    schema = pg_url.rsplit("%3D", 1)[1]
    table = f"cohort_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (x DOUBLE PRECISION, y DOUBLE PRECISION, "
                             "arm TEXT)")
        conn.execute(sa.text(f"INSERT INTO {table} VALUES (:x, :y, :arm)"),
                     [{"x": float(x), "y": float(y), "arm": arm} for x, y, arm in rows()])
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}_b")
        conn.exec_driver_sql(f"CREATE TABLE {schema}_b.{table} AS TABLE {table}")
    engine.dispose()
    by_name = pg_url.replace("@127.0.0.1:", "@localhost:")
    try:
        config = two_datasets(tmp_path, base_config,
                              {"kind": "sql", "url": pg_url, "table": table},
                              {"kind": "sql", "url": by_name, "table": f"{schema}.{table}"})
        assert_one_source_stop(start_error(config), f"table {table} of one database")

        query = f"SELECT x, y, arm FROM {table} WHERE arm IS NOT NULL"
        config = two_datasets(tmp_path, base_config,
                              {"kind": "sql", "url": pg_url, "query": query},
                              {"kind": "sql", "url": by_name, "query": f"\n{query}\n"})
        assert_one_source_stop(start_error(config), "the same query of one database")

        config = two_datasets(tmp_path, base_config,
                              {"kind": "sql", "url": pg_url, "table": table},
                              {"kind": "sql", "url": pg_url, "table": f"{schema}_b.{table}"})
        create_app(load_settings(config)).state.services.close()
    finally:
        engine = sa.create_engine(pg_url)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema}_b CASCADE")
        engine.dispose()
