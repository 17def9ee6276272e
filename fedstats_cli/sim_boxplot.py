"""Seed 000's simulation: DPBoxplot (both walks) against the four naive DP boxplots and the
non-private one.

Run: ``fedstats simulate boxplot [--reps 50] [--jobs 2] [--quick]`` (writes under the source
checkout's ``benchmarks/out/``) or ``.venv/bin/python benchmarks/sim_boxplot.py [...]``.
Writes ``sim_boxplot.csv`` (one row per distribution, n, ε, method: mean and
standard error of each metric over the replications), one figure per ε
(``sim_boxplot_eps<ε>.png``: metrics × distributions, error against n), an example figure drawn
from ``BoxplotResult.to_bxp_stats()`` (``sim_boxplot_example.png``), and prints the summary tables
of ``docs/benchmarks.md`` (``--summary CSV`` prints them again from a written CSV).

The simulation itself (methods, design, population boxplot, metrics): :mod:`shared.dp.simulate`.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import math
import os
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from shared.dp import dp_boxplot
from shared.dp.boxplot import bxp_stats
from shared.dp.simulate import (
    BOUNDS,
    EPSILONS,
    METHODS,
    METRICS,
    SIZES,
    WALKS,
    laws,
    population_box,
    run_cell,
    sample_box,
)
from shared.fields import METHOD_NAMES, canonical_method


def plot(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    law_names = list(laws())
    for eps in sorted({float(r["epsilon"]) for r in rows}):
        fig, axes = plt.subplots(
            len(METRICS), len(law_names), figsize=(3.2 * len(law_names), 2.6 * len(METRICS))
        )
        for (i, metric), (j, law) in itertools.product(enumerate(METRICS), enumerate(law_names)):
            ax = axes[i, j]
            for method in METHODS:
                pts = sorted(
                    (int(r["n"]), float(r[metric]))
                    for r in rows
                    if r["law"] == law and canonical_method(r["method"]) == method
                    and r["epsilon"] == eps
                )
                if pts:
                    style = {"non_private": "k--", ALGORITHM_1: "-."}.get(method, "-")
                    lw = 2.5 if method in WALKS else 1.0
                    ax.plot(*zip(*pts, strict=True), style, lw=lw, marker=".", label=method)
            ax.set_xscale("log")
            ax.set_yscale("log")
            if i == 0:
                ax.set_title(law)
            if j == 0:
                ax.set_ylabel(f"{metric} error")
            if i == len(METRICS) - 1:
                ax.set_xlabel("n")
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(f"DP boxplots, ε = {eps:g}, bounds [−50, 50]")
        fig.tight_layout()
        path = out / f"sim_boxplot_eps{eps:g}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_example(out: Path) -> Path:
    """One sample per law: non-private box next to DPBoxplot at ε = 1, drawn by Axes.bxp."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(7)
    stats_list = []
    for name, law in laws().items():
        x = law.rvs(size=10_000, random_state=rng)
        box = sample_box(x)
        stats_list.append(bxp_stats(box.lower, box.q1, box.median, box.q3, box.upper,
                                    f"{name}\nnon-private"))
        res = dp_boxplot(x, epsilon=1.0, bounds=BOUNDS, neighbouring="swap", rng=rng)
        stats_list.append(res.to_bxp_stats(label=f"{name}\nDP ε=1"))
    fig, ax = plt.subplots(figsize=(13, 4))
    ax.bxp(stats_list, showfliers=False)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    path = out / "sim_boxplot_example.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


ONE_SIDED, ALGORITHM_1 = METHOD_NAMES["one_sided"], METHOD_NAMES["algorithm_1"]
DP_METHODS = METHODS[:-1]
LABELS = {
    ONE_SIDED: "DPBoxplot, one-sided walk (authors' code)",
    ALGORITHM_1: "DPBoxplot, Algorithm 1",
    "naive_joint_exp": "JointExp",
    "naive_private_quantile": "PrivateQuantile",
    "naive_approx_quantile": "ApproxQuantile",
    "naive_unbounded": "unbounded",
    "non_private": "non-private",
}


Cells = dict[tuple[str, int, float], dict[str, dict[str, float]]]


def _cells(rows: list[dict[str, Any]]) -> Cells:
    """(law, n, ε) → method → metric (and its SE) → mean error."""
    out: Cells = {}
    for r in rows:
        key = (str(r["law"]), int(r["n"]), float(r["epsilon"]))
        out.setdefault(key, {})[canonical_method(str(r["method"]))] = {
            k: float(v) for k, v in r.items() if k in METRICS or k.endswith("_se")
        }
    return out


def summarize(rows: list[dict[str, Any]]) -> str:
    """The markdown tables of ``docs/benchmarks.md`` from the CSV rows."""
    cells = _cells(rows)
    law_names = [law for law in laws() if any(k[0] == law for k in cells)]
    lines = [
        "Walks, per metric and law: one-sided / seed-walk mean error, median (range) over the "
        "(n, ε) cells; cells where the one-sided walk is better / worse by more than 2 SE.",
        "",
        "| metric | " + " | ".join(law_names) + " |",
        "|---|" + "---|" * len(law_names),
    ]
    for metric in METRICS:
        entries = []
        for law in law_names:
            ratios: list[float] = []
            better = worse = 0
            for key, by in cells.items():
                if key[0] != law:
                    continue
                one, seed = by[ONE_SIDED], by[ALGORITHM_1]
                ratios.append(one[metric] / seed[metric])
                gap = 2 * math.hypot(one[f"{metric}_se"], seed[f"{metric}_se"])
                better += one[metric] < seed[metric] - gap
                worse += one[metric] > seed[metric] + gap
            r = np.array(ratios)
            entries.append(
                f"{np.median(r):.2f} ({r.min():.2f}–{r.max():.2f}); {better}/{worse} of {r.size}"
            )
        lines.append(f"| {metric} | " + " | ".join(entries) + " |")
    lines += [
        "",
        "Cells (of all) where each DP method has the smallest mean error, per metric:",
        "",
        "| metric | " + " | ".join(LABELS[m] for m in DP_METHODS) + " |",
        "|---|" + "---|" * len(DP_METHODS),
    ]
    for metric in METRICS:
        wins = dict.fromkeys(DP_METHODS, 0)
        for by in cells.values():
            wins[min(DP_METHODS, key=lambda m: by[m][metric])] += 1
        lines.append(f"| {metric} | " + " | ".join(str(wins[m]) for m in DP_METHODS) + " |")
    lines += [
        "",
        "Each walk's mean error over the best naive method's in the same cell, median (range):",
        "",
        "| metric | law | one-sided / best naive | seed walk / best naive |",
        "|---|---|---|---|",
    ]
    naive = [m for m in DP_METHODS if m.startswith("naive_")]
    for metric in METRICS:
        for law in law_names:
            one_r: list[float] = []
            seed_r: list[float] = []
            for key, by in cells.items():
                if key[0] == law:
                    best = min(by[m][metric] for m in naive)
                    one_r.append(by[ONE_SIDED][metric] / best)
                    seed_r.append(by[ALGORITHM_1][metric] / best)
            o, sd = np.array(one_r), np.array(seed_r)
            lines.append(
                f"| {metric} | {law} | {np.median(o):.2f} ({o.min():.2f}–{o.max():.2f}) | "
                f"{np.median(sd):.2f} ({sd.min():.2f}–{sd.max():.2f}) |"
            )
    sizes = sorted({k[1] for k in cells})
    epsilons = sorted({k[2] for k in cells})
    for metric in ("skewness", "tails"):
        lines += [
            "",
            f"Mean {metric} error × 100 at ε = 1 (each walk, the best naive method, non-private):",
            "",
            "| law | n | one-sided | seed walk | best naive | non-private |",
            "|---|---|---|---|---|---|",
        ]
        eps_show = 1.0 if 1.0 in epsilons else epsilons[0]
        for law in law_names:
            for n in sizes:
                if (law, n, eps_show) not in cells:
                    continue
                by = cells[(law, n, eps_show)]
                top = min(naive, key=lambda m: by[m][metric])
                lines.append(
                    f"| {law} | {n} | {100 * by[ONE_SIDED][metric]:.2f} | "
                    f"{100 * by[ALGORITHM_1][metric]:.2f} | "
                    f"{100 * by[top][metric]:.2f} ({LABELS[top]}) | "
                    f"{100 * by['non_private'][metric]:.2f} |"
                )
    return "\n".join(lines)


# The authors' published results (github jairoadiazr/DPBoxplot, simulation_results/): per law a
# pickle of [ε, n, method, per-replication distances] for DPBoxplot with λ_n = n^(-1/4) and the
# extremes' level 1 − 1/(20√n) (file suffix _delta25_c20), 1000 replications, ε = 1 only.
AUTHORS_LAWS = {"normal": "normal", "skew": "skewnormal20", "uniform": "uniform", "beta": "beta22"}
# Column order of their ``box_plot_distance``: overall, d2, scale, location, skewness, tails, order.
AUTHORS_COLUMNS = {"scale": 2, "location": 3, "skewness": 4, "tails": 5}


class _NumbersOnly(pickle.Unpickler):
    """Unpickles lists, tuples, floats and numpy scalars; refuses every other global (a pickle
    from the web must not run code)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if name == "scalar" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            from numpy._core.multiarray import scalar

            return scalar
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def authors_results(folder: Path) -> dict[tuple[str, int, float], dict[str, tuple[float, float]]]:
    """(law, n, ε) → metric → (mean, SE) of the authors' DPBoxplot runs found in ``folder``."""
    out: dict[tuple[str, int, float], dict[str, tuple[float, float]]] = {}
    for theirs, ours in AUTHORS_LAWS.items():
        path = folder / f"single_method_DPBoxplot_{theirs}_M1000_delta25_c20.pkl"
        if not path.exists():
            continue
        for eps, n, method, reps in _NumbersOnly(io.BytesIO(path.read_bytes())).load():
            if method != "DPBoxplot":
                continue
            arr = np.array(reps, dtype=float)
            out[(ours, int(n), float(eps))] = {
                metric: (
                    float(np.nanmean(arr[:, col])),
                    float(np.nanstd(arr[:, col], ddof=1) / math.sqrt(len(arr))),
                )
                for metric, col in AUTHORS_COLUMNS.items()
            }
    return out


def compare_with_authors(rows: list[dict[str, Any]], folder: Path) -> str:
    """Markdown: our two walks next to the authors' DPBoxplot, cell by cell (mean ± SE)."""
    cells = _cells(rows)
    theirs = authors_results(folder)
    lines = [
        "| metric | law | n | authors (M = 1000) | one-sided walk | seed walk |",
        "|---|---|---|---|---|---|",
    ]
    for metric in METRICS:
        for (law, n, eps), auth in sorted(theirs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if (law, n, eps) not in cells:
                continue
            by = cells[(law, n, eps)]
            ours = [
                f"{by[m][metric]:.4f} ± {by[m][f'{metric}_se']:.4f}"
                for m in (ONE_SIDED, ALGORITHM_1)
            ]
            lines.append(
                f"| {metric} | {law} | {n} | {auth[metric][0]:.4f} ± {auth[metric][1]:.4f} | "
                + " | ".join(ours)
                + " |"
            )
    return "\n".join(lines)


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None, *, out: Path) -> int:
    """Run the simulation (options in ``argv``), writing under ``out``; the exit code."""
    # prog: the usage line the script has always shown, from either command.
    parser = argparse.ArgumentParser(prog="sim_boxplot.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--population", type=int, default=10**7, help="draws for the targets")
    parser.add_argument(
        "--quick", action="store_true", help="n <= 1e4, ε in {1, 5}, for a smoke run"
    )
    parser.add_argument("--summary", type=Path, help="print the tables of a written CSV and stop")
    parser.add_argument(
        "--authors",
        type=Path,
        help="with --summary: the authors' simulation_results/ folder, to print the comparison",
    )
    args = parser.parse_args(argv)
    if args.summary is not None:
        written = read_rows(args.summary)
        print(summarize(written))
        if args.authors is not None:
            print()
            print(compare_with_authors(written, args.authors))
        return 0
    started = time.perf_counter()
    sizes = [s for s in SIZES if s <= 10_000] if args.quick else list(SIZES)
    epsilons = [1.0, 5.0] if args.quick else list(EPSILONS)
    pops = {
        name: population_box(law, args.population, args.seed + 10_000 + k)
        for k, (name, law) in enumerate(laws().items())
    }
    cells = [
        (law, n, eps, args.reps, args.seed + k, pops[law])
        for k, (law, n, eps) in enumerate(itertools.product(laws(), sizes, epsilons))
    ]
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for cell_rows in pool.map(run_cell, cells):
                rows.extend(cell_rows)
    else:
        for cell in cells:
            rows.extend(run_cell(cell))
            print(f"done {cell[:3]}", file=sys.stderr, flush=True)
    csv_path = out / "sim_boxplot.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for path in [csv_path, *plot(rows, out), plot_example(out)]:
        print(os.path.relpath(path))
    print(summarize(rows))
    print(f"{len(cells)} cells × {args.reps} replications in {time.perf_counter() - started:.0f} s")
    return 0
