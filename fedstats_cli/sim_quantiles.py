"""Seed 001's federated quantile simulation (§7.3; design in docs/methods.md §8.8), one command.

    fedstats simulate quantiles --replications 2000 --jobs 2
    .venv/bin/python benchmarks/sim_quantiles.py --replications 2000 --jobs 2     # the same

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

``--dp EPS [EPS ...]`` measures instead what ε-DP moment sums cost the YJ data estimator, as the
centers release them (``shared.releases.yj_moments_release``: values clipped to ``--dp-bounds``,
Laplace noise on the three sums, ε/24 per λ of at most 24 Brent evaluations, each center
spending EPS per fit): MSE of the exact and of the noisy fit on the same replications, and how
often the noisy fit failed. Prints a table; writes nothing.

    .venv/bin/python benchmarks/sim_quantiles.py --dp 1 10 100 --replications 200
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from shared.fields import DP_MAX_EVALUATIONS
from shared.quantiles import YJMoments
from shared.quantiles.simulate import (
    ESTIMATORS,
    LEVELS,
    QuantileSimulation,
    draw_replication,
    simulate_quantiles,
)
from shared.quantiles.wire import YJMomentsRequest
from shared.quantiles.yj_data import DP_TOL, in_process_query, yj_data_quantiles
from shared.releases import yj_moments_release
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
    stats: dict[str, list[list[Any]]] = {"bias": [], "sd": [], "mse": [], "ratio": []}
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
    arrays: dict[str, Any] = {f"r{sim.shape:g}_c{len(sim.sizes)}": sim.errors for sim in sims}
    np.savez_compressed(out / "quantiles_errors.npz", **arrays,
                        estimators=np.array(ESTIMATORS), levels=np.array(LEVELS))


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


def run_dp_setting(
    args: tuple[float, int, int, tuple[float, ...], tuple[float, float], np.random.SeedSequence]
) -> tuple[float, int, dict[str, np.ndarray], dict[str, int]]:
    """Standardized errors of the exact YJ data fit and of the ε-DP fits (one per ε)."""
    shape, n_centers, replications, epsilons, bounds, seed = args
    rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng(seed.spawn(1)[0])
    sizes = CENTER_SIZES[n_centers]
    errors = {name: np.full((replications, len(LEVELS)), np.nan)
              for name in ("exact", *(f"eps={e:g}" for e in epsilons))}
    failures = dict.fromkeys(errors, 0)
    root_r = float(np.sqrt(shape))
    for i in range(replications):
        xs, truth = draw_replication(sizes, shape, LEVELS, rng)
        try:
            errors["exact"][i] = (yj_data_quantiles(in_process_query(xs), LEVELS).quantiles
                                  - truth) / root_r
        except (ValueError, RuntimeError):
            failures["exact"] += 1
        for epsilon in epsilons:
            per_call = epsilon / DP_MAX_EVALUATIONS

            def query(lmbda: float, per_call: float = per_call,
                      xs: list[np.ndarray] = xs) -> list[YJMoments]:
                request = YJMomentsRequest(variable="x", lmbda=lmbda, epsilon=per_call,
                                           bounds=bounds)
                return [yj_moments_release(np.sort(x), request, "add_remove", noise_rng)
                        .to_result() for x in xs]

            name = f"eps={epsilon:g}"
            try:
                fit = yj_data_quantiles(query, LEVELS, max_evaluations=DP_MAX_EVALUATIONS,
                                        tol=DP_TOL)
            except (ValueError, RuntimeError):
                failures[name] += 1
                continue
            if not np.all(np.isfinite(fit.quantiles)):  # a degenerate fit: no estimate
                failures[name] += 1
                continue
            errors[name][i] = (fit.quantiles - truth) / root_r
    return shape, n_centers, errors, failures


def main_dp(args: argparse.Namespace) -> int:
    settings = [(shape, c) for shape in args.shapes for c in args.centers]
    seeds = np.random.SeedSequence(args.seed).spawn(len(settings))
    jobs = [(shape, c, args.replications, tuple(args.dp), tuple(args.dp_bounds), seed)
            for (shape, c), seed in zip(settings, seeds, strict=True)]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(run_dp_setting, jobs))
    else:
        results = [run_dp_setting(job) for job in jobs]
    a, b = args.dp_bounds
    print(f"YJ data with ε-DP moment sums (bounds [{a:g}, {b:g}], ε per center per fit, "
          f"{args.replications} replications): median |q̂ − Q|/√r × 1000 (MSE is swamped by "
          "fits whose λ runs to the bracket's end), and fits that failed or gave no estimate")
    for shape, n_centers, errors, failures in results:
        print(f"\nr = {shape:g}, {n_centers} centers" + " " * 14 +
              "  ".join(f"{lv:>8g}" for lv in LEVELS) + "   failed")
        for name, errs in errors.items():
            with np.errstate(all="ignore"):
                typical = np.nanmedian(np.abs(errs), axis=0)
            print(f"  {name:26s}" + "  ".join(f"{1000 * v:8.1f}" for v in typical) +
                  f"   {failures[name]:6d}")
    return 0


def main(argv: list[str] | None = None, *, out: Path) -> int:
    """Run the simulation (options in ``argv``; ``out`` is ``--out``'s default); the exit code."""
    # prog: the usage line the script has always shown, from either command.
    parser = argparse.ArgumentParser(prog="sim_quantiles.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20260701)
    parser.add_argument("--shapes", type=float, nargs="+", default=[4.0, 10.0])
    parser.add_argument("--centers", type=int, nargs="+", default=[3, 5, 10],
                        choices=sorted(CENTER_SIZES))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (settings run "
                        "in parallel)")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--dp", type=float, nargs="+", metavar="EPS",
                        help="measure the YJ data fit on ε-DP sums at these ε (see above)")
    parser.add_argument("--dp-bounds", type=float, nargs=2, default=[0.0, 40.0],
                        metavar=("LOW", "HIGH"), help="public clipping bounds of the DP sums")
    args = parser.parse_args(argv)
    if args.replications < 2:
        parser.error("--replications must be at least 2")
    if args.dp:
        return main_dp(args)

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

