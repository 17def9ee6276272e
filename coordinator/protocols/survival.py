"""Each center's ε-DP life tables of a time-to-event variable, one per arm
(``POST .../dp/life-table``), asked in parallel and checked, and what is read from them: each
arm's curve per center and pooled (the centers' noisy counts summed), the RMST difference and
the log-rank tests stratified by center and pooled (``shared.dp.life_table``, docs/methods.md
§13).

A release is implausible when it reports another ε or another grid than asked, or a noise whose
variance does not belong to the ε asked (a center that noised less than it says).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require
from shared import kinds
from shared.dp.life_table import (
    DPKaplanMeierResult,
    DPLifeTable,
    DPLogRankResult,
    DPRMSTDifference,
    DPRMSTResult,
    dp_kaplan_meier,
    dp_logrank,
    dp_rmst,
    dp_rmst_difference,
    pooled_life_table,
)
from shared.protocol import RELEASE_RTOL, DPLifeTableRelease, DPLifeTableRequest
from shared.survival import Censoring, SurvivalQuantile, Weights

POOLED = "pooled"


@dataclass(frozen=True)
class ArmCurve:
    """One arm's curve (of a center or pooled) and what is read from it."""

    center: str
    arm: str
    table: DPLifeTable
    curve: DPKaplanMeierResult
    median: SurvivalQuantile
    rmst: DPRMSTResult


@dataclass(frozen=True)
class FederatedSurvival:
    """Every center's releases per arm, the curves, the RMST difference (pooled, second arm
    minus first), the log-rank tests, what each center spent and the centers left out."""

    releases: dict[str, tuple[DPLifeTableRelease, ...]]
    curves: tuple[ArmCurve, ...]
    difference: DPRMSTDifference
    stratified: DPLogRankResult
    pooled: DPLogRankResult
    spent: dict[str, float]
    excluded: tuple[CenterFailure, ...]


def check_release(center: str, release: DPLifeTableRelease, asked: DPLifeTableRequest) -> None:
    def implausible(detail: str) -> CenterFailure:
        return CenterFailure(center, "implausible", detail)

    if not math.isclose(release.epsilon, asked.epsilon, rel_tol=RELEASE_RTOL):
        raise implausible(f"reports ε = {release.epsilon:g}, {asked.epsilon:g} was asked")
    if len(release.grid) != len(asked.grid) or not all(
            math.isclose(a, b, rel_tol=RELEASE_RTOL, abs_tol=1e-12)
            for a, b in zip(release.grid, asked.grid, strict=True)):
        raise implausible("answers a life table on another grid than asked")
    # The least noise ε allows: Laplace of the add/remove sensitivity 1, variance 2/ε²; a
    # Gaussian's variance at any δ < 1 is larger still. Less is a release that is not ε-DP.
    least = 2.0 / asked.epsilon**2 if release.mechanism == "laplace" else 0.0
    if release.cell_variance < least * (1 - RELEASE_RTOL):
        raise implausible(f"reports noise of variance {release.cell_variance:g}, less than "
                          f"ε = {asked.epsilon:g} needs")


def _arm(center: str, arm: str, table: DPLifeTable, horizon: float,
         censoring: Censoring) -> ArmCurve:
    curve = dp_kaplan_meier(table, censoring=censoring)
    return ArmCurve(center=center, arm=arm, table=table, curve=curve,
                    median=curve.quantile(0.5, between="interpolated"),
                    rmst=dp_rmst(table, horizon, censoring=censoring))


async def federated_survival(
    survey: Survey,
    *,
    dataset: str,
    variable: str,
    arms: Sequence[str],
    epsilon: float,
    grid: Sequence[float],
    weights: Weights = "logrank",
    censoring: Censoring = "actuarial",
    per_center: bool = True,
    min_centers: int = 1,
    allow_partial: bool = False,
) -> FederatedSurvival:
    """Each usable center's DP life table of ``variable`` per arm (``arms``: two levels),
    pooled and tested (module docstring)."""
    centers: Sequence[CenterPort] = survey.usable
    requests = [DPLifeTableRequest(variable=variable, group=arm, epsilon=epsilon,
                                   grid=list(grid)) for arm in arms]

    async def ask(port: CenterPort) -> tuple[DPLifeTableRelease, ...]:
        # One center's arms in order: each a request of its own, each paid (disjoint records).
        return tuple([await port.release(kinds.DP_LIFE_TABLE, dataset, r) for r in requests])

    def check(center: str, releases: tuple[DPLifeTableRelease, ...]) -> None:
        for release, asked in zip(releases, requests, strict=True):
            check_release(center, release, asked)

    releases, failures = await ask_all(centers, ask, check, allow_partial=allow_partial)
    excluded = [*survey.excluded, *failures]
    require(max(1, min_centers), list(releases), excluded)
    tables = {c: [r.to_life_table() for r in rs] for c, rs in releases.items()}
    horizon = float(grid[-1])
    pooled = [pooled_life_table([tables[c][g] for c in tables]) for g in range(len(arms))]
    curves = [_arm(POOLED, arm, pooled[g], horizon, censoring) for g, arm in enumerate(arms)]
    if per_center:
        curves += [_arm(c, arm, tables[c][g], horizon, censoring)
                   for c in tables for g, arm in enumerate(arms)]
    return FederatedSurvival(
        releases=releases, curves=tuple(curves),
        difference=dp_rmst_difference(pooled[0], pooled[1], horizon, censoring=censoring),
        stratified=dp_logrank([tables[c] for c in tables], weights=weights, censoring=censoring),
        pooled=dp_logrank(pooled, weights=weights, censoring=censoring),
        spent={c: sum(r.epsilon for r in rs) for c, rs in releases.items()},
        excluded=tuple(excluded))
