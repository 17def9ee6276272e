"""A center starts with its healthy datasets (``docs/deploy.md``, "Start-up checks"): a dataset
whose source fails its start-up checks (a file missing, a column missing, a value that is not a
number, a table missing, a database that does not answer or a role it does not know) is logged
with its fix and left unavailable, in the state a source failing while the center runs is in:
``"available": false`` in ``/v1/info``, 503 ``data_source_error`` on its releases, with no path,
value or secret in what a caller sees; the other dataset answers releases. Once its source reads
it is served, without a restart. What still stops start-up: every dataset failing, two datasets
over one source, and a declaration that is malformed (a configuration error naming the key).

One test per source kind (CSV, Parquet, SQLite, PostgreSQL through ``pg_url``), each with a
healthy and a broken dataset of that kind, in process; one through ``fedstats center serve`` and
``fedstats coordinator serve`` (marker ``process``)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa

from center_agent.core.config import ConfigError, load_settings
from center_agent.core.errors import DataSourceError
from center_agent.main import create_app
from fedstats_cli.procs import free_port
from tests.helpers.center import (
    AUTH,
    K,
    dataset_config,
    make_table,
    write_csv,
    write_parquet,
    write_sql,
)
from tests.helpers.config import write_toml
from tests.helpers.coordinator import ANALYST_TOKEN, coordinator_config
from tests.helpers.processes import (
    clean_env,
    fedstats,
    log_file,
    log_tail,
    running_coordinator,
    stop,
    wait_healthy,
)

pytestmark = pytest.mark.anyio

TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}
BAD = "37,25"  # a value no text a caller or the log sees may show
SECRET = "pw-" + "Zq8vR2nL5tXw9kYj"  # a database password in a URL


def center_file(tmp_path: Path, base_config: dict[str, Any], healthy: dict[str, Any],
                broken: dict[str, Any], **extra: Any) -> Path:
    """Two datasets: ``cohort`` over ``healthy`` and ``side`` over ``broken``."""
    config = {**base_config, **extra, "datasets": {"cohort": dataset_config(healthy),
                                                   "side": dataset_config(broken)}}
    return write_toml(tmp_path / f"center-{uuid.uuid4().hex[:6]}.toml", config)


@asynccontextmanager
async def center(config: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(load_settings(config))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
            yield client
    finally:
        app.state.services.close()


async def states(client: httpx.AsyncClient) -> tuple[dict[str, bool], str]:
    """Each dataset's ``available`` in ``/v1/info``, and the answer's text."""
    info = await client.get("/v1/info", headers=AUTH)
    assert info.status_code == 200, info.text
    return {d["name"]: d["available"] for d in info.json()["datasets"]}, info.text


async def assert_served_and_unavailable(client: httpx.AsyncClient) -> str:
    """``cohort`` answers a release, ``side`` is unavailable in the info and refused with 503
    ``data_source_error`` (the text both show a caller is returned)."""
    available, info = await states(client)
    assert available == {"cohort": True, "side": False}
    good = await client.post("/v1/datasets/cohort/table", json=TABLE, headers=AUTH)
    assert good.status_code == 200, good.text
    refused = await client.post("/v1/datasets/side/table", json=TABLE, headers=AUTH)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"] == "data_source_error"
    assert refused.json()["detail"] == ("dataset 'side': the data source could not be read "
                                        "(the center's log says why)")
    return info + refused.text


async def assert_served(client: httpx.AsyncClient) -> None:
    """``side`` answers a release and is available, beside ``cohort``."""
    answer = await client.post("/v1/datasets/side/table", json=TABLE, headers=AUTH)
    assert answer.status_code == 200, answer.text
    available = (await states(client))[0]
    assert available["cohort"] is True and available["side"] is True


def replace(path: Path, write: Any) -> None:
    """Write a file next to ``path`` and move it there in one step (as an export job would)."""
    part = path.with_name(path.name + ".part")
    write(part)
    os.replace(part, path)


def start_line(caplog: pytest.LogCaptureFixture) -> str:
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("start-up: dataset 'side': ")]
    assert len(lines) == 1, caplog.text
    assert lines[0].endswith("; this dataset answers 503 data_source_error until its source "
                             "reads, the center's other datasets are served")
    return lines[0]


# -- CSV ----------------------------------------------------------------------------------------


async def test_csv_a_missing_file_leaves_its_dataset_unavailable_until_it_is_there(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    side = tmp_path / "exports" / "side.csv"
    config = center_file(tmp_path, base_config, {"kind": "csv", "path": str(csv_path)},
                         {"kind": "csv", "path": str(side)})
    with caplog.at_level(logging.INFO):
        async with center(config) as client:
            seen = await assert_served_and_unavailable(client)
            assert str(side) not in seen and "exports" not in seen
            side.parent.mkdir()
            replace(side, lambda p: write_csv(make_table(seed=7), p))
            await assert_served(client)
    line = start_line(caplog)
    assert line == (f"start-up: dataset 'side': its CSV file {side} does not exist; check "
                    "`datasets.side.source.path`, or put the file there (the dataset is served "
                    "once it reads, without a restart); this dataset answers 503 "
                    "data_source_error until its source reads, the center's other datasets "
                    "are served")
    assert "start-up: serving 1 of 2 datasets; unavailable: 'side'" in caplog.text
    assert "dataset 'side': unavailable since start-up, its source reads now" in caplog.text


async def test_csv_a_missing_column_or_a_text_value_is_named_and_served_once_fixed(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    side = tmp_path / "side.csv"
    table = make_table(seed=8)
    write_csv(table.drop_columns(["y"]), side)
    config = center_file(tmp_path, base_config, {"kind": "csv", "path": str(csv_path)},
                         {"kind": "csv", "path": str(side)})
    async with center(config) as client:
        await assert_served_and_unavailable(client)
        # The column is there now, one of its values a decimal comma: still unavailable.
        y = pa.array([BAD if i == 11 else str(v) for i, v in
                      enumerate(table.column("y").to_pylist())], pa.string())
        replace(side, lambda p: write_csv(table.set_column(1, "y", y), p))
        seen = await assert_served_and_unavailable(client)
        replace(side, lambda p: write_csv(table, p))
        await assert_served(client)
    line = start_line(caplog)
    assert "declared columns ['y'] are not in its source" in line
    assert "[datasets.side]" in line
    assert "variable 'y' holds a value that is neither a number" in caplog.text
    assert BAD not in seen and BAD not in caplog.text


async def test_every_dataset_failing_still_stops_start_up_naming_the_first(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    """A center with nothing to serve stops with the one line (``fedstats center serve``
    exits 2 with it), as before."""
    config = center_file(tmp_path, base_config,
                         {"kind": "csv", "path": str(tmp_path / "none.csv")},
                         {"kind": "parquet", "path": str(tmp_path / "neither.parquet")})
    with pytest.raises(DataSourceError) as caught:
        create_app(load_settings(config))
    assert caught.value.detail.startswith(
        f"dataset 'cohort': its CSV file {tmp_path / 'none.csv'} does not exist; ")


async def test_a_malformed_declaration_still_stops_start_up_naming_the_key(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path
) -> None:
    """Beside a healthy dataset: a source without a path, or of an unknown kind, is a bad key
    of the configuration, not a dataset's state."""
    for broken, key in [({"kind": "csv"}, "datasets.side.source.csv.path: "),
                        ({"kind": "csv", "path": ""}, "datasets.side.source.csv.path: "),
                        ({"kind": "xlsx", "path": "a.xlsx"}, "datasets.side.source: ")]:
        config = center_file(tmp_path, base_config, {"kind": "csv", "path": str(csv_path)},
                             broken)
        with pytest.raises(ConfigError) as caught:
            load_settings(config)
        assert key in str(caught.value)


async def test_a_dataset_that_reads_later_is_still_held_to_one_source_one_dataset(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The check it missed at start-up runs before its first read: a file that turns out to be
    the healthy dataset's (a hard link) keeps it unavailable, naming both and the fix."""
    side = tmp_path / "later.csv"
    config = center_file(tmp_path, base_config, {"kind": "csv", "path": str(csv_path)},
                         {"kind": "csv", "path": str(side)})
    async with center(config) as client:
        await assert_served_and_unavailable(client)
        os.link(csv_path, side)
        await assert_served_and_unavailable(client)
    assert ("dataset 'side' stays unavailable: datasets 'cohort' and 'side' read the same file: "
            in caplog.text)
    assert "declare them as one dataset: [datasets.cohort]" in caplog.text


async def test_two_datasets_unavailable_at_start_over_one_file_serve_only_the_first_read(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Neither file is there at start-up (a symlink to the one that will be): once it is, the
    first dataset read is served, the other stays unavailable, named with the first."""
    later = tmp_path / "later.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(later)
    config = {**base_config, "datasets": {
        "cohort": dataset_config({"kind": "csv", "path": str(csv_path)}),
        "side": dataset_config({"kind": "csv", "path": str(later)}),
        "copy": dataset_config({"kind": "csv", "path": str(link)})}}
    async with center(write_toml(tmp_path / "three.toml", config)) as client:
        replace(later, lambda p: write_csv(make_table(seed=9), p))
        await assert_served(client)
        refused = await client.post("/v1/datasets/copy/table", json=TABLE, headers=AUTH)
        assert refused.status_code == 503 and refused.json()["error"] == "data_source_error"
        available, _ = await states(client)
        assert available == {"cohort": True, "side": True, "copy": False}
    assert "datasets 'side' and 'copy' read the same file" in caplog.text


# -- Parquet ------------------------------------------------------------------------------------


@pytest.mark.parametrize("problem", ["missing", "directory", "text"])
async def test_parquet_a_missing_file_a_directory_or_a_text_variable_is_unavailable_alone(
    tmp_path: Path, base_config: dict[str, Any], caplog: pytest.LogCaptureFixture,
    problem: str,
) -> None:
    healthy = write_parquet(make_table(seed=3), tmp_path / "cohort.parquet")
    side = tmp_path / "side.parquet"
    table = make_table(seed=4)
    if problem == "text":
        write_parquet(table.set_column(0, "x", pa.array(
            [BAD if i == 2 else str(v) for i, v in enumerate(table.column("x").to_pylist())])),
            side)
    if problem == "directory":
        side.mkdir()
    config = center_file(tmp_path, base_config, {"kind": "parquet", "path": str(healthy)},
                         {"kind": "parquet", "path": str(side)})
    async with center(config) as client:
        seen = await assert_served_and_unavailable(client)
        if problem == "directory":
            side.rmdir()
        replace(side, lambda p: write_parquet(table, p))
        await assert_served(client)
    line = start_line(caplog)
    if problem == "missing":
        assert f"its Parquet file {side} does not exist" in line
    elif problem == "directory":
        assert (f"its Parquet path {side} is not a file; give the data file itself in "
                "`datasets.side.source.path`") in line
    else:
        assert ("variable 'x' holds a value that is neither a number nor a missing marker "
                "(first in data row 3," in line)
    assert BAD not in seen and BAD not in caplog.text and str(side) not in seen


# -- SQLite -------------------------------------------------------------------------------------


async def test_sqlite_a_missing_table_leaves_only_it_unavailable_until_created(
    tmp_path: Path, base_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'lab.sqlite'}"
    write_sql(make_table(seed=5), url, "cohort")
    config = center_file(tmp_path, base_config,
                         {"kind": "sql", "url": url, "table": "cohort"},
                         {"kind": "sql", "url": url, "table": "lab", "version_ttl_s": 0})
    async with center(config) as client:
        await assert_served_and_unavailable(client)
        write_sql(make_table(seed=6), url, "lab")
        await assert_served(client)
    assert "table lab does not exist or the role cannot see it" in start_line(caplog)


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture
def pg_absent_role(pg_url: str, pg_base_url: str) -> Iterator[tuple[str, str]]:
    """A role name that does not exist yet and a URL that logs in as it with a password (the
    server trusts, so the password only has to stay secret); dropped afterwards if created."""
    role = f"fedstats_late_{uuid.uuid4().hex[:10]}"
    url = sa.make_url(pg_url).set(username=role, password=SECRET)
    try:
        yield role, url.render_as_string(hide_password=False)
    finally:
        admin = sa.create_engine(pg_base_url)
        with admin.begin() as conn:
            if conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                            {"r": role}).first():
                conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
                conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


async def test_pg_a_database_that_does_not_answer_is_unavailable_without_its_password(
    tmp_path: Path, base_config: dict[str, Any], pg_url: str, pg_base_url: str,
    pg_absent_role: tuple[str, str], caplog: pytest.LogCaptureFixture,
) -> None:
    """The healthy dataset is a table of the test's schema; the broken one logs in as a role
    the server does not know yet (the connection is refused), with a password in its URL: named
    unavailable, and served once the role exists and may read the table."""
    role, url = pg_absent_role
    write_sql(make_table(seed=11), pg_url, "cohort")
    write_sql(make_table(seed=12), pg_url, "lab")
    config = center_file(tmp_path, base_config,
                         {"kind": "sql", "url": pg_url, "table": "cohort"},
                         {"kind": "sql", "url": url, "table": "lab", "version_ttl_s": 0})
    with caplog.at_level(logging.DEBUG):
        async with center(config) as client:
            seen = await assert_served_and_unavailable(client)
            schema = pg_url.rsplit("%3D", 1)[1]
            admin = sa.create_engine(pg_base_url)
            with admin.begin() as conn:  # the database answers the role now
                conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
                conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
                conn.exec_driver_sql(f'GRANT SELECT ON "{schema}".lab TO "{role}"')
            admin.dispose()
            await assert_served(client)
    line = start_line(caplog)
    assert "reading table lab failed (OperationalError" in line and role in line
    assert SECRET not in seen and SECRET not in caplog.text


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port bound and never listened on: every connection to it is refused, and no other
    process can take it while the test runs."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])


async def test_pg_an_unreachable_server_and_a_missing_table_are_unavailable(
    tmp_path: Path, base_config: dict[str, Any], pg_url: str, refusing_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that is not there (nothing listens on the port) and a table that is not there
    (the real server): each named, neither with a password; the healthy table answers."""
    write_sql(make_table(seed=13), pg_url, "cohort")
    nowhere = f"postgresql+psycopg://fedstats:{SECRET}@127.0.0.1:{refusing_port}/test"
    config = {**base_config, "datasets": {
        "cohort": dataset_config({"kind": "sql", "url": pg_url, "table": "cohort"}),
        "side": dataset_config({"kind": "sql", "url": nowhere, "table": "lab"}),
        "later": dataset_config({"kind": "sql", "url": pg_url, "table": "later"})}}
    with caplog.at_level(logging.DEBUG):
        async with center(write_toml(tmp_path / "three.toml", config)) as client:
            available, info = await states(client)
            assert available == {"cohort": True, "side": False, "later": False}
            good = await client.post("/v1/datasets/cohort/table", json=TABLE, headers=AUTH)
            assert good.status_code == 200, good.text
            for name in ("side", "later"):
                refused = await client.post(f"/v1/datasets/{name}/table", json=TABLE,
                                            headers=AUTH)
                assert refused.status_code == 503
                assert refused.json()["error"] == "data_source_error"
                assert SECRET not in refused.text and "127.0.0.1" not in refused.text
    line = start_line(caplog)
    assert "reading table lab failed (OperationalError" in line and "Connection refused" in line
    assert "start-up: dataset 'later': table later does not exist" in caplog.text
    assert SECRET not in info and SECRET not in caplog.text


# -- the real processes -------------------------------------------------------------------------


@pytest.mark.process
def test_fedstats_center_serve_starts_with_its_healthy_dataset_and_names_the_broken_one(
    tmp_path: Path, base_config: dict[str, Any], csv_path: Path
) -> None:
    """``fedstats center serve`` with one dataset's file missing: it serves the other, its
    stderr names the missing one with the path and the fix, ``/v1/info`` and the coordinator's
    catalog show it unavailable, its release answers 503; once the file is there it serves."""
    side = tmp_path / "side.csv"
    port = free_port()
    config = center_file(tmp_path, base_config, {"kind": "csv", "path": str(csv_path)},
                         {"kind": "csv", "path": str(side)}, port=port, host="127.0.0.1")
    coordinator, coordinator_port = coordinator_config(
        tmp_path / "coordinator.toml", {"hospital-test": f"http://127.0.0.1:{port}"},
        min_centers=1)
    with open(log_file(config), "ab") as log:
        proc = subprocess.Popen([*fedstats(), "center", "serve", "--config", str(config)],
                                env=clean_env(), stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_healthy(proc, port, config)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH,
                          timeout=60) as client:
            info = client.get("/v1/info")
            assert {d["name"]: d["available"] for d in info.json()["datasets"]} == {
                "cohort": True, "side": False}
            assert client.post("/v1/datasets/cohort/table", json=TABLE).status_code == 200
            refused = client.post("/v1/datasets/side/table", json=TABLE)
            assert refused.status_code == 503
            assert refused.json()["error"] == "data_source_error"
            assert str(side) not in info.text + refused.text
            with running_coordinator(coordinator, coordinator_port), httpx.Client(
                    base_url=f"http://127.0.0.1:{coordinator_port}", timeout=60,
                    headers={"Authorization": f"Bearer {ANALYST_TOKEN}"}) as analyst:
                catalog = analyst.get("/v1/catalog")
                assert catalog.status_code == 200, catalog.text
                parts = {(e["name"], c["center"]): c["available"]
                         for e in catalog.json()["datasets"] for c in e["centers"]}
                assert parts == {("cohort", "hospital-test"): True,
                                 ("side", "hospital-test"): False}
            replace(side, lambda p: write_csv(make_table(seed=10), p))
            assert client.post("/v1/datasets/side/table", json=TABLE).status_code == 200
    finally:
        stop(proc)
    text = log_tail(config)
    assert (f"start-up: dataset 'side': its CSV file {side} does not exist; check "
            "`datasets.side.source.path`") in text
    assert "start-up: serving 1 of 2 datasets; unavailable: 'side'" in text
