"""``RecordedCenter``: a ``CenterPort`` that records every answer a study receives.

Each release (and the center's info) is stored with its request under a key (SHA-256 of the call
and its request body); the same call in the same study is answered from the store, so a study
that runs again after a restart never asks a center twice for what it already received, and its
provenance lists exactly what each center released. Health and budget are not part of a study and
pass through.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel

from coordinator.db import Store
from coordinator.ports import CenterPort
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

M = TypeVar("M", bound=BaseModel)


class RecordedCenter:
    """Wraps ``port`` for one study of ``store``."""

    def __init__(self, port: CenterPort, store: Store, study_id: str) -> None:
        self.port = port
        self.store = store
        self.study_id = study_id

    @property
    def center_id(self) -> str:
        return self.port.center_id

    async def health(self) -> Health:
        return await self.port.health()

    async def budget(self) -> Budget:
        return await self.port.budget()

    async def info(self) -> CenterInfo:
        return await self._recorded("info", "", None, CenterInfo, self.port.info)

    async def table(self, dataset: str, request: TableRequest) -> BinTableRelease:
        return await self._recorded("table", dataset, request, BinTableRelease,
                                    lambda: self.port.table(dataset, request))

    async def refine(self, dataset: str, request: RefinementRequest) -> RefinementRelease:
        return await self._recorded("refine", dataset, request, RefinementRelease,
                                    lambda: self.port.refine(dataset, request))

    async def mwu(self, dataset: str, request: MWURequest) -> MWURelease:
        return await self._recorded("mwu", dataset, request, MWURelease,
                                    lambda: self.port.mwu(dataset, request))

    async def dp_quantiles(
        self, dataset: str, request: DPQuantilesRequest
    ) -> DPQuantilesRelease:
        return await self._recorded("dp_quantiles", dataset, request, DPQuantilesRelease,
                                    lambda: self.port.dp_quantiles(dataset, request))

    async def dp_boxplot(self, dataset: str, request: DPBoxplotRequest) -> DPBoxplotRelease:
        return await self._recorded("dp_boxplot", dataset, request, DPBoxplotRelease,
                                    lambda: self.port.dp_boxplot(dataset, request))

    async def dp_extremes(self, dataset: str, request: ExtremesRequest) -> ExtremesRelease:
        return await self._recorded("dp_extremes", dataset, request, ExtremesRelease,
                                    lambda: self.port.dp_extremes(dataset, request))

    async def dp_tree_histogram(
        self, dataset: str, request: TreeHistogramRequest
    ) -> TreeHistogramRelease:
        return await self._recorded("dp_tree_histogram", dataset, request, TreeHistogramRelease,
                                    lambda: self.port.dp_tree_histogram(dataset, request))

    async def dp_threshold_counts(
        self, dataset: str, request: ThresholdCountsRequest
    ) -> ThresholdCountsRelease:
        return await self._recorded("dp_threshold_counts", dataset, request,
                                    ThresholdCountsRelease,
                                    lambda: self.port.dp_threshold_counts(dataset, request))

    async def yj_moments(self, dataset: str, request: YJMomentsRequest) -> YJMomentsRelease:
        return await self._recorded("yj_moments", dataset, request, YJMomentsRelease,
                                    lambda: self.port.yj_moments(dataset, request))

    async def _recorded(
        self,
        kind: str,
        dataset: str,
        request: BaseModel | None,
        model: type[M],
        call: Callable[[], Awaitable[M]],
    ) -> M:
        body = request.model_dump_json() if request is not None else "null"
        head = f'{{"call":{json.dumps(kind)},"dataset":{json.dumps(dataset)}'
        described = f'{head},"request":{body}}}'
        key = hashlib.sha256(described.encode()).hexdigest()
        found = await asyncio.to_thread(self.store.find_release, self.study_id,
                                        self.center_id, key)
        if found is not None:
            return model.model_validate_json(found)
        answer = await call()
        await asyncio.to_thread(self.store.record_release, self.study_id, self.center_id, kind,
                                key, described, answer.model_dump_json())
        return answer
