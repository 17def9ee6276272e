"""A center that answers plausible-looking but invalid numbers: each of three real center apps
(CSV data, ledger, auditor, signing key; in process through ``httpx.ASGITransport``; each trusts
the others' signed tables) sits behind an ``httpx.MockTransport`` that rewrites one kind of answer
of one center before the coordinator reads it: negative or NaN counts, limits out of order, totals
that disagree with the declared sizes (above them, or below them: ``/v1/info`` and every table
count the same population), NaN or negative MWU numbers, DP boxes out of order or outside their
bounds, unsorted DP quantiles, NaN histograms, negative DP counts. A rewritten table or
refinement is re-signed with the center's own key, so its signed statement states the limits the
coordinator folds: a lying center signs its lies. The coordinator must fail every analysis built
on that answer naming the center as ``malformed`` or ``implausible``, by the check each case is
about, and only those (the others keep their results: the study is ``partially_failed``, or
``failed`` with no result when the lie is in the sizes every analysis needs): a study never
reports numbers built on them. (``tests/coordinator/test_coord_protocols.py`` covers small
counts, inflated tables, a wrong K, small runs and misplaced splits on in-process ports; these go
through the HTTP client.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from center_agent.core.config import load_settings
from center_agent.gate.keys import CenterKeys, read_private_key
from center_agent.main import create_app as center_app
from coordinator.main import create_app as coordinator_app
from coordinator.services import Services
from shared.federation import refined_limits
from shared.kinds import BATCH_PATH, BY_NAME
from shared.protocol import LimitsStatement, RefinementRelease, RefinementRequest
from tests.helpers.attacks import small_counts
from tests.helpers.center import K, center_config
from tests.helpers.coordinator import AUTH, CENTER_TOKENS, settings_for, sqlite_url

pytestmark = pytest.mark.anyio
SIZES = {"alpha": (420, 1), "beta": (310, 2), "gamma": (200, 3)}
NAN = float("nan")
SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "x", "groups": ["a", "b"], "k": K,
    "analyses": [
        {"kind": "table"},
        {"kind": "mwu", "tests": ["sum", "weighted", "table"]},
        {"kind": "dp_boxplot", "group": "a", "epsilon": 1.0, "bounds": [0.0, 100.0],
         "per_center": True, "pooled": True, "depth": 4, "branching": 4},
        {"kind": "dp_quantiles", "group": "b", "epsilon": 0.5, "bounds": [0.0, 100.0],
         "levels": [0.25, 0.5, 0.75]},
    ],
}

Change = Callable[[Any], Any]
# The analyses of SPEC (their index) built on each path's answers: the table is the MWU table
# test's too, and every analysis needs the sizes (/info).
BUILT_ON: dict[str, set[int]] = {
    "/table": {0, 1}, "/table/refine": {0, 1}, "/mwu": {1}, "/dp/boxplot": {2},
    "/dp/extremes": {2}, "/dp/tree-histogram": {2}, "/dp/threshold-counts": {2},
    "/dp/quantiles": {3}, "/info": {0, 1, 2, 3},
}


def _first_big(row: list[float]) -> int:
    return int(np.argmax(row))


def neg_count(t: Any) -> Any:
    t["counts"][0][0] = -float(K)
    return t


def nan_count(t: Any) -> Any:
    t["counts"][1][_first_big(t["counts"][1])] = NAN
    return t


def limits_swapped(t: Any) -> Any:
    t["limits"][1], t["limits"][2] = t["limits"][2], t["limits"][1]
    return t


def deflated(t: Any) -> Any:
    row = t["counts"][0]
    big = _first_big(row)  # only the largest bin left: a group total far below the declared size
    t["counts"][0] = [c if i == big else 0.0 for i, c in enumerate(row)]
    return t


def to_total(target: float) -> Change:
    """Group 0's total made ``target`` (a little below the true one), every count 0 or >= K:
    the largest count gives up the difference, or, when that would leave it below K, what is
    left of it joins the next non-empty bin."""
    def change(t: Any) -> Any:
        row = t["counts"][0]
        big = _first_big(row)
        left = row[big] - (sum(row) - target)
        assert left >= 1, "the difference must be smaller than the largest count"
        if left >= K:
            row[big] = left
        else:
            other = next(i for i, c in enumerate(row) if c > 0 and i != big)
            row[big], row[other] = 0.0, row[other] + left
        assert sum(row) == target
        return t
    return change


def refine_nan_split(r: Any) -> Any:
    r["split_bins"], r["split_limits"] = [0], [NAN]
    return r


def refine_negative_total(r: Any) -> Any:
    r["runs"][0]["totals"][0] = -float(K)
    return r


def refine_totals_tripled(r: Any) -> Any:
    r["runs"][1]["totals"] = [3 * t for t in r["runs"][1]["totals"]]
    return r


def box(update: dict[str, Any]) -> Change:
    def change(b: Any) -> Any:
        return {**b, **update}
    return change


def box_unordered(b: Any) -> Any:
    return {**b, "q1": b["q3"] + 5.0}


def quantiles_unsorted(q: Any) -> Any:
    return {**q, "values": list(reversed(q["values"])) if q["values"][0] != q["values"][-1]
            else [50.0, 10.0, 20.0]}


def tree_nan(t: Any) -> Any:
    t["levels"][1][0] = NAN
    return t


def info_negative(i: Any) -> Any:
    i["datasets"][0]["n_by_group"]["a"] = -10
    return i


# (label, the center that lies, the path of the answer it rewrites, the rewrite, what catches
# it: a fragment of the failure's detail, so each case proves the check it is about).
CASES: list[tuple[str, str, str, Change, str]] = [
    ("table: negative count", "alpha", "/table", neg_count, "not a valid BinTableRelease"),
    ("table: NaN count", "alpha", "/table", nan_count, "not a valid BinTableRelease"),
    ("table: limits out of order", "alpha", "/table", limits_swapped,
     "not a valid BinTableRelease"),
    ("table: total below the declared size", "alpha", "/table", deflated,
     "fewer than its declared size"),
    ("refine: NaN split limit", "beta", "/table/refine", refine_nan_split,
     "does not fit the table"),
    ("refine: negative run total", "beta", "/table/refine", refine_negative_total,
     "a run total is negative"),
    ("refine: run totals tripled", "beta", "/table/refine", refine_totals_tripled,
     "more than its declared size allows"),
    ("mwu: NaN statistic", "gamma", "/mwu", box({"statistic": NAN}), "not a valid MWURelease"),
    ("mwu: negative variance", "gamma", "/mwu", box({"variance": -1.0}),
     "not a valid MWURelease"),
    ("mwu: negative size", "gamma", "/mwu", box({"n_x": -10}), "not a valid MWURelease"),
    ("dp_boxplot: NaN median", "beta", "/dp/boxplot", box({"median": NAN}),
     "not a valid DPBoxplotRelease"),
    ("dp_boxplot: quartiles out of order", "beta", "/dp/boxplot", box_unordered,
     "not a valid DPBoxplotRelease"),
    ("dp_boxplot: median outside the bounds", "beta", "/dp/boxplot", box({"median": 1e6}),
     "not a valid DPBoxplotRelease"),
    ("dp_boxplot: negative outliers", "beta", "/dp/boxplot", box({"upper_outliers": -3}),
     "not a valid DPBoxplotRelease"),
    ("dp_quantiles: unsorted", "gamma", "/dp/quantiles", quantiles_unsorted,
     "not a valid DPQuantilesRelease"),
    ("dp_quantiles: NaN", "gamma", "/dp/quantiles", box({"values": [NAN, NAN, NAN]}),
     "not a valid DPQuantilesRelease"),
    ("dp_quantiles: outside the bounds", "gamma", "/dp/quantiles",
     box({"values": [-500.0, 50.0, 900.0]}), "outside the bounds"),
    ("dp_extremes: NaN", "gamma", "/dp/extremes", box({"psi_max": NAN}),
     "not a valid ExtremesRelease"),
    ("dp_tree_histogram: NaN", "alpha", "/dp/tree-histogram", tree_nan,
     "not a valid TreeHistogramRelease"),
    ("dp_threshold_counts: negative", "alpha", "/dp/threshold-counts", box({"below": -7}),
     "not a valid ThresholdCountsRelease"),
    ("info: negative group size", "alpha", "/info", info_negative, "not a valid CenterInfo"),
]


def center_apps(tmp_path: Path) -> tuple[dict[str, Any], dict[str, CenterKeys]]:
    """The three center apps (each trusting the others' signed tables: one folder, one peers/
    directory) and each one's signing key, for a center that lies to sign its own lies."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    apps, keys = {}, {}
    for cid, (n, seed) in SIZES.items():
        # ε total 4: a quarter of it per request (the default cap) pays the study's largest
        # request, a DP box at ε = 1.
        config, _ = center_config(tmp_path, {"cohort": 4.0}, name=cid, n=n, seed=seed,
                                  tokens=[CENTER_TOKENS[cid]])
        apps[cid] = center_app(load_settings(config))
        keys[cid] = CenterKeys(cid, b"", read_private_key(tmp_path / f"{cid}.key"), {})
    return apps, keys


def resigned(keys: CenterKeys, request: bytes, path: str, body: Any) -> Any:
    """A rewritten table or refinement whose signed statement states the limits the rewritten
    numbers give (signed with the center's own key): the coordinator must catch the lie on its
    merits, not because the statement no longer matches. Releases whose limits cannot be stated
    (out of order, NaN) keep the center's statement: they are malformed before it is read."""
    if not isinstance(body, dict) or body.get("signed") is None:
        return body
    statement = body["signed"]["statement"]
    try:
        if path.endswith("/refine"):
            parent = RefinementRequest.model_validate_json(request).table.statement
            release = RefinementRelease.model_validate({**body, "signed": None})
            limits = refined_limits(parent.limits, release.to_result()).tolist()
        else:
            limits = body["limits"]
        restated = LimitsStatement.model_validate({**statement, "limits": limits})
    except (ValidationError, ValueError):
        return body
    return {**body, "signed": keys.sign(restated).to_payload()}


def tampering(app: Any, path: str | None, change: Change | None,
              keys: CenterKeys) -> httpx.MockTransport:
    real = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    def lie(asked: bytes, answer: Any) -> Any:
        assert change is not None and path is not None
        return resigned(keys, asked, path, change(answer))

    async def handle(request: httpx.Request) -> httpx.Response:
        response = await real.handle_async_request(request)
        body = await response.aread()
        if path and change and response.status_code == 200:
            if request.url.path.endswith(path):
                body = json.dumps(lie(request.content, json.loads(body))).encode()  # NaN: NaN
            elif request.url.path.endswith(BATCH_PATH.rsplit("}", 1)[1]):
                # A batch of releases (coordinator.batching): the items of the kind rewritten.
                items = json.loads(request.content)["items"]
                batch = json.loads(body)
                for item, answer in zip(items, batch["answers"], strict=True):
                    if BY_NAME[item["kind"]].path.endswith(path) and answer["status"] == 200:
                        answer["release"] = lie(json.dumps(item["request"]).encode(),
                                                answer["release"])
                body = json.dumps(batch).encode()
        return httpx.Response(response.status_code, content=body,
                              headers={"Content-Type": "application/json"})

    return httpx.MockTransport(handle)


async def run_study(tmp_path: Path, who: str | None, path: str | None,
                    change: Change | None) -> dict[str, Any]:
    apps, keys = center_apps(tmp_path)
    transports = {cid: tampering(app, path if cid == who else None, change, keys[cid])
                  for cid, app in apps.items()}
    services = Services.build(settings_for(sqlite_url(tmp_path)), transports=transports)
    app = coordinator_app(services=services)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://coordinator") as client:
            created = await client.post("/v1/studies", json=SPEC, headers=AUTH)
            assert created.status_code == 202, created.text
            study_id = created.json()["id"]
            await services.runner.wait(study_id)
            view = await client.get(f"/v1/studies/{study_id}", headers=AUTH)
            return dict(view.json())
    finally:
        await services.aclose()
        for center in apps.values():
            center.state.services.close()


async def test_the_untampered_study_succeeds(tmp_path: Path) -> None:
    """The control: the same three centers, nothing rewritten, the study succeeds."""
    view = await run_study(tmp_path, None, None, None)
    assert view["status"] == "succeeded", view.get("error")
    assert small_counts(view["result"]) == []


def assert_named(error: dict[str, Any], who: str, caught_by: str) -> None:
    assert error["center"] == who, error
    assert error["kind"] in ("malformed", "implausible"), error
    assert caught_by in error["detail"], error


def assert_failed_where_built_on(view: dict[str, Any], who: str, path: str,
                                 caught_by: str) -> None:
    """Every analysis built on ``path``'s answers failed naming ``who`` with no numbers, the
    others kept their results (none holding a count in 1..K-1)."""
    failing = BUILT_ON[path]
    assert_named(view["error"], who, caught_by)
    if failing == set(range(len(SPEC["analyses"]))):
        assert view["status"] == "failed", (view["status"], view.get("error"))
        assert not view.get("result")
        return
    assert view["status"] == "partially_failed", (view["status"], view.get("error"))
    analyses = view["result"]["analyses"]
    assert {i for i, a in enumerate(analyses) if a["status"] == "failed"} == failing
    for i in failing:
        assert set(analyses[i]) == {"kind", "status", "error"}, analyses[i]
        assert analyses[i]["kind"] == SPEC["analyses"][i]["kind"]
        assert_named(analyses[i]["error"], who, caught_by)
    assert small_counts(view["result"]) == []


@pytest.mark.parametrize(("who", "path", "change", "caught_by"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
async def test_invalid_numbers_fail_the_study_naming_the_center(
    tmp_path: Path, who: str, path: str, change: Change, caught_by: str
) -> None:
    """Fault: ``who`` rewrites its ``path`` answers (re-signing the limits it states); every
    analysis built on them fails naming it, by the check the case is about, with no numbers."""
    view = await run_study(tmp_path, who, path, change)
    assert_failed_where_built_on(view, who, path, caught_by)


async def test_a_table_total_below_the_declared_size_is_caught_at_the_boundary(
    tmp_path: Path
) -> None:
    """/v1/info and every table count one population, its size rounded down to K: alpha's
    table may total exactly its declared size (the control: the study succeeds), one record
    fewer is implausible."""
    apps, _ = center_apps(tmp_path / "declared")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=apps["alpha"]),
                                 base_url="http://alpha") as client:
        info = (await client.get("/v1/info", headers={
            "Authorization": f"Bearer {CENTER_TOKENS['alpha']}"})).json()
    for app in apps.values():
        app.state.services.close()
    declared = int(info["datasets"][0]["n_by_group"]["a"])
    assert declared > 0 and declared % K == 0

    view = await run_study(tmp_path / "exact", "alpha", "/table", to_total(declared))
    assert view["status"] == "succeeded", view.get("error")
    view = await run_study(tmp_path / "short", "alpha", "/table", to_total(declared - 1))
    assert_failed_where_built_on(view, "alpha", "/table", "fewer than its declared size")
    assert view["error"]["kind"] == "implausible"
