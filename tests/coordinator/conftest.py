"""Fixtures for the coordinator: settings over a temporary SQLite store, in-process centers with
known data (closed after the test), the app in process (``httpx.ASGITransport``) and a
throw-away PostgreSQL schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import sqlalchemy as sa
from coordinator_helpers import PG_USERS, Federations


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def federation() -> AsyncIterator[Federations]:
    """Makes in-process federations; every center made is closed after the test."""
    made = Federations()
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture(autouse=True)
def _clean_coordinator_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FEDSTATS_COORDINATOR_* variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("FEDSTATS_COORDINATOR_"):
            monkeypatch.delenv(name)


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
    schema = f"fedstats_coord_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{pg_base_url}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
