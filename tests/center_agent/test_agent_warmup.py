"""Start-up's warm-up (``center_agent.warmup``): every release route and the batch route are
asked once, in process, and refuse by validation; nothing is read, spent or audited."""

from __future__ import annotations

import sys

import httpx
import pytest
from fastapi import FastAPI

from center_agent.warmup import warm_kernels, warm_routes
from tests.helpers.center import AUTH, TOKEN

pytestmark = pytest.mark.anyio

OPERATOR = "op-" + "0123456789abcdef0123"


@pytest.fixture
def base_config(base_config: dict[str, object]) -> dict[str, object]:
    return {**base_config, "operator_tokens": [OPERATOR]}


async def test_warming_the_routes_touches_nothing(client: httpx.AsyncClient, app: FastAPI,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """No route takes the warm-up's empty body (a warning would be logged), and nothing is
    spent or audited."""
    with caplog.at_level("INFO", logger="center_agent.warmup"):
        await warm_routes(app, TOKEN)
    assert [r.levelname for r in caplog.records] == ["INFO"]
    assert "routes warmed" in caplog.records[0].getMessage()
    budget = (await client.get("/v1/budget", headers=AUTH)).json()
    assert budget["datasets"]["cohort"]["spent_epsilon"] == 0.0
    r = await client.get("/v1/audit", headers={"Authorization": f"Bearer {OPERATOR}"})
    assert r.json()["records"] == []


async def test_warming_the_kernels_leaves_nothing_to_compile_for_a_release(
        caplog: pytest.LogCaptureFixture) -> None:
    """After :func:`warm_kernels`, binning, refining and the Mann-Whitney merge at sizes a
    center sees compile no new kernel signature (the first study pays nothing)."""
    import numpy as np

    from shared import _walk
    from shared.binning import bin_table, coarsen_table
    from shared.federation import refine_table
    from shared.mwu import mann_whitney

    if not _walk.AVAILABLE:
        pytest.skip("numba is not installed: the numpy reference runs, nothing to warm")
    with caplog.at_level("INFO", logger="center_agent.warmup"):
        await warm_kernels()
    assert "compiled kernels loaded" in caplog.records[-1].getMessage()
    # The walk's callees are compiled into it; the kernels called from Python are these.
    kernels = (_walk._walk, _walk._ascending, _walk._mwu_merge, _walk._merge_runs,
               _walk._coarsen_keep, _walk._follow)
    signatures = [list(kernel.signatures) for kernel in kernels]
    assert all(signatures)
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=500), rng.normal(size=700)
    table = bin_table(x, y, k=5, rng=rng)
    refine_table(table.limits, rng.normal(size=300), rng.normal(size=200), k=5, rng=rng)
    mann_whitney(np.sort(x), np.sort(y))
    for data in (x, y):
        data.sort()
        data.flags.writeable = False  # as a center keeps its levels
    bin_table(x, y, k=5, rng=rng)
    mann_whitney(x, y)
    levels = np.concatenate([x, y])  # as a center keeps them: one buffer, the arms in it
    levels.flags.writeable = False
    arms = [levels[:x.size], levels[x.size:]]
    bin_table(*arms, k=5, rng=rng)
    mann_whitney(*arms)
    assert _walk.merge_sorted(arms) is not None
    coarsen_table(table, 10)  # a study's K above the center's
    assert [list(kernel.signatures) for kernel in kernels] == signatures
    assert "dp_accounting.pld.privacy_loss_distribution" in sys.modules


async def test_kernels_that_cannot_load_do_not_stop_the_center(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from shared import _walk

    def broken() -> None:
        raise OSError("no space left on device")

    monkeypatch.setattr(_walk, "warm", broken)
    with caplog.at_level("INFO", logger="center_agent.warmup"):
        await warm_kernels()  # returns: the center starts without the head start
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "could not load the compiled kernels" in caplog.records[0].getMessage()
