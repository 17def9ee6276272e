"""The pooled DP boxplot across centers (docs/methods.md §6; our extension, no seed gives it).

Averaging per-center quantiles is wrong (datashield/dsBaseClient#25), so the pooled box is read
from one histogram of all centers' records. Each center stays ε-DP by sequential composition of
its three rounds; centers hold disjoint patients, so across centers the rounds compose in
parallel and every center spends ε once.

1. Round 1, each center: ψ_min and ψ_max by the unbounded walk, 3ε/16 each
   (:func:`center_extremes`): DPBoxplot's step 1, by default the one-sided walk (count target
   n − √n/20, exponential noise; ``extremes="algorithm_1"``: target n, Laplace noise), ε-DP
   under both relations (:mod:`shared.dp.unbounded`).
2. Coordinator: the pooled range R = [min ψ_min, max ψ_max] widened by 1.5·|R| each side (to
   hold Tukey's fences) and clamped to the public bounds, cut into a public grid of
   ``branching**depth`` equal leaves.
3. Round 2, each center: a hierarchical (b-ary tree) Laplace histogram on that grid, ε/2
   (:func:`tree_histogram`). Coordinator: the trees are summed, made consistent by Hay et al.'s
   constrained inference (2010, Theorem 3) and monotone, and the pooled quartiles read off by
   linear interpolation inside a leaf (:func:`tree_quantiles`). Any further level (by default
   0.05 and 0.95) is read off the same released tree the same way: post-processing, no ε.
4. Coordinator: the fences Q1 − 1.5·IQR, Q3 + 1.5·IQR and Tukey's whiskers, the most extreme
   records inside them, estimated from the same tree (:func:`tukey_whiskers`); n = the
   consistent root count.
5. Round 3, each center: Laplace counts below the lower fence and above the upper one (Tukey's
   outliers), ε/16 each
   (:func:`threshold_counts`); the coordinator sums the unrounded noisy counts, then rounds
   and floors the sum at 0 once.

Budget per center: 3/16 + 3/16 + 1/2 + 1/16 + 1/16 = 1 (times ε).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import isotonic_regression

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_int,
    check_levels,
    check_neighbouring,
)
from shared.dp._common import FloatArray
from shared.dp.boxplot import (
    BoxplotResult,
    Branch,
    check_extremes,
    extremes_sorted,
)
from shared.dp.uncertainty import tree_rank_halfwidth
from shared.fields import ExtremesWalk
from shared.privacy import Neighbouring, PrivacySpent

EXTREMES_SHARE = 3.0 / 16.0
HISTOGRAM_SHARE = 1.0 / 2.0
COUNT_SHARE = 1.0 / 16.0
QUARTILES = (0.25, 0.5, 0.75)
EXTRA_LEVELS = (0.05, 0.95)
"""The levels the pooled box reads off its tree besides the quartiles unless told."""


@dataclass(frozen=True)
class Extremes:
    """Round 1 of one center: DP minimum and maximum, and the budget they used."""

    psi_min: float
    psi_max: float
    spent: PrivacySpent


@dataclass(frozen=True)
class TreeHistogram:
    """Noisy counts of every node of a b-ary tree over a grid, root first (level 0 = 1 node).

    ``noise_scale`` is the Laplace scale of every node's noise.
    """

    levels: tuple[FloatArray, ...]
    branching: int
    noise_scale: float
    spent: PrivacySpent


@dataclass(frozen=True)
class ThresholdCounts:
    """Round 3 of one center: noisy #{x < lower} and #{x > upper}, as released (``*_noisy``:
    count + Laplace, neither rounded nor floored, which the coordinator sums) and shown
    (rounded and floored at 0). Summing the floored counts would bias the pooled count up by
    about b/2·e^{−c/b} per center (b the noise scale, c the true count): +15 to +46 on true
    counts of 2-22 at ε = 1 over three centers."""

    below: int
    above: int
    spent: PrivacySpent
    below_noisy: float
    above_noisy: float
    scale: float
    """Each count's Laplace scale (:func:`threshold_counts`)."""


def center_extremes(
    x: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    extremes: ExtremesWalk = "one_sided",
) -> Extremes:
    """ε-DP minimum and maximum of ``x`` by two unbounded walks (ε/2 each; Durfee 2023).

    Exactly DPBoxplot's step 1 (the walk's noise serves both relations; ``extremes`` as in
    :func:`shared.dp.boxplot.dp_boxplot`, default the one-sided walk); within the pooled
    protocol ``epsilon`` is 3ε/8 of the study's ε.
    """
    eps = check_epsilon(epsilon)
    a, b = check_bounds(bounds)
    check_neighbouring(neighbouring)
    rng = check_generator(rng)
    extremes = check_extremes(extremes)
    data = ascending(as_finite_1d(x, "x", allow_empty=True))
    psi_min, psi_max = extremes_sorted(data, eps / 2.0, (a, b), rng, extremes=extremes)
    return Extremes(psi_min, psi_max, PrivacySpent(eps))


def grid_edges(lo: float, hi: float, n_leaves: int) -> FloatArray:
    """The public grid: ``n_leaves`` equal leaves over [lo, hi]."""
    lo, hi = check_bounds((lo, hi), "grid")
    return np.linspace(lo, hi, n_leaves + 1)


def tree_histogram(
    x: ArrayLike,
    *,
    grid: tuple[float, float],
    depth: int,
    branching: int,
    epsilon: float,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> TreeHistogram:
    """ε-DP hierarchical histogram (Hay et al. 2010) of ``x`` on a public grid.

    The grid has ``branching**depth`` equal leaves over ``grid``; values outside it count in the
    nearest end leaf. Every record is in one node per level (depth + 1 levels), so one record
    moves the vector of all node counts by depth + 1 in L1 under add/remove and by 2(depth + 1)
    under swap; each node gets Laplace noise of scale sensitivity/ε.
    """
    eps = check_epsilon(epsilon)
    relation = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    depth = check_int(depth, "depth", 1)
    branching = check_int(branching, "branching", 2)
    n_leaves = branching**depth
    if n_leaves > 2**22:
        raise ValueError(f"`branching`**`depth` = {n_leaves} leaves is too many (max 2**22)")
    edges = grid_edges(grid[0], grid[1], n_leaves)
    exact = tree_counts(as_finite_1d(x, "x", allow_empty=True), edges, depth, branching)
    sensitivity = float(depth + 1) * (2.0 if relation == "swap" else 1.0)
    scale = sensitivity / eps
    noisy = tuple(level + rng.laplace(0.0, scale, size=level.size) for level in exact)
    return TreeHistogram(noisy, branching, scale, PrivacySpent(eps))


def tree_counts(
    data: FloatArray, edges: FloatArray, depth: int, branching: int
) -> list[FloatArray]:
    """Exact node counts, root first; values outside the grid count in the nearest end leaf."""
    leaf = np.searchsorted(edges[1:-1], data, side="left")
    levels = [np.bincount(leaf, minlength=branching**depth).astype(np.float64)]
    for _ in range(depth):
        levels.append(levels[-1].reshape(-1, branching).sum(axis=1))
    return levels[::-1]


def sum_trees(trees: Sequence[TreeHistogram]) -> TreeHistogram:
    """Node-wise sum of the centers' trees (the same grid); noise variances add."""
    if not trees:
        raise ValueError("`trees` must hold at least one center's tree")
    shapes = {tuple(level.size for level in t.levels) for t in trees}
    if len(shapes) != 1 or len({t.branching for t in trees}) != 1:
        raise ValueError("every center's tree must have the same grid (branching and depth)")
    levels = tuple(np.sum(nodes, axis=0) for nodes in zip(*(t.levels for t in trees), strict=True))
    scale = float(np.sqrt(np.sum([t.noise_scale**2 for t in trees])))
    spent = PrivacySpent(max(t.spent.epsilon for t in trees))  # parallel composition
    return TreeHistogram(levels, trees[0].branching, scale, spent)


def consistent_leaves(tree: TreeHistogram) -> FloatArray:
    """Least-squares consistent leaf counts (Hay et al. 2010, Theorem 3: two linear passes).

    Bottom-up, a node of height i (leaves: 1) gets
    z = (b^i − b^(i−1))/(b^i − 1)·h̃ + (b^(i−1) − 1)/(b^i − 1)·Σ z(children);
    top-down, h̄(root) = z(root) and h̄(v) = z(v) + (h̄(parent) − Σ z(siblings and v))/b.
    Valid for equal noise variance on every node, as :func:`tree_histogram` (and a sum of trees)
    gives.
    """
    b = tree.branching
    levels = [np.asarray(level, dtype=np.float64) for level in tree.levels]
    z = [lvl.copy() for lvl in levels]
    depth = len(levels) - 1
    for d in range(depth - 1, -1, -1):  # d: level index from the root; height i = depth - d + 1
        i = depth - d + 1
        child_sum = z[d + 1].reshape(-1, b).sum(axis=1)
        z[d] = ((b**i - b ** (i - 1)) * levels[d] + (b ** (i - 1) - 1) * child_sum) / (b**i - 1)
    h = z[0]
    for d in range(1, depth + 1):
        parent_gap = h - z[d].reshape(-1, b).sum(axis=1)
        h = z[d] + np.repeat(parent_gap / b, b)
    return h


@dataclass(frozen=True)
class TreeQuantiles:
    """Quantiles read off consistent leaf counts: ``values[i]`` is the ``levels[i]``-quantile;
    ``total`` the estimated number of records (the cumulative count at the last edge)."""

    levels: tuple[float, ...]
    values: tuple[float, ...]
    total: float

    def pairs(self) -> tuple[tuple[float, float], ...]:
        """((level, value), ...), in increasing level."""
        return tuple(zip(self.levels, self.values, strict=True))


def check_leaves_edges(leaves: ArrayLike, edges: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Consistent leaf counts and their grid's edges (one more, strictly increasing)."""
    leaves = as_finite_1d(leaves, "leaves")
    edges = as_finite_1d(edges, "edges")
    if edges.size != leaves.size + 1 or (np.diff(edges) <= 0).any():
        raise ValueError(
            f"`edges` must be {leaves.size + 1} strictly increasing numbers (one more than the "
            f"leaves), got {edges.size}"
        )
    return leaves, edges


def monotone_cumulative(leaves: FloatArray) -> tuple[FloatArray, float]:
    """(the cumulative count at every edge, total): the consistent leaves summed without
    clipping them (a noisy leaf set to 0 would bias every cumulative count after it: thousands
    of leaves, each slightly positive on average), made non-decreasing by isotonic regression
    and clipped to [0, total]. Linear between edges, it is the tree's estimate of
    C(v) = #{x <= v} (records spread evenly inside a leaf)."""
    raw = np.concatenate([[0.0], np.cumsum(leaves)])
    total = float(raw[-1])
    if total <= 0:
        raise ValueError("the histogram holds no records (after noise); nothing to read")
    return np.clip(isotonic_regression(raw).x, 0.0, total), total


def invert_cumulative(cumulative: FloatArray, edges: FloatArray, targets: ArrayLike,
                      side: Literal["left", "right"] = "left") -> FloatArray:
    """Where the piecewise-linear cumulative count reaches each target: ``side="left"`` the
    smallest v with C(v) >= target, ``"right"`` the largest v with C(v) <= target (the two
    differ only on a flat stretch at exactly the target), linearly interpolated inside the
    leaf holding it; targets outside [0, total] give the grid's ends."""
    targets = np.asarray(targets, dtype=np.float64)
    counts = np.diff(cumulative)
    j = np.clip(np.searchsorted(cumulative, targets, side=side), 1, counts.size)
    inside = counts[j - 1]
    frac = np.where(inside > 0, (targets - cumulative[j - 1]) / np.where(inside > 0, inside, 1), 0)
    return edges[j - 1] + np.clip(frac, 0.0, 1.0) * (edges[j] - edges[j - 1])


def tree_quantiles(leaves: ArrayLike, edges: ArrayLike, levels: Sequence[float]) -> TreeQuantiles:
    """Any levels read from consistent leaf counts (docs/methods.md §6.4).

    The cumulative count (:func:`monotone_cumulative`) is inverted at q·total: the q-quantile
    is the first point where it reaches q·total, linearly interpolated inside its leaf.

    Privacy: a function of the released (noisy) tree and the public grid only, so
    post-processing: reading more levels, or the same levels again, costs no ε.
    """
    qs = check_levels(levels)
    leaves, edges = check_leaves_edges(leaves, edges)
    cumulative, total = monotone_cumulative(leaves)
    values = invert_cumulative(cumulative, edges, np.asarray(qs) * total, "left")
    return TreeQuantiles(qs, tuple(float(v) for v in values), total)


@dataclass(frozen=True)
class TukeyWhiskers:
    """Tukey's whiskers read off a pooled tree: the fences Q1 − 1.5·IQR and Q3 + 1.5·IQR (kept
    inside the bounds: the records were clipped to them), and each whisker with its branch,
    ``"fence"`` (records reach the fence as far as the tree tells) or ``"record"`` (the tree
    shows the records ending inside the fence: the whisker is its estimate of the most extreme
    one)."""

    lower: float
    lower_branch: Branch
    upper: float
    upper_branch: Branch
    lower_fence: float
    upper_fence: float


def harmonic(k: float) -> float:
    """H_k = 1 + 1/2 + ... + 1/k at k = round(k) (1 for k < 1: μ is then 0 anyway)."""
    return float(np.sum(1.0 / np.arange(1, max(1, round(k)) + 1)))


def tukey_whiskers(
    leaves: ArrayLike,
    edges: ArrayLike,
    q1: float,
    q3: float,
    *,
    bounds: tuple[float, float],
    halfwidth: float,
) -> TukeyWhiskers:
    """DP estimates of Tukey's whiskers of the pooled records (docs/methods.md §6.5): the most
    extreme records inside the fences f_lo = Q1 − 1.5·IQR and f_hi = Q3 + 1.5·IQR.

    With C the tree's cumulative count (:func:`monotone_cumulative`) and h ``halfwidth`` (the
    count error, :func:`shared.dp.uncertainty.tree_rank_halfwidth`): of the M = C(f_hi) records
    at or below f_hi the largest is Tukey's upper whisker. The tree places it beyond e_h, the
    first point with C >= M − h (h of those records above it); the tail past e_h is taken as
    exponential with the mean excess μ = (e_h − e_2h)/ln 2 it shows between e_2h and e_h, and
    its most extreme record at e_h + μ·H_h, the mean of the largest of h such excesses
    (Rényi's representation; H_h the harmonic number). The upper whisker is the smaller of
    that and f_hi (branch ``"record"`` when it is inside the fence, else ``"fence"``), kept in
    [Q3, b]; the lower one mirrored, in [a, Q1]. When 2h >= M the tree tells nothing of that
    tail and the whisker is the fence. For tails lighter than exponential (normal, uniform)
    the extrapolation overshoots, towards the fence: the tree cannot see fewer than about h
    records, so where the fence falls among the last h records the whisker is the fence.

    Exact reference: with exact counts (no noise) and h = 0, e_0 = the first point where C
    reaches C(f_hi): Tukey's whisker up to its leaf, unless the fence's own leaf holds records
    only above the fence (a leaf's records are taken as evenly spread: the whisker is then the
    fence).

    Privacy: a function of the released tree, the quartiles read off it and public numbers:
    post-processing, no ε.
    """
    leaves, edges = check_leaves_edges(leaves, edges)
    a, b = check_bounds(bounds)
    if not (np.isfinite(q1) and np.isfinite(q3)) or q1 > q3:
        raise ValueError(f"`q1` and `q3` must be finite with q1 <= q3, got {q1!r}, {q3!r}")
    if not (np.isfinite(halfwidth) and halfwidth >= 0):
        raise ValueError(f"`halfwidth` must be finite and >= 0, got {halfwidth!r}")
    cumulative, total = monotone_cumulative(leaves)
    iqr = q3 - q1
    f_lo = min(max(q1 - 1.5 * iqr, a), b)
    f_hi = min(max(q3 + 1.5 * iqr, a), b)
    h = float(halfwidth)
    reach = harmonic(h) / np.log(2.0)
    # The records at or below f_hi: C truncated at C(f_hi); their largest is the whisker.
    inside_hi = float(np.interp(f_hi, edges, cumulative))
    end_hi = np.inf
    if 2.0 * h < inside_hi:
        e1, e2 = invert_cumulative(cumulative, edges, [inside_hi - h, inside_hi - 2.0 * h], "left")
        end_hi = float(e1 + (e1 - e2) * reach)
    # The records at or above f_lo (C(f_lo) below it); their smallest is the lower whisker.
    below_lo = float(np.interp(f_lo, edges, cumulative))
    end_lo = -np.inf
    if 2.0 * h < total - below_lo:
        e1, e2 = invert_cumulative(cumulative, edges, [below_lo + h, below_lo + 2.0 * h], "right")
        end_lo = float(e1 - (e2 - e1) * reach)
    tiny = 1e-9 * (edges[-1] - edges[0])  # an end on the fence (rounding) is the fence
    upper_branch: Branch = "record" if end_hi < f_hi - tiny else "fence"
    lower_branch: Branch = "record" if end_lo > f_lo + tiny else "fence"
    upper = min(max(f_hi if upper_branch == "fence" else end_hi, q3), b)
    lower = max(min(f_lo if lower_branch == "fence" else end_lo, q1), a)
    return TukeyWhiskers(lower, lower_branch, upper, upper_branch, f_lo, f_hi)


def pooled_quartiles(
    leaves: ArrayLike, edges: ArrayLike
) -> tuple[tuple[float, float, float], float]:
    """((Q1, median, Q3), total): :func:`tree_quantiles` at the quartiles."""
    read = tree_quantiles(leaves, edges, QUARTILES)
    q1, median, q3 = read.values
    return (q1, median, q3), read.total


def threshold_counts(
    x: ArrayLike,
    *,
    lower: float,
    upper: float,
    epsilon: float,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> ThresholdCounts:
    """ε-DP counts #{x < lower} and #{x > upper}: the noisy counts as they are (for the
    coordinator to sum) and rounded and floored at 0 (post-processing, for display).

    The two counted sets are disjoint (lower <= upper), so the pair's L1 sensitivity is 1 under
    add/remove (a record added or removed moves one count by 1) and 2 under swap (a record
    moved from below to above moves both): Laplace(Δ/ε) on each count is ε-DP (the Laplace
    mechanism on the vector, Dwork & Roth 2014, Thm 3.6; docs/privacy.md, guarantee 16's
    exact check). Under add/remove that is half the noise of ε/2 per count."""
    eps = check_epsilon(epsilon)
    check_neighbouring(neighbouring)
    rng = check_generator(rng)
    data = as_finite_1d(x, "x", allow_empty=True)
    if not (np.isfinite(lower) and np.isfinite(upper)) or lower > upper:
        raise ValueError(
            f"`lower` and `upper` must be finite with lower <= upper, got {lower!r}, {upper!r}"
        )
    below = int(np.count_nonzero(data < lower))
    above = int(np.count_nonzero(data > upper))
    scale = (2.0 if neighbouring == "swap" else 1.0) / eps
    noisy_below = below + float(rng.laplace(0.0, scale))
    noisy_above = above + float(rng.laplace(0.0, scale))
    return ThresholdCounts(floored(noisy_below), floored(noisy_above), PrivacySpent(eps),
                           noisy_below, noisy_above, scale)


def floored(count: float) -> int:
    """A noisy count as shown: rounded, at least 0 (post-processing)."""
    return max(0, round(count))


# -- the coordinator's half: arithmetic on released numbers only ----------------------------------


def pooled_range(
    extremes: Sequence[tuple[float, float]], bounds: tuple[float, float]
) -> tuple[float, float]:
    """The public grid's range from the centers' (ψ_min, ψ_max): [min ψ_min, max ψ_max] widened
    by 1.5 times its width W on each side, clamped to the bounds; the bounds themselves when
    every center's extremes coincide.

    Why widened: Tukey's fences lie 1.5·IQR beyond the quartiles, so within 1.5·W of
    [min ψ_min, max ψ_max] whenever that holds the box, and the whiskers are read off the grid
    (:func:`tukey_whiskers`); the walks' ψ often fall well inside the data (at 3ε/16 a walk
    may stop early), so the range alone would cut the tails off (records beyond it count in
    the end leaves)."""
    a, b = check_bounds(bounds)
    if not extremes:
        raise ValueError("`extremes` must hold at least one center's (psi_min, psi_max)")
    lo = max(a, min(e[0] for e in extremes))
    hi = min(b, max(e[1] for e in extremes))
    if not lo < hi:
        return (a, b)
    width = hi - lo
    return (max(a, lo - 1.5 * width), min(b, hi + 1.5 * width))


@dataclass(frozen=True)
class PooledWhiskers:
    """Round 2's outcome: pooled quartiles, the size they imply, Tukey's whiskers read off the
    tree, the fences round 3 counts beyond (kept inside the bounds), and the further
    ``levels`` read off the same tree as ((level, value), ...)."""

    q1: float
    median: float
    q3: float
    n: int
    lower: float
    lower_branch: Branch
    upper: float
    upper_branch: Branch
    levels: tuple[tuple[float, float], ...] = ()
    lower_fence: float = float("nan")
    upper_fence: float = float("nan")


def pooled_whiskers(
    trees: Sequence[TreeHistogram],
    *,
    grid: tuple[float, float],
    extremes: Sequence[tuple[float, float]],
    bounds: tuple[float, float],
    levels: Sequence[float] = EXTRA_LEVELS,
) -> PooledWhiskers:
    """Sum the centers' trees, make them consistent, read the quartiles, the fences and Tukey's
    whiskers (:func:`tukey_whiskers`, h the tree's rank half-width), and read ``levels``
    (none: ``()``) off the same consistent tree by the quartiles' interpolation
    (:func:`tree_quantiles`) — post-processing of round 2's releases, so they cost the centers
    nothing more. ``extremes`` (round 1) set the grid only; they are checked, not used."""
    extra = check_levels(levels) if len(levels) else ()
    if not extremes:
        raise ValueError("`extremes` must hold at least one center's (psi_min, psi_max)")
    total_tree = sum_trees(trees)
    leaves = consistent_leaves(total_tree)
    edges = grid_edges(grid[0], grid[1], leaves.size)
    (q1, med, q3), total = pooled_quartiles(leaves, edges)
    n = max(1, round(total))
    depth = len(total_tree.levels) - 1
    h = tree_rank_halfwidth([t.noise_scale for t in trees], total_tree.branching, depth)
    tw = tukey_whiskers(leaves, edges, q1, q3, bounds=bounds, halfwidth=h)
    read = tree_quantiles(leaves, edges, extra).pairs() if extra else ()
    return PooledWhiskers(q1, med, q3, n, tw.lower, tw.lower_branch, tw.upper, tw.upper_branch,
                          read, tw.lower_fence, tw.upper_fence)


def pooled_result(
    box: PooledWhiskers,
    counts: Sequence[tuple[float, float]],
    epsilon: float,
    extremes: ExtremesWalk = "one_sided",
) -> BoxplotResult:
    """The pooled box from round 3's per-center (below, above) noisy counts, summed once and
    then rounded and floored at 0 (:func:`floored`): the sum of unbiased noisy counts is
    unbiased, its noise a sum of Laplace; flooring each center's first would not be.
    ``extremes`` names the walk the centers ran in round 1 (:func:`center_extremes`'s default
    unless told)."""
    extremes = check_extremes(extremes)
    walk = "one-sided walk" if extremes == "one_sided" else "Algorithm 1's walk"
    return BoxplotResult(
        lower_outliers=floored(sum(c[0] for c in counts)),
        lower_whisker=box.lower,
        q1=box.q1,
        median=box.median,
        q3=box.q3,
        upper_whisker=box.upper,
        upper_outliers=floored(sum(c[1] for c in counts)),
        n=box.n,
        lower_branch=box.lower_branch,
        upper_branch=box.upper_branch,
        spent=PrivacySpent(epsilon),
        budget=(
            (
                f"minimum and maximum (unbounded, {walk})",
                PrivacySpent(2 * EXTREMES_SHARE * epsilon),
            ),
            ("tree histogram", PrivacySpent(HISTOGRAM_SHARE * epsilon)),
            ("outlier counts", PrivacySpent(2 * COUNT_SHARE * epsilon)),
        ),
        method="pooled_dp_boxplot",
    )


@dataclass(frozen=True)
class PooledBoxplot:
    """The pooled box, what each center spent (ε, by sequential composition of its rounds), the
    public grid, and the further levels read off the tree as ((level, value), ...) (no ε)."""

    box: BoxplotResult
    per_center_spent: tuple[PrivacySpent, ...]
    grid: tuple[float, float]
    levels: tuple[tuple[float, float], ...] = ()


def pooled_boxplot(
    centers: Sequence[ArrayLike],
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    depth: int = 6,
    branching: int = 4,
    extremes: ExtremesWalk = "one_sided",
    levels: Sequence[float] = EXTRA_LEVELS,
) -> PooledBoxplot:
    """The whole protocol (docs/methods.md §6) in-process: every center ε-DP, the pooled box.

    The coordinator's steps use only the released numbers; ``depth`` and ``branching`` set the
    public grid (default 4**6 = 4096 leaves over the pooled range); ``extremes`` is round 1's
    walk (:func:`center_extremes`); ``levels`` are read off the pooled tree besides the
    quartiles (post-processing: the centers release, and spend, exactly the same for any).
    """
    eps = check_epsilon(epsilon)
    a, b = check_bounds(bounds)
    relation = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    extra = check_levels(levels) if len(levels) else ()
    if not centers:
        raise ValueError("`centers` must hold at least one center's data")
    data = [as_finite_1d(x, f"centers[{i}]") for i, x in enumerate(centers)]
    ext = [
        center_extremes(
            x,
            epsilon=2 * EXTREMES_SHARE * eps,
            bounds=(a, b),
            neighbouring=relation,
            rng=rng,
            extremes=extremes,
        )
        for x in data
    ]
    pairs = [(e.psi_min, e.psi_max) for e in ext]
    lo, hi = pooled_range(pairs, (a, b))
    trees = [
        tree_histogram(x, grid=(lo, hi), depth=depth, branching=branching,
                       epsilon=HISTOGRAM_SHARE * eps, neighbouring=relation, rng=rng)
        for x in data
    ]
    box = pooled_whiskers(trees, grid=(lo, hi), extremes=pairs, bounds=(a, b), levels=extra)
    counts = [  # Tukey's outliers: beyond the fences
        threshold_counts(x, lower=box.lower_fence, upper=box.upper_fence,
                         epsilon=2 * COUNT_SHARE * eps,
                         neighbouring=relation, rng=rng)
        for x in data
    ]
    spent = tuple(
        e.spent + t.spent + c.spent for e, t, c in zip(ext, trees, counts, strict=True)
    )
    result = pooled_result(box, [(c.below_noisy, c.above_noisy) for c in counts], eps, extremes)
    return PooledBoxplot(result, spent, (lo, hi), box.levels)
