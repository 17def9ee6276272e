"""DP quantiles per center: the spec and the result (docs/methods.md §5)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result
from shared.fields import Bounds, DPQuantileAlgorithm, Epsilon, Levels


class DPQuantilesAnalysis(_AnalysisSpec):
    """Each center's ε-DP quantiles of one group level (or every record); ε per center."""

    kind: Literal["dp_quantiles"]
    epsilon: Epsilon
    bounds: Bounds = Field(description="public bounds the data are clipped to")
    levels: Levels
    algorithm: DPQuantileAlgorithm = "joint_exp"
    group: str | None = Field(default=None, min_length=1, max_length=128)


class DPQuantilesResult(_Result):
    kind: Literal["dp_quantiles"] = "dp_quantiles"
    status: Literal["succeeded"] = "succeeded"
    group: str | None
    algorithm: str
    levels: list[float]
    per_center: dict[str, list[float]]
    spent: dict[str, float] = Field(description="ε each center reported spending")
    rank_halfwidth: dict[str, float | None] = Field(
        default_factory=dict,
        description="each center's 95 % rank error of its values, in records (data locally "
                    "evenly spread; none for ApproxQuantile)")
    n: dict[str, int | None] = Field(
        default_factory=dict, description="each center's size, rounded down to its K")
    excluded: list[ExcludedCenter]
