"""The analyst API in process (``httpx.ASGITransport``): auth, typed errors, background studies
with results and provenance, center faults named in the study, restart and resume."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel
from scipy import stats

from coordinator.core.config import Settings
from coordinator.local import InProcessCenter
from coordinator.main import create_app
from shared import kinds
from shared.mwu import mann_whitney, sum_test
from shared.protocol import MWURequest, RefinementRequest, TableRequest
from tests.helpers.coordinator import (
    ANALYST_TOKEN,
    AUTH,
    CENTER_TOKENS,
    SIZES,
    CountingCenter,
    Federations,
    K,
    admin_auth,
    center_info_json,
    json_response,
    make_data,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio

SPEC: dict[str, Any] = {
    "dataset": "cohort",
    "variable": "crp",
    "groups": ["ctl", "trt"],
    "k": K,
    "analyses": [
        {"kind": "table", "lower": "infinite"},
        {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"]},
    ],
}


def counting_centers(federation: Federations) -> dict[str, CountingCenter]:
    """A new federation over ``make_data()``, each center wrapped to count its calls."""
    return {cid: CountingCenter(port) for cid, port in federation().items()}


async def open_client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://coordinator")


class Running:
    """An app and a client to it; ``close()`` stops its studies, clients and store."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        self.app, self.client = app, client

    async def close(self) -> None:
        await self.client.aclose()
        await self.app.state.services.aclose()

    async def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Create a study, wait for it, return its view."""
        created = await self.client.post("/v1/studies", json=spec, headers=AUTH)
        assert created.status_code == 202, created.text
        study_id = created.json()["id"]
        await self.app.state.services.runner.wait(study_id)
        view = await self.client.get(f"/v1/studies/{study_id}", headers=AUTH)
        assert view.status_code == 200, view.text
        return dict(view.json())


async def start(settings: Settings, **seams: Any) -> Running:
    app = create_app(settings, **seams)
    return Running(app, await open_client(app))


@contextlib.asynccontextmanager
async def serving(settings: Settings, **seams: Any) -> AsyncIterator[Running]:
    """:func:`start`, closed however the block ends."""
    r = await start(settings, **seams)
    try:
        yield r
    finally:
        await r.close()


@pytest.fixture
async def running(tmp_path: Path, federation: Federations) -> AsyncIterator[Running]:
    async with serving(settings_for(sqlite_url(tmp_path)),
                       centers=counting_centers(federation)) as r:
        yield r


def assert_no_secret(text: str) -> None:
    for token in CENTER_TOKENS.values():
        assert token not in text
    assert ANALYST_TOKEN not in text


# -- auth, input, limits ---------------------------------------------------------------------


async def test_health_is_public_everything_else_needs_a_token(running: Running) -> None:
    c = running.client
    assert (await c.get("/v1/health")).json() == {"status": "ok"}
    for method, path in [("GET", "/v1/centers"), ("GET", "/v1/studies"),
                         ("POST", "/v1/studies"), ("GET", "/v1/studies/x")]:
        anonymous = await c.request(method, path)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthenticated"
        wrong = await c.request(method, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        center_token = {"Authorization": f"Bearer {CENTER_TOKENS['alpha']}"}
        assert (await c.request(method, path, headers=center_token)).status_code == 401
    # Outside dev mode the schema and the docs are served to a caller with a token only (the
    # token is checked before routing).
    for path in ("/openapi.json", "/docs"):
        assert (await c.get(path)).status_code == 401
        assert (await c.get(path, headers=AUTH)).status_code == 200
    assert (await c.get("/openapi.json", headers=AUTH)).json()["info"]["title"] == (
        "fedstats coordinator")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"k": 1}, "body.k"),
        ({"analyses": []}, "body.analyses"),
        ({"analyses": [{"kind": "ttest"}]}, "body.analyses.0"),
        ({"analyses": [{"kind": "mwu", "tests": ["median"]}]}, "body.analyses.0.mwu.tests.0"),
        ({"groups": None, "analyses": [{"kind": "mwu"}]}, "groups"),
        ({"groups": ["ctl", "ctl"]}, "body.groups"),
        ({"dataset": "../etc"}, "body.dataset"),
        ({"variable": "crp; drop"}, "body.variable"),
        ({"analyses": [{"kind": "table", "lower": "Infinity"}]}, "body.analyses.0.table.lower"),
        ({"surprise": 1}, "body.surprise"),
        ({"analyses": [{"kind": "table"}, {"kind": "table", "upper": 10.0}]}, "same way"),
        ({"analyses": [{"kind": "mwu", "epsilon": 0}]}, "body.analyses.0.mwu.epsilon"),
        ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1}]}, "body.analyses.0.dp_boxplot.bounds"),
        ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1, "bounds": [5, 1]}]}, "bounds must"),
        ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1e9, "bounds": [0, 1]}]},
         "body.analyses.0.dp_boxplot.epsilon"),
        ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1e-6, "bounds": [0, 1]}]},
         "body.analyses.0.dp_boxplot.epsilon"),  # its ε/8 round would be refused at the wire
        ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1, "bounds": [0, 1],
                        "per_center": False, "pooled": False}]}, "or both"),
        ({"analyses": [{"kind": "quantiles", "levels": [0.5, 0.25]}]}, "strictly increasing"),
        ({"analyses": [{"kind": "dp_quantiles", "epsilon": 1, "bounds": [0, 1],
                        "levels": [0.5], "algorithm": "magic"}]},
         "body.analyses.0.dp_quantiles.algorithm"),
        ({"analyses": [{"kind": "dp_quantiles", "epsilon": 1, "bounds": [0, 1],
                        "levels": [0, 0.5]}]}, "inside (0, 1)"),
        ({"analyses": [{"kind": "quantiles", "levels": [1.0]}]}, "inside (0, 1)"),
        ({"analyses": [{"kind": "quantiles", "levels": [0.5], "estimators": ["mean"]}]},
         "body.analyses.0.quantiles.estimators.0"),
    ],
)
async def test_bad_specs_are_422_naming_the_field(
    running: Running, change: dict[str, Any], field: str
) -> None:
    answer = await running.client.post("/v1/studies", json={**SPEC, **change}, headers=AUTH)
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] == "validation_error" and field in body["detail"]


async def test_unknown_centers_and_studies(running: Running) -> None:
    c = running.client
    unknown = await c.post("/v1/studies", json={**SPEC, "centers": ["alpha", "zeta"]},
                           headers=AUTH)
    assert unknown.status_code == 422 and unknown.json()["error"] == "invalid_study"
    assert "zeta" in unknown.json()["detail"]
    too_few = await c.post("/v1/studies", json={**SPEC, "centers": ["alpha"]}, headers=AUTH)
    assert too_few.status_code == 422 and "at least 2" in too_few.json()["detail"]
    missing = await c.get("/v1/studies/" + "0" * 32, headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"] == "study_not_found"
    assert (await c.get("/v1/nowhere", headers=AUTH)).json()["error"] == "not_found"


async def test_request_size_limit(running: Running) -> None:
    big = {**SPEC, "variable": "x" * 200_000}
    answer = await running.client.post("/v1/studies", json=big, headers=AUTH)
    assert answer.status_code == 413 and answer.json()["error"] == "request_too_large"


# -- studies ---------------------------------------------------------------------------------


async def test_a_study_runs_in_the_background_with_results_and_provenance(
    running: Running,
) -> None:
    c = running.client
    created = await c.post("/v1/studies", json=SPEC, headers=AUTH)
    assert created.status_code == 202
    body = created.json()
    assert body["status"] == "pending"
    assert body["status_url"].endswith(f"/v1/studies/{body['id']}")
    assert created.headers["Location"] == body["status_url"]
    await running.app.state.services.runner.wait(body["id"])
    admin = admin_auth(running.app)  # an admin reads every raw answer (an analyst does not)
    answer = await c.get(body["status_url"], headers=admin)
    view = answer.json()
    assert view["status"] == "succeeded", view
    assert_no_secret(answer.text)
    json.loads(answer.text)  # standard JSON: infinite limits are the strings "±Infinity"
    table, mwu = view["result"]["analyses"]
    assert table["kind"] == "table" and table["limits"][0] == "-Infinity"
    assert table["order"] == ["alpha", "beta", "gamma"]
    assert table["totals"] == pytest.approx([sum(SIZES.values())] * 2)
    # Every count a center released (its table's counts, its refinement's run totals) is 0 or
    # >= K; the federated table shares run totals out over cells, so its counts are not.
    released = [(p["call"], p["response"]) for p in view["provenance"]]
    counted = [row for call, r in released if call == "table" for row in r["counts"]] + [
        runs["totals"] for call, r in released if call == "refine" for runs in r["runs"]]
    assert len(counted) == 2 * 3  # two groups, three centers
    assert all(v == 0 or v >= K for row in counted for v in row)

    data = make_data()
    expected = sum_test([mann_whitney(x, y) for x, y in data.values()])
    assert mwu["tests"]["sum"]["pvalue"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert [p["center"] for p in mwu["tests"]["weighted"]["parts"]] == ["alpha", "beta", "gamma"]
    # The table test ran on the study's one table (the table analysis's, open below).
    assert mwu["table"] == table
    assert mwu["tests"]["fisher"]["df"] == 2 * len(data) and mwu["tests"]["sum"]["df"] is None
    # Effect sizes: each center's probabilistic index, then the stratified one, computed from
    # the raw data here.
    effects = {e["center"]: e for e in mwu["effects"]}
    assert list(effects) == ["alpha", "beta", "gamma", "stratified"]
    for cid, (x, y) in data.items():
        u = stats.mannwhitneyu(y, x).statistic  # #(Y > X) + ½#ties
        assert effects[cid]["estimate"] == pytest.approx(u / (len(x) * len(y)), rel=1e-12)
        assert (effects[cid]["n_x"], effects[cid]["n_y"]) == (len(x), len(y))
        assert effects[cid]["low"] < effects[cid]["estimate"] < effects[cid]["high"]
    pairs = sum(len(x) * len(y) for x, y in data.values())
    assert effects["stratified"]["estimate"] == pytest.approx(
        sum(stats.mannwhitneyu(y, x).statistic for x, y in data.values()) / pairs, rel=1e-12)

    calls = {(p["center"], p["call"]) for p in view["provenance"]}
    assert {("alpha", "info"), ("alpha", "table"), ("beta", "refine"), ("gamma", "refine"),
            ("alpha", "mwu"), ("beta", "mwu"), ("gamma", "mwu")} <= calls
    refine = next(p for p in view["provenance"] if p["call"] == "refine")
    assert refine["dataset"] == "cohort" and refine["request"]["variable"] == "crp"
    assert "runs" in refine["response"]
    assert view["releases_received"] == len(view["provenance"])
    brief = (await c.get(body["status_url"], params={"provenance": "false"},
                         headers=admin)).json()  # for polling: the same, without the answers
    assert brief["provenance"] is None
    assert brief["reproducibility"] is None  # it is read from the answers too
    assert {**brief, "provenance": view["provenance"],
            "reproducibility": view["reproducibility"]} == view

    listed = (await c.get("/v1/studies", headers=AUTH)).json()
    assert [s["id"] for s in listed] == [body["id"]] and listed[0]["status"] == "succeeded"
    fingerprint = hashlib.sha256(ANALYST_TOKEN.encode()).hexdigest()[:16]
    # The configured token's analyst owns it.
    assert listed[0]["created_by"] == view["created_by"] == f"config-{fingerprint}"
    assert (await c.get("/v1/studies?status=failed", headers=AUTH)).json() == []


async def test_nothing_is_asked_twice_within_a_study(running: Running) -> None:
    # Two table analyses, quantiles and an MWU with the table test: one table and one
    # refinement per center, one info each (asked when the study's names are checked at
    # submission; the study's survey takes that answer instead of asking again).
    spec = {**SPEC, "analyses": [{"kind": "table"}, {"kind": "table"},
                                 {"kind": "quantiles", "levels": [0.25, 0.5, 0.75]},
                                 {"kind": "mwu", "tests": ["table", "sum"]}]}
    view = await running.run(spec)
    assert view["status"] == "succeeded"
    quantiles = view["result"]["analyses"][2]
    assert sorted(quantiles["estimates"]) == sorted(
        ["yj_table", "interpolation", "extrapolation", "yj_shaped"])
    medians = [quantiles["estimates"][e]["trt"]["quantiles"][1] for e in quantiles["estimates"]]
    assert all(45 < m < 60 for m in medians)
    centers = running.app.state.services.centers
    # (and, after it, each center's budget once: the lifetime guarantee the result states)
    assert {cid: dict(c.calls) for cid, c in centers.items()} == {
        "alpha": {"info": 1, "table": 1, "mwu": 1, "budget": 1},
        "beta": {"info": 1, "refine": 1, "mwu": 1, "budget": 1},
        "gamma": {"info": 1, "refine": 1, "mwu": 1, "budget": 1},
    }
    # The survey's answers are the study's record all the same (its provenance lists them).
    provenance = (await running.client.get(f"/v1/studies/{view['id']}",
                                           headers=AUTH)).json()["provenance"]
    assert sorted(p["center"] for p in provenance if p["call"] == "info") == [
        "alpha", "beta", "gamma"]


async def test_a_center_slower_than_the_names_check_is_still_asked_once(
        running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    """gamma's info comes after the submission stopped waiting for it (a loaded machine): the
    study's survey takes that answer when it comes instead of asking gamma again."""
    from coordinator import runner

    monkeypatch.setattr(runner, "NAMES_WAIT_S", 0.01)
    gamma = running.app.state.services.centers["gamma"]
    gamma.gate = asyncio.Event()  # gamma answers nothing until the submission has returned
    created = await running.client.post("/v1/studies", json=SPEC, headers=AUTH)
    assert created.status_code == 202, created.text
    assert gamma.calls["info"] == 1
    gamma.gate.set()
    await running.app.state.services.runner.wait(created.json()["id"])
    view = (await running.client.get(f"/v1/studies/{created.json()['id']}",
                                     headers=AUTH)).json()
    assert view["status"] == "succeeded", view
    assert {cid: c.calls["info"] for cid, c in running.app.state.services.centers.items()} == {
        "alpha": 1, "beta": 1, "gamma": 1}


async def test_a_dp_boxplot_study(running: Running) -> None:
    spec = {**SPEC, "analyses": [{"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0, 100],
                                  "group": "trt"}]}
    view = await running.run(spec)
    assert view["status"] == "succeeded", view
    boxes = view["result"]["analyses"][0]
    assert boxes["kind"] == "dp_boxplot" and boxes["group"] == "trt"
    assert sorted(boxes["per_center"]) == ["alpha", "beta", "gamma"]
    pooled = boxes["pooled"]
    assert pooled["method"] == "pooled_dp_boxplot" and pooled["epsilon"] == 0.5
    assert pooled["lower_whisker"] <= pooled["q1"] <= pooled["median"] <= pooled["q3"]
    assert boxes["spent"] == {"alpha": 1.0, "beta": 1.0, "gamma": 1.0}
    # Every DP count carries its 95 % half-width: Laplace(8/ε) per center's outlier count
    # (the pair at ε/8 under add/remove, these centers' relation), the sum of three centers'
    # Laplace counts for the pooled one.
    for box in boxes["per_center"].values():
        assert box["outlier_halfwidth"] == pytest.approx(8 / 0.5 * math.log(20), rel=1e-12)
    assert pooled["outlier_halfwidth"] > 0
    # Every box part states its uncertainty: the pooled n (the consistent root count, a DP
    # count); a center's n is a public size. The pooled whiskers are Tukey's, read off the
    # tree (its rank half-width), never at a walk's ψ: no ψ bound.
    from coordinator.reporting.report import summary

    assert pooled["extreme_rank_halfwidth"] is None
    assert {pooled["lower_branch"], pooled["upper_branch"]} <= {"fence", "record"}
    assert pooled["n_halfwidth"] > 0 and pooled["quartile_rank_halfwidth"] > 0
    assert all(b["n_halfwidth"] is None and b["extreme_rank_halfwidth"] > 0
               for b in boxes["per_center"].values())
    h = math.ceil(pooled["n_halfwidth"])
    assert f"{pooled['n']} [{max(0, pooled['n'] - h)}, {pooled['n'] + h}]" in summary(view)
    # the pooled whiskers are labelled as what they are: Tukey's, outliers beyond the fences
    from coordinator.reporting.rendering import POOLED_WHISKER_RULE

    assert POOLED_WHISKER_RULE in summary(view)
    calls = [p["call"] for p in view["provenance"] if p["center"] == "beta"]
    assert sorted(calls) == ["dp_boxplot", "dp_extremes", "dp_threshold_counts",
                             "dp_tree_histogram", "info"]

    figure = f"/v1/studies/{view['id']}/analyses/0/figure"
    svg = await running.client.get(figure, headers=AUTH)
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert svg.content.startswith(b"<?xml") and b"pooled" in svg.content
    png = await running.client.get(figure + "?format=png", headers=AUTH)
    assert png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"
    for bad, status in [("/analyses/1/figure", 404), ("/analyses/0/figure?format=gif", 422),
                        ("/analyses/-1/figure", 422)]:
        answer = await running.client.get(f"/v1/studies/{view['id']}{bad}", headers=AUTH)
        assert answer.status_code == status
    assert (await running.client.get(figure)).status_code == 401


async def test_a_dp_quantiles_study(running: Running) -> None:
    spec = {**SPEC, "analyses": [{"kind": "dp_quantiles", "epsilon": 2.0, "bounds": [0, 100],
                                  "levels": [0.5], "group": "ctl"}]}
    view = await running.run(spec)
    assert view["status"] == "succeeded", view
    result = view["result"]["analyses"][0]
    assert result["algorithm"] == "joint_exp" and result["levels"] == [0.5]
    assert sorted(result["per_center"]) == ["alpha", "beta", "gamma"]
    assert all(35 < v[0] < 65 for v in result["per_center"].values())
    assert result["spent"] == {"alpha": 2.0, "beta": 2.0, "gamma": 2.0}
    # JointExp at one level, ε = 2, add/remove: Δ = 1, a bridge of two Laplace(1) steps, i.e.
    # Laplace(½): ln(20)/2 records. n is each center's size, rounded down to K.
    assert result["rank_halfwidth"] == pytest.approx(
        {c: math.log(20) / 2 for c in ("alpha", "beta", "gamma")}, rel=1e-8)
    data = make_data()
    assert result["n"] == {c: len(x) // K * K for c, (x, _) in data.items()}


async def test_an_unknown_dataset_is_refused_at_submission_naming_the_centers(
    running: Running,
) -> None:
    # Checked against the centers' declarations before any study exists (a center that
    # stopped declaring it later is relayed as the center's error: test_coord_e2e).
    refused = await running.client.post("/v1/studies", json={**SPEC, "dataset": "nope"},
                                        headers=AUTH)
    assert refused.status_code == 422 and refused.json()["error"] == "unknown_name"
    assert "'nope'" in refused.json()["detail"]
    assert "alpha, beta, gamma" in refused.json()["detail"]
    assert (await running.client.get("/v1/studies", headers=AUTH)).json() == []


# -- faults over HTTP (MockTransport) --------------------------------------------------------


def healthy_center(
    center_id: str, data: Any, port: InProcessCenter
) -> Callable[[httpx.Request], Any]:
    """A fake center answering with an in-process center's releases (the same wire bodies,
    signed statements included), one route per kind: it has no batch route, as a center from
    before batching, so the coordinator asks it one by one."""

    async def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {CENTER_TOKENS[center_id]}"
        path = request.url.path
        if path == "/v1/health":
            return json_response(200, {"status": "ok"})
        if path == "/v1/budget":
            return json_response(200, {"datasets": {"cohort": {
                "total_epsilon": 3.0, "spent_epsilon": 1.0, "remaining_epsilon": 2.0}}})
        if path == "/v1/info":
            n_x, n_y = (int(a.size) // K * K for a in data)
            return json_response(200, center_info_json(center_id, n_x, n_y))
        if path.endswith("/releases"):
            return json_response(404, {"error": "not_found", "detail": "Not Found"})
        body = request.read()
        out: BaseModel
        if path.endswith("/table"):
            out = await port.release(kinds.TABLE, "cohort",
                                     TableRequest.model_validate_json(body))
        elif path.endswith("/refine"):
            out = await port.release(kinds.REFINE, "cohort",
                                     RefinementRequest.model_validate_json(body))
        else:
            out = await port.release(kinds.MWU, "cohort", MWURequest.model_validate_json(body))
        return httpx.Response(200, content=out.model_dump_json().encode())

    return handle


def broken(kind: str) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        if kind == "down":
            raise httpx.ConnectError("[Errno 111] Connection refused")
        if kind == "timeout" and request.method == "POST":
            raise httpx.ReadTimeout("timed out")
        if request.url.path == "/v1/info":
            return json_response(200, center_info_json("beta", 190, 190))
        if kind == "500":
            return json_response(500, {"error": "internal_error", "detail": "boom"})
        if kind == "malformed":
            return httpx.Response(200, content=b'{"statistic": "lots"}')
        if kind == "refusal":  # a privacy refusal a center answers today (409)
            return json_response(409, {"error": "data_changed",
                                       "detail": "the data changed; releases wait for the "
                                                 "operator's new epoch"})
        raise AssertionError(kind)

    return handle


def transports(beta: Callable[[httpx.Request], Any], federation: Federations) -> dict[str, Any]:
    """Alpha and gamma healthy (one federation: gamma refines what alpha signed), beta as
    given."""
    data = make_data()
    healthy = federation({cid: data[cid] for cid in ("alpha", "gamma")})
    return {
        "alpha": httpx.MockTransport(healthy_center("alpha", data["alpha"], healthy["alpha"])),
        "beta": httpx.MockTransport(beta),
        "gamma": httpx.MockTransport(healthy_center("gamma", data["gamma"], healthy["gamma"])),
    }


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("down", "unreachable"), ("timeout", "timeout"), ("500", "error"),
     ("malformed", "malformed"), ("refusal", "refused")],
)
async def test_a_failing_center_fails_the_study_naming_it(
    tmp_path: Path, federation: Federations, fault: str, kind: str
) -> None:
    async with serving(settings_for(sqlite_url(tmp_path)),
                       transports=transports(broken(fault), federation)) as r:
        spec = {**SPEC, "analyses": [{"kind": "mwu", "tests": ["sum", "table"]}]}
        view = await r.run(spec)
        assert view["status"] == "failed"
        assert (view["error"]["center"], view["error"]["kind"]) == ("beta", kind)
        assert "beta" in view["error"]["detail"]
        assert_no_secret(json.dumps(view))
        partial = await r.run({**spec, "allow_partial": True})
        assert partial["status"] == "succeeded", partial
        mwu = partial["result"]["analyses"][0]
        assert [p["center"] for p in mwu["tests"]["sum"]["parts"]] == ["alpha", "gamma"]
        assert {(e["center"], e["kind"]) for e in mwu["excluded"]} == {("beta", kind)}


async def test_centers_listing_shows_health_and_budgets(
    tmp_path: Path, federation: Federations
) -> None:
    async with serving(settings_for(sqlite_url(tmp_path)),
                       transports=transports(broken("down"), federation)) as r:
        answer = await r.client.get("/v1/centers", headers=AUTH)
        assert answer.status_code == 200
        by_id = {c["id"]: c for c in answer.json()}
        assert by_id["alpha"]["healthy"] and by_id["alpha"]["remaining_epsilon"] == {
            "cohort": 2.0}
        assert by_id["alpha"]["url"] == "http://alpha.test:8700"
        assert not by_id["beta"]["healthy"] and by_id["beta"]["problem"]["kind"] == "unreachable"
        assert_no_secret(answer.text)


async def test_concurrent_listings_share_one_round_of_questions(
    tmp_path: Path, federation: Federations
) -> None:
    centers = counting_centers(federation)
    gate = asyncio.Event()
    for center in centers.values():
        center.gate = gate  # every center call waits until the 20 listings are all in
    async with serving(settings_for(sqlite_url(tmp_path)), centers=centers) as r:
        listings = [asyncio.ensure_future(r.client.get("/v1/centers", headers=AUTH))
                    for _ in range(20)]
        while not all(c.calls["health"] for c in centers.values()):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # the other listings arrive while the round is in flight
        gate.set()
        answers = [(await listing).json() for listing in listings]
        assert all(answer == answers[0] for answer in answers)
        assert {c["id"] for c in answers[0]} == set(centers) and all(
            c["healthy"] for c in answers[0])
        assert all(c.calls == {"health": 1, "budget": 1, "info": 1} for c in centers.values())
        await r.client.get("/v1/centers", headers=AUTH)  # a later listing asks again
        assert all(c.calls["health"] == 2 for c in centers.values())


# -- restart ---------------------------------------------------------------------------------


class StuckRefine(CountingCenter):
    """Answers everything except a refinement, which never returns (a process about to die)."""

    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        if kind is not kinds.REFINE:
            return await super().release(kind, dataset, request)
        self.calls["refine"] += 1
        await asyncio.Event().wait()


def stuck_at_gamma(federation: Federations) -> dict[str, CountingCenter]:
    """:func:`counting_centers`, gamma's refinement never returning (:class:`StuckRefine`)."""
    centers = counting_centers(federation)
    centers["gamma"] = StuckRefine(centers["gamma"].port)
    return centers


async def test_a_study_interrupted_by_a_restart_is_resumable_and_asks_nothing_twice(
    tmp_path: Path, federation: Federations
) -> None:
    settings = settings_for(sqlite_url(tmp_path))
    first_centers = stuck_at_gamma(federation)
    first = await start(settings, centers=first_centers)
    # The MWU table test uses the same table as the table analysis (both buffered).
    spec = {**SPEC, "analyses": [{"kind": "table"}, {"kind": "mwu"}]}
    created = await first.client.post("/v1/studies", json=spec, headers=AUTH)
    study_id = created.json()["id"]
    while first_centers["gamma"].calls["refine"] == 0:
        await asyncio.sleep(0.01)
    view = (await first.client.get(f"/v1/studies/{study_id}", headers=AUTH)).json()
    assert view["status"] == "running"
    # "Kill" the first process: its task dies without any clean-up of the study's record.
    for task in list(first.app.state.services.runner._tasks.values()):
        task.cancel()
    await asyncio.sleep(0)
    await first.client.aclose()

    # The restarted coordinator talks to the same centers (gamma refines the table beta
    # signed for the first process), through new counters.
    second_centers = {cid: CountingCenter(c.port) for cid, c in first_centers.items()}
    second = await start(settings, centers=second_centers)
    try:
        view = (await second.client.get(f"/v1/studies/{study_id}", headers=AUTH)).json()
        assert view["status"] == "failed_resumable" and view["error"]["error"] == "interrupted"
        received = {(p["center"], p["call"]) for p in view["provenance"]}
        assert ("beta", "refine") in received and ("gamma", "refine") not in received

        resumed = await second.client.post(f"/v1/studies/{study_id}/resume", headers=AUTH)
        assert resumed.status_code == 202
        await second.app.state.services.runner.wait(study_id)
        view = (await second.client.get(f"/v1/studies/{study_id}", headers=AUTH)).json()
        assert view["status"] == "succeeded", view
        # Only what the first run did not receive was asked for, once. (The MWU ran
        # concurrently with the table: whether its answers arrived before the "kill" varies.)
        asked = {(cid, call) for cid, c in second_centers.items() for call in c.calls}
        assert all(n == 1 for c in second_centers.values() for n in c.calls.values())
        assert not asked & received
        assert ("gamma", "refine") in asked
        assert {(cid, "mwu") for cid in second_centers} <= asked | received
        table = view["result"]["analyses"][0]
        assert table["totals"] == pytest.approx([sum(SIZES.values())] * 2)

        again = await second.client.post(f"/v1/studies/{study_id}/resume", headers=AUTH)
        assert again.status_code == 409 and again.json()["error"] == "conflict"
    finally:
        await second.close()
        await first.app.state.services.aclose()


async def test_too_many_running_studies_are_refused(
    tmp_path: Path, federation: Federations
) -> None:
    centers = stuck_at_gamma(federation)
    async with serving(settings_for(sqlite_url(tmp_path), max_running_studies=1),
                       centers=centers) as r:
        first = await r.client.post("/v1/studies", json=SPEC, headers=AUTH)
        assert first.status_code == 202
        busy = await r.client.post("/v1/studies", json=SPEC, headers=AUTH)
        assert busy.status_code == 503 and busy.json()["error"] == "busy"
        assert busy.headers["Retry-After"] == "30"


async def test_shutdown_leaves_running_studies_resumable(
    tmp_path: Path, federation: Federations
) -> None:
    centers = stuck_at_gamma(federation)
    r = await start(settings_for(sqlite_url(tmp_path)), centers=centers)
    study_id = (await r.client.post("/v1/studies", json=SPEC, headers=AUTH)).json()["id"]
    while centers["gamma"].calls["refine"] == 0:
        await asyncio.sleep(0.01)
    await r.close()
    record = r.app.state.services.store.get_study(study_id)
    assert record is not None and record.status == "failed_resumable"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/studies", b"{not json", 422),
        ("POST", "/v1/studies", b"[]", 422),
        ("POST", "/v1/studies", b"", 422),
        ("GET", "/v1/studies?limit=abc", None, 422),
        ("GET", "/v1/studies?limit=0", None, 422),
        ("GET", "/v1/studies?offset=9223372036854775808", None, 422),  # found by schemathesis
        ("GET", "/v1/studies?status=bogus", None, 422),
        ("GET", "/v1/studies/%00%2F..%2Fetc", None, 404),
        ("POST", "/v1/studies/" + "f" * 32 + "/resume", None, 404),
        ("GET", "/v1/studies/" + "f" * 32 + "/analyses/0/figure", None, 404),
        ("DELETE", "/v1/studies", None, 405),
    ],
)
async def test_odd_requests_get_typed_errors_never_a_500(
    running: Running, method: str, path: str, body: bytes | None, status: int
) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    answer = await running.client.request(method, path, content=body, headers=headers)
    assert answer.status_code == status
    assert set(answer.json()) >= {"error", "detail"}
    assert "Traceback" not in answer.text


class Buggy(CountingCenter):
    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        if kind is kinds.MWU:
            raise RuntimeError("secret internals /srv/data/cohort.csv")
        return await super().release(kind, dataset, request)


async def test_an_unexpected_error_fails_the_study_without_details(
    tmp_path: Path, federation: Federations
) -> None:
    centers = counting_centers(federation)
    centers["beta"] = Buggy(centers["beta"].port)
    async with serving(settings_for(sqlite_url(tmp_path)), centers=centers) as r:
        view = await r.run(SPEC)
        assert view["status"] == "failed"
        assert view["error"] == {"error": "internal_error",
                                 "detail": "the study failed unexpectedly"}
        assert "/srv/data" not in json.dumps(view)


async def test_center_tokens_never_reach_the_logs(
    tmp_path: Path, federation: Federations, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(settings_for(sqlite_url(tmp_path)),
                       transports=transports(broken("500"), federation)) as r:
        assert (await r.run(SPEC))["status"] == "failed"
        await r.client.get("/v1/centers", headers=AUTH)
    assert caplog.records  # the failure and the HTTP calls were logged ...
    assert_no_secret(caplog.text)  # ... without any token
