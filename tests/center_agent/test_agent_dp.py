"""DP release endpoints: budget debited once per distinct request, answers cached, refusals typed,
and the numbers those of the shared core (same data, the release's own randomness)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from center_agent.core.config import Settings
from center_agent.db import Store, secrets_table
from center_agent.gate import kinds as gate_kinds
from center_agent.gate.keys import RANDOMNESS_SECRET
from shared.dp.pooled import (
    TreeHistogram,
    consistent_leaves,
    grid_edges,
    pooled_quartiles,
    pooled_range,
    sum_trees,
)
from shared.privacy import PrivacySpent
from shared.protocol import (
    DPBoxplotRelease,
    DPQuantilesRelease,
    ExtremesRelease,
    ThresholdCountsRelease,
    TreeHistogramRelease,
)
from tests.helpers.center import AUTH

pytestmark = pytest.mark.anyio
DP = "/v1/datasets/cohort/dp"


@pytest.fixture(autouse=True)
def seeded_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """DP noise from a seeded sequence of generators instead of the OS (the center draws a
    fresh generator per release, ``center_agent.gate.kinds.fresh_rng``): with the fixed secret
    below, every release here is the same on every run, so the checks of plausible values hold
    or fail for good. (With OS noise a box at ε = 0.75 on 70 records falls outside them about
    one run in twenty: at that ε the exponential mechanism often picks a point in the empty
    stretch of the bounds.)"""
    seeds = np.random.SeedSequence(20261201)
    monkeypatch.setattr(gate_kinds, "fresh_rng",
                        lambda: np.random.default_rng(seeds.spawn(1)[0]))


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The conftest's settings over a ledger whose randomness secret is fixed (the keyed
    randomness of the non-DP releases)."""
    store = Store(settings.ledger_url)
    try:
        with store.engine.begin() as conn:
            conn.execute(secrets_table.insert().values(name=RANDOMNESS_SECRET,
                                                       value=bytes(range(32))))
    finally:
        store.close()
    return settings


async def spent(client: httpx.AsyncClient) -> float:
    r = await client.get("/v1/budget", headers=AUTH)
    return float(r.json()["datasets"]["cohort"]["spent_epsilon"])


@pytest.mark.parametrize("algorithm", ["joint_exp", "private_quantile", "approx_quantile",
                                       "unbounded"])
async def test_dp_quantiles_spend_once(client: httpx.AsyncClient, algorithm: str) -> None:
    body = {"variable": "x", "levels": [0.25, 0.5, 0.75], "algorithm": algorithm,
            "epsilon": 0.4, "bounds": [0, 100]}
    before = await spent(client)
    first = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert first.status_code == 200, first.text
    release = DPQuantilesRelease.model_validate_json(first.content)
    assert release.values == sorted(release.values)
    assert all(0 <= v <= 100 for v in release.values)
    second = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert second.json() == first.json()
    assert await spent(client) == pytest.approx(before + 0.4)


async def test_dp_boxplot(client: httpx.AsyncClient, app: FastAPI) -> None:
    body = {"variable": "x", "group": "a", "epsilon": 0.75, "bounds": [-50, 150]}
    r = await client.post(f"{DP}/boxplot", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    box = DPBoxplotRelease.model_validate_json(r.content)
    assert box.lower_whisker <= box.q1 <= box.median <= box.q3 <= box.upper_whisker
    assert sum(p.epsilon for p in box.budget) == pytest.approx(0.75)
    x = app.state.services.datasets["cohort"].population().level("x", "a")
    assert box.n == (x.size // 10) * 10  # public size under add/remove: rounded down to K
    # A plausible box for N(50, 10) data at ε = 0.75 on ~70 records.
    assert 20 < box.median < 80


async def test_budget_is_never_overspent(client: httpx.AsyncClient) -> None:
    # The test dataset holds ε = 3 in all, at most 0.75 per request.
    for i in range(4):
        body = {"variable": "x", "levels": [0.5], "epsilon": 0.75, "bounds": [0, 100 + i]}
        assert (await client.post(f"{DP}/quantiles", json=body, headers=AUTH)).status_code == 200
    body = {"variable": "x", "levels": [0.5], "epsilon": 0.01, "bounds": [0, 1000]}
    r = await client.post(f"{DP}/quantiles", json=body, headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "budget_exceeded"
    assert r.json()["remaining_epsilon"] == pytest.approx(0.0, abs=1e-9)


async def test_dp_bad_input(client: httpx.AsyncClient) -> None:
    base = {"variable": "x", "levels": [0.5], "epsilon": 1.0, "bounds": [0, 100]}
    for bad, field in [({"epsilon": 0}, "epsilon"), ({"epsilon": "nan"}, "epsilon"),
                       ({"bounds": [5, 5]}, "bounds"), ({"levels": [0.5, 0.2]}, "levels"),
                       ({"levels": [1.5]}, "levels"), ({"algorithm": "magic"}, "algorithm")]:
        r = await client.post(f"{DP}/quantiles", json={**base, **bad}, headers=AUTH)
        assert r.status_code == 422, (bad, r.text)
        assert field in r.text
    r = await client.post(f"{DP}/quantiles", json={**base, "group": "zz"}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_level"
    r = await client.post(f"{DP}/tree-histogram", headers=AUTH, json={
        "variable": "x", "epsilon": 1, "bounds": [0, 100], "grid": [0, 100],
        "depth": 16, "branching": 16})
    assert r.status_code == 422 and "65536" in r.text
    # Thresholds out of order are the caller's mistake (a 422), not a 500 from the mechanism.
    r = await client.post(f"{DP}/threshold-counts", headers=AUTH, json={
        "variable": "x", "epsilon": 0.125, "bounds": [0, 100], "lower": 60, "upper": 40})
    assert r.status_code == 422 and "lower" in r.json()["detail"], r.text
    # Bounds whose width overflows (or that lose every digit of the data) are a 422, never a
    # 500 from an overflow in a mechanism.
    for bounds in ([-1.7e308, 1.7e308], [0, 1e30], [-1e16, 0]):
        r = await client.post(f"{DP}/quantiles", json={**base, "bounds": bounds}, headers=AUTH)
        assert r.status_code == 422, (bounds, r.text)
        assert "bounds" in r.json()["detail"]


async def test_pooled_rounds(client: httpx.AsyncClient, app: FastAPI) -> None:
    bounds = [-50.0, 150.0]
    r1 = await client.post(f"{DP}/extremes", headers=AUTH,
                           json={"variable": "x", "epsilon": 0.375, "bounds": bounds})
    ext = ExtremesRelease.model_validate_json(r1.content)
    # Noisy extremes may coincide (a small sample, a small ε): the grid is then the bounds, as
    # the coordinator makes it.
    assert ext.psi_min <= ext.psi_max
    grid = list(pooled_range([(ext.psi_min, ext.psi_max)], (bounds[0], bounds[1])))
    r2 = await client.post(f"{DP}/tree-histogram", headers=AUTH, json={
        "variable": "x", "epsilon": 0.5, "bounds": bounds, "grid": grid,
        "depth": 4, "branching": 4})
    assert r2.status_code == 200, r2.text
    tree = TreeHistogramRelease.model_validate_json(r2.content)
    assert [len(level) for level in tree.levels] == [1, 4, 16, 64, 256]
    leaves = consistent_leaves(sum_trees([TreeHistogram(
        tuple(np.asarray(level) for level in tree.levels), tree.branching, tree.noise_scale,
        PrivacySpent(tree.epsilon))]))
    (q1, med, q3), total = pooled_quartiles(leaves, grid_edges(*grid, 256))
    assert q1 <= med <= q3
    x = app.state.services.datasets["cohort"].population().pooled("x")
    assert abs(total - x.size) < 60  # the consistent root: n + noise of scale 5/0.5
    r3 = await client.post(f"{DP}/threshold-counts", headers=AUTH, json={
        "variable": "x", "epsilon": 0.125, "bounds": bounds, "lower": q1, "upper": q3})
    counts = ThresholdCountsRelease.model_validate_json(r3.content)
    assert counts.below >= 0 and counts.above >= 0
    # The noisy counts as drawn, for the coordinator to sum; the shown ones are them floored.
    assert counts.below_noisy is not None and counts.above_noisy is not None
    assert counts.below == max(0, round(counts.below_noisy))
    with pytest.raises(ValueError, match="floored"):
        counts.model_validate({**counts.model_dump(), "below_noisy": counts.below + 3.0})
    assert await spent(client) == pytest.approx(0.375 + 0.5 + 0.125)
