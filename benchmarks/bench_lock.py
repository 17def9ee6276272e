"""A stored answer's latency while a worst-case batch computes (``docs/benchmarks.md``, "A stored
answer beside a running computation").

It writes one hospital of ``--rows`` rows (Parquet: a continuous ``los`` and a two-level ``arm``),
starts ``python -m center_agent`` over it as deployed (uvicorn, one process, the default
settings but a large budget), stores a K-anonymous table, then:

1. asks the stored table ``--probes`` times, one after the other, with nothing else running (the
   baseline);
2. sends the worst case one token can send: a batch of 64 distinct ε-DP quantile releases (the
   most a batch holds, each at the least ε the center accepts, ``min_epsilon_per_release``), of
   every record, and asks the stored table again and again while the batch runs; then another
   such batch (other questions) while asking a stored ε-DP median (a small answer: the table's
   ~10^4 limits make its own presentation, signature included, the larger part of its time).

Printed: each batch's wall time, and each stored answer's latency (median, 95th percentile,
max) alone and during a batch. Before the release gate computed outside the dataset's lock, the
stored answer waited for the whole batch (21-53 s at 200k rows).

    .venv/bin/python benchmarks/bench_lock.py --rows 2e5
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fedstats_cli.procs import ProcessGroup, child_env, free_port
from fedstats_cli.settings_files import write_toml

K = 10
LEVELS = ("control", "treated")
BATCH = 64
LEAST_EPSILON = 1e-3


def write_hospital(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    arm = rng.integers(0, 2, n)
    los = np.exp(rng.normal(1.6, 0.6, n) + 0.1 * arm)
    pq.write_table(pa.table({"los": los, "arm": np.asarray(LEVELS)[arm]}), path)
    return path


def latencies(client: httpx.Client, path: str, body: dict[str, Any],
              stop: threading.Event | None, probes: int) -> list[float]:
    """Seconds per request of a stored answer: ``probes`` of them, or until ``stop`` is set."""
    out: list[float] = []
    while (stop is None and len(out) < probes) or (stop is not None and not stop.is_set()):
        start = time.perf_counter()
        r = client.post(path, json=body)
        out.append(time.perf_counter() - start)
        r.raise_for_status()
    return out


def summary(seconds: list[float]) -> str:
    ms = sorted(1000 * s for s in seconds)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return (f"{len(ms)} requests: median {statistics.median(ms):.1f} ms, 95th percentile "
            f"{p95:.1f} ms, max {ms[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=2e5)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()
    n = int(args.rows)
    token = secrets.token_urlsafe(32)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = write_hospital(work / "hospital.parquet", n, args.seed)
        config = write_toml(
            work / "center.toml",
            {"center_id": "bench", "k": K, "tokens": [token], "port": port,
             "ledger_url": f"sqlite:///{work / 'ledger.sqlite'}"},
            {"datasets.cohort": {"source": {"kind": "parquet", "path": str(data)},
                                 "variables": ["los"],
                                 "group": {"column": "arm", "levels": list(LEVELS)},
                                 "epsilon_total": 3.0}})
        with ProcessGroup() as group:
            child = group.start("center", [sys.executable, "-m", "center_agent", "--config",
                                           str(config)], url=f"http://127.0.0.1:{port}",
                                log=work / "center.log", env=child_env())
            group.wait_healthy(timeout_s=300)
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=child.url, headers=headers, timeout=600,
                              trust_env=False) as client, \
                    httpx.Client(base_url=child.url, headers=headers, timeout=600,
                                 trust_env=False) as prober:
                table = {"variable": "los", "groups": list(LEVELS), "k": K}
                small = {"variable": "los", "epsilon": 0.01, "levels": [0.5],
                         "bounds": [0.0, 100.0]}
                stored = {"table": ("/v1/datasets/cohort/table", table),
                          "ε-DP median": ("/v1/datasets/cohort/dp/quantiles", small)}
                for path, body in stored.values():
                    client.post(path, json=body).raise_for_status()
                alone = {name: latencies(prober, *what, None, args.probes)
                         for name, what in stored.items()}
                items: list[dict[str, Any]] = [{"kind": "dp_quantiles",
                          "request": {"variable": "los", "epsilon": LEAST_EPSILON,
                                      "levels": [0.5], "bounds": [0.0, 100.0 + i]}}
                         for i in range(BATCH)]
                during: dict[str, list[float]] = {}
                for name, (path, body) in stored.items():
                    stop = threading.Event()
                    seen: list[float] = []
                    probe = threading.Thread(target=lambda p=path, b=body, o=seen, e=stop:
                                             o.extend(latencies(prober, p, b, e, 0)))
                    start = time.perf_counter()
                    probe.start()
                    answer = client.post("/v1/datasets/cohort/releases", json={"items": [
                        {**item, "request": {**item["request"], "levels": [0.5, 0.75]}}
                        if name != "table" else item for item in items]})
                    batch_s = time.perf_counter() - start
                    stop.set()
                    probe.join()
                    answer.raise_for_status()
                    statuses = {a["status"] for a in answer.json()["answers"]}
                    during[name] = seen
                    print(f"batch of {BATCH} ε-DP quantile releases at ε = {LEAST_EPSILON:g} "
                          f"(while asking the stored {name}): {batch_s:.1f} s, statuses "
                          f"{sorted(statuses)}")
    load = os.getloadavg()
    print(f"{n} rows, {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} "
          f"(1 / 5 min)")
    for name in alone:
        print(f"stored {name}, alone:        {summary(alone[name])}")
        print(f"stored {name}, during batch: {summary(during[name])}")


if __name__ == "__main__":
    main()
