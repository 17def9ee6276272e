"""The coordinator's store under concurrent studies: transactions committed and fsyncs per study.

Runs ``--studies`` concurrent studies (``bench_e2e``'s study: the federated table, the four
Mann-Whitney tests, each center's and the pooled ε-DP boxplot; each study its own bounds, so
every one is paid) through the coordinator's real ``StudyRunner`` and ``Store`` (SQLite, WAL,
``synchronous=FULL``) over ``--centers`` in-process centers (the real center apps over
``httpx.ASGITransport``), owned by an analyst, so every DP release is reserved against the
analyst's quota before its center is asked. Printed: the store's committed transactions per
study (each one fdatasync of SQLite's log; counted with SQLAlchemy's ``commit`` event, so the
same script measures a version of the coordinator from before its group commit), the wall
time, and the commits per protocol round. Count the fsyncs themselves with::

    strace -f -c -e trace=fdatasync,fsync .venv/bin/python benchmarks/bench_store.py

(which includes the centers' ledgers: they run in this process). The centers' ledgers use their
own engines; their commits and the log fsyncs they shared (group commit,
``fedstats_service.walsync``) are printed too.

    .venv/bin/python benchmarks/bench_store.py --centers 50 --studies 4
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_e2e import (  # type: ignore[import-not-found]
    NEIGHBOURING,
    SPEC,
    K,
    dataset_config,
    hospitals,
    write_parquet,
)
from sqlalchemy import event

from coordinator.db import Store
from coordinator.local import in_process_federation
from coordinator.models import StudySpec
from coordinator.runner import StudyRunner
from fedstats_service import walsync


def spec(i: int) -> StudySpec:
    """The benchmark's study with its own bounds (a distinct, paid DP request per study)."""
    body: dict[str, Any] = {**SPEC, "analyses": [
        {**a, "bounds": [0.0, 60.0 + i]} if a["kind"] == "dp_boxplot" else a
        for a in SPEC["analyses"]]}
    return StudySpec.model_validate(body)


async def run(m: int, n: int, studies: int, work: Path) -> dict[str, float]:
    files = {h.center_id: write_parquet(h, work / f"{h.center_id}.parquet", seed=i)
             for i, h in enumerate(hospitals(m, n, seed=29))}
    datasets = {cid: {"cohort": dataset_config(path)} for cid, path in files.items()}
    centers = in_process_federation(datasets, k=K, neighbouring=NEIGHBOURING)
    store = Store(f"sqlite:///{work / 'coordinator.sqlite'}")
    commits = 0

    def counted(_conn: object) -> None:
        nonlocal commits
        commits += 1

    event.listen(store.engine, "commit", counted)
    runner = StudyRunner(store, centers, min_centers=2)
    syncs = walsync.every_sync  # the centers' ledgers: group commit (fedstats_service.walsync)
    try:
        ledger_before = (sum(s.commits for s in syncs()), sum(s.fsyncs for s in syncs()))
        before = commits
        start, cpu = time.perf_counter(), time.process_time()
        made = [await runner.submit(spec(i), analyst_id="bench") for i in range(studies)]
        for record in made:
            await runner.wait(record.id)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        statuses = {store.get_study(r.id).status for r in made}  # type: ignore[union-attr]
        if statuses != {"succeeded"}:
            raise SystemExit(f"studies ended {statuses}")
        answers = sum(store.count_releases(r.id) for r in made)
        return {"centers": m, "studies": studies, "wall_s": wall, "cpu_s": cpu,
                "commits": commits - before, "answers": answers,
                "ledger_commits": sum(s.commits for s in syncs()) - ledger_before[0],
                "ledger_fsyncs": sum(s.fsyncs for s in syncs()) - ledger_before[1]}
    finally:
        await runner.close()
        for center in centers.values():
            await center.aclose()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--centers", type=int, default=50)
    parser.add_argument("--n", type=int, default=2000, help="records per center")
    parser.add_argument("--studies", type=int, default=4, help="concurrent studies")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        r = asyncio.run(run(args.centers, args.n, args.studies, Path(tmp)))
    print(f"{r['studies']:.0f} studies x {r['centers']:.0f} centers: {r['commits']:.0f} store "
          f"commits ({r['commits'] / r['studies']:.1f} per study) for {r['answers']:.0f} "
          f"answers recorded; wall {r['wall_s']:.1f} s ({r['studies'] / r['wall_s']:.3f} "
          f"studies/s), CPU of this process (centers included) {r['cpu_s']:.1f} s; the "
          f"centers' ledgers: {r['ledger_commits']:.0f} commits, {r['ledger_fsyncs']:.0f} "
          "fsyncs")


if __name__ == "__main__":
    main()
