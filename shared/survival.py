"""Time to event from life tables: Kaplan-Meier curves with Greenwood intervals, median survival
with its Brookmeyer-Crowley interval, restricted mean survival time (RMST), and the weighted
log-rank tests stratified by center with Peto's hazard ratio (docs/methods.md §13).

**A life table** (:class:`LifeTable`) of one arm holds, on limits c_0 < c_1 < ... < c_J, the
events d_j and the censorings w_j whose times lie in the interval (c_j, c_{j+1}]: what a center
can release with every count 0 or >= K, on limits placed as every table's are. The number at
risk at an interval's start is n_j = Σ_{i >= j} (d_i + w_i), the records whose time exceeds c_j.
Counts may be non-integer (federation shares a bin's records out at a limit another center
added, docs/methods.md §2.5); the arithmetic is the same.

Where in its interval an event or a censoring happened is not in the table; two conventions
(``censoring``) say what is assumed:

* ``"end"``: every time at its interval's upper limit, censorings just after the events (so at
  risk for them, R's and lifelines' convention for ties). The estimator is then the
  Kaplan-Meier estimator of the records moved to their upper limits, the log-rank test theirs:
  **exact** (equal to the raw data's, ``survival::survfit``/``survdiff``) when every record's
  time is a limit, and for any table the curve of a population that had its events no earlier.
* ``"actuarial"`` (default): censorings spread over the interval, each at risk for half of it,
  n'_j = n_j − w_j / 2 (Cutler & Ederer 1958; the life-table estimator of Berkson & Gage 1950),
  and S log-linear between the limits (a constant hazard within an interval, the piecewise
  exponential reading; linear into an interval that ends at S = 0). On coarse intervals this is
  the estimator with the least bias of the two; it tends to the Kaplan-Meier estimator as the
  intervals refine.

With h_j = d_j / n'_j (n'_j = n_j for ``"end"``), S(c_{j+1}) = Π_{i <= j} (1 − h_i), and

* **Greenwood** (1926): Var S(c_{j+1}) = S² Σ_{i <= j} d_i / (n'_i (n'_i − d_i)); the interval on
  the log-log scale (Kalbfleisch & Prentice 1980; R's ``conf.type = "log-log"``):
  S^{exp(± z σ / |log S|)}, σ² the sum above;
* **median** (and any quantile p): the first time S reaches 1 − p (``"end"``: the first limit
  where S <= 1 − p, the midpoint to the next drop where S equals it exactly, as R takes it;
  ``"actuarial"``: the log-linear crossing), its interval where the Greenwood band's limits cross
  (Brookmeyer & Crowley 1982, as ``survfit`` computes it); ``inf`` where a curve never gets there;
* **RMST** to a horizon τ: μ(τ) = ∫_{c_0}^τ S(t) dt, Var μ = Σ_{c_{j+1} <= τ} A_j² d_j /
  (n'_j (n'_j − d_j)), A_j = ∫_{c_{j+1}}^τ S(t) dt (Klein & Moeschberger 2003 §4.5; the delta
  method on the Kaplan-Meier steps; ``"actuarial"``: A_j² averaged over the interval, where its
  events are spread (Simpson's rule), and the interval holding τ counted for its share before
  τ — without both, the SE on K = 10 life tables of 6-7 intervals was 0.72 of the estimate's
  SD), its interval μ ± z·√Var, and between arms the difference with the variances added;
* **log-rank** (Mantel 1966; Peto & Peto 1972), stratified: per stratum (a center) and interval,
  with n_gj at risk and d_gj events in arm g, n_j and d_j their totals, O_g − E_g = Σ w_j (d_gj −
  n_gj d_j / n_j) and the hypergeometric covariance V_gh = Σ w_j² d_j (n_j − d_j)/(n_j − 1) ·
  (n_gj / n_j)(δ_gh − n_hj / n_j), summed over strata; χ² = (O − E)' V⁻¹ (O − E) on k − 1 df
  (the first k − 1 arms). Weights w_j: 1 (log-rank), n_j (Gehan-Breslow), √n_j (Tarone-Ware),
  S̃(c_j) = Π_{i < j} (1 − d_i / n_i), the stratum's pooled Kaplan-Meier just before the interval
  (Peto-Peto; Fleming-Harrington ρ = 1, R's ``survdiff(rho = 1)``);
* **Peto's hazard ratio** of the second arm against the first (two arms, unweighted):
  exp((O_2 − E_2) / V), its interval exp((O_2 − E_2)/V ± z / √V) (Yusuf et al. 1985), per
  stratum too, with Cochran's Q across strata on the log scale (``shared.heterogeneity``).

References: Berkson J, Gage RP (1950) Proc Staff Meet Mayo Clin 25:270-286. Brookmeyer R,
Crowley J (1982) Biometrics 38:29-41. Cutler SJ, Ederer F (1958) J Chronic Dis 8:699-712.
Greenwood M (1926) Rep Public Health Med Subj 33. Kalbfleisch JD, Prentice RL (1980) The
Statistical Analysis of Failure Time Data. Kaplan EL, Meier P (1958) JASA 53:457-481. Klein JP,
Moeschberger ML (2003) Survival Analysis, 2nd ed. Mantel N (1966) Cancer Chemother Rep 50:163-170.
Peto R, Peto J (1972) JRSS A 135:185-207. Yusuf S et al. (1985) Prog Cardiovasc Dis 27:335-371.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from shared._validation import as_finite_1d, check_choice, check_open_unit
from shared.heterogeneity import HeterogeneityResult, cochran_q

FloatArray = NDArray[np.float64]
Censoring = Literal["actuarial", "end"]
CENSORING: tuple[str, ...] = ("actuarial", "end")
Between = Literal["envelope", "interpolated"]
BETWEEN: tuple[str, ...] = ("envelope", "interpolated")
Weights = Literal["logrank", "gehan", "tarone-ware", "peto"]
WEIGHTS: tuple[str, ...] = ("logrank", "gehan", "tarone-ware", "peto")

__all__ = ["BETWEEN", "CENSORING", "WEIGHTS", "KaplanMeierResult", "LifeTable", "LogRankResult",
           "RMSTDifference", "RMSTResult", "SurvivalQuantile", "kaplan_meier", "life_table",
           "life_table_from_records", "logrank", "peto_heterogeneity", "rmst",
           "rmst_difference", "survival_quantile"]


@dataclass(frozen=True)
class LifeTable:
    """One arm's events and censorings per interval (c_j, c_{j+1}] (module docstring);
    made by :func:`life_table`, which validates."""

    limits: FloatArray
    events: FloatArray
    censored: FloatArray

    @property
    def at_risk(self) -> FloatArray:
        """n_j: the records whose time exceeds c_j, at each interval's start."""
        return np.cumsum((self.events + self.censored)[::-1])[::-1]

    @property
    def n(self) -> float:
        return float(self.events.sum() + self.censored.sum())


def life_table(limits: ArrayLike, events: ArrayLike, censored: ArrayLike) -> LifeTable:
    """A validated :class:`LifeTable`: finite increasing limits, one count of events and one
    of censorings per interval, each >= 0, and at least one record."""
    c = as_finite_1d(limits, "limits")
    if c.size < 2:
        raise ValueError("`limits` must hold at least two values (one interval)")
    if not np.all(np.diff(c) > 0):
        raise ValueError("`limits` must increase strictly")
    d = as_finite_1d(events, "events", allow_empty=True)
    w = as_finite_1d(censored, "censored", allow_empty=True)
    for name, x in (("events", d), ("censored", w)):
        if x.size != c.size - 1:
            raise ValueError(f"`{name}` must hold one count per interval ({c.size - 1}), "
                             f"got {x.size}")
        if np.any(x < 0):
            raise ValueError(f"`{name}` must be >= 0")
    if d.sum() + w.sum() <= 0:
        raise ValueError("the life table holds no record")
    return LifeTable(limits=c, events=d, censored=w)


def life_table_from_records(time: ArrayLike, event: ArrayLike, limits: ArrayLike) -> LifeTable:
    """The life table of raw records on ``limits``: a record with time t in (c_j, c_{j+1}] is
    counted in interval j, as an event when ``event`` is true, else as censored. Every time must
    lie in (c_0, c_J]."""
    t = as_finite_1d(time, "time")
    e = np.asarray(event)
    if e.shape != t.shape:
        raise ValueError("`time` and `event` must have one entry per record")
    if e.dtype != bool:
        if not np.all(np.isin(e, (0, 1))):
            raise ValueError("`event` must be boolean or 0/1")
        e = e.astype(bool)
    c = as_finite_1d(limits, "limits")
    if t.min() <= c[0] or t.max() > c[-1]:
        raise ValueError(f"every time must lie in ({c[0]:g}, {c[-1]:g}]")
    j = np.searchsorted(c, t, side="left") - 1
    events = np.bincount(j[e], minlength=c.size - 1).astype(np.float64)
    censored = np.bincount(j[~e], minlength=c.size - 1).astype(np.float64)
    return life_table(c, events, censored)


def _at_risk(table: LifeTable, censoring: str) -> FloatArray:
    n = table.at_risk
    return n - table.censored / 2.0 if censoring == "actuarial" else n


def _z(level: float) -> float:
    return float(special.ndtri(0.5 + level / 2.0))


def _greenwood_terms(d: FloatArray, n: FloatArray) -> FloatArray:
    """d / (n (n − d)) per interval: 0 without events, inf where every one at risk has one."""
    out = np.zeros_like(d)
    some = d > 0
    left = n[some] - d[some]
    with np.errstate(divide="ignore"):
        out[some] = np.where(left > 0, d[some] / (n[some] * np.where(left > 0, left, 1.0)),
                             np.inf)
    return out


@dataclass(frozen=True)
class KaplanMeierResult:
    """The survival curve at the limits (``times``; S(c_0) = 1), its Greenwood variance and
    log-log interval (``low``, ``high``; NaN once S is 0), the number at risk at each limit
    (``at_risk``; 0 at the last), and how it was read (``censoring``, ``level``)."""

    times: FloatArray
    survival: FloatArray
    variance: FloatArray
    low: FloatArray
    high: FloatArray
    at_risk: FloatArray
    events: FloatArray
    censoring: str
    level: float

    def at(self, t: ArrayLike) -> FloatArray:
        """S at any times in [c_0, c_J]: steps (``"end"``, right-continuous at the limits) or
        log-linear between the limits (``"actuarial"``)."""
        return _curve_at(self.times, self.survival, np.asarray(t, dtype=np.float64),
                         self.censoring)

    def band_at(self, t: ArrayLike, *, between: Between = "envelope"
                ) -> tuple[FloatArray, FloatArray]:
        """The interval at any times in [c_0, c_J]: at a limit, the log-log interval; between
        two limits (``"actuarial"``: where a time is not in the table) either the
        ``"envelope"`` [low(c_{j+1}), high(c_j)], which holds S(t) wherever the two limits'
        intervals hold S there (S decreases), or the limits' intervals log-linearly
        ``"interpolated"`` (nominal where the intervals are fine, not on one wide interval:
        docs/methods.md §13); ``"end"``: the steps' own."""
        x = np.asarray(t, dtype=np.float64)
        if np.any(x < self.times[0]) or np.any(x > self.times[-1]):
            raise ValueError(f"times must lie in [{self.times[0]:g}, {self.times[-1]:g}]")
        between = check_choice(between, "between", BETWEEN)  # type: ignore[assignment]
        at = np.searchsorted(self.times, x, side="right") - 1
        if self.censoring == "end":
            return self.low[at], self.high[at]
        if between == "interpolated":
            return (_geometric(self.times, np.nan_to_num(self.low), x),
                    _geometric(self.times, np.nan_to_num(self.high), x))
        on = self.times[np.minimum(at, self.times.size - 1)] == x
        after = np.minimum(at + 1, self.times.size - 1)
        return np.where(on, self.low[at], self.low[after]), self.high[at]


def _curve_at(times: FloatArray, curve: FloatArray, t: FloatArray, censoring: str) -> FloatArray:
    if np.any(t < times[0]) or np.any(t > times[-1]):
        raise ValueError(f"times must lie in [{times[0]:g}, {times[-1]:g}]")
    if censoring == "actuarial":
        return _geometric(times, curve, t)
    return curve[np.searchsorted(times, t, side="right") - 1]


def _geometric(times: FloatArray, curve: FloatArray, t: FloatArray) -> FloatArray:
    """The curve between its values at ``times``, log-linear (a constant hazard within each
    interval), linear into an interval that ends at 0."""
    j = np.clip(np.searchsorted(times, t, side="right") - 1, 0, times.size - 2)
    frac = (t - times[j]) / (times[j + 1] - times[j])
    a, b = curve[j], curve[j + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        geo = a * np.power(np.where(a > 0, b / np.where(a > 0, a, 1.0), 0.0), frac)
    return np.where((a > 0) & (b > 0), geo, a + (b - a) * frac)


def _check_noise_variance(value: ArrayLike, shape: tuple[int, ...], what: str) -> FloatArray:
    """A noise variance (or covariance) of the given shape, finite; a variance >= 0."""
    v = np.asarray(value, dtype=np.float64)
    if v.shape != shape:
        raise ValueError(f"`noise_variance` must hold {what}, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("`noise_variance` must be finite")
    if v.ndim < 2 and np.any(v < 0):
        raise ValueError("`noise_variance` must be >= 0")
    if v.ndim == 2 and (not np.allclose(v, v.T) or np.any(np.linalg.eigvalsh(v) < -1e-12)):
        raise ValueError("`noise_variance` must be a symmetric positive semi-definite matrix")
    return v


def kaplan_meier(table: LifeTable, *, level: float = 0.95,
                 censoring: Censoring = "actuarial",
                 noise_variance: ArrayLike | None = None) -> KaplanMeierResult:
    """The Kaplan-Meier (``"end"``) or life-table (``"actuarial"``) estimate of one arm's
    survival at its limits, with Greenwood's variance and the log-log interval at ``level``
    (module docstring).

    ``noise_variance`` (a table whose counts carry noise, a DP release:
    :mod:`shared.dp.life_table`): the variance of log S at each limit that the noise adds, one
    value >= 0 per limit, added to Greenwood's σ² = Var log S; ``variance`` and the interval
    then hold both. Without it (the default) nothing changes."""
    if not isinstance(table, LifeTable):
        raise ValueError(f"`table` must be a shared.survival.LifeTable, got "
                         f"{type(table).__name__}")
    level = check_open_unit(level, "level")
    how = check_choice(censoring, "censoring", CENSORING)
    n = _at_risk(table, how)
    d = table.events
    with np.errstate(divide="ignore", invalid="ignore"):
        hazard = np.where(d > 0, d / np.where(n > 0, n, 1.0), 0.0)
    s = np.concatenate([[1.0], np.cumprod(1.0 - hazard)])
    sigma2 = np.concatenate([[0.0], np.cumsum(_greenwood_terms(d, n))])
    if noise_variance is not None:
        sigma2 = sigma2 + _check_noise_variance(noise_variance, sigma2.shape,
                                                f"one value per limit ({sigma2.size})")
    z = _z(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.log(s)
        se = np.sqrt(sigma2) / np.abs(log_s)
        low = np.where(s >= 1.0, 1.0, s ** np.exp(z * se))
        high = np.where(s >= 1.0, 1.0, s ** np.exp(-z * se))
        variance = s * s * sigma2
    dead = s <= 0.0
    low, high = np.where(dead, np.nan, low), np.where(dead, np.nan, high)
    variance = np.where(dead, np.nan, variance)
    return KaplanMeierResult(times=table.limits, survival=s, variance=variance, low=low,
                             high=high, at_risk=np.append(table.at_risk, 0.0), events=d,
                             censoring=how, level=level)


@dataclass(frozen=True)
class SurvivalQuantile:
    """The time by which a share ``p`` of the arm had the event (p = 0.5: median survival),
    with its Brookmeyer-Crowley interval at ``level``; ``inf`` where a curve never reaches
    1 − p within the table."""

    p: float
    estimate: float
    low: float
    high: float
    level: float


def _crossing(times: FloatArray, curve: FloatArray, target: float, censoring: str) -> float:
    """The first time ``curve`` reaches ``target`` (module docstring); NaN entries (a band
    after S = 0) count as 0."""
    y = np.where(np.isnan(curve), 0.0, curve)
    below = np.nonzero(y <= target + 1e-12)[0]
    if below.size == 0:
        return math.inf
    j = int(below[0])
    if censoring == "actuarial":
        if j == 0:
            return float(times[0])
        y0, y1 = y[j - 1], y[j]
        if y1 > 0 and target > 0:  # log-linear between the limits, as the curve is read
            share = math.log(y0 / target) / math.log(y0 / y1)
        else:
            share = (y0 - target) / (y0 - y1)
        return float(times[j - 1] + (times[j] - times[j - 1]) * share)
    if abs(y[j] - target) <= 1e-12:  # flat at the target: the midpoint to the next drop
        later = np.nonzero(y < target - 1e-12)[0]
        if later.size:
            return float((times[j] + times[int(later[0])]) / 2.0)
    return float(times[j])


def survival_quantile(km: KaplanMeierResult, p: float = 0.5, *,
                      between: Between = "envelope") -> SurvivalQuantile:
    """The time S reaches 1 − ``p`` and its interval where the Greenwood band's limits cross
    it (Brookmeyer & Crowley 1982; module docstring). ``"actuarial"``: the band is known at
    the limits only (:meth:`KaplanMeierResult.band_at`); with ``"envelope"`` the interval
    runs from the last limit whose lower limit is above 1 − p to the first whose upper limit
    is at or below it (wherever the band holds S at those two limits, S passes 1 − p between
    them), with ``"interpolated"`` between the log-linear crossings of the band."""
    p = check_open_unit(p, "p")
    between = check_choice(between, "between", BETWEEN)  # type: ignore[assignment]
    target = 1.0 - p
    estimate = _crossing(km.times, km.survival, target, km.censoring)
    if km.censoring == "end" or between == "interpolated":
        low = _crossing(km.times, km.low, target, km.censoring)
        high = _crossing(km.times, km.high, target, km.censoring)
    else:
        low_first = _crossing(km.times, km.low, target, "end")
        low = (float(km.times[int(np.searchsorted(km.times, low_first)) - 1])
               if math.isfinite(low_first) and low_first > km.times[0] else
               float(km.times[0]) if math.isfinite(low_first) else math.inf)
        high = _crossing(km.times, km.high, target, "end")
    return SurvivalQuantile(p=p, estimate=estimate, low=low, high=high, level=km.level)


def _area(times: FloatArray, s: FloatArray, start: float, stop: float, censoring: str) -> float:
    """∫_start^stop S(t) dt for the curve at ``times`` (steps or linear)."""
    if stop <= start:
        return 0.0
    inner = times[(times > start) & (times < stop)]
    grid = np.concatenate([[start], inner, [stop]])
    values = _curve_at(times, s, grid, censoring)
    if censoring == "actuarial":
        a, b, h = values[:-1], values[1:], np.diff(grid)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(np.where((a > 0) & (b > 0), b / np.where(a > 0, a, 1.0), 1.0))
            # ∫ a·(b/a)^{u/h} du = h (b − a) / log(b/a); a flat piece (b = a): h·a.
            geo = np.where(np.abs(ratio) > 1e-12, h * (b - a) / ratio, h * a)
        return float(np.sum(np.where((a > 0) & (b > 0), geo, h * (a + b) / 2.0)))
    return float(np.sum(values[:-1] * np.diff(grid)))


@dataclass(frozen=True)
class RMSTResult:
    """The restricted mean survival time to ``horizon``, its standard error and interval."""

    horizon: float
    estimate: float
    se: float
    low: float
    high: float
    level: float


def rmst(table: LifeTable, horizon: float, *, level: float = 0.95,
         censoring: Censoring = "actuarial", noise_variance: float = 0.0) -> RMSTResult:
    """μ(τ) = ∫_{c_0}^τ S(t) dt and its delta-method variance (module docstring), τ =
    ``horizon`` in (c_0, c_J]. ``noise_variance`` (a DP release's, :mod:`shared.dp.life_table`)
    is added to that variance; 0 (the default) changes nothing."""
    km = kaplan_meier(table, level=level, censoring=censoring)
    tau = float(horizon)
    c = km.times
    if not (math.isfinite(tau) and c[0] < tau <= c[-1]):
        raise ValueError(f"`horizon` must lie in ({c[0]:g}, {c[-1]:g}], the table's range, "
                         f"got {horizon!r}")
    extra = float(_check_noise_variance(noise_variance, (), "one number"))
    mu = _area(c, km.survival, float(c[0]), tau, censoring)
    n = _at_risk(table, censoring)
    d = table.events
    terms = _greenwood_terms(d, n)
    var = 0.0
    for j in range(d.size):
        if d[j] <= 0 or c[j] >= tau or (censoring == "end" and c[j + 1] > tau):
            continue
        if censoring == "end":  # every event at c_{j+1}
            a2 = _area(c, km.survival, float(c[j + 1]), tau, censoring) ** 2
            share = 1.0
        else:  # events spread over the interval: A(u)² averaged over it (Simpson), and only
            # the share of the interval's hazard before τ
            stop = min(float(c[j + 1]), tau)
            ends = [_area(c, km.survival, u, tau, censoring) ** 2
                    for u in (float(c[j]), (float(c[j]) + stop) / 2.0, stop)]
            a2 = (ends[0] + 4.0 * ends[1] + ends[2]) / 6.0
            share = (stop - float(c[j])) / float(c[j + 1] - c[j])
        if a2 > 0:
            var += a2 * share * float(terms[j])
    if extra:
        var += extra
    se = math.sqrt(var) if math.isfinite(var) else math.inf
    z = _z(km.level)
    return RMSTResult(horizon=tau, estimate=mu, se=se, low=mu - z * se, high=mu + z * se,
                      level=km.level)


@dataclass(frozen=True)
class RMSTDifference:
    """μ_2(τ) − μ_1(τ) (the second arm's minus the first's), its standard error (the arms'
    variances added: independent samples), interval and two-sided p-value."""

    horizon: float
    estimate: float
    se: float
    low: float
    high: float
    pvalue: float
    level: float
    arms: tuple[RMSTResult, RMSTResult]


def rmst_difference(first: LifeTable, second: LifeTable, horizon: float, *,
                    level: float = 0.95, censoring: Censoring = "actuarial",
                    noise_variance: tuple[float, float] = (0.0, 0.0)) -> RMSTDifference:
    """The RMST difference of two arms at one horizon (module docstring); ``noise_variance``:
    each arm's, added to its RMST's variance (:func:`rmst`)."""
    if len(noise_variance) != 2:
        raise ValueError("`noise_variance` must hold one value per arm (2)")
    a = rmst(first, horizon, level=level, censoring=censoring,
             noise_variance=noise_variance[0])
    b = rmst(second, horizon, level=level, censoring=censoring,
             noise_variance=noise_variance[1])
    diff = b.estimate - a.estimate
    se = math.hypot(a.se, b.se)
    z = _z(a.level)
    p = float(2.0 * stats.norm.sf(abs(diff) / se)) if se > 0 else (1.0 if diff == 0 else 0.0)
    return RMSTDifference(horizon=a.horizon, estimate=diff, se=se, low=diff - z * se,
                          high=diff + z * se, pvalue=p, level=a.level, arms=(a, b))


@dataclass(frozen=True)
class LogRankResult:
    """A weighted log-rank test over strata: χ² on ``df`` = arms − 1 and its p-value, each
    arm's observed and expected events (``observed``, ``expected``: weighted sums), the
    covariance of the first k − 1 arms' O − E (``variance``); for two arms ``zstatistic`` =
    (O_2 − E_2)/√V (positive: the second arm has more events than expected) and, unweighted,
    Peto's hazard ratio of the second arm against the first with its interval. With a noise
    covariance Σ (:func:`logrank`'s ``noise_variance``) ``variance`` is V + Σ, the covariance
    the test used."""

    statistic: float
    df: int
    pvalue: float
    observed: tuple[float, ...]
    expected: tuple[float, ...]
    variance: tuple[tuple[float, ...], ...]
    weights: str
    censoring: str
    strata: int
    zstatistic: float | None = None
    hazard_ratio: float | None = None
    hazard_ratio_interval: tuple[float, float] | None = None
    level: float = 0.95


def _check_strata(strata: Sequence[Sequence[LifeTable]]) -> list[list[LifeTable]]:
    if isinstance(strata, LifeTable) or not isinstance(strata, Sequence) or not strata:
        raise ValueError("`strata` must be a non-empty sequence of strata, each a sequence of "
                         "the arms' LifeTables")
    out: list[list[LifeTable]] = []
    arms = None
    for s, stratum in enumerate(strata):
        tables = list(stratum) if isinstance(stratum, Sequence) else []
        if not tables or not all(isinstance(t, LifeTable) for t in tables):
            raise ValueError(f"stratum {s} must be a sequence of LifeTables, one per arm")
        if arms is None:
            arms = len(tables)
        if len(tables) != arms or arms < 2:
            raise ValueError(f"every stratum must hold the same number (>= 2) of arms; stratum "
                             f"{s} holds {len(tables)}")
        if not all(np.array_equal(t.limits, tables[0].limits) for t in tables):
            raise ValueError(f"stratum {s}'s arms must share their limits")
        out.append(tables)
    return out


def _stratum_parts(tables: list[LifeTable], weights: str,
                   censoring: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Weighted O, E (per arm) and V (k × k) of one stratum."""
    n = np.array([_at_risk(t, censoring) for t in tables])  # arms × intervals
    d = np.array([t.events for t in tables])
    n_all, d_all = n.sum(axis=0), d.sum(axis=0)
    use = (d_all > 0) & (n_all > 0)
    if weights == "logrank":
        w = np.ones_like(n_all)
    elif weights == "gehan":
        w = n_all.copy()
    elif weights == "tarone-ware":
        w = np.sqrt(np.maximum(n_all, 0.0))
    else:  # peto: the pooled Kaplan-Meier just before each interval
        with np.errstate(divide="ignore", invalid="ignore"):
            h = np.where(use, d_all / np.where(n_all > 0, n_all, 1.0), 0.0)
        w = np.concatenate([[1.0], np.cumprod(1.0 - h)[:-1]])
    share = np.divide(n, n_all, out=np.zeros_like(n), where=n_all > 0)
    observed = (w * d)[:, use].sum(axis=1)
    expected = (w * share * d_all)[:, use].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(use & (n_all > 1),
                          d_all * (n_all - d_all) / np.where(n_all > 1, n_all - 1.0, 1.0), 0.0)
    k = len(tables)
    v = np.zeros((k, k))
    for g in range(k):
        for h_ in range(k):
            v[g, h_] = float(np.sum(w * w * factor * share[g] * ((g == h_) - share[h_])))
    return observed, expected, v


def logrank(strata: Sequence[Sequence[LifeTable]], *, weights: Weights = "logrank",
            censoring: Censoring = "actuarial", level: float = 0.95,
            noise_variance: ArrayLike | None = None) -> LogRankResult:
    """The weighted log-rank test of k arms stratified by ``strata`` (each a sequence of the
    arms' tables on one stratum's limits; one stratum: the pooled test), module docstring.

    ``noise_variance`` (tables whose counts carry noise, DP releases:
    :mod:`shared.dp.life_table`): the (k − 1) × (k − 1) covariance Σ that the noise adds to
    the first k − 1 arms' O − E. The test then refers O − E to V + Σ: χ² = (O − E)'(V + Σ)⁻¹
    (O − E), z = (O_2 − E_2)/√(V + Σ), and Peto's log hazard ratio (O_2 − E_2)/V keeps its
    estimate with the interval ± z·√(V + Σ)/V. Without it (the default) nothing changes."""
    tables = _check_strata(strata)
    weighed = check_choice(weights, "weights", WEIGHTS)
    how = check_choice(censoring, "censoring", CENSORING)
    level = check_open_unit(level, "level")
    k = len(tables[0])
    observed, expected, v = np.zeros(k), np.zeros(k), np.zeros((k, k))
    for stratum in tables:
        o, e, vs = _stratum_parts(stratum, weighed, how)
        observed += o
        expected += e
        v += vs
    u = (observed - expected)[1:]
    sub = v[1:, 1:]
    if not np.all(np.isfinite(sub)) or np.linalg.matrix_rank(sub) < k - 1:
        raise ValueError("the log-rank variance is singular: the arms have no events at risk "
                         "together (no interval with events holds two arms at risk)")
    hypergeometric = sub
    if noise_variance is not None:
        sub = sub + _check_noise_variance(np.atleast_2d(np.asarray(noise_variance, dtype=float)),
                                          (k - 1, k - 1), f"a {k - 1} × {k - 1} covariance")
    chi2 = float(u @ np.linalg.solve(sub, u))
    result = dict(statistic=chi2, df=k - 1, pvalue=float(stats.chi2.sf(chi2, k - 1)),
                  observed=tuple(float(x) for x in observed),
                  expected=tuple(float(x) for x in expected),
                  variance=tuple(tuple(float(x) for x in row) for row in sub),
                  weights=weighed, censoring=how, strata=len(tables), level=level)
    if k == 2:
        var = float(sub[0, 0])
        result["zstatistic"] = float(u[0] / math.sqrt(var))
        if weighed == "logrank" and noise_variance is not None:
            info = float(hypergeometric[0, 0])
            log_hr, half = float(u[0] / info), _z(level) * math.sqrt(var) / info
            result["hazard_ratio"] = math.exp(log_hr)
            result["hazard_ratio_interval"] = (math.exp(log_hr - half), math.exp(log_hr + half))
        elif weighed == "logrank":
            log_hr, half = float(u[0] / var), _z(level) / math.sqrt(var)
            result["hazard_ratio"] = math.exp(log_hr)
            result["hazard_ratio_interval"] = (math.exp(log_hr - half), math.exp(log_hr + half))
    return LogRankResult(**result)  # type: ignore[arg-type]


def peto_heterogeneity(strata: Sequence[Sequence[LifeTable]], *,
                       censoring: Censoring = "actuarial",
                       level: float = 0.95) -> HeterogeneityResult:
    """Cochran's Q, I² and τ² across strata of Peto's log hazard ratio (O_2 − E_2)/V, variance
    1/V per stratum (two arms; every stratum with events in both arms' risk sets)."""
    tables = _check_strata(strata)
    if len(tables[0]) != 2:
        raise ValueError("Peto's hazard ratio compares two arms")
    how = check_choice(censoring, "censoring", CENSORING)
    estimates, variances = [], []
    for s, stratum in enumerate(tables):
        o, e, v = _stratum_parts(stratum, "logrank", how)
        if not v[1, 1] > 0:
            raise ValueError(f"stratum {s} has no events with both arms at risk: its hazard "
                             "ratio is not estimable")
        estimates.append(float((o[1] - e[1]) / v[1, 1]))
        variances.append(float(1.0 / v[1, 1]))
    return cochran_q(estimates, variances, level=level)
