"""Studies per second with 1, 2, 3 ... coordinator processes over one PostgreSQL store
(``shared_store``, ``coordinator.leases``).

Starts ``--centers`` ``python -m center_agent`` processes (``bench_e2e``'s synthetic hospitals,
``--n`` records each) and, for each count in ``--processes``, that many ``python -m
coordinator`` over a fresh PostgreSQL schema; submits ``--studies`` studies at once, spread
round robin over the processes (``bench_e2e``'s study, each with its own DP bounds so each is
paid), follows each through the process it was submitted to (its events) and prints the
studies per second from the first submission to the last end, after two warm-up studies. The
centers are the same processes for every count (their release memory is per request, and every
study here asks new ones: each study pays and computes as the first did).

    .venv/bin/python benchmarks/bench_processes.py                     # 1, 2, 3 processes
    .venv/bin/python benchmarks/bench_processes.py --processes 1,3 --studies 30
    .venv/bin/python benchmarks/bench_processes.py --processes 1 --without-leases  # their cost
    .venv/bin/python benchmarks/bench_processes.py --store-url postgresql+psycopg://u@host/db
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from bench_e2e import (  # type: ignore[import-not-found]
    SPEC,
    K,
    dataset_config,
    hospitals,
    run_to_end,
    serve,
    signing_keys,
    write_parquet,
)

from fedstats_cli.procs import ProcessGroup, child_env, free_ports, terminate_on_sigterm
from fedstats_cli.settings_files import write_toml

STORE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def spec(i: int, repeat: int) -> dict[str, Any]:
    """The study with its own bounds: a distinct, paid DP request (its federated table is
    built once per count and reused by the studies after, as a coordinator does)."""
    bounds = [0.0, 60.0 + i + 1000 * repeat]
    return {**SPEC, "analyses": [{**a, "bounds": bounds} if a["kind"] == "dp_boxplot" else a
                                 for a in SPEC["analyses"]]}


def one_count(work: Path, k: int, studies: int, repeat: int, base_url: str,
              centers: dict[str, tuple[str, str]], env: dict[str, str], *,
              shared: bool = True) -> dict[str, float]:
    """``studies`` studies over ``k`` coordinator processes on a fresh schema (``shared``:
    with ``shared_store``, the leases; without, one process as before)."""
    schema = f"bench_processes_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = f"{base_url}?options=-csearch_path%3D{schema}"
    analyst = secrets.token_urlsafe(32)
    try:
        with ProcessGroup() as group:
            ports = free_ports(k)
            for i, port in enumerate(ports):
                config = write_toml(
                    work / f"coordinator-{k}-{i}.toml",
                    {"analyst_tokens": [analyst], "min_centers": 2, "port": port,
                     "read_timeout_s": 600.0, "max_running_studies": 1000,
                     "store_url": url, "shared_store": shared},
                    {f"centers.{cid}": {"url": curl, "token": token}
                     for cid, (curl, token) in centers.items()})
                group.start(f"coordinator{i}", serve("coordinator", config),
                            url=f"http://127.0.0.1:{port}",
                            log=work / f"coordinator-{k}-{i}.log", env=env)
            group.wait_healthy(timeout_s=300)
            clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600,
                                    headers={"Authorization": f"Bearer {analyst}"})
                       for port in ports]
            try:
                start = time.perf_counter()
                with ThreadPoolExecutor(max_workers=studies) as pool:
                    urls = list(pool.map(
                        lambda i: run_to_end(clients[i % k], spec(i, repeat)), range(studies)))
                wall = time.perf_counter() - start
                statuses = [clients[0].get(u, params={"provenance": "false"}).json()["status"]
                            for u in urls]
            finally:
                for client in clients:
                    client.close()
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    failed = sum(s != "succeeded" for s in statuses)
    return {"processes": k, "studies": studies, "failed": failed, "wall_s": wall,
            "per_s": studies / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,2,3", help="coordinator process counts")
    parser.add_argument("--studies", type=int, default=24, help="studies per count, at once")
    parser.add_argument("--centers", type=int, default=3)
    parser.add_argument("--n", type=int, default=20_000, help="records per center")
    parser.add_argument("--without-leases", action="store_true",
                        help="also one process without shared_store (what the leases cost)")
    parser.add_argument("--store-url", default=STORE_URL,
                        help="a PostgreSQL database (a fresh schema is made per count)")
    args = parser.parse_args()
    counts = [int(c) for c in args.processes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        work = Path(tmp)
        files = {h.center_id: write_parquet(h, work / f"{h.center_id}.parquet", seed=i)
                 for i, h in enumerate(hospitals(args.centers, args.n, seed=29))}
        tokens = {cid: secrets.token_urlsafe(32) for cid in files}
        ports = dict(zip(files, free_ports(len(files)), strict=True))
        keys, peers = signing_keys(work, list(files))
        env = child_env()
        with ProcessGroup() as group:
            for cid, path in files.items():
                config = write_toml(
                    work / f"{cid}.toml",
                    {"center_id": cid, "k": K, "tokens": [tokens[cid]], "port": ports[cid],
                     "ledger_url": f"sqlite:///{work / f'{cid}-ledger.sqlite'}",
                     "signing_key_file": str(keys[cid]), "peer_keys_dir": str(peers)},
                    {"datasets.cohort": {**dataset_config(path), "epsilon_total": 1e6}})
                group.start(cid, serve("center_agent", config),
                            url=f"http://127.0.0.1:{ports[cid]}", log=work / f"{cid}.log",
                            env=env)
            group.wait_healthy(timeout_s=300)
            centers = {cid: (f"http://127.0.0.1:{ports[cid]}", tokens[cid]) for cid in files}
            # Warm the centers (their first requests load and sort the data) before timing.
            one_count(work, 1, 2, len(counts) + 1, args.store_url, centers, env)
            # Without leases first, then each count: run again in another order to see how the
            # order moves the figures.
            runs = ([(1, False)] if args.without_leases else []) + [(k, True) for k in counts]
            for repeat, (k, shared) in enumerate(runs):
                r = one_count(work, k, args.studies, repeat, args.store_url, centers, env,
                              shared=shared)
                print(f"{r['processes']:.0f} coordinator process(es)"
                      f"{'' if shared else ' without shared_store'}: {r['studies']:.0f} "
                      f"studies ({r['failed']:.0f} not succeeded) in {r['wall_s']:.1f} s: "
                      f"{r['per_s']:.2f} studies/s (load average {os.getloadavg()[0]:.1f}, "
                      f"{os.cpu_count()} cores)", flush=True)


if __name__ == "__main__":
    with terminate_on_sigterm():  # a `timeout` or kill stops the services started too
        main()
