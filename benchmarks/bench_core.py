"""Speed of the seed-001 core, as ratios to baselines measured in the same run.

For n values per group (two groups, N = 2n in all) it times two-group binning on unsorted and on
sorted input (a center keeps its data sorted), adding a second center of the same size (both
halves: the new center's refinement of its unsorted data and the coordinator's merge) and the
local Mann-Whitney test. Baselines: one ``np.sort`` of the same 2n values, and
``scipy.stats.mannwhitneyu`` (asymptotic) on the same data.

Times are CPU seconds of this process (``time.process_time``), which a busy machine disturbs
less than wall time. Each repetition times the sort next to each step, so every ratio is taken
between two measurements made moments apart; the minimum and the median of the ``--repeat``
ratios are printed. The peak memory is the largest allocation traced (``tracemalloc``) above
the input during one binning of the unsorted groups, as a multiple of the raw values' bytes.
The first call compiles the walk (or loads it from Numba's cache); it is made before timing.

    .venv/bin/python benchmarks/bench_core.py            # n = 10^6 and 10^7
    .venv/bin/python benchmarks/bench_core.py --sizes 1e5 --repeat 5 --reference
    .venv/bin/python benchmarks/bench_core.py --sizes 1e7 --repeat 3 --no-mwu  # binning only
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from scipy import stats

from shared import binning, federation
from shared._walk import AVAILABLE
from shared.binning import bin_table
from shared.federation import apply_refinement, refine_table
from shared.mwu import mann_whitney


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def ratios(fn: Callable[[], object], base: Callable[[], object], repeat: int) -> list[float]:
    """``repeat`` ratios of ``fn``'s CPU time to ``base``'s, each pair timed back to back."""
    out = []
    for _ in range(repeat):
        t_base = cpu(base)
        out.append(cpu(fn) / t_base)
    return out


def peak_ratio(fn: Callable[[], object], raw_bytes: int) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / raw_bytes


def fmt(r: list[float]) -> str:
    return f"{min(r):>6.2f}/{statistics.median(r):<5.2f}"


def measure(x: np.ndarray, y: np.ndarray, k: int, repeat: int, rng: np.random.Generator,
            reference: bool, mwu: bool) -> str:
    """One row: the baselines and the core's ratios on the same two groups."""
    x2, y2 = rng.permutation(x) + 0.05, rng.permutation(y) - 0.05  # a second center
    both = np.concatenate([x, y])
    xs, ys = np.sort(x), np.sort(y)

    def sort() -> object:
        return np.sort(both)

    t_sort = sorted(cpu(sort) for _ in range(repeat))
    r_bin = ratios(lambda: bin_table(x, y, k=k, rng=rng), sort, repeat)
    r_sorted = ratios(lambda: bin_table(xs, ys, k=k, rng=rng), sort, repeat)
    table = bin_table(x, y, k=k, rng=rng)
    r_add = ratios(
        lambda: apply_refinement(table, refine_table(table.limits, x2, y2, k=k, rng=rng)),
        sort, repeat)
    r_mwu = r_scipy = [float("nan")]
    if mwu:
        r_mwu = ratios(lambda: mann_whitney(x, y), sort, repeat)
        r_scipy = ratios(
            lambda: mann_whitney(x, y),
            lambda: stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False), repeat)
    peak = peak_ratio(lambda: bin_table(x, y, k=k, rng=rng), both.nbytes)
    row = (f"{x.size:>9.0e} {t_sort[0]:>7.3f} {fmt(r_bin)} {fmt(r_sorted)} {fmt(r_add)} "
           f"{fmt(r_mwu)} {fmt(r_scipy)} {peak:>7.2f}")
    if reference:
        r_ref = ratios(lambda: binning._reference([x, y], k=k, rng=rng), sort, repeat)
        r_ref_add = ratios(
            lambda: apply_refinement(table, federation._reference(table.limits, x2, y2, k=k,
                                                                  rng=rng)),
            sort, repeat)
        row += f"  reference: binning {fmt(r_ref)} add ctr {fmt(r_ref_add)}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--reference", action="store_true",
                        help="also time the numpy reference implementation (slow)")
    parser.add_argument("--no-mwu", action="store_true", help="skip the Mann-Whitney columns")
    args = parser.parse_args()
    rng = np.random.default_rng(2023)
    warm = rng.normal(size=1000)
    bin_table(warm, warm + 0.5, k=args.k, rng=rng)  # compile (or load) the walk
    refine_table([-1.0, 0.0, 1.0], warm, warm, k=args.k, rng=rng)
    print(f"compiled walk: {AVAILABLE}; CPU-time ratios to one np.sort of the 2n values, "
          f"min/median of {args.repeat}")
    header = ("n/group", "sort s", "binning", "sorted in", "add ctr", "mwu", "mwu/scipy",
              "peak/raw")
    print("{:>9} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>8}  data".format(*header))
    for n in (int(s) for s in args.sizes):
        x, y = rng.normal(size=n), rng.normal(0.1, size=n)
        print(measure(x, y, args.k, args.repeat, rng, args.reference, not args.no_mwu),
              " continuous", flush=True)
        # Heavy ties: values on a 0.01 grid (a lab value reported to two decimals).
        print(measure(np.round(x, 2), np.round(y, 2), args.k, args.repeat, rng, args.reference,
                      not args.no_mwu), " ties", flush=True)
    print(
        "binning: unsorted input; sorted in: each group already sorted; add ctr: the new "
        "center's refinement (unsorted)\n+ the coordinator's merge; mwu/scipy: to "
        "scipy.stats.mannwhitneyu on the same data; peak/raw: traced peak\nabove the input "
        "during one binning, over the 2n values' bytes. Targets: binning <= 2x, sorted in "
        "<= 1.2x,\nadd ctr <= 3x, peak <= 2x raw, mwu/scipy <= 2x."
    )


if __name__ == "__main__":
    main()
