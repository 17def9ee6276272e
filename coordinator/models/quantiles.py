"""Quantile estimators from the federated table: the spec, the estimators' names and the result."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result
from shared.fields import DP_MAX_EVALUATIONS, MIN_EPSILON, Bounds, Distinct, Levels, epsilon_field

Estimator = Literal["yj_table", "interpolation", "extrapolation", "yj_shaped", "yj_data"]


ESTIMATOR_NAMES: tuple[Estimator, ...] = (
    "yj_table", "interpolation", "extrapolation", "yj_shaped", "yj_data"
)


TABLE_ESTIMATORS: tuple[Estimator, ...] = (
    "yj_table", "interpolation", "extrapolation", "yj_shaped"
)


class QuantilesAnalysis(_AnalysisSpec):
    """Quantiles from the study's federated table (no further release: costs the centers
    nothing), and with ``yj_data`` from the centers' YJ moment sums; with ``groups``, each
    group's own."""

    kind: Literal["quantiles"]
    levels: Levels = Field(description="strictly increasing, each in (0, 1)")
    estimators: Annotated[list[Estimator], Distinct] = Field(
        default_factory=lambda: list(TABLE_ESTIMATORS),
        min_length=1, max_length=len(ESTIMATOR_NAMES),
        description="yj_data asks every center for ε-DP moment sums at each λ Brent tries "
                    "(needs `epsilon` and `bounds`); the others read the federated table only",
    )
    # Each λ Brent tries spends ε / DP_MAX_EVALUATIONS, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(DP_MAX_EVALUATIONS * MIN_EPSILON)] | None = Field(
        default=None, description="yj_data: the ε each center spends per group on the fit",
    )
    bounds: Bounds | None = Field(
        default=None, description="yj_data: public bounds the values are clipped to"
    )

    @model_validator(mode="after")
    def _yj_data_needs_privacy(self) -> Self:
        if "yj_data" in self.estimators:
            if self.epsilon is None or self.bounds is None:
                raise ValueError("yj_data needs `epsilon` and `bounds`: centers release only "
                                 "ε-DP moment sums of values clipped to public bounds")
        return self


class EstimateResult(_Result):
    quantiles: list[float] | None
    error: str | None = None


class QuantilesResult(_Result):
    kind: Literal["quantiles"] = "quantiles"
    status: Literal["succeeded"] = "succeeded"
    levels: list[float]
    estimates: dict[str, dict[str, EstimateResult]] = Field(
        description="estimator -> group ('all' without groups) -> quantiles or the reason"
    )
    table_totals: list[float] = Field(description="records per group in the federated table")
    brackets: dict[str, list[tuple[float, float]]] = Field(
        default_factory=dict,
        description="group -> per level, the table's bins the sample quantile lies in: the "
                    "bin crossing the level (certain with whole counts), with its neighbours "
                    "where counts were shared out (conservative; docs/methods.md §8.9)")
    excluded: list[ExcludedCenter] = Field(
        default_factory=list, description="the centers the federated table was built without")
