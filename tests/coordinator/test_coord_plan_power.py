"""The dry run gives each Mann-Whitney analysis's power at the study's ε and the centers' sizes
as they show them (``coordinator.plan.plan_power``; docs/methods.md §3.9), and the CLI shows it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coordinator.models import StudyPlan
from fedstats_cli.catalog import render_plan
from fedstats_client.results import PlanView
from shared.mwu_power import sum_test_power
from tests.coordinator.test_coord_catalog import BASE, counted, serving
from tests.helpers.coordinator import Federations

pytestmark = pytest.mark.anyio


async def test_the_plan_gives_the_sum_tests_power_at_the_studys_epsilon(
        tmp_path: Path, federation: Federations) -> None:
    spec = {**BASE, "analyses": [
        {"kind": "mwu", "tests": ["sum", "fisher"]},
        {"kind": "mwu", "tests": ["sum"], "epsilon": 0.1},
        {"kind": "table"},
    ]}
    async with serving(tmp_path, counted(federation)) as coord:
        plan = (await coord.post(spec, dry_run="true")).json()
    exact, noisy = plan["power"]
    assert (exact["analysis"], noisy["analysis"]) == (0, 1)
    assert exact["epsilon"] is None and noisy["epsilon"] == 0.1
    sizes = [tuple(s) for s in exact["sizes"].values()]
    assert sizes and all(n >= 1 and m >= 1 for n, m in sizes)
    assert set(exact["sizes"]) == {c["center"] for c in plan["centers"]}
    for entry, eps in ((exact, None), (noisy, 0.1)):
        assert entry["thetas"] == [0.6, 0.7] and entry["alpha"] == 0.05
        for theta, power in zip(entry["thetas"], entry["power"], strict=True):
            assert power == pytest.approx(sum_test_power(sizes, theta, epsilon=eps), rel=1e-9)
        assert "Laplace" in entry["method"] and "θ" in entry["detail"]
    assert noisy["power"][0] < exact["power"][0]
    text = render_plan(plan)
    assert "power" in text and "ε = 0.1" in text
    # the Python client's frame
    frame = PlanView(StudyPlan.model_validate(plan)).power_frame()
    assert frame.loc[(1, 0.6), "power"] == noisy["power"][0]
    assert frame.loc[(0, 0.7), "epsilon"] is None or np.isnan(frame.loc[(0, 0.7), "epsilon"])


async def test_a_plan_without_mann_whitney_gives_no_power(
        tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        plan = (await coord.post({**BASE, "analyses": [{"kind": "table"}]},
                                 dry_run="true")).json()
    assert plan["power"] == []


async def test_the_consoles_dry_run_shows_the_power(tmp_path: Path,
                                                    federation: Federations) -> None:
    from tests.console.test_console_pages import builder_post, sign_in

    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        page = await builder_post(coord.client, dataset="cohort", variable="crp",
                                  group_x="ctl", group_y="trt", k="10", analyses="mwu",
                                  action="plan", **{"mwu.epsilon": "0.1"})
    assert page.status_code == 200, page.text[-2000:]
    assert "Power of Mann-Whitney analysis 0:" in page.text and "ε = 0.1" in page.text
