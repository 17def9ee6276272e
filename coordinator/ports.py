"""``CenterPort``: what a protocol needs from one center, over HTTP or in-process.

The protocols in :mod:`coordinator.protocols` take a list of ports and never know which kind they
hold. :class:`coordinator.client.HttpCenter` speaks to a real ``center_agent``;
:class:`coordinator.local.InProcessCenter` is the real center app, on datasets declared as a
center declares them, reached through ``httpx.ASGITransport`` (simulations and tests);
:class:`coordinator.recording.RecordedCenter` wraps either and
records every release a study receives, so nothing is asked twice.

Releases of every kind go through one method, typed by the kind's declaration
(:mod:`shared.kinds`): ``await port.release(kinds.TABLE, dataset, request)`` is a
``BinTableRelease``. So a port implements each kind at once, and a new kind needs nothing here.

Every method returns a validated wire model or raises
:class:`coordinator.core.errors.CenterFailure` naming the center and the kind of failure.
"""

from __future__ import annotations

from typing import Protocol

from shared.kinds import Kind, Rel, Req
from shared.protocol import Budget, CenterInfo, Health


class CenterPort(Protocol):
    """One center, as the protocols see it."""

    @property
    def center_id(self) -> str:
        """The id the coordinator's registry gives this center."""
        ...

    async def health(self) -> Health: ...

    async def info(self) -> CenterInfo: ...

    async def budget(self) -> Budget: ...

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        """The center's answer to ``request`` of ``kind`` on ``dataset`` (a DP kind spends the
        request's ε of the center's budget for the dataset)."""
        ...
