"""Fixtures for the center agent: settings over a small CSV dataset, the app in process
(``httpx.ASGITransport``) and a throw-away PostgreSQL schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from center_helpers import (
    OTHER_TOKEN,
    PEER_ID,
    PEER_PUBLIC_KEY,
    PG_USERS,
    TOKEN,
    K,
    dataset_config,
    make_table,
    write_csv,
    write_toml,
)
from fastapi import FastAPI

from center_agent.core.config import Settings, load_settings
from center_agent.main import create_app


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- data ---------------------------------------------------------------------------------------


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    return write_csv(make_table(), tmp_path / "cohort.csv")


@pytest.fixture
def base_config(tmp_path: Path, csv_path: Path) -> dict[str, Any]:
    return {
        "center_id": "hospital-test",
        "k": K,
        "tokens": [TOKEN, OTHER_TOKEN],
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "peers": {PEER_ID: PEER_PUBLIC_KEY},
        "datasets": {"cohort": dataset_config({"kind": "csv", "path": str(csv_path)})},
    }


@pytest.fixture
def config_file(tmp_path: Path, base_config: dict[str, Any]) -> Path:
    return write_toml(tmp_path / "center.toml", base_config)


@pytest.fixture(autouse=True)
def _clean_center_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FEDSTATS_CENTER_* variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("FEDSTATS_CENTER_"):
            monkeypatch.delenv(name)


@pytest.fixture
def settings(config_file: Path) -> Settings:
    return load_settings(config_file)


@pytest.fixture
def app(settings: Settings) -> Iterator[FastAPI]:
    application = create_app(settings)
    yield application
    application.state.services.close()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        yield c


# -- PostgreSQL ---------------------------------------------------------------------------------


def _pg_base_url() -> str | None:
    for user in PG_USERS:
        url = f"postgresql+psycopg://{user}@127.0.0.1:5432/test"
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("select 1"))
            return url
        except Exception:
            continue
        finally:
            engine.dispose()
    return None


@pytest.fixture(scope="session")
def pg_base_url() -> str:
    url = _pg_base_url()
    if url is None:
        pytest.skip(
            "PostgreSQL not reachable at 127.0.0.1:5432 (database 'test', user postgres or root, "
            "trust auth); PostgreSQL tests skipped"
        )
    return url


@pytest.fixture
def pg_url(pg_base_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped (with everything in it) afterwards."""
    schema = f"fedstats_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{pg_base_url}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


