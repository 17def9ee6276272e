"""What one running coordinator holds: settings, store, center ports and the study runner."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from coordinator.client import HttpCenter, build_centers
from coordinator.core.config import Settings
from coordinator.db import Store
from coordinator.ports import CenterPort
from coordinator.registry import Registry
from coordinator.runner import StudyRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: Store
    centers: dict[str, CenterPort]
    runner: StudyRunner
    registry: Registry

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        centers: Mapping[str, CenterPort] | None = None,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    ) -> Services:
        """Open the store, mark interrupted studies resumable, and make one port per center.

        ``centers`` replaces the HTTP ports (in-process centers); ``transports`` keeps them but
        routes a center's requests through a given transport (``httpx.ASGITransport`` or
        ``httpx.MockTransport`` in tests).
        """
        store = Store(settings.store_url)
        interrupted = store.mark_interrupted()
        if interrupted:
            log.warning("%d interrupted studies marked failed_resumable", interrupted)
        ports: dict[str, CenterPort] = (
            dict(centers) if centers is not None
            else dict(build_centers(settings, transports=transports))
        )
        runner = StudyRunner(store, ports, min_centers=settings.min_centers,
                             max_running=settings.max_running_studies)
        urls = {cid: c.base_url for cid, c in settings.centers.items()}
        return cls(settings, store, ports, runner, Registry(ports, urls))

    async def aclose(self) -> None:
        """Stop the studies (left resumable), close the HTTP clients and the store."""
        await self.runner.close()
        for port in self.centers.values():
            if isinstance(port, HttpCenter):
                await port.aclose()
        self.store.close()
