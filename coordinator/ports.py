"""``CenterPort``: what a protocol needs from one center, over HTTP or in-process.

The protocols in :mod:`coordinator.protocols` take a list of ports and never know which kind they
hold. :class:`coordinator.client.HttpCenter` speaks to a real ``center_agent``;
:class:`coordinator.local.InProcessCenter` is the real center app on arrays held in this process,
reached through ``httpx.ASGITransport`` (simulations and tests);
:class:`coordinator.recording.RecordedCenter` wraps either and
records every release a study receives, so nothing is asked twice.

Every method returns a validated wire model or raises
:class:`coordinator.core.errors.CenterFailure` naming the center and the kind of failure.
"""

from __future__ import annotations

from typing import Protocol

from shared.protocol import (
    BinTableRelease,
    Budget,
    CenterInfo,
    DPBoxplotRelease,
    DPBoxplotRequest,
    DPQuantilesRelease,
    DPQuantilesRequest,
    ExtremesRelease,
    ExtremesRequest,
    Health,
    MWURelease,
    MWURequest,
    RefinementRelease,
    RefinementRequest,
    TableRequest,
    ThresholdCountsRelease,
    ThresholdCountsRequest,
    TreeHistogramRelease,
    TreeHistogramRequest,
)
from shared.quantiles.wire import YJMomentsRelease, YJMomentsRequest


class CenterPort(Protocol):
    """One center, as the protocols see it."""

    @property
    def center_id(self) -> str:
        """The id the coordinator's registry gives this center."""
        ...

    async def health(self) -> Health: ...

    async def info(self) -> CenterInfo: ...

    async def budget(self) -> Budget: ...

    async def table(self, dataset: str, request: TableRequest) -> BinTableRelease: ...

    async def refine(self, dataset: str, request: RefinementRequest) -> RefinementRelease: ...

    async def mwu(self, dataset: str, request: MWURequest) -> MWURelease: ...

    # DP releases: each spends ``request.epsilon`` of the center's budget for the dataset.

    async def dp_quantiles(
        self, dataset: str, request: DPQuantilesRequest
    ) -> DPQuantilesRelease: ...

    async def dp_boxplot(self, dataset: str, request: DPBoxplotRequest) -> DPBoxplotRelease: ...

    async def dp_extremes(self, dataset: str, request: ExtremesRequest) -> ExtremesRelease: ...

    async def dp_tree_histogram(
        self, dataset: str, request: TreeHistogramRequest
    ) -> TreeHistogramRelease: ...

    async def dp_threshold_counts(
        self, dataset: str, request: ThresholdCountsRequest
    ) -> ThresholdCountsRelease: ...

    # ε-DP YJ-data moment sums at one λ (each spends ``request.epsilon``; capped in number).
    async def yj_moments(
        self, dataset: str, request: YJMomentsRequest
    ) -> YJMomentsRelease: ...
