"""Categorical variables: the spec, each released cell as n (%) with its interval, the χ², Fisher
and CMH tests and the result."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from coordinator.models._base import (
    DescribeMode,
    ExcludedCenter,
    VariableName,
    _AnalysisSpec,
    _Result,
)
from shared.fields import Epsilon


class CategoricalAnalysis(_AnalysisSpec):
    """A categorical variable by arm: n (%) per category with Wilson intervals, Pearson's χ²
    (Fisher's exact test for a small 2×2 table) and the Cochran-Mantel-Haenszel test stratified
    by center (docs/methods.md §12). ``mode`` "table" (the default without ``epsilon``): each
    center's K-anonymous counts per category, no ε; "dp" (the default with ``epsilon``): each
    center's ε-DP counts, ``epsilon`` spent **per arm** at each center."""

    kind: Literal["categorical"]
    variable: VariableName = Field(description="a categorical variable the centers declare")
    mode: DescribeMode | None = Field(
        default=None, description="dp or table; none: dp when `epsilon` is given, else table")
    epsilon: Epsilon | None = Field(default=None,
                                    description="dp: the ε each center spends per arm")
    per_center: bool = Field(default=True, description="show each center's own counts too")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if self.mode == "dp" and self.epsilon is None:
            raise ValueError("a dp categorical analysis needs `epsilon` (per arm, per center)")
        if self.mode == "table" and self.epsilon is not None:
            raise ValueError("a table categorical analysis spends no ε: drop `epsilon`")
        return self

    @property
    def method(self) -> DescribeMode:
        """The mode in force: as given, else dp with ``epsilon`` and table without."""
        return self.mode or ("dp" if self.epsilon is not None else "table")


class CategoryCell(_Result):
    """One released cell of a categorical variable in one arm: its ``label`` (the declared
    ``categories`` merged into it, "missing" for the missing cell), its count, its share of the
    arm's ``n`` in percent and that share's 95 % interval (Wilson; dp: the score interval
    with the noise variance added, docs/methods.md §12.7). ``count_interval``: dp, the 95 %
    interval of the true count."""

    label: str
    categories: list[str | None]
    count: float
    percent: float | None
    low: float | None
    high: float | None
    count_interval: tuple[float, float] | None = None


class CategoryArm(_Result):
    """A categorical variable in one arm (a group level, or "all") of one center or "pooled":
    its cells (the missing cell left out when it is released alone), ``n`` their total, and the
    records ``missing`` the variable (none when not released alone: merged with a category, or
    the center does not release it)."""

    variable: str
    center: str
    arm: str
    n: float
    missing: float | None = None
    missing_interval: tuple[float, float] | None = None
    cells: list[CategoryCell]


class CategoricalTest(_Result):
    """One test of association between arm and category: Pearson's χ², Fisher's exact 2×2,
    or Cochran-Mantel-Haenszel stratified by center (``odds_ratio`` and its 95 % interval for
    2×2 tables)."""

    name: str
    method: str
    statistic: float
    df: int | None = None
    pvalue: float
    odds_ratio: float | None = None
    low: float | None = None
    high: float | None = None


class CategoricalResult(_Result):
    kind: Literal["categorical"] = "categorical"
    status: Literal["succeeded"] = "succeeded"
    variable: str
    mode: DescribeMode
    k: int
    epsilon: float | None = Field(description="dp: ε per arm, per center")
    categories: list[str] = Field(description="the declared categories, in their order")
    arms: list[CategoryArm]
    tests: list[CategoricalTest] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list,
                             description="cells merged, tests not computed and why")
    spent: dict[str, float] = Field(default_factory=dict,
                                    description="ε each center reported spending")
    excluded: list[ExcludedCenter]
