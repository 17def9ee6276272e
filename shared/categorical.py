"""Tests on pooled counts: Pearson's χ², Fisher's exact 2×2, Cochran-Mantel-Haenszel across
centers, and n (%) with Wilson intervals (docs/methods.md §12.5).

* **Pearson χ²** on an r×c table: X² = Σ (O − E)²/E, E = row total × column total / N, referred
  to χ² with (r − 1)(c − 1) degrees of freedom; ``correction`` applies Yates's continuity
  correction to a 2×2 table (as ``scipy.stats.chi2_contingency``).
* **Fisher's exact test** on a 2×2 table: ``scipy.stats.fisher_exact`` (the conditional
  hypergeometric law; its statistic the sample odds ratio ad/bc).
* **Cochran-Mantel-Haenszel** on K 2×2 tables [[a, b], [c, d]] (one per center): with
  E a_k = (a+b)(a+c)/n and Var a_k = (a+b)(c+d)(a+c)(b+d)/(n²(n − 1)),

      M² = (|Σ a_k − Σ E a_k| − ½)² / Σ Var a_k  ~ χ²_1    (Mantel & Haenszel 1959;
                                                              ½ only with ``correction``
                                                              and |Σ a_k − Σ E a_k| >= ½);

  the common odds ratio OR_MH = Σ a_k d_k/n_k / Σ b_k c_k/n_k and the variance of its log
  (Robins, Breslow & Greenland 1986), with R_k = a_k d_k/n_k, S_k = b_k c_k/n_k,
  P_k = (a_k + d_k)/n_k, Q_k = (b_k + c_k)/n_k, R = Σ R_k, S = Σ S_k:

      Var log OR_MH = Σ P_k R_k/(2R²) + Σ (P_k S_k + Q_k R_k)/(2RS) + Σ Q_k S_k/(2S²).

  R's ``mantelhaen.test`` computes the same three numbers (its ``correct = TRUE`` subtracts ½
  only when |Σ a_k − Σ E a_k| >= ½, leaving a smaller deviation uncorrected; so do we).
* **Generalized CMH** (general association) on K r×c tables (Landis, Heyman & Koch 1978): with
  n_k the stratum's cells minus its last row and column (a vector), m_k = E n_k given the
  margins and V_k = n_k²/(n_k − 1)·(D_p − p pᵀ) ⊗ (D_q − q qᵀ) (p, q the stratum's row and
  column shares, without the last entries), Q = (Σ(n_k − m_k))ᵀ (Σ V_k)⁻¹ (Σ(n_k − m_k))
  ~ χ²_{(r−1)(c−1)}; for 2×2 tables it is M² without the correction.
* **CMH row mean scores** on K r×c tables with ordered columns (Landis, Heyman & Koch 1978):
  column scores a_j per stratum, row score sums f = n_k·a with E f = n_{i+}·ā and Cov f =
  n²/(n − 1)·v·(D_p − p pᵀ), v = Σ_j n_{+j}(a_j − ā)²/n; Q = (Σ(f − E f))ᵀ(Σ Cov)⁻(Σ(f − E f))
  ~ χ²_{r−1}. Scores ``"rank"`` (the stratum's mid-ranks: the stratified Kruskal-Wallis
  ``shared.kruskal.sum_test`` on the tables) or ``"modridit"`` (mid-rank/(n + 1): van Elteren's
  ``shared.kruskal.weighted_test``), or given numbers (the same in every stratum).
* **n (%)** per category with Wilson's (1927) score interval
  (p̂ + z²/(2n) ± z·√(p̂(1 − p̂)/n + z²/(4n²)))/(1 + z²/n): ``scipy.stats.binomtest(...)
  .proportion_ci(method="wilson")``.

References: Agresti A (2013) Categorical Data Analysis, 3rd ed., §3.2, §6.4. Mantel N, Haenszel W
(1959) J. Natl. Cancer Inst. 22:719-748. Robins J, Breslow N, Greenland S (1986) Biometrics
42:311-323. Landis JR, Heyman ER, Koch GG (1978) Int. Stat. Rev. 46:237-254. Wilson EB (1927)
JASA 22:209-212.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from shared._validation import Alternative, check_alternative, check_choice, check_open_unit

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson's X² (``statistic``), its χ²_{``df``} ``pvalue`` and the ``expected`` counts."""

    statistic: float
    pvalue: float
    df: int
    expected: FloatArray


@dataclass(frozen=True)
class FisherExactResult:
    """Fisher's exact 2×2 test: ``statistic`` the sample odds ratio ad/bc."""

    statistic: float
    pvalue: float


@dataclass(frozen=True)
class MantelHaenszelResult:
    """CMH 2×2×K: ``statistic`` M² (χ²_1), the Mantel-Haenszel common ``odds_ratio`` and its
    Robins-Breslow-Greenland ``level`` interval [``low``, ``high``] (``log_se`` the SE of
    log OR_MH)."""

    statistic: float
    pvalue: float
    df: int
    odds_ratio: float
    low: float
    high: float
    log_se: float
    level: float
    correction: bool


@dataclass(frozen=True)
class CategoryShare:
    """One category's ``count`` of ``n`` as a ``percent`` with its Wilson interval in percent."""

    count: float
    n: float
    percent: float
    low: float
    high: float
    level: float


def _counts(table: ArrayLike, name: str, ndim: int) -> FloatArray:
    f = np.asarray(table, dtype=np.float64)
    if f.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-dimensional, got shape {f.shape}")
    if not np.isfinite(f).all() or np.any(f < 0):
        raise ValueError(f"`{name}` must hold finite counts >= 0")
    return f


def pearson_chi2(table: ArrayLike, *, correction: bool = False) -> ChiSquareResult:
    """Pearson's χ² test of independence on an r×c table of counts (r, c >= 2, no empty row or
    column). Equals ``scipy.stats.chi2_contingency(table, correction=correction)``."""
    f = _counts(table, "table", 2)
    if min(f.shape) < 2:
        raise ValueError(f"`table` must be at least 2×2, got {f.shape[0]}×{f.shape[1]}")
    rows, cols = f.sum(axis=1), f.sum(axis=0)
    if np.any(rows == 0) or np.any(cols == 0):
        raise ValueError("`table` has an empty row or column: drop it (its expected counts "
                         "are 0)")
    expected = np.outer(rows, cols) / f.sum()
    df = (f.shape[0] - 1) * (f.shape[1] - 1)
    diff = np.abs(f - expected)
    if correction and df == 1:
        # Yates: move each |O − E| towards 0 by ½, never past it (scipy's rule).
        diff = np.maximum(diff - 0.5, 0.0)
    x2 = float(np.sum(diff * diff / expected))
    return ChiSquareResult(x2, float(stats.chi2.sf(x2, df)), df, expected)


def fisher_exact_2x2(table: ArrayLike, *,
                     alternative: Alternative = "two-sided") -> FisherExactResult:
    """Fisher's exact test on a 2×2 table of whole counts (``scipy.stats.fisher_exact``);
    ``alternative`` "greater" tests OR > 1."""
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    f = _counts(table, "table", 2)
    if f.shape != (2, 2):
        raise ValueError(f"`table` must be 2×2, got {f.shape[0]}×{f.shape[1]}")
    if not np.array_equal(f, np.round(f)):
        raise ValueError("Fisher's exact test needs whole counts")
    res = stats.fisher_exact(f.astype(np.int64), alternative=alternative)
    return FisherExactResult(float(res.statistic), float(res.pvalue))


def mantel_haenszel(tables: ArrayLike, *, correction: bool = True,
                    level: float = 0.95) -> MantelHaenszelResult:
    """Cochran-Mantel-Haenszel test and common odds ratio over K 2×2 tables (shape (K, 2, 2),
    one per center; module docstring). Strata with fewer than 2 records carry no information
    are dropped (R's ``mantelhaen.test`` refuses them; the other strata's statistic is the
    same)."""
    level = check_open_unit(level, "level")
    f = _counts(tables, "tables", 3)
    if f.shape[1:] != (2, 2) or f.shape[0] < 1:
        raise ValueError(f"`tables` must have shape (K, 2, 2), got {f.shape}")
    n = f.sum(axis=(1, 2))
    f, n = f[n >= 2], n[n >= 2]
    if f.shape[0] == 0:
        raise ValueError("every stratum holds fewer than 2 records")
    a, b, c, d = f[:, 0, 0], f[:, 0, 1], f[:, 1, 0], f[:, 1, 1]
    mean = (a + b) * (a + c) / n
    var = (a + b) * (c + d) * (a + c) * (b + d) / (n * n * (n - 1))
    if var.sum() <= 0:
        raise ValueError("every stratum has a constant row or column: M² is undefined")
    dev = abs(float(a.sum() - mean.sum()))
    # R's rule (mantelhaen.test: YATES <- if(correct && abs(DELTA) >= .5) .5 else 0): a
    # deviation under ½ is left as it is rather than clipped to 0, which would give p = 1. The
    # deviation is rational and often exactly ½; the slack keeps rounding in Σ E a_k from
    # moving it across the boundary.
    if correction and dev >= 0.5 - 1e-12 * float(n.sum()):
        dev = max(dev - 0.5, 0.0)
    m2 = dev * dev / float(var.sum())
    r_k, s_k = a * d / n, b * c / n
    p_k, q_k = (a + d) / n, (b + c) / n
    r, s = float(r_k.sum()), float(s_k.sum())
    z = float(special.ndtri(0.5 + level / 2.0))
    if r > 0 and s > 0:
        odds = r / s
        log_var = (float(np.sum(p_k * r_k)) / (2 * r * r)
                   + float(np.sum(p_k * s_k + q_k * r_k)) / (2 * r * s)
                   + float(np.sum(q_k * s_k)) / (2 * s * s))
        se = math.sqrt(log_var)
        low, high = odds * math.exp(-z * se), odds * math.exp(z * se)
    else:
        # Σ ad/n = 0 or Σ bc/n = 0: OR_MH is 0 or infinite and its log has no finite SE.
        odds = 0.0 if r == 0 and s > 0 else math.inf if s == 0 and r > 0 else math.nan
        se, low, high = math.inf, (0.0 if odds == 0.0 else math.nan), math.inf
        if odds == math.inf:
            low = math.nan
    return MantelHaenszelResult(m2, float(stats.chi2.sf(m2, 1)), 1, odds, low, high, se,
                                level, correction)


def generalized_cmh(tables: ArrayLike) -> ChiSquareResult:
    """The generalized CMH general-association statistic over K r×c tables (shape (K, r, c);
    module docstring); ``expected`` holds Σ_k m_k as an r×c table."""
    f = _counts(tables, "tables", 3)
    if f.shape[0] < 1 or min(f.shape[1:]) < 2:
        raise ValueError(f"`tables` must have shape (K, r >= 2, c >= 2), got {f.shape}")
    r, c = f.shape[1:]
    dev = np.zeros((r - 1) * (c - 1))
    cov = np.zeros((dev.size, dev.size))
    expected = np.zeros((r, c))
    for t in f:
        n = float(t.sum())
        if n < 2:
            continue
        p, q = t.sum(axis=1) / n, t.sum(axis=0) / n
        m = n * np.outer(p, q)
        expected += m
        dev += (t - m)[:-1, :-1].ravel()
        vp = np.diag(p[:-1]) - np.outer(p[:-1], p[:-1])
        vq = np.diag(q[:-1]) - np.outer(q[:-1], q[:-1])
        cov += n * n / (n - 1) * np.kron(vp, vq)
    df = dev.size
    try:
        stat = float(dev @ np.linalg.solve(cov, dev))
    except np.linalg.LinAlgError:
        raise ValueError("the pooled covariance is singular: a row or column is empty in "
                         "every stratum; drop it") from None
    return ChiSquareResult(stat, float(stats.chi2.sf(stat, df)), df, expected)


def cmh_mean_scores(
    tables: ArrayLike, scores: Literal["rank", "modridit"] | ArrayLike = "modridit"
) -> ChiSquareResult:
    """CMH row-mean-scores statistic over K r×c tables (shape (K, r, c), columns ordered;
    module docstring), df r − 1; ``expected`` holds Σ_k E f_k per row (shape (r,))."""
    f = _counts(tables, "tables", 3)
    if f.shape[0] < 1 or min(f.shape[1:]) < 2:
        raise ValueError(f"`tables` must have shape (K, r >= 2, c >= 2), got {f.shape}")
    r, c = f.shape[1:]
    fixed = None
    if isinstance(scores, str):
        check_choice(scores, "scores", ("rank", "modridit"))
    else:
        fixed = np.asarray(scores, dtype=np.float64)
        if fixed.shape != (c,) or not np.isfinite(fixed).all():
            raise ValueError(f"`scores` must be 'rank', 'modridit' or {c} finite numbers, one "
                             "per column")
    dev = np.zeros(r)
    cov = np.zeros((r, r))
    expected = np.zeros(r)
    for t in f:
        n = float(t.sum())
        if n < 2:
            continue
        cols, rows = t.sum(axis=0), t.sum(axis=1)
        if fixed is None:
            a = np.concatenate([[0.0], np.cumsum(cols)[:-1]]) + (cols + 1.0) / 2.0
            if scores == "modridit":
                a = a / (n + 1.0)
        else:
            a = fixed
        mean = float(cols @ a) / n
        v = float(cols @ (a - mean) ** 2) / n
        p = rows / n
        dev += t @ a - rows * mean
        expected += rows * mean
        cov += n * n / (n - 1.0) * v * (np.diag(p) - np.outer(p, p))
    sub, block = dev[:-1], cov[:-1, :-1]
    try:
        stat = float(sub @ np.linalg.solve(block, sub))
    except np.linalg.LinAlgError:
        raise ValueError("the pooled covariance is singular: a row is empty, or every record "
                         "shares one score, in every stratum") from None
    df = r - 1
    return ChiSquareResult(stat, float(stats.chi2.sf(stat, df)), df, expected)


def wilson_interval(count: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion count/n (module docstring), in [0, 1]."""
    level = check_open_unit(level, "level")
    if not (math.isfinite(count) and math.isfinite(n)) or n <= 0 or not 0 <= count <= n:
        raise ValueError(f"need 0 <= count <= n and n > 0, got count={count!r}, n={n!r}")
    z = float(special.ndtri(0.5 + level / 2.0))
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At count = 0 (n) the lower (upper) end is 0 (1) exactly; rounding would leave ~1e-16.
    low = 0.0 if count == 0 else max(0.0, centre - half)
    high = 1.0 if count == n else min(1.0, centre + half)
    return low, high


def category_shares(counts: ArrayLike, *, level: float = 0.95) -> tuple[CategoryShare, ...]:
    """n (%) with a Wilson interval for every category of one variable (``counts`` per
    category; n their total)."""
    f = _counts(counts, "counts", 1)
    total = float(f.sum())
    if f.size == 0 or total <= 0:
        raise ValueError("`counts` must hold at least one record")
    shares = []
    for k in f:
        low, high = wilson_interval(float(k), total, level=level)
        shares.append(CategoryShare(float(k), total, 100.0 * float(k) / total, 100.0 * low,
                                    100.0 * high, level))
    return tuple(shares)


# -- counts with additive DP noise (docs/methods.md §12.7) ------------------------------------


def noisy_share_interval(counts: ArrayLike, noise_variances: ArrayLike, index: int, *,
                         level: float = 0.95) -> tuple[float, float]:
    """The score interval for category ``index``'s share p of noisy ``counts`` (one per
    category, *unclamped*: they may be negative; each carrying independent zero-mean noise of
    variance ``noise_variances``), covering the share sampling and noise together: Wilson's
    (1927) score interval with the noise variance added to the score's variance.

    With Y_j = X_j + Z_j, T = Σ Y the noisy total and X ~ Multinomial(n, p), the score
    U(p) = Y_j − p·T = (X_j − n p) + (1 − p)·Z_j − p·Σ_{i≠j} Z_i has mean 0 and variance

        V(p) = n p(1 − p) + (1 − p)²·σ²_j + p²·Σ_{i≠j} σ²_i,

    so the interval is {p ∈ [0, 1] : U(p)² <= z² V(p)} with n estimated by max(T, 0): the
    roots of the quadratic (T² + z²n − z²(σ²_j + σ²_rest))p² − (2T Y_j + z²n − 2z²σ²_j)p +
    (Y_j² − z²σ²_j) <= 0, clamped to [0, 1]. Without noise it is Wilson's interval. The raw
    counts keep the score unbiased at a share near 0, where clamping them at 0 (or the Wald
    interval's p̂(1 − p̂) variance, 0 there) would not; the normal law of U is an
    approximation (the noise is two-sided geometric, its tails a little heavier). When the
    noise leaves the quadratic without a positive leading coefficient (T² + z²n <=
    z²Σσ²: the noise swamps the counts) every share is consistent with the data: [0, 1].
    Coverage by simulation: docs/methods.md §12.7."""
    level = check_open_unit(level, "level")
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size < 1 or not np.isfinite(c).all():
        raise ValueError("`counts` must be one finite count per category")
    v = np.asarray(noise_variances, dtype=np.float64)
    if v.shape != c.shape or not np.isfinite(v).all() or np.any(v < 0):
        raise ValueError("one finite noise variance >= 0 per count")
    if not 0 <= index < c.size:
        raise ValueError(f"`index` must lie in 0..{c.size - 1}")
    z2 = float(special.ndtri(0.5 + level / 2.0)) ** 2
    total, y = float(c.sum()), float(c[index])
    a, b = float(v[index]), float(v.sum() - v[index])
    n = max(total, 0.0)
    quad = total * total + z2 * n - z2 * (a + b)
    if quad <= 0:
        return 0.0, 1.0
    lin = 2.0 * total * y + z2 * n - 2.0 * z2 * a
    const = y * y - z2 * a
    disc = lin * lin - 4.0 * quad * const
    if disc < 0:  # no share makes the score small: Y_j far below 0 or above T (rare)
        edge = 0.0 if y < total / 2.0 else 1.0
        return edge, edge
    root = math.sqrt(disc)
    low, high = (lin - root) / (2.0 * quad), (lin + root) / (2.0 * quad)
    low, high = min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0)
    if a == 0 and b == 0 and 0 <= y <= total:  # exact counts: Wilson's ends at 0 and n
        low = 0.0 if y == 0 else low
        high = 1.0 if y == total else high
    return low, high


def pearson_noise_inflation(table: ArrayLike, noise_variances: ArrayLike) -> float:
    """δ = E[X²]/df under independence when each cell of ``table`` carries independent noise
    of variance ``noise_variances`` (same shape): to first order the noise adds
    Σ_ab σ²_ab (1 − p_a)(1 − q_b)/E_ab to E[X²] = df (the Pearson residual operator on a unit
    cell, (δ_ia − p_i)(δ_jb − q_j), has squared weighted norm (1 − p_a)(1 − q_b)/E_ab).
    X²/δ is referred to χ²_df (Rao & Scott 1981's first-order correction)."""
    f = _counts(table, "table", 2)
    v = np.broadcast_to(np.asarray(noise_variances, dtype=np.float64), f.shape)
    n = float(f.sum())
    p, q = f.sum(axis=1) / n, f.sum(axis=0) / n
    expected = n * np.outer(p, q)
    df = (f.shape[0] - 1) * (f.shape[1] - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        added = np.where(expected > 0, v * np.outer(1 - p, 1 - q) / expected, 0.0)
    return 1.0 + float(added.sum()) / df


def cmh_noise_inflation(tables: ArrayLike, noise_variances: ArrayLike) -> float:
    """δ = E[Q]/df for the generalized CMH statistic (:func:`generalized_cmh`) when each cell
    of each stratum carries independent noise of variance ``noise_variances`` (same shape):
    the noise adds Cov_noise = Σ_k Σ_ab σ²_kab r_kab r_kabᵀ to the deviations (r_kab the
    stratum's residual of a unit cell, its last row and column dropped), so E[Q] ≈ df +
    tr(V⁻¹ Cov_noise). Q/δ is referred to χ²_df (first-order correction, as for X²)."""
    f = _counts(tables, "tables", 3)
    v = np.broadcast_to(np.asarray(noise_variances, dtype=np.float64), f.shape)
    r, c = f.shape[1:]
    size = (r - 1) * (c - 1)
    cov = np.zeros((size, size))
    noise = np.zeros((size, size))
    for t, var in zip(f, v, strict=True):
        n = float(t.sum())
        if n < 2:
            continue
        p, q = t.sum(axis=1) / n, t.sum(axis=0) / n
        vp = np.diag(p[:-1]) - np.outer(p[:-1], p[:-1])
        vq = np.diag(q[:-1]) - np.outer(q[:-1], q[:-1])
        cov += n * n / (n - 1) * np.kron(vp, vq)
        for a in range(r):
            for b in range(c):
                if var[a, b] > 0:
                    res = np.outer(np.eye(r)[a] - p, np.eye(c)[b] - q)[:-1, :-1].ravel()
                    noise += var[a, b] * np.outer(res, res)
    try:
        added = float(np.trace(np.linalg.solve(cov, noise)))
    except np.linalg.LinAlgError:
        raise ValueError("the pooled covariance is singular: a row or column is empty in "
                         "every stratum; drop it") from None
    return 1.0 + added / size
