"""Datasets are isolated from each other: a dataset whose source fails answers 503 for itself
only; ``/v1/info`` lists it as unavailable beside the others, which are described and released as
usual. The broken source is a PostgreSQL text column that receives a text value after start-up
(on SQLite without a server), beside a good CSV dataset."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from center_agent.core.config import load_settings
from center_agent.main import create_app
from tests.helpers.center import AUTH, K, dataset_config
from tests.helpers.config import write_toml

pytestmark = pytest.mark.anyio

ROWS = 60
BAD = "twelve point five"


@pytest.fixture(params=["sqlite", "pg"])
def lab_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Table ``lab_iso`` whose variables are TEXT columns holding numbers (as a laboratory
    export may): readable until a text value arrives."""
    url = (f"sqlite:///{tmp_path / 'lab.sqlite'}" if request.param == "sqlite"
           else request.getfixturevalue("pg_url"))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE lab_iso (x TEXT, y TEXT, arm TEXT)")
        conn.execute(sa.text("INSERT INTO lab_iso VALUES (:x, :y, :arm)"),
                     [{"x": f"{i}.5", "y": f"{i % 7}", "arm": "a" if i % 2 else "b"}
                      for i in range(ROWS)])
    engine.dispose()
    return url


def break_lab(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE lab_iso SET x = :bad WHERE y = '3'"), {"bad": BAD})
    engine.dispose()


@pytest.fixture
def app(lab_url: str, base_config: dict[str, Any], tmp_path: Path) -> Iterator[FastAPI]:
    lab = dataset_config({"kind": "sql", "url": lab_url, "table": "lab_iso",
                          "version_ttl_s": 0})
    config = {**base_config, "datasets": {**base_config["datasets"], "lab": lab}}
    application = create_app(load_settings(write_toml(tmp_path / "two.toml", config)))
    yield application
    application.state.services.close()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        yield c


TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}


async def test_a_broken_dataset_answers_503_alone_and_info_shows_each_state(
    client: httpx.AsyncClient, lab_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    info = await client.get("/v1/info", headers=AUTH)
    assert info.status_code == 200
    before = {d["name"]: d for d in info.json()["datasets"]}
    assert before["lab"]["available"] is True and before["cohort"]["available"] is True
    lab_table = await client.post("/v1/datasets/lab/table", json=TABLE, headers=AUTH)
    assert lab_table.status_code == 200, lab_table.text

    break_lab(lab_url)
    info = await client.get("/v1/info", headers=AUTH)
    assert info.status_code == 200, info.text  # was a 503 for the whole center
    after = {d["name"]: d for d in info.json()["datasets"]}
    assert after["lab"]["available"] is False
    assert after["cohort"]["available"] is True and after["cohort"]["paused"] is False
    # The broken dataset shows its epoch's public sizes, as before it broke.
    assert after["lab"]["n_records"] == before["lab"]["n_records"]
    assert after["lab"]["n_by_group"] == before["lab"]["n_by_group"]

    broken = await client.post("/v1/datasets/lab/table", json=TABLE, headers=AUTH)
    assert broken.status_code == 503
    assert broken.json()["error"] == "data_source_error"
    good = await client.post("/v1/datasets/cohort/table", json=TABLE, headers=AUTH)
    assert good.status_code == 200, good.text
    mwu = await client.post("/v1/datasets/cohort/mwu",
                            json={"variable": "x", "groups": ["a", "b"]}, headers=AUTH)
    assert mwu.status_code == 200
    assert BAD not in broken.text and BAD not in info.text and BAD not in caplog.text
    # The operator's log names the column and the SQL fix.
    assert "variable 'x' holds str values" in caplog.text
    assert "cast it in the query" in caplog.text


async def test_the_sql_text_error_at_start_up_says_to_cast_in_the_query(
    lab_url: str, base_config: dict[str, Any], tmp_path: Path
) -> None:
    from center_agent.core.errors import DataSourceError

    break_lab(lab_url)
    config = {**base_config, "datasets": {"lab": dataset_config(
        {"kind": "sql", "url": lab_url, "table": "lab_iso"})}}
    with pytest.raises(DataSourceError) as caught:
        create_app(load_settings(write_toml(tmp_path / "lab.toml", config)))
    detail = caught.value.detail
    assert "variable 'x' holds str values, not numbers" in detail
    assert "cast it in the query" in detail and "docs/deploy.md" in detail
    assert BAD not in detail


async def test_a_dataset_broken_at_start_up_does_not_keep_the_others_down(
    lab_url: str, base_config: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The center restarts while the lab column holds a text value: it starts (the CSV dataset
    is served), logs the lab's problem with its fix, and the lab answers once fixed."""
    break_lab(lab_url)
    lab = dataset_config({"kind": "sql", "url": lab_url, "table": "lab_iso",
                          "version_ttl_s": 0})
    config = {**base_config, "datasets": {**base_config["datasets"], "lab": lab}}
    application = create_app(load_settings(write_toml(tmp_path / "two.toml", config)))
    try:
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
            info = {d["name"]: d for d in
                    (await client.get("/v1/info", headers=AUTH)).json()["datasets"]}
            assert info["lab"]["available"] is False and info["cohort"]["available"] is True
            good = await client.post("/v1/datasets/cohort/table", json=TABLE, headers=AUTH)
            assert good.status_code == 200
            bad = await client.post("/v1/datasets/lab/table", json=TABLE, headers=AUTH)
            assert bad.status_code == 503
            engine = sa.create_engine(lab_url)
            with engine.begin() as conn:  # the operator's fix
                conn.execute(sa.text("UPDATE lab_iso SET x = '1.5' WHERE x = :bad"),
                             {"bad": BAD})
            engine.dispose()
            fixed = await client.post("/v1/datasets/lab/table", json=TABLE, headers=AUTH)
            assert fixed.status_code == 200, fixed.text
    finally:
        application.state.services.close()
    assert "start-up: dataset 'lab': variable 'x' holds str values" in caplog.text
    assert "cast it in the query" in caplog.text and BAD not in caplog.text
