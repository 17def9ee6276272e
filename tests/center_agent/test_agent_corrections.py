"""A correction of one record (a wrong value set to missing): the running center holds the change
and keeps answering from the data of its epoch (nothing of the change shows); the operator's
``fedstats center epoch`` says so and where the guide is; a center started since the change
pauses with the guide named in the error; the change takes effect by itself once later data make
every released set change by 0 or >= K (docs/privacy.md, "Corrections")."""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from center_agent.core.config import load_settings
from center_agent.main import create_app
from fedstats_cli.cli import main
from tests.helpers.center import AUTH, K

pytestmark = pytest.mark.anyio

GUIDE = 'docs/deploy.md, \\"I corrected a value: what now?\\"'
TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def app(config_file: Path) -> AsyncIterator[FastAPI]:
    application = create_app(load_settings(config_file))
    yield application
    application.state.services.close()


async def ask(app: FastAPI, method: str, path: str, body: Any = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
        return await client.request(method, path, json=body, headers=AUTH)


async def test_a_correction_is_held_then_released_with_later_data(
    app: FastAPI, config_file: Path, csv_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    table = await ask(app, "POST", "/v1/datasets/cohort/table", TABLE)
    info = (await ask(app, "GET", "/v1/info")).json()
    assert table.status_code == 200
    rows = rows_of(csv_path)
    fixed = next(i for i, r in enumerate(rows) if r["arm"] == "a" and r["x"] and r["y"]
                 and r["y"] not in ("inf",))
    wrong = rows[fixed]["x"]
    rows[fixed] = {**rows[fixed], "x": ""}  # the operator's correction: the value set to NULL
    write_rows(csv_path, rows)

    # Held: the same answers, new questions from the epoch's data, /v1/info unchanged.
    again = await ask(app, "POST", "/v1/datasets/cohort/table", TABLE)
    assert again.status_code == 200 and again.json() == table.json()
    lower = await ask(app, "POST", "/v1/datasets/cohort/table", {**TABLE, "lower": 0.0})
    assert lower.status_code == 200
    assert [sum(c) for c in lower.json()["counts"]] == [sum(c) for c in table.json()["counts"]]
    mwu = await ask(app, "POST", "/v1/datasets/cohort/mwu",
                    {"variable": "x", "groups": ["a", "b"]})
    assert mwu.status_code == 200 and mwu.json()["n_x"] == sum(table.json()["counts"][0])
    assert (await ask(app, "GET", "/v1/info")).json() == info

    # The operator is told it is held, and where to read what to do.
    assert main(["center", "epoch", "--config", str(config_file)]) == 1
    told = capsys.readouterr().out
    assert "the change is held" in told and GUIDE.replace("\\", "") in told
    assert "size of level 'a' changed by -1" in told
    # A public enrolment minus the size would tell it too: one more record of a left out.
    assert "rows left out of level 'a' changed by +1" in told

    # A center started since the change does not hold the epoch's data: it pauses, naming
    # the guide (the first center's process still answers).
    restarted = create_app(load_settings(config_file))
    try:
        paused = await ask(restarted, "POST", "/v1/datasets/cohort/table", TABLE)
        assert paused.status_code == 409 and paused.json()["error"] == "data_changed"
        assert "I corrected a value: what now?" in paused.json()["detail"]
        assert wrong not in paused.text
        assert (await ask(restarted, "GET", "/v1/info")).json()["datasets"][0]["paused"]
    finally:
        restarted.state.services.close()

    # Later data: K + 1 records where the corrected one was (its level and bin), and K - 1
    # records of its level missing y (the corrected record stays left out: with them, the
    # level's left-out rows change by K, not 1): every released set and every count a public
    # enrolment tells changed by 0 or >= K, so the change takes effect by itself in a new epoch.
    write_rows(csv_path, rows + [{**rows[fixed], "x": wrong}] * (K + 1)
               + [{**rows[fixed], "x": wrong, "y": ""}] * (K - 1))
    after = await ask(app, "POST", "/v1/datasets/cohort/table", TABLE)
    assert after.status_code == 200, after.text
    new_info = (await ask(app, "GET", "/v1/info")).json()["datasets"][0]
    assert new_info["epoch"] == 2 and new_info["paused"] is False
    assert sum(after.json()["counts"][0]) == sum(table.json()["counts"][0]) + K
