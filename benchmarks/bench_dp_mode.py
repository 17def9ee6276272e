"""Accuracy of the DP-mode analyses beside the K-anonymous mode's, on the same three hospitals.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_dp_mode.py`` (``--reps 40`` by default,
``--sizes 3100``, ``--epsilons 0.5 1 2``; ``--sizes 3100 310000`` for the large federation).

Data: ``benchmarks/bench_peers.py``'s three synthetic hospitals (log-normal length of stay,
medians 5.5, 4.6 and 6.2 days, σ 0.60, 0.55, 0.70; 1,600, 1,000 and 500 records for n = 3,100,
or 100 times that), rounded to 0.1 day, public bounds [0, 60] days; fresh data per replication.
The truth is the pooled sample's (quartiles by ``numpy.quantile``'s default, mean, SD).

What an analyst gets in each mode, computed in-process by the same functions the centers and
the coordinator run:

* exact mode (K-anonymous, K = 10): the federated table (``shared.federation.federated_table``:
  the largest hospital bins, the others refine) read by the table describe
  (``shared.describe.table_describe``: the Table 1 of ``describe`` without ε; its quartiles are
  those ``quantiles`` interpolates);
* DP mode, the pooled DP boxplot (``shared.dp.pooled.pooled_boxplot``, docs/methods.md §6: ε per
  hospital, add/remove) for the quartiles;
* DP mode, the DP Table 1 (``shared.describe.dp_describe`` per hospital at ε, bins 10, pooled by
  ``pool_descriptions``) for N, mean, SD and quartiles.

Printed: per figure and ε, the mean absolute error against the pooled truth over replications
(quartiles: averaged over Q1, median, Q3), and for DP mode the ratio to the exact mode's error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers import hospital_data

from shared.describe import dp_describe, pool_descriptions, table_describe
from shared.dp.pooled import pooled_boxplot
from shared.federation import federated_table

BOUNDS = (0.0, 60.0)
K = 10
ROUNDING = 0.1
FIGURES = ("quartiles", "mean", "SD", "N")


def truth(data: list[np.ndarray]) -> dict[str, float | np.ndarray]:
    x = np.concatenate(data)
    return {"quartiles": np.quantile(x, [0.25, 0.5, 0.75]), "mean": float(x.mean()),
            "SD": float(x.std(ddof=1)), "N": float(x.size)}


def errors(got: dict[str, object], true: dict[str, float | np.ndarray]) -> dict[str, float]:
    out = {}
    for figure in FIGURES:
        if figure not in got:
            continue
        value = got[figure]
        if value is None or (isinstance(value, (list, tuple, np.ndarray))
                             and any(v is None for v in value)):
            out[figure] = float("nan")  # not estimable (said in the result's notes)
            continue
        out[figure] = float(np.mean(np.abs(np.asarray(value, dtype=float)
                                           - np.asarray(true[figure], dtype=float))))
    return out


def exact_mode(data: list[np.ndarray], rng: np.random.Generator) -> dict[str, object]:
    table = federated_table([(x, None) for x in data], k=K, rng=rng)
    s = table_describe(table)
    return {"quartiles": (s.q1, s.median, s.q3), "mean": s.mean, "SD": s.sd, "N": s.n}


def dp_box(data: list[np.ndarray], epsilon: float, rng: np.random.Generator) -> dict[str, object]:
    box = pooled_boxplot(data, epsilon=epsilon, bounds=BOUNDS, neighbouring="add_remove",
                         rng=rng).box
    return {"quartiles": (box.q1, box.median, box.q3)}


def dp_table_one(data: list[np.ndarray], epsilon: float,
                 rng: np.random.Generator) -> dict[str, object]:
    parts = [dp_describe(x, epsilon=epsilon, bounds=BOUNDS, bins=10, neighbouring="add_remove",
                         rng=rng, resolution=ROUNDING) for x in data]
    s = pool_descriptions(parts).summary()
    return {"quartiles": (s.q1, s.median, s.q3), "mean": s.mean, "SD": s.sd, "N": s.n}


def run(size: int, epsilons: list[float], reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows: dict[tuple[str, float | None], list[dict[str, float]]] = {}
    started = time.perf_counter()
    for _ in range(reps):
        data = hospital_data(rng, size, ROUNDING)
        true = truth(data)
        rows.setdefault(("exact: K-anonymous table", None), []).append(
            errors(exact_mode(data, rng), true))
        for eps in epsilons:
            rows.setdefault(("DP: pooled DP boxplot", eps), []).append(
                errors(dp_box(data, eps, rng), true))
            rows.setdefault(("DP: DP Table 1 (describe)", eps), []).append(
                errors(dp_table_one(data, eps, rng), true))
    seconds = time.perf_counter() - started
    exact = {f: float(np.nanmean([e[f] for e in rows[("exact: K-anonymous table", None)]]))
             for f in FIGURES}
    print(f"\nn = {size:,} over 3 hospitals, {reps} replications, mean absolute error vs the "
          f"pooled truth (days; N in records); (× exact) = ratio to the exact mode "
          f"[{seconds:.0f} s]")
    print(f"{'mode':<28}{'ε':>6}" + "".join(f"{f:>22}" for f in FIGURES))
    for (mode, eps), found in rows.items():
        cells = []
        for f in FIGURES:
            values = [e[f] for e in found if f in e]
            if not values:
                cells.append(f"{'—':>22}")
                continue
            mae = float(np.nanmean(values))
            missing = sum(np.isnan(values))
            ratio = f" ({mae / exact[f]:.1f}×)" if eps is not None and exact[f] > 0 else ""
            text = (f"{mae:.3g}" if f != "N" else f"{mae:.1f}") + ratio
            text += f" [{missing} n/e]" if missing else ""
            cells.append(f"{text:>22}")
        print(f"{mode:<28}{'' if eps is None else f'{eps:g}':>6}" + "".join(cells))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3100])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args(argv)
    for size in args.sizes:
        run(size, args.epsilons, args.reps, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
