"""DP mode end to end over HTTP with real processes: two ``python -m center_agent`` releasing
``cohort`` in DP mode (declared sizes) and a ``python -m coordinator``. An exact study is refused
at the dry run and at submission naming the DP alternative, nothing spent (an exact
Mann-Whitney naming its DP twin); a DP study (DP quantiles, a DP Table 1 and the DP twin of the
Mann-Whitney tests) succeeds, and its result, text summary and HTML report state each
center's lifetime guarantee as the center's own ``/v1/budget`` does."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.reporting.report import render_html, summary
from fedstats_cli.procs import free_port
from tests.coordinator.test_coord_describe import (
    BOUNDS_CRP,
    SIZES,
    center_config,
    make_center_data,
    wait_for_status,
)
from tests.helpers.config import write_toml
from tests.helpers.coordinator import AUTH, CENTER_TOKENS, K, coordinator_config
from tests.helpers.processes import spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = [pytest.mark.process, pytest.mark.slow]

EXACT: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [{"kind": "table"}, {"kind": "describe"}],
}
DP: dict[str, Any] = {
    **EXACT, "analyses": [
        {"kind": "dp_quantiles", "epsilon": 1.0, "bounds": list(BOUNDS_CRP),
         "levels": [0.25, 0.5, 0.75], "group": "trt"},
        {"kind": "describe", "variables": ["crp", "age"], "epsilon": 1.0,
         "bounds": {"crp": list(BOUNDS_CRP)}, "bins": 4},
        {"kind": "dp_mwu", "epsilon": 1.0},
    ],
}
# Per center: the quantiles of trt (1), a description of 2 variables x 2 arms (4), dp_mwu (1).
DP_EPSILON = 6.0


def dp_mode(config: Path, n_ctl: int, n_trt: int) -> Path:
    """The describe test's center configuration with ``cohort`` in DP mode, sizes declared."""
    import tomllib

    values = tomllib.loads(config.read_text())
    values["datasets"]["cohort"].update(release_mode="dp", declared_n=n_ctl + n_trt,
                                        declared_n_by_group={"ctl": n_ctl, "trt": n_trt})
    # A declared level no record holds: in DP mode it is answered like any other.
    values["datasets"]["cohort"]["group"]["levels"].append("none")
    return write_toml(config, values)


def budget(url: str, cid: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/budget", headers={"Authorization": f"Bearer {CENTER_TOKENS[cid]}"})
    assert r.status_code == 200, r.text
    return dict(r.json()["datasets"]["cohort"])


def test_dp_mode_federation_end_to_end(tmp_path: Path) -> None:
    data = make_center_data()
    ports = {cid: free_port() for cid in SIZES}
    configs = {cid: dp_mode(center_config(tmp_path, cid, data[cid], ports[cid]), *SIZES[cid])
               for cid in SIZES}
    urls = {cid: f"http://127.0.0.1:{p}" for cid, p in ports.items()}
    config, port = coordinator_config(tmp_path / "coordinator.toml", urls, tokens=CENTER_TOKENS,
                                      min_centers=2, read_timeout_s=scaled(60.0))
    with contextlib.ExitStack() as stack:
        procs = [(spawn("center_agent", configs[c]), ports[c], configs[c]) for c in SIZES]
        procs.append((spawn("coordinator", config), port, config))
        for proc, _, _ in procs:
            stack.callback(stop, proc)
        for proc, p, c in procs:
            wait_healthy(proc, p, c)
        client = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                                  headers=AUTH, timeout=scaled(60)))

        # The catalog shows the mode; an exact study is refused at the dry run and at
        # submission, each refusal naming the DP analysis to ask instead.
        catalog = client.get("/v1/catalog")
        assert catalog.status_code == 200, catalog.text
        (cohort,) = catalog.json()["datasets"]
        assert {c["release_mode"] for c in cohort["centers"]} == {"dp"}
        plan = client.post("/v1/studies", params={"dry_run": "true"}, json=EXACT)
        assert plan.status_code == 200, plan.text
        assert plan.json()["would_run"] is False
        details = {(r["center"], r["reason"]): [] for r in plan.json()["refusals"]}
        for r in plan.json()["refusals"]:
            details[(r["center"], r["reason"])].append(r["detail"])
        assert set(details) == {(c, "dp_mode_exact") for c in SIZES}
        for found in details.values():
            table, describe = sorted(found)
            assert "analysis 0 (table)" in table and "ask dp_boxplot" in table
            assert "analysis 1 (describe)" in describe
            assert 'ask describe with mode "dp"' in describe
        refused = client.post("/v1/studies", json=EXACT)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "would_be_refused"
        assert "ask dp_boxplot" in refused.json()["detail"]
        mwu = client.post("/v1/studies", params={"dry_run": "true"},
                          json={**EXACT, "analyses": [{"kind": "mwu", "epsilon": 0.5}]})
        assert mwu.status_code == 200 and mwu.json()["would_run"] is False, mwu.text
        assert all("dp_mwu" in r["detail"] for r in mwu.json()["refusals"])
        assert client.get("/v1/studies").json() == []
        assert all(budget(urls[c], c)["spent_epsilon"] == 0 for c in SIZES)

        # A DP study runs; its result states each center's guarantee as the center does.
        plan = client.post("/v1/studies", params={"dry_run": "true"}, json=DP)
        assert plan.status_code == 200 and plan.json()["would_run"], plan.text
        created = client.post("/v1/studies", json=DP)
        assert created.status_code == 202, created.text
        view = wait_for_status(client, created.json()["status_url"])
        assert view["status"] == "succeeded", view["result"]["analyses"]
        dp_mwu = view["result"]["analyses"][2]
        assert dp_mwu["kind"] == "dp_mwu" and set(dp_mwu["tests"]) == {"sum", "weighted",
                                                                        "fisher"}
        assert [r["center"] for r in dp_mwu["releases"]] == list(SIZES)
        stated = {g["center"]: g for g in view["result"]["guarantees"]}
        assert set(stated) == set(SIZES)
        text, page = summary(view), render_html(view)
        for cid, g in stated.items():
            own = budget(urls[cid], cid)
            assert own["spent_epsilon"] == pytest.approx(DP_EPSILON)
            assert g["epsilon_pure"] == pytest.approx(own["guarantee"]["epsilon_pure"])
            assert g["epsilon"] == pytest.approx(own["guarantee"]["epsilon"])
            assert g["line"] == (own["guarantee"]["line"] + "; DP mode: every release of the "
                                 "dataset is differentially private")
            assert g["line"] in text
            assert g["line"].replace("'", "&#x27;") in page
        assert "Privacy guarantee" in text and "Privacy guarantee" in page

        # A DP Table 1 of a level no record holds runs at every center and reports it (noise
        # only: the honest answer on no record).
        empty = {**DP, "groups": ["ctl", "none"], "analyses": [
            {"kind": "describe", "epsilon": 1.0, "bounds": {"crp": list(BOUNDS_CRP)},
             "bins": 4, "per_center": True}]}
        created = client.post("/v1/studies", json=empty)
        assert created.status_code == 202, created.text
        view = wait_for_status(client, created.json()["status_url"])
        assert view["status"] == "succeeded", view["result"]["analyses"]
        (described,) = view["result"]["analyses"]
        assert described["status"] == "succeeded" and not described["excluded"]
        arms = {(row["center"], row["arm"]) for row in described["rows"]}
        assert {(c, "none") for c in [*SIZES, "pooled"]} <= arms
