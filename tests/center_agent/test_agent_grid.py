"""A variable declared with a public resolution (``[datasets.X.metadata.v] resolution = r``):
the center's DP quantiles and DP boxplot answer on the grid of r within the request's bounds
(grid-aware JointExp / PrivateQuantile, docs/methods.md §5.2-§5.3), and a question about a
variable without one means what it always meant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from fastapi import FastAPI

from center_agent.gate.kinds import DPBoxplotKind, DPQuantilesKind
from shared.dp import make_grid
from shared.protocol import DPBoxplotRelease, DPQuantilesRelease, DPQuantilesRequest
from tests.helpers.center import AUTH, write_csv

pytestmark = pytest.mark.anyio
DP = "/v1/datasets/cohort/dp"
RESOLUTION = 0.5
BOUNDS = (0.0, 100.0)


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    """x recorded at 0.5 (runs of ties), y at 0.001 (no resolution declared)."""
    rng = np.random.default_rng(23)
    n = 400
    x = np.round(rng.normal(50, 4, n) / RESOLUTION) * RESOLUTION
    y = np.round(rng.exponential(20.0, n), 3)
    arm = rng.choice(np.array(["a", "b"]), n).tolist()
    return write_csv(pa.table({"x": x, "y": y, "arm": arm}), tmp_path / "cohort.csv")


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    cohort = base_config["datasets"]["cohort"]
    cohort["epsilon_total"] = 1000.0
    cohort["epsilon_per_request"] = 100.0
    cohort["metadata"] = {"x": {"unit": "mmHg", "resolution": RESOLUTION}}
    return base_config


def on_grid(values: list[float], bounds: tuple[float, float] = BOUNDS) -> bool:
    grid = make_grid(bounds, RESOLUTION)
    assert grid is not None
    v = np.asarray(values)
    return bool(np.array_equal(grid.points(grid.ranks(v)), v))


@pytest.mark.parametrize("algorithm", ["joint_exp", "private_quantile", "approx_quantile",
                                       "unbounded"])
async def test_dp_quantiles_on_the_declared_grid(client: httpx.AsyncClient, algorithm: str) -> None:
    body = {"variable": "x", "levels": [0.1, 0.5, 0.9], "algorithm": algorithm,
            "epsilon": 1.0, "bounds": list(BOUNDS)}
    r = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    release = DPQuantilesRelease.model_validate_json(r.content)
    assert on_grid(release.values)
    assert all(BOUNDS[0] <= v <= BOUNDS[1] for v in release.values)
    # Bounds off the grid: the grid is the multiples of r clipped into them.
    r = await client.post(f"{DP}/quantiles", json={**body, "bounds": [0.3, 99.9]}, headers=AUTH)
    assert r.status_code == 200, r.text
    values = DPQuantilesRelease.model_validate_json(r.content).values
    assert on_grid(values, (0.3, 99.9))


async def test_grid_quantiles_hit_the_tied_values(client: httpx.AsyncClient, app: FastAPI) -> None:
    """At a large ε the grid-aware median is the sample median, a recorded value."""
    body = {"variable": "x", "levels": [0.5], "epsilon": 50.0, "bounds": list(BOUNDS)}
    r = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    release = DPQuantilesRelease.model_validate_json(r.content)
    x = app.state.services.datasets["cohort"].population().selection("x", None)
    assert release.values[0] == np.quantile(x, 0.5, method="inverted_cdf")


async def test_dp_boxplot_on_the_declared_grid(client: httpx.AsyncClient) -> None:
    body = {"variable": "x", "group": "a", "epsilon": 2.0, "bounds": list(BOUNDS)}
    r = await client.post(f"{DP}/boxplot", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    box = DPBoxplotRelease.model_validate_json(r.content)
    points = [box.lower_whisker, box.q1, box.median, box.q3, box.upper_whisker]
    assert on_grid(points)
    assert points == sorted(points)


async def test_a_variable_without_resolution_is_unchanged(client: httpx.AsyncClient,
                                                          app: FastAPI) -> None:
    """y declares no resolution: its question means the request alone (the request key of an
    existing answer is unchanged) and its quantiles are continuous; x's includes its grid."""
    gate = app.state.services.gate
    dataset = gate.datasets["cohort"]
    kind = DPQuantilesKind()
    y_req = DPQuantilesRequest(variable="y", levels=[0.5], epsilon=1.0, bounds=BOUNDS)
    assert kind.question(gate, dataset, y_req).meaning == y_req.to_payload()
    x_req = DPQuantilesRequest(variable="x", levels=[0.5], epsilon=1.0, bounds=BOUNDS)
    assert kind.question(gate, dataset, x_req).meaning == {**x_req.to_payload(),
                                                           "resolution": RESOLUTION}
    assert DPBoxplotKind().resolution(dataset, x_req) == RESOLUTION  # type: ignore[arg-type]
    body = {"variable": "y", "levels": [0.25, 0.5, 0.75], "epsilon": 1.0, "bounds": list(BOUNDS)}
    r = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert not on_grid(DPQuantilesRelease.model_validate_json(r.content).values)


async def test_bounds_too_wide_for_the_grid_are_a_422_before_any_spending(
        client: httpx.AsyncClient) -> None:
    before = (await client.get("/v1/budget", headers=AUTH)).json()
    body = {"variable": "x", "levels": [0.5], "epsilon": 1.0, "bounds": [-1e15, 1e15]}
    r = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "too fine" in r.json()["detail"]
    assert (await client.get("/v1/budget", headers=AUTH)).json() == before
