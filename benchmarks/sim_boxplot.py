"""Seed 000's simulation: DPBoxplot against the four naive DP boxplots and the non-private one.

Run: ``.venv/bin/python benchmarks/sim_boxplot.py [--reps 50] [--jobs 2] [--quick]``
Writes ``benchmarks/out/sim_boxplot.csv`` (one row per distribution, n, ε, method: mean and
standard error of each metric over the replications), one figure per ε
(``sim_boxplot_eps<ε>.png``: metrics × distributions, error against n) and an example figure drawn
from ``BoxplotResult.to_bxp_stats()`` (``sim_boxplot_example.png``).

Design (``NOTES.md`` §2): N(0, 1), skew-normal(a = 20) standardized, Uniform(−√3, √3),
standardized Beta(2, 2), and a standardized log-normal(σ = 1) standing in for the paper's real
heavy-tailed price variable (we do not have it); n in {1e3, 3.5e3, 1e4, 3.5e4, 1e5};
ε in {0.5, 1, 5, 10}; bounds [−50, 50]; swap neighbours (n public); the paper used 1000
replications (``--reps 1000``; the default 50 keeps a run to minutes). Every method sees the same
sample in a replication.

Population boxplot: the seed's definition (whiskers max(ℓ_1, min ν) and min(u_1, max ν), outlier
proportions below ℓ and above u) on 10^7 draws of each law, as in the paper; the law's true min
and max would put a light-tailed law's whisker at the fence it never reaches (skew-normal's left
tail). The non-private boxplot applies the same definition to the sample.
Metrics (absolute errors): location |med − med*|; scale |IQR − IQR*|;
skewness |(ℓ − ξ_1/4) − (ℓ* − ξ*_1/4)| + |(ξ_3/4 − u) − (ξ*_3/4 − u*)|; tails
|p_ℓ − p*_ℓ| + |p_u − p*_u|, with p the outlier count over n.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from shared.dp import NAIVE_METHODS, BoxplotResult, dp_boxplot, naive_boxplot

BOUNDS = (-50.0, 50.0)
SIZES = (1_000, 3_500, 10_000, 35_000, 100_000)
EPSILONS = (0.5, 1.0, 5.0, 10.0)
METHODS = ("dp_boxplot", *(f"naive_{m}" for m in NAIVE_METHODS), "non_private")
METRICS = ("location", "scale", "skewness", "tails")
OUT = Path(__file__).resolve().parent / "out"


def laws() -> dict[str, stats.rv_continuous]:
    """The five settings, each with mean 0 and variance 1."""

    def standardize(dist: type, *shape: float) -> stats.rv_continuous:
        mean, var = dist(*shape).stats(moments="mv")
        sd = math.sqrt(float(var))
        return dist(*shape, loc=-float(mean) / sd, scale=1.0 / sd)

    return {
        "normal": stats.norm(),
        "skewnormal20": standardize(stats.skewnorm, 20.0),
        "uniform": stats.uniform(loc=-math.sqrt(3.0), scale=2 * math.sqrt(3.0)),
        "beta22": standardize(stats.beta, 2.0, 2.0),
        "lognormal": standardize(stats.lognorm, 1.0),
    }


@dataclass(frozen=True)
class Box:
    lower: float
    q1: float
    median: float
    q3: float
    upper: float
    p_lower: float
    p_upper: float


def population_box(law: stats.rv_continuous, draws: int, seed: int) -> Box:
    """The boxplot of ``draws`` values of the law, as the paper computed its targets (10^7)."""
    return sample_box(law.rvs(size=draws, random_state=np.random.default_rng(seed)))


def sample_box(x: np.ndarray) -> Box:
    q1, med, q3 = (float(v) for v in np.quantile(x, [0.25, 0.5, 0.75]))
    iqr = q3 - q1
    lower = max(q1 - 1.5 * iqr, float(x.min()))
    upper = min(q3 + 1.5 * iqr, float(x.max()))
    return Box(lower, q1, med, q3, upper, float(np.mean(x < lower)), float(np.mean(x > upper)))


def dp_box(res: BoxplotResult, n: int) -> Box:
    return Box(
        res.lower_whisker,
        res.q1,
        res.median,
        res.q3,
        res.upper_whisker,
        res.lower_outliers / n,
        res.upper_outliers / n,
    )


def errors(est: Box, pop: Box) -> tuple[float, float, float, float]:
    return (
        abs(est.median - pop.median),
        abs((est.q3 - est.q1) - (pop.q3 - pop.q1)),
        abs((est.lower - est.q1) - (pop.lower - pop.q1))
        + abs((est.q3 - est.upper) - (pop.q3 - pop.upper)),
        abs(est.p_lower - pop.p_lower) + abs(est.p_upper - pop.p_upper),
    )


def run_cell(args: tuple[str, int, float, int, int, Box]) -> list[dict[str, object]]:
    """All replications of one (law, n, ε) cell; returns one CSV row per method."""
    law_name, n, eps, reps, seed, pop = args
    law = laws()[law_name]
    rng = np.random.default_rng(seed)
    errs: dict[str, list[tuple[float, ...]]] = {m: [] for m in METHODS}
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        kw = {"epsilon": eps, "bounds": BOUNDS, "neighbouring": "swap", "rng": rng}
        errs["dp_boxplot"].append(errors(dp_box(dp_boxplot(x, **kw), n), pop))
        for m in NAIVE_METHODS:
            errs[f"naive_{m}"].append(errors(dp_box(naive_boxplot(x, m, **kw), n), pop))
        errs["non_private"].append(errors(sample_box(x), pop))
    rows = []
    for method, values in errs.items():
        arr = np.array(values)
        row: dict[str, object] = {"law": law_name, "n": n, "epsilon": eps, "method": method}
        for k, metric in enumerate(METRICS):
            row[metric] = float(arr[:, k].mean())
            row[f"{metric}_se"] = float(arr[:, k].std(ddof=1) / math.sqrt(len(arr)))
        row["reps"] = reps
        rows.append(row)
    return rows


def plot(rows: list[dict[str, object]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    law_names = list(laws())
    for eps in sorted({float(r["epsilon"]) for r in rows}):  # type: ignore[arg-type]
        fig, axes = plt.subplots(
            len(METRICS), len(law_names), figsize=(3.2 * len(law_names), 2.6 * len(METRICS))
        )
        for (i, metric), (j, law) in itertools.product(enumerate(METRICS), enumerate(law_names)):
            ax = axes[i, j]
            for method in METHODS:
                pts = sorted(
                    (int(r["n"]), float(r[metric]))  # type: ignore[call-overload]
                    for r in rows
                    if r["law"] == law and r["method"] == method and r["epsilon"] == eps
                )
                if pts:
                    style = "k--" if method == "non_private" else "-"
                    lw = 2.5 if method == "dp_boxplot" else 1.0
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
        stats_list.append(
            {
                "med": box.median,
                "q1": box.q1,
                "q3": box.q3,
                "whislo": box.lower,
                "whishi": box.upper,
                "fliers": [],
                "label": f"{name}\nnon-private",
            }
        )
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--population", type=int, default=10**7, help="draws for the targets")
    parser.add_argument(
        "--quick", action="store_true", help="n <= 1e4, ε in {1, 5}, for a smoke run"
    )
    args = parser.parse_args()
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
    OUT.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for cell_rows in pool.map(run_cell, cells):
                rows.extend(cell_rows)
    else:
        for cell in cells:
            rows.extend(run_cell(cell))
            print(f"done {cell[:3]}", file=sys.stderr, flush=True)
    csv_path = OUT / "sim_boxplot.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for path in [csv_path, *plot(rows, OUT), plot_example(OUT)]:
        print(os.path.relpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
