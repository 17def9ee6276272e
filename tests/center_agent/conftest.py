"""Fixtures for the center agent: settings over a small CSV dataset and the app in process
(``httpx.ASGITransport``). The PostgreSQL schema and the clean environment are
``tests/conftest.py``'s."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from center_agent.core.config import Settings, load_settings
from center_agent.main import create_app
from tests.helpers.center import (
    OTHER_TOKEN,
    PEER_ID,
    PEER_PUBLIC_KEY,
    TOKEN,
    K,
    dataset_config,
    make_table,
    write_csv,
)
from tests.helpers.config import write_toml

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
