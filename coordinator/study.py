"""A study: the analyst's typed spec and how it runs over the centers (its result:
:mod:`coordinator.results`).

A spec names one dataset and variable, optionally two group levels (X, Y), the anonymity
threshold K and a list of analyses. Each analysis is a model with a ``kind``; today::

    {"kind": "table", "lower": "buffer", "upper": "buffer"}
    {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"], "alternative": "two-sided",
     "epsilon": 0.5}      # optional: noisy local U, ε spent by each center
    {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 300], "group": "treated",
     "per_center": true, "pooled": true}
    {"kind": "quantiles", "levels": [0.25, 0.5, 0.75],
     "estimators": ["yj_table", "interpolation", "extrapolation", "yj_shaped"]}
    {"kind": "dp_quantiles", "epsilon": 0.5, "bounds": [0, 300], "levels": [0.5],
     "algorithm": "joint_exp", "group": "treated"}

The ε is per DP analysis, not per study (each center spends it once per box or quantile set).
``quantiles`` are read from the study's federated table and spend nothing.

:func:`run_study` surveys the centers once (sizes, declared names), then runs the analyses
concurrently; its result is a list with one entry per analysis, in the spec's order. A study
builds one federated table: the table, quantiles and MWU table-test analyses share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coordinator.ports import CenterPort
from coordinator.protocols import (
    center_dp_quantiles,
    federated_bin_table,
    federated_dp_boxplot,
    federated_mwu,
    survey_centers,
)
from coordinator.protocols.mwu import MWU_TESTS, MWUTest
from coordinator.protocols.parallel import all_or_first_failure
from coordinator.protocols.quantiles import (
    ESTIMATOR_NAMES,
    TABLE_ESTIMATORS,
    Estimator,
    table_quantiles,
    yj_data_estimates,
)
from coordinator.protocols.table import FederatedTable
from coordinator.results import (
    AnalysisResult,
    DPBoxplotResult,
    DPQuantilesResult,
    ExcludedCenter,
    MWUResult,
    QuantilesResult,
    StudyResult,
    TableResult,
)
from shared.mwu import Alternative
from shared.protocol import MIN_EPSILON, DPQuantileAlgorithm, check_public_bounds
from shared.quantiles.yj_data import DP_MAX_EVALUATIONS

Extreme = Literal["infinite", "buffer"] | float


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _finite_extreme(value: Extreme) -> Extreme:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a natural limit must be a finite number")
    return value


class TableAnalysis(_Spec):
    """The federated K-anonymous bin table of the variable (one group, or X and Y)."""

    kind: Literal["table"]
    lower: Extreme = "buffer"
    upper: Extreme = "buffer"

    _finite = field_validator("lower", "upper")(_finite_extreme)


class MWUAnalysis(_Spec):
    """Federated Mann-Whitney tests of X against Y (needs ``groups``)."""

    kind: Literal["mwu"]
    tests: list[MWUTest] = Field(
        default_factory=lambda: list(MWU_TESTS), min_length=1,
        max_length=4,
    )
    alternative: Alternative = "two-sided"
    epsilon: float | None = Field(
        default=None, ge=MIN_EPSILON, le=100, allow_inf_nan=False,
        description="ε each center spends to noise its local U (none: no noise, no spending)",
    )

    @field_validator("tests")
    @classmethod
    def _distinct(cls, tests: list[MWUTest]) -> list[MWUTest]:
        if len(set(tests)) != len(tests):
            raise ValueError("tests must be distinct")
        return tests


class DPBoxplotAnalysis(_Spec):
    """ε-DP boxplots of one group level (or every record): each center's own and/or the pooled
    box (NOTES §3). Each center spends ``epsilon`` per box asked (so 2ε for both)."""

    kind: Literal["dp_boxplot"]
    # The pooled box's smallest round spends ε/8, and every release needs ε >= MIN_EPSILON.
    epsilon: float = Field(ge=8 * MIN_EPSILON, le=100, allow_inf_nan=False)
    bounds: tuple[float, float] = Field(description="public bounds the data are clipped to")
    group: str | None = Field(default=None, min_length=1, max_length=128,
                              description="one declared level; none for every record")
    per_center: bool = True
    pooled: bool = True
    depth: int = Field(default=6, ge=1, le=16, description="pooled grid: branching**depth leaves")
    branching: int = Field(default=4, ge=2, le=16)

    @model_validator(mode="after")
    def _valid(self) -> Self:
        a, b = self.bounds
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError("bounds must be finite with lower < upper")
        if not (self.per_center or self.pooled):
            raise ValueError("ask for the per-center boxes, the pooled box, or both")
        if self.branching**self.depth > 2**16:
            raise ValueError("branching**depth must be at most 65536 leaves")
        return self


class QuantilesAnalysis(_Spec):
    """Quantiles from the study's federated table (no further release: costs the centers
    nothing), and with ``yj_data`` from the centers' YJ moment sums; with ``groups``, each
    group's own."""

    kind: Literal["quantiles"]
    levels: list[float] = Field(min_length=1, max_length=64,
                                description="strictly increasing, each in (0, 1)")
    estimators: list[Estimator] = Field(
        default_factory=lambda: list(TABLE_ESTIMATORS),
        min_length=1, max_length=len(ESTIMATOR_NAMES),
        description="yj_data asks every center for ε-DP moment sums at each λ Brent tries "
                    "(needs `epsilon` and `bounds`); the others read the federated table only",
    )
    epsilon: float | None = Field(
        default=None, ge=DP_MAX_EVALUATIONS * MIN_EPSILON, le=100, allow_inf_nan=False,
        description="yj_data: the ε each center spends per group on the fit",
    )
    bounds: tuple[float, float] | None = Field(
        default=None, description="yj_data: public bounds the values are clipped to"
    )

    @model_validator(mode="after")
    def _yj_data_needs_privacy(self) -> Self:
        if "yj_data" in self.estimators:
            if self.epsilon is None or self.bounds is None:
                raise ValueError("yj_data needs `epsilon` and `bounds`: centers release only "
                                 "ε-DP moment sums of values clipped to public bounds")
            check_public_bounds(self.bounds, "bounds")
        return self

    @field_validator("levels")
    @classmethod
    def _levels(cls, levels: list[float]) -> list[float]:
        if not all(0 < q < 1 for q in levels) or any(b <= a for a, b in pairwise(levels)):
            raise ValueError("levels must be strictly increasing and inside (0, 1)")
        return levels

    @field_validator("estimators")
    @classmethod
    def _distinct(cls, estimators: list[Estimator]) -> list[Estimator]:
        if len(set(estimators)) != len(estimators):
            raise ValueError("estimators must be distinct")
        return estimators


class DPQuantilesAnalysis(_Spec):
    """Each center's ε-DP quantiles of one group level (or every record); ε per center."""

    kind: Literal["dp_quantiles"]
    epsilon: float = Field(ge=MIN_EPSILON, le=100, allow_inf_nan=False)
    bounds: tuple[float, float] = Field(description="public bounds the data are clipped to")
    levels: list[float] = Field(min_length=1, max_length=64)
    algorithm: DPQuantileAlgorithm = "joint_exp"
    group: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _valid(self) -> Self:
        a, b = self.bounds
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError("bounds must be finite with lower < upper")
        levels = self.levels
        if not all(0 < q < 1 for q in levels) or any(y <= x for x, y in pairwise(levels)):
            raise ValueError("levels must be strictly increasing and inside (0, 1)")
        return self


Analysis = Annotated[
    TableAnalysis | MWUAnalysis | DPBoxplotAnalysis | QuantilesAnalysis | DPQuantilesAnalysis,
    Field(discriminator="kind"),
]


class StudySpec(_Spec):
    """What an analyst asks for. Nothing here is secret; it is stored and echoed as given."""

    dataset: str = Field(min_length=1, max_length=128, pattern=r"^[a-z][a-z0-9_-]*$")
    variable: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    groups: tuple[str, str] | None = Field(
        default=None, description="the two group levels (X, Y); none for a one-group table"
    )
    k: int = Field(default=10, ge=2, le=100_000, description="no released count in 1..k-1")
    analyses: list[Analysis] = Field(min_length=1, max_length=16)
    centers: list[str] | None = Field(
        default=None, min_length=1, description="registry ids to ask; all when absent"
    )
    allow_partial: bool = Field(
        default=False,
        description="leave out failing centers (recorded) while at least min_centers remain",
    )

    @field_validator("groups")
    @classmethod
    def _levels(cls, groups: tuple[str, str] | None) -> tuple[str, str] | None:
        if groups is not None:
            if groups[0] == groups[1]:
                raise ValueError("the two group levels must differ")
            if not all(0 < len(g) <= 128 for g in groups):
                raise ValueError("group levels must be 1 to 128 characters")
        return groups

    @field_validator("centers")
    @classmethod
    def _distinct_centers(cls, centers: list[str] | None) -> list[str] | None:
        if centers is not None and len(set(centers)) != len(centers):
            raise ValueError("centers must be distinct")
        return centers

    @model_validator(mode="after")
    def _mwu_needs_groups(self) -> Self:
        if self.groups is None and any(a.kind == "mwu" for a in self.analyses):
            raise ValueError("an mwu analysis needs `groups` (the two levels X and Y)")
        return self

    @model_validator(mode="after")
    def _one_table(self) -> Self:
        # A study builds one federated table and every analysis that needs a table shares it.
        closings = {(a.lower, a.upper) for a in self.analyses if isinstance(a, TableAnalysis)}
        if len(closings) > 1:
            raise ValueError(
                "every table analysis of a study must close the table the same way "
                "(`lower`, `upper`): a study builds one federated table"
            )
        return self

    @property
    def table_closing(self) -> tuple[Extreme, Extreme]:
        """(lower, upper) of the study's one table; the MWU table test uses it too."""
        for analysis in self.analyses:
            if isinstance(analysis, TableAnalysis):
                return analysis.lower, analysis.upper
        return "buffer", "buffer"


async def run_study(
    spec: StudySpec,
    centers: Sequence[CenterPort],
    *,
    min_centers: int,
) -> StudyResult:
    """Run every analysis of ``spec`` over ``centers`` (already the selected ones).

    The analyses run concurrently: the federated table is built center after center, and the
    other analyses' parallel rounds use the centers meanwhile. The first analysis to fail (in
    the spec's order, among those that failed) fails the study and cancels the rest.
    """
    survey = await survey_centers(
        centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups, k=spec.k,
        min_centers=min_centers, allow_partial=spec.allow_partial
    )
    lower, upper = spec.table_closing
    table_task: asyncio.Future[FederatedTable] | None = None

    def study_table() -> asyncio.Future[FederatedTable]:
        """The study's one federated table, built once for every analysis that needs it."""
        nonlocal table_task
        if table_task is None:
            table_task = asyncio.ensure_future(federated_bin_table(
                centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                k=spec.k, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            ))
        return table_task

    async def run(analysis: Analysis) -> AnalysisResult:
        if isinstance(analysis, TableAnalysis):
            return TableResult.of(await study_table())
        if isinstance(analysis, QuantilesAnalysis):
            table = await study_table()
            names = list(spec.groups) if spec.groups is not None else ["all"]
            estimates = table_quantiles(table.table, analysis.levels,
                                        estimators=analysis.estimators, groups=names)
            if "yj_data" in analysis.estimators:
                assert analysis.epsilon is not None and analysis.bounds is not None
                estimates["yj_data"] = await yj_data_estimates(
                    survey.usable, dataset=spec.dataset, variable=spec.variable,
                    groups=list(spec.groups) if spec.groups is not None else [None],
                    names=names, levels=analysis.levels, epsilon=analysis.epsilon,
                    bounds=analysis.bounds,
                )
            return QuantilesResult.of(estimates, analysis.levels, table.table)
        if isinstance(analysis, DPQuantilesAnalysis):
            quantiles = await center_dp_quantiles(
                centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
                levels=analysis.levels, epsilon=analysis.epsilon, bounds=analysis.bounds,
                algorithm=analysis.algorithm, min_centers=min_centers,
                allow_partial=spec.allow_partial, survey=survey,
            )
            return DPQuantilesResult.of(quantiles, analysis.group)
        if isinstance(analysis, DPBoxplotAnalysis):
            boxes = await federated_dp_boxplot(
                centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
                epsilon=analysis.epsilon, bounds=analysis.bounds,
                per_center=analysis.per_center, pooled=analysis.pooled, depth=analysis.depth,
                branching=analysis.branching, min_centers=min_centers,
                allow_partial=spec.allow_partial, survey=survey,
            )
            return DPBoxplotResult.of(boxes, analysis.group)
        assert spec.groups is not None  # StudySpec refuses mwu without groups
        mwu = await federated_mwu(
            centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
            k=spec.k, tests=analysis.tests, alternative=analysis.alternative,
            epsilon=analysis.epsilon, lower=lower, upper=upper,
            min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
            table=study_table() if "table" in analysis.tests else None,
        )
        return MWUResult.of(mwu, analysis.alternative)

    try:
        results = await all_or_first_failure([run(a) for a in spec.analyses])
    finally:
        if table_task is not None:
            table_task.cancel()  # no-op when it is done
            with contextlib.suppress(BaseException):
                await table_task  # retrieved: its failure, if any, was raised by its analyses
    return StudyResult(
        analyses=list(results),
        centers=[c.center_id for c in centers],
        excluded=[ExcludedCenter.of(f) for f in survey.excluded],
    )
