"""Mann-Whitney U: the local statistic and four federated tests (seed 001 §6; NOTES §2b).

Convention (seed 001): U = Σ_i Σ_j sign(Y_j − X_i), so U > 0 when Y tends to exceed X.
Under H0, E[U] = 0 and

    Var U = n·m·(N + 1)/3 · [1 − Σ_r (t_r³ − t_r) / (N(N² − 1))],

t_r the size of the r-th tie group, N = n + m. Z = U/√Var (normal approximation, no continuity
correction). U relates to scipy's statistic for ``x`` by U = n·m − 2·U_x.

``alternative`` has scipy's meaning for the pair (x, y): ``"less"`` — X is stochastically smaller
than Y (U large, p = P(Z ≥ z)); ``"greater"`` — X is larger (p = P(Z ≤ z)); ``"two-sided"`` —
twice the smaller tail.

Federated tests on released numbers only, each center releasing (U_l, V_l, n_l, m_l):

* sum: Z = Σ U_l / √(Σ V_l);
* weighted: Z_w = Σ w_l Z_l / √(Σ w_l²), w_l = n_l·m_l/√V_l, the weights that maximize power
  under a common P(Y > X) − P(Y < X) (seed 001 appendix);
* Fisher: T = −2 Σ log p_l ~ χ²_{2L} on one-sided center p-values; two-sided: the test is run in
  both directions and the smaller p doubled (Bonferroni over the two directions);
* table: U on the federated bin table, records in one bin tied (t_r = fx_r + fy_r, non-integer
  counts allowed).

Noisy releases (issue 4): a center may release U_l + w_l with w_l drawn from a noise mechanism of
variance σ_l². Under H0, Var(U_l + w_l) = V_l + σ_l², so every federated test uses the inflated
variance V_l + σ_l² in place of V_l (the sum's denominator, the weights and the Z_l of the weighted
test, the center p-values of Fisher's method) and keeps its level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from shared import _greedy
from shared._sorting import ascending
from shared._validation import as_finite_1d, check_alternative, check_generator
from shared.binning import BinTable
from shared.mechanisms import Mechanism

Alternative = Literal["two-sided", "less", "greater"]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class MannWhitneyResult:
    """Local test: ``statistic`` is U = Σ sign(Y − X); ``zstatistic`` = U/√``variance``.

    A noisy release has ``statistic`` = U + w, ``variance`` = V (U's null variance) and
    ``noise_variance`` = σ² = Var w; then ``zstatistic`` = (U + w)/√(V + σ²).
    """

    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    n_x: int
    n_y: int
    noise_variance: float = 0.0

    @property
    def total_variance(self) -> float:
        """Null variance of the released statistic: V + σ²."""
        return self.variance + self.noise_variance


@dataclass(frozen=True)
class CenterPart:
    """One center's share of a federated test."""

    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    weight: float


@dataclass(frozen=True)
class FederatedMWUResult:
    """A federated test: ``statistic`` is its Z (or Fisher's T), ``parts`` one per center."""

    method: str
    statistic: float
    pvalue: float
    parts: tuple[CenterPart, ...]


def _z_pvalue(z: FloatArray | float, alternative: str) -> FloatArray:
    z = np.asarray(z, dtype=np.float64)
    if alternative == "less":
        return np.asarray(special.ndtr(-z))
    if alternative == "greater":
        return np.asarray(special.ndtr(z))
    return np.asarray(np.minimum(1.0, 2.0 * special.ndtr(-np.abs(z))))


def _z(statistic: FloatArray, variance: FloatArray) -> FloatArray:
    """U/√V, and 0 where V = 0 (all values tied: U = 0 and there is no evidence either way)."""
    safe = np.where(variance > 0, variance, 1.0)
    return np.where(variance > 0, statistic / np.sqrt(safe), 0.0)


def tie_variance(n: float, m: float, tie_sizes: FloatArray) -> float:
    """Null variance of U with the tie correction (seed 001 §6.1)."""
    big_n = n + m
    if big_n < 2:
        return 0.0
    ties = float(np.sum(tie_sizes**3 - tie_sizes))
    return n * m * (big_n + 1) / 3.0 * (1.0 - ties / (big_n * (big_n * big_n - 1)))


def mann_whitney(
    x: ArrayLike,
    y: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    noise: Mechanism | None = None,
    rng: np.random.Generator | None = None,
) -> MannWhitneyResult:
    """Local Mann-Whitney test of one center, U = Σ_i Σ_j sign(Y_j − X_i).

    Matches ``scipy.stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False)`` with
    U = n·m − 2·U_x. O(N log N): two sorts and a merge, no per-observation Python work.

    With ``noise`` (a one-dimensional mechanism, drawn from ``rng``) the release is U + w and the
    local Z and p-value use V + Var w, where V is the no-ties null variance n·m·(N + 1)/3 (a
    function of the sizes only, so the release carries nothing of the data but U + w). For a DP
    release calibrate the mechanism to U's sensitivity under ``swap`` (n, m public): one record
    moves U by at most 2·max(n, m).
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    if noise is not None:
        if rng is None:
            raise ValueError("`rng` (a numpy.random.Generator) is required when `noise` is given")
        check_generator(rng)
        if noise.dim != 1:
            raise ValueError(f"`noise` must be one-dimensional, got dim {noise.dim}")
    xa = as_finite_1d(x, "x")
    ya = as_finite_1d(y, "y")
    _, cum = _greedy.pooled_cuts([ascending(xa), ascending(ya)])
    cx = np.diff(cum[0]).astype(np.float64)
    cy = np.diff(cum[1]).astype(np.float64)
    # Pairs (X at value v, Y above v) count +1, (X at v, Y below v) count −1.
    y_below = cum[1, :-1].astype(np.float64)
    y_above = ya.size - y_below - cy
    u = float(np.dot(cx, y_above - y_below))
    noise_var = 0.0
    if noise is not None and rng is not None:
        u += float(noise.sample(rng, 1)[0])
        noise_var = float(noise.variance)
        # The tie-corrected V moves when one record moves (with ties), so released beside a noisy
        # U it would carry the data past the noise: a noisy release states the no-ties V, a
        # function of n and m alone. With ties U's true null variance is smaller: conservative.
        var = tie_variance(xa.size, ya.size, np.zeros(0))
    else:
        var = tie_variance(xa.size, ya.size, cx + cy)
    return released_result(u, var, int(xa.size), int(ya.size), noise_var, alternative)


def released_result(
    statistic: float,
    variance: float,
    n_x: int,
    n_y: int,
    noise_variance: float = 0.0,
    alternative: Alternative = "two-sided",
) -> MannWhitneyResult:
    """A local result from released numbers: Z = statistic/√(V + σ²) and its p-value."""
    z = float(_z(np.asarray(statistic), np.asarray(variance + noise_variance)))
    return MannWhitneyResult(
        statistic=statistic,
        variance=variance,
        zstatistic=z,
        pvalue=float(_z_pvalue(z, alternative)),
        n_x=n_x,
        n_y=n_y,
        noise_variance=noise_variance,
    )


def _parts(
    centers: Sequence[MannWhitneyResult],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    if len(centers) == 0:
        raise ValueError("`centers` must hold at least one center's release")
    u = np.array([c.statistic for c in centers], dtype=np.float64)
    # noisy releases: Var(U_l + w_l) = V_l + σ_l² replaces V_l everywhere downstream
    v = np.array([c.variance + c.noise_variance for c in centers], dtype=np.float64)
    n = np.array([c.n_x for c in centers], dtype=np.float64)
    m = np.array([c.n_y for c in centers], dtype=np.float64)
    if not (np.isfinite(u).all() and np.isfinite(v).all()) or np.any(v < 0):
        raise ValueError("every center's statistic and variance must be finite, variance >= 0")
    if any(c.noise_variance < 0 for c in centers):
        raise ValueError("every center's noise variance must be >= 0")
    return u, v, n, m


def _result(
    method: str,
    statistic: float,
    pvalue: float,
    u: FloatArray,
    v: FloatArray,
    w: FloatArray,
    alternative: str,
) -> FederatedMWUResult:
    z = _z(u, v)
    p = _z_pvalue(z, alternative)
    parts = tuple(
        CenterPart(float(a), float(b), float(c), float(d), float(e))
        for a, b, c, d, e in zip(u, v, z, p, w, strict=True)
    )
    return FederatedMWUResult(method, float(statistic), float(pvalue), parts)


def sum_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Sum test: Z = Σ U_l / √(Σ V_l)."""
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    u, v, _, _ = _parts(centers)
    z = float(_z(np.asarray(u.sum()), np.asarray(v.sum())))
    return _result("sum", z, float(_z_pvalue(z, alternative)), u, v, np.ones_like(u), alternative)


def weighted_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Weighted test: Z_w = Σ w_l Z_l / √(Σ w_l²) with w_l = n_l·m_l/√V_l.

    Centers with V_l = 0 (all values tied) carry no information and get weight 0.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    u, v, n, m = _parts(centers)
    w = np.where(v > 0, n * m / np.sqrt(np.where(v > 0, v, 1.0)), 0.0)
    norm = float(np.sqrt(np.sum(w * w)))
    z = float(np.dot(w, _z(u, v)) / norm) if norm > 0 else 0.0
    return _result("weighted", z, float(_z_pvalue(z, alternative)), u, v, w, alternative)


def fisher_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Fisher's method: T = −2 Σ log p_l ~ χ²_{2L} on one-sided center p-values.

    Two-sided: T in both directions, p = min(1, 2·min(p_less, p_greater)); the reported
    statistic is the T of the more significant direction.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    u, v, _, _ = _parts(centers)
    z = _z(u, v)
    dof = 2 * u.size

    def combine(direction: str) -> tuple[float, float]:
        # log p from the log-CDF keeps far tails finite.
        logp = special.log_ndtr(-z) if direction == "less" else special.log_ndtr(z)
        t = float(-2.0 * np.sum(logp))
        return t, float(stats.chi2.sf(t, dof))

    if alternative == "two-sided":
        (t_lo, p_lo), (t_hi, p_hi) = combine("less"), combine("greater")
        t, p = (t_lo, p_lo) if p_lo <= p_hi else (t_hi, p_hi)
        p = min(1.0, 2.0 * p)
    else:
        t, p = combine(alternative)
    return _result("fisher", t, p, u, v, np.ones_like(u), alternative)


def table_test(
    table: BinTable, *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """MWU on a federated two-group table: records in the same bin are tied.

    U_fed = Σ_i Σ_j fx_i·fy_j·sign(j − i), variance by the tie formula with t_r = fx_r + fy_r.
    Row 0 of ``table.counts`` is X, row 1 is Y.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    if table.n_groups != 2:
        raise ValueError("`table` must have two groups (rows X and Y)")
    fx, fy = table.counts
    y_below = np.concatenate([[0.0], np.cumsum(fy)[:-1]])
    y_above = fy.sum() - y_below - fy
    u = float(np.dot(fx, y_above - y_below))
    v = tie_variance(float(fx.sum()), float(fy.sum()), fx + fy)
    z = float(_z(np.asarray(u), np.asarray(v)))
    ua, va = np.array([u]), np.array([v])
    return _result("table", z, float(_z_pvalue(z, alternative)), ua, va, np.ones(1), alternative)
