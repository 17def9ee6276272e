"""A "Table 1" end to end over HTTP with real processes: two ``python -m center_agent`` and a
``python -m coordinator``, a study describing two variables ε-DP and from the K-anonymous tables.
Checked: the rows against the raw data (table mode within the bins' widths, DP mode at a large ε
within stated multiples of the noise scales), the ε each center spent (its own ``/v1/budget``)
equal to the dry run's, the gate refusing what it must (no bounds anywhere: 422 at submission;
a budget too small: the centers refuse and spend nothing), and the HTML report's Table 1."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from center_agent.gate.keys import write_key_pair
from coordinator.models import StudyView
from coordinator.reporting.report import render_html
from fedstats_cli.procs import free_port
from fedstats_client.results import StudyRecord
from tests.helpers.config import write_toml
from tests.helpers.coordinator import AUTH, CENTER_TOKENS, K, coordinator_config
from tests.helpers.processes import spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = [pytest.mark.process, pytest.mark.slow]

SIZES = {"alpha": (150, 130), "beta": (110, 120)}
EPSILON_TOTAL = 20.0
EPSILON = 4.0  # per variable and arm: 2 variables x 2 arms = 16 per center
BOUNDS_CRP = (0.0, 100.0)
BOUNDS_AGE = (18.0, 100.0)  # declared by the centers, not given in the spec


def make_center_data(seed: int = 11) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = {}
    for cid, (n_ctl, n_trt) in SIZES.items():
        n = n_ctl + n_trt
        out[cid] = {
            "crp": np.round(np.concatenate([rng.normal(45, 10, n_ctl),
                                            rng.normal(55, 10, n_trt)]), 4),
            "age": np.round(rng.uniform(20, 90, n), 1),
            "arm": np.array(["ctl"] * n_ctl + ["trt"] * n_trt),
        }
    return out


def center_config(tmp_path: Path, cid: str, data: dict[str, np.ndarray], port: int) -> Path:
    csv = tmp_path / f"{cid}.csv"
    lines = [f"{c!r},{a!r},{g}" for c, a, g in zip(data["crp"].tolist(), data["age"].tolist(),
                                                   data["arm"].tolist(), strict=True)]
    csv.write_text("crp,age,arm\n" + "\n".join(lines) + "\n")
    # Each center signs its tables and trusts the others' keys (peers/): each refines the
    # table the one before it signed.
    peers = tmp_path / "peers"
    peers.mkdir(exist_ok=True)
    (peers / f"{cid}.pub").write_text(write_key_pair(tmp_path / f"{cid}.key") + "\n")
    return write_toml(tmp_path / f"{cid}.toml", {
        "center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]], "port": port,
        "ledger_url": f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}",
        "signing_key_file": str(tmp_path / f"{cid}.key"), "peer_keys_dir": str(peers),
        "datasets": {"cohort": {
            "source": {"kind": "csv", "path": str(csv)}, "variables": ["crp", "age"],
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "epsilon_total": EPSILON_TOTAL, "epsilon_per_request": 5.0,
            "metadata": {"age": {"bounds": list(BOUNDS_AGE), "unit": "years"}},
        }},
    })


def wait_for_status(client: httpx.Client, url: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + scaled(timeout)
    while True:
        view: dict[str, Any] = client.get(url).json()
        if view["status"] not in ("pending", "running"):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"study still {view['status']}")
        time.sleep(0.1)


def spent(url: str, cid: str) -> float:
    r = httpx.get(f"{url}/v1/budget", headers={"Authorization": f"Bearer {CENTER_TOKENS[cid]}"})
    return float(r.json()["datasets"]["cohort"]["spent_epsilon"])


SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [
        {"kind": "describe", "variables": ["crp", "age"], "epsilon": EPSILON,
         "bounds": {"crp": list(BOUNDS_CRP)}, "bins": 8},
        {"kind": "describe", "variables": ["crp", "age"]},
    ],
}


def check_table_rows(rows: list[dict[str, Any]], data: dict[str, dict[str, np.ndarray]]) -> None:
    """Table mode: N exact (every record counted), mean and median within their exact bounds,
    and within the widest bin where shown."""
    pooled = {(r["variable"], r["arm"]): r for r in rows if r["center"] == "pooled"}
    for v in ("crp", "age"):
        values = np.concatenate([data[c][v] for c in data])
        arms = np.concatenate([data[c]["arm"] for c in data])
        for arm in ("ctl", "trt", "all"):
            x = values if arm == "all" else values[arms == arm]
            row = pooled[(v, arm)]
            width = float(np.max(np.diff(row["edges"])))
            assert row["n"] == x.size
            assert row["epsilon"] == 0 and row["minimum"] is None and row["maximum"] is None
            assert row["missing"] is None
            # Exact bounds always hold the data's own statistic; a point is shown only where
            # the bins pin it (shared.describe.TABLE_ACCURACY), said in the notes otherwise.
            for name, truth, tol in (("mean", x.mean(), width / 2),
                                     ("median", np.median(x), width)):
                lo, hi = row[f"{name}_interval"]
                assert lo - 1e-9 <= truth <= hi + 1e-9, (v, arm, name)
                if row[name] is None:
                    assert any("not estimable" in n for n in row["notes"]), (v, arm, name)
                else:
                    assert abs(row[name] - truth) <= tol
            assert sum(row["counts"]) == pytest.approx(x.size)  # federated counts are shares


T = 20.0  # noise scales a DP row may stray (check_dp_rows)


def check_dp_rows(result: dict[str, Any], data: dict[str, dict[str, np.ndarray]]) -> None:
    """DP mode: every center's row within T = 20 noise scales of the exact statistics of its
    clipped values. A Laplace draw beyond T scales has probability e^-T; each of the 8 rows
    fails only if its count's or its sum's noise does (the mean's bound covers both), so a run
    fails with probability at most 16·e^-20 ≈ 3e-8 (at 12 scales it was 16·e^-12 ≈ 1e-4, one
    run in 10,000)."""
    noise = {v: {p["name"]: p for p in parts} for v, parts in result["noise"].items()}
    assert set(noise) == {"crp", "age"}
    for parts in noise.values():
        assert sum(p["epsilon"] for p in parts.values()) == pytest.approx(EPSILON)
        assert parts["count"]["scale"] == pytest.approx(1 / parts["count"]["epsilon"])
    rows = [r for r in result["rows"] if r["center"] != "pooled" and r["arm"] != "all"]
    assert {(r["variable"], r["center"], r["arm"]) for r in rows} == {
        (v, c, a) for v in ("crp", "age") for c in SIZES for a in ("ctl", "trt")}
    for r in rows:
        lo, hi = BOUNDS_CRP if r["variable"] == "crp" else BOUNDS_AGE
        d = data[r["center"]]
        x = np.clip(d[r["variable"]][d["arm"] == r["arm"]], lo, hi)
        scale_n = noise[r["variable"]]["count"]["scale"]
        scale_s = noise[r["variable"]]["sum"]["scale"]
        assert abs(r["n"] - x.size) <= T * scale_n + 1
        # mean = c + S/N: both noisy; the bound covers T scales of each.
        n_low = x.size - T * scale_n
        assert abs(r["mean"] - x.mean()) <= T * scale_s / n_low + (hi - lo) * T * scale_n / n_low
        assert lo <= r["q1"] <= r["median"] <= r["q3"] <= hi
        assert r["minimum"] is None and r["maximum"] is None  # no DP extremes
        assert lo <= r["clip"][0] < r["clip"][1] <= hi
        for key in ("n", "mean", "sd", "q1", "median", "q3"):  # each number in its interval
            low, high = r[f"{key}_interval"]
            if key == "sd" and r["sd"] is None:
                # The noisy sums give a variance <= 0 (about 1 release in 600 here): the SD is
                # said not estimable, never 0, and its interval still starts at 0.
                assert any(n.startswith("SD not estimable") for n in r["notes"]), r["notes"]
                assert low == 0.0 <= high
                continue
            assert low <= r[key] <= high
        assert r["epsilon"] == EPSILON
        assert len(r["edges"]) == 9 and r["edges"][0] == lo and r["edges"][-1] == hi


def test_describe_study_end_to_end(tmp_path: Path) -> None:
    data = make_center_data()
    ports = {cid: free_port() for cid in SIZES}
    configs = {cid: center_config(tmp_path, cid, data[cid], ports[cid]) for cid in SIZES}
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

        # A DP describe of a variable with no bounds in the spec nor declared: refused at
        # submission, naming the field; nothing asked of any center.
        no_bounds = {**SPEC, "analyses": [{"kind": "describe", "variables": ["crp"],
                                           "epsilon": 1.0}]}
        refused = client.post("/v1/studies", json=no_bounds)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == "unknown_name"
        assert "body.analyses.0.bounds" in refused.json()["fields"]

        plan = client.post("/v1/studies", params={"dry_run": "true"}, json=SPEC)
        assert plan.status_code == 200, plan.text
        planned = {c["center"]: c["epsilon"] for c in plan.json()["centers"]}
        assert planned == {c: pytest.approx(4 * EPSILON) for c in SIZES}
        assert all(spent(urls[c], c) == 0 for c in SIZES)

        created = client.post("/v1/studies", json=SPEC)
        assert created.status_code == 202, created.text
        view = wait_for_status(client, created.json()["status_url"])
        assert view["status"] == "succeeded", view["result"]["analyses"]
        for c in SIZES:
            assert spent(urls[c], c) == pytest.approx(planned[c])
        dp, table = view["result"]["analyses"]
        assert dp["mode"] == "dp" and table["mode"] == "table"
        assert dp["units"] == {"age": "years"}
        assert dp["spent"] == {c: pytest.approx(4 * EPSILON) for c in SIZES}
        check_dp_rows(dp, data)
        check_table_rows(table["rows"], data)

        # The client's tidy frame: one row per (variable, center, arm) of both analyses.
        frame = StudyRecord(StudyView.model_validate(view)).result.describe.to_frame()  # type: ignore[union-attr]
        assert len(frame) == len(dp["rows"]) + len(table["rows"])
        pooled = frame[(frame.center == "pooled") & (frame.arm == "all")
                       & (frame["mode"] == "table")].set_index("variable")
        assert pooled.loc["age", "n"] == sum(d["age"].size for d in data.values())
        assert pooled.loc["age", "unit"] == "years"

        # The report's Table 1: variables (with units) by arm, then Overall.
        page = render_html(view)
        assert "Table 1: descriptive statistics" in page
        assert "age (years)" in page and "Overall" in page
        assert "mean (SD)" in page and "median [Q1, Q3]" in page and "missing, n (%)" in page
        assert "mean: 95 % interval" in page and "basic bootstrap" in page
        assert "ε-differentially private" in page and "K-anonymous tables" in page

        # What is left (4 per center) is less than one request of this study (5): each
        # center refuses before computing, and spends nothing.
        before = {c: spent(urls[c], c) for c in SIZES}
        greedy = {**SPEC, "analyses": [{"kind": "describe", "variables": ["age"],
                                        "epsilon": 4.5}]}
        again = client.post("/v1/studies", json=greedy)
        assert again.status_code == 202, again.text
        failed = wait_for_status(client, again.json()["status_url"])
        assert failed["status"] == "failed"
        error = failed["error"]
        assert error["center_error"] == "budget_exceeded", error
        assert {c: spent(urls[c], c) for c in SIZES} == before
