"""Each center's ε-DP quantiles (``POST .../dp/quantiles``), asked in parallel and checked.

The centers run the DP algorithm (JointExp, PrivateQuantile, ApproxQuantile or the unbounded
walk) on their own records; the coordinator relays the values with what each center spent. A
release is implausible when it reports another ε or other levels than asked, holds a
non-finite value, or (for the bounded algorithms) a value outside the public bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require, survey_centers
from shared import kinds
from shared.protocol import (
    RELEASE_RTOL,
    DPQuantileAlgorithm,
    DPQuantilesRelease,
    DPQuantilesRequest,
)


@dataclass(frozen=True)
class CenterDPQuantiles:
    """Every center's release (``per_center``) and the centers left out."""

    per_center: dict[str, DPQuantilesRelease]
    excluded: tuple[CenterFailure, ...]


def check_release(center: str, release: DPQuantilesRelease, asked: DPQuantilesRequest) -> None:
    def implausible(detail: str) -> CenterFailure:
        return CenterFailure(center, "implausible", detail)

    if not math.isclose(release.epsilon, asked.epsilon, rel_tol=RELEASE_RTOL):
        raise implausible(f"reports ε = {release.epsilon:g}, {asked.epsilon:g} was asked")
    if release.levels != asked.levels or len(release.values) != len(asked.levels):
        raise implausible("answers other levels than asked")
    if not all(math.isfinite(v) for v in release.values):
        raise implausible("a quantile is not a finite number")
    a, b = asked.bounds
    if asked.algorithm != "unbounded" and not all(a <= v <= b for v in release.values):
        raise implausible(f"a quantile lies outside the bounds [{a:g}, {b:g}]")


async def center_dp_quantiles(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    group: str | None,
    levels: Sequence[float],
    epsilon: float,
    bounds: tuple[float, float],
    algorithm: DPQuantileAlgorithm = "joint_exp",
    min_centers: int = 1,
    allow_partial: bool = False,
    survey: Survey | None = None,
) -> CenterDPQuantiles:
    """ε-DP quantiles of ``variable`` (level ``group`` or every record) from every center."""
    if survey is None:
        survey = await survey_centers(centers, dataset=dataset, variable=variable,
                                      min_centers=min_centers, allow_partial=allow_partial)
    request = DPQuantilesRequest(variable=variable, group=group, epsilon=epsilon, bounds=bounds,
                                 levels=list(levels), algorithm=algorithm)
    releases, failures = await ask_all(
        survey.usable, lambda p: p.release(kinds.DP_QUANTILES, dataset, request),
        lambda c, r: check_release(c, r, request), allow_partial=allow_partial,
    )
    excluded = [*survey.excluded, *failures]
    require(max(1, min_centers), list(releases), excluded)
    return CenterDPQuantiles(releases, tuple(excluded))
