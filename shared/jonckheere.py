"""Jonckheere-Terpstra test for ordered arms (docs/methods.md §12.2).

Arms 1..k in their hypothesised order. The statistic (Terpstra 1952; Jonckheere 1954) is the sum
of the pairwise Mann-Whitney counts over ordered pairs,

    J = Σ_{i<j} U_ij,   U_ij = #{(a, b): X_ia < X_jb} + ½·#{X_ia = X_jb},

so it can be assembled from pairwise two-arm statistics: with ``shared.mwu``'s
U^± = Σ sign(Y − X) of the pair (X = arm i, Y = arm j), U_ij = (U^± + n_i·n_j)/2. Under H0
(all N records exchangeable across arms), E J = (N² − Σ n_i²)/4 and, with t_r the sizes of the
tie groups of the pooled records (Lehmann 1975, §5.3; Hollander, Wolfe & Chicken 2014, §6.2),

    Var J = [N(N − 1)(2N + 5) − Σ n_i(n_i − 1)(2n_i + 5) − Σ t_r(t_r − 1)(2t_r + 5)]/72
          + [Σ n_i(n_i − 1)(n_i − 2)]·[Σ t_r(t_r − 1)(t_r − 2)] / [36·N(N − 1)(N − 2)]
          + [Σ n_i(n_i − 1)]·[Σ t_r(t_r − 1)] / [8·N(N − 1)],

which without ties is [N²(2N + 3) − Σ n_i²(2n_i + 3)]/72. Z = (J − E J)/√Var J ~ N(0, 1).

The tie correction needs the tie sizes of the pooled records of all arms, which pairwise MWU
releases do not carry: :func:`from_pairs` takes them when given and otherwise uses the no-ties
variance, which is larger than the tie-corrected one, so the test is then conservative.
From a bin table (:func:`table_test`) records in one bin are tied, t_r the bin's total.
Across centers (:func:`sum_test`): J = Σ_c J_c, Var = Σ_c Var J_c (stratified by center).

``alternative``: ``"increasing"`` (later arms larger: J large, p = P(Z >= z)),
``"decreasing"``, ``"two-sided"`` (twice the smaller tail).

References: Terpstra TJ (1952) Indag. Math. 14:327-333. Jonckheere AR (1954) Biometrika
41:133-145. Lehmann EL (1975) Nonparametrics: Statistical Methods Based on Ranks. Hollander M,
Wolfe DA, Chicken E (2014) Nonparametric Statistical Methods, 3rd ed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from shared._validation import as_arms, as_finite_1d, check_choice
from shared.binning import BinTable
from shared.kruskal import table_counts
from shared.mwu import MannWhitneyResult, mann_whitney

FloatArray = NDArray[np.float64]
TREND_ALTERNATIVES = ("increasing", "decreasing", "two-sided")


@dataclass(frozen=True)
class JonckheereResult:
    """``statistic`` J, its null ``mean`` and ``variance`` (tie-corrected when ``tie_corrected``),
    ``zstatistic`` = (J − mean)/√variance and the normal ``pvalue``."""

    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    sizes: tuple[float, ...]
    tie_corrected: bool


@dataclass(frozen=True)
class FederatedJonckheereResult:
    """J = Σ_c J_c with variance Σ_c Var J_c across centers (``parts``)."""

    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    parts: tuple[JonckheereResult, ...]


def null_moments(sizes: ArrayLike, tie_sizes: ArrayLike | None = None) -> tuple[float, float]:
    """(E J, Var J) under H0 for arm sizes n_i and the pooled tie sizes t_r (None: no ties)."""
    n = np.asarray(sizes, dtype=np.float64)
    big_n = float(n.sum())
    mean = (big_n**2 - float(np.sum(n * n))) / 4.0
    t = np.ones(1) if tie_sizes is None else np.asarray(tie_sizes, dtype=np.float64)
    if big_n < 3:
        # The formula's last terms divide by N(N − 1)(N − 2); with N <= 2 J takes one value.
        return mean, 0.0
    var = (big_n * (big_n - 1) * (2 * big_n + 5) - float(np.sum(n * (n - 1) * (2 * n + 5)))
           - float(np.sum(t * (t - 1) * (2 * t + 5)))) / 72.0
    var += (float(np.sum(n * (n - 1) * (n - 2))) * float(np.sum(t * (t - 1) * (t - 2)))
            / (36.0 * big_n * (big_n - 1) * (big_n - 2)))
    var += (float(np.sum(n * (n - 1))) * float(np.sum(t * (t - 1)))
            / (8.0 * big_n * (big_n - 1)))
    return mean, max(var, 0.0)


def _pvalue(z: float, alternative: str) -> float:
    if alternative == "increasing":
        return float(special.ndtr(-z))
    if alternative == "decreasing":
        return float(special.ndtr(z))
    return float(min(1.0, 2.0 * special.ndtr(-abs(z))))


def _finish(j: float, sizes: FloatArray, tie_sizes: FloatArray | None,
            alternative: str) -> JonckheereResult:
    mean, var = null_moments(sizes, tie_sizes)
    z = (j - mean) / np.sqrt(var) if var > 0 else 0.0
    return JonckheereResult(float(j), mean, var, float(z), _pvalue(float(z), alternative),
                            tuple(float(v) for v in sizes), tie_sizes is not None)


def jonckheere_terpstra(*samples: ArrayLike,
                        alternative: str = "increasing") -> JonckheereResult:
    """Jonckheere-Terpstra on raw per-arm data, arms in their hypothesised order; the variance
    is tie-corrected from the pooled data."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    arms = as_arms(samples, "Jonckheere-Terpstra")
    j = 0.0
    for a in range(len(arms)):
        for b in range(a + 1, len(arms)):
            u = mann_whitney(arms[a], arms[b], method="asymptotic").statistic
            j += (u + arms[a].size * arms[b].size) / 2.0
    _, t = np.unique(np.concatenate(arms), return_counts=True)
    sizes = np.array([a.size for a in arms], dtype=np.float64)
    return _finish(j, sizes, t.astype(np.float64), alternative)


def from_pairs(pairs: Mapping[tuple[int, int], MannWhitneyResult], *,
               tie_sizes: ArrayLike | None = None,
               alternative: str = "increasing") -> JonckheereResult:
    """J from pairwise two-arm results ``pairs[(i, j)]`` = ``mann_whitney(arm_i, arm_j)`` for
    every i < j (arms numbered 0..k−1): U_ij = (U^± + n_i·n_j)/2. ``tie_sizes``: the tie groups
    of the pooled records of all arms; None uses the no-ties variance (conservative with ties).
    Noisy pairwise releases are refused: their noise would need its own law here."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    if not pairs:
        raise ValueError("`pairs` must hold the pairwise results of at least two arms")
    k = 1 + max(max(p) for p in pairs)
    expected = {(a, b) for a in range(k) for b in range(a + 1, k)}
    if set(pairs) != expected:
        missing = sorted(expected - set(pairs))
        extra = sorted(set(pairs) - expected)
        raise ValueError(f"`pairs` must hold exactly the pairs (i, j), i < j, of arms 0..{k - 1}; "
                         f"missing {missing}, unexpected {extra}")
    sizes = np.zeros(k)
    j = 0.0
    for (a, b), r in pairs.items():
        if r.noise is not None or r.noise_variance:
            raise ValueError(f"pair {(a, b)} is a noisy release; J needs exact pairwise U's")
        for arm, size in ((a, r.n_x), (b, r.n_y)):
            if sizes[arm] and sizes[arm] != size:
                raise ValueError(f"arm {arm} has {int(sizes[arm])} records in one pair and "
                                 f"{size} in another")
            sizes[arm] = size
        j += (r.statistic + r.n_x * r.n_y) / 2.0
    t = None if tie_sizes is None else as_finite_1d(tie_sizes, "tie_sizes")
    if t is not None and not np.isclose(t.sum(), sizes.sum()):
        raise ValueError(f"`tie_sizes` must sum to the {int(sizes.sum())} pooled records, "
                         f"got {t.sum():g}")
    return _finish(j, sizes, t, alternative)


def table_test(table: BinTable | ArrayLike, *,
               alternative: str = "increasing") -> JonckheereResult:
    """J on a bin table (rows arms in order, columns bins in increasing order): records in one
    bin count ½ per pair, t_r = the bins' totals."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    f = table_counts(table)
    cum = np.cumsum(f, axis=1)
    below = np.concatenate([np.zeros((f.shape[0], 1)), cum[:, :-1]], axis=1)  # per arm, bins < b
    j = 0.0
    for a in range(f.shape[0]):
        for b in range(a + 1, f.shape[0]):
            # pairs (x in arm a, y in arm b) with y's bin above x's, plus ½ for the same bin
            j += float(np.dot(f[b], below[a]) + 0.5 * np.dot(f[b], f[a]))
    return _finish(j, f.sum(axis=1), f.sum(axis=0), alternative)


def sum_test(centers: Sequence[JonckheereResult], *,
             alternative: str = "increasing") -> FederatedJonckheereResult:
    """Stratified J: Σ_c J_c against Σ_c E J_c with variance Σ_c Var J_c."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    if not centers:
        raise ValueError("`centers` must hold at least one center's result")
    k = len(centers[0].sizes)
    if any(len(c.sizes) != k for c in centers):
        raise ValueError("every center must report the same arms")
    j = float(sum(c.statistic for c in centers))
    mean = float(sum(c.mean for c in centers))
    var = float(sum(c.variance for c in centers))
    z = (j - mean) / np.sqrt(var) if var > 0 else 0.0
    return FederatedJonckheereResult(j, mean, var, float(z), _pvalue(float(z), alternative),
                                     tuple(centers))
