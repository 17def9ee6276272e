"""Missing values counted per variable (``missing = "per_variable"``; docs/privacy.md, guarantee
15): the K rule of ``center_agent.data.missing`` against a per-record reference, and a center
whose releases of a variable count the records where it is present, the missing ones a count of
0 or >= K, with ``/v1/info`` showing the present counts and the version check watching them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
from fastapi import FastAPI

from center_agent.data.missing import available_cases
from tests.helpers.center import AUTH, K, write_csv


def reference(present: list[list[bool]], k: int) -> tuple[list[bool], list[bool]]:
    """The rule by hand, record by record (module docstring of center_agent.data.missing)."""
    n_var = len(present)
    n = len(present[0]) if present else 0
    keep = [True] * n
    withheld = [False] * n_var
    while True:
        size = sum(keep)
        if size < k:
            return [False] * n, withheld
        action = None
        for j in range(n_var):
            if withheld[j]:
                continue
            p = sum(1 for i in range(n) if keep[i] and present[j][i])
            if 0 < size - p < k:
                action = ("drop", j)
                break
            if 0 < p < k:
                withheld[j] = True
                action = ("withhold", j)
        if action is None:
            return keep, withheld
        if action[0] == "drop":
            keep = [keep[i] and present[action[1]][i] for i in range(n)]


@pytest.mark.parametrize("seed", range(60))
def test_every_present_and_missing_count_is_zero_or_k(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    n = int(rng.integers(0, 8 * k))
    n_var = int(rng.integers(1, 5))
    rates = rng.choice([0.0, 0.02, 0.1, 0.5, 0.95], n_var)
    present = rng.random((n_var, n)) >= rates[:, None]
    keep, withheld = available_cases(present, k)
    ref_keep, ref_withheld = reference(present.tolist(), k)
    assert keep.tolist() == ref_keep and withheld.tolist() == ref_withheld
    size = int(keep.sum())
    assert size == 0 or size >= k
    for j in range(n_var):
        p = 0 if withheld[j] else int((present[j] & keep).sum())
        for count in (p, size - p):
            assert count == 0 or count >= k, (j, p, size)


def test_nothing_is_lost_when_every_count_is_already_zero_or_k() -> None:
    present = np.ones((3, 40), dtype=bool)
    present[0, :10] = False  # 10 missing: kept as a released count
    present[2, :] = False  # never recorded: nothing to withhold
    keep, withheld = available_cases(present, 10)
    assert keep.all() and not withheld.any()
    present[1, 20:23] = False  # 3 missing: those 3 records leave the level
    keep, withheld = available_cases(present, 10)
    assert int(keep.sum()) == 37 and not keep[20:23].any() and not withheld.any()
    present[1, :] = False
    present[1, :4] = True  # 4 present: withheld in the level
    keep, withheld = available_cases(present, 10)
    assert keep.all() and withheld.tolist() == [False, True, False]


# -- a center counting per variable ---------------------------------------------------------------


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    """Level a: 40 records, y missing on 12 (released), z missing on 3 and x on 7 (those 10
    leave: K records, so no more leave with them, as 1..K-1 would make K - e more leave, of
    keyed rank, which a count by hand could not follow); level b: 30 records, y missing on
    none, z present on 4 only (withheld in b)."""
    n_a, n_b = 40, 30
    x = np.arange(n_a + n_b, dtype=float) % 7
    y = x.copy()
    y[:12] = np.nan
    z = x.copy()
    z[20:23] = np.nan
    z[n_a + 4:] = np.nan
    x[30:37] = np.nan
    arm = ["a"] * n_a + ["b"] * n_b
    return write_csv(pa.table({"x": x, "y": y, "z": z, "arm": arm}), tmp_path / "cohort.csv")


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    cohort = base_config["datasets"]["cohort"]
    cohort["variables"] = ["x", "y", "z"]
    cohort["missing"] = "per_variable"
    return base_config


@pytest.mark.anyio
async def test_releases_count_the_records_where_the_variable_is_present(
        client: httpx.AsyncClient, app: FastAPI) -> None:
    population = app.state.services.datasets["cohort"].population()
    assert population.sizes == {"a": 30, "b": 30}
    assert population.left_out() == {"a": K, "b": 0}
    assert {v: population.size(v, "a") for v in "xyz"} == {"x": 30, "y": 18, "z": 30}
    assert {v: population.size(v, "b") for v in "xyz"} == {"x": 30, "y": 30, "z": 0}
    assert population.missing("y", "a") == 12
    info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
    assert info["n_by_group"] == {"a": 30, "b": 30}
    assert info["n_by_variable"] == {"x": {"a": 30, "b": 30}, "y": {"a": 10, "b": 30},
                                     "z": {"a": 30, "b": 0}}
    table = (await client.post("/v1/datasets/cohort/table", headers=AUTH, json={
        "variable": "y", "groups": ["a", "b"], "k": K})).json()
    assert [sum(c) for c in table["counts"]] == [18, 30]
    mwu = (await client.post("/v1/datasets/cohort/mwu", headers=AUTH, json={
        "variable": "y", "groups": ["a", "b"]})).json()
    assert (mwu["n_x"], mwu["n_y"]) == (18, 30)
    # The counts for a Table 1, exact, in one place.
    for variable, present in (("y", [18, 30]), ("z", [30, 0])):
        r = await client.post("/v1/datasets/cohort/missing", headers=AUTH,
                              json={"variable": variable})
        assert r.status_code == 200, r.text
        assert r.json() == {"levels": ["a", "b"], "n": [30, 30], "present": present,
                            "missing": [30 - present[0], 30 - present[1]],
                            "complete_cases": False, "k": K}
    r = await client.post("/v1/datasets/cohort/missing", headers=AUTH, json={"variable": "w"})
    assert (r.status_code, r.json()["error"]) == (404, "unknown_variable")
    # z is withheld in b: refused from the public present count (0 in /v1/info).
    r = await client.post("/v1/datasets/cohort/mwu", headers=AUTH, json={
        "variable": "z", "groups": ["a", "b"]})
    assert (r.status_code, r.json()["error"]) == (403, "k_anonymity_refused")
    assert "n_by_variable" in r.json()["detail"]


@pytest.mark.anyio
async def test_a_change_of_a_few_missing_values_is_held(client: httpx.AsyncClient,
                                                        app: FastAPI, csv_path: Path) -> None:
    before = (await client.post("/v1/datasets/cohort/table", headers=AUTH, json={
        "variable": "y", "groups": ["a", "b"], "k": K})).json()
    # A correction: two more values of y in level a set to missing (a count of 1..K-1; in
    # level a, whose 12 missing are released, so that no record leaves: two missing in level b
    # would make K leave b, 2 and K - 2 of keyed rank, a change of K).
    table = pa_csv.read_csv(csv_path)
    y = table.column("y").to_numpy(zero_copy_only=False).copy()
    y[12:14] = np.nan
    write_csv(table.set_column(table.schema.get_field_index("y"), "y", pa.array(y)), csv_path)
    after = (await client.post("/v1/datasets/cohort/table", headers=AUTH, json={
        "variable": "y", "groups": ["a", "b"], "k": K})).json()
    assert after == before  # held: answered from the epoch's data
    gate = app.state.services.gate
    population = app.state.services.datasets["cohort"].population()
    with gate.store.engine.connect() as conn:
        problems = gate.epochs.check(conn, "cohort", population)
    assert any("'y' present or missing in a" in p for p in problems), problems
