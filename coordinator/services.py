"""What one running coordinator holds: settings, store, accounts, center ports and the study
runner."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from coordinator.accounts import Accounts
from coordinator.client import HttpCenter, build_centers
from coordinator.core.config import Settings
from coordinator.db import Store
from coordinator.leases import Lease
from coordinator.ports import CenterPort
from coordinator.registry import Registry
from coordinator.runner import StudyRunner
from coordinator.webhooks import Notifier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: Store
    centers: dict[str, CenterPort]
    runner: StudyRunner
    registry: Registry
    accounts: Accounts

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        centers: Mapping[str, CenterPort] | None = None,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    ) -> Services:
        """Open the store, mark interrupted studies resumable (one process; several over the
        store lease theirs instead: ``coordinator.leases``), load the accounts (warning about
        configured tokens, or about there being no way in), and make one port per center.

        ``centers`` replaces the HTTP ports (in-process centers); ``transports`` keeps them but
        routes a center's requests through a given transport (``httpx.ASGITransport`` or
        ``httpx.MockTransport`` in tests).
        """
        store = Store(settings.store_url)
        # Several processes over the store: a study running is another live process's, or
        # is claimed once its lease runs out (coordinator.leases); nothing is marked here.
        lease = Lease(settings.study_lease_s) if settings.shared_store else None
        if lease is None:
            interrupted = store.mark_interrupted()
            if interrupted:
                log.warning("%d interrupted studies marked failed_resumable", interrupted)
        ports: dict[str, CenterPort] = (
            dict(centers) if centers is not None
            else dict(build_centers(settings, transports=transports))
        )
        urls = {cid: c.base_url for cid, c in settings.centers.items()}
        # One registry: the catalog, the name check at submission and dry runs share its rounds.
        registry = Registry(ports, urls)
        runner = StudyRunner(store, ports, min_centers=settings.min_centers,
                             max_running=settings.max_running_studies,
                             notifier=Notifier.from_settings(settings), registry=registry,
                             lease=lease)
        accounts = Accounts(store, settings.analyst_tokens)
        warn_about_access(accounts)
        return cls(settings, store, ports, runner, registry, accounts)

    async def aclose(self) -> None:
        """Stop the studies (left resumable), close the HTTP clients and the store."""
        await self.runner.close()
        for port in self.centers.values():
            if isinstance(port, HttpCenter):
                await port.aclose()
        self.store.close()


ADD_ACCOUNT = ("fedstats coordinator analyst add --config <this file> --name NAME "
               "[--role admin]")


def warn_about_access(accounts: Accounts) -> None:
    """The start-up warnings of the migration to accounts (docs/coordinator.md)."""
    configured = len(accounts.config_tokens)
    if configured:
        log.warning("%d analyst token(s) configured in analyst_tokens: each works as its own "
                    "analyst (config-<fingerprint>); accounts are recommended instead (hashed "
                    "tokens, revocable at once, roles, quotas): %s", configured, ADD_ACCOUNT)
    elif accounts.count_active() == 0:
        log.warning("no analyst can call this coordinator: no analyst_tokens and no active "
                    "account; add one with: %s", ADD_ACCOUNT)
