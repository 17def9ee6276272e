"""Fixtures for the coordinator: in-process centers with known data, closed after the test. The
PostgreSQL schema and the clean environment are ``tests/conftest.py``'s."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.helpers.coordinator import Federations


@pytest.fixture
async def federation() -> AsyncIterator[Federations]:
    """Makes in-process federations; every center made is closed after the test."""
    made = Federations()
    try:
        yield made
    finally:
        await made.aclose()
