"""The registry as the coordinator sees it now: each center's health and remaining budgets.

Concurrent askers share one round of questions: a dashboard polled by many analysts must not
multiply the requests every hospital answers. A call made while a round is in flight waits for
that round's answer; the first call after it starts a new round. Nothing is kept beyond that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from coordinator.core.errors import CenterFailure
from coordinator.models import CenterProblem, CenterStatus
from coordinator.ports import CenterPort


class Registry:
    """The centers a coordinator knows, asked for their state on demand."""

    def __init__(self, centers: Mapping[str, CenterPort], urls: Mapping[str, str]) -> None:
        self.centers = dict(centers)
        self.urls = dict(urls)
        self._round: asyncio.Future[list[CenterStatus]] | None = None

    async def statuses(self) -> list[CenterStatus]:
        """Every center's health and remaining budgets, asked in parallel (one round at a time)."""
        if self._round is None or self._round.done():
            self._round = asyncio.ensure_future(self._ask_all())
        # Shielded: an asker that goes away does not cancel the round for the others.
        return await asyncio.shield(self._round)

    async def _ask_all(self) -> list[CenterStatus]:
        return list(await asyncio.gather(*(self._ask(cid, port)
                                           for cid, port in self.centers.items())))

    async def _ask(self, center_id: str, port: CenterPort) -> CenterStatus:
        problem: CenterProblem | None = None
        remaining: dict[str, float] | None = None
        healthy = False
        try:
            await port.health()
            healthy = True
            budget = await port.budget()
            remaining = {name: b.remaining_epsilon for name, b in budget.datasets.items()}
        except CenterFailure as failure:
            problem = CenterProblem(kind=failure.kind, detail=failure.reason)
        return CenterStatus(id=port.center_id, url=self.urls.get(center_id), healthy=healthy,
                            problem=problem, remaining_epsilon=remaining)
