"""Wire models for the YJ data and quantile-loss exchanges between coordinator and centers.

The one wire layer of :mod:`shared.protocol` (``WireModel``: the same serialization, so request
keys are hashed alike everywhere) and its field types (:mod:`shared.fields`); each release
converts to and from the pure result of :mod:`shared.quantiles`:

* coordinator → center: :class:`YJMomentsRequest` (one λ, ε, public bounds); center →
  coordinator: :class:`YJMomentsRelease` (n and the three noised sums,
  :class:`~shared.quantiles.YJMoments`).
* coordinator → center: :class:`QuantileLossRequest` (u, level); center → coordinator:
  :class:`QuantileLossRelease` (:class:`~shared.quantiles.QuantileLoss`). The loss leaks data:
  centers keep it off by default.
"""

from __future__ import annotations

from pydantic import Field, FiniteFloat

from shared.fields import MAX_BOUND, Bounds, Epsilon
from shared.protocol import WireModel
from shared.quantiles.loss import QuantileLoss
from shared.quantiles.yj_data import YJMoments


class YJMomentsRequest(WireModel):
    """Ask a center for its ε-DP moment sums of ``variable`` (one declared level ``group``, or
    all records) at one λ.

    The center clips the values to the public ``bounds`` and adds Laplace noise calibrated to
    the three sums' sensitivity there, paid from its budget; ``n`` is the selection's size (a
    K-anonymous count, the same the center's tables total). Un-noised sums are never released:
    from the sums at a few λ the values of a small sample can be solved for.
    """

    variable: str = Field(min_length=1)
    group: str | None = None
    lmbda: float = Field(ge=-10.0, le=10.0, allow_inf_nan=False)
    epsilon: Epsilon
    bounds: Bounds


class YJMomentsRelease(WireModel):
    """n, Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)² of one center (the sums noised)."""

    lmbda: FiniteFloat
    n: int = Field(ge=0)
    sum_log: FiniteFloat
    sum_yj: FiniteFloat
    sum_yj_sq: FiniteFloat

    @classmethod
    def from_result(cls, moments: YJMoments) -> YJMomentsRelease:
        return cls._from_fields(moments)

    def to_result(self) -> YJMoments:
        return self._to_fields(YJMoments)


class QuantileLossRequest(WireModel):
    """Ask a center for Σ ρ_level(x − u) of ``variable`` (benchmark only: it leaks data; centers
    refuse it unless switched on)."""

    variable: str = Field(min_length=1)
    group: str | None = None
    u: float = Field(ge=-MAX_BOUND, le=MAX_BOUND, allow_inf_nan=False)
    level: float = Field(gt=0.0, lt=1.0)


class QuantileLossRelease(WireModel):
    """One center's quantile loss at (u, level)."""

    u: FiniteFloat
    level: float = Field(gt=0.0, lt=1.0)
    n: int = Field(ge=0)
    loss: FiniteFloat = Field(ge=0.0)

    @classmethod
    def from_result(cls, loss: QuantileLoss) -> QuantileLossRelease:
        return cls._from_fields(loss)

    def to_result(self) -> QuantileLoss:
        return self._to_fields(QuantileLoss)
