"""Table 1 (describe): the spec, each row per variable, center and arm with its intervals, the
noise's parts, the arms' sizes and the result."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from coordinator.models._base import (
    DescribeMode,
    ExcludedCenter,
    VariableName,
    _AnalysisSpec,
    _Result,
)
from coordinator.models.categorical import CategoryArm
from shared.fields import MIN_EPSILON, Bounds, Distinct, epsilon_field


class DescribeAnalysis(_AnalysisSpec):
    """Descriptive statistics ("Table 1") of several variables: N, mean (SD), median [IQR], a
    histogram, per center and pooled, per arm (the study's ``groups``) and overall
    (docs/coordinator.md, "Describe"). ``mode`` "table" (the default without ``epsilon``):
    read from each variable's federated K-anonymous table, no ε; "dp" (the default with
    ``epsilon``): each center's ε-DP description (``shared.describe.dp_describe``), ``epsilon``
    spent **per variable and per arm** at each center, the values clipped to ``bounds`` or,
    for a variable without, the centers' declared public bounds."""

    kind: Literal["describe"]
    variables: Annotated[list[VariableName], Distinct] | None = Field(
        default=None, min_length=1, max_length=32,
        description="the variables described (none: the study's variable)")
    mode: DescribeMode | None = Field(
        default=None, description="dp or table; none: dp when `epsilon` is given, else table")
    # The count, its smallest part, spends ε/20, and every release needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(20 * MIN_EPSILON)] | None = Field(
        default=None, description="dp: the ε each center spends per variable and per arm")
    bounds: dict[VariableName, Bounds] | None = Field(
        default=None, description="dp: public bounds per variable (default: the centers' "
                                  "declared bounds of the variable)")
    bins: int = Field(default=10, ge=1, le=200, description="dp: equal-width histogram bins")
    per_center: bool = True
    pooled: bool = True
    categorical: Annotated[list[VariableName], Distinct] | None = Field(
        default=None, min_length=1, max_length=32,
        description="categorical variables shown as n (%) rows per category and arm, with "
                    "their missing n (%): the centers' K-anonymous counts per category (table) "
                    "or their ε-DP counts (dp: `epsilon` per variable and arm, per center)")

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center rows, the pooled rows, or both")
        both = sorted(set(self.categorical or ()) & set(self.variables or ()))
        if both:
            raise ValueError(f"{both} named both in `variables` (numeric) and in `categorical`")
        if self.mode == "dp" and self.epsilon is None:
            raise ValueError("a dp describe needs `epsilon` (per variable and arm, per center)")
        if self.mode == "table" and (self.epsilon is not None or self.bounds is not None):
            raise ValueError("a table describe spends no ε: drop `epsilon` and `bounds`")
        if self.bounds and self.variables is not None:
            unknown = sorted(set(self.bounds) - set(self.variables))
            if unknown:
                raise ValueError(f"`bounds` names variables not described: {unknown}")
        return self

    @property
    def method(self) -> DescribeMode:
        """The mode in force: as given, else dp with ``epsilon`` and table without."""
        return self.mode or ("dp" if self.epsilon is not None else "table")

    def described(self, study_variable: str) -> list[str]:
        """The variables described (the study's own when none is named)."""
        return list(self.variables) if self.variables is not None else [study_variable]


class DescribeRow(_Result):
    """One line of a describe result: one variable, one center (or "pooled"), one arm (a group
    level, or "all": every record of the arms). ``missing``: the records of the arm missing
    the variable, from the centers' exact missing counts (each 0 or >= K; docs/privacy.md,
    guarantee 15), or in a DP row the noisy count every center's description released with
    its count (``missing_interval`` its 95 % interval); none where a center releases neither
    (complete cases, a DP-mode center under a relation without it);
    ``minimum``/``maximum`` are no
    longer released (kept for results stored before: there, JointExp's 1st and 99th
    percentiles). Each ``*_interval`` is the number's 95 % interval (DP: of what the exact data
    would give; table: exact bounds), ``uncertainty`` says how; ``notes`` say why a number is
    not estimable."""

    variable: str
    center: str
    arm: str
    n: int
    missing: int | None = None
    missing_interval: tuple[float, float] | None = Field(
        default=None, description="DP: the missing count's 95 % interval (Laplace, the count's "
                                  "scale); none: exact, or not released")
    mean: float | None
    sd: float | None
    median: float | None
    q1: float | None
    q3: float | None
    minimum: float | None = None
    maximum: float | None = None
    edges: list[float]
    counts: list[float]
    method: str = Field(description="how the row was computed (mechanisms, or the table)")
    epsilon: float = Field(description="ε each center spent on the row's releases (0: table)")
    n_interval: tuple[float, float] | None = None
    mean_interval: tuple[float, float] | None = None
    sd_interval: tuple[float, float] | None = None
    q1_interval: tuple[float, float] | None = None
    median_interval: tuple[float, float] | None = None
    q3_interval: tuple[float, float] | None = None
    rank_halfwidth: float | None = Field(
        default=None, description="DP: the quartiles' 95 % rank error, in records")
    clip: tuple[float, float] | None = Field(
        default=None, description="DP, a center's row: the range its sums were clipped to")
    uncertainty: str | None = Field(default=None, description="how the intervals were made")
    notes: list[str] = Field(default_factory=list)


class NoisePart(_Result):
    """One part of a DP description's ε split: its ε, mechanism, sensitivity and Laplace scale
    (none for JointExp, an exponential mechanism)."""

    name: str
    epsilon: float
    mechanism: str
    sensitivity: float
    scale: float | None


class ArmSize(_Result):
    """The one size N of a column of a DP Table 1 (one center's arm or overall, or pooled),
    shared by every row of the column (docs/methods.md, "One consistent DP Table 1"), with
    its 95 % interval (of the true size: the noise)."""

    center: str
    arm: str
    n: int
    n_interval: tuple[float, float] | None = None


class DescribeResult(_Result):
    kind: Literal["describe"] = "describe"
    status: Literal["succeeded"] = "succeeded"
    mode: DescribeMode
    k: int
    epsilon: float | None = Field(description="dp: ε per variable and arm, per center")
    rows: list[DescribeRow]
    units: dict[str, str] = Field(default_factory=dict,
                                  description="the declared unit of each variable that has one")
    noise: dict[str, list[NoisePart]] = Field(
        default_factory=dict, description="dp: per variable, the ε split of each center's "
                                          "description: every part's mechanism and noise")
    spent: dict[str, float] = Field(default_factory=dict,
                                    description="ε each center reported spending")
    excluded: list[ExcludedCenter]
    categorical: list[CategoryArm] = Field(
        default_factory=list, description="the categorical variables' n (%) per category, "
                                          "center and arm")
    sizes: list[ArmSize] = Field(
        default_factory=list, description="dp: the one N of each column (center or pooled, "
                                          "arm or all) every row of it adds up to")
    notes: list[str] = Field(default_factory=list,
                             description="what was not released, and why")
