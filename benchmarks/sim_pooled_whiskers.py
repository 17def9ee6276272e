"""The pooled DP boxplot's whiskers and outlier counts against Tukey's rule on the pooled records
(docs/benchmarks.md, "The pooled box's whiskers against Tukey's"): how far the released
whiskers are from Tukey's whiskers (the most extreme records inside Q1 − 1.5·IQR and
Q3 + 1.5·IQR of the pooled raw records) and the released outlier counts from Tukey's counts
(the records beyond those fences).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/sim_pooled_whiskers.py [--reps 200]
[--sizes 300 300 300] [--epsilons 0.5 1] [--seed 20261207]``

Laws: N(50, 10) with public bounds [0, 100]; log-normal(0, 1) (median 1, the skewed case) with
bounds [0, 60] (a positive variable's natural lower limit) and, to show what loose bounds cost,
[−50, 50]; Uniform(0, 10) with bounds [−50, 50] (short tails). Each replication draws new
records for three centers and runs the whole protocol in-process
(``shared.dp.pooled.pooled_boxplot``: each center ε-DP, add/remove, the default grid of
4**6 leaves). Errors are in units of the pooled sample's IQR; outlier differences in records.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from shared.dp.pooled import pooled_boxplot

LAWS: dict[str, tuple[Callable[[np.random.Generator, int], np.ndarray], tuple[float, float]]] = {
    "N(50, 10), [0, 100]": (lambda g, n: g.normal(50.0, 10.0, n), (0.0, 100.0)),
    "log-normal(0, 1), [0, 60]": (lambda g, n: g.lognormal(0.0, 1.0, n), (0.0, 60.0)),
    "log-normal(0, 1), [−50, 50]": (lambda g, n: g.lognormal(0.0, 1.0, n), (-50.0, 50.0)),
    "Uniform(0, 10), [−50, 50]": (lambda g, n: g.uniform(0.0, 10.0, n), (-50.0, 50.0)),
}


def tukey(x: np.ndarray) -> tuple[float, float, int, int, float]:
    """(lower whisker, upper whisker, outliers below, outliers above, IQR) of the records,
    numpy's default (linear) quartiles."""
    q1, q3 = np.quantile(x, [0.25, 0.75])
    iqr = float(q3 - q1)
    lo, hi = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    return (float(x[x >= lo].min()), float(x[x <= hi].max()), int(np.sum(x < lo)),
            int(np.sum(x > hi)), iqr)


def run(law: str, sizes: list[int], epsilon: float, reps: int, seed: int) -> dict[str, np.ndarray]:
    """Per replication: whisker errors / IQR (lower, upper), outlier count differences
    (lower, upper), Tukey's counts, and whether each whisker is at the fence."""
    draw, bounds = LAWS[law]
    streams = np.random.SeedSequence([seed, sum(sizes), round(epsilon * 1000)]).spawn(reps)
    rows: dict[str, list[tuple[float, float]]] = {"err": [], "out": [], "tukey": [], "fence": []}
    for stream in streams:
        data_rng, dp_rng = (np.random.default_rng(s) for s in stream.spawn(2))
        centers = [draw(data_rng, n) for n in sizes]
        t_lo, t_hi, o_lo, o_hi, iqr = tukey(np.concatenate(centers))
        box = pooled_boxplot(centers, epsilon=epsilon, bounds=bounds, neighbouring="add_remove",
                             rng=dp_rng, levels=()).box
        rows["err"].append(((box.lower_whisker - t_lo) / iqr, (box.upper_whisker - t_hi) / iqr))
        rows["out"].append((box.lower_outliers - o_lo, box.upper_outliers - o_hi))
        rows["tukey"].append((o_lo, o_hi))
        rows["fence"].append((box.lower_branch == "fence", box.upper_branch == "fence"))
    return {k: np.asarray(v, dtype=float) for k, v in rows.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 300, 300])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args(argv)
    print(f"centers {args.sizes}, {args.reps} replications, add/remove")
    rows = ["| law, bounds | ε | whisker | median error / IQR | median \\|error\\| / IQR | "
            "90th pct \\|error\\| / IQR | at the fence | Tukey's outliers (median) | "
            "released − Tukey's (median [IQR]) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for law in LAWS:
        for eps in args.epsilons:
            t0 = time.perf_counter()
            r = run(law, args.sizes, eps, args.reps, args.seed)
            print(f"  {law}, ε = {eps:g}: {time.perf_counter() - t0:.1f} s")
            for i, side in enumerate(("lower", "upper")):
                err, out = r["err"][:, i], r["out"][:, i]
                q25, q75 = np.quantile(out, [0.25, 0.75])
                rows.append(
                    f"| {law} | {eps:g} | {side} | {np.median(err):+.3f} | "
                    f"{np.median(np.abs(err)):.3f} | {np.quantile(np.abs(err), 0.9):.3f} | "
                    f"{r['fence'][:, i].mean():.2f} | {np.median(r['tukey'][:, i]):g} | "
                    f"{np.median(out):+g} [{q25:+g}, {q75:+g}] |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
