"""Faults during a study over real processes: three ``python -m center_agent`` (each trusting
the others' signed tables, each logging to its own file) behind small TCP proxies and a
``python -m coordinator``. A center is SIGKILLed the moment the request of one protocol step
reaches it (table build, refinement, MWU, each DP boxplot round; an answer it may have made by
then never reaches the coordinator), or never answers (the coordinator's read timeout). Every
analysis built on that step fails naming the center and its kind, with no numbers (the others
fail the same way or, when they finished first, keep their results: the study is ``failed`` or
``partially_failed``); the center restarts on its ledger, the same study is run again and
succeeds, and every center has spent exactly one study's ε: nothing was paid twice, nothing
released unpaid.

No bound here is a deadline that load can miss: the kill is counted exactly (a retry that reaches
the dying center is not a second kill: ``tests/helpers/faults.py``), the killed center is waited
for until it has exited before it is restarted, the slow center's answer is held until the
coordinator gives up (not for a fixed time it must outlast), and the read timeout and the study's
hang guard are :func:`~tests.helpers.timing.scaled`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.attacks import small_counts
from tests.helpers.center import AUTH as CENTER_AUTH
from tests.helpers.center import K, center_config
from tests.helpers.coordinator import AUTH, coordinator_config
from tests.helpers.faults import Proxy, proxied
from tests.helpers.processes import running_coordinator, spawn, stop, wait_healthy
from tests.helpers.timing import poll, scaled

pytestmark = pytest.mark.process

SIZES = {"alpha": (420, 1), "beta": (310, 2), "gamma": (200, 3)}  # alpha builds the table
STEPS = {  # case -> (path of the step, the center killed there)
    "table": ("/table", "alpha"),
    "refine": ("/table/refine", "beta"),
    "mwu": ("/mwu", "gamma"),
    "dp_boxplot": ("/dp/boxplot", "beta"),
    "dp_extremes": ("/dp/extremes", "gamma"),
    "dp_tree_histogram": ("/dp/tree-histogram", "alpha"),
    "dp_threshold_counts": ("/dp/threshold-counts", "beta"),
}
# The analyses of spec() (their index) built on each step: the table is the MWU table test's too.
BUILT_ON = {"table": {0, 1}, "refine": {0, 1}, "mwu": {1}, "dp_boxplot": {2},
            "dp_extremes": {2}, "dp_tree_histogram": {2}, "dp_threshold_counts": {2}}
# The coordinator's read timeout: every answer but the held one comes well within it (8 s is
# generous on a quiet machine, scaled on a busy one); the slow case waits it out once.
READ_TIMEOUT_S = scaled(8.0)
STUDY_EPSILON = 2.0  # per center: its own DP box (1.0) and its share of the pooled one (1.0)


def spec(dataset: str) -> dict[str, Any]:
    return {
        "dataset": dataset, "variable": "x", "groups": ["a", "b"], "k": K,
        "analyses": [
            {"kind": "table"},
            {"kind": "mwu", "tests": ["sum", "table"]},
            {"kind": "dp_boxplot", "group": "a", "epsilon": 1.0, "bounds": [0.0, 100.0],
             "per_center": True, "pooled": True, "depth": 4, "branching": 4},
        ],
    }


@dataclass
class CenterProc:
    config: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """``python -m center_agent``, its stderr appended to ``<config>.log`` (a pipe nobody
        reads would fill with the tracebacks of a killed step and block the center)."""
        self.proc = spawn("center_agent", self.config)

    def current(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None
        return self.proc

    def wait_healthy(self) -> None:
        wait_healthy(self.current(), self.port, self.config)

    def ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                stop(self.proc)
            self.start()
            self.wait_healthy()

    def spent(self, dataset: str) -> float:
        r = httpx.get(f"http://127.0.0.1:{self.port}/v1/budget/{dataset}",
                      headers=CENTER_AUTH, timeout=scaled(30))
        return float(r.json()["spent_epsilon"])


@dataclass
class Federation:
    centers: dict[str, CenterProc]
    proxies: dict[str, Proxy]
    client: httpx.Client


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    workdir = tmp_path_factory.mktemp("faults")
    datasets = {name: 10.0 for name in [*STEPS, "slow"]}
    centers = {}
    for cid, (n, seed) in SIZES.items():
        config, port = center_config(workdir, datasets, name=cid, n=n, seed=seed)
        centers[cid] = CenterProc(config, port)
    try:
        for center in centers.values():
            center.start()  # all at once: imports take seconds
        for cid, center in centers.items():
            center.wait_healthy()
            info = httpx.get(f"http://127.0.0.1:{center.port}/v1/info", headers=CENTER_AUTH)
            assert info.json()["center_id"] == cid  # not another process on a reused port
        with (proxied(centers["alpha"].port, centers["alpha"].current) as pa,
              proxied(centers["beta"].port, centers["beta"].current) as pb,
              proxied(centers["gamma"].port, centers["gamma"].current) as pg):
            proxies = {"alpha": pa, "beta": pb, "gamma": pg}
            config, port = coordinator_config(
                workdir / "coordinator.toml",
                {cid: f"http://127.0.0.1:{proxy.port}" for cid, proxy in proxies.items()},
                min_centers=2, read_timeout_s=READ_TIMEOUT_S, connect_timeout_s=scaled(1.0),
                retry={"attempts": 2, "backoff_initial_s": 0.1, "backoff_max_s": 0.2})
            with (running_coordinator(config, port),
                  httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH,
                               timeout=scaled(30)) as client):
                yield Federation(centers, proxies, client)
    finally:
        for center in centers.values():
            if center.proc is not None:
                stop(center.proc)


def run_study(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """Submit ``body`` and poll the study to its end (90 s on a quiet machine is a hang guard)."""
    created = client.post("/v1/studies", json=body)
    assert created.status_code == 202, created.text
    url = created.json()["status_url"]

    def ended() -> dict[str, Any] | None:
        view = dict(client.get(url).json())
        return None if view["status"] in ("pending", "running") else view

    return poll(ended, f"study {url}", quiet_s=90, interval_s=0.1)


def assert_named(error: dict[str, Any], center: str, kinds: set[str]) -> None:
    assert error["center"] == center, error
    assert error["kind"] in kinds, error
    assert center in error["detail"]


def assert_failed_naming(view: dict[str, Any], center: str, kinds: set[str],
                         built_on: set[int]) -> None:
    """The analyses ``built_on`` the faulty step (and any other the lost center failed) report
    no numbers and name it; a failed study reports none at all."""
    assert view["status"] in ("failed", "partially_failed"), view
    assert_named(view["error"], center, kinds)
    if view["status"] == "failed":
        assert not view.get("result"), "a failed study must report no numbers"
        return
    analyses = view["result"]["analyses"]
    failed = {i for i, a in enumerate(analyses) if a["status"] == "failed"}
    assert built_on <= failed, failed
    for i in failed:
        assert set(analyses[i]) == {"kind", "status", "error"}, analyses[i]
        assert_named(analyses[i]["error"], center, {"unreachable", "error", "timeout"})
    assert small_counts(view["result"]) == []


def assert_rerun_pays_nothing_more(federation: Federation, dataset: str) -> None:
    for center in federation.centers.values():
        center.ensure_running()
        assert center.spent(dataset) <= STUDY_EPSILON + 1e-9
    view = run_study(federation.client, spec(dataset))
    assert view["status"] == "succeeded", view.get("error")
    assert small_counts(view["result"]) == []
    for cid, center in federation.centers.items():
        assert center.spent(dataset) == pytest.approx(STUDY_EPSILON), cid


@pytest.mark.parametrize("case", list(STEPS))
def test_a_center_killed_during_a_step(federation: Federation, case: str) -> None:
    """Fault: SIGKILL a center just after the request of ``case``'s step reached it."""
    path, victim = STEPS[case]
    fault = federation.proxies[victim].fault
    fault.arm(f"/v1/datasets/{case}{path}", kill=True)
    try:
        view = run_study(federation.client, spec(case))
    finally:
        fault.disarm()
    assert fault.fired == 1, fault.seen
    # SIGKILLed: it exits, however long a busy machine takes to tear it down; restarting it
    # before then would leave the next case a center that dies under it.
    federation.centers[victim].current().wait()
    assert_failed_naming(view, victim, {"unreachable", "error", "timeout"}, BUILT_ON[case])
    assert_rerun_pays_nothing_more(federation, case)


def test_a_center_slower_than_the_read_timeout(federation: Federation) -> None:
    """Fault: gamma's answer to its DP boxplot never reaches the coordinator, which gives up
    after its read timeout. The boxplot fails naming gamma (timeout); gamma did compute and
    pay, so the rerun gets the stored answer free."""
    fault = federation.proxies["gamma"].fault
    fault.arm("/v1/datasets/slow/dp/boxplot", hold=True)
    try:
        view = run_study(federation.client, spec("slow"))
    finally:
        fault.disarm()
    assert fault.fired == 1, fault.seen
    assert_failed_naming(view, "gamma", {"timeout"}, BUILT_ON["dp_boxplot"])
    assert_rerun_pays_nothing_more(federation, "slow")
