"""Descriptive statistics of one variable ("Table 1"): ε-DP from a center's values, or read from a
K-anonymous bin table at no ε (docs/methods.md, "Descriptive statistics").

Two estimators, the analyst's choice:

* :func:`dp_describe` — one center's ε-DP description of its values clipped to public bounds
  [a, b]: a noisy count; JointExp quartiles; noisy sums of the values clipped to a *DP range*
  read off those quartiles and centred on its midpoint (mean and SD follow); a Laplace
  histogram whose every bin is split twice more into a small tree (pooled quartiles are read
  off its leaves). ε is split in fixed shares (:data:`EPSILON_SPLIT`) and the parts compose
  (basic composition, adaptively: the range is a function of the released quartiles). No
  minimum or maximum: JointExp cannot estimate extremes with loose bounds (Ramsay &
  Diaz-Rodriguez 2025, Lemma 1), and the unbounded walk estimates a near-extreme quantile, not
  the extreme. Descriptions of disjoint record sets (centers, arms) pool exactly by
  post-processing (:func:`pool_descriptions`).
* :func:`table_describe` — one row of a K-anonymous bin table: N is its total, mean and SD the
  grouped-data (midpoint) estimators, median and quartiles by interpolation with buffers
  (``shared.quantiles.interpolation_quantiles``), the histogram its counts. No minimum or maximum
  is released without ε: a table's extreme limits are buffers, not data values.

Every number comes with its uncertainty (:class:`Summary`): for DP, 95 % intervals of what the
exact data would give, from the known noise laws (post-processing: no ε); for a table, the exact
bounds its bins put on the mean and the quartiles.

Missing values: the described values are those present. A center that counts records per
variable (``missing = "per_variable"``) also gives :func:`dp_describe` the number of the
selection's records missing the variable; the count part then releases the pair (present,
missing) — two disjoint record sets, so under add/remove the pair's L1 sensitivity is the
count's, 1, and the missing count costs no more ε (docs/privacy.md, "DP mode"). Without it
(complete cases: the records missing a variable left the population) no missing count is
released.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

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
from shared.dp.pooled import tree_quantiles
from shared.dp.uncertainty import laplace_sum_halfwidth, rank_halfwidth
from shared.privacy import Neighbouring, PrivacySpent
from shared.quantiles import interpolation_quantiles

FloatArray = NDArray[np.float64]
Interval = tuple[float, float]

EPSILON_SPLIT: tuple[tuple[str, float], ...] = (
    ("count", 0.10),
    ("quantiles", 0.30),
    ("sum", 0.15),
    ("sum of squares", 0.25),
    ("histogram", 0.20),
)
"""How :func:`dp_describe` splits its ε, in the order the parts are computed (the shares sum to
1). The quartiles come first: the sums are clipped to a range read off them. The sum of squares
gets the largest Laplace share (its sensitivity, the range's squared half-width, dominates the
SD's error); the count enough that its noise moves the mean little once the sums are centred
near the data."""
QUANTILE_LEVELS: tuple[float, ...] = (0.25, 0.5, 0.75)
"""The levels of the one JointExp call: Q1, median, Q3."""
RANGE_IQRS = 8.0
"""The DP range the sums are clipped to: [Q1 − w·s, Q3 + w·s] ∩ [a, b], w = RANGE_IQRS,
s = max(IQR, RANGE_FLOOR·(b − a)), from the DP quartiles. Eight IQRs clip nothing of a normal
law and about 0.1 % of a log-normal of σ = 0.8 (a length of stay): 4 or 6 IQRs halve the noise
at n = 150 but bias the SD of such data enough that its interval covers 30 % or 83 % of the
time at n = 1000 (docs/methods.md §8.9)."""
RANGE_FLOOR = 0.01
"""The least IQR the range uses, as a fraction of the bounds' width (tied quartiles)."""
SPLITS = 4
"""Each histogram bin is split in SPLITS, and each of those in SPLITS again: a forest of
``bins`` trees of depth 2 (a record lies in 3 nodes)."""
DEPTH = 2
MAX_BINS = 200
"""The most histogram bins a description may ask for."""
LEVEL = 0.95
"""The level of every interval a summary states."""
DRAWS = 4000
"""Noise draws behind each simulated interval (post-processing with a fixed seed: the same
released numbers always give the same interval)."""


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
    """What a description shows: N, mean, SD, Q1/median/Q3, a histogram, and the uncertainty of
    each, at :data:`LEVEL`.

    ``None`` where the estimator admits no value: the mean below a noisy count of 1, the SD
    below 2 or where the noisy sums give a variance <= 0 ("not estimable", said in ``notes``).
    Intervals: for DP, of the number the exact data would give (the noise's uncertainty; the
    sampling error of the data is not in them), their method in ``uncertainty``; for a table,
    exact bounds. ``rank_halfwidth``: the quartiles' 95 % rank error in records (DP)."""

    n: int
    mean: float | None
    sd: float | None
    q1: float | None
    median: float | None
    q3: float | None
    edges: tuple[float, ...]
    counts: tuple[float, ...]
    n_interval: Interval | None = None
    mean_interval: Interval | None = None
    sd_interval: Interval | None = None
    q1_interval: Interval | None = None
    median_interval: Interval | None = None
    q3_interval: Interval | None = None
    rank_halfwidth: float | None = None
    clip: Interval | None = None
    uncertainty: str = ""
    notes: tuple[str, ...] = ()
    missing: int | None = None
    missing_interval: Interval | None = None


@dataclass(frozen=True)
class Components:
    """The noise of one released description as seen from a (pooled) description: its centre's
    offset δ from the pooled centre and the Laplace scales of its count, sum, sum of squares
    and histogram nodes. Pooled: S̃ = Σ(S̃_j + δ_j·ñ_j), Q̃ = Σ(Q̃_j + 2δ_j·S̃_j + δ_j²·ñ_j),
    so the noise of each is the same combination of the components' Laplace draws."""

    offset: float
    count: float
    sum: float
    sum_squares: float
    histogram: float


@dataclass(frozen=True)
class DPDescription:
    """One ε-DP description (:func:`dp_describe`) or several pooled (:func:`pool_descriptions`).

    The released numbers: ``count`` (noisy N), ``sum`` and ``sum_squares`` (noisy Σ(x − c) and
    Σ(x − c)² of the values clipped to ``clip`` about its midpoint ``center`` c), ``quantiles``
    at ``levels`` (JointExp; none for a pooled description), ``histogram`` (noisy counts on
    ``edges``) and ``subdivisions`` (its bins split SPLITS times, twice: the forest's lower
    levels), and the ``parts`` of the ε split. Everything else is computed from them.
    A description released before the DP range (``clip`` None) clipped its sums to the bounds
    and released no subdivisions; it is read the old way.
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
    clip: tuple[float, float] | None = None
    subdivisions: tuple[tuple[float, ...], ...] | None = None
    components: tuple[Components, ...] = field(default=())
    missing: float | None = None
    """The noisy count of the records missing the variable (the count part's Laplace, at the
    count's scale), or None where not released (complete cases, a release made before)."""

    def noise(self) -> tuple[Components, ...]:
        """The noise components (a single description's from its parts)."""
        if self.components:
            return self.components
        scale = {p.name: p.scale or 0.0 for p in self.parts}
        return (Components(0.0, scale.get("count", 0.0), scale.get("sum", 0.0),
                           scale.get("sum of squares", 0.0), scale.get("histogram", 0.0)),)

    def summary(self) -> Summary:
        """N, mean, SD, quartiles and histogram from the released numbers, each with its
        95 % interval (post-processing: no further privacy cost; docs/methods.md §8.9).

        N = max(0, round(count)), its interval count ± the Laplace (sum) half-width, floored
        at 0. Mean = c + sum/count clamped to the bounds; SD² = (sum_squares − sum²/count)/
        (count − 1); their intervals by the basic bootstrap of the known noise laws
        (:func:`_moment_intervals`). An SD² <= 0 is *not estimable* (None, said in ``notes``),
        never 0. Quartiles: JointExp's when released, with its rank error
        (``shared.dp.uncertainty.rank_halfwidth``); pooled, read off the consistent summed
        forest (:func:`_forest_leaves`) with the rank error its noise gives. The value
        intervals read the description's own forest at the levels q ± rank error / N.
        Histogram counts are the forest's consistent bin counts (the noisy ones without a
        forest), rounded and clamped at 0.
        """
        a, b = self.bounds
        n = self.count
        noise = self.noise()
        notes: list[str] = []
        t_n = (laplace_sum_halfwidth([c.count for c in noise], LEVEL)
               if all(c.count > 0 for c in noise) else 0.0)
        n_interval = (max(0.0, n - t_n), max(0.0, n + t_n))
        missing = missing_interval = None
        if self.missing is not None:  # the same noise law as the count's (one pair)
            missing = max(0, round(self.missing))
            missing_interval = (max(0.0, self.missing - t_n), max(0.0, self.missing + t_n))
        mean = sd = None
        mean_interval = sd_interval = None
        if n >= 1.0:
            mean = float(np.clip(self.center + self.sum / n, a, b))
        else:
            notes.append("mean not estimable: the noisy count is below 1")
        if n >= 2.0:
            var = (self.sum_squares - self.sum**2 / n) / (n - 1.0)
            h = (b - a) / 2.0
            var_max = h * h * n / (n - 1.0)
            if var > 0:
                sd = math.sqrt(min(var, var_max))
            else:
                notes.append("SD not estimable: the noisy sums give a variance <= 0 (the noise "
                             "is larger than the spread)")
            mean_interval, var_interval = _moment_intervals(self, noise)
            mean_interval = (float(np.clip(mean_interval[0], a, b)),
                             float(np.clip(mean_interval[1], a, b)))
            lo, hi = (min(max(v, 0.0), var_max) for v in var_interval)
            sd_interval = (math.sqrt(lo), math.sqrt(hi))
        else:
            notes.append("SD not estimable: the noisy count is below 2")
        leaves = self._leaves()
        if leaves is not None:
            counts = tuple(float(max(0.0, round(c))) for c in
                           leaves.reshape(len(self.histogram), -1).sum(axis=1))
        else:
            counts = tuple(float(max(0.0, round(c))) for c in self.histogram)
        quartiles, rank, intervals = self._quartiles(n, leaves, noise)
        q1 = median = q3 = None
        if quartiles is None:
            notes.append("quartiles not estimable: the noisy histogram holds no records")
        else:
            q1, median, q3 = quartiles
        clip = self.clip if self.clip is not None else (a, b)
        return Summary(
            n=max(0, round(n)), mean=mean, sd=sd, q1=q1, median=median, q3=q3,
            edges=self.edges, counts=counts, n_interval=n_interval,
            mean_interval=mean_interval, sd_interval=sd_interval, q1_interval=intervals[0],
            median_interval=intervals[1], q3_interval=intervals[2], rank_halfwidth=rank,
            clip=clip if self.components == () else None,
            uncertainty=DP_UNCERTAINTY, notes=tuple(notes), missing=missing,
            missing_interval=missing_interval)

    def _quartiles(self, n: float, leaves: FloatArray | None, noise: Sequence[Components]
                   ) -> tuple[tuple[float, float, float] | None, float | None,
                              list[Interval | None]]:
        """(Q1, median, Q3), their 95 % rank error in records, and their value intervals.

        JointExp's when released (its rank error, ``shared.dp.uncertainty.rank_halfwidth``,
        plus the forest's where the value interval is read); pooled, read off the consistent
        forest with the rank error its noise gives. Each value interval is the forest read at
        q ± rank error / ñ (the bounds where that passes 0 or 1), widened to hold the
        estimate and by a leaf's width each side (the reading spreads a leaf evenly). A
        release without a forest: the summed histogram's quartiles, no interval.
        """
        a, b = self.bounds
        levels = (0.25, 0.5, 0.75)
        none: list[Interval | None] = [None, None, None]
        if leaves is None:
            counts = [max(0.0, round(c)) for c in self.histogram]
            if self.quantiles is not None:
                by_level = dict(zip(self.levels, self.quantiles, strict=True))
                return (by_level[0.25], by_level[0.5], by_level[0.75]), None, none
            if sum(counts) <= 0:
                return None, None, none
            q1, q2, q3 = histogram_quantiles(self.edges, counts, levels)
            return (q1, q2, q3), None, none
        fine = _fine_edges(self.edges, leaves.size)
        bins = len(self.histogram)
        if self.quantiles is not None:
            by_level = dict(zip(self.levels, self.quantiles, strict=True))
            quartiles = (by_level[0.25], by_level[0.5], by_level[0.75])
            eps_q = next(p.epsilon for p in self.parts if p.name == "quantiles")
            joint = rank_halfwidth("joint_exp", self.levels, eps_q, self.neighbouring, LEVEL)
            rank = (joint or 0.0) + _forest_rank_halfwidth(bins, noise, leaves=leaves,
                                                           at=quartiles, fine=fine)
        else:
            try:
                q1, q2, q3 = tree_quantiles(leaves, fine, levels).values
            except ValueError:  # no records left after the noise
                return None, None, none
            quartiles = (q1, q2, q3)
            rank = _forest_rank_halfwidth(bins, noise, leaves=leaves, levels=levels)
        intervals = list(none)
        if n < 1 or float(np.sum(leaves)) <= 0:  # nothing to read value intervals from
            return quartiles, rank, intervals
        width = rank / n
        leaf = float(fine[1] - fine[0])  # the reading spreads a leaf's records evenly in it
        for i, q in enumerate(levels):
            lo_q, hi_q = q - width, q + width
            ends = sorted({min(max(lo_q, 1e-9), 1.0), min(max(hi_q, 1e-9), 1.0)})
            read = tree_quantiles(leaves, fine, ends).values
            intervals[i] = (max(a, min(read[0], quartiles[i]) - leaf) if lo_q > 0 else a,
                            min(b, max(read[-1], quartiles[i]) + leaf) if hi_q < 1 else b)
        return quartiles, rank, intervals

    def _leaves(self) -> FloatArray | None:
        """The forest's consistent leaf counts, or None for a description without one."""
        if self.subdivisions is None:
            return None
        levels = [np.asarray(self.histogram, dtype=np.float64),
                  *(np.asarray(s, dtype=np.float64) for s in self.subdivisions)]
        return forest_leaves(levels)


DP_UNCERTAINTY = (
    "95 % intervals of what the exact data would give (the DP noise only, not the sampling "
    "error): n, Laplace (sum) quantiles; mean and SD, basic bootstrap of the noise laws; "
    "quartiles, the exponential mechanism's (JointExp) or the summed histogram's rank error, "
    "read off the noisy histogram")
TABLE_UNCERTAINTY = (
    "exact bounds from the bins: the mean lies between the means with every record at its bin's "
    "lower and upper limit, each quartile in the bin holding its rank, the SD between the "
    "least and the largest SD of records placed anywhere in their bins")


def table_sd_bounds(limits: ArrayLike, counts: ArrayLike) -> Interval | None:
    """The least and the largest SD (divisor N − 1) of N records of which counts[j] lie
    somewhere in [limits[j], limits[j+1]] (docs/methods.md §8.9); None below N = 2.

    Least: min over c of Σ_j n_j·dist(c, bin j)² is the least of Σ (x_i − c)² jointly over the
    records and c (a convex problem: each record at the point of its bin nearest c); for c in
    bin i the bins left of it sit at their upper limits, those right at their lower ones, and
    the best c is their mean clipped to the bin — every bin tried, by prefix sums.
    Largest: the variance is convex in the records, so its maximum puts each at an end of its
    bin; with k_j of bin j's records at the lower end it is Q − S²/N, concave in k. Its maximum
    over real k_j in [0, n_j] (an upper bound on the integer one, within one record's move)
    sends to the lower end every bin whose midpoint lies below the mean, to the upper every
    bin above, and splits at most the bin holding the mean: every such split tried, the split
    count at its stationary point clipped to [0, n_j]."""
    lim = np.asarray(limits, dtype=np.float64)
    n_j = np.asarray(counts, dtype=np.float64)
    total = float(n_j.sum())
    if total < 2:
        return None
    lo, hi = lim[:-1], lim[1:]
    zero = np.zeros(1)
    # least: c in bin i; left bins j < i at hi_j, right bins j > i at lo_j
    nl = np.concatenate([zero, np.cumsum(n_j)[:-1]])
    sl = np.concatenate([zero, np.cumsum(n_j * hi)[:-1]])
    ql = np.concatenate([zero, np.cumsum(n_j * hi * hi)[:-1]])
    nr = np.concatenate([np.cumsum((n_j)[::-1])[::-1][1:], zero])
    sr = np.concatenate([np.cumsum((n_j * lo)[::-1])[::-1][1:], zero])
    qr = np.concatenate([np.cumsum((n_j * lo * lo)[::-1])[::-1][1:], zero])
    weight = nl + nr
    c = np.clip(np.divide(sl + sr, weight, out=(lo + hi) / 2, where=weight > 0), lo, hi)
    least = float(np.max([0.0, np.min(weight * c * c - 2 * (sl + sr) * c + ql + qr)]))
    # largest: bins before t at lo, after t at hi, bin t with k of its records at lo
    s_low = np.concatenate([zero, np.cumsum(n_j * lo)[:-1]])
    q_low = np.concatenate([zero, np.cumsum(n_j * lo * lo)[:-1]])
    s_high = np.cumsum((n_j * hi)[::-1])[::-1]  # bins t.. at hi
    q_high = np.cumsum((n_j * hi * hi)[::-1])[::-1]
    s0, q0 = s_low + s_high, q_low + q_high
    w = hi - lo
    k = np.clip(np.divide(s0 - total * (lo + hi) / 2, w, out=np.zeros_like(w), where=w > 0),
                0.0, n_j)
    s_k, q_k = s0 - k * w, q0 - k * (hi * hi - lo * lo)
    largest = float(np.max(q_k - s_k * s_k / total))
    return (math.sqrt(least / (total - 1.0)), math.sqrt(max(largest, least) / (total - 1.0)))


def _fine_edges(edges: ArrayLike, n_leaves: int) -> FloatArray:
    """Equal leaves inside each bin of ``edges``."""
    e = np.asarray(edges, dtype=np.float64)
    per = n_leaves // (e.size - 1)
    inner = e[:-1, None] + np.diff(e)[:, None] * (np.arange(per) / per)[None, :]
    return np.append(inner.ravel(), e[-1])


def forest_leaves(levels: Sequence[FloatArray]) -> FloatArray:
    """Least-squares consistent leaves of a forest of ``SPLITS``-ary trees whose roots are
    ``levels[0]`` (every node's noise of equal variance), batched over leading axes: Hay et al.
    (2010, Theorem 3) on each tree (as ``shared.dp.pooled.consistent_leaves``)."""
    s = SPLITS
    z = [np.asarray(v, dtype=np.float64) for v in levels]
    depth = len(z) - 1
    for d in range(depth - 1, -1, -1):
        i = depth - d + 1
        kids = z[d + 1].reshape(*z[d + 1].shape[:-1], -1, s).sum(axis=-1)
        z[d] = ((s**i - s ** (i - 1)) * z[d] + (s ** (i - 1) - 1) * kids) / (s**i - 1)
    h = z[0]
    for d in range(1, depth + 1):
        gap = h - z[d].reshape(*z[d].shape[:-1], -1, s).sum(axis=-1)
        h = z[d] + np.repeat(gap / s, s, axis=-1)
    return h


def _laplace_sum(rng: np.random.Generator, scales: Sequence[float], shape: tuple[int, ...]
                 ) -> list[FloatArray]:
    return [rng.laplace(0.0, b, size=shape) if b > 0 else np.zeros(shape) for b in scales]


def _moment_intervals(d: DPDescription, noise: Sequence[Components]
                      ) -> tuple[Interval, Interval]:
    """Basic-bootstrap 95 % intervals of the exact mean and variance: the released (ñ, S̃, Q̃)
    plus fresh draws of their noise laws give θ*, and the interval is
    [2θ̂ − q_97.5(θ*), 2θ̂ − q_2.5(θ*)] (Davison & Hinkley 1997, §5.2). Draws with a count
    below 2 give no value; more than 2.5 % of them: the bounds (mean) and [0, ∞) (variance)."""
    rng = np.random.default_rng(0)
    r = DRAWS
    ln = _laplace_sum(rng, [c.count for c in noise], (r,))
    ls = _laplace_sum(rng, [c.sum for c in noise], (r,))
    lq = _laplace_sum(rng, [c.sum_squares for c in noise], (r,))
    dn = np.sum(ln, axis=0)
    ds = np.sum([s + c.offset * n for c, s, n in zip(noise, ls, ln, strict=True)], axis=0)
    dq = np.sum([q + 2 * c.offset * s + c.offset**2 * n
                 for c, s, q, n in zip(noise, ls, lq, ln, strict=True)], axis=0)
    n, s, q = d.count + dn, d.sum + ds, d.sum_squares + dq
    ok = n >= 2.0
    a, b = d.bounds
    if ok.mean() < 1 - (1 - LEVEL) / 2:
        return (a, b), (0.0, math.inf)
    mean_hat = d.center + d.sum / d.count
    var_hat = (d.sum_squares - d.sum**2 / d.count) / (d.count - 1.0)
    n, s, q = n[ok], s[ok], q[ok]
    means = d.center + s / n
    variances = (q - s * s / n) / (n - 1.0)
    lo_p, hi_p = (1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100
    m_lo, m_hi = np.percentile(means, [lo_p, hi_p])
    v_lo, v_hi = np.percentile(variances, [lo_p, hi_p])
    return ((float(2 * mean_hat - m_hi), float(2 * mean_hat - m_lo)),
            (float(2 * var_hat - v_hi), float(2 * var_hat - v_lo)))


def _forest_rank_halfwidth(bins: int, noise: Sequence[Components], *, leaves: FloatArray,
                           levels: Sequence[float] = (), at: Sequence[float] = (),
                           fine: FloatArray | None = None) -> float:
    """The 95 % error, in records, of the cumulative count the consistent forest gives, the
    largest over the places read: where the estimate's cumulative count reaches each of
    ``levels`` (there the error is the count's less the level times the total's), or the leaf
    edges nearest the values ``at`` (on ``fine``). By simulation: every node's noise drawn
    from each component's Laplace scale, made consistent (a linear map) and summed up to the
    place read (400 draws, fixed seed)."""
    if not any(c.histogram > 0 for c in noise):
        return 0.0
    rng = np.random.default_rng(0)
    r = 400
    # k Laplace(b) summed is Gamma(k, b) − Gamma(k, b): one pair of draws per node and scale
    # (the centers' trees usually share one scale), however many descriptions are pooled.
    scales: dict[float, int] = {}
    for c in noise:
        if c.histogram > 0:
            scales[c.histogram] = scales.get(c.histogram, 0) + 1
    draws = [np.sum([rng.gamma(k, b, size=(r, bins * SPLITS**d))
                     - rng.gamma(k, b, size=(r, bins * SPLITS**d)) for b, k in scales.items()],
                    axis=0) for d in range(DEPTH + 1)]
    cum = np.concatenate([np.zeros((r, 1)), np.cumsum(forest_leaves(draws), axis=1)], axis=1)
    total = cum[:, -1]
    c_hat = np.concatenate([[0.0], np.cumsum(leaves)])
    worst = 0.0
    places = [(int(np.searchsorted(c_hat, q * c_hat[-1])), q) for q in levels]
    if fine is not None:
        places += [(int(np.searchsorted(fine, v)), c_hat[min(int(np.searchsorted(fine, v)),
                                                             c_hat.size - 1)]
                    / max(c_hat[-1], 1.0)) for v in at]
    for j, share in places:
        j = min(max(j, 0), c_hat.size - 1)
        err = cum[:, j] - share * total
        worst = max(worst, float(np.quantile(np.abs(err), LEVEL)))
    return worst


def _sensitivities(clip: tuple[float, float], neighbouring: Neighbouring,
                   with_missing: bool = False) -> dict[str, float]:
    """L1 sensitivity of each Laplace part for values clipped to ``clip`` = [L, U] about its
    midpoint, y ∈ [−h, h], h = (U − L)/2: count 1 (add/remove; under swap the count does not
    move, 1 is kept as an upper bound); with the missing count (``with_missing``) the pair
    (present, missing) of two disjoint sets: 1 under add/remove (a record added or removed is
    in one of them), 2 under swap (a record moved from one to the other); Σy h (add/remove) or
    2h (swap); Σy² h² (y² ∈ [0, h²] either way); the histogram forest 1 + DEPTH (add/remove: a
    record is in one node per level) or twice that (swap)."""
    lo, hi = clip
    h = (hi - lo) / 2.0
    swap = neighbouring == "swap"
    nodes = float(1 + DEPTH)
    return {"count": 2.0 if swap and with_missing else 1.0, "sum": 2.0 * h if swap else h,
            "sum of squares": h * h, "histogram": 2.0 * nodes if swap else nodes}


def dp_range(quartiles: Sequence[float], bounds: tuple[float, float]) -> tuple[float, float]:
    """The DP range the sums are clipped to (:data:`RANGE_IQRS`), from DP quartiles and the
    public bounds (post-processing)."""
    a, b = bounds
    q1, q3 = float(quartiles[0]), float(quartiles[-1])
    s = max(q3 - q1, RANGE_FLOOR * (b - a))
    lo, hi = max(a, q1 - RANGE_IQRS * s), min(b, q3 + RANGE_IQRS * s)
    return lo, hi


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
    missing: int | None = None,
) -> DPDescription:
    """An ε-DP description of ``x`` (one center's values of one variable, one arm).

    The values are clipped to the public ``bounds`` [a, b] and ε is split as
    :data:`EPSILON_SPLIT`, the parts computed in this order:

    * count: n + Laplace(1/ε_n); with ``missing`` (the selection's records missing the
      variable) also missing + Laplace(Δ/ε_n), one Laplace mechanism on the pair of disjoint
      counts, Δ = 1 (add/remove: so n's noise is unchanged and the missing count costs nothing
      more) or 2 (swap, both counts' scale);
    * quantiles: JointExp at :data:`QUANTILE_LEVELS` in one mechanism (Gillenwater, Joseph &
      Kulesza 2021; docs/methods.md §5.3) with ε_q; with a public ``resolution`` r, on the
      grid of r within the bounds (grid-aware JointExp, same ε);
    * the DP range [L, U] = :func:`dp_range` of those quartiles, c = (L + U)/2, h = (U − L)/2:
      a function of a released output, so it costs nothing more;
    * sum: Σ(clip(x, L, U) − c) + Laplace(Δ_s/ε_s), Δ_s = h (add/remove) or 2h (swap);
    * sum of squares: Σ(clip(x, L, U) − c)² + Laplace(h²/ε_ss);
    * histogram: ``bins`` equal-width bins over [a, b], each split in :data:`SPLITS` and
      again (a forest of depth :data:`DEPTH`); every node's count + Laplace(Δ_h/ε_h),
      Δ_h = 1 + DEPTH (add/remove) or twice that (swap).

    Centring the sums near the data, on a range as narrow as the data allow, is what keeps the
    SD estimable on skewed data far from the bounds' midpoint: the SD² is a difference of two
    noisy sums, and both its noise (h², h·|mean − c|) and the mean's (|mean − c|·noise of n)
    shrink with h and |mean − c|.

    **Guarantee**: ε-DP under ``neighbouring`` by sequential composition of the five parts
    (Dwork & Roth 2014, Thm 3.16, which holds for adaptively chosen mechanisms: the sums'
    clipping range is a function of the quantiles' output), each ε_i-DP for its sensitivity on
    the clipped values. JointExp's pruning makes it formally (ε, δ < e^-740)-DP
    (``shared.dp.joint_exp``). Assumed: ``bounds`` and ``bins`` are public.

    Any number of values, none included: on no value the count and sums are their noise, the
    quartiles JointExp's uniform ordered triple of [a, b], and the summary says what it cannot
    estimate (the mean below a noisy count of 1, the SD below 2).

    Parameters
    ----------
    x : the values present, finite; any number, none included.
    epsilon : the whole description's ε, > 0.
    bounds : public (a, b), a < b.
    bins : histogram bins, 1..MAX_BINS.
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.
    resolution : the variable's public recording resolution, or None.
    missing : how many of the selection's records miss the variable (>= 0), or None: no
        missing count released.
    """
    epsilon = check_epsilon(epsilon)
    if missing is not None:
        missing = check_int(missing, "missing", 0)
    bounds = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    bins = check_int(bins, "bins", 1)
    if bins > MAX_BINS:
        raise ValueError(f"`bins` must be at most {MAX_BINS}, got {bins}")
    data = ascending(as_finite_1d(x, "x", allow_empty=True))
    a, b = bounds
    clipped = np.clip(data, a, b)
    eps = {name: epsilon * s for name, s in EPSILON_SPLIT}
    parts: list[DescribePart] = []

    def laplace(name: str, sens: dict[str, float], value: FloatArray | float) -> FloatArray:
        scale = sens[name] / eps[name]
        parts.append(DescribePart(name, eps[name], "laplace", sens[name], scale))
        return np.asarray(value, dtype=np.float64) + rng.laplace(0.0, scale, np.shape(value))

    pair = missing is not None
    counts = [float(data.size), *([float(missing)] if missing is not None else [])]
    noisy_counts = laplace("count", _sensitivities(bounds, neighbouring, pair),
                           np.asarray(counts))
    count = float(noisy_counts[0])
    noisy_missing = float(noisy_counts[1]) if pair else None
    on_grid = {"resolution": resolution} if resolution is not None else {}
    quantiles = joint_exp(clipped, QUANTILE_LEVELS, epsilon=eps["quantiles"], bounds=bounds,
                          neighbouring=neighbouring, rng=rng, **on_grid)
    parts.append(DescribePart("quantiles", eps["quantiles"], "joint_exp",
                              joint_exp_sensitivity(QUANTILE_LEVELS, neighbouring), None))
    clip = dp_range(quantiles.values, bounds)
    center = (clip[0] + clip[1]) / 2.0
    sens = _sensitivities(clip, neighbouring)
    y = np.clip(clipped, clip[0], clip[1]) - center
    total = float(laplace("sum", sens, float(y.sum())))
    total_sq = float(laplace("sum of squares", sens, float((y * y).sum())))
    edges = histogram_edges(bounds, bins)
    leaves, _ = np.histogram(clipped, bins=_fine_edges(edges, bins * SPLITS**DEPTH))
    exact = [leaves.astype(np.float64)]
    for _ in range(DEPTH):
        exact.append(exact[-1].reshape(-1, SPLITS).sum(axis=1))
    scale = sens["histogram"] / eps["histogram"]
    parts.append(DescribePart("histogram", eps["histogram"], "laplace", sens["histogram"],
                              scale))
    noisy = [level + rng.laplace(0.0, scale, size=level.size) for level in exact[::-1]]
    assert math.isclose(sum(s for _, s in EPSILON_SPLIT), 1.0)
    return DPDescription(
        bounds=bounds, center=center, count=count, sum=total, sum_squares=total_sq,
        levels=QUANTILE_LEVELS, quantiles=quantiles.values, edges=tuple(edges.tolist()),
        histogram=tuple(float(v) for v in noisy[0]), parts=tuple(parts),
        neighbouring=neighbouring, spent=PrivacySpent(sum(p.epsilon for p in parts)),
        resolution=resolution, clip=clip,
        subdivisions=tuple(tuple(float(v) for v in level) for level in noisy[1:]),
        missing=noisy_missing,
    )


def pool_descriptions(parts: Sequence[DPDescription]) -> DPDescription:
    """The description of the union of disjoint record sets (centers, arms) from theirs alone
    (post-processing: no further ε; each set's own ε is what was spent).

    Counts, histograms and their subdivisions add; sums move to a common center c (the
    first's) exactly: Σ(x − c) = S_i + (c_i − c)·N_i and Σ(x − c)² = S²_i + 2(c_i − c)·S_i +
    (c_i − c)²·N_i, with N_i the noisy count (each set's values clipped to its own DP range).
    Quantiles are not pooled (the summary reads them off the summed forest). Every part must
    share the bounds and the histogram's edges; the subdivisions are kept only when every part
    has them.
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
    subdivisions = None
    if all(p.subdivisions is not None for p in parts):
        subdivisions = tuple(
            tuple(float(v) for v in np.sum([p.subdivisions[k] for p in parts], axis=0))  # type: ignore[index]
            for k in range(len(first.subdivisions)))  # type: ignore[arg-type]
    components = tuple(
        Components(comp.offset + (p.center - c), comp.count, comp.sum, comp.sum_squares,
                   comp.histogram)
        for p in parts for comp in p.noise())
    return DPDescription(
        bounds=first.bounds, center=c, count=count, sum=total, sum_squares=total_sq,
        levels=(), quantiles=None, edges=first.edges, histogram=histogram, parts=(),
        neighbouring=first.neighbouring,
        spent=PrivacySpent(max(p.spent.epsilon for p in parts)),
        subdivisions=subdivisions, components=components,
        missing=(None if any(p.missing is None for p in parts)
                 else sum(p.missing for p in parts if p.missing is not None)),
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


def _holding_bin(limits: FloatArray, row: FloatArray, q: float) -> Interval:
    """The limits of the bin(s) that hold the q-quantile of the row's records: every value of
    rank ⌈qN⌉ (and, at a bin's edge, ⌈qN⌉ + 1, which a mid-rank definition may use) lies
    between them."""
    n = row.sum()
    cum = np.cumsum(row)
    lo_rank = max(1.0, math.ceil(q * n - 1e-9))
    hi_rank = min(n, math.floor(q * n + 1e-9) + 1)
    j_lo = int(np.searchsorted(cum, lo_rank, side="left"))
    j_hi = int(np.searchsorted(cum, hi_rank, side="left"))
    return float(limits[j_lo]), float(limits[min(j_hi, row.size - 1) + 1])


TABLE_ACCURACY = 0.5
"""How close a table's bins must pin a point estimate for it to be shown, in units of the
least SD the bins allow (s_lo, :func:`table_sd_bounds`): the mean, the median and each quartile
are shown when every value their exact bounds allow lies within TABLE_ACCURACY·s_lo of the
estimate, the SD when every SD the bins allow lies within TABLE_ACCURACY·s_lo of it. Since the
data's own SD is at least s_lo, a shown mean or quartile is within half the data's SD of the
data's own, and a shown SD within half of it: worst cases, for any records the bins hold
(docs/methods.md, "Descriptive statistics", with the share printed by size). On K = 10 greedy
tables of normal data the rule keeps every estimate from about 150 records on (the SD of skewed
data needs more), and removes those of one to three bins, where a midpoint is not a measurement.
"""


def _estimable(estimate: float | None, bounds: Interval | None, scale: float) -> bool:
    """Whether ``bounds`` hold ``estimate`` within ``scale`` (both ways)."""
    if estimate is None or bounds is None or not scale > 0:
        return False
    return max(estimate - bounds[0], bounds[1] - estimate) <= scale


def table_describe(table: BinTable, group: int = 0, *,
                   accuracy: float | None = TABLE_ACCURACY) -> Summary:
    """Row ``group`` of a K-anonymous bin table as a description, at no ε (post-processing of a
    K-anonymous release).

    * N: the row's total (a sum of counts each 0 or >= K), exact;
    * mean and SD: the grouped-data estimators with every record at its bin's midpoint,
      mean = Σ n_j m_j / N, SD² = Σ n_j (m_j − mean)² / (N − 1) (no Sheppard correction);
      the extreme bins' midpoints use their finite limits (buffers or natural limits), so a
      table with an infinite extreme limit is refused. The mean's interval is exact: every
      record lies in its bin, so the mean lies between Σ n_j c_j / N and Σ n_j c_{j+1} / N
      (the lower- and upper-limit means; a natural limit bounds only when no value lies
      beyond it), the SD's likewise between the least and largest SD of records anywhere in
      their bins (:func:`table_sd_bounds`);
    * Q1, median, Q3: interpolation with buffers (seed 001 §7; docs/methods.md), the table
      estimator ``shared.quantiles.interpolation_quantiles``, each with the limits of the bin
      that holds its rank (exact bounds on the sample quantile);
    * histogram: the table's limits and the row's counts;
    * no minimum or maximum: the extreme limits are privacy buffers, not data values;
    * an estimate its bins cannot pin to ``accuracy`` (:data:`TABLE_ACCURACY`; None: every
      estimate kept) is None, "not estimable from the bins", said in ``notes``; its exact bounds
      stay, and are what the data say.
    """
    if accuracy is not None and not (isinstance(accuracy, (int, float)) and accuracy > 0):
        raise ValueError(f"`accuracy` must be a positive number or None, got {accuracy!r}")
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
    mean_interval = (float((row * limits[:-1]).sum() / n), float((row * limits[1:]).sum() / n))
    sd = math.sqrt(float((row * (mid - mean) ** 2).sum() / (n - 1.0))) if n > 1 else None
    one = BinTable(limits=limits, counts=row[None, :], k=table.k)
    if row.size >= 2:
        q1, median, q3 = (float(v) for v in interpolation_quantiles(one, [0.25, 0.5, 0.75])
                          .quantiles)
    else:  # one bin: evenly spread between its limits
        q1, median, q3 = histogram_quantiles(limits, row, (0.25, 0.5, 0.75))
    held = [_holding_bin(limits, row, q) for q in (0.25, 0.5, 0.75)]
    sd_interval = table_sd_bounds(limits, row)
    estimates: dict[str, float | None] = {"mean": mean, "sd": sd, "q1": q1, "median": median,
                                          "q3": q3}
    notes: list[str] = []
    if accuracy is not None:
        scale = accuracy * (sd_interval[0] if sd_interval is not None else 0.0)
        bounds = {"mean": mean_interval, "sd": sd_interval, "q1": held[0], "median": held[1],
                  "q3": held[2]}
        lost = [name for name, value in estimates.items()
                if value is not None and not _estimable(value, bounds[name], scale)]
        for name in lost:
            estimates[name] = None
        if lost:
            notes.append(f"{', '.join(NAMES[name] for name in lost)} not estimable from the "
                         f"bins: their exact bounds are wider than ± {accuracy:g} of the least "
                         "SD the bins allow (shown instead)")
    return Summary(n=round(n), mean=estimates["mean"], sd=estimates["sd"], q1=estimates["q1"],
                   median=estimates["median"], q3=estimates["q3"],
                   edges=tuple(limits.tolist()), counts=tuple(float(v) for v in row),
                   n_interval=(n, n), mean_interval=mean_interval,
                   sd_interval=sd_interval, q1_interval=held[0],
                   median_interval=held[1], q3_interval=held[2], uncertainty=TABLE_UNCERTAINTY,
                   notes=tuple(notes))


NAMES = {"mean": "mean", "sd": "SD", "q1": "Q1", "median": "median", "q3": "Q3"}
