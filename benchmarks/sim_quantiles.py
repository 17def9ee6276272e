"""Seed 001's federated quantile simulation (§7.3; design in NOTES §2b), one command.

    .venv/bin/python benchmarks/sim_quantiles.py --replications 2000 --jobs 2

Gamma(r, θ_l) data with r in {4, 10} and θ_l = exp(N(0, s²)), 1500 records over 3, 5 or 10
centers (the seed's sizes), levels 0.02, 0.25, 0.5, 0.75, 0.98, errors (q̂ − Q)/√r. Writes under
``--out`` (default ``benchmarks/out/``):

* ``quantiles_bias.csv``, ``quantiles_sd.csv``, ``quantiles_mse.csv``, ``quantiles_ratio.csv``
  (bias²/variance): one row per (r, centers, estimator), one column per level;
* ``quantiles_summary.csv``: everything in long form, with Monte-Carlo standard errors of the
  bias and of the MSE, and failure counts;
* ``quantiles_errors.npz``: the raw standardized errors;
* ``quantiles_mse.png``: MSE against the number of centers, one panel per (r, level).

Progress goes to stderr. Each (r, centers) setting has its own seed stream (``--seed``).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from shared.quantiles.simulate import (
    ESTIMATORS,
    LEVELS,
    QuantileSimulation,
    simulate_quantiles,
)
from shared.simulate import CENTER_SIZES

LABELS = {
    "sample": "pooled sample quantile",
    "yj_table": "YJ table",
    "yj_data": "YJ data",
    "interpolation": "interpolation (buffers)",
    "extrapolation": "interpolation/extrapolation",
    "quantile_loss": "quantile loss (leaks)",
    "yj_shaped": "ours: YJ shaped",
}


def run_setting(args: tuple[float, int, int, int, np.random.SeedSequence]) -> QuantileSimulation:
    shape, n_centers, replications, every, seed = args
    start = time.perf_counter()
    tag = f"r={shape:g}, {n_centers} centers"

    def progress(i: int) -> None:
        done = i + 1
        if done % every == 0 or done == replications:
            elapsed = time.perf_counter() - start
            eta = elapsed / done * (replications - done)
            print(f"[{tag}] {done}/{replications}  {elapsed:6.0f}s elapsed, ~{eta:5.0f}s left",
                  file=sys.stderr, flush=True)

    return simulate_quantiles(CENTER_SIZES[n_centers], shape=shape, replications=replications,
                              rng=np.random.default_rng(seed), progress=progress)


def mc_errors(errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors of the bias (sd/√R) and of the MSE (sd of e²/√R), per estimator/level."""
    ok = ~np.isnan(errors)
    n = ok.sum(axis=0)
    se_bias = np.nanstd(errors, axis=0, ddof=1) / np.sqrt(n)
    se_mse = np.nanstd(errors**2, axis=0, ddof=1) / np.sqrt(n)
    return se_bias, se_mse


def write_tables(sims: list[QuantileSimulation], out: Path) -> None:
    header = ["r", "centers", "estimator", *[f"q{lv:g}" for lv in LEVELS]]
    stats = {"bias": [], "sd": [], "mse": [], "ratio": []}
    long_rows = []
    for sim in sims:
        s = sim.summary()
        se_bias, se_mse = mc_errors(sim.errors)
        for e, name in enumerate(s.estimators):
            key = [f"{sim.shape:g}", len(sim.sizes), name]
            for stat in stats:
                stats[stat].append([*key, *getattr(s, stat)[e].tolist()])
            for j, lv in enumerate(s.levels):
                long_rows.append([*key, lv, s.bias[e, j], se_bias[e, j], s.sd[e, j], s.mse[e, j],
                                  se_mse[e, j], s.ratio[e, j], int(s.failures[e, j]),
                                  s.replications])
    for stat, rows in stats.items():
        with open(out / f"quantiles_{stat}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
    with open(out / "quantiles_summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["r", "centers", "estimator", "level", "bias", "se_bias", "sd", "mse",
                    "se_mse", "bias2_over_var", "failures", "replications"])
        w.writerows(long_rows)
    np.savez_compressed(
        out / "quantiles_errors.npz",
        **{f"r{sim.shape:g}_c{len(sim.sizes)}": sim.errors for sim in sims},
        estimators=np.array(ESTIMATORS), levels=np.array(LEVELS),
    )


def plot(sims: list[QuantileSimulation], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted({sim.shape for sim in sims})
    fig, axes = plt.subplots(len(shapes), len(LEVELS), figsize=(3.2 * len(LEVELS),
                                                                 3.0 * len(shapes)),
                             squeeze=False, sharex=True)
    for row, shape in enumerate(shapes):
        mine = sorted((s for s in sims if s.shape == shape), key=lambda s: len(s.sizes))
        centers = [len(s.sizes) for s in mine]
        mse = np.array([s.summary().mse for s in mine])  # (settings, estimators, levels)
        for col, lv in enumerate(LEVELS):
            ax = axes[row, col]
            for e, name in enumerate(ESTIMATORS):
                style = {"lw": 2.5, "color": "black"} if name == "yj_shaped" else {"lw": 1.2}
                ax.plot(centers, mse[:, e, col], marker="o", label=LABELS[name], **style)
            ax.set_yscale("log")
            ax.set_title(f"r = {shape:g}, q = {lv:g}", fontsize=10)
            ax.set_xticks(centers)
            if row == len(shapes) - 1:
                ax.set_xlabel("centers")
            if col == 0:
                ax.set_ylabel("MSE of (q̂ − Q)/√r")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(out / "quantiles_mse.png", dpi=120)
    plt.close(fig)


def print_mse(sims: list[QuantileSimulation]) -> None:
    print(f"MSE × 1000 of (q̂ − Q)/√r; {sims[0].errors.shape[0]} replications per setting")
    for sim in sims:
        s = sim.summary()
        print(f"\nr = {sim.shape:g}, {len(sim.sizes)} centers   " +
              "  ".join(f"{lv:>8g}" for lv in LEVELS))
        for e, name in enumerate(ESTIMATORS):
            fails = int(s.failures[e].sum())
            note = f"   ({fails} failures)" if fails else ""
            print(f"  {LABELS[name]:28s}" + "  ".join(f"{1000 * v:8.3f}" for v in s.mse[e]) +
                  note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20260701)
    parser.add_argument("--shapes", type=float, nargs="+", default=[4.0, 10.0])
    parser.add_argument("--centers", type=int, nargs="+", default=[3, 5, 10],
                        choices=sorted(CENTER_SIZES))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (settings run "
                        "in parallel)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args(argv)
    if args.replications < 2:
        parser.error("--replications must be at least 2")

    settings = [(shape, c) for shape in args.shapes for c in args.centers]
    seeds = np.random.SeedSequence(args.seed).spawn(len(settings))
    every = max(1, args.replications // 20)
    jobs = [(shape, c, args.replications, every, seed)
            for (shape, c), seed in zip(settings, seeds, strict=True)]
    start = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            sims = list(pool.map(run_setting, jobs))
    else:
        sims = [run_setting(job) for job in jobs]
    args.out.mkdir(parents=True, exist_ok=True)
    write_tables(sims, args.out)
    plot(sims, args.out)
    print_mse(sims)
    print(f"\nwrote {args.out}/quantiles_*.csv, quantiles_errors.npz, quantiles_mse.png "
          f"in {time.perf_counter() - start:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
