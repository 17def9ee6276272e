"""Three ``python -m coordinator`` processes over one PostgreSQL store (``shared_store``,
``coordinator.leases``) and two ``python -m center_agent``, one behind a TCP proxy. Studies are
submitted through all three; one coordinator is SIGKILLed in the middle of a study of its own
(the proxy holds that study's DP boxplot answer: the center has the request, the coordinator
waits). Another process claims the dead one's studies once their leases run out and runs them
on: every study ends ``succeeded``, each center spent on each study's dataset exactly what the
dry run said (the DP request asked again is answered from the center's release memory: nothing
was paid twice), and the audit shows each study passed from holder to holder, never claimed
from a process that did not hold it, and ended by the one holding it.

No bound is a deadline that load can miss: the kill waits for the held request to reach the
center, the dead process is waited for until it has exited, studies are polled to their end
under a :func:`~tests.helpers.timing.scaled` hang guard, and the lease is scaled too (a longer
lease on a busy machine only delays the takeover)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.db import Store
from tests.faults.test_fault_kill import CenterProc, spec
from tests.helpers.center import AUTH as CENTER_AUTH
from tests.helpers.center import center_config
from tests.helpers.coordinator import AUTH, coordinator_config
from tests.helpers.faults import proxied
from tests.helpers.processes import spawn, stop, wait_healthy
from tests.helpers.timing import poll, scaled

pytestmark = [pytest.mark.process, pytest.mark.slow]

DATASETS = [f"s{i}" for i in range(6)]  # one study each: its centers' spending is its own
VICTIM = 0  # the coordinator killed, in the middle of the study of DATASETS[0]
SUBMIT_TO = {ds: i % 3 for i, ds in enumerate(DATASETS)}  # s0, s3 -> 0; s1, s4 -> 1; ...


def owner_pid(owner: str | None) -> int | None:
    found = re.fullmatch(r".*:(\d+):[0-9a-f]{8}", owner or "")
    return int(found.group(1)) if found else None


@pytest.fixture
def centers(tmp_path: Path) -> Iterator[dict[str, CenterProc]]:
    made = {}
    for cid, (n, seed) in {"alpha": (420, 1), "beta": (310, 2)}.items():
        config, port = center_config(tmp_path, dict.fromkeys(DATASETS, 10.0), name=cid, n=n,
                                     seed=seed)
        made[cid] = CenterProc(config, port)
    try:
        for center in made.values():
            center.start()
        for center in made.values():
            center.wait_healthy()
        yield made
    finally:
        for center in made.values():
            if center.proc is not None:
                stop(center.proc)


def test_a_coordinator_killed_mid_study_is_taken_over_paying_nothing_twice(
        tmp_path: Path, pg_url: str, centers: dict[str, CenterProc]) -> None:
    with proxied(centers["beta"].port, centers["beta"].current) as beta_proxy:
        urls = {"alpha": f"http://127.0.0.1:{centers['alpha'].port}",
                "beta": f"http://127.0.0.1:{beta_proxy.port}"}
        configs = [coordinator_config(
            tmp_path / f"coordinator{i}.toml", urls, store_url=pg_url, shared_store=True,
            study_lease_s=scaled(3.0), min_centers=2, read_timeout_s=scaled(60))
            for i in range(3)]
        procs = [spawn("coordinator", config) for config, _ in configs]
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH,
                                timeout=scaled(30)) for _, port in configs]
        try:
            for proc, (config, port) in zip(procs, configs, strict=True):
                wait_healthy(proc, port, config)
            planned = clients[1].post("/v1/studies", params={"dry_run": "true"},
                                      json=spec(DATASETS[0]))
            assert planned.status_code == 200, planned.text
            plan = {c["center"]: c for c in planned.json()["centers"]}
            assert all(c["exact"] for c in plan.values())

            fault = beta_proxy.fault
            fault.arm(f"/v1/datasets/{DATASETS[0]}/dp/boxplot", hold=True)
            ids = {}
            for ds in DATASETS:
                created = clients[SUBMIT_TO[ds]].post("/v1/studies", json=spec(ds))
                assert created.status_code == 202, created.text
                ids[ds] = created.json()["id"]
            poll(lambda: fault.fired == 1, "the victim's DP boxplot request at beta",
                 quiet_s=120, alive=lambda: procs[VICTIM].poll() is None)
            procs[VICTIM].kill()
            procs[VICTIM].wait()  # SIGKILLed: it exits, however busy the machine
            fault.disarm()

            def ended(study_id: str) -> dict[str, Any] | None:
                view = dict(clients[1].get(f"/v1/studies/{study_id}").json())
                return None if view["status"] in ("pending", "running") else view

            views = {ds: poll(lambda s=ids[ds]: ended(s), f"study {ds}", quiet_s=180,  # type: ignore[misc]
                              interval_s=0.2,
                              alive=lambda: all(p.poll() is None for p in procs[1:]))
                     for ds in DATASETS}
            for ds, view in views.items():
                assert view["status"] == "succeeded", (ds, view.get("error"))
            for cid, center in centers.items():
                for ds in DATASETS:
                    spent = httpx.get(f"http://127.0.0.1:{center.port}/v1/budget/{ds}",
                                      headers=CENTER_AUTH, timeout=scaled(30)).json()
                    assert spent["spent_epsilon"] == pytest.approx(plan[cid]["epsilon"]), \
                        (cid, ds)
        finally:
            for client in clients:
                client.close()
            for proc in procs:
                stop(proc)

    pids = [p.pid for p in procs]
    store = Store(pg_url)
    try:
        claims: dict[str, list[dict[str, Any]]] = {}
        for entry in reversed(store.audit_entries(action="study.claimed", limit=1000)):
            assert entry.target is not None
            claims.setdefault(entry.target, []).append(json.loads(entry.detail or "{}"))
        for ds, study_id in ids.items():
            # Held first by the process it was submitted to, then passed on claim by claim,
            # each from the process holding it then; the last holder ended it.
            holders = [pids[SUBMIT_TO[ds]]]
            for claim in claims.get(study_id, []):
                assert owner_pid(claim["from"]) == holders[-1], (ds, claims[study_id])
                holders.append(owner_pid(claim["owner"]))  # type: ignore[arg-type]
            record = store.get_study(study_id)
            assert record is not None and owner_pid(record.owner) == holders[-1], ds
        # The killed process's study was taken over from it, and ended by a live one.
        assert owner_pid(claims[ids[DATASETS[0]]][0]["from"]) == pids[VICTIM]
        assert owner_pid(store.get_study(ids[DATASETS[0]]).owner) in pids[1:]  # type: ignore[union-attr]
    finally:
        store.close()
