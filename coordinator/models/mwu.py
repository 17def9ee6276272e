"""The federated Mann-Whitney tests: the spec, each test with its centers' parts, the probabilistic
index and the heterogeneity between centers (docs/methods.md §3-4)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result
from coordinator.models.table import TableResult
from shared.fields import Alternative, Distinct, Epsilon

MWUTest = Literal["sum", "weighted", "fisher", "table"]


MWU_TESTS: tuple[MWUTest, ...] = ("sum", "weighted", "fisher", "table")


class MWUAnalysis(_AnalysisSpec):
    """Federated Mann-Whitney tests of X against Y (needs ``groups``)."""

    kind: Literal["mwu"]
    min_groups = 2
    article = "an"
    tests: Annotated[list[MWUTest], Distinct] = Field(
        default_factory=lambda: list(MWU_TESTS), min_length=1,
        max_length=4,
    )
    alternative: Alternative = "two-sided"
    epsilon: Epsilon | None = Field(
        default=None,
        description="ε each center spends to noise its local U (none: no noise, no spending)",
    )


class TestPart(_Result):
    """One center's part of a test (for the table test: the federated table as a whole)."""

    center: str
    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    weight: float
    null: str | None = Field(default=None, description=(
        "the law this center's p-value comes from: exact (U's permutation law), exact+noise "
        "(that law + the DP noise), normal, normal+noise (N(0, V) + the DP noise, exact); "
        "absent in results stored before"))


class TestResult(_Result):
    method: str
    statistic: float
    pvalue: float
    df: int | None = Field(default=None, description="degrees of freedom of Fisher's χ² (T)")
    parts: list[TestPart]
    null: str | None = Field(default=None, description=(
        "the law the p-value comes from (shared.mwu.NULLS): exact, exact+noise, normal, "
        "normal+noise or chi2 (Fisher, over the parts' p-values); absent in results stored "
        "before"))


class Effect(_Result):
    """The probabilistic index θ = P(Y > X) + ½P(Y = X) with its 95 % interval
    (``shared.effects``): ``center`` one center's, or "stratified" over every center (the
    estimand of the sum test)."""

    center: str
    estimate: float
    low: float
    high: float
    level: float
    n_x: int
    n_y: int
    method: str


class Heterogeneity(_Result):
    """Between-center heterogeneity of the probabilistic index θ̂_c (``shared.heterogeneity``;
    docs/methods.md §12.4): Cochran's Q (``statistic``) with its χ²_{``df``} ``pvalue``, I²
    with its Q-profile interval (Viechtbauer 2007), DerSimonian-Laird τ² with its Q-profile
    interval, and the per-center θ̂_c and variances they weigh."""

    centers: list[str]
    estimates: list[float]
    variances: list[float]
    statistic: float
    df: int
    pvalue: float
    i_squared: float
    i_squared_interval: tuple[float, float] | None = Field(
        description="the Q-profile interval (Higgins & Thompson's test-based one in results "
        "stored before; none there for two centers with Q <= 2)")
    tau_squared: float
    level: float
    tau_squared_interval: tuple[float, float] | None = Field(
        default=None, description="τ²'s Q-profile interval at `level` (none in results "
        "stored before it was computed)")
    variance_at: float | None = Field(
        default=None, description="the pooled θ at which every center's variance was taken "
        "(none in results stored before it was)")


class MWUResult(_Result):
    kind: Literal["mwu"] = "mwu"
    status: Literal["succeeded"] = "succeeded"
    alternative: str
    tests: dict[str, TestResult]
    effects: list[Effect] = Field(
        default_factory=list,
        description="the probabilistic index of each center, then the stratified one")
    table: TableResult | None = Field(description="the federated table behind the table test")
    excluded: list[ExcludedCenter]
    heterogeneity: Heterogeneity | None = Field(
        default=None, description="Cochran's Q and I² of the centers' probabilistic indices "
        "(none: fewer than two centers released U, or see `heterogeneity_note`)")
    heterogeneity_note: str | None = Field(
        default=None, description="why there is no heterogeneity, when there is none")
