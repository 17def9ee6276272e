"""The dry run gives each DP analysis' 95 % errors at the centers' sizes and the asked ε and
says when they leave it uninformative (``coordinator.utility``; docs/methods.md §9.6); the CLI
and the console show it; the report flags released numbers whose stated uncertainty is above
the share (``coordinator.reporting.report_flags``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.reporting.report import render_html, summary
from coordinator.reporting.report_flags import uninformative_notes
from fedstats_cli.catalog import render_plan
from shared.dp_utility import UNINFORMATIVE_SHARE, box_errors, describe_errors, quantiles_errors
from tests.coordinator.test_coord_catalog import BASE, counted, serving
from tests.helpers.coordinator import Federations

pytestmark = pytest.mark.anyio
BOUNDS = [0.0, 100.0]
RELATION = "add_remove"  # the test federation's centers' (tests.helpers.coordinator)


async def test_the_plan_gives_each_dp_analysis_its_errors(
        tmp_path: Path, federation: Federations) -> None:
    spec = {**BASE, "analyses": [
        {"kind": "dp_boxplot", "epsilon": 0.5, "bounds": BOUNDS, "group": "ctl"},
        {"kind": "dp_quantiles", "epsilon": 50.0, "bounds": BOUNDS, "levels": [0.5]},
        {"kind": "describe", "epsilon": 1.0, "bounds": {"crp": BOUNDS}},
        {"kind": "table"},
    ]}
    async with serving(tmp_path, counted(federation)) as coord:
        answer = await coord.post(spec, dry_run="true")
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    box, quantiles, described = plan["utility"]
    assert [u["analysis"] for u in plan["utility"]] == [0, 1, 2]  # the table spends no ε
    centers = {c["center"] for c in plan["centers"]}
    per_center = [e for e in box["errors"] if e["center"] != "pooled"]
    assert {e["center"] for e in per_center} == centers
    for e in per_center:
        # These centers' relation is add/remove: the outlier counts at Laplace(8/ε).
        expected = {p.part: p for p in box_errors(0.5, e["n"], (0.0, 100.0),
                                                  neighbouring="add_remove")}[e["part"]]
        assert e["n"] > 0 and e["error"] == pytest.approx(expected.error, rel=1e-12)
        assert e["uninformative"] == (e["share"] > UNINFORMATIVE_SHARE)
    pooled = [e for e in box["errors"] if e["center"] == "pooled"]
    assert {e["part"] for e in pooled} == {"quartiles", "outlier counts"}
    assert pooled[0]["n"] == sum(e["n"] for e in per_center if e["part"] == "quartiles")
    # ε 0.5 per box on these centers' sizes: the whisker at ψ alone is hundreds of records off
    assert box["uninformative"] and "UNINFORMATIVE" in box["detail"]
    # a large ε buys precise quantiles
    assert not quantiles["uninformative"] and "within 25 %" in quantiles["detail"]
    for e in quantiles["errors"]:
        (expected,) = quantiles_errors("joint_exp", [0.5], 50.0, e["n"], (0.0, 100.0),
                                       RELATION)
        assert e["error"] == pytest.approx(expected.error)
    # describe: per variable, center and arm (the study's groups), three parts each
    arms = {(e["center"], e["arm"]) for e in described["errors"]}
    assert arms == {(c, a) for c in centers for a in BASE["groups"]}
    for e in described["errors"]:
        part = {p.part: p for p in describe_errors(1.0, e["n"], (0.0, 100.0), RELATION)}[e["part"]]
        assert e["error"] == pytest.approx(part.error) and e["variable"] == "crp"
    # the Python client's frame
    from coordinator.models import StudyPlan
    from fedstats_client.results import PlanView

    frame = PlanView(StudyPlan.model_validate(plan)).utility_frame()
    assert len(frame) == sum(len(u["errors"]) for u in plan["utility"])
    assert frame[frame["analysis"] == 0]["uninformative"].any()
    assert not frame[frame["analysis"] == 1]["uninformative"].any()
    text = render_plan(plan)
    assert "UNINFORMATIVE: what ε buys, analysis 0 (dp_boxplot)" in text
    assert "what ε buys, analysis 1 (dp_quantiles)" in text


async def test_the_consoles_dry_run_warns(tmp_path: Path, federation: Federations) -> None:
    from tests.console.test_console_pages import builder_post, sign_in

    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        page = await builder_post(coord.client, dataset="cohort", variable="crp",
                                  group_x="ctl", group_y="trt", k="10", analyses="dp_boxplot",
                                  action="plan", **{"dp_boxplot.epsilon": "0.5",
                                                    "dp_boxplot.bounds.0": "0",
                                                    "dp_boxplot.bounds.1": "100"})
    assert page.status_code == 200, page.text[-2000:]
    assert "Uninformative: What ε buys, analysis 0 (dp_boxplot)" in page.text


def _view(analysis: dict[str, Any], spec_analysis: dict[str, Any]) -> dict[str, Any]:
    return {"id": "s1", "status": "succeeded", "created_at": "now",
            "spec": {"dataset": "d", "variable": "los", "k": 10, "analyses": [spec_analysis]},
            "result": {"centers": [], "analyses": [analysis]}, "provenance": []}


def _box(n: int, quartiles: float, outliers: float, upper: str = "extreme") -> dict[str, Any]:
    return {"n": n, "lower_outliers": 0, "upper_outliers": 681, "lower_whisker": 0.0, "q1": 1.0,
            "median": 2.0, "q3": 53.1, "upper_whisker": 53.1, "lower_branch": "fence",
            "upper_branch": upper, "epsilon": 0.5, "method": "dpboxplot_one_sided_walk",
            "outlier_halfwidth": outliers, "quartile_rank_halfwidth": quartiles,
            "extreme_rank_halfwidth": 228.4}


def test_the_report_flags_uninformative_releases() -> None:
    analysis = {"kind": "dp_boxplot", "group": None, "spent": {}, "excluded": [],
                "per_center": {"small": _box(120, 38.6, 95.9), "big": _box(5000, 38.6, 95.9)},
                "pooled": None}
    spec = {"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0.0, 100.0]}  # as a study has it
    view = _view(analysis, spec)
    notes = uninformative_notes(view)
    assert any("small · all, quartiles" in n and "± 39 records of n = 120" in n for n in notes)
    assert any("small · all, upper whisker at ψ" in n for n in notes)
    assert any("small · all, outlier counts" in n for n in notes)
    assert not any("big" in n for n in notes)  # 228/5000, 96/5000: informative
    assert "Note: analysis 0 (dp_boxplot), small · all, quartiles" in summary(view)
    assert "small · all, quartiles: its 95 % error" in render_html(view)
    # a fence whisker carries the quartiles' uncertainty: no ψ note
    fence = _view({**analysis, "per_center": {"small": _box(120, 1.0, 1.0, upper="fence")}},
                  spec)
    assert uninformative_notes(fence) == []


def test_the_report_flags_describe_and_quantiles() -> None:
    row = {"variable": "los", "center": "a", "arm": "all", "n": 150, "mean": 10.0,
           "mean_interval": [0.0, 40.0], "rank_halfwidth": 20.0, "n_interval": [140, 160],
           "clip": [0.0, 50.0], "sd": 5.0, "median": 9.0, "q1": 6.0, "q3": 13.0,
           "edges": [0.0, 50.0], "counts": [150.0], "method": "dp", "epsilon": 1.0}
    described = {"kind": "describe", "mode": "dp", "k": 10, "epsilon": 1.0, "excluded": []}
    view = _view({**described, "rows": [row]},
                 {"kind": "describe", "bounds": {"los": [0.0, 100.0]}})
    # N ± 10, quartiles ± 20 of 150, the mean ± 20 of the bounds' 100: all informative
    assert uninformative_notes(view) == []
    wide = _view({**described, "rows": [{**row, "mean_interval": [0, 60]}]},
                 {"kind": "describe", "bounds": {"los": [0.0, 100.0]}})
    assert any("los · a · all, mean" in n and "30 %" in n for n in uninformative_notes(wide))
    # no bounds asked: the widest clip range the rows show
    unasked = _view({**described, "rows": [row]}, {"kind": "describe"})
    assert any("mean" in n and "[0, 50]" in n for n in uninformative_notes(unasked))
    quantiles = _view({"kind": "dp_quantiles", "group": "ctl", "algorithm": "joint_exp",
                       "levels": [0.5], "spent": {}, "excluded": [], "rank_halfwidth":
                       {"a": 30.0, "b": 30.0, "c": None}, "n": {"a": 100, "b": 1000, "c": 50},
                       "per_center": {}}, {"kind": "dp_quantiles", "epsilon": 1.0,
                                          "bounds": [0.0, 100.0], "levels": [0.5],
                                          "group": "ctl"})
    (only,) = uninformative_notes(quantiles)
    assert "a · ctl" in only and "30 %" in only
