"""The DP twin of the Mann-Whitney tests on the coordinator (``{"kind": "dp_mwu"}``;
docs/methods.md §3.10), over in-process centers releasing ``cohort`` in DP mode: not exact, so a
DP-mode study accepts it where ``mwu`` is refused naming it; it runs, each center paying its ε
once; the tests agree with ``shared.mwu``'s on the releases; the summary, report, CSV parts,
Methods and provenance show it; implausible releases are named; the spec needs groups."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from pydantic import ValidationError

from coordinator.analyses import REGISTRY
from coordinator.core.errors import CenterFailure
from coordinator.models import StudyResult, StudySpec
from coordinator.protocols.dp_mwu import check_dp_mwu_release
from coordinator.reporting.exports import part_csv
from coordinator.reporting.methods_text import methods_paragraph
from coordinator.reporting.report import render_html, summary
from fedstats_client.results import Results
from shared.mwu import fisher_test, sum_test, weighted_test
from shared.protocol import DPMWURelease, DPMWURequest, MWUNoise
from tests.coordinator.test_coord_dp_mode import dp_federation, serving, spec
from tests.helpers.coordinator import AUTH, SIZES, Federations

pytestmark = pytest.mark.anyio

DP_MWU = {"kind": "dp_mwu", "epsilon": 1.0}


def test_it_is_not_exact_and_mwu_names_it() -> None:
    asked = StudySpec.model_validate(spec(DP_MWU))
    analysis = asked.analyses[0]
    assert REGISTRY["dp_mwu"].exact(asked, analysis) is False
    assert REGISTRY["dp_mwu"].requests(asked, analysis)[0][1].epsilon == 1.0
    assert "dp_mwu" in REGISTRY["mwu"].dp_alternative


def test_the_spec_needs_groups_and_a_valid_split() -> None:
    with pytest.raises(ValidationError, match="dp_mwu analysis needs `groups`"):
        StudySpec.model_validate({**spec(DP_MWU), "groups": None})
    for bad in ({"size_share": 1.0}, {"tests": ["table"]}, {"epsilon": None}):
        with pytest.raises(ValidationError):
            StudySpec.model_validate(spec({**DP_MWU, **bad}))
    primary = StudySpec.model_validate(spec(DP_MWU, primary={"analysis": 0, "test": "sum"}))
    assert primary.primary is not None


async def test_a_dp_mode_federation_runs_it(federation: Federations, tmp_path: Any) -> None:
    centers = dp_federation(federation)
    body = spec(DP_MWU, {"kind": "mwu", "tests": ["sum"], "epsilon": 0.5})
    async with serving(tmp_path, centers) as r:
        plan = (await r.client.post("/v1/studies?dry_run=true", json=body,
                                    headers=AUTH)).json()
        refused = {(x["reason"], x["detail"].split("analysis ")[1][0]) for x in
                   plan["refusals"]}
        assert refused == {("dp_mode_exact", "1")}  # the exact mwu, not its twin
        assert all("dp_mwu" in x["detail"] for x in plan["refusals"])
        planned = await r.client.post("/v1/studies?dry_run=true", json=spec(DP_MWU),
                                      headers=AUTH)
        plan = planned.json()
        assert plan["would_run"] is True, plan["refusals"]
        assert plan["power"] and plan["power"][0]["analysis"] == 0
        view = await r.run(spec(DP_MWU, title="dp"))
        figure = await r.client.get(f"/v1/studies/{view['id']}/analyses/0/figure",
                                    headers=AUTH)  # its effect sizes
        assert figure.status_code == 200 and figure.content.startswith(b"<?xml"), figure.text
        again = await r.run(spec(DP_MWU, title="again"))
    assert view["status"] == "succeeded", view.get("error")
    result = view["result"]["analyses"][0]
    assert result["kind"] == "dp_mwu" and set(result["tests"]) == {"sum", "weighted", "fisher"}
    # Every center paid ε = 1 once: the second study got the stored answers.
    for cid, c in centers.items():
        assert len(c.answers["dp_mwu"]) == 2
        assert c.answers["dp_mwu"][0] == c.answers["dp_mwu"][1]
        budget = (await c.port.budget()).datasets["cohort"]
        assert budget.spent_epsilon == pytest.approx(1.0), cid
    assert again["result"]["analyses"][0]["tests"] == result["tests"]
    # The tests are shared.mwu's on the releases as the coordinator reads them.
    releases = [DPMWURelease.model_validate(c.answers["dp_mwu"][0])
                for c in centers.values()]
    parts = [rel.to_result() for rel in releases]
    for name, test in (("sum", sum_test), ("weighted", weighted_test), ("fisher", fisher_test)):
        want = test(parts)
        assert result["tests"][name]["pvalue"] == pytest.approx(want.pvalue, rel=1e-12)
        assert result["tests"][name]["statistic"] == pytest.approx(want.statistic, rel=1e-12)
    assert result["tests"]["sum"]["null"] == "normal+noise"
    # What each center released, and its sizes' estimates near the truth (ε₁ = 0.2: Laplace
    # of scale 5, so within 100 records but with probability 1 − e^{−20}).
    shown = {x["center"]: x for x in result["releases"]}
    assert list(shown) == list(SIZES)
    for cid, n in SIZES.items():
        assert abs(shown[cid]["n_x_hat"] - n) < 100 and abs(shown[cid]["n_y_hat"] - n) < 100
        assert shown[cid]["noise_scale"] == pytest.approx(2 * shown[cid]["cap"] / 0.8)
    # The effect: each center's and the stratified. The data's own stratified θ̂ is 0.619; the
    # noise moves the DP one by about 0.005 (SD), so it lies within 0.05 of it but with
    # probability below 1e-7, and its interval clears ½.
    effects = {e["center"]: e for e in result["effects"]}
    assert set(effects) == {*SIZES, "stratified"}
    stratified = effects["stratified"]
    assert abs(stratified["estimate"] - 0.619) < 0.05
    assert 0.5 < stratified["low"] < stratified["estimate"] < stratified["high"] < 1

    text = summary(view)
    assert "DP Mann-Whitney tests (two-sided):" in text
    page = render_html(view)
    assert "<h2>DP Mann-Whitney tests" in page and "What each center released" in page
    rows = list(csv.DictReader(io.StringIO(part_csv(view, "dp_mwu_releases"))))
    assert [row["center"] for row in rows] == list(SIZES)
    tests = list(csv.DictReader(io.StringIO(part_csv(view, "tests"))))
    assert [row["test"] for row in tests] == ["sum", "weighted", "fisher"]
    assert "differentially private version of the federated Mann-Whitney" in (
        methods_paragraph(view))
    assert "DP twin" in view["reproducibility"]["algorithms"][0]
    read = Results(StudyResult.model_validate(view["result"]))  # the Python client
    assert list(read.dp_mwu.to_frame().index) == ["sum", "weighted", "fisher"]
    assert list(read.dp_mwu.effects().index) == [*SIZES, "stratified"]


def test_an_implausible_release_is_named() -> None:
    asked = DPMWURequest(variable="crp", groups=("ctl", "trt"), epsilon=1.0)
    good = DPMWURelease(statistic=12.0, n_x_hat=100.4, n_y_hat=80.0, cap=101, epsilon=1.0,
                        size_epsilon=0.2, u_epsilon=0.8, margin=0.0,
                        noise=MWUNoise(kind="laplace", scale=2 * 101 / 0.8))
    check_dp_mwu_release("alpha", good, asked)
    for change, why in (({"cap": 150}, "cap"),
                        ({"noise": MWUNoise(kind="laplace", scale=101 / 0.8)}, "Laplace"),
                        ({"noise": MWUNoise(kind="gaussian", scale=2 * 101 / 0.8)}, "Laplace"),
                        ({"epsilon": 2.0}, "ε"),
                        ({"size_epsilon": 0.5, "u_epsilon": 0.5}, "ε₁")):
        with pytest.raises(CenterFailure, match=why) as err:
            check_dp_mwu_release("alpha", good.model_copy(update=change), asked)
        assert err.value.kind == "implausible"


def test_the_python_client_builds_it() -> None:
    from fedstats_client import Study

    built = Study("cohort", "crp", groups=["ctl", "trt"]).dp_mwu(
        epsilon=1.0, tests=["sum"], size_share=0.3).spec()
    assert built.analyses[0].model_dump() == {  # type: ignore[union-attr]
        "kind": "dp_mwu", "tests": ["sum"], "alternative": "two-sided", "epsilon": 1.0,
        "size_share": 0.3}
