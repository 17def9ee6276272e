"""DP boxplots per center and pooled: the spec, a box's numbers and the result (docs/methods.md
§5.6, §6)."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result
from shared.fields import MIN_EPSILON, Bounds, Levels, canonical_method, check_leaves, epsilon_field


class DPBoxplotAnalysis(_AnalysisSpec):
    """ε-DP boxplots of one group level (or every record): each center's own and/or the pooled
    box (docs/methods.md §6). Each center spends ``epsilon`` per box asked (so 2ε for both)."""

    kind: Literal["dp_boxplot"]
    # The pooled box's smallest round spends ε/8, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(8 * MIN_EPSILON)]
    bounds: Bounds = Field(description="public bounds the data are clipped to")
    group: str | None = Field(default=None, min_length=1, max_length=128,
                              description="one declared level; none for every record")
    per_center: bool = True
    pooled: bool = True
    depth: int = Field(default=6, ge=1, le=16, description="pooled grid: branching**depth leaves")
    branching: int = Field(default=4, ge=2, le=16)
    # The default is shared.dp.pooled.EXTRA_LEVELS (not imported: the models stay light).
    levels: Levels = Field(
        default_factory=lambda: [0.05, 0.95],
        description="pooled box: further levels read off its tree besides the quartiles "
                    "(post-processing: no ε); strictly increasing, each in (0, 1)")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center boxes, the pooled box, or both")
        check_leaves(self.branching, self.depth)
        return self


class Box(_Result):
    """A seven-number summary; outliers are DP counts, not points."""

    lower_outliers: int
    lower_whisker: float
    q1: float
    median: float
    q3: float
    upper_whisker: float
    upper_outliers: int
    n: int
    lower_branch: str = Field(description="where the whisker is: \"extreme\" (a center's box: "
                              "the walk's ψ), \"fence\" (Q ± 1.5·IQR) or \"record\" (the "
                              "pooled box: the tree's most extreme record inside the fence)")
    upper_branch: str = Field(description="as lower_branch")
    epsilon: float
    # DPBoxplot's version (shared.fields); the names stored studies carry are read as the
    # current ones.
    method: Annotated[str, BeforeValidator(canonical_method)]
    outlier_halfwidth: float | None = Field(
        default=None, description="each outlier count is within ± this of the true count with "
                                  "probability 95 % (Laplace noise)")
    quartile_rank_halfwidth: float | None = Field(
        default=None, description="Q1, median and Q3 are each within ± this many records of "
                                  "their level's rank with probability about 95 % (JointExp's "
                                  "Laplace bridge, where the data are evenly spread; pooled: "
                                  "about the tree leaf holding the value, conservative)")
    extreme_rank_halfwidth: float | None = Field(
        default=None, description="a whisker at the walk's ψ: the grid step next to ψ is within "
                                  "± this many records of the walk's count target with "
                                  "probability >= 95 %, for any data (the pooled box: none, its "
                                  "whiskers are Tukey's; stored before: at most the centers' "
                                  "Σ √n/20 + this many pooled records lie beyond it)")
    n_halfwidth: float | None = Field(
        default=None, description="a DP n (the pooled box's consistent root count) is within ± "
                                  "this of the true number with probability 95 %; None: n is "
                                  "the public size a center's λ_n uses, not an estimate")


class LevelValue(_Result):
    """One quantile: its level and value."""

    level: float
    value: float


class PooledBoxResult(Box):
    grid: tuple[float, float]
    centers: list[str] = Field(description="the centers whose records the box holds")
    levels: list[LevelValue] = Field(
        default_factory=list,
        description="the further levels asked, read off the pooled tree by the quartiles' "
                    "interpolation (post-processing: no ε)")


class DPBoxplotResult(_Result):
    kind: Literal["dp_boxplot"] = "dp_boxplot"
    status: Literal["succeeded"] = "succeeded"
    group: str | None
    per_center: dict[str, Box]
    pooled: PooledBoxResult | None
    spent: dict[str, float] = Field(description="ε each center reported spending")
    excluded: list[ExcludedCenter]
