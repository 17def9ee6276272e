"""Coverage of the DP twin's probabilistic-index interval (``dp_mwu``,
``shared.dp.mwu_effect.dp_probabilistic_index``; docs/methods.md §3.10), one center.

For each ε, size n per arm and θ, over ``--reps`` seeded data sets X ~ N(0, 1), Y ~ N(δ, 1) with
δ = √2·Φ⁻¹(θ) (so P(Y > X) = θ): the share of 95 % intervals that cover θ, the shares that miss
it from above (the interval lies below θ) and from below, and the mean width; ``--old`` adds the
interval the analysis printed before (``shared.effects.probabilistic_index`` on the tests' view of
the release: lifted sizes, only U's noise), ``--flat`` the interval of the flat sizes' law alone
(before the balanced law joined it). Standard error of a coverage: √(c(1 − c)/reps).

    python benchmarks/sim_dp_mwu_effect.py --reps 300         # the table in docs/methods.md §3.10
    python benchmarks/sim_dp_mwu_effect.py --reps 300 --flat  # the same data, the flat law alone
    python benchmarks/sim_dp_mwu_effect.py --epsilons 1 --sizes 10 --reps 200 --old
    python benchmarks/sim_dp_mwu_effect.py --epsilons 1 --sizes 30 100 --thetas 0.5 0.9 \
        --reps 200 --centers 3                                # the stratified index
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from shared.dp.mwu import dp_mann_whitney
from shared.dp.mwu_effect import BALANCED_LEVEL, dp_probabilistic_index
from shared.effects import probabilistic_index

THETAS = (0.5, 0.82, 0.9, 0.96)


def coverage(n: int, theta: float, epsilon: float, reps: int, rng: np.random.Generator,
             *, old: bool = False, flat: bool = False, centers: int = 1
             ) -> tuple[float, float, float, float]:
    """(coverage, share of intervals below θ, share above θ, mean width) of ``reps`` intervals
    of the DP twin (the old one with ``old``, the flat law alone with ``flat``)."""
    shift = math.sqrt(2.0) * float(stats.norm.ppf(theta))
    below = above = 0
    width = 0.0
    done = 0
    for _ in range(reps):
        releases = [dp_mann_whitney(rng.normal(size=n), rng.normal(shift, size=n),
                                    epsilon=epsilon, rng=rng) for _ in range(centers)]
        if old:
            results = [r.to_result() for r in releases]
            if any(r.n_x < 1 or r.n_y < 1 for r in results):
                continue  # the analysis shows no effect then
            index = probabilistic_index(results)
        else:
            index = dp_probabilistic_index(releases, balanced_level=None if flat else
                                           BALANCED_LEVEL)
        done += 1
        below += index.high < theta
        above += index.low > theta
        width += index.high - index.low
    return 1.0 - (below + above) / done, below / done, above / done, width / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 3.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--thetas", type=float, nargs="+", default=list(THETAS))
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--old", action="store_true", help="the interval printed before")
    parser.add_argument("--flat", action="store_true",
                        help="the flat sizes' law alone (the interval before the balanced law)")
    parser.add_argument("--centers", type=int, default=1,
                        help="centers of n per arm each: the stratified index")
    args = parser.parse_args()
    print("| ε | n per arm | θ | coverage | interval below θ | interval above θ | width |")
    print("|---|---|---|---|---|---|---|")
    for epsilon in args.epsilons:
        for n in args.sizes:
            for theta in args.thetas:
                rng = np.random.default_rng([args.seed, n, round(1000 * theta),
                                             round(1000 * epsilon)])
                c, lo, hi, w = coverage(n, theta, epsilon, args.reps, rng, old=args.old,
                                       flat=args.flat, centers=args.centers)
                print(f"| {epsilon:g} | {n} | {theta:g} | {c:.3f} | {lo:.3f} | {hi:.3f} | "
                      f"{w:.3f} |", flush=True)


if __name__ == "__main__":
    main()
