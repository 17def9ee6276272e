"""End-to-end cost of a federated study through real HTTP, as a ratio to local computation.

For each plan (m centers with n records each) it generates m synthetic hospitals
(``fedstats_cli.synth``: two arms, a skewed length of stay rounded to 0.1 day) as Parquet files,
starts m ``python -m center_agent`` processes and one ``python -m coordinator`` on free loopback
ports, and runs one study — the federated K-anonymous table, the four Mann-Whitney tests and the
ε-DP boxplots of one arm (each center's and the pooled three-round protocol) — timed from the
POST to ``succeeded`` (followed through the study's server-sent events, not polled). Only the
first run of a study is timed: a repeat is answered from the centers' release caches.

Each center has a signing key and every other center's public key (its peers), as a deployment
does: a center refines only tables its peers signed.

Baselines, measured in the same run on the same files: each center's local computation — reading
its population as a center does (``center_agent.data.Dataset.population()``: read the Parquet
columns, keep the complete cases of declared levels, split and sort by group) plus the ``shared/``
core calls that compute every release the study asked of it (the requests it received, read from
the study's provenance), in process, without HTTP, ledger, disclosure control or auditor — and the
same study run in process over all centers (``coordinator.local.in_process_federation``: the real
center apps over ``httpx.ASGITransport``, ledgers included, without sockets or processes). Printed:
end-to-end / slowest center (the target is <= 1.5), end-to-end / in-process study (the HTTP and
process overhead), the CPU seconds the center processes and the coordinator used during the
study, the floor they put on this machine (the busiest center, or all that CPU time spread over
the cores: m centers on a 2-core machine cannot all run at once), end-to-end / floor, the
overhead in CPU seconds (the processes' CPU time less the local computation's CPU time: CPU
against CPU, so a loaded machine does not make it negative), and the
bytes exchanged per study (the JSON of every request and answer the coordinator recorded in its
provenance, so excluding HTTP headers). CPU times are read from ``/proc`` (Linux).

    .venv/bin/python benchmarks/bench_e2e.py                    # 10 x 1e6, 20 x 5e5, 50 x 2e5
    .venv/bin/python benchmarks/bench_e2e.py --plan 10:1e6
    .venv/bin/python benchmarks/bench_e2e.py --plan 3:1e5 --plan 5:1e5   # a quick look
    .venv/bin/python benchmarks/bench_e2e.py --warm     # each plan also on warmed-up centers
    .venv/bin/python benchmarks/bench_e2e.py --plan 50:2e5 --profile /tmp/coord.txt

``--profile FILE`` samples the coordinator process during the timed study with py-spy
(``pip install py-spy``; every thread, idle samples excluded, 100 per second, folded stacks in
FILE) and prints where its busy samples went (:func:`profile_shares`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from center_agent.core.config import DatasetConfig
from center_agent.data import Dataset, Population
from center_agent.gate.keys import write_key_pair
from coordinator.admin import opened
from coordinator.core.config import load_settings as load_coordinator_settings
from coordinator.local import in_process_federation
from coordinator.models import StudySpec
from coordinator.study import run_study
from fedstats_cli.procs import ProcessGroup, child_env, free_ports, terminate_on_sigterm
from fedstats_cli.settings_files import write_toml
from fedstats_cli.synth import GROUP_COLUMN, LEVELS, VARIABLE, Hospital, generate
from shared.privacy import Neighbouring
from shared.protocol import (
    DPBoxplotRequest,
    DPQuantilesRequest,
    ExtremesRequest,
    MWURequest,
    RefinementRequest,
    TableRequest,
    ThresholdCountsRequest,
    TreeHistogramRequest,
    WireModel,
)
from shared.quantiles.wire import YJMomentsRequest
from shared.releases import (
    canonical_table,
    dp_boxplot_release,
    dp_quantiles_release,
    extremes_release,
    mwu_release,
    refinement_release,
    table_view,
    threshold_counts_release,
    tree_histogram_release,
    yj_moments_release,
)

K = 10
EPSILON_TOTAL = 10.0  # per center; a quarter of it per request (the default cap) pays ε = 1
NEIGHBOURING: Neighbouring = "add_remove"  # the centers' default
SPEC: dict[str, Any] = {
    "dataset": "cohort",
    "variable": VARIABLE,
    "groups": list(LEVELS),
    "k": K,
    "analyses": [
        {"kind": "table", "lower": 0.0},
        {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"]},
        {"kind": "dp_boxplot", "group": LEVELS[1], "epsilon": 1.0, "bounds": [0.0, 60.0],
         "per_center": True, "pooled": True},
    ],
}


BRIEF = {"provenance": "false"}  # polling: the study's state without its provenance
WARM_UP_VARIABLE = "age"
WARM_UP_SPEC: dict[str, Any] = {
    **SPEC, "variable": WARM_UP_VARIABLE,
    "analyses": [*SPEC["analyses"][:2], {**SPEC["analyses"][2], "bounds": [0.0, 120.0]}],
}


def dataset_config(path: Path) -> dict[str, Any]:
    """The ``cohort`` dataset of a center over ``path``, as every center here declares it."""
    return {"source": {"kind": "parquet", "path": str(path)},
            "variables": [VARIABLE, WARM_UP_VARIABLE],
            "group": {"column": GROUP_COLUMN, "levels": list(LEVELS)},
            "epsilon_total": EPSILON_TOTAL}


def signing_keys(work: Path, centers: list[str]) -> tuple[dict[str, Path], Path]:
    """A signing key per center and the peers' directory of their public keys (``<id>.pub``),
    as ``fedstats center keygen --public-dir`` makes them."""
    peers = work / "peers"
    peers.mkdir()
    keys = {}
    for cid in centers:
        keys[cid] = work / "keys" / f"{cid}.key"
        write_key_pair(keys[cid])
        shutil.copyfile(keys[cid].with_name(f"{cid}.key.pub"), peers / f"{cid}.pub")
    return keys, peers


def hospitals(m: int, n: int, seed: int) -> list[Hospital]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        n_control = int(n * rng.uniform(0.4, 0.6))
        out.append(Hospital(f"c{i:02d}", n_control, n - n_control,
                            float(rng.uniform(4.0, 6.5)), float(rng.uniform(0.5, 0.7))))
    return out


def write_parquet(h: Hospital, path: Path, seed: int) -> Path:
    columns = generate(h, np.random.default_rng(seed))
    pq.write_table(pa.table({name: pa.array(col) for name, col in columns.items()}), path)
    return path


def serve(module: str, config: Path) -> list[str]:
    """The command that serves ``module`` (a center or the coordinator) as deployed."""
    return [sys.executable, "-m", module, "--config", str(config)]


def posts_since(logs: dict[str, Path], offsets: dict[str, int]) -> int:
    """The POST requests the centers logged (``uvicorn.access``) after ``offsets``."""
    total = 0
    for cid, path in logs.items():
        with path.open("rb") as f:
            f.seek(offsets[cid])
            total += sum(1 for line in f if b'"POST /v1/' in line)
    return total


def run_plan(m: int, n: int, seed: int, *, warm: bool = False,
             batch: bool = True, profile: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_e2e_") as tmp:
        work = Path(tmp)
        files = {}
        t0 = time.perf_counter()
        for i, h in enumerate(hospitals(m, n, seed)):
            files[h.center_id] = write_parquet(h, work / f"{h.center_id}.parquet", seed + i)
        generated = time.perf_counter() - t0
        tokens = {cid: secrets.token_urlsafe(32) for cid in files}
        analyst = secrets.token_urlsafe(32)
        *center_ports, coord_port = free_ports(len(files) + 1)
        ports = dict(zip(files, center_ports, strict=True))
        keys, peers = signing_keys(work, list(files))
        env = child_env()
        with ProcessGroup() as group:
            for cid, path in files.items():
                config = write_toml(
                    work / f"{cid}.toml",
                    {"center_id": cid, "k": K, "tokens": [tokens[cid]], "port": ports[cid],
                     "ledger_url": f"sqlite:///{work / f'{cid}-ledger.sqlite'}",
                     "signing_key_file": str(keys[cid]), "peer_keys_dir": str(peers)},
                    {"datasets.cohort": dataset_config(path)})
                group.start(cid, serve("center_agent", config),
                            url=f"http://127.0.0.1:{ports[cid]}", log=work / f"{cid}.log",
                            env=env)
            coord_config = write_toml(
                work / "coordinator.toml",
                {"analyst_tokens": [analyst], "min_centers": 2, "port": coord_port,
                 "read_timeout_s": 600.0, "batch_releases": batch,
                 "store_url": f"sqlite:///{work / 'coordinator.sqlite'}"},
                {f"centers.{cid}": {"url": f"http://127.0.0.1:{ports[cid]}",
                                    "token": tokens[cid]} for cid in files})
            # An admin account: the provenance then shows every request in full (an analyst's
            # omits the tables a refinement is asked about), which the baselines replay.
            with opened(load_coordinator_settings(coord_config)) as accounts:
                analyst = accounts.add("bench", "admin").token
            coordinator = group.start("coordinator", serve("coordinator", coord_config),
                                      url=f"http://127.0.0.1:{coord_port}",
                                      log=work / "coordinator.log", env=env)
            group.wait_healthy(timeout_s=300)
            for cid in files:  # each port is the center we started there
                info = httpx.get(f"http://127.0.0.1:{ports[cid]}/v1/info", timeout=600,
                                 headers={"Authorization": f"Bearer {tokens[cid]}"})
                assert info.json()["center_id"] == cid, info.text

            headers = {"Authorization": f"Bearer {analyst}"}
            with httpx.Client(base_url=f"http://127.0.0.1:{coord_port}", headers=headers,
                              timeout=600) as client:
                if warm:  # long-running centers: one study on another variable before
                    view = client.get(run_to_end(client, WARM_UP_SPEC), params=BRIEF).json()
                    if view["status"] != "succeeded":
                        raise SystemExit(f"warm-up study {view['status']}: {view.get('error')}")
                pids = {c.name: c.proc.pid for c in group.children if c is not coordinator}
                coord_pid = coordinator.proc.pid
                logs = {cid: work / f"{cid}.log" for cid in files}
                offsets = {cid: path.stat().st_size for cid, path in logs.items()}
                cpu_before = {cid: cpu_seconds(pid) for cid, pid in pids.items()}
                coord_before = cpu_seconds(coord_pid)
                sampler = None if profile is None else start_profile(coord_pid, profile)
                start = time.perf_counter()
                url = run_to_end(client, SPEC)
                e2e = time.perf_counter() - start
                if sampler is not None:
                    stop_profile(sampler)
                center_cpu = {cid: cpu_seconds(pid) - cpu_before[cid] for cid, pid in pids.items()}
                coord_cpu = cpu_seconds(coord_pid) - coord_before
                time.sleep(0.2)  # the access log lines of the last answers
                posts = posts_since(logs, offsets)
                view = client.get(url).json()  # with the provenance
                if view["status"] != "succeeded":
                    trace = (work / "coordinator.log").read_text()[-4000:]
                    raise SystemExit(f"study {view['status']}: {view.get('error')}\n{trace}")
                provenance = view["provenance"]
                exchanged = sum(len(json.dumps(p["request"])) + len(json.dumps(p["response"]))
                                for p in provenance)
                answers = len(provenance)

        local = local_centers(files, provenance, seed, warm=warm)
        in_process = in_process_study(files, warm=warm)
        slowest = max(t.wall_s for t in local.values())
        local_cpu = sum(t.cpu_s for t in local.values())
        cores = os.cpu_count() or 1
        # What this machine can do at best with every process's CPU time as measured: the
        # busiest center alone, or all the work spread over the cores.
        floor = max(max(center_cpu.values()), (sum(center_cpu.values()) + coord_cpu) / cores)
        # Every CPU second of the study that is not the centers' core computation: HTTP,
        # validation, ledgers, disclosure control, audit, the coordinator's protocols and store.
        # CPU less CPU: the local computation's wall time grows with the machine's load while
        # its CPU time does not, and subtracting it made the overhead negative under load.
        overhead = sum(center_cpu.values()) + coord_cpu - local_cpu
        return {"centers": m, "n_per_center": n, "warm": warm, "batch": batch, "e2e_s": e2e,
                "local_sum_s": local_cpu, "overhead_cpu_s": overhead,
                "overhead_share": overhead / (sum(center_cpu.values()) + coord_cpu),
                "posts": posts,
                "slowest_center_s": slowest,
                "ratio_slowest": e2e / slowest, "in_process_study_s": in_process,
                "ratio_in_process": e2e / in_process, "bytes": exchanged,
                "bytes_per_center": exchanged / m, "answers": answers,
                "generate_s": generated, "center_cpu_max_s": max(center_cpu.values()),
                "center_cpu_sum_s": sum(center_cpu.values()), "coordinator_cpu_s": coord_cpu,
                "floor_s": floor, "ratio_floor": e2e / floor, "cores": cores}


def start_profile(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` (every thread, busy samples only) into ``out`` as folded stacks,
    once it has attached."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    sampler = subprocess.Popen([spy, "record", "-p", str(pid), "-f", "raw", "-r", "100",
                                "--nonblocking", "-o", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert sampler.stdout is not None
    # py-spy says "Sampling process ..." (on stdout) once attached: a study started before
    # would be missed.
    for line in sampler.stdout:
        if b"Sampling" in line:
            return sampler
    raise SystemExit(f"py-spy could not sample the coordinator (exit {sampler.wait()})")


def stop_profile(sampler: subprocess.Popen[bytes]) -> None:
    """Stop sampling; py-spy writes its file on SIGINT."""
    sampler.send_signal(signal.SIGINT)
    sampler.communicate(timeout=120)


PROFILE_PARTS = (
    # (label, marks): a frame whose text holds one of the marks belongs to the part
    ("store (SQLAlchemy, SQLite, group commits)", ("sqlalchemy", "sqlite3", "commits.py",
                                                   "coordinator/db.py")),
    ("release calls to the centers (httpx, httpcore)", ("httpx/", "httpcore/",
                                                        "coordinator/client.py",
                                                        "coordinator/batching.py")),
    ("HTTP server (uvicorn's protocol, Starlette, FastAPI)", ("uvicorn/protocols", "h11",
                                                              "starlette/", "fastapi/",
                                                              "fedstats_service/middleware")),
    ("pydantic validation and serialization", ("pydantic",)),
    ("JSON", ("json/",)),
    ("signatures (cryptography)", ("cryptography", "signatures.py")),
    ("audit records", ("audit",)),
    ("protocols' own computation (shared/, coordinator/protocols, numpy, scipy)",
     ("shared/", "coordinator/protocols/", "coordinator/analyses/", "numpy", "scipy")),
)


def profile_shares(folded: Path) -> list[tuple[str, float]]:
    """Each part's share of the busy samples of a py-spy raw (folded) profile. A sample goes to
    the part of its innermost frame that belongs to one (so a store call made inside a release
    call is the store's, a validation inside it pydantic's), else to "other" (the event loop
    itself, the study runner's bookkeeping)."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit():
            continue
        total += int(number)
        label = "other"
        for frame in reversed(stack.split(";")):
            label = next((name for name, marks in PROFILE_PARTS
                          if any(mark in frame for mark in marks)), "")
            if label:
                break
        counts[label or "other"] += int(number)
    return [(name, counts[name] / total) for name, _ in (*PROFILE_PARTS, ("other", ()))
            if total and counts[name]]


def run_to_end(client: httpx.Client, spec: dict[str, Any]) -> str:
    """Submit a study and follow its events (``GET .../events``) until it ends; its status URL.
    Not polled: polls every few milliseconds were a quarter of a small study's coordinator CPU,
    which the benchmark then counted as the study's."""
    created = client.post("/v1/studies", json=spec)
    created.raise_for_status()
    url = str(created.json()["status_url"])
    with client.stream("GET", f"{url}/events") as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if line == "event: end":
                break
    return url


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def local_centers(files: dict[str, Path], provenance: list[dict[str, Any]], seed: int, *,
                  warm: bool = False) -> dict[str, LocalTime]:
    """Per center, the seconds of its local computation: reading its population as the center
    does (``Dataset.population()``) plus the ``shared/`` core calls that compute every release
    the study asked of it (its requests in the study's provenance), on that population.
    ``warm``: the population was read before (a center that served another study keeps it), so
    only the check that the file is unchanged is timed."""
    asked: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for record in provenance:
        if record["call"] != "info":  # sizes: read from the population, nothing computed
            asked[record["center"]].append((record["call"], record["request"]))
    rng = np.random.default_rng(seed)
    spent = {}
    for cid, path in files.items():
        dataset = Dataset("cohort", DatasetConfig.model_validate(dataset_config(path)), K)
        if warm:
            dataset.population()
        start, cpu_start = time.perf_counter(), time.process_time()
        population = dataset.population()
        for call, request in asked[cid]:
            core_release(call, request, population, rng)
        spent[cid] = LocalTime(time.perf_counter() - start, time.process_time() - cpu_start)
    return spent


@dataclass(frozen=True)
class LocalTime:
    """A center's local computation: wall seconds (the ratio to the study's wall time) and CPU
    seconds of this process (the overhead: CPU against CPU, which a loaded machine does not
    inflate as it inflates wall time)."""

    wall_s: float
    cpu_s: float


def core_release(call: str, request: dict[str, Any], population: Population,
                 rng: np.random.Generator) -> object:
    """The ``shared/`` core's answer to one request a center received, on its population, as
    ``center_agent.gate.kinds`` computes it (the table: the canonical table of every level,
    then the view asked; a refinement: of the levels asked, or of every record)."""
    def levels(groups: tuple[str, str] | None) -> list[Any]:
        return [population.pooled(VARIABLE)] if groups is None else [
            population.level(VARIABLE, level) for level in groups]

    def dp(model: type[WireModel], compute: Callable[..., WireModel]) -> WireModel:
        asked = model.model_validate(request)
        x = population.selection(VARIABLE, getattr(asked, "group", None))
        return compute(x, asked, NEIGHBOURING, rng)

    if call == "table":
        table = TableRequest.model_validate(request)
        canonical = canonical_table(
            [population.level(VARIABLE, level) for level in population.levels], K, rng)
        rows = None if table.groups is None else [population.levels.index(level)
                                                  for level in table.groups]
        return table_view(canonical, rows, k=table.k, lower=table.lower, upper=table.upper)
    if call == "refine":
        refine = RefinementRequest.model_validate(request)
        # Ungrouped: every level apart, refined together (as the center's RefineKind does).
        return refinement_release(levels(refine.groups) if refine.groups is not None else [
            population.level(VARIABLE, level) for level in population.levels], refine, rng)
    if call == "mwu":
        mwu = MWURequest.model_validate(request)
        x, y = levels(mwu.groups)
        return mwu_release(x, y, mwu, rng)
    if call == "dp_boxplot":
        box = DPBoxplotRequest.model_validate(request)
        return dp_boxplot_release(population.selection(VARIABLE, box.group), box, NEIGHBOURING,
                                  K, rng)
    computations: dict[str, tuple[type[WireModel], Callable[..., WireModel]]] = {
        "dp_quantiles": (DPQuantilesRequest, dp_quantiles_release),
        "dp_extremes": (ExtremesRequest, extremes_release),
        "dp_tree_histogram": (TreeHistogramRequest, tree_histogram_release),
        "dp_threshold_counts": (ThresholdCountsRequest, threshold_counts_release),
        "yj_moments": (YJMomentsRequest, yj_moments_release),
    }
    if call not in computations:
        raise SystemExit(f"bench_e2e: no local baseline for a {call!r} request")
    return dp(*computations[call])


def in_process_study(files: dict[str, Path], *, warm: bool = False) -> float:
    """Wall seconds of the same study over in-process centers (the real center apps over
    ``httpx.ASGITransport``, keys, ledgers and disclosure control included) on the same files,
    declared as the center processes declare them, their populations read during the study.
    ``warm``: after the warm-up study, untimed."""
    datasets = {cid: {"cohort": dataset_config(path)} for cid, path in files.items()}

    async def run() -> float:
        centers = in_process_federation(datasets, k=K, neighbouring=NEIGHBOURING)
        try:
            ports = list(centers.values())
            if warm:
                await run_study(StudySpec.model_validate(WARM_UP_SPEC), ports, min_centers=2)
            start = time.perf_counter()
            await run_study(StudySpec.model_validate(SPEC), ports, min_centers=2)
            return time.perf_counter() - start
        finally:
            for center in centers.values():
                await center.aclose()

    return asyncio.run(run())


def plan(text: str) -> tuple[int, int]:
    m, n = text.split(":")
    return int(m), int(float(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=plan, action="append",
                        help="CENTERS:RECORDS_PER_CENTER (repeatable; default 10:1e6 20:5e5 "
                             "50:2e5)")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--warm", action="store_true",
                        help="also time each plan on warm centers: processes that served one "
                             "study on another variable first (data path and code warmed up)")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="sample the coordinator with py-spy during each timed study (folded "
                             "stacks in FILE, the last plan's) and print its busy samples' shares")
    parser.add_argument("--no-batch", dest="batch", action="store_false",
                        help="the coordinator asks for each release in its own request "
                             "(batch_releases = false), to compare")
    args = parser.parse_args()
    plans = args.plan or [(10, 1_000_000), (20, 500_000), (50, 200_000)]
    print(f"{'centers':>7} {'n/center':>9} {'warm':>4} {'e2e s':>7} {'slowest':>8} {'ratio':>6} "
          f"{'in-proc':>8} {'ratio':>6} {'cpu max':>8} {'cpu sum':>8} {'coord':>6} "
          f"{'floor':>6} {'ratio':>6} {'bytes':>10} {'B/center':>9} {'answers':>7} "
          f"{'posts':>6} {'local':>6} {'ovh cpu':>7} {'ovh %':>6}")
    runs = [(m, n, warm) for m, n in plans for warm in ((False, True) if args.warm else (False,))]
    for m, n, warm in runs:
        r = run_plan(m, n, args.seed, warm=warm, batch=args.batch, profile=args.profile)
        print(f"{r['centers']:>7} {r['n_per_center']:>9.0e} {'yes' if warm else 'no':>4} "
              f"{r['e2e_s']:>7.2f} "
              f"{r['slowest_center_s']:>8.2f} {r['ratio_slowest']:>6.2f} "
              f"{r['in_process_study_s']:>8.2f} {r['ratio_in_process']:>6.2f} "
              f"{r['center_cpu_max_s']:>8.2f} {r['center_cpu_sum_s']:>8.2f} "
              f"{r['coordinator_cpu_s']:>6.2f} {r['floor_s']:>6.2f} {r['ratio_floor']:>6.2f} "
              f"{r['bytes']:>10,d} {r['bytes_per_center']:>9,.0f} {r['answers']:>7d} "
              f"{r['posts']:>6d} {r['local_sum_s']:>6.2f} {r['overhead_cpu_s']:>7.2f} "
              f"{100 * r['overhead_share']:>5.1f}%",
              flush=True)
        if args.profile is not None:
            print(f"  the coordinator's busy samples ({args.profile}):")
            for name, share in profile_shares(args.profile):
                print(f"    {100 * share:5.1f} %  {name}")
    print("ratio: end-to-end / slowest center's local computation (target <= 1.5); "
          "in-proc ratio: end-to-end / the same study over in-process center apps (no sockets, "
          "no processes); "
          "cpu max/sum: CPU seconds the center processes used during the study (busiest, all); "
          "coord: the coordinator's; floor: max(cpu max, (cpu sum + coord) / "
          f"{os.cpu_count()} cores), the best this machine can do with that work; "
          "bytes: JSON of every request and answer recorded (provenance); answers: releases "
          "received; posts: release requests the centers served (a batch is one); local: the "
          "centers' local computation summed, in CPU seconds; ovh cpu: cpu sum + coord - local, "
          "the CPU seconds "
          "spent outside the centers' core computation; ovh %: that share of all the study's "
          "CPU (cpu sum + coord)")


if __name__ == "__main__":
    with terminate_on_sigterm():  # a `timeout` or kill stops the services started too
        main()
