"""Categorical variables and missing values end to end over HTTP with real processes: two
``python -m center_agent`` (a categorical variable, values missing per variable) and a
``python -m coordinator`` running ``examples/categorical.toml`` (a Table 1 with smoking's n (%)
and crp's missing n, smoking by arm from K-anonymous and from ε-DP counts). Checked: the
counts against the raw data after the centers' K rule (a level's 10 records missing crp stay
and are its missing count; a small category merged with its neighbour at one center, so in
the pooled table; fewer than K records missing, which take K of the level's rows with them, are
tested where the choice is known: tests/adversarial/test_adv_enrolment.py), no
count any center released in 1..K-1 (asked again of the centers themselves), the Table 1
lines, the ε the dry run announced equal to what each center spent, and the DP counts near
the truth."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest
from scipy import stats

from center_agent.gate.keys import write_key_pair
from coordinator.reporting.report import render_html, summary
from fedstats_cli.procs import free_port
from fedstats_cli.study import load_spec
from tests.coordinator.test_coord_describe import spent, wait_for_status
from tests.helpers.config import write_toml
from tests.helpers.coordinator import AUTH, CENTER_TOKENS, K, coordinator_config
from tests.helpers.processes import spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = [pytest.mark.process, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = ["never", "former", "current"]
# Per center and arm: smoking (never, former, current, missing label) and the records missing
# crp (taken from the first "never" records).
RAW = {
    "alpha": {"ctl": ([40, 30, 20, 10], 10), "trt": ([30, 30, 30, 0], 0)},
    "beta": {"ctl": ([35, 4, 31, 10], 0), "trt": ([40, 20, 20, 10], 15)},
}
# After the K rule (center_agent/data/missing.py): every level's records missing crp number 0
# or >= K, so every record stays; beta's 4 "former" in ctl are merged with "current" in both
# of its levels.
KEPT = {
    "alpha": {"ctl": ([40, 30, 20, 10], 10), "trt": ([30, 30, 30, 0], 0)},
    "beta": {"ctl": ([35, 4, 31, 10], 0), "trt": ([40, 20, 20, 10], 15)},
}


def write_center(tmp_path: Path, cid: str, port: int) -> Path:
    lines = []
    value = 40.0
    for arm, (smoking, crp_missing) in RAW[cid].items():
        labels = [c for c, n in zip([*CATEGORIES, ""], smoking, strict=True) for _ in range(n)]
        for i, label in enumerate(labels):
            value += 0.37
            lines.append(f"{'' if i < crp_missing else round(value % 60 + 20, 2)},{label},{arm}")
    csv = tmp_path / f"{cid}.csv"
    csv.write_text("crp,smoking,arm\n" + "\n".join(lines) + "\n")
    peers = tmp_path / "peers"
    peers.mkdir(exist_ok=True)
    (peers / f"{cid}.pub").write_text(write_key_pair(tmp_path / f"{cid}.key") + "\n")
    return write_toml(tmp_path / f"{cid}.toml", {
        "center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]], "port": port,
        "ledger_url": f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}",
        "signing_key_file": str(tmp_path / f"{cid}.key"), "peer_keys_dir": str(peers),
        "datasets": {"cohort": {
            "source": {"kind": "csv", "path": str(csv)}, "variables": ["crp"],
            "categorical": {"smoking": CATEGORIES}, "missing": "per_variable",
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "epsilon_total": 5.0, "epsilon_per_request": 1.0,
        }},
    })


def released_counts(url: str, cid: str) -> list[int]:
    """Every count the center releases for the study's questions (asked again: the stored
    answers), categorical tables in each wording and the missing counts."""
    headers = {"Authorization": f"Bearer {CENTER_TOKENS[cid]}"}
    out: list[int] = []
    for body in ({"variable": "smoking", "groups": ["ctl", "trt"], "k": K},
                 {"variable": "smoking", "groups": ["trt", "ctl"], "k": K},
                 {"variable": "smoking", "k": K}):
        r = httpx.post(f"{url}/v1/datasets/cohort/categorical", json=body, headers=headers)
        assert r.status_code == 200, r.text
        out += [c for row in r.json()["counts"] for c in row] + (r.json()["missing"] or [])
    r = httpx.post(f"{url}/v1/datasets/cohort/missing", json={"variable": "crp"},
                   headers=headers)
    assert r.status_code == 200, r.text
    out += [*r.json()["n"], *r.json()["present"], *r.json()["missing"]]
    return out


def test_categorical_study_end_to_end(tmp_path: Path) -> None:
    ports = {cid: free_port() for cid in RAW}
    configs = {cid: write_center(tmp_path, cid, ports[cid]) for cid in RAW}
    urls = {cid: f"http://127.0.0.1:{p}" for cid, p in ports.items()}
    config, port = coordinator_config(tmp_path / "coordinator.toml", urls, tokens=CENTER_TOKENS,
                                      min_centers=2, read_timeout_s=scaled(60.0))
    spec = load_spec(ROOT / "examples" / "categorical.toml")
    assert spec["k"] == K
    with contextlib.ExitStack() as stack:
        procs = [(spawn("center_agent", configs[c]), ports[c], configs[c]) for c in RAW]
        procs.append((spawn("coordinator", config), port, config))
        for proc, _, _ in procs:
            stack.callback(stop, proc)
        for proc, p, c in procs:
            wait_healthy(proc, p, c)
        client = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                                  headers=AUTH, timeout=scaled(60)))

        # A categorical variable no center declares: refused at submission, naming it.
        bad = {**spec, "analyses": [{"kind": "categorical", "variable": "crp"}]}
        refused = client.post("/v1/studies", json=bad)
        assert refused.status_code == 422 and refused.json()["error"] == "unknown_name"
        assert "body.analyses.0.variable" in refused.json()["fields"]

        plan = client.post("/v1/studies", params={"dry_run": "true"}, json=spec)
        assert plan.status_code == 200, plan.text
        planned = {c["center"]: c["epsilon"] for c in plan.json()["centers"]}
        assert planned == {c: pytest.approx(1.0) for c in RAW}
        created = client.post("/v1/studies", json=spec)
        assert created.status_code == 202, created.text
        view = wait_for_status(client, created.json()["status_url"])
        assert view["status"] == "succeeded", view["result"]["analyses"]
        for c in RAW:
            assert spent(urls[c], c) == pytest.approx(planned[c])
        describe, table, dp = view["result"]["analyses"]

        # No count any center released lies in 1..K-1, nor any exact count the coordinator
        # shows (sums of released counts).
        for c in RAW:
            assert all(n == 0 or n >= K for n in released_counts(urls[c], c)), c
        shown = [x["count"] for a in [*table["arms"], *describe["categorical"]]
                 for x in a["cells"]]
        shown += [a["missing"] for a in [*table["arms"], *describe["categorical"]]]
        shown += [r["missing"] for r in describe["rows"]] + [r["n"] for r in describe["rows"]]
        assert all(n == 0 or n >= K for n in shown)

        # The K-anonymous counts: beta's small "former" merged with "current" everywhere.
        arms = {(a["center"], a["arm"]): a for a in table["arms"]}
        for c, by_arm in KEPT.items():
            for arm, (smoking, _) in by_arm.items():
                row = arms[(c, arm)]
                assert [x["label"] for x in row["cells"]] == ["never", "former or current"]
                assert [x["count"] for x in row["cells"]] == [smoking[0], smoking[1] + smoking[2]]
                assert row["missing"] == smoking[3]
        pooled = [[sum(KEPT[c][arm][0][0] for c in KEPT),
                   sum(KEPT[c][arm][0][1] + KEPT[c][arm][0][2] for c in KEPT)]
                  for arm in ("ctl", "trt")]
        tests = {t["name"]: t for t in table["tests"]}
        ref = stats.chi2_contingency(pooled, correction=False)
        assert tests["chi2"]["statistic"] == pytest.approx(ref.statistic)
        assert tests["chi2"]["pvalue"] == pytest.approx(ref.pvalue)
        assert tests["cmh"]["odds_ratio"] is not None and "fisher" not in tests
        assert any("former or current" in n for n in table["notes"])

        # ε-DP counts: ε = 0.5 per arm, α = e^-0.5; a draw beyond ± 40 has probability
        # 2α^41/(1 + α) = 1.6e-9, so over the 16 counts below this fails with p < 3e-8.
        assert dp["mode"] == "dp" and dp["spent"] == {c: pytest.approx(1.0) for c in RAW}
        noisy = {(a["center"], a["arm"]): a for a in dp["arms"]}
        for c, by_arm in KEPT.items():
            for arm, (smoking, _) in by_arm.items():
                row = noisy[(c, arm)]
                assert [x["label"] for x in row["cells"]] == CATEGORIES
                for x, true in zip(row["cells"], smoking[:3], strict=True):
                    assert abs(x["count"] - true) <= 40
                    assert x["count_interval"] is not None
                assert abs(row["missing"] - smoking[3]) <= 40

        # Table 1: crp's missing n (%) and smoking's n (%) rows, pooled ctl, trt, overall.
        text = summary(view).splitlines()
        missing = [line for line in text if line.strip().startswith("missing, n (%)")]
        assert len(missing) == 4  # Table 1's two, then each categorical analysis's
        crp, smoking = missing[:2]
        assert crp.split()[3:] == ["10", "(5.6", "%)", "15", "(8.3", "%)", "25", "(6.9", "%)"]
        assert smoking.split()[3:] == ["20", "(11.1", "%)", "10", "(5.6", "%)", "30", "(8.3",
                                       "%)"]
        never = next(line for line in text if line.strip().startswith("never"))
        assert never.split()[1:] == ["75", "(46.9", "%)", "70", "(41.2", "%)", "145", "(43.9",
                                     "%)"]
        page = render_html(view)
        assert "smoking, n (%)" in page and "former or current" in page
        assert "Categorical: smoking, n (%) by arm" in page and "Cochran-Mantel-Haenszel" in page
        assert "—" not in crp
