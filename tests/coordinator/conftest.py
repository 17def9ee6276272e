"""Fixtures for the coordinator: in-process centers with known data, closed after the test; a
store on each backend. The PostgreSQL schema and the clean environment are
``tests/conftest.py``'s."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from coordinator.db import Store
from tests.helpers.coordinator import Federations, sqlite_url


@pytest.fixture
async def federation() -> AsyncIterator[Federations]:
    """Makes in-process federations; every center made is closed after the test."""
    made = Federations()
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The coordinator's store on SQLite and on PostgreSQL (a throw-away schema)."""
    url = sqlite_url(tmp_path) if request.param == "sqlite" else request.getfixturevalue("pg_url")
    made = Store(url)
    yield made
    made.close()
