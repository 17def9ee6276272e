"""The K-anonymous and MWU release endpoints, end to end in process (ASGITransport).

Each answer is checked against the raw data the test can see and against the shared core run
in process on the same arrays: the service adds no arithmetic of its own.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from center_helpers import AUTH, K
from fastapi import FastAPI

from shared.binning import bin_table
from shared.federation import apply_refinement, refined_limits
from shared.mwu import mann_whitney
from shared.protocol import BinTableRelease, MWURelease, RefinementRelease

pytestmark = pytest.mark.anyio

TABLE = "/v1/datasets/cohort/table"
REFINE = "/v1/datasets/cohort/table/refine"
MWU = "/v1/datasets/cohort/mwu"


def arrays(app: FastAPI, variable: str = "x") -> tuple[np.ndarray, np.ndarray]:
    x, y = app.state.services.datasets["cohort"].groups(variable, ("a", "b")).arrays
    return x, y


def counts_in(limits: list[float], values: np.ndarray) -> np.ndarray:
    lim = np.asarray(limits)
    return np.bincount(np.searchsorted(lim[1:-1], values, side="left"), minlength=lim.size - 1)


async def test_own_table_is_k_anonymous_and_true(client: httpx.AsyncClient, app: FastAPI) -> None:
    body = {"variable": "x", "groups": ["a", "b"], "k": K}
    r = await client.post(TABLE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    table = BinTableRelease.model_validate_json(r.content)
    for g, values in enumerate(arrays(app)):
        counts = np.asarray(table.counts[g])
        assert np.all((counts == 0) | (counts >= K))
        np.testing.assert_array_equal(counts, counts_in(table.limits, values))
    # The same request again: the stored answer, not fresh limits to average.
    again = await client.post(TABLE, json=body, headers=AUTH)
    assert again.json() == r.json()


async def test_infinite_limits_cross_the_wire(client: httpx.AsyncClient) -> None:
    body = {"variable": "x", "k": K, "lower": "infinite", "upper": "infinite"}
    r = await client.post(TABLE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["limits"][0] == "-Infinity" and r.json()["limits"][-1] == "Infinity"
    table = BinTableRelease.model_validate_json(r.content)
    assert table.limits[0] == -np.inf and len(table.counts) == 1


async def test_a_second_different_table_is_refused_as_differencing(
    client: httpx.AsyncClient,
) -> None:
    first = await client.post(TABLE, json={"variable": "x", "k": K}, headers=AUTH)
    assert first.status_code == 200
    # Different limits for the same variable would let the two tables be subtracted.
    second = await client.post(TABLE, json={"variable": "x", "k": K + 1}, headers=AUTH)
    assert second.status_code == 409
    assert second.json()["error"] == "differencing_refused"


async def test_table_refusals(client: httpx.AsyncClient) -> None:
    r = await client.post(TABLE, json={"variable": "x", "k": 2}, headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused"
    assert "K >= 10" in r.json()["detail"]
    r = await client.post(TABLE, json={"variable": "x", "groups": ["a", "z"], "k": K},
                          headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_level"
    r = await client.post(TABLE, json={"variable": "weight", "k": K}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_variable"
    r = await client.post(TABLE, json={"variable": "x", "k": K, "lower": 1000.0}, headers=AUTH)
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert "natural `lower` limit" in r.json()["detail"]
    r = await client.post(TABLE, json={"variable": "x", "k": K})
    assert r.status_code == 401


async def test_refinement_release(client: httpx.AsyncClient, app: FastAPI) -> None:
    rng = np.random.default_rng(3)
    existing = bin_table(rng.normal(50, 10, 300), rng.normal(52, 10, 300), k=K, rng=rng)
    body = {"variable": "x", "groups": ["a", "b"], "k": K, "limits": existing.limits.tolist()}
    r = await client.post(REFINE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    release = RefinementRelease.model_validate_json(r.content)
    cells = refined_limits(existing.limits, release)
    for g, values in enumerate(arrays(app)):
        runs = release.runs[g]
        totals = np.asarray(runs.totals)
        assert np.all((totals == 0) | (totals >= K))
        per_cell = counts_in(cells.tolist(), values)
        np.testing.assert_array_equal(
            np.bincount(runs.run_of_cell, weights=per_cell, minlength=totals.size), totals
        )
    merged = apply_refinement(existing, release)
    x, y = arrays(app)
    np.testing.assert_allclose(merged.counts.sum(axis=1), [300 + x.size, 300 + y.size])


async def test_mwu_equals_the_core(client: httpx.AsyncClient, app: FastAPI) -> None:
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"]}, headers=AUTH)
    assert r.status_code == 200, r.text
    release = MWURelease.model_validate_json(r.content)
    core = mann_whitney(*arrays(app))
    assert release.statistic == core.statistic and release.variance == core.variance
    assert (release.n_x, release.n_y, release.noise_variance) == (core.n_x, core.n_y, 0.0)


async def test_noisy_mwu_spends_once(client: httpx.AsyncClient, app: FastAPI) -> None:
    before = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    body = {"variable": "x", "groups": ["a", "b"], "epsilon": 0.5}
    first = await client.post(MWU, json=body, headers=AUTH)
    second = await client.post(MWU, json=body, headers=AUTH)
    assert first.status_code == 200 and first.json() == second.json()
    after = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert after["spent_epsilon"] == pytest.approx(before["spent_epsilon"] + 0.5)
    x, y = arrays(app)
    scale = 2 * max(x.size, y.size) / 0.5
    assert first.json()["noise_variance"] == pytest.approx(2 * scale**2)
    too_much = await client.post(MWU, json={**body, "epsilon": 100.0}, headers=AUTH)
    assert too_much.status_code == 403 and too_much.json()["error"] == "budget_exceeded"


async def test_mwu_bad_input(client: httpx.AsyncClient) -> None:
    r = await client.post(MWU, json={"variable": "x", "groups": ["a"]}, headers=AUTH)
    assert r.status_code == 422
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"], "epsilon": -1},
                          headers=AUTH)
    assert r.status_code == 422 and "epsilon" in r.text
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "a"]}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_level"
