"""Partial results over in-process centers (the analyst API through ``httpx.ASGITransport``): a
center left out is shown as left out everywhere (the result's ``center_status`` and each
analysis's ``excluded``, the summary ``fedstats study run`` prints, the HTML report), an analysis
that finished keeps its result when another fails (``partially_failed``, each analysis with its
own status), and resuming such a study runs only what failed and pays nothing twice (the
centers' own ledgers say so). docs/coordinator.md, "Statuses and partial results"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.core.errors import CenterFailure
from coordinator.main import create_app
from coordinator.models import StudyResult, StudySpec
from coordinator.reporting.report import render_html, summary
from coordinator.results import failed_analysis
from coordinator.study import run_study
from shared.protocol import CenterInfo
from tests.helpers.coordinator import (
    AUTH,
    CountingCenter,
    Federations,
    K,
    Tampered,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio

BOX_EPSILON = 1.0
BOXPLOT = {"kind": "dp_boxplot", "group": "trt", "epsilon": BOX_EPSILON, "bounds": [0.0, 100.0],
           "depth": 4, "branching": 4}
MWU_EPSILON = 0.5
SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [
        {"kind": "table"},
        # Local tests only (not the table test): the MWU does not depend on the table.
        {"kind": "mwu", "tests": ["sum", "weighted", "fisher"], "epsilon": MWU_EPSILON},
        BOXPLOT,
        {"kind": "quantiles", "levels": [0.25, 0.5, 0.75]},
    ],
}
# What one run of SPEC costs each center: its noisy U, its own box and its share of the pooled one.
STUDY_EPSILON = MWU_EPSILON + 2 * BOX_EPSILON


class FailingInfo(CountingCenter):
    """A center whose ``/v1/info`` fails with ``failure`` (while it is set)."""

    def __init__(self, port: Any, failure: CenterFailure | None) -> None:
        super().__init__(port)
        self.failure = failure

    async def info(self) -> CenterInfo:
        if self.failure is not None:
            self.calls["info"] += 1
            raise self.failure
        return await super().info()


class Running:
    def __init__(self, app: Any, client: httpx.AsyncClient) -> None:
        self.app, self.client = app, client

    async def wait(self, study_id: str) -> dict[str, Any]:
        await self.app.state.services.runner.wait(study_id)
        view = await self.client.get(f"/v1/studies/{study_id}", headers=AUTH)
        assert view.status_code == 200, view.text
        return dict(view.json())

    async def run(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        created = await self.client.post("/v1/studies", json=dict(spec), headers=AUTH)
        assert created.status_code == 202, created.text
        return await self.wait(created.json()["id"])

    async def resume(self, study_id: str) -> httpx.Response:
        return await self.client.post(f"/v1/studies/{study_id}/resume", headers=AUTH)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, centers: Mapping[str, Any]) -> AsyncIterator[Running]:
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield Running(app, client)
        finally:
            await app.state.services.aclose()


def wrapped(federation: Federations, **wrappers: Any) -> dict[str, Any]:
    """A new federation (alpha, beta, gamma) with every center counted, some wrapped otherwise
    (``beta=lambda port: Tampered(port, ...)``)."""
    return {cid: wrappers[cid](port) if cid in wrappers else CountingCenter(port)
            for cid, port in federation().items()}


def timeout(center: str) -> CenterFailure:
    return CenterFailure(center, "timeout", "no answer within 2 s")


async def spent(centers: Mapping[str, CountingCenter]) -> dict[str, float]:
    """ε each center's ledger has spent on the dataset (its budget, read from the center)."""
    out = {}
    for cid, center in centers.items():
        budget = (await center.port.budget()).datasets["cohort"]
        out[cid] = budget.total_epsilon - budget.remaining_epsilon
    return out


def without_excluded_mentions(text: str, center: str) -> str:
    """``text`` with every place that shows ``center`` as left out removed: what remains must
    not name it (no number, table row or list shows it as used)."""
    for pattern in (
        rf"<p class='note'>Left out of this analysis: {center} \([^<]*</p>",  # report, per analysis
        rf"<tr><td>{center}</td><td>excluded</td><td>[^<]*</td></tr>",  # report, centers table
        rf"; excluded: {center}\b",  # both: the centers line
        rf"(?m)^ +{center} excluded: .*$",  # summary: why
        rf"(?m)^ +left out: {center} \(.*$",  # summary, per analysis
    ):
        text = re.sub(pattern, "", text)
    return text


async def test_a_center_failing_its_info_is_excluded_everywhere(
    tmp_path: Path, federation: Federations
) -> None:
    centers = wrapped(federation, gamma=lambda p: FailingInfo(p, timeout("gamma")))
    async with serving(tmp_path, centers) as r:
        view = await r.run({**SPEC, "allow_partial": True})
    assert view["status"] == "succeeded", view.get("error")
    result = view["result"]
    assert result["centers"] == ["alpha", "beta", "gamma"]  # asked
    gamma = next(c for c in result["center_status"] if c["center"] == "gamma")
    assert gamma == {"center": "gamma", "status": "excluded", "used_in": [],
                     "left_out_of": [0, 1, 2, 3],
                     "reason": {"center": "gamma", "kind": "timeout",
                                "detail": "no answer within 2 s", "center_error": None}}
    assert [(c["center"], c["status"], c["used_in"]) for c in result["center_status"]] == [
        ("alpha", "included", [0, 1, 2, 3]), ("beta", "included", [0, 1, 2, 3]),
        ("gamma", "excluded", [])]
    table, mwu, boxes, quantiles = result["analyses"]
    for analysis in (table, mwu, boxes, quantiles):
        assert analysis["status"] == "succeeded"
        assert [(e["center"], e["kind"]) for e in analysis["excluded"]] == [("gamma", "timeout")]
    # ... and no number of the result comes from gamma.
    assert set(table["order"]) == set(table["center_totals"]) == {"alpha", "beta"}
    assert [p["center"] for p in mwu["tests"]["sum"]["parts"]] == ["alpha", "beta"]
    assert [e["center"] for e in mwu["effects"]] == ["alpha", "beta", "stratified"]
    assert set(boxes["per_center"]) == set(boxes["spent"]) == {"alpha", "beta"}
    assert boxes["pooled"]["centers"] == ["alpha", "beta"]
    assert {p["center"] for p in view["provenance"]} == {"alpha", "beta"}
    # Asked nothing after its info failed (once when the names were checked at submission,
    # which does not hold a down center against the study, once by the study).
    assert centers["gamma"].calls == {"info": 2}

    text = summary(view)
    assert "centers included: alpha, beta; excluded: gamma" in text
    assert "    gamma excluded: timeout: no answer within 2 s" in text
    assert text.count("  left out: gamma (timeout: no answer within 2 s)") == 4
    assert "gamma" not in without_excluded_mentions(text, "gamma")

    page = render_html(view)
    assert "Centers included: alpha, beta; excluded: gamma." in page
    assert "<tr><td>gamma</td><td>excluded</td><td>timeout: no answer within 2 s</td></tr>" in page
    assert page.count("Left out of this analysis: gamma (timeout") == 4
    assert "gamma" not in without_excluded_mentions(page, "gamma")


async def test_a_center_failing_one_analysis_keeps_the_others(
    tmp_path: Path, federation: Federations, caplog: pytest.LogCaptureFixture
) -> None:
    """Without allow_partial, beta's MWU release is lost: the MWU fails naming beta, the table,
    the boxplots and the quantiles keep their results (beta in all of them)."""
    caplog.set_level(logging.INFO, logger="coordinator.runner")
    centers = wrapped(federation, beta=lambda p: Tampered(p, mwu=timeout("beta")))
    async with serving(tmp_path, centers) as r:
        view = await r.run(SPEC)
        study_id = view["id"]
        assert view["status"] == "partially_failed", view.get("error")
        table, mwu, boxes, quantiles = view["result"]["analyses"]
        expected_error = {"error": "center_failure",
                          "detail": "center 'beta' (timeout): no answer within 2 s",
                          "center": "beta", "kind": "timeout", "center_error": None}
        assert mwu == {"kind": "mwu", "status": "failed", "error": expected_error}
        assert view["error"] == expected_error  # the first failed analysis's, as a failed study's
        assert [a["status"] for a in (table, boxes, quantiles)] == ["succeeded"] * 3
        assert "beta" in table["order"] and "beta" in boxes["per_center"]
        assert table["totals"] == quantiles["table_totals"]
        assert all(c["status"] == "included" and c["used_in"] == [0, 2, 3]
                   and c["left_out_of"] == [] and c["reason"] is None
                   for c in view["result"]["center_status"])

        # A finished analysis's figure is served; the failed one's is a conflict naming why.
        figure = await r.client.get(f"/v1/studies/{study_id}/analyses/2/figure", headers=AUTH)
        assert figure.status_code == 200 and figure.text.lstrip().startswith("<")
        failed = await r.client.get(f"/v1/studies/{study_id}/analyses/1/figure", headers=AUTH)
        assert failed.status_code == 409 and "analysis 1" in failed.json()["detail"]
        assert "beta" in failed.json()["detail"]
        listed = await r.client.get("/v1/studies?status=partially_failed", headers=AUTH)
        assert [s["id"] for s in listed.json()] == [study_id]

    text = summary(view)
    assert "Study " + study_id + ": partially_failed" in text
    assert ("  analysis 1 (mwu) failed: center_failure: center 'beta' (timeout): no answer "
            "within 2 s") in text
    assert "  centers included: alpha, beta, gamma; " in text
    assert "Mann-Whitney" not in text and "Federated K-anonymous table" in text
    page = render_html(view)
    assert "<h2>Failed analyses</h2>" in page
    assert ("<tr><td>1</td><td>mwu</td><td>center_failure</td><td>beta</td><td>timeout</td>"
            "<td>center &#x27;beta&#x27; (timeout): no answer within 2 s</td></tr>") in page
    assert "Mann-Whitney" not in page and "Federated K-anonymous table" in page

    logged = [r.getMessage() for r in caplog.records if r.name == "coordinator.runner"]
    assert f"study {study_id} running" in logged
    assert (f"study {study_id} partially_failed: analysis 1 (mwu): center 'beta' (timeout): "
            "no answer within 2 s") in logged


async def test_a_center_left_out_of_one_analysis_is_shown_per_analysis(
    tmp_path: Path, federation: Federations
) -> None:
    """With allow_partial, beta is left out of the MWU only: used in the others, and shown so."""
    centers = wrapped(federation, beta=lambda p: Tampered(p, mwu=timeout("beta")))
    async with serving(tmp_path, centers) as r:
        view = await r.run({**SPEC, "allow_partial": True})
    assert view["status"] == "succeeded", view.get("error")
    table, mwu, boxes, _ = view["result"]["analyses"]
    assert [(e["center"], e["kind"]) for e in mwu["excluded"]] == [("beta", "timeout")]
    assert [p["center"] for p in mwu["tests"]["sum"]["parts"]] == ["alpha", "gamma"]
    assert table["excluded"] == boxes["excluded"] == []
    beta = next(c for c in view["result"]["center_status"] if c["center"] == "beta")
    assert (beta["status"], beta["used_in"], beta["left_out_of"], beta["reason"]["kind"]) == (
        "included", [0, 2, 3], [1], "timeout")

    text = summary(view)
    assert "centers included: alpha, beta, gamma;" in text
    assert ("    beta included: left out of analysis 1 (mwu): timeout: no answer within 2 s"
            in text)
    mwu_section = text[text.index("Mann-Whitney tests"):]
    assert mwu_section.splitlines()[1] == "  left out: beta (timeout: no answer within 2 s)"
    page = render_html(view)
    assert ("<tr><td>beta</td><td>included</td><td>left out of analysis 1 (mwu): timeout: no "
            "answer within 2 s</td></tr>") in page
    mwu_html = page[page.index("<h2>Mann-Whitney"):page.index("<h2>Federated K-anonymous")]
    assert "Left out of this analysis: beta (timeout" in mwu_html


async def test_resuming_a_partially_failed_study_runs_only_what_failed_and_pays_once(
    tmp_path: Path, federation: Federations
) -> None:
    """Beta computes (and pays for) its noisy MWU release, which is then lost: the MWU fails.
    Resumed once beta answers, only beta's MWU is asked again (the others' MWU releases are the
    study's recorded ones, the other analyses are kept as they were), and every center has
    spent exactly one study's ε."""
    centers = wrapped(federation, beta=lambda p: Tampered(p, mwu=timeout("beta")))
    async with serving(tmp_path, centers) as r:
        first = await r.run(SPEC)
        assert first["status"] == "partially_failed", first.get("error")
        assert centers["beta"].calls["mwu"] == 1  # beta did compute its release
        assert await spent(centers) == pytest.approx(dict.fromkeys(centers, STUDY_EPSILON))

        centers["beta"].change.clear()  # beta answers again, when the test lets it
        centers["beta"].gate = gate = asyncio.Event()
        for center in centers.values():
            center.calls.clear()
        resumed = await r.resume(first["id"])
        assert resumed.status_code == 202 and resumed.json()["status"] in ("pending", "running")
        while not centers["beta"].calls["mwu"]:
            await asyncio.sleep(0.01)
        # While it runs, the study shows what it keeps (and keeps it should it stop again).
        running = (await r.client.get(f"/v1/studies/{first['id']}", headers=AUTH)).json()
        assert running["status"] == "running" and running["result"] == first["result"]
        gate.set()
        view = await r.wait(first["id"])
        assert view["status"] == "succeeded", view.get("error")
        assert view["error"] is None
        # No release but beta's MWU; each center's budget once, for the lifetime guarantee
        # the result states (read anew after every run).
        assert {cid: dict(c.calls) for cid, c in centers.items()} == {
            "alpha": {"budget": 1}, "beta": {"mwu": 1, "budget": 1}, "gamma": {"budget": 1}}
        assert await spent(centers) == pytest.approx(dict.fromkeys(centers, STUDY_EPSILON))
        kept = [a for i, a in enumerate(view["result"]["analyses"]) if i != 1]
        assert kept == [a for i, a in enumerate(first["result"]["analyses"]) if i != 1]
        mwu = view["result"]["analyses"][1]
        assert mwu["status"] == "succeeded"
        assert [p["center"] for p in mwu["tests"]["sum"]["parts"]] == ["alpha", "beta", "gamma"]

        again = await r.resume(first["id"])  # a succeeded study has nothing to resume
        assert again.status_code == 409 and again.json()["error"] == "conflict"


async def test_a_failed_study_resumes_only_when_a_center_was_not_reached_in_time(
    tmp_path: Path, federation: Federations
) -> None:
    """A study every analysis of which failed keeps today's error and no result; it can be
    resumed when the failure was a timeout (or unreachable), not when the center refused."""
    refusal = CenterFailure("gamma", "refused", "the data changed", center_error="data_changed")
    centers = wrapped(federation, gamma=lambda p: FailingInfo(p, timeout("gamma")))
    async with serving(tmp_path, centers) as r:
        view = await r.run(SPEC)
        assert view["status"] == "failed" and view["result"] is None
        assert (view["error"]["error"], view["error"]["center"], view["error"]["kind"]) == (
            "center_failure", "gamma", "timeout")

        info = centers["gamma"]
        assert isinstance(info, FailingInfo)
        info.failure = refusal
        refused = await r.run(SPEC)
        assert refused["status"] == "failed" and refused["error"]["kind"] == "refused"
        answer = await r.resume(refused["id"])
        assert answer.status_code == 409 and "unreachable or timed out" in answer.json()["detail"]

        info.failure = None
        answer = await r.resume(view["id"])
        assert answer.status_code == 202, answer.text
        resumed = await r.wait(view["id"])
        assert resumed["status"] == "succeeded", resumed.get("error")


def test_a_result_stored_before_analyses_had_a_status_still_reads_and_renders() -> None:
    """Stored results have neither per-analysis status nor center_status: they read as
    succeeded analyses, and the report takes the centers from the survey's exclusions."""
    stored = {
        "analyses": [{"kind": "dp_quantiles", "group": None, "algorithm": "joint_exp",
                      "levels": [0.5], "per_center": {"alpha": [50.0]},
                      "spent": {"alpha": 0.5}, "excluded": []}],
        "centers": ["alpha", "beta"],
        "excluded": [{"center": "beta", "kind": "unreachable", "detail": "refused"}],
    }
    result = StudyResult.model_validate(stored)
    assert result.analyses[0].status == "succeeded" and result.center_status == []
    view = {"id": "x", "status": "succeeded", "created_at": "now", "provenance": [],
            "spec": {"dataset": "cohort", "variable": "crp", "k": K}, "result": stored}
    assert "centers included: alpha; excluded: beta" in summary(view)
    assert "    beta excluded: unreachable: refused" in summary(view)
    assert "<tr><td>beta</td><td>excluded</td><td>unreachable: refused</td></tr>" in render_html(
        view)


async def test_run_study_keeps_what_succeeded_before(federation: Federations) -> None:
    """Given an earlier run's result, only the analyses that did not succeed there run: centers
    that now fail every other release are asked only for the failed analysis's."""
    spec = StudySpec.model_validate(SPEC)
    first = await run_study(spec, [CountingCenter(p) for p in federation.ports()],
                            min_centers=2)
    previous = first.model_copy(update={"analyses": [
        failed_analysis("mwu", timeout("beta")) if a.kind == "mwu" else a
        for a in first.analyses]})
    down = {kind: CenterFailure("alpha", "unreachable", "down")
            for kind in ("table", "refine", "dp_boxplot", "dp_extremes", "dp_tree_histogram",
                         "dp_threshold_counts")}
    ports = [Tampered(p, **down) for p in federation.ports()]
    again = await run_study(spec, ports, min_centers=2, previous=previous)
    assert [a.status for a in again.analyses] == ["succeeded"] * 4
    assert [a for i, a in enumerate(again.analyses) if i != 1] == [
        a for i, a in enumerate(first.analyses) if i != 1]
    assert all(set(p.calls) == {"info", "mwu"} for p in ports)
