"""The table release path's parts at a large center, each against its previous implementation
and one ``np.sort`` of as many values, in CPU time in the same run (docs/benchmarks.md, "The
table release path").

* ``coarsen_table``'s merge (a study's K above the canonical table's): compiled
  (``shared._walk.coarsen_keep``) against the Python loop (``shared.binning._coarsen_keep``);
* the greedy chain walk of a refinement's runs (``shared._greedy.walk``): compiled against
  Python (``compiled=False``);
* remembering the placed numbers of one release (``center_agent.gate.gaps.record``) and reading
  them back: one block per release against the one row per number of earlier ledgers.

Run: ``PYTHONPATH=. python benchmarks/bench_release_path.py [--bins N] [--repeat R]``.
The machine's load average is printed with the figures; Numba's kernels are loaded before any
timing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

import numpy as np

from center_agent.db import Store, placed_numbers
from center_agent.gate import gaps
from shared import _greedy, _walk, binning


def cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bins", type=int, default=1_000_000,
                        help="bins of the canonical table (about a 10^7-row variable at K = 10)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(20261207)
    n = args.bins
    _walk.warm()
    values = rng.random(10 * n)
    sort = cpu(lambda: np.sort(values), args.repeat)
    print(f"load average {os.getloadavg()[0]:.2f}; one np.sort of {values.size:,} values: "
          f"{sort:.3f} CPU s (the baseline of every ratio)")

    counts = rng.choice([0.0, 10.0, 11.0, 14.0], size=(2, n))
    table = binning.BinTable(limits=np.arange(n + 1.0), counts=counts, k=10)
    totals = table.totals
    new = cpu(lambda: _walk.coarsen_keep(table.counts, totals, 20), args.repeat)
    old = cpu(lambda: binning._coarsen_keep(table, totals, 20), 1)
    print(f"coarsen {n:,} bins to K = 20: compiled {new:.4f} s ({new / sort:.3f}× sort), "
          f"Python {old:.3f} s ({old / sort:.2f}× sort)")

    nxt = np.arange(1, n + 2, dtype=np.int64)
    nxt[-1] = _greedy.STOP
    seg = np.full(n + 1, n, dtype=np.int64)
    start = np.zeros(1, np.int64)
    new = cpu(lambda: _greedy.walk(nxt, start, seg), args.repeat)
    old = cpu(lambda: _greedy.walk(nxt, start, seg, compiled=False), args.repeat)
    print(f"one chain of {n:,} runs: compiled {new:.4f} s ({new / sort:.3f}× sort), "
          f"Python {old:.3f} s ({old / sort:.3f}× sort)")

    numbers = rng.normal(size=n).tolist()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/ledger.sqlite")
        try:
            def block() -> None:
                with store.engine.begin() as conn:
                    gaps.record(conn, "d", f"x{time.perf_counter_ns()}", numbers)

            def rows() -> None:
                name = f"y{time.perf_counter_ns()}"
                with store.engine.begin() as conn:
                    conn.execute(placed_numbers.insert(), [
                        {"dataset": "d", "variable": name, "value": v.hex()} for v in numbers])

            new = cpu(block, args.repeat)
            old = cpu(rows, 1)
            with store.engine.connect() as conn:
                names = conn.execute(placed_numbers.select().limit(1)).all()
                read_rows = cpu(lambda: gaps.placed(conn, "d", names[0].variable), 1)
                size = gaps.placed(conn, "d", names[0].variable).size
            print(f"remember {n:,} placed numbers: one block {new:.3f} s ({new / sort:.2f}× "
                  f"sort), one row each {old:.2f} s ({old / sort:.1f}× sort); reading "
                  f"{size:,} rows back {read_rows:.2f} s")
        finally:
            store.close()


if __name__ == "__main__":
    main()
