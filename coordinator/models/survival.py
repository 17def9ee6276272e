"""Time to event: the spec of a survival analysis, each arm's Kaplan-Meier curve with its band
and numbers at risk, median survival, RMST and its difference, the log-rank test stratified by
center with Peto's hazard ratio (docs/methods.md §13)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from coordinator.models._base import ExcludedCenter, VariableName, _AnalysisSpec, _Result
from shared.fields import Epsilon

SurvivalWeights = Literal["logrank", "gehan", "tarone-ware", "peto"]
SurvivalCensoring = Literal["actuarial", "end"]
MAX_INTERVALS = 200


class SurvivalAnalysis(_AnalysisSpec):
    """Time to an event by arm: Kaplan-Meier curves with 95 % bands and the numbers at risk,
    median survival, the restricted mean survival time (RMST) to the horizon and its difference
    between the arms, and the log-rank test stratified by center with Peto's hazard ratio, from
    each center's ε-DP life table per arm on a public grid of ``intervals`` equal intervals
    from 0 to ``horizon`` (docs/methods.md §13). ``epsilon`` is spent **per arm** at each
    center."""

    min_groups: ClassVar[int] = 2

    kind: Literal["survival"]
    variable: VariableName = Field(description="a time-to-event variable the centers declare")
    epsilon: Epsilon = Field(description="the ε each center spends per arm")
    horizon: float = Field(gt=0, le=1e9, description="the end of the grid and the RMST's "
                           "horizon τ, in the variable's unit; inside every center's declared "
                           "follow-up")
    intervals: int = Field(default=12, ge=1, le=MAX_INTERVALS,
                           description="equal intervals of the grid from 0 to `horizon`")
    weights: SurvivalWeights = Field(
        default="logrank", description="the log-rank test's weights: 1 (log-rank), the number "
                                       "at risk (gehan: Gehan-Breslow), its square root "
                                       "(tarone-ware), the pooled curve (peto: Peto-Peto)")
    censoring: SurvivalCensoring = Field(
        default="actuarial", description="where in its interval a censoring is taken to be: "
                                         "spread over it (actuarial), or at its end")
    per_center: bool = Field(default=True, description="show each center's own curves too")

    @property
    def grid(self) -> list[float]:
        """The public limits 0 = c_0 < ... < c_J = horizon."""
        step = self.horizon / self.intervals
        return [round(i * step, 12) if i < self.intervals else self.horizon
                for i in range(self.intervals + 1)]


class SurvivalCurve(_Result):
    """One arm's curve (of one center, or ``"pooled"``: the centers' noisy counts summed) at the
    grid's limits: S(c_j) with its 95 % log-log band (Greenwood's variance plus the noise's;
    none once S is 0), the number at risk at each limit and the events and censorings in each
    interval (projected onto counts >= 0), median survival with its Brookmeyer-Crowley interval
    (none: the curve, or that end of its band, does not reach ½ within the grid) and the RMST to
    the horizon with its 95 % interval."""

    center: str
    arm: str
    times: list[float]
    survival: list[float]
    low: list[float | None]
    high: list[float | None]
    at_risk: list[float]
    events: list[float]
    censored: list[float]
    median: float | None
    median_low: float | None
    median_high: float | None
    rmst: float
    rmst_low: float
    rmst_high: float
    rmst_se: float
    noisy_total: float = Field(description="Σ of the noisy counts: an unbiased size estimate")


class RMSTDifferenceResult(_Result):
    """RMST of the second arm minus the first's at the horizon (pooled), its 95 % interval and
    two-sided p-value; ``noise_se`` the part of its standard error the DP noise adds."""

    horizon: float
    estimate: float
    se: float
    low: float
    high: float
    pvalue: float
    sampling_se: float
    noise_se: float


class SurvivalTest(_Result):
    """A log-rank test of the arms: ``stratified`` by center (``strata`` centers) or of the
    pooled tables; χ² on ``df``, its p-value, the second arm's O − E and its variance (the
    noise's included), and Peto's hazard ratio of the second arm against the first with its
    95 % interval (unweighted tests only)."""

    name: Literal["stratified", "pooled"]
    weights: SurvivalWeights
    statistic: float
    df: int
    pvalue: float
    observed_minus_expected: float
    variance: float
    noise_variance: float
    strata: int
    hazard_ratio: float | None = None
    hazard_ratio_low: float | None = None
    hazard_ratio_high: float | None = None


class SurvivalResult(_Result):
    kind: Literal["survival"] = "survival"
    status: Literal["succeeded"] = "succeeded"
    variable: str
    mode: Literal["dp"] = "dp"
    epsilon: float = Field(description="ε per arm, per center")
    horizon: float
    grid: list[float]
    weights: SurvivalWeights
    censoring: SurvivalCensoring
    unit: str | None = None
    curves: list[SurvivalCurve] = Field(description="the pooled arms, then each center's")
    rmst_difference: RMSTDifferenceResult
    tests: list[SurvivalTest]
    spent: dict[str, float] = Field(description="ε each center reported spending")
    excluded: list[ExcludedCenter]
