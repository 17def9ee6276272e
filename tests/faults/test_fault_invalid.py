"""A center that answers plausible-looking but invalid numbers: each of three real center apps
(CSV data, ledger, auditor; in process through ``httpx.ASGITransport``) sits behind an
``httpx.MockTransport`` that rewrites one kind of answer of one center before the coordinator
reads it: negative or NaN counts, limits out of order, totals that disagree with the declared
sizes, NaN or negative MWU numbers, DP boxes out of order or outside their bounds, unsorted DP
quantiles, NaN histograms, negative DP counts. The coordinator must fail the study naming that
center as ``malformed`` or ``implausible``: a study never reports numbers built on them.
(``tests/coordinator/test_coord_protocols.py`` covers small counts, inflated tables, a wrong K,
small runs and misplaced splits on in-process ports; these go through the HTTP client.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from adv_helpers import small_counts
from center_helpers import K, dataset_config, make_table, write_csv, write_toml
from coordinator_helpers import AUTH, CENTER_TOKENS, settings_for, sqlite_url

from center_agent.core.config import load_settings
from center_agent.main import create_app as center_app
from coordinator.main import create_app as coordinator_app
from coordinator.services import Services

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
    row[_first_big(row)] = float(K)  # a group total far below the declared size
    return t


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


CASES: list[tuple[str, str, str, Change]] = [
    ("table: negative count", "alpha", "/table", neg_count),
    ("table: NaN count", "alpha", "/table", nan_count),
    ("table: limits out of order", "alpha", "/table", limits_swapped),
    ("table: total below the declared size", "alpha", "/table", deflated),
    ("refine: NaN split limit", "beta", "/table/refine", refine_nan_split),
    ("refine: negative run total", "beta", "/table/refine", refine_negative_total),
    ("refine: run totals tripled", "beta", "/table/refine", refine_totals_tripled),
    ("mwu: NaN statistic", "gamma", "/mwu", box({"statistic": NAN})),
    ("mwu: negative variance", "gamma", "/mwu", box({"variance": -1.0})),
    ("mwu: negative size", "gamma", "/mwu", box({"n_x": -10})),
    ("dp_boxplot: NaN median", "beta", "/dp/boxplot", box({"median": NAN})),
    ("dp_boxplot: quartiles out of order", "beta", "/dp/boxplot", box_unordered),
    ("dp_boxplot: median outside the bounds", "beta", "/dp/boxplot", box({"median": 1e6})),
    ("dp_boxplot: negative outliers", "beta", "/dp/boxplot", box({"upper_outliers": -3})),
    ("dp_quantiles: unsorted", "gamma", "/dp/quantiles", quantiles_unsorted),
    ("dp_quantiles: NaN", "gamma", "/dp/quantiles", box({"values": [NAN, NAN, NAN]})),
    ("dp_quantiles: outside the bounds", "gamma", "/dp/quantiles",
     box({"values": [-500.0, 50.0, 900.0]})),
    ("dp_extremes: NaN", "gamma", "/dp/extremes", box({"psi_max": NAN})),
    ("dp_tree_histogram: NaN", "alpha", "/dp/tree-histogram", tree_nan),
    ("dp_threshold_counts: negative", "alpha", "/dp/threshold-counts", box({"below": -7})),
    ("info: negative group size", "alpha", "/info", info_negative),
]

# Cases the coordinator does not (yet) catch: the study reports numbers built on them.
BOX = "lower_whisker <= q1 <= median <= q3 <= upper_whisker"
SILENTLY_ACCEPTED: dict[str, str] = {
    "table: total below the declared size": (
        "not detectable by design: /v1/info counts rows, and a variable's missing values are"
        " dropped before binning, so a table total below the declared size is legitimate; only"
        " the upper bound (< declared size + K) can be checked"),
}


def center_apps(tmp_path: Path) -> dict[str, Any]:
    apps = {}
    for cid, (n, seed) in SIZES.items():
        csv = write_csv(make_table(n, seed), tmp_path / f"{cid}.csv")
        config = write_toml(tmp_path / f"{cid}.toml", {
            "center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]],
            "ledger_url": f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}",
            "datasets": {"cohort": dataset_config({"kind": "csv", "path": str(csv)})},
        })
        apps[cid] = center_app(load_settings(config))
    return apps


def tampering(app: Any, path: str | None, change: Change | None) -> httpx.MockTransport:
    real = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    async def handle(request: httpx.Request) -> httpx.Response:
        response = await real.handle_async_request(request)
        body = await response.aread()
        if path and change and response.status_code == 200 and request.url.path.endswith(path):
            body = json.dumps(change(json.loads(body))).encode()  # NaN as the literal NaN
        return httpx.Response(response.status_code, content=body,
                              headers={"Content-Type": "application/json"})

    return httpx.MockTransport(handle)


async def run_study(tmp_path: Path, who: str | None, path: str | None,
                    change: Change | None) -> dict[str, Any]:
    apps = center_apps(tmp_path)
    transports = {cid: tampering(app, path if cid == who else None, change)
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


def cases() -> list[Any]:
    marks = {label: pytest.mark.xfail(strict=True, reason=reason)
             for label, reason in SILENTLY_ACCEPTED.items()}
    return [pytest.param(who, path, change, id=label,
                         marks=[marks[label]] if label in marks else [])
            for label, who, path, change in CASES]


@pytest.mark.parametrize(("who", "path", "change"), cases())
async def test_invalid_numbers_fail_the_study_naming_the_center(
    tmp_path: Path, who: str, path: str, change: Change
) -> None:
    """Fault: ``who`` rewrites its ``path`` answers; the study fails naming it, no result."""
    view = await run_study(tmp_path, who, path, change)
    assert view["status"] == "failed", (view["status"], view.get("error"))
    assert view["error"]["center"] == who, view["error"]
    assert view["error"]["kind"] in ("malformed", "implausible"), view["error"]
    assert not view.get("result")
