"""Coverage of the DP life table's intervals, and its log-rank test's level, with and without
the noise's variance (``shared.dp.life_table``; the table in docs/methods.md §13.1).

For each ε, over ``--runs`` seeded data sets of two arms of ``--n`` records (exponential times,
hazards 1/60 and 1/80 per day, censored uniformly on (20, 135) and at 90 days, as
tests/shared/test_survival_coverage.py), each arm released as a DP life table (Laplace,
add/remove) on the public grid 0, ``--step``, ..., 90: how often the 95 % intervals of S(30),
of the median (interpolated band) and of the RMST difference to 80 days hold the truth, and
how often the log-rank test rejects at α = 0.05 under H0 (both arms 1/60; a fresh pair of
arms). "with noise": the ``dp_*`` readers (sampling variance + the noise's, delta method);
"without": ``shared.survival`` on the projected table as if it were exact. The last column
reads the exact life table on the same grid (no noise). Monte-Carlo SE: √(p(1 − p)/runs).

    python benchmarks/sim_dp_survival.py                   # the table in docs/methods.md §13.1
    python benchmarks/sim_dp_survival.py --n 100 --epsilons 1 --runs 500
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from shared.dp.life_table import (
    dp_kaplan_meier,
    dp_life_table,
    dp_logrank,
    dp_rmst_difference,
    life_table_cells,
)
from shared.survival import kaplan_meier, life_table, logrank, rmst_difference, survival_quantile

RATES = (1 / 60, 1 / 80)
T0, TAU, FOLLOW_UP = 30.0, 80.0, 90.0


def arm(rng: np.random.Generator, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    t = rng.exponential(1 / rate, n)
    c = np.minimum(rng.uniform(20.0, 135.0, n), FOLLOW_UP)
    return np.minimum(t, c), t <= c


def run(epsilon: float, n: int, runs: int, grid: np.ndarray, rng: np.random.Generator
        ) -> dict[str, list[float]]:
    """Per quantity: [with noise, without, exact table] hit (or rejection) rates."""
    s_true, median_true = math.exp(-T0 * RATES[0]), math.log(2) / RATES[0]
    diff_true = (1 - math.exp(-TAU * RATES[1])) / RATES[1] - (1 - math.exp(-TAU * RATES[0])) \
        / RATES[0]
    at = int(np.searchsorted(grid, T0))
    if grid[at] != T0:
        raise SystemExit(f"the grid must have {T0:g} as a limit")
    hits = {k: [0.0, 0.0, 0.0] for k in ("S(30)", "median", "RMST difference",
                                          "log-rank level")}
    for _ in range(runs):
        arms = [arm(rng, n, r) for r in RATES]
        first, second = (dp_life_table(t, e, grid=grid, epsilon=epsilon, rng=rng)
                         for t, e in arms)
        exact = [life_table(grid, *life_table_cells(t, e, grid)) for t, e in arms]
        curves = (dp_kaplan_meier(first).curve, kaplan_meier(first.table),
                  kaplan_meier(exact[0]))
        for i, km in enumerate(curves):
            hits["S(30)"][i] += km.low[at] <= s_true <= km.high[at]
            q = survival_quantile(km, between="interpolated")
            hits["median"][i] += q.low <= median_true <= q.high
        diffs = (dp_rmst_difference(first, second, TAU),
                 rmst_difference(first.table, second.table, TAU), rmst_difference(*exact, TAU))
        for i, d in enumerate(diffs):
            hits["RMST difference"][i] += d.low <= diff_true <= d.high
        null = [arm(rng, n, RATES[0]) for _ in range(2)]
        released = [dp_life_table(t, e, grid=grid, epsilon=epsilon, rng=rng) for t, e in null]
        pvalues = (dp_logrank(released).pvalue, logrank([[r.table for r in released]]).pvalue,
                   logrank([[life_table(grid, *life_table_cells(t, e, grid))
                             for t, e in null]]).pvalue)
        for i, p in enumerate(pvalues):
            hits["log-rank level"][i] += p < 0.05
    return {k: [v / runs for v in vs] for k, vs in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300, help="records per arm")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.25])
    parser.add_argument("--step", type=float, default=10.0, help="grid step (days)")
    parser.add_argument("--seed", type=int, default=20261214)
    args = parser.parse_args()
    grid = np.arange(0.0, FOLLOW_UP + args.step / 2, args.step)
    rng = np.random.default_rng(args.seed)
    print(f"{args.n} per arm, {args.runs} runs, Laplace, add/remove, grid 0..{FOLLOW_UP:g} "
          f"by {args.step:g}; seed {args.seed}")
    print("| ε | quantity | with noise variance | without | exact table (no noise) |")
    print("|---|---|---|---|---|")
    for epsilon in args.epsilons:
        for name, (dp, plain, exact) in run(epsilon, args.n, args.runs, grid, rng).items():
            print(f"| {epsilon:g} | {name} | {dp:.3f} | {plain:.3f} | {exact:.3f} |")
    se = math.sqrt(0.95 * 0.05 / args.runs)
    print(f"Monte-Carlo SE: {se:.4f} at 0.95 and 0.05")


if __name__ == "__main__":
    main()
