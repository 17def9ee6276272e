"""Wire models for the YJ data and quantile-loss exchanges between coordinator and centers.

Same conventions as :mod:`shared.protocol` (pydantic v2, frozen, unknown fields refused); each
release converts to and from the pure result of :mod:`shared.quantiles`:

* coordinator → center: :class:`YJMomentsRequest` (one λ); center → coordinator:
  :class:`YJMomentsRelease` (n and the three sums, :class:`~shared.quantiles.YJMoments`).
* coordinator → center: :class:`QuantileLossRequest` (u, level); center → coordinator:
  :class:`QuantileLossRelease` (:class:`~shared.quantiles.QuantileLoss`). The loss leaks data:
  centers keep it off by default.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.quantiles.loss import QuantileLoss
from shared.quantiles.yj_data import YJMoments


class QuantileWireModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class YJMomentsRequest(QuantileWireModel):
    """Ask a center for its moment sums of ``variable`` (one declared level ``group``, or all
    records) at one λ of one ``study``; the center caps the calls per study.

    With ``epsilon`` the center clips the values to the public ``bounds`` and adds Laplace noise
    calibrated to the three sums' sensitivity there, paid from its budget (n stays exact).
    """

    variable: str = Field(min_length=1)
    group: str | None = None
    study: str = Field(min_length=1, max_length=128)
    lmbda: float = Field(ge=-10.0, le=10.0)
    epsilon: float | None = Field(default=None, ge=1e-6, le=100.0)
    bounds: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _noise_needs_bounds(self) -> YJMomentsRequest:
        if self.epsilon is not None:
            if self.bounds is None or not self.bounds[0] < self.bounds[1]:
                raise ValueError("noised moments need public bounds (lower < upper)")
        return self


class YJMomentsRelease(QuantileWireModel):
    """n, Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)² of one center (sums possibly noised)."""

    lmbda: float
    n: int = Field(ge=0)
    sum_log: float
    sum_yj: float
    sum_yj_sq: float

    @classmethod
    def from_result(cls, moments: YJMoments) -> YJMomentsRelease:
        return cls(
            lmbda=moments.lmbda,
            n=moments.n,
            sum_log=moments.sum_log,
            sum_yj=moments.sum_yj,
            sum_yj_sq=moments.sum_yj_sq,
        )

    def to_result(self) -> YJMoments:
        return YJMoments(
            lmbda=self.lmbda,
            n=self.n,
            sum_log=self.sum_log,
            sum_yj=self.sum_yj,
            sum_yj_sq=self.sum_yj_sq,
        )


class QuantileLossRequest(QuantileWireModel):
    """Ask a center for Σ ρ_level(x − u) of ``variable`` (benchmark only: it leaks data; centers
    refuse it unless switched on)."""

    variable: str = Field(min_length=1)
    group: str | None = None
    u: float
    level: float = Field(gt=0.0, lt=1.0)


class QuantileLossRelease(QuantileWireModel):
    """One center's quantile loss at (u, level)."""

    u: float
    level: float = Field(gt=0.0, lt=1.0)
    n: int = Field(ge=0)
    loss: float = Field(ge=0.0)

    @classmethod
    def from_result(cls, loss: QuantileLoss) -> QuantileLossRelease:
        return cls(u=loss.u, level=loss.level, n=loss.n, loss=loss.loss)

    def to_result(self) -> QuantileLoss:
        return QuantileLoss(u=self.u, level=self.level, n=self.n, loss=self.loss)
