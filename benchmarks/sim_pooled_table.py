"""Pooled (ungrouped) quantiles from the federated table, through the real service path, on
``bench_peers``' data: how far the table's interpolated quantiles are from the pooled sample's.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/sim_pooled_table.py [--reps 20] [--total 3100]
[--seed 20261201]``

Data: ``benchmarks.bench_peers.hospital_data`` (three hospitals of 1,600, 1,000 and 500 records at
n = 3,100, log-normal length of stay rounded to 0.1 day), each hospital's records split into two
arms (its first and second half; the draws are independent, so the arms are two samples of the
same law) declared as the levels ``ctl`` and ``trt`` of an in-process center
(``coordinator.local.in_process_federation``: the real center app, release gate and disclosure
control included), K = 10. Per replication, fresh data and fresh centers:

* ``pooled, fresh``: the ungrouped table (``groups`` None), the centers' first release;
* ``pooled after grouped``: the same after the two-arm table was released (every release of the
  variable constrains the next: ``center_agent.gate.disclosure``);
* ``sum of the arms' rows``: the two-arm table (the centers' first release) with its rows added
  (the pooled records, counted per arm); ``arm 1``, ``arm 2``: each row against its own arm's
  sample quantiles;
* ``shared, canonical view``: the same tables by ``shared`` functions alone (the largest center's
  canonical two-arm table pooled by ``table_view``, the others refining it by
  ``shared.federation.refine_pooled``, fresh random placements, no disclosure control);
* ``shared, one-group table``: ``shared.federation.federated_table`` of the pooled values (no
  levels: what the table was before every view came from the canonical two-arm table).

Error: mean |interpolation estimate − pooled sample quantile (``inverted_cdf``)| in days, over
replications, for the quartiles and for bench_peers' five levels; and the mean number of bins.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.bench_peers import LEVELS, hospital_data
from coordinator.local import in_process_federation
from coordinator.protocols.quantiles import table_quantiles
from coordinator.protocols.table import federated_bin_table
from shared.binning import BinTable
from shared.federation import apply_refinement, federated_table
from shared.releases import canonical_table, table_view

K = 10
QUARTILES = (0.25, 0.5, 0.75)


def pooled_interpolation(table: BinTable) -> np.ndarray:
    """The coordinator's interpolation estimate of the table's rows added (one row: itself)."""
    row = BinTable(limits=table.limits, counts=table.counts.sum(axis=0, keepdims=True), k=table.k)
    est = table_quantiles(row, LEVELS, estimators=["interpolation"], groups=["all"])
    values = est["interpolation"]["all"].quantiles
    assert values is not None
    return np.asarray(values)


def declare(path: Path, ctl: np.ndarray, trt: np.ndarray) -> dict[str, object]:
    labels = ["ctl"] * ctl.size + ["trt"] * trt.size
    pq.write_table(pa.table({"los": pa.array(np.concatenate([ctl, trt]), pa.float64()),
                             "arm": pa.array(labels, pa.string())}), path)
    return {"source": {"kind": "parquet", "path": str(path)}, "variables": ["los"],
            "group": {"column": "arm", "levels": ["ctl", "trt"]}, "epsilon_total": 1.0}


async def service_tables(arms: list[tuple[np.ndarray, np.ndarray]], directory: Path,
                         grouped_first: bool) -> tuple[BinTable, BinTable]:
    """(pooled table, two-arm table) obtained over fresh in-process centers, in that order or
    the two-arm one first."""
    centers = in_process_federation(
        {f"h{i}": {"cohort": declare(directory / f"h{i}.parquet", x, y)}
         for i, (x, y) in enumerate(arms)}, k=K)
    ports = list(centers.values())

    async def table(groups: tuple[str, str] | None) -> BinTable:
        return (await federated_bin_table(ports, dataset="cohort", variable="los",
                                          groups=groups, k=K)).table
    try:
        if grouped_first:
            grouped = await table(("ctl", "trt"))
            pooled = await table(None)
        else:
            pooled = await table(None)
            grouped = await table(("ctl", "trt"))
    finally:
        for center in ports:
            await center.aclose()
    return pooled, grouped


def shared_canonical(arms: list[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
                     ) -> BinTable | None:
    try:
        from shared.federation import refine_pooled
    except ImportError:  # a version without it (the measurement before the change)
        return None
    table = table_view(canonical_table(list(arms[0]), K, rng), None, k=K)
    for x, y in arms[1:]:
        table = apply_refinement(table, refine_pooled(table.limits, [x, y], k=K, rng=rng))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--total", type=int, default=3100)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    errors: dict[str, list[np.ndarray]] = {}
    bins: dict[str, list[int]] = {}

    def record(name: str, table: BinTable | None, truth: np.ndarray) -> None:
        if table is None:
            return
        errors.setdefault(name, []).append(np.abs(pooled_interpolation(table) - truth))
        bins.setdefault(name, []).append(table.n_bins)

    directory = Path(tempfile.mkdtemp(prefix="fedstats-pooled-"))
    for stream in np.random.SeedSequence(args.seed).spawn(args.reps):
        data_rng, shared_rng = (np.random.default_rng(s) for s in stream.spawn(2))
        hospitals = hospital_data(data_rng, args.total, 0.1)
        arms = [(x[: x.size // 2], x[x.size // 2:]) for x in hospitals]
        truth = np.quantile(np.concatenate(hospitals), LEVELS, method="inverted_cdf")
        pooled, _ = asyncio.run(service_tables(arms, directory, grouped_first=False))
        after, grouped = asyncio.run(service_tables(arms, directory, grouped_first=True))
        record("pooled, fresh", pooled, truth)
        record("pooled after grouped", after, truth)
        record("sum of the arms' rows", grouped, truth)
        for row, arm in enumerate(zip(*arms, strict=True)):
            values = np.concatenate(arm)
            record(f"arm {row + 1} (its own row)",
                   BinTable(grouped.limits, grouped.counts[row:row + 1], grouped.k),
                   np.quantile(values, LEVELS, method="inverted_cdf"))
        record("shared, canonical view", shared_canonical(arms, shared_rng), truth)
        record("shared, one-group table",
               federated_table([(h, None) for h in hospitals], k=K, rng=shared_rng), truth)
    quartiles = [LEVELS.index(q) for q in QUARTILES]
    print(f"n = {args.total:,}, K = {K}, {args.reps} replications, interpolation estimator; "
          "mean |error| in days")
    print(f"  {'table':<26}{'quartiles':>10}" + "".join(f"{q:>8}" for q in LEVELS)
          + f"{'all':>8}{'bins':>7}")
    for name, errs in errors.items():
        e = np.asarray(errs)
        print(f"  {name:<26}{e[:, quartiles].mean():10.3f}"
              + "".join(f"{v:8.3f}" for v in e.mean(axis=0))
              + f"{e.mean():8.3f}{np.mean(bins[name]):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
