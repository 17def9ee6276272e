"""Any level from the pooled tree (issue 19): how far the pooled DP boxplot's 0.05 and 0.95 levels,
read off its tree histogram at no further ε, are from the pooled sample's quantiles.

Run: ``.venv/bin/python benchmarks/sim_pooled_levels.py [--sizes 3100 310000] [--reps 50]
[--epsilon 1] [--seed 20261201]``

Three synthetic hospitals (``fedstats_cli.synth``: log-normal length of stay with each
hospital's median and spread, both arms, rounded to 0.1 day, public bounds [0, 60] days), their
sizes scaled to a total of n in synth's proportions. Each replication draws new records and runs
the whole pooled protocol in-process (``shared.dp.pooled.pooled_boxplot``, the arithmetic the
coordinator applies to the centers' releases: each center ε-DP, ε = 1 by default, add/remove,
the default grid of 4**6 = 4096 leaves over the pooled DP range). It prints, per n and level,
the mean, median and 95th percentile over the replications of |DP value − sample quantile| in days
(numpy's default, linear, sample quantile of the pooled records), and the grid's leaf width.
The quartiles are shown too: the extra levels are read the same way (``tree_quantiles``).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from fedstats_cli.synth import BOUNDS, HOSPITALS, VARIABLE, Hospital, generate
from shared.dp.pooled import QUARTILES, pooled_boxplot

EXTRA = (0.05, 0.95)


def scaled_hospitals(total: int) -> list[Hospital]:
    """synth's three hospitals, arm sizes scaled to sum to ``total`` (the remainder of the
    rounding goes to the first arm)."""
    sizes = [(h.n_control, h.n_treated) for h in HOSPITALS]
    base = sum(a + b for a, b in sizes)
    scaled = [[round(a * total / base), round(b * total / base)] for a, b in sizes]
    scaled[0][0] += total - sum(a + b for a, b in scaled)
    return [dataclasses.replace(h, n_control=a, n_treated=b)
            for h, (a, b) in zip(HOSPITALS, scaled, strict=True)]


def run(total: int, reps: int, epsilon: float, seed: int) -> dict[float, np.ndarray]:
    """|DP − sample| per level (levels: the quartiles and EXTRA), one entry per replication."""
    hospitals = scaled_hospitals(total)
    streams = np.random.SeedSequence([seed, total]).spawn(reps)
    errors: dict[float, list[float]] = {q: [] for q in sorted((*QUARTILES, *EXTRA))}
    for stream in streams:
        data_rng, dp_rng = (np.random.default_rng(s) for s in stream.spawn(2))
        centers = [generate(h, data_rng)[VARIABLE] for h in hospitals]
        pooled = np.concatenate(centers)
        out = pooled_boxplot(centers, epsilon=epsilon, bounds=BOUNDS,
                             neighbouring="add_remove", rng=dp_rng, levels=EXTRA)
        box = out.box
        read = dict(out.levels) | {0.25: box.q1, 0.5: box.median, 0.75: box.q3}
        for q in errors:
            errors[q].append(abs(read[q] - float(np.quantile(pooled, q))))
        leaf = (out.grid[1] - out.grid[0]) / 4**6
    print(f"n = {total:,} ({', '.join(str(h.n_control + h.n_treated) for h in hospitals)}), "
          f"ε = {epsilon:g}, {reps} replications, leaf width ≈ {leaf:.4f} days (last run)")
    return {q: np.asarray(e) for q, e in errors.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3100, 310_000])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    rows = ["| n | level | mean \\|error\\| (days) | median | 95th percentile |",
            "|---|---|---|---|---|"]
    for total in args.sizes:
        t0 = time.perf_counter()
        errors = run(total, args.reps, args.epsilon, args.seed)
        print(f"  ({time.perf_counter() - t0:.1f} s)")
        for q, e in errors.items():
            rows.append(f"| {total:,} | {q:g}{' (extra)' if q in EXTRA else ''} | "
                        f"{e.mean():.4f} | {np.median(e):.4f} | {np.quantile(e, 0.95):.4f} |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
