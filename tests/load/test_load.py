"""Load on loopback: 50 concurrent analysts against one ``python -m coordinator`` with 10 real
``python -m center_agent`` processes (about 45 s on 2 cores, start-up included; the
load itself must end within WALL_LIMIT_S on a quiet machine, :func:`~tests.helpers.timing.scaled`
on a busy one). Each analyst lists the centers,
submits a study (federated table, MWU, one of 5 DP quantile requests) and polls it to its end.
The centers trust each other's signed tables (one folder, one ``peers/`` directory), and each
logs to its own file. Asserted: no error answer, every study succeeded, and each center's ledger
spent exactly the 5 distinct DP requests (identical requests from many analysts are paid once: no
budget drift), each within the center's per-request cap (a quarter of its ε total by default).
Printed: studies per second and p50/p99 latency of studies and of single HTTP requests."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.bench_e2e import cpu_seconds
from center_agent.core.config import load_settings
from tests.helpers.center import AUTH as CENTER_AUTH
from tests.helpers.center import K, center_config
from tests.helpers.coordinator import AUTH, coordinator_config
from tests.helpers.processes import running_coordinator, spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.process]

CENTERS = 10
ANALYSTS = 50
VARIANTS = 5  # distinct DP requests
EPSILON = 0.1  # per DP request: within the default cap, a quarter of EPSILON_TOTAL
EPSILON_TOTAL = 3.0
WALL_LIMIT_S = 120.0  # on a quiet machine; scaled


def spec(variant: int) -> dict[str, Any]:
    return {
        "dataset": "cohort", "variable": "x", "groups": ["a", "b"], "k": K,
        "analyses": [
            {"kind": "table"},
            {"kind": "mwu", "tests": ["sum", "weighted", "table"]},
            {"kind": "dp_quantiles", "group": "a", "epsilon": EPSILON,
             "bounds": [0.0, 100.0 + variant], "levels": [0.25, 0.5, 0.75]},
        ],
    }


async def analyst(
    base: str, i: int, latencies: list[tuple[str, float]]
) -> tuple[str, float, list[int]]:
    """One analyst: list centers, submit, poll to the end. Returns (status, study s, codes)."""
    codes: list[int] = []
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=scaled(120)) as c:

        async def call(kind: str, method: str, url: str, **kw: Any) -> httpx.Response:
            t = time.perf_counter()
            r = await c.request(method, url, **kw)
            latencies.append((kind, time.perf_counter() - t))
            codes.append(r.status_code)
            return r

        await call("list centers", "GET", "/v1/centers")
        start = time.perf_counter()
        created = await call("submit", "POST", "/v1/studies", json=spec(i % VARIANTS))
        if created.status_code != 202:
            return f"http {created.status_code}", 0.0, codes
        url = created.json()["status_url"]
        while (view := (await call("poll", "GET", url, params={"provenance": "false"})).json())[
                "status"] in ("pending", "running"):
            await asyncio.sleep(0.05)
        status = str(view["status"])
        if status != "succeeded":  # say why, so a rare failure under load can be diagnosed
            status += f": {view.get('error')!r}"
        return status, time.perf_counter() - start, codes


def test_50_concurrent_analysts_no_errors_no_budget_drift(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    workdir = tmp_path_factory.mktemp("load")
    # Long-running centers, as deployed: their compiled kernels loaded as they start.
    centers = [center_config(workdir, {"cohort": EPSILON_TOTAL}, name=f"c{i}", n=200 + 60 * i,
                             seed=i, warm_kernels=True)
               for i in range(CENTERS)]
    for config, _ in centers:  # the figures asserted below fit the centers' ε caps
        cohort = load_settings(config).datasets["cohort"]
        assert EPSILON <= cohort.request_cap == EPSILON_TOTAL / 4
        assert VARIANTS * EPSILON <= cohort.epsilon_total
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for config, _ in centers:
            procs.append(spawn("center_agent", config))  # its stderr to <config>.log
        for i, (proc, (config, cport)) in enumerate(zip(procs, centers, strict=True)):
            wait_healthy(proc, cport, config)
            info = httpx.get(f"http://127.0.0.1:{cport}/v1/info", headers=CENTER_AUTH)
            assert info.json()["center_id"] == f"c{i}"  # not another process on a reused port
        config, port = coordinator_config(
            workdir / "coordinator.toml",
            {f"c{i}": f"http://127.0.0.1:{cport}" for i, (_, cport) in enumerate(centers)},
            min_centers=2, max_running_studies=ANALYSTS + 10, read_timeout_s=scaled(60.0))
        with running_coordinator(config, port) as coordinator:
            latencies: list[tuple[str, float]] = []
            cpu_before = [cpu_seconds(p.pid) for p in (coordinator, *procs)]
            start = time.perf_counter()

            async def everyone() -> list[tuple[str, float, list[int]]]:
                return list(await asyncio.gather(*(analyst(f"http://127.0.0.1:{port}", i,
                                                           latencies)
                                                   for i in range(ANALYSTS))))

            outcomes = asyncio.run(everyone())
            wall = time.perf_counter() - start
            cpu = [cpu_seconds(p.pid) - b for p, b in zip((coordinator, *procs), cpu_before,
                                                       strict=True)]
            spent = [httpx.get(f"http://127.0.0.1:{cport}/v1/budget/cohort",
                               headers=CENTER_AUTH, timeout=scaled(30)).json()
                     for _, cport in centers]
    finally:
        for proc in procs:
            stop(proc)

    studies = np.array([s for _, s, _ in outcomes])
    requests = np.array([t for _, t in latencies])
    print(f"\nload: {ANALYSTS} analysts, {CENTERS} centers: {ANALYSTS / wall:.2f} studies/s "
          f"({wall:.1f} s); study latency p50 {np.percentile(studies, 50):.2f} s, "
          f"p99 {np.percentile(studies, 99):.2f} s; {requests.size} HTTP requests, "
          f"p50 {1000 * np.percentile(requests, 50):.0f} ms, "
          f"p99 {1000 * np.percentile(requests, 99):.0f} ms")
    # CPU per study: what the machine's cores must supply, whatever its load (the wall time
    # above moves with what else runs; this does not).
    print(f"  CPU per study: coordinator {1000 * cpu[0] / ANALYSTS:.0f} ms, the {CENTERS} "
          f"centers {1000 * sum(cpu[1:]) / ANALYSTS:.0f} ms")
    for kind in ("list centers", "submit", "poll"):
        of_kind = np.array([t for k, t in latencies if k == kind])
        print(f"  {kind}: {of_kind.size} requests, p50 {1000 * np.percentile(of_kind, 50):.0f} "
              f"ms, p99 {1000 * np.percentile(of_kind, 99):.0f} ms")
    assert [status for status, _, _ in outcomes] == ["succeeded"] * ANALYSTS
    assert all(200 <= code < 300 for _, _, codes in outcomes for code in codes)
    for budget in spent:
        assert budget["spent_epsilon"] == pytest.approx(VARIANTS * EPSILON, abs=1e-9)
        assert budget["spent_epsilon"] <= budget["total_epsilon"]
    assert wall < scaled(WALL_LIMIT_S)
