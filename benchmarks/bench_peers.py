"""DP quantiles of rounded data, side by side with OpenDP (issue 19): error and time as ratios.

Run: ``.venv/bin/pip install -e '.[peers]' && .venv/bin/python benchmarks/bench_peers.py``
(``--reps 50`` by default, ``--sizes 3100 310000``). Without OpenDP it prints a message and
exits 0.

Data: three synthetic hospitals with the case mix of ``fedstats_cli.synth`` (log-normal length
of stay, medians 5.5, 4.6 and 6.2 days, σ 0.60, 0.55, 0.70; control arms), of 1,600, 1,000 and
500 records (n = 3,100 in all) or 100 times that (310,000), the length of stay rounded to 0.1
day, and again rounded to whole days. Public bounds [0, 60] days. Each replication draws fresh
data; each hospital releases its own quantiles at levels 0.05, 0.25, 0.5, 0.75, 0.95 under
add/remove neighbouring at ε = 1 in all:

* fedstats JointExp, continuous output (one mechanism for the five levels);
* fedstats JointExp with ``resolution`` = the rounding (0.1 or 1 day): grid-aware (the values
  jittered within their grid cell, JointExp, the nearest grid point; docs/methods.md §5.10);
* fedstats PrivateQuantile with ``resolution``, one level at a time at ε/5 each (the
  composition OpenDP uses below; ties by mid-rank);
* OpenDP's ``make_private_quantile`` (Smith's exponential mechanism over a candidate set; ε/5 per
  level, its cost checked with ``map``), candidates the same grid (the multiples of the rounding
  in [0, 60]), so its candidate set contains the data's values.

Error: the mean absolute difference to the hospital's sample quantile (``inverted_cdf``, a
recorded value), per level and over the five, averaged over hospitals and replications; time:
the mean wall time of one hospital's five levels (fedstats including its sort; OpenDP including
the conversion of the data to a Python list, which its API needs). Printed: the figures, and the
ratios fedstats / OpenDP (< 1: fedstats better or faster).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from shared.dp import joint_exp, private_quantile

BOUNDS = (0.0, 60.0)
EPSILON = 1.0
LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
# (median days, σ, share of the records): fedstats_cli.synth.HOSPITALS' control arms.
HOSPITALS = ((5.5, 0.60, 1600), (4.6, 0.55, 1000), (6.2, 0.70, 500))
ROUNDINGS = (0.1, 1.0)

Estimator = Callable[[np.ndarray, float], np.ndarray]


def hospital_data(rng: np.random.Generator, total: int, rounding: float) -> list[np.ndarray]:
    scale = total / sum(h[2] for h in HOSPITALS)
    out = []
    for median, sigma, share in HOSPITALS:
        los = median * np.exp(rng.normal(0.0, sigma, round(share * scale)))
        out.append(np.clip(np.round(los / rounding) * rounding, 0.0, None).round(6))
    return out


def fedstats(grid_aware: bool, rng: np.random.Generator) -> Estimator:
    def run(x: np.ndarray, rounding: float) -> np.ndarray:
        res = joint_exp(x, LEVELS, epsilon=EPSILON, bounds=BOUNDS, neighbouring="add_remove",
                        rng=rng, resolution=rounding if grid_aware else None)
        return np.array(res.values)

    return run


def fedstats_single(rng: np.random.Generator) -> Estimator:
    """Grid-aware PrivateQuantile level by level, ε/5 each (what OpenDP does, mid-ranks)."""
    def run(x: np.ndarray, rounding: float) -> np.ndarray:
        return np.sort([
            private_quantile(x, q, epsilon=EPSILON / len(LEVELS), bounds=BOUNDS,
                             neighbouring="add_remove", rng=rng, resolution=rounding).values[0]
            for q in LEVELS])

    return run


def opendp_estimator() -> Estimator | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    share = EPSILON / len(LEVELS)
    cache: dict[float, list[Any]] = {}

    def measurements(rounding: float) -> list[Any]:
        if rounding not in cache:
            candidates = [round(j * rounding, 6)
                          for j in range(round(BOUNDS[1] / rounding) + 1)]
            made = []
            for q in LEVELS:
                def make(scale: float, q: float = q) -> Any:
                    return dp.m.make_private_quantile(
                        domain, dp.symmetric_distance(), dp.max_divergence(),
                        candidates=candidates, alpha=q, scale=scale)
                m = make(dp.binary_search_param(make, d_in=1, d_out=share))
                assert m.map(1) <= share + 1e-12
                made.append(m)
            cache[rounding] = made
        return cache[rounding]

    def run(x: np.ndarray, rounding: float) -> np.ndarray:
        data = x.tolist()
        return np.sort([m(data) for m in measurements(rounding)])

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--sizes", type=float, nargs="+", default=[3100, 310_000])
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()

    peer = opendp_estimator()
    if peer is None:
        print("bench_peers: OpenDP is not installed (pip install -e '.[peers]'); skipped.")
        return 0
    rng = np.random.default_rng(args.seed)
    methods: dict[str, Estimator] = {
        "fedstats JointExp": fedstats(False, rng),
        "fedstats JointExp grid": fedstats(True, rng),
        "fedstats PrivQuant grid": fedstats_single(rng),
        "OpenDP quantile": peer,
    }
    print(f"ε = {EPSILON} per hospital (OpenDP: ε/{len(LEVELS)} per level), add/remove, "
          f"bounds {BOUNDS}, levels {LEVELS}, {args.reps} replications, 3 hospitals")
    for total in (int(s) for s in args.sizes):
        for rounding in ROUNDINGS:
            errors: dict[str, list[np.ndarray]] = {name: [] for name in methods}
            seconds: dict[str, list[float]] = {name: [] for name in methods}
            for _ in range(args.reps):
                for x in hospital_data(rng, total, rounding):
                    truth = np.quantile(x, LEVELS, method="inverted_cdf")
                    for name, estimate in methods.items():
                        start = time.perf_counter()
                        values = estimate(x, rounding)
                        seconds[name].append(time.perf_counter() - start)
                        errors[name].append(np.abs(values - truth))
            print(f"\nn = {total:,} in all, rounded to {rounding:g} day")
            print(f"  {'method':<24}" + "".join(f"{q:>8}" for q in LEVELS)
                  + f"{'all':>8}{'ratio':>8}{'ms':>9}{'ratio':>8}")
            ref_err = float(np.mean(errors["OpenDP quantile"]))
            ref_time = float(np.mean(seconds["OpenDP quantile"]))
            for name in methods:
                per_level = np.mean(errors[name], axis=0)
                err, sec = float(np.mean(errors[name])), float(np.mean(seconds[name]))
                print(f"  {name:<24}" + "".join(f"{v:8.3f}" for v in per_level)
                      + f"{err:8.3f}{err / ref_err:8.2f}{1e3 * sec:9.1f}{sec / ref_time:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
