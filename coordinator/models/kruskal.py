"""k arms: the Kruskal-Wallis tests (and the Jonckheere-Terpstra trend), per center and federated:
the spec and the result (docs/methods.md §12)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coordinator.models._base import MAX_GROUPS, ExcludedCenter, _AnalysisSpec, _Result
from coordinator.models.table import TableResult

KruskalTest = Literal["table", "sum", "weighted"]


KRUSKAL_TESTS: tuple[KruskalTest, ...] = ("table", "sum", "weighted")


# shared.jonckheere.TREND_ALTERNATIVES (not imported: the models stay light).
TrendAlternative = Literal["increasing", "decreasing", "two-sided"]


class KruskalAnalysis(_AnalysisSpec):
    """Kruskal-Wallis across the study's arms (``groups``: 2 to 32 levels) from the K-anonymous
    tables, no ε (docs/methods.md §12): the federated table's test, each center's test on its
    own table, and the stratified sum and van Elteren-type weighted tests over them. With
    ``ordered`` (the arms named in their hypothesised order), Jonckheere-Terpstra too."""

    kind: Literal["kruskal"]
    min_groups = 2
    max_groups = MAX_GROUPS
    groups_needed = f"the arms compared, 2 to {MAX_GROUPS} levels"
    ordered: bool = Field(default=False, description=(
        "the arms are ordered as `groups` names them: also test a trend (Jonckheere-Terpstra)"))
    alternative: TrendAlternative = Field(default="increasing", description=(
        "with `ordered`: increasing (later arms larger), decreasing or two-sided"))


class KruskalTestResult(_Result):
    """One Kruskal-Wallis test: H (tie-corrected) against χ² with ``df`` = arms − 1."""

    method: str = Field(description="table (the federated table), sum or weighted (across "
                                     "the centers' tables), or a center's id")
    statistic: float
    df: int
    pvalue: float


class KruskalArms(_Result):
    """Per arm (``groups``' order): the records counted and their mean rank, ties in one bin
    sharing the bin's mid-rank."""

    sizes: list[float]
    mean_ranks: list[float]


class KruskalCenter(KruskalArms):
    """One center's Kruskal-Wallis on its own K-anonymous table of the arms (its ``limits``,
    ``bins`` bins; docs/methods.md §12.8)."""

    center: str
    bins: int
    limits: list[float]
    statistic: float
    df: int
    pvalue: float


class TrendResult(_Result):
    """Jonckheere-Terpstra: J, its null mean and (tie-corrected) variance, z and p."""

    method: str = Field(description="table (the federated table) or sum (Σ of the centers' J "
                                    "on their own tables)")
    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    null: str = Field(default="normal", description="the law p comes from: exact (J's "
                      "permutation law given the ties, small whole tables; for sum the "
                      "convolution of the centers' laws) or normal (z)")


class KruskalResult(_Result):
    kind: Literal["kruskal"] = "kruskal"
    status: Literal["succeeded"] = "succeeded"
    groups: list[str] = Field(description="the arms, in the spec's order")
    arms: KruskalArms = Field(description="the federated table's per-arm n and mean ranks")
    tests: dict[str, KruskalTestResult] = Field(description="table, sum, weighted")
    centers: list[KruskalCenter] = Field(description="each center's test on its own table")
    ordered: bool
    alternative: TrendAlternative | None = Field(description="the trend's, when `ordered`")
    trend: dict[str, TrendResult] = Field(
        default_factory=dict, description="with `ordered`: Jonckheere-Terpstra, table and sum")
    table: TableResult = Field(description="the federated table behind the table tests")
    excluded: list[ExcludedCenter]
