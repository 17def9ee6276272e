"""Kruskal-Wallis for k >= 2 arms: local, from a federated bin table, and across centers
(docs/methods.md §12.1).

With N records in k arms of n_1..n_k, mid-ranks r (ties share the mean of their ranks) and arm
rank sums R_i, let S_i = R_i − n_i·(N + 1)/2 (Σ S_i = 0). Under H0 (every assignment of the
records to arms of these sizes equally likely, given the ties) S has mean 0 and covariance

    Cov S = σ²·(diag(n) − n·nᵀ/N),   σ² = N(N + 1)/12 · C,   C = 1 − Σ_r (t_r³ − t_r)/(N³ − N),

(sampling without replacement from the N mid-ranks, whose variance is (N² − 1)/12·C; t_r the size
of the r-th tie group). The Kruskal-Wallis statistic (Kruskal & Wallis 1952) is the quadratic
form of S in a generalized inverse of that covariance,

    H = Σ_i S_i²/n_i / σ² = [12/(N(N + 1)) Σ_i R_i²/n_i − 3(N + 1)] / C,

referred to χ² with k − 1 degrees of freedom: ``scipy.stats.kruskal``. With k = 2, H = Z² where
Z = U/√V is the two-arm Mann-Whitney statistic of ``shared.mwu`` (S_2 = U/2).

**From a bin table** (:func:`table_test`): records in one bin are tied — bin b has t_b = Σ_i f_ib
records and mid-rank (records in bins before b) + (t_b + 1)/2 — so H is Kruskal-Wallis on the
data coarsened to their bins, the tie correction with t_r = t_b. Counts may be non-integer
(federation shares counts out proportionally). It is the conditional test of the coarsened data,
valid under H0 whatever the bins; the bins do not bias it either way, they only lose the order
inside a bin: H_table can be smaller or larger than H_raw on the same data, and the test's power
is that of the coarsened variable (lower the coarser the bins).

**Across centers** (stratified by center), each center releasing its KW result (S_c, n_c, σ²_c):

* ``sum_test``: S = Σ_c S_c with Cov = Σ_c Cov S_c; H_strat = Sᵀ Cov⁻ S ~ χ²_{k−1}. At k = 2 this
  is the square of the MWU sum test's Z (Σ U / √Σ V).
* ``weighted_test`` (van Elteren 1960, extended to k arms): S = Σ_c S_c/(N_c + 1), Cov =
  Σ_c Cov S_c/(N_c + 1)²: each center's ranks scaled to (0, 1) ("modified ridits"), so large
  centers do not dominate through their larger ranks; it is the Cochran-Mantel-Haenszel
  row-mean-scores statistic with modified-ridit scores (Landis, Heyman & Koch 1978). At k = 2
  without ties it is the square of the MWU weighted test's Z (whose weights n·m/V ∝ 1/(N + 1)).
* ``fisher_test``: T = −2 Σ_c log p_c ~ χ²_{2L} (Fisher 1932) on the centers' KW p-values.
* ``additive_test``: Σ_c H_c ~ χ²_{L(k−1)} (independent centers) — responds to differences
  between arms that vary in direction between centers, as Fisher's method does.

References: Kruskal WH, Wallis WA (1952) JASA 47:583-621. van Elteren PH (1960) Bull. Int. Stat.
Inst. 37:351-361. Landis JR, Heyman ER, Koch GG (1978) Int. Stat. Rev. 46:237-254.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from shared._validation import as_arms
from shared.binning import BinTable

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class KruskalResult:
    """One Kruskal-Wallis test: ``statistic`` H (tie-corrected), ``pvalue`` from χ²_{``df``}.

    ``rank_sums`` are S_i = R_i − n_i(N + 1)/2 per arm, ``sizes`` the n_i and ``rank_variance``
    σ² = N(N + 1)/12·C (C ``tie_correction``): the numbers a center releases for the
    stratified tests (Cov S = σ²·(diag(n) − n·nᵀ/N)). ``mean_ranks`` are R_i/n_i.
    """

    statistic: float
    pvalue: float
    df: int
    rank_sums: tuple[float, ...]
    sizes: tuple[float, ...]
    rank_variance: float
    tie_correction: float

    @property
    def n(self) -> float:
        return float(sum(self.sizes))

    @property
    def mean_ranks(self) -> tuple[float, ...]:
        half = (self.n + 1.0) / 2.0
        return tuple(s / k + half for s, k in zip(self.rank_sums, self.sizes, strict=True))

    @property
    def covariance(self) -> FloatArray:
        """Cov S under H0: σ²·(diag(n) − n·nᵀ/N)."""
        n = np.asarray(self.sizes, dtype=np.float64)
        return np.asarray(self.rank_variance * (np.diag(n) - np.outer(n, n) / n.sum()))


@dataclass(frozen=True)
class FederatedKruskalResult:
    """A test across centers: ``statistic`` (H, or Fisher's T), χ² law with ``df`` degrees of
    freedom, ``parts`` the centers' own results, ``method`` one of ``sum``, ``weighted``,
    ``fisher``, ``additive``."""

    method: str
    statistic: float
    pvalue: float
    df: int
    parts: tuple[KruskalResult, ...]


def _result(s: FloatArray, n: FloatArray, tie_sum: float) -> KruskalResult:
    """H from rank-sum deviations, sizes and Σ (t³ − t)."""
    big_n = float(n.sum())
    c = 1.0 - tie_sum / (big_n**3 - big_n) if big_n > 1 else 0.0
    sigma2 = big_n * (big_n + 1.0) / 12.0 * c
    # When every record is tied (C = 0) every S_i is 0: no evidence, H = 0.
    h = float(np.sum(s * s / n) / sigma2) if sigma2 > 1e-12 * big_n * big_n else 0.0
    df = int(n.size - 1)
    return KruskalResult(
        statistic=h, pvalue=float(stats.chi2.sf(h, df)), df=df,
        rank_sums=tuple(float(v) for v in s), sizes=tuple(float(v) for v in n),
        rank_variance=sigma2, tie_correction=c,
    )


def kruskal_wallis(*samples: ArrayLike) -> KruskalResult:
    """Kruskal-Wallis on raw per-arm data (a center's local test; the reference for the table).

    Equals ``scipy.stats.kruskal(*samples)``. Every arm must hold at least one finite value;
    at least two arms.
    """
    arms = as_arms(samples, "Kruskal-Wallis")
    pooled = np.concatenate(arms)
    ranks = stats.rankdata(pooled)  # mid-ranks
    _, t = np.unique(pooled, return_counts=True)
    n = np.array([a.size for a in arms], dtype=np.float64)
    bounds = np.cumsum(np.r_[0, n.astype(int)])
    r = np.array([ranks[bounds[i]:bounds[i + 1]].sum() for i in range(len(arms))])
    s = r - n * (pooled.size + 1.0) / 2.0
    tf = t.astype(np.float64)
    return _result(s, n, float(np.sum(tf**3 - tf)))


def table_counts(table: BinTable | ArrayLike, name: str = "table") -> FloatArray:
    """The (arms, bins) counts of a bin table, checked: finite, >= 0, every arm non-empty."""
    counts = table.counts if isinstance(table, BinTable) else table
    f = np.asarray(counts, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] < 2 or f.shape[1] < 1:
        raise ValueError(f"`{name}` must have counts of shape (arms >= 2, bins >= 1), "
                         f"got {f.shape}")
    if not np.isfinite(f).all() or np.any(f < 0):
        raise ValueError(f"`{name}`'s counts must be finite and >= 0")
    empty = np.nonzero(f.sum(axis=1) <= 0)[0]
    if empty.size:
        raise ValueError(f"`{name}`: arm {int(empty[0])} has no records; every arm needs some")
    return f


def table_test(table: BinTable | ArrayLike) -> KruskalResult:
    """Kruskal-Wallis on a federated bin table (rows arms, columns bins in increasing order):
    records in one bin are tied (module docstring). ``table`` is a :class:`BinTable` or its
    (arms, bins) counts."""
    f = table_counts(table)
    t = f.sum(axis=0)
    before = np.concatenate([[0.0], np.cumsum(t)[:-1]])
    midrank = before + (t + 1.0) / 2.0
    n = f.sum(axis=1)
    big_n = float(n.sum())
    s = f @ midrank - n * (big_n + 1.0) / 2.0
    return _result(s, n, float(np.sum(t**3 - t)))


def _centers(centers: Sequence[KruskalResult]) -> int:
    if len(centers) == 0:
        raise ValueError("`centers` must hold at least one center's result")
    k = len(centers[0].sizes)
    for i, c in enumerate(centers):
        if len(c.sizes) != k or len(c.rank_sums) != k:
            raise ValueError(f"center {i} has {len(c.sizes)} arms, center 0 has {k}: "
                             "every center must report the same arms")
        if not (np.isfinite(c.rank_sums).all() and np.isfinite(c.rank_variance)
                and c.rank_variance >= 0 and min(c.sizes) > 0):
            raise ValueError(f"center {i}'s result must be finite with every arm non-empty")
    return k


def _stratified(method: str, centers: Sequence[KruskalResult],
                weights: FloatArray) -> FederatedKruskalResult:
    k = _centers(centers)
    s = np.zeros(k)
    cov = np.zeros((k, k))
    for w, c in zip(weights, centers, strict=True):
        s += w * np.asarray(c.rank_sums)
        cov += w * w * c.covariance
    # Σ S_i = 0 and Cov's rows sum to 0: drop the last arm and invert the rest, the generalized
    # inverse's quadratic form (Cov has rank k − 1 when every center has all arms and not all
    # its records tied).
    sub, block = s[:-1], cov[:-1, :-1]
    scale = float(np.trace(block))
    if scale <= 0 or np.linalg.matrix_rank(block, tol=1e-12 * scale) < k - 1:
        h = 0.0  # every center entirely tied: no evidence either way
    else:
        h = float(sub @ np.linalg.solve(block, sub))
    df = k - 1
    return FederatedKruskalResult(method, h, float(stats.chi2.sf(h, df)), df, tuple(centers))


def sum_test(centers: Sequence[KruskalResult]) -> FederatedKruskalResult:
    """Stratified Kruskal-Wallis on summed rank-sum deviations: H = Sᵀ Cov⁻ S, S = Σ_c S_c,
    ~ χ²_{k−1}; at k = 2 the square of ``shared.mwu.sum_test``'s Z."""
    return _stratified("sum", centers, np.ones(len(centers)))


def weighted_test(centers: Sequence[KruskalResult]) -> FederatedKruskalResult:
    """Van Elteren's stratified test for k arms: center c's S_c weighted by 1/(N_c + 1),
    ~ χ²_{k−1}; at k = 2 without ties the square of ``shared.mwu.weighted_test``'s Z."""
    _centers(centers)
    return _stratified("weighted", centers, np.array([1.0 / (c.n + 1.0) for c in centers]))


def fisher_test(centers: Sequence[KruskalResult]) -> FederatedKruskalResult:
    """Fisher's method on the centers' KW p-values: T = −2 Σ log p_c ~ χ²_{2L}."""
    _centers(centers)
    logp = np.array([stats.chi2.logsf(c.statistic, c.df) for c in centers])
    t = float(-2.0 * logp.sum())
    df = 2 * len(centers)
    return FederatedKruskalResult("fisher", t, float(stats.chi2.sf(t, df)), df, tuple(centers))


def additive_test(centers: Sequence[KruskalResult]) -> FederatedKruskalResult:
    """Σ_c H_c ~ χ²_{Σ df_c} (the centers are independent under H0)."""
    _centers(centers)
    h = float(sum(c.statistic for c in centers))
    df = int(sum(c.df for c in centers))
    return FederatedKruskalResult("additive", h, float(stats.chi2.sf(h, df)), df,
                                  tuple(centers))
