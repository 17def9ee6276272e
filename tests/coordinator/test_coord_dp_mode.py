"""The coordinator's side of DP mode (docs/coordinator.md, "A center in DP mode refuses exact
analyses"; docs/privacy.md, "DP mode"), over in-process centers releasing ``cohort`` in DP mode:
each registered analysis says whether it is exact as asked, a study asking an exact analysis is
refused at the dry run and at submission naming the DP alternative (nothing created, nothing
asked of a center but its info), a DP study runs, and every result states each center's lifetime
guarantee, in the text summary and the HTML report (the console's study page draws the same)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest

from coordinator.analyses import REGISTRY, analysis_of
from coordinator.main import create_app
from coordinator.models import StudySpec
from coordinator.reporting.report import render_html, summary
from tests.helpers.coordinator import (
    AUTH,
    SIZES,
    CountingCenter,
    Federations,
    K,
    cohort,
    make_data,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio

BOUNDS = [0.0, 100.0]
EXACT: list[dict[str, Any]] = [
    {"kind": "table"},
    {"kind": "mwu", "tests": ["sum"], "epsilon": 0.5},
    {"kind": "quantiles", "levels": [0.5]},
    {"kind": "describe"},
]
DP: list[dict[str, Any]] = [
    {"kind": "dp_quantiles", "epsilon": 0.5, "bounds": BOUNDS, "levels": [0.25, 0.5, 0.75],
     "group": "trt"},
    {"kind": "describe", "epsilon": 1.0, "bounds": {"crp": BOUNDS}, "bins": 4},
]
ALTERNATIVE = {"table": "dp_boxplot", "mwu": "dp_quantiles", "quantiles": "dp_quantiles",
               "describe": 'describe with mode "dp"'}


def spec(*analyses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
            "analyses": list(analyses), **extra}


def dp_federation(federation: Federations, modes: Mapping[str, str] | None = None,
                  levels: tuple[str, ...] = ("ctl", "trt")) -> dict[str, CountingCenter]:
    """alpha, beta, gamma: ``cohort`` in DP mode (or ``modes[c]``), the sizes of ``levels``
    declared."""
    from coordinator.local import in_process_federation

    data = make_data()
    datasets = {}
    for cid, (x, y) in data.items():
        declared = cohort(federation.data / f"dp-{cid}.parquet", x, y)
        if (modes or {}).get(cid, "dp") == "dp":
            sizes = {"ctl": x.size, "trt": y.size}
            declared.update(release_mode="dp", declared_n=x.size + y.size,
                            declared_n_by_group={v: sizes[v] for v in levels})
        datasets[cid] = {"cohort": declared}
    centers = in_process_federation(datasets, k=K)
    for center in centers.values():
        federation.adopt(center)
    return {cid: CountingCenter(port) for cid, port in centers.items()}


class Running:
    def __init__(self, app: Any, client: httpx.AsyncClient) -> None:
        self.app, self.client = app, client

    async def run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        created = await self.client.post("/v1/studies", json=dict(body), headers=AUTH)
        assert created.status_code == 202, created.text
        study_id = created.json()["id"]
        await self.app.state.services.runner.wait(study_id)
        view = await self.client.get(f"/v1/studies/{study_id}", headers=AUTH)
        assert view.status_code == 200, view.text
        return dict(view.json())


@contextlib.asynccontextmanager
async def serving(tmp_path: Any, centers: Mapping[str, Any]) -> AsyncIterator[Running]:
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield Running(app, client)
        finally:
            await app.state.services.aclose()


def test_each_analysis_says_whether_it_is_exact() -> None:
    """Exact: anything reading the K-anonymous table or spending no ε, and the MWU even with ε
    (its U shows the levels' sizes); the DP analyses are not. Every registered analysis names an
    alternative (the refusal's detail)."""
    asked = StudySpec.model_validate(spec(*EXACT, *DP, {"kind": "dp_boxplot", "epsilon": 1.0,
                                                         "bounds": BOUNDS, "group": "trt"},
                                          {"kind": "mwu", "tests": ["table"]}))
    exact = [analysis_of(a).exact(asked, a) for a in asked.analyses]
    assert exact == [True] * len(EXACT) + [False, False, False, True]
    assert all(a.dp_alternative for a in REGISTRY.values())


async def test_an_exact_study_is_refused_naming_the_alternative(
        federation: Federations, tmp_path: Any) -> None:
    centers = dp_federation(federation)
    async with serving(tmp_path, centers) as r:
        planned = await r.client.post("/v1/studies?dry_run=true", json=spec(*EXACT, *DP),
                                      headers=AUTH)
        assert planned.status_code == 200, planned.text
        plan = planned.json()
        assert plan["would_run"] is False
        refused = [x for x in plan["refusals"] if x["reason"] == "dp_mode_exact"]
        # One per center and exact analysis, blocking, each naming its DP alternative.
        assert sorted((x["center"], int(re.findall(r"analysis (\d+)", x["detail"])[0]))
                      for x in refused) == sorted((c, i) for c in SIZES
                                                  for i in range(len(EXACT)))
        for x in refused:
            assert x["blocking"] is True
            index = int(re.findall(r"analysis (\d+)", x["detail"])[0])
            assert "DP mode" in x["detail"]
            assert ALTERNATIVE[EXACT[index]["kind"]] in x["detail"], x["detail"]
        # No refusal of the DP analyses.
        assert not any(f"analysis {len(EXACT) + i} " in x["detail"]
                       for x in refused for i in range(len(DP)))

        before = {cid: sum(c.calls.values()) for cid, c in centers.items()}
        submitted = await r.client.post("/v1/studies", json=spec({"kind": "quantiles",
                                                                  "levels": [0.5]}),
                                        headers=AUTH)
        assert submitted.status_code == 409, submitted.text
        body = submitted.json()
        assert body["error"] == "would_be_refused"
        assert {x["reason"] for x in body["refusals"]} == {"dp_mode_exact"}
        assert "dp_quantiles" in body["detail"]
        listed = await r.client.get("/v1/studies", headers=AUTH)
        assert listed.status_code == 200 and listed.json() == [], listed.text
        # Nothing but the names and info was asked.
        assert all(set(c.calls) <= {"info", "budget", "health"} for c in centers.values())
        assert all(sum(c.calls.values()) - before[cid] <= 1 for cid, c in centers.items())


async def test_a_mixed_federation_with_allow_partial_leaves_the_dp_center_out(
        federation: Federations, tmp_path: Any) -> None:
    """One center in DP mode, two K-anonymous: with allow_partial the exact study runs on the
    other two (the plan says the DP center would be left out, not blocking; the center refuses
    the exact release itself)."""
    centers = dp_federation(federation, {"beta": "k_anonymous", "gamma": "k_anonymous"})
    body = spec({"kind": "table"}, allow_partial=True)
    async with serving(tmp_path, centers) as r:
        plan = (await r.client.post("/v1/studies?dry_run=true", json=body,
                                    headers=AUTH)).json()
        assert [(x["center"], x["reason"], x["blocking"]) for x in plan["refusals"]] == [
            ("alpha", "dp_mode_exact", False)]
        assert plan["would_run"] is True
        view = await r.run(body)
    assert view["status"] == "succeeded", view.get("error")
    table = view["result"]["analyses"][0]
    assert set(table["center_totals"]) == {"beta", "gamma"}
    # alpha was asked (the run's table protocol asks every surveyed center) and refused
    # before reading anything: left out with its reason, nothing released.
    assert [(e["center"], e["center_error"]) for e in table["excluded"]] == [
        ("alpha", "dp_mode_refuses_exact")]
    assert not centers["alpha"].answers["table"]


async def test_a_dp_study_runs_and_states_each_centers_guarantee(
        federation: Federations, tmp_path: Any) -> None:
    centers = dp_federation(federation)
    async with serving(tmp_path, centers) as r:
        plan = (await r.client.post("/v1/studies?dry_run=true", json=spec(*DP),
                                    headers=AUTH)).json()
        assert plan["would_run"] is True, plan["refusals"]
        view = await r.run(spec(*DP))
        again = await r.run(spec(*DP[:1], title="again"))
    assert view["status"] == "succeeded", view.get("error")
    result = view["result"]
    assert [a["status"] for a in result["analyses"]] == ["succeeded"] * len(DP)
    # What each center's own accountant states now, and the result's copy of it.
    budgets = {cid: (await c.port.budget()).datasets["cohort"] for cid, c in centers.items()}
    stated = {g["center"]: g for g in result["guarantees"]}
    assert list(stated) == list(SIZES)
    # The first study paid 0.5 (quantiles of trt) + 2·1.0 (describe of ctl and trt) per center;
    # the second asked the same quantiles again, answered from the center's stored answer.
    for cid, g in stated.items():
        assert g["release_mode"] == "dp"
        assert g["epsilon_pure"] == pytest.approx(2.5)
        assert g["epsilon_pure"] == pytest.approx(budgets[cid].guarantee.epsilon_pure)
        assert g["method"] == budgets[cid].guarantee.method
        assert g["line"].startswith(f"each patient at center {cid}, dataset cohort: ")
        assert "-DP over all" in g["line"]
        assert "DP mode: every release of the dataset is differentially private" in g["line"]
    assert [g["center"] for g in again["result"]["guarantees"]] == list(SIZES)

    text = summary(view)
    assert "Privacy guarantee (each center's accountant, after this study):" in text
    for g in stated.values():
        assert f"  {g['line']}" in text
    assert "composed by: optimal composition of pure ε-DP releases" in text
    page = render_html(view)
    assert "<h2>Privacy guarantee (each center&#x27;s accountant, after this study)</h2>" in page
    for g in stated.values():
        assert g["line"].replace("'", "&#x27;") in page


async def test_a_k_anonymous_result_says_what_its_guarantee_covers(
        federation: Federations, tmp_path: Any) -> None:
    centers = {cid: CountingCenter(p) for cid, p in federation().items()}
    async with serving(tmp_path, centers) as r:
        view = await r.run(spec({"kind": "table"}, DP[0]))
    assert view["status"] == "succeeded", view.get("error")
    lines = [g["line"] for g in view["result"]["guarantees"]]
    assert len(lines) == 3
    assert all("K-anonymous mode: its exact releases" in line and "not by DP" in line
               for line in lines)
    # One release of ε = 0.5 (the DP quantiles) to date at each center.
    assert all(": ε = 0.5-DP over all 1 noisy releases to date; " in line
               for line in lines), lines


async def test_a_per_center_box_needs_a_declared_size_in_dp_mode(
        federation: Federations, tmp_path: Any) -> None:
    """A DP-mode center's own box takes the declared size of its selection (the whisker
    buffer) and refuses without one: the submission names the size and the field (422
    unknown_name); the pooled box alone needs none and runs."""
    centers = dp_federation(federation, levels=("ctl",))
    box = {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": BOUNDS, "group": "trt"}
    async with serving(tmp_path, centers) as r:
        refused = await r.client.post("/v1/studies", json=spec(box), headers=AUTH)
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["error"] == "unknown_name"
        assert "body.analyses.0.per_center" in body["fields"]
        assert "public size (DP mode" in body["detail"] and "'trt'" in body["detail"]
        view = await r.run(spec({**box, "per_center": False}))
    assert view["status"] == "succeeded", view.get("error")
    assert all(not c.answers["dp_boxplot"] for c in centers.values())


async def test_a_tiny_and_an_empty_level_at_dp_mode_centers_run_and_are_reported(
        federation: Federations, tmp_path: Any) -> None:
    """DP mode has no level "below K": alpha's trt holds no record, beta's two (K is 10), and
    neither center declares a size. A DP study of trt and a DP Table 1 run at all three
    centers and report each (noisy: the honest answer on two records), and the Table 1's
    missing counts come with the descriptions (each center counts records per variable here:
    the noisy missing count with its 95 % interval, no exact count asked of anyone)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from coordinator.local import in_process_federation

    data = make_data()
    trt = {"alpha": 0, "beta": 2, "gamma": data["gamma"][1].size}
    missing_ctl = {"alpha": 30, "beta": 0, "gamma": 12}
    datasets = {}
    for cid, (x, y) in data.items():
        y = y[:trt[cid]]
        crp = np.concatenate([x, np.full(missing_ctl[cid], np.nan), y])
        labels = ["ctl"] * (x.size + missing_ctl[cid]) + ["trt"] * y.size
        path = federation.data / f"small-{cid}.parquet"
        pq.write_table(pa.table({"crp": pa.array(crp, pa.float64()),
                                 "group": pa.array(labels, pa.string())}), path)
        datasets[cid] = {"cohort": {
            **cohort(path, x, y), "source": {"kind": "parquet", "path": str(path)},
            "release_mode": "dp", "missing": "per_variable"}}
    ports = in_process_federation(datasets, k=K)
    for port in ports.values():
        federation.adopt(port)
    centers = {cid: CountingCenter(port) for cid, port in ports.items()}
    analyses = [
        {"kind": "dp_quantiles", "epsilon": 1.0, "bounds": BOUNDS, "levels": [0.5],
         "group": "trt"},
        {"kind": "describe", "epsilon": 2.0, "bounds": {"crp": BOUNDS}, "bins": 4,
         "per_center": True},
        {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": BOUNDS, "group": "trt",
         "per_center": False},
    ]
    async with serving(tmp_path, centers) as r:
        plan = (await r.client.post("/v1/studies?dry_run=true", json=spec(*analyses),
                                    headers=AUTH)).json()
        assert plan["would_run"] is True and not plan["refusals"], plan["refusals"]
        view = await r.run(spec(*analyses))
    assert view["status"] == "succeeded", view.get("error")
    quantiles, described, box = view["result"]["analyses"]
    assert [a["status"] for a in (quantiles, described, box)] == ["succeeded"] * 3
    # Every center answered trt, the empty one and the tiny one included.
    assert set(quantiles["per_center"]) == set(SIZES)
    assert all(0.0 <= v[0] <= 100.0 for v in quantiles["per_center"].values())
    assert box["pooled"]["centers"] == list(SIZES) and not box["excluded"]
    rows = {(row["center"], row["arm"]): row for row in described["rows"]}
    assert {("alpha", "trt"), ("beta", "trt"), ("pooled", "trt")} <= set(rows)
    assert not described["excluded"]
    # The missing counts: noisy, each with its interval; the count part's ε at 2.0 is 0.2
    # (Laplace(5)), so within ± 5·ln(1/1e-7) ≈ 81 of the truth but for 1e-7.
    for cid, m in missing_ctl.items():
        row = rows[(cid, "ctl")]
        assert row["missing_interval"] is not None
        assert abs(row["missing"] - m) <= 81 + 1
    assert rows[("alpha", "trt")]["missing"] is not None
    # No center was asked for an exact missing count (it would refuse it in DP mode).
    assert all(c.calls["missing"] == 0 for c in centers.values())
    text = summary(view)
    assert "missing, n (%)" in text and "interval" in text
