"""Descriptive statistics of one variable ("Table 1"): ε-DP from a center's values, or read from a
K-anonymous bin table at no ε (docs/methods.md, "Descriptive statistics").

Two estimators, the analyst's choice:

* :func:`dp_describe` — one center's ε-DP description of its values clipped to public bounds
  [a, b]: a noisy count, noisy sums about the bounds' midpoint (mean and SD follow), JointExp
  quartiles and extreme percentiles (the DP "min" and "max"), and a Laplace histogram on
  equal-width bins. ε is split in fixed shares (:data:`EPSILON_SPLIT`) and the parts compose
  (basic composition). Descriptions of disjoint record sets (centers, arms) pool exactly by
  post-processing (:func:`pool_descriptions`).
* :func:`table_describe` — one row of a K-anonymous bin table: N is its total, mean and SD the
  grouped-data (midpoint) estimators, median and quartiles by interpolation with buffers
  (``shared.quantiles.interpolation_quantiles``), the histogram its counts. No minimum or maximum
  is released without ε: a table's extreme limits are buffers, not data values.

Nothing here knows of missing values: a center's population holds complete cases only
(docs/privacy.md, "One population"), so a count of missing values is not derivable from these
descriptions and is not released.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_int,
    check_neighbouring,
)
from shared.binning import BinTable
from shared.dp.joint_exp import joint_exp, joint_exp_sensitivity
from shared.privacy import Neighbouring, PrivacySpent
from shared.quantiles import interpolation_quantiles

FloatArray = NDArray[np.float64]

EPSILON_SPLIT: tuple[tuple[str, float], ...] = (
    ("count", 0.05),
    ("sum", 0.15),
    ("sum of squares", 0.30),
    ("quantiles", 0.30),
    ("histogram", 0.20),
)
"""How :func:`dp_describe` splits its ε: the shares of each part (they sum to 1). The sum of
squares gets the largest share (its sensitivity h² is the largest relative to its value), the
count the smallest (sensitivity 1 on a count of at least K)."""
QUANTILE_LEVELS: tuple[float, ...] = (0.01, 0.25, 0.5, 0.75, 0.99)
"""The levels of the one JointExp call: the DP "minimum" and "maximum" are the 1st and 99th
percentiles (a DP release cannot show the exact extremes: one record moves them), then Q1,
median and Q3."""
MAX_BINS = 200
"""The most histogram bins a description may ask for."""


@dataclass(frozen=True)
class DescribePart:
    """One part of a DP description: its share of ε, its mechanism and its noise.

    ``sensitivity`` and ``scale`` (Laplace b = sensitivity/ε) are given for the Laplace parts;
    for JointExp (an exponential mechanism) ``sensitivity`` is its utility's and ``scale`` None.
    """

    name: str
    epsilon: float
    mechanism: str
    sensitivity: float
    scale: float | None


@dataclass(frozen=True)
class Summary:
    """What a description shows: N, mean, SD, Q1/median/Q3, the DP extremes, a histogram.

    ``None`` where the estimator releases nothing (the extremes of a table) or the numbers admit
    no value (a noisy count below 2 gives no SD)."""

    n: int
    mean: float | None
    sd: float | None
    q1: float | None
    median: float | None
    q3: float | None
    minimum: float | None
    maximum: float | None
    edges: tuple[float, ...]
    counts: tuple[float, ...]


@dataclass(frozen=True)
class DPDescription:
    """One ε-DP description (:func:`dp_describe`) or several pooled (:func:`pool_descriptions`).

    The released numbers: ``count`` (noisy N), ``sum`` and ``sum_squares`` (noisy Σ(x − c) and
    Σ(x − c)² of the clipped values about ``center`` c, the bounds' midpoint), ``quantiles`` at
    ``levels`` (JointExp; none for a pooled description), ``histogram`` (noisy counts on
    ``edges``), and the ``parts`` of the ε split. Everything else is computed from them.
    """

    bounds: tuple[float, float]
    center: float
    count: float
    sum: float
    sum_squares: float
    levels: tuple[float, ...]
    quantiles: tuple[float, ...] | None
    edges: tuple[float, ...]
    histogram: tuple[float, ...]
    parts: tuple[DescribePart, ...]
    neighbouring: Neighbouring
    spent: PrivacySpent
    resolution: float | None = None

    def summary(self) -> Summary:
        """N, mean, SD, quartiles, extremes and histogram from the released numbers
        (post-processing: no further privacy cost).

        N = max(0, round(count)). Mean = c + sum/count, clamped to the bounds; SD² =
        (sum_squares − sum²/count)/(count − 1), clamped to [0, h²·count/(count − 1)] with h the
        bounds' half-width (the largest variance values in the bounds can have); none below a
        noisy count of 2. Quartiles and extremes from JointExp when released, else (pooled)
        from the summed histogram (:func:`histogram_quantiles`); the extremes only from JointExp.
        Histogram counts are rounded and clamped at 0.
        """
        a, b = self.bounds
        n = self.count
        mean = sd = None
        if n >= 1.0:
            mean = float(np.clip(self.center + self.sum / n, a, b))
        if n >= 2.0:
            h = (b - a) / 2.0
            var = (self.sum_squares - self.sum**2 / n) / (n - 1.0)
            sd = math.sqrt(float(np.clip(var, 0.0, h * h * n / (n - 1.0))))
        counts = tuple(float(max(0.0, round(c))) for c in self.histogram)
        lo: float | None = None
        hi: float | None = None
        q1: float | None
        median: float | None
        q3: float | None
        if self.quantiles is not None:
            by_level = dict(zip(self.levels, self.quantiles, strict=True))
            q1, median, q3 = by_level[0.25], by_level[0.5], by_level[0.75]
            lo, hi = by_level[QUANTILE_LEVELS[0]], by_level[QUANTILE_LEVELS[-1]]
        elif sum(counts) > 0:
            q1, median, q3 = histogram_quantiles(self.edges, counts, (0.25, 0.5, 0.75))
        else:
            q1 = median = q3 = None
        return Summary(n=max(0, round(n)), mean=mean, sd=sd, q1=q1, median=median, q3=q3,
                       minimum=lo, maximum=hi, edges=self.edges, counts=counts)


def _sensitivities(bounds: tuple[float, float], neighbouring: Neighbouring) -> dict[str, float]:
    """L1 sensitivity of each Laplace part for values clipped to ``bounds``, y = x − c ∈ [−h, h]:
    count 1 (add/remove; under swap the count does not move, 1 is kept as an upper bound);
    Σy h (add/remove) or 2h (swap); Σy² h² (y² ∈ [0, h²] either way); the histogram 1
    (add/remove: one bin gains or loses one) or 2 (swap: one bin −1, another +1)."""
    a, b = bounds
    h = (b - a) / 2.0
    swap = neighbouring == "swap"
    return {"count": 1.0, "sum": 2.0 * h if swap else h, "sum of squares": h * h,
            "histogram": 2.0 if swap else 1.0}


def histogram_edges(bounds: tuple[float, float], bins: int) -> FloatArray:
    """``bins`` equal-width bins over the public bounds (``bins + 1`` edges)."""
    return np.linspace(bounds[0], bounds[1], bins + 1)


def dp_describe(
    x: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    bins: int = 10,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    resolution: float | None = None,
) -> DPDescription:
    """An ε-DP description of ``x`` (one center's values of one variable, one arm).

    The values are clipped to the public ``bounds`` [a, b] (c = (a + b)/2, h = (b − a)/2) and
    ε is split as :data:`EPSILON_SPLIT`:

    * count: n + Laplace(1/ε_n);
    * sum: Σ(x − c) + Laplace(Δ_s/ε_s), Δ_s = h (add/remove) or 2h (swap);
    * sum of squares: Σ(x − c)² + Laplace(h²/ε_ss);
    * quantiles: JointExp at :data:`QUANTILE_LEVELS` in one mechanism (Gillenwater, Joseph &
      Kulesza 2021; docs/methods.md §5.3) with ε_q; with a public ``resolution`` r, on the
      grid of r within the bounds (grid-aware JointExp, same ε);
    * histogram: ``bins`` equal-width bins over [a, b], each count + Laplace(Δ_h/ε_h), Δ_h = 1
      (add/remove) or 2 (swap).

    **Guarantee**: ε-DP under ``neighbouring`` by basic sequential composition of the five
    parts (Dwork & Roth 2014, Thm 3.16), each ε_i-DP for its sensitivity on the clipped values.
    JointExp's pruning makes it formally (ε, δ < e^-740)-DP (``shared.dp.joint_exp``). Assumed:
    ``bounds`` and ``bins`` are public (not chosen from these data).

    Parameters
    ----------
    x : the values, finite, non-empty.
    epsilon : the whole description's ε, > 0.
    bounds : public (a, b), a < b.
    bins : histogram bins, 1..MAX_BINS.
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.
    resolution : the variable's public recording resolution, or None.
    """
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    bins = check_int(bins, "bins", 1)
    if bins > MAX_BINS:
        raise ValueError(f"`bins` must be at most {MAX_BINS}, got {bins}")
    data = ascending(as_finite_1d(x, "x"))
    a, b = bounds
    clipped = np.clip(data, a, b)
    center = (a + b) / 2.0
    y = clipped - center
    share = dict(EPSILON_SPLIT)
    eps = {name: epsilon * s for name, s in EPSILON_SPLIT}
    sens = _sensitivities(bounds, neighbouring)

    def laplace(name: str) -> tuple[float, DescribePart]:
        scale = sens[name] / eps[name]
        return scale, DescribePart(name, eps[name], "laplace", sens[name], scale)

    parts: list[DescribePart] = []
    scale, part = laplace("count")
    parts.append(part)
    count = float(data.size + rng.laplace(0.0, scale))
    scale, part = laplace("sum")
    parts.append(part)
    total = float(y.sum() + rng.laplace(0.0, scale))
    scale, part = laplace("sum of squares")
    parts.append(part)
    total_sq = float((y * y).sum() + rng.laplace(0.0, scale))
    on_grid = {"resolution": resolution} if resolution is not None else {}
    quantiles = joint_exp(clipped, QUANTILE_LEVELS, epsilon=eps["quantiles"], bounds=bounds,
                          neighbouring=neighbouring, rng=rng, **on_grid)
    parts.append(DescribePart("quantiles", eps["quantiles"], "joint_exp",
                              joint_exp_sensitivity(QUANTILE_LEVELS, neighbouring), None))
    edges = histogram_edges(bounds, bins)
    raw, _ = np.histogram(clipped, bins=edges)
    scale, part = laplace("histogram")
    parts.append(part)
    noisy = raw + rng.laplace(0.0, scale, size=bins)
    assert math.isclose(sum(share.values()), 1.0)
    return DPDescription(
        bounds=bounds, center=center, count=count, sum=total, sum_squares=total_sq,
        levels=QUANTILE_LEVELS, quantiles=quantiles.values, edges=tuple(edges.tolist()),
        histogram=tuple(float(v) for v in noisy), parts=tuple(parts), neighbouring=neighbouring,
        spent=PrivacySpent(sum(p.epsilon for p in parts)), resolution=resolution,
    )


def pool_descriptions(parts: Sequence[DPDescription]) -> DPDescription:
    """The description of the union of disjoint record sets (centers, arms) from theirs alone
    (post-processing: no further ε; each set's own ε is what was spent).

    Counts and histograms add; sums move to a common center c (the first's) exactly:
    Σ(x − c) = S_i + (c_i − c)·N_i and Σ(x − c)² = SS_i + 2(c_i − c)·S_i + (c_i − c)²·N_i,
    with N_i the noisy count. Quantiles are not pooled (the summary reads them from the summed
    histogram). Every part must share the bounds and the histogram's edges.
    """
    if not parts:
        raise ValueError("`parts` must hold at least one description")
    first = parts[0]
    if any(p.bounds != first.bounds or p.edges != first.edges for p in parts):
        raise ValueError("pooled descriptions must share their bounds and histogram edges")
    c = first.center
    count = sum(p.count for p in parts)
    total = sum(p.sum + (p.center - c) * p.count for p in parts)
    total_sq = sum(p.sum_squares + 2.0 * (p.center - c) * p.sum + (p.center - c) ** 2 * p.count
                   for p in parts)
    histogram = tuple(float(v) for v in np.sum([p.histogram for p in parts], axis=0))
    return DPDescription(
        bounds=first.bounds, center=c, count=count, sum=total, sum_squares=total_sq,
        levels=(), quantiles=None, edges=first.edges, histogram=histogram, parts=(),
        neighbouring=first.neighbouring,
        spent=PrivacySpent(max(p.spent.epsilon for p in parts)),
    )


def histogram_quantiles(edges: ArrayLike, counts: ArrayLike,
                        levels: Sequence[float]) -> tuple[float, ...]:
    """Quantiles of a histogram with the values spread evenly inside each bin: the level q's
    value is where the piecewise-linear CDF through (e_j, F_j) reaches q (the smallest such)."""
    e = np.asarray(edges, dtype=np.float64)
    c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    if e.shape != (c.size + 1,) or c.sum() <= 0:
        raise ValueError("a histogram needs one more edge than counts and a positive total")
    f = np.concatenate([[0.0], np.cumsum(c) / c.sum()])
    out = []
    for q in levels:
        j = int(np.searchsorted(f, q, side="left"))
        j = min(max(j, 1), c.size)
        lo, hi = f[j - 1], f[j]
        frac = 0.0 if hi <= lo else (q - lo) / (hi - lo)
        out.append(float(e[j - 1] + frac * (e[j] - e[j - 1])))
    return tuple(out)


def table_describe(table: BinTable, group: int = 0) -> Summary:
    """Row ``group`` of a K-anonymous bin table as a description, at no ε (post-processing of a
    K-anonymous release).

    * N: the row's total (a sum of counts each 0 or >= K);
    * mean and SD: the grouped-data estimators with every record at its bin's midpoint,
      mean = Σ n_j m_j / N, SD² = Σ n_j (m_j − mean)² / (N − 1) (no Sheppard correction);
      the extreme bins' midpoints use their finite limits (buffers or natural limits), so a
      table with an infinite extreme limit is refused;
    * Q1, median, Q3: interpolation with buffers (seed 001 §7; docs/methods.md), the table
      estimator ``shared.quantiles.interpolation_quantiles``;
    * histogram: the table's limits and the row's counts;
    * no minimum or maximum: the extreme limits are privacy buffers, not data values.
    """
    if not isinstance(table, BinTable):
        raise ValueError(f"`table` must be a shared.binning.BinTable, got {type(table).__name__}")
    group = check_int(group, "group", 0)
    if group >= table.n_groups:
        raise ValueError(f"`group` {group} is beyond the table's {table.n_groups} group(s)")
    limits = np.asarray(table.limits, dtype=np.float64)
    if not np.isfinite(limits).all():
        raise ValueError("the table has an infinite extreme limit: its extreme bins have no "
                         "midpoint; close it with buffers or natural limits")
    row = np.asarray(table.counts[group], dtype=np.float64)
    n = float(row.sum())
    if n <= 0:
        raise ValueError("the table's row is empty")
    mid = (limits[:-1] + limits[1:]) / 2.0
    mean = float((row * mid).sum() / n)
    sd = math.sqrt(float((row * (mid - mean) ** 2).sum() / (n - 1.0))) if n > 1 else None
    one = BinTable(limits=limits, counts=row[None, :], k=table.k)
    if row.size >= 2:
        q1, median, q3 = (float(v) for v in interpolation_quantiles(one, [0.25, 0.5, 0.75])
                          .quantiles)
    else:  # one bin: evenly spread between its limits
        q1, median, q3 = histogram_quantiles(limits, row, (0.25, 0.5, 0.75))
    return Summary(n=round(n), mean=mean, sd=sd, q1=q1, median=median, q3=q3, minimum=None,
                   maximum=None, edges=tuple(limits.tolist()),
                   counts=tuple(float(v) for v in row))
