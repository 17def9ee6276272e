"""Speed of the seed-001 core, as ratios to baselines measured in the same run.

For n values per group (two groups, N = 2n in all) it times two-group binning, adding a second
center of the same size (both halves: the center's refinement and the coordinator's merge) and
the local Mann-Whitney test. Baselines: one ``np.sort`` of the same 2n values, and
``scipy.stats.mannwhitneyu`` (asymptotic) on the same data. Each figure is the best of
``--repeat`` runs, so page-fault warm-up is not counted against either side.

    .venv/bin/python benchmarks/bench_core.py            # n = 10^6 and 10^7
    .venv/bin/python benchmarks/bench_core.py --sizes 1e5 --repeat 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from shared.binning import bin_table
from shared.federation import apply_refinement, refine_table
from shared.mwu import mann_whitney


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(x: np.ndarray, y: np.ndarray, k: int, repeat: int, rng: np.random.Generator) -> str:
    """One row: the baselines and the core's times on the same two groups."""
    x2, y2 = rng.permutation(x) + 0.05, rng.permutation(y) - 0.05  # a second center
    both = np.concatenate([x, y])
    t_sort = best(lambda: np.sort(both), repeat)
    t_bin = best(lambda: bin_table(x, y, k=k, rng=rng), repeat)
    table = bin_table(x, y, k=k, rng=rng)
    t_add = best(
        lambda: apply_refinement(table, refine_table(table.limits, x2, y2, k=k, rng=rng)),
        repeat,
    )
    t_mwu = best(lambda: mann_whitney(x, y), repeat)
    t_scipy = best(
        lambda: stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False), repeat
    )
    return (
        f"{x.size:>9.0e} {t_sort:>8.3f} {t_bin / t_sort:>8.2f}x {t_add / t_sort:>8.2f}x "
        f"{t_mwu / t_sort:>8.2f}x {t_mwu / t_scipy:>9.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(2023)
    header = ("n/group", "sort s", "binning", "add ctr", "mwu", "mwu/scipy")
    print("{:>9} {:>8} {:>9} {:>9} {:>9} {:>10}  data".format(*header))
    for n in (int(s) for s in args.sizes):
        x, y = rng.normal(size=n), rng.normal(0.1, size=n)
        print(measure(x, y, args.k, args.repeat, rng), " continuous")
        # Heavy ties: values on a 0.01 grid (a lab value reported to two decimals).
        print(measure(np.round(x, 2), np.round(y, 2), args.k, args.repeat, rng), " ties")
    print(
        "ratios: binning, add ctr (the center's refinement + the coordinator's merge) and mwu "
        "to one np.sort of the 2n values;\nmwu/scipy to scipy.stats.mannwhitneyu on the same "
        "data. Targets: binning <= 3x, mwu/scipy <= 2x."
    )


if __name__ == "__main__":
    main()
