"""The differentially private twin of a K-anonymous life table (docs/methods.md §13.1), and the
survival quantities read from it with an uncertainty that includes the noise.

**The release.** On a **public** grid c_0 < c_1 < ... < c_J (its limits from the declared
follow-up range, never from the data), every record (t, δ) of one arm is put in exactly one
cell of the 2 × J histogram H = (d_1..d_J, w_1..w_J) of events and censorings: in the interval
j with t in (c_j, c_{j+1}] after clipping t into the grid's range (t <= c_0 counts in the first
interval); a time after c_J counts in the last interval as **censored** (administratively, at
the end of the declared follow-up: an event after c_J is not one within it). The release is

    H̃ = H + W,   W_1..W_2J independent, Laplace(Δ_1/ε) (``mechanism="laplace"``) or
    N(0, σ²) with σ the analytic Gaussian scale of (ε, δ) at Δ_2 (``"gaussian"``).

**Sensitivity.** The map record → cell is a function of the record and the public grid only,
and a data set's H counts its records per cell. *Add/remove*: D' = D ∪ {r} has H(D') = H(D) +
e_{cell(r)}, so ‖H(D') − H(D)‖_1 = ‖H(D') − H(D)‖_2 = 1. *Swap*: r replaced by r' gives H(D') =
H(D) − e_{cell(r)} + e_{cell(r')}: ‖·‖_1 <= 2 and ‖·‖_2 <= √2 (0 when both fall in one cell).
So Δ_1 = 1, Δ_2 = 1 under add/remove and Δ_1 = 2, Δ_2 = √2 under swap, both tight.

**Guarantee.** Laplace: the density of H̃ under D over that under D' is Π_i exp((|y_i − H'_i|
− |y_i − H_i|)/b) <= exp(‖H − H'‖_1 / b) <= e^ε with b = Δ_1/ε (the triangle inequality; Dwork
& Roth 2014, Thm 3.6): ε-DP. Gaussian: N(0, σ² I) on a vector of L2 sensitivity Δ_2 is (ε, δ)-DP
exactly when Φ(Δ_2/(2σ) − εσ/Δ_2) − e^ε Φ(−Δ_2/(2σ) − εσ/Δ_2) <= δ (Balle & Wang 2018, Thm 8;
the privacy loss of a Gaussian vector depends on the shift's L2 norm only), and
:class:`shared.mechanisms.Gaussian` takes the smallest such σ. Everything below is a function of
H̃ and public numbers (the grid, ε, δ, the mechanism): post-processing, no further cost (Dwork &
Roth 2014, Prop 2.1). Any n, 0 included, is released (under add/remove n is private: nothing
may refuse a small selection). Arms, strata and centers are disjoint sets of records: their
releases compose in parallel. Floating-point noise can leak through its low bits (Mironov
2012; :mod:`shared.mechanisms.base`): services draw ``rng`` from OS entropy.

**Post-processing.** The projection onto counts >= 0 is clipping, p = max(H̃, 0) per cell (the
Euclidean projection onto the nonnegative orthant). The life table is that of p: the number at
risk n_j = Σ_{i >= j} (d_i + w_i), a backward cumulative sum of nonnegative counts, so n_j >= 0
and nonincreasing in j, and n_j >= d_j + w_j. Clipping biases a cell whose true count is near 0
upwards (by b/2 for a true 0 under Laplace); a cell several noise SDs above 0 is untouched. The
released H̃ stays in the result (``noisy_events``, ``noisy_censored``), so anyone can recompute
the table (:func:`project_release`).

**Uncertainty with the noise** (the delta method through the projection). Every quantity g
below is a smooth function of the projected counts p away from the cells' zeros, and p = max(H̃,
0) has the Jacobian diag(1[H̃_i > 0]). With v the noise variance per cell (2b² or σ²), the
noise adds

    Var_noise g ≈ v Σ_{i: H̃_i > 0} (∂g/∂p_i)²,

evaluated at p, to the sampling variance the life table's own formulas give at p
(:mod:`shared.survival`), the noise being independent of the data. It is a first-order
approximation: good where the noise SD is small against the counts that g depends on; where a
cell is clipped the derivative is 0 and the noise that cell carried (its clipped positive part)
is left out, so the approximation is rough near the zeros (sparse tails, empty arms).
The derivatives, with n'_j the at-risk number of the chosen convention (n'_j = n_j − a_j w_j,
a_j = ½ ``"actuarial"``, 0 ``"end"``), r_j = n'_j − d_j and G_j = 1/r_j − 1/n'_j =
d_j/(r_j n'_j):

* **log S(c_m)** = Σ_{j<m} log(r_j / n'_j):
  ∂/∂d_k = Σ_{j < min(m,k)} G_j − 1[k < m]/n'_k,
  ∂/∂w_k = Σ_{j < min(m,k)} G_j + 1[k < m] (1 − a_k) G_k
  (a later record is at risk in every earlier interval; ``"actuarial"``: an interval's own
  censorings for half of it). Var_noise log S is added to Greenwood's Var log S; the log-log
  interval, the quantiles' Brookmeyer-Crowley intervals and ``variance`` use the sum.
* **RMST** μ(τ) = ∫ S: ∂μ/∂p_i = Σ_m (∂μ/∂S(c_m)) S(c_m) ∂log S(c_m)/∂p_i, with ∂μ/∂S(c_m)
  of the curve's reading between the limits (the steps' lengths for ``"end"``; the log-linear
  pieces' by central differences for ``"actuarial"``); the difference of two arms adds the
  arms' variances (independent releases).
* **log-rank** O − E (and the hypergeometric V, reported): derivatives of the same code
  (:mod:`shared.survival`'s per-stratum sums) by forward differences, step 10⁻⁶·max(1, p_i),
  on each released table; the noise covariance Σ = Σ_tables v Σ_{i active} ∇(O − E)
  ∇(O − E)' is added to V in the test (χ² = (O − E)'(V + Σ)⁻¹(O − E)).

References: Balle B, Wang Y-X (2018) Improving the Gaussian mechanism for differential privacy,
ICML. Dwork C, Roth A (2014) The Algorithmic Foundations of Differential Privacy, Found Trends
Theor Comput Sci 9:211-407. Gondara L, Wang K (2020) Differentially private survival function
estimation, MLHC (PMLR 126). Mironov I (2012) On significance of the least significant bits for
differential privacy, CCS. The survival formulas' references: :mod:`shared.survival`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._validation import (
    as_finite_1d,
    check_choice,
    check_epsilon,
    check_generator,
    check_neighbouring,
    check_open_unit,
)
from shared.mechanisms.gaussian import Gaussian
from shared.mechanisms.laplace import Laplace
from shared.privacy import Neighbouring, PrivacySpent
from shared.survival import (
    CENSORING,
    WEIGHTS,
    Between,
    Censoring,
    KaplanMeierResult,
    LifeTable,
    LogRankResult,
    RMSTResult,
    SurvivalQuantile,
    Weights,
    _area,
    _at_risk,
    _stratum_parts,
    kaplan_meier,
    life_table,
    logrank,
    rmst,
    rmst_difference,
    survival_quantile,
)

FloatArray = NDArray[np.float64]
Mechanism = Literal["laplace", "gaussian"]
MECHANISMS: tuple[str, ...] = ("laplace", "gaussian")
DIFFERENCE_STEP = 1e-6
"""Relative step of the forward differences of the log-rank sums (module docstring)."""

__all__ = ["MECHANISMS", "DPKaplanMeierResult", "DPLifeTable", "DPLogRankResult",
           "DPRMSTDifference", "DPRMSTResult", "dp_kaplan_meier", "dp_life_table",
           "dp_logrank", "dp_rmst", "dp_rmst_difference", "histogram_sensitivity",
           "life_table_cells", "pooled_life_table", "project_release"]


@dataclass(frozen=True)
class DPLifeTable:
    """One arm's DP life table (module docstring): the released noisy counts per interval
    (``noisy_events`` d̃_j, ``noisy_censored`` w̃_j, on the public ``limits``), their
    projection onto counts >= 0 (``events``, ``censored``: clipping), and how they were noised:
    ``mechanism``, ``neighbouring``, the histogram's ``sensitivity`` (L1 for Laplace, L2 for
    Gaussian), the noise ``scale`` (b or σ), the noise variance of each cell
    (``cell_variance``: 2b² or σ²) and the privacy ``spent``."""

    limits: FloatArray
    noisy_events: FloatArray
    noisy_censored: FloatArray
    events: FloatArray
    censored: FloatArray
    mechanism: str
    neighbouring: str
    sensitivity: float
    scale: float
    cell_variance: float
    spent: PrivacySpent

    @property
    def at_risk(self) -> FloatArray:
        """n_j = Σ_{i >= j} (d_i + w_i) of the projected counts: >= 0, nonincreasing."""
        return np.cumsum((self.events + self.censored)[::-1])[::-1]

    @property
    def noisy_total(self) -> float:
        """Σ (d̃_j + w̃_j): an unbiased estimate of the arm's size (the projected table's total
        is biased upwards where cells were clipped)."""
        return float(self.noisy_events.sum() + self.noisy_censored.sum())

    @property
    def active(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """Where the projection is the identity (d̃_j > 0, w̃_j > 0): the cells whose noise
        the delta method carries (module docstring)."""
        return self.noisy_events > 0, self.noisy_censored > 0

    @property
    def table(self) -> LifeTable:
        """The projected counts as a :class:`shared.survival.LifeTable` (ValueError when
        every projected count is 0: then there is no curve to read)."""
        if self.events.sum() + self.censored.sum() <= 0:
            raise ValueError("the DP life table holds no record after projection (every noisy "
                             "count <= 0): no survival curve can be read from it")
        return life_table(self.limits, self.events, self.censored)


def _check_grid(grid: ArrayLike) -> FloatArray:
    c = as_finite_1d(grid, "grid")
    if c.size < 2:
        raise ValueError("`grid` must hold at least two limits (one interval), public: from "
                         "the declared follow-up range, never from the data")
    if not np.all(np.diff(c) > 0):
        raise ValueError("`grid` must increase strictly")
    return c


def life_table_cells(times: ArrayLike, events: ArrayLike, grid: ArrayLike
                     ) -> tuple[FloatArray, FloatArray]:
    """The exact histogram (d_j, w_j) the release noises (module docstring): times clipped into
    the grid's range, a time after the last limit censored in the last interval."""
    c = _check_grid(grid)
    t = as_finite_1d(times, "times", allow_empty=True)
    e = np.asarray(events)
    if e.shape != t.shape:
        raise ValueError(f"`times` and `events` must have one entry per record, got "
                         f"{t.shape[0]} times and {e.shape} events")
    if e.dtype != bool:
        if e.size and not np.all(np.isin(e, (0, 1))):
            raise ValueError("`events` must be boolean or 0/1 (1: the event, 0: censored)")
        e = e.astype(bool)
    j = np.clip(np.searchsorted(c, t, side="left") - 1, 0, c.size - 2)
    event = e & (t <= c[-1])
    d = np.bincount(j[event], minlength=c.size - 1).astype(np.float64)
    w = np.bincount(j[~event], minlength=c.size - 1).astype(np.float64)
    return d, w


def histogram_sensitivity(neighbouring: Neighbouring, mechanism: Mechanism) -> float:
    """The (events, censorings) histogram's sensitivity: L1 (Laplace) 1 under add/remove, 2
    under swap; L2 (Gaussian) 1 and √2 (module docstring)."""
    relation = check_neighbouring(neighbouring)
    how = check_choice(mechanism, "mechanism", MECHANISMS)
    if relation == "add_remove":
        return 1.0
    return 2.0 if how == "laplace" else math.sqrt(2.0)


def project_release(noisy_events: ArrayLike, noisy_censored: ArrayLike
                    ) -> tuple[FloatArray, FloatArray]:
    """The post-processing of a release: each noisy count clipped at 0 (module docstring)."""
    d = as_finite_1d(noisy_events, "noisy_events")
    w = as_finite_1d(noisy_censored, "noisy_censored")
    if d.shape != w.shape:
        raise ValueError("`noisy_events` and `noisy_censored` must have one count per interval")
    return np.maximum(d, 0.0), np.maximum(w, 0.0)


def dp_life_table(times: ArrayLike, events: ArrayLike, *, grid: ArrayLike, epsilon: float,
                  rng: np.random.Generator, mechanism: Mechanism = "laplace",
                  delta: float = 0.0, neighbouring: Neighbouring = "add_remove") -> DPLifeTable:
    """One arm's DP life table on the public ``grid`` (module docstring): the events and
    censorings per interval, each cell noised (Laplace: ε-DP, ``delta`` 0; Gaussian: (ε, δ)-DP,
    ``delta`` in (0, 1)), then projected onto counts >= 0. ``times`` and ``events`` (true or 1:
    the event; false or 0: censored) are one arm's records, any number of them, none
    included."""
    c = _check_grid(grid)
    epsilon = check_epsilon(epsilon)
    how = check_choice(mechanism, "mechanism", MECHANISMS)
    relation = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    sensitivity = histogram_sensitivity(relation, how)  # type: ignore[arg-type]
    noise: Laplace | Gaussian
    if how == "laplace":
        if delta != 0.0:
            raise ValueError(f"the Laplace mechanism is pure ε-DP: `delta` must be 0, got "
                             f"{delta!r} (use mechanism='gaussian' for (ε, δ)-DP)")
        noise = Laplace(epsilon, sensitivity)
        scale = noise.scale
    else:
        delta = check_open_unit(delta, "delta")
        noise = Gaussian(sensitivity, epsilon=epsilon, delta=delta)
        scale = noise.sigma
    d, w = life_table_cells(times, events, c)
    draws = noise.sample(rng, (2, c.size - 1))
    noisy_d, noisy_w = d + draws[0], w + draws[1]
    events_p, censored_p = project_release(noisy_d, noisy_w)
    return DPLifeTable(limits=c, noisy_events=noisy_d, noisy_censored=noisy_w, events=events_p,
                       censored=censored_p, mechanism=how, neighbouring=relation,
                       sensitivity=sensitivity, scale=scale, cell_variance=noise.variance,
                       spent=noise.guarantee)  # type: ignore[arg-type]


def pooled_life_table(releases: Sequence[DPLifeTable]) -> DPLifeTable:
    """One arm's releases from several centers (disjoint records, one public grid) as one DP
    life table: the noisy counts summed cell by cell, then projected onto counts >= 0.

    Post-processing of the releases (no further cost). The summed noise of a cell is the sum of
    the centers' independent draws, so its variance is the sum of their ``cell_variance`` (the
    delta method of the readers carries it); the centers' records are disjoint, so the pooled
    table is as private as its least private part (parallel composition: the largest ε and δ).
    Summing before projecting keeps the sum's noise mean 0 where every center's count is small
    (projecting each first would add each center's clipping bias)."""
    if not isinstance(releases, Sequence) or not releases:
        raise ValueError("`releases` must be a non-empty sequence of DPLifeTables")
    tables = [_check_release(r, f"releases[{i}]") for i, r in enumerate(releases)]
    limits = tables[0].limits
    if not all(np.array_equal(t.limits, limits) for t in tables):
        raise ValueError("the releases must share one grid (their `limits`)")
    noisy_d = np.sum([t.noisy_events for t in tables], axis=0)
    noisy_w = np.sum([t.noisy_censored for t in tables], axis=0)
    events, censored = project_release(noisy_d, noisy_w)
    mechanisms = sorted({t.mechanism for t in tables})
    relations = sorted({t.neighbouring for t in tables})
    variance = float(sum(t.cell_variance for t in tables))
    # The scale of one draw of the summed noise's variance: Laplace's b (variance 2b²), else σ.
    scale = math.sqrt(variance / 2.0) if mechanisms == ["laplace"] else math.sqrt(variance)
    return DPLifeTable(
        limits=limits, noisy_events=noisy_d, noisy_censored=noisy_w, events=events,
        censored=censored, mechanism=mechanisms[0] if len(mechanisms) == 1 else "mixed",
        neighbouring=relations[0] if len(relations) == 1 else "mixed",
        sensitivity=max(t.sensitivity for t in tables), scale=scale, cell_variance=variance,
        spent=PrivacySpent(max(t.spent.epsilon for t in tables),
                           max(t.spent.delta for t in tables)))


def _check_release(release: DPLifeTable, name: str = "release") -> DPLifeTable:
    if not isinstance(release, DPLifeTable):
        raise ValueError(f"`{name}` must be a DPLifeTable (shared.dp.life_table.dp_life_table), "
                         f"got {type(release).__name__}")
    return release


def _log_survival_gradient(table: LifeTable, censoring: str) -> tuple[FloatArray, FloatArray]:
    """∂ log S(c_m)/∂d_k and ∂ log S(c_m)/∂w_k, (J + 1) × J each (module docstring); 0 where
    no one is at risk, NaN-free (rows where S = 0 are meaningless and zeroed by the callers)."""
    d = table.events
    n = _at_risk(table, censoring)
    own = 0.5 if censoring == "actuarial" else 0.0  # a_k: the share of w_k not at risk
    r = n - d
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where((d > 0) & (n > 0), d / np.where((r > 0) & (n > 0), r * n, 1.0), 0.0)
        g = np.where((d > 0) & (r <= 0), np.inf, g)
        inv_n = np.where(n > 0, 1.0 / np.where(n > 0, n, 1.0), 0.0)
    big = d.size
    cum = np.concatenate([[0.0], np.cumsum(g)])  # cum[i] = Σ_{j<i} G_j
    m = np.arange(big + 1)[:, None]
    k = np.arange(big)[None, :]
    shared_part = cum[np.minimum(m, k)]
    before = (k < m)
    with np.errstate(invalid="ignore"):
        grad_d = shared_part - before * inv_n[None, :]
        grad_w = shared_part + before * ((1.0 - own) * np.where(np.isfinite(g), g, 0.0))[None, :]
    return np.nan_to_num(grad_d, posinf=0.0, neginf=0.0), np.nan_to_num(grad_w, posinf=0.0,
                                                                        neginf=0.0)


def _noise_variance(release: DPLifeTable, grad_d: FloatArray, grad_w: FloatArray) -> FloatArray:
    """v Σ_{active cells} (∂g/∂p)² over the last axis (the cells)."""
    on_d, on_w = release.active
    return release.cell_variance * (np.sum(grad_d**2 * on_d, axis=-1)
                                    + np.sum(grad_w**2 * on_w, axis=-1))


@dataclass(frozen=True)
class DPKaplanMeierResult:
    """The survival curve of a DP life table at its limits (``curve``: a
    :class:`shared.survival.KaplanMeierResult` whose ``variance``, ``low`` and ``high`` include
    the noise), Greenwood's variance of S alone (``greenwood_variance``) and the noise's
    (``noise_variance``, delta method: S² Var_noise log S), both at the limits (NaN once S is
    0)."""

    curve: KaplanMeierResult
    greenwood_variance: FloatArray
    noise_variance: FloatArray

    @property
    def times(self) -> FloatArray:
        return self.curve.times

    @property
    def survival(self) -> FloatArray:
        return self.curve.survival

    @property
    def low(self) -> FloatArray:
        return self.curve.low

    @property
    def high(self) -> FloatArray:
        return self.curve.high

    def at(self, t: ArrayLike) -> FloatArray:
        """S at any times in [c_0, c_J] (:meth:`KaplanMeierResult.at`)."""
        return self.curve.at(t)

    def band_at(self, t: ArrayLike, *, between: Between = "envelope"
                ) -> tuple[FloatArray, FloatArray]:
        """The interval, noise included, at any times (:meth:`KaplanMeierResult.band_at`)."""
        return self.curve.band_at(t, between=between)

    def quantile(self, p: float = 0.5, *, between: Between = "envelope") -> SurvivalQuantile:
        """The time S reaches 1 − p and its Brookmeyer-Crowley interval on the band that
        includes the noise (:func:`shared.survival.survival_quantile`)."""
        return survival_quantile(self.curve, p, between=between)


def dp_kaplan_meier(release: DPLifeTable, *, level: float = 0.95,
                    censoring: Censoring = "actuarial") -> DPKaplanMeierResult:
    """The life-table (or ``"end"``: Kaplan-Meier) curve of a DP life table, its log-log
    interval on Var log S = Greenwood's + the noise's (module docstring)."""
    release = _check_release(release)
    how = check_choice(censoring, "censoring", CENSORING)
    table = release.table
    grad_d, grad_w = _log_survival_gradient(table, how)
    plain = kaplan_meier(table, level=level, censoring=how)  # type: ignore[arg-type]
    alive = plain.survival > 0
    log_noise = np.where(alive, _noise_variance(release, grad_d, grad_w), 0.0)
    curve = kaplan_meier(table, level=level, censoring=how,  # type: ignore[arg-type]
                         noise_variance=log_noise)
    noise = np.where(alive, plain.survival**2 * log_noise, np.nan)
    return DPKaplanMeierResult(curve=curve, greenwood_variance=plain.variance,
                               noise_variance=noise)


@dataclass(frozen=True)
class DPRMSTResult:
    """The restricted mean survival time to ``horizon`` of a DP life table: ``estimate``, its
    standard error (``se`` = √(sampling_se² + noise_se²)) and interval at ``level``, with the
    sampling part (``sampling_se``, the life table's delta method) and the noise's
    (``noise_se``, module docstring) apart."""

    horizon: float
    estimate: float
    se: float
    low: float
    high: float
    level: float
    sampling_se: float
    noise_se: float


def _rmst_noise_variance(release: DPLifeTable, horizon: float, censoring: str) -> float:
    table = release.table
    km = kaplan_meier(table, censoring=censoring)  # type: ignore[arg-type]
    c, s = km.times, km.survival
    tau = float(horizon)
    if not (math.isfinite(tau) and c[0] < tau <= c[-1]):
        raise ValueError(f"`horizon` must lie in ({c[0]:g}, {c[-1]:g}], the grid's range, "
                         f"got {horizon!r}")
    weight = np.zeros(s.size)  # ∂μ/∂S(c_m)
    for m in range(1, s.size):
        if c[m - 1] >= tau:
            break
        if censoring == "end":  # S(c_m) holds on [c_m, c_{m+1})
            weight[m] = max(0.0, min(float(c[m + 1]) if m + 1 < c.size else tau, tau)
                            - float(c[m])) if c[m] < tau else 0.0
            continue
        step = 1e-6 * max(float(s[m]), 1e-3)
        up, down = s.copy(), s.copy()
        up[m] += step
        down[m] = max(0.0, down[m] - step)
        weight[m] = (_area(c, up, float(c[0]), tau, censoring)
                     - _area(c, down, float(c[0]), tau, censoring)) / (up[m] - down[m])
    grad_d, grad_w = _log_survival_gradient(table, censoring)
    scale = (weight * s)[:, None]
    return float(_noise_variance(release, np.sum(scale * grad_d, axis=0),
                                 np.sum(scale * grad_w, axis=0)))


def dp_rmst(release: DPLifeTable, horizon: float, *, level: float = 0.95,
            censoring: Censoring = "actuarial") -> DPRMSTResult:
    """μ(τ) = ∫_{c_0}^τ S of a DP life table, its variance the life table's delta method plus
    the noise's (module docstring)."""
    release = _check_release(release)
    how = check_choice(censoring, "censoring", CENSORING)
    noise = _rmst_noise_variance(release, horizon, how)
    plain = rmst(release.table, horizon, level=level, censoring=how)  # type: ignore[arg-type]
    total = rmst(release.table, horizon, level=level, censoring=how,  # type: ignore[arg-type]
                 noise_variance=noise)
    return _dp_rmst(total, plain, noise)


def _dp_rmst(total: RMSTResult, plain: RMSTResult, noise: float) -> DPRMSTResult:
    return DPRMSTResult(horizon=total.horizon, estimate=total.estimate, se=total.se,
                        low=total.low, high=total.high, level=total.level,
                        sampling_se=plain.se, noise_se=math.sqrt(noise))


@dataclass(frozen=True)
class DPRMSTDifference:
    """μ_2(τ) − μ_1(τ) of two DP life tables (the second arm's minus the first's), its
    standard error (the arms' variances, noise included, added: disjoint records, independent
    noise), interval, two-sided p-value, the sampling and noise parts of the SE, and the
    arms."""

    horizon: float
    estimate: float
    se: float
    low: float
    high: float
    pvalue: float
    level: float
    sampling_se: float
    noise_se: float
    arms: tuple[DPRMSTResult, DPRMSTResult]


def dp_rmst_difference(first: DPLifeTable, second: DPLifeTable, horizon: float, *,
                       level: float = 0.95, censoring: Censoring = "actuarial"
                       ) -> DPRMSTDifference:
    """The RMST difference of two arms' DP life tables at one horizon (module docstring)."""
    a, b = dp_rmst(_check_release(first, "first"), horizon, level=level, censoring=censoring), \
        dp_rmst(_check_release(second, "second"), horizon, level=level, censoring=censoring)
    # The difference as the life tables' own, each arm's noise variance added (one formula).
    d = rmst_difference(first.table, second.table, horizon, level=level,
                        censoring=censoring, noise_variance=(a.noise_se**2, b.noise_se**2))
    return DPRMSTDifference(horizon=d.horizon, estimate=d.estimate, se=d.se, low=d.low,
                            high=d.high, pvalue=d.pvalue, level=d.level,
                            sampling_se=math.hypot(a.sampling_se, b.sampling_se),
                            noise_se=math.hypot(a.noise_se, b.noise_se), arms=(a, b))


@dataclass(frozen=True)
class DPLogRankResult:
    """The weighted log-rank test on DP life tables: ``test`` (a
    :class:`shared.survival.LogRankResult` whose χ², p-value, z and hazard ratio interval
    refer O − E to V + Σ), the hypergeometric covariance V of the first k − 1 arms' O − E at
    the projected counts (``hypergeometric_variance``), the noise's covariance Σ of O − E
    (``noise_variance``, delta method) and the noise variance of V's diagonal
    (``variance_noise_variance``: how far the plug-in V itself is from the noise-free one)."""

    test: LogRankResult
    hypergeometric_variance: tuple[tuple[float, ...], ...]
    noise_variance: tuple[tuple[float, ...], ...]
    variance_noise_variance: tuple[float, ...]

    @property
    def statistic(self) -> float:
        return self.test.statistic

    @property
    def pvalue(self) -> float:
        return self.test.pvalue

    @property
    def zstatistic(self) -> float | None:
        return self.test.zstatistic


def _check_dp_strata(strata: Sequence[Sequence[DPLifeTable]] | Sequence[DPLifeTable]
                     ) -> list[list[DPLifeTable]]:
    if not isinstance(strata, Sequence) or not strata:
        raise ValueError("`strata` must be a non-empty sequence of strata, each a sequence of "
                         "the arms' DPLifeTables (or one stratum: the arms' DPLifeTables)")
    groups: Sequence[object] = [strata] if all(isinstance(t, DPLifeTable) for t in strata) \
        else strata
    out: list[list[DPLifeTable]] = []
    for s, stratum in enumerate(groups):
        if not isinstance(stratum, Sequence) or not all(isinstance(t, DPLifeTable)
                                                        for t in stratum):
            raise ValueError(f"stratum {s} must be a sequence of DPLifeTables, one per arm")
        out.append([t for t in stratum if isinstance(t, DPLifeTable)])
    return out


def dp_logrank(strata: Sequence[Sequence[DPLifeTable]] | Sequence[DPLifeTable], *,
               weights: Weights = "logrank", censoring: Censoring = "actuarial",
               level: float = 0.95) -> DPLogRankResult:
    """The weighted log-rank test of k arms' DP life tables, stratified (each stratum a
    sequence of the arms' releases on one grid; a flat sequence of releases: one stratum),
    O − E referred to V + Σ (module docstring)."""
    releases = _check_dp_strata(strata)
    weighed = check_choice(weights, "weights", WEIGHTS)
    how = check_choice(censoring, "censoring", CENSORING)
    tables = [[r.table for r in stratum] for stratum in releases]
    base = logrank(tables, weights=weighed, censoring=how, level=level)  # type: ignore[arg-type]
    k = len(tables[0])
    sigma = np.zeros((k - 1, k - 1))
    v_noise = np.zeros(k - 1)
    for stratum, rel in zip(tables, releases, strict=True):
        o0, e0, v0 = _stratum_parts(stratum, weighed, how)
        u0, d0 = (o0 - e0)[1:], np.diag(v0)[1:]
        for g, release in enumerate(rel):
            on_d, on_w = release.active
            for counts, on, is_events in ((release.events, on_d, True),
                                          (release.censored, on_w, False)):
                for i in np.nonzero(on)[0]:
                    step = DIFFERENCE_STEP * max(1.0, float(counts[i]))
                    bumped = counts.copy()
                    bumped[i] += step
                    t = stratum[g]
                    moved = LifeTable(t.limits, bumped, t.censored) if is_events else \
                        LifeTable(t.limits, t.events, bumped)
                    o1, e1, v1 = _stratum_parts([moved if h == g else x
                                                 for h, x in enumerate(stratum)], weighed, how)
                    grad_u = ((o1 - e1)[1:] - u0) / step
                    grad_v = (np.diag(v1)[1:] - d0) / step
                    sigma += release.cell_variance * np.outer(grad_u, grad_u)
                    v_noise += release.cell_variance * grad_v**2
    sigma = (sigma + sigma.T) / 2.0
    test = logrank(tables, weights=weighed, censoring=how,  # type: ignore[arg-type]
                   level=level, noise_variance=sigma)
    return DPLogRankResult(test=test, hypergeometric_variance=base.variance,
                           noise_variance=tuple(tuple(float(x) for x in row) for row in sigma),
                           variance_noise_variance=tuple(float(x) for x in v_noise))
