"""A SQL source is read once per data version (issue 18): the operator's ``version_query`` runs on
every request and the rows are read again only when its answer changes; without one, when
``version_ttl_s`` has passed. Counted with a SQLAlchemy event listener on the source's engine that
tells the data query from the version query, on SQLite and on PostgreSQL (skipped without a
server)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from pydantic import ValidationError

import center_agent.data.sources as sources
from center_agent.core.config import DatasetConfig, SqlSource, load_settings
from center_agent.core.errors import DataSourceError
from center_agent.data import Dataset
from center_agent.main import create_app
from tests.helpers.center import AUTH, K, dataset_config, make_table, write_sql
from tests.helpers.config import write_toml

pytestmark = pytest.mark.anyio

VERSION = "SELECT max(updated_at), count(*) FROM cohort_rows"


class Statements:
    """The statements a source's engine ran, sorted into data reads and version queries."""

    def __init__(self, engine: sa.Engine) -> None:
        self.data: list[str] = []
        self.version: list[str] = []
        self._lock = threading.Lock()
        sa.event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        with self._lock:
            if statement.strip() == VERSION:
                self.version.append(statement)
            elif "cohort_rows" in statement and "LIMIT" not in statement.upper():
                # The read of the declared columns (the start-up probes carry LIMIT 0).
                self.data.append(statement)


@pytest.fixture(params=["sqlite", "pg"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``make_table()`` as table ``cohort_rows`` with an ``updated_at`` column (1 everywhere)."""
    url = (f"sqlite:///{tmp_path / 'warehouse.sqlite'}" if request.param == "sqlite"
           else request.getfixturevalue("pg_url"))
    write_sql(make_table(), url, "cohort_rows")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE cohort_rows ADD COLUMN updated_at INTEGER DEFAULT 1")
    engine.dispose()
    return url


def change_data(url: str, *, stamp: int = 2) -> None:
    """K new rows in each level, far above every value so far (no released set of the
    earlier epoch changes by 1..K-1 rows: the gate's version check lets them in)."""
    rows = [{"x": 1000.0 + i, "y": 1.0, "arm": arm, "updated_at": stamp}
            for arm in ("a", "b") for i in range(K)]
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO cohort_rows (x, y, arm, updated_at) "
                             "VALUES (:x, :y, :arm, :updated_at)"), rows)
    engine.dispose()


def source(url: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "sql", "url": url, "table": "cohort_rows", **extra}


@pytest.fixture
def open_dataset() -> Iterator[Callable[..., Dataset]]:
    made: list[Dataset] = []

    def make(src: dict[str, Any]) -> Dataset:
        made.append(Dataset("cohort", DatasetConfig.model_validate(dataset_config(src)), K))
        return made[-1]

    yield make
    for dataset in made:
        dataset.source.close()


@pytest.fixture
def app(sql_url: str, base_config: dict[str, Any], tmp_path: Path) -> Iterator[FastAPI]:
    config = {**base_config,
              "datasets": {"cohort": dataset_config(source(sql_url, version_query=VERSION))}}
    application = create_app(load_settings(write_toml(tmp_path / "sql-center.toml", config)))
    yield application
    application.state.services.close()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        yield c


def counter(app: FastAPI) -> Statements:
    dataset = app.state.services.datasets["cohort"]
    return Statements(dataset.source.engine)


async def release(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
    r = await client.post(f"/v1/datasets/cohort/{path}", json=body, headers=AUTH)
    assert r.status_code == 200, r.text


TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}
MWU = {"variable": "x", "groups": ["a", "b"]}


async def test_releases_read_the_table_once_per_version(
    app: FastAPI, client: httpx.AsyncClient, sql_url: str
) -> None:
    """Start-up read it (its check); a table, a Mann-Whitney test and the info read no more
    rows, only the version. Changed data (a new version) are read once more, give a new
    fingerprint and start the gate's next epoch; the releases after read nothing again."""
    statements = counter(app)
    dataset = app.state.services.datasets["cohort"]
    first = dataset.population()
    await release(client, "table", TABLE)
    await release(client, "mwu", MWU)
    info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
    assert statements.data == []  # the start-up read serves every request
    assert len(statements.version) >= 3
    assert info["epoch"] == 1

    change_data(sql_url)
    await release(client, "table", TABLE)
    await release(client, "mwu", MWU)
    info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
    assert len(statements.data) == 1
    changed = dataset.population()
    assert changed is not first and changed.fingerprint != first.fingerprint
    assert changed.n == first.n + 2 * K
    assert info["epoch"] == 2 and info["paused"] is False
    assert len(statements.data) == 1


def test_requests_arriving_together_share_one_read(
    open_dataset: Callable[..., Dataset], sql_url: str
) -> None:
    dataset = open_dataset(source(sql_url, version_query=VERSION))
    statements = Statements(dataset.source.engine)
    with ThreadPoolExecutor(8) as pool:
        populations = list(pool.map(lambda _: dataset.population(), range(16)))
    assert len(statements.data) == 1 and len(statements.version) == 16
    assert all(p is populations[0] for p in populations)

    change_data(sql_url)
    with ThreadPoolExecutor(8) as pool:
        again = list(pool.map(lambda _: dataset.population(), range(16)))
    assert len(statements.data) == 2
    assert all(p is again[0] for p in again) and again[0] is not populations[0]


def test_an_unchanged_version_keeps_the_data_even_when_rows_change(
    open_dataset: Callable[..., Dataset], sql_url: str
) -> None:
    """The version query is the operator's promise: rows changed under the same answer are not
    read (this is why it must cover every change, e.g. ``count(*)`` for deletions)."""
    dataset = open_dataset(source(sql_url, version_query="SELECT 1"))
    first = dataset.population()
    change_data(sql_url)
    assert dataset.population() is first


def test_without_a_version_query_the_data_are_kept_for_the_ttl(
    open_dataset: Callable[..., Dataset], sql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(sources.time, "monotonic", lambda: now[0])
    dataset = open_dataset(source(sql_url, version_ttl_s=60))
    statements = Statements(dataset.source.engine)
    first = dataset.population()
    now[0] += 59.9
    assert dataset.population() is first
    assert len(statements.data) == 1 and statements.version == []
    change_data(sql_url)
    assert dataset.population() is first  # within the TTL: the data as read
    now[0] += 0.1
    renewed = dataset.population()  # 60 s after the read: read again
    assert len(statements.data) == 2
    assert renewed.fingerprint != first.fingerprint and renewed.n == first.n + 2 * K
    now[0] += 30
    assert dataset.population() is renewed
    assert len(statements.data) == 2


def test_an_unchanged_table_read_again_keeps_its_fingerprint(
    open_dataset: Callable[..., Dataset], sql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TTL re-read of the same rows: the same fingerprint, so the gate's epoch goes on."""
    now = [0.0]
    monkeypatch.setattr(sources.time, "monotonic", lambda: now[0])
    dataset = open_dataset(source(sql_url, version_ttl_s=5))
    first = dataset.population()
    now[0] += 5
    again = dataset.population()
    assert again is not first and again.fingerprint == first.fingerprint


def test_the_default_ttl_and_its_bounds(sql_url: str) -> None:
    base = {"kind": "sql", "url": sql_url, "table": "cohort_rows"}
    assert SqlSource.model_validate(base).version_ttl_s == 300.0
    assert SqlSource.model_validate({**base, "version_ttl_s": 0}).version_ttl_s == 0
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="version_ttl_s"):
            SqlSource.model_validate({**base, "version_ttl_s": bad})
    with pytest.raises(ValidationError, match="version_query"):
        SqlSource.model_validate({**base, "version_query": ""})


@pytest.mark.parametrize("query, told", [
    ("SELECT updated_at FROM cohort_rows", "version_query answered 157 rows, not one"),
    ("SELECT max(updated_at) FROM cohort_rows WHERE 1 = 0 GROUP BY arm",
     "version_query answered 0 rows, not one"),
    ("SELECT max(changed) FROM no_such_table", "version_query failed"),
])
def test_a_bad_version_query_is_told_at_start_up(
    open_dataset: Callable[..., Dataset], sql_url: str, query: str, told: str
) -> None:
    dataset = open_dataset(source(sql_url, version_query=query))
    with pytest.raises(DataSourceError, match=told):
        dataset.check_columns()


def test_a_version_query_failing_on_a_request_tells_the_caller_nothing(
    open_dataset: Callable[..., Dataset], sql_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    query = "SELECT max(stamp) FROM data_version_marker"
    engine = sa.create_engine(sql_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE data_version_marker (stamp INTEGER)")
        conn.exec_driver_sql("INSERT INTO data_version_marker VALUES (1)")
    dataset = open_dataset(source(sql_url, version_query=query))
    dataset.check_columns()
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE data_version_marker")
    engine.dispose()
    with pytest.raises(DataSourceError) as info:
        dataset.population()
    detail = info.value.detail
    assert detail == ("dataset 'cohort': the data source could not be read (the center's log "
                      "says why)")
    assert "version_query failed" in caplog.text  # the operator reads why in the log
