"""The DP twin of the Mann-Whitney release (``dp_mwu``, ``shared.dp.mwu``) against the exact
test on the same data: level under H0 and power, one center, ε = 1 per center.

For each size n per arm, over ``--reps`` seeded data sets X ~ N(0, 1), Y ~ N(δ, 1) (with
``--ties`` rounded to about 8 values): the rejection rate at α = 0.05 (two-sided) of the DP
twin's local test (Ũ against N(0, V̂) + Laplace(2M/ε₂), ``DPMannWhitney.to_result``) beside that
of ``scipy.stats.mannwhitneyu`` on the exact data, at δ = 0 (the level) and at a shift where the
exact test has about 80 % power (δ = 0.4 at n = 100, 0.125 at 1,000). Standard errors: √(p(1 −
p)/reps). ``--share`` and ``--margin`` try another ε split and cap margin.

    python benchmarks/sim_dp_mwu.py                 # the table in docs/benchmarks.md
    python benchmarks/sim_dp_mwu.py --ties --reps 4000 --sizes 10 30 100
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from shared.dp.mwu import MARGIN, SIZE_SHARE, dp_mann_whitney

SHIFT = {10: 1.3, 20: 0.9, 30: 0.75, 50: 0.57, 100: 0.4, 200: 0.28, 300: 0.23, 1000: 0.125,
         3000: 0.072}


def rates(n: int, shift: float, reps: int, rng: np.random.Generator, *, epsilon: float,
          share: float, margin: float, ties: bool) -> tuple[float, float]:
    """(the DP twin's, the exact test's) rejection rates at α = 0.05."""
    dp = exact = 0
    for _ in range(reps):
        x, y = rng.normal(size=n), rng.normal(shift, size=n)
        if ties:
            x, y = np.round(1.5 * x), np.round(1.5 * y)
        release = dp_mann_whitney(x, y, epsilon=epsilon, rng=rng, size_share=share,
                                  margin=margin)
        dp += release.to_result().pvalue < 0.05
        exact += stats.mannwhitneyu(x, y, method="asymptotic").pvalue < 0.05
    return dp / reps, exact / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--share", type=float, default=SIZE_SHARE)
    parser.add_argument("--margin", type=float, default=MARGIN)
    parser.add_argument("--ties", action="store_true")
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"ε = {args.epsilon:g} per center, size share {args.share:g}, margin "
          f"{args.margin:g}, {args.reps} data sets each{', ties' if args.ties else ''}")
    print("| n per arm | δ (SD) | DP twin level | exact level | DP twin power | exact power | "
          "power lost |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        shift = SHIFT.get(n, 2.8 / math.sqrt(n / 2) / math.sqrt(3 / math.pi))
        options = {"epsilon": args.epsilon, "share": args.share, "margin": args.margin,
                   "ties": args.ties}
        level_dp, level_exact = rates(n, 0.0, args.reps, rng, **options)
        power_dp, power_exact = rates(n, shift, args.reps, rng, **options)
        se = math.sqrt(0.25 / args.reps)
        print(f"| {n:,} | {shift:g} | {level_dp:.3f} | {level_exact:.3f} | {power_dp:.3f} | "
              f"{power_exact:.3f} | {power_exact - power_dp:+.3f} (SE <= {se:.3f}) |")


if __name__ == "__main__":
    main()
