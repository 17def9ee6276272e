"""A study of three arms end to end over HTTP with real processes: two ``python -m center_agent``
and a ``python -m coordinator``, the study read from ``examples/kruskal.toml`` (the same spec the
Python client's builder makes), run through the client, then by ``fedstats study run``.

Checked: the Kruskal-Wallis of the federated table is ``shared.kruskal.table_test`` of the table
the result shows, and Jonckheere-Terpstra ``shared.jonckheere.table_test``'s; each center's test
is scipy's Kruskal-Wallis of its raw data coarsened to its own table's bins; nothing is spent;
the second run reads the kept table; the report shows the section."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import stats

from center_agent.gate.keys import write_key_pair
from fedstats_cli.procs import free_port
from fedstats_client import Client
from fedstats_client.spec import Study
from shared import jonckheere, kruskal
from tests.helpers.config import write_toml
from tests.helpers.coordinator import ANALYST_TOKEN, CENTER_TOKENS, K, coordinator_config
from tests.helpers.processes import REPO, clean_env, fedstats, spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = [pytest.mark.process, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "kruskal.toml"
ARMS = ("placebo", "low", "high")
SIZES = {"alpha": (120, 110, 100), "beta": (70, 60, 80)}


def make_data(seed: int = 2028) -> dict[str, dict[str, np.ndarray]]:
    """Per center and arm: CRP on a grid of 0.5 (ties), rising with the arm."""
    rng = np.random.default_rng(seed)
    return {cid: {arm: np.round(rng.normal(40 + 5 * i, 10, n) * 2) / 2
                  for i, (arm, n) in enumerate(zip(ARMS, sizes, strict=True))}
            for cid, sizes in SIZES.items()}


def center_config(tmp_path: Path, cid: str, data: dict[str, np.ndarray], port: int) -> Path:
    csv = tmp_path / f"{cid}.csv"
    rows = [f"{v!r},{arm}" for arm in ARMS for v in data[arm].tolist()]
    csv.write_text("crp,arm\n" + "\n".join(rows) + "\n")
    peers = tmp_path / "peers"
    peers.mkdir(exist_ok=True)
    (peers / f"{cid}.pub").write_text(write_key_pair(tmp_path / f"{cid}.key") + "\n")
    return write_toml(tmp_path / f"{cid}.toml", {
        "center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]], "port": port,
        "ledger_url": f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}",
        "signing_key_file": str(tmp_path / f"{cid}.key"), "peer_keys_dir": str(peers),
        "datasets": {"trial": {
            "source": {"kind": "csv", "path": str(csv)}, "variables": ["crp"],
            # Declared in another order than the study names the arms.
            "group": {"column": "arm", "levels": ["high", "low", "placebo"]},
            "epsilon_total": 1.0,
        }},
    })


def coarse(limits: list[Any], values: np.ndarray) -> np.ndarray:
    lim = np.asarray([float(v) for v in limits])
    return np.clip(np.searchsorted(lim[1:-1], values, side="left"), 0, lim.size - 2)


def check(result: Any, data: dict[str, dict[str, np.ndarray]]) -> None:
    counts = np.asarray(result.table.counts)
    ours = kruskal.table_test(counts)
    assert result.tests["table"].statistic == pytest.approx(ours.statistic, rel=1e-12)
    assert result.tests["table"].pvalue == pytest.approx(ours.pvalue, rel=1e-9)
    assert result.arms.sizes == pytest.approx([sum(d[a].size for d in data.values())
                                               for a in ARMS], rel=1e-12)
    j = jonckheere.table_test(counts, alternative="increasing")
    assert result.trend["table"].statistic == pytest.approx(j.statistic, rel=1e-12)
    assert result.trend["table"].pvalue == pytest.approx(j.pvalue, rel=1e-9)
    own = []
    for c in result.centers:
        raw = data[c.center]
        cells = [coarse(c.limits, raw[a]) for a in ARMS]
        ref = stats.kruskal(*cells)
        assert c.bins >= 2 and c.sizes == [raw[a].size for a in ARMS]
        assert c.statistic == pytest.approx(ref.statistic, rel=1e-9)
        assert c.pvalue == pytest.approx(ref.pvalue, rel=1e-7)
        own.append(kruskal.table_test(np.array([np.bincount(x, minlength=c.bins)
                                                for x in cells], dtype=float)))
    assert result.tests["sum"].statistic == pytest.approx(kruskal.sum_test(own).statistic,
                                                          rel=1e-9)
    # The arms rise: every test sees it at these sizes.
    assert result.tests["table"].pvalue < 1e-6 and result.trend["table"].zstatistic > 5


def test_three_arms_end_to_end(tmp_path: Path) -> None:
    data = make_data()
    ports = {cid: free_port() for cid in SIZES}
    configs = {cid: center_config(tmp_path, cid, data[cid], ports[cid]) for cid in SIZES}
    urls = {cid: f"http://127.0.0.1:{p}" for cid, p in ports.items()}
    config, port = coordinator_config(tmp_path / "coordinator.toml", urls, tokens=CENTER_TOKENS,
                                      min_centers=2, read_timeout_s=scaled(60.0))
    spec = tomllib.loads(EXAMPLE.read_text())
    built = Study("trial", "crp", groups=list(ARMS), k=K).kruskal(ordered=True,
                                                                  alternative="increasing")
    assert built.spec() == Study(**{k: v for k, v in spec.items() if k != "analyses"},
                                 analyses=spec["analyses"]).spec()
    with contextlib.ExitStack() as stack:
        procs = [(spawn("center_agent", configs[c]), ports[c], configs[c]) for c in SIZES]
        procs.append((spawn("coordinator", config), port, config))
        for proc, _, _ in procs:
            stack.callback(stop, proc)
        for proc, p, c in procs:
            wait_healthy(proc, p, c)
        client = stack.enter_context(Client(f"http://127.0.0.1:{port}", token=ANALYST_TOKEN,
                                            timeout=scaled(60), poll_interval=0.1))

        plan = client.plan(built)
        assert plan.would_run and not plan.refusals
        record = client.run(built, progress=False, timeout=scaled(180))
        assert record.status == "succeeded", record.to_json()
        assert record.result is not None
        result = record.result.kruskal.raw
        check(result, data)
        frame = record.result.kruskal.to_frame()
        assert list(frame.index) == ["table", "sum", "weighted", "center:alpha", "center:beta",
                                     "trend:table", "trend:sum"]
        arms = record.result.kruskal.arms()
        assert arms.loc[("federated", "high"), "n"] == pytest.approx(180, rel=1e-12)

        # The study file through the CLI: the kept table is read again, nothing spent.
        out = tmp_path / "cli"
        done = subprocess.run(
            [*fedstats(), "study", "run", str(EXAMPLE), "--coordinator",
             f"http://127.0.0.1:{port}", "--out", str(out)],
            env=clean_env(FEDSTATS_ANALYST_TOKEN=ANALYST_TOKEN), capture_output=True,
            text=True, timeout=scaled(300))
        assert done.returncode == 0, done.stderr + done.stdout
        assert "Kruskal-Wallis across 3 arms (placebo, low, high)" in done.stdout
        assert "Jonckheere-Terpstra" in (out / "report.html").read_text()
        again = json.loads((out / "study.json").read_text())["result"]["analyses"][0]
        assert again["table"]["reused"] is not None
        assert again["tests"] == result.model_dump(mode="json")["tests"]
        for cid, url in urls.items():
            r = httpx.get(f"{url}/v1/budget",
                          headers={"Authorization": f"Bearer {CENTER_TOKENS[cid]}"})
            assert r.json()["datasets"]["trial"]["spent_epsilon"] == 0
