"""Seed 000's boxplot simulation, in-process: DPBoxplot (both walks) against the four naive DP
boxplots and the non-private one, one (law, n, ε) cell at a time (:func:`run_cell`).

The command around it (figures, CSV, the summary tables of ``docs/benchmarks.md``):
``fedstats simulate boxplot`` or ``benchmarks/sim_boxplot.py`` (``fedstats_cli.sim_boxplot``).

Methods: ``dpboxplot_one_sided_walk`` is DPBoxplot as the authors' code runs it (the default:
one-sided extremes walk, count target n − √n/20, exponential noise); ``dpboxplot_algorithm_1``
the paper's Algorithm 1 as written (target n, Laplace noise; formerly ``dp_boxplot`` and
``dp_boxplot_seed_walk``, :mod:`shared.fields`); ``naive_*`` the four naive DP
boxplots; ``non_private`` the sample's boxplot.

Design (seed 000 §5; docs/methods.md §5.9): N(0, 1), skew-normal(a = 20) standardized,
Uniform(−√3, √3), standardized Beta(2, 2), and a standardized log-normal(σ = 1) standing in for
the paper's real heavy-tailed price variable (we do not have it); n in
{1e3, 3.5e3, 1e4, 3.5e4, 1e5}; ε in {0.5, 1, 5, 10}; bounds [−50, 50]; swap neighbours
(n public); the paper used 1000 replications (``--reps 1000``; the default 50 keeps a run to
minutes). Every method sees the same sample in a replication.

Population boxplot: the seed's definition (whiskers max(ℓ_1, min ν) and min(u_1, max ν), outlier
proportions below ℓ and above u) on 10^7 draws of each law, as in the paper; the law's true min
and max would put a light-tailed law's whisker at the fence it never reaches (skew-normal's left
tail). The non-private boxplot applies the same definition to the sample.
Metrics (absolute errors): location |med − med*|; scale |IQR − IQR*|;
skewness |(ℓ − ξ_1/4) − (ℓ* − ξ*_1/4)| + |(ξ_3/4 − u) − (ξ*_3/4 − u*)|; tails
|p_ℓ − p*_ℓ| + |p_u − p*_u|, with p the outlier count over n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from shared.dp import NAIVE_METHODS, BoxplotResult, dp_boxplot, naive_boxplot
from shared.fields import METHOD_NAMES, ExtremesWalk

BOUNDS = (-50.0, 50.0)
SIZES = (1_000, 3_500, 10_000, 35_000, 100_000)
EPSILONS = (0.5, 1.0, 5.0, 10.0)
WALKS: dict[str, ExtremesWalk] = {name: walk for walk, name in METHOD_NAMES.items()}
METHODS = (*WALKS, *(f"naive_{m}" for m in NAIVE_METHODS), "non_private")
METRICS = ("location", "scale", "skewness", "tails")


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


def run_cell(args: tuple[str, int, float, int, int, Box]) -> list[dict[str, Any]]:
    """All replications of one (law, n, ε) cell; returns one CSV row per method."""
    law_name, n, eps, reps, seed, pop = args
    law = laws()[law_name]
    rng = np.random.default_rng(seed)
    errs: dict[str, list[tuple[float, ...]]] = {m: [] for m in METHODS}
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        for method, walk in WALKS.items():
            res = dp_boxplot(
                x, epsilon=eps, bounds=BOUNDS, neighbouring="swap", rng=rng, extremes=walk
            )
            errs[method].append(errors(dp_box(res, n), pop))
        for m in NAIVE_METHODS:
            res = naive_boxplot(x, m, epsilon=eps, bounds=BOUNDS, neighbouring="swap", rng=rng)
            errs[f"naive_{m}"].append(errors(dp_box(res, n), pop))
        errs["non_private"].append(errors(sample_box(x), pop))
    rows = []
    for method, values in errs.items():
        arr = np.array(values)
        row: dict[str, Any] = {"law": law_name, "n": n, "epsilon": eps, "method": method}
        for k, metric in enumerate(METRICS):
            row[metric] = float(arr[:, k].mean())
            row[f"{metric}_se"] = float(arr[:, k].std(ddof=1) / math.sqrt(len(arr)))
        row["reps"] = reps
        rows.append(row)
    return rows
