"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Every router except health is mounted with :func:`authenticate` as a dependency
(``coordinator.api.router``; built by ``fedstats_service.auth.bearer_auth``, deciding with the
app's authenticator, ``coordinator.accounts.Accounts.authenticate``), so handlers need not ask
for :data:`AnalystDep` themselves; they ask for it to know who calls. :data:`AdminDep` also
refuses (403 ``forbidden``) a caller who is not an admin.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request

from coordinator.accounts import Accounts
from coordinator.core.config import Settings
from coordinator.core.errors import Forbidden
from coordinator.db import Store
from coordinator.registry import Registry
from coordinator.runner import StudyRunner
from fedstats_service.app import services_part
from fedstats_service.auth import AuthenticationError, Caller, bearer_auth

# The parts of the coordinator's ``Services`` (coordinator.services), built once per app.
get_settings = services_part("settings")
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(services_part("store"))]
RunnerDep = Annotated[StudyRunner, Depends(services_part("runner"))]
RegistryDep = Annotated[Registry, Depends(services_part("registry"))]
AccountsDep = Annotated[Accounts, Depends(services_part("accounts"))]

authenticate = bearer_auth(get_settings, description="an analyst's token (`fsa_...`, from "
                           "`fedstats coordinator analyst add`) or one of the coordinator's "
                           "configured analyst tokens")
AnalystDep = Annotated[Caller, Depends(authenticate)]


def bearer_still_valid(request: Request, accounts: AccountsDep
                       ) -> Callable[[], Awaitable[bool]]:
    """For a response that outlives its request (an event stream): whether the request's
    bearer token still authenticates, asked again before each event and heartbeat, so that a
    rotation, an expiry or a revocation ends the stream at once, as it ends a console session
    (``coordinator.ui.sessions``)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    presented = token.strip() if scheme.lower() == "bearer" else None
    path = request.url.path

    async def alive() -> bool:
        try:
            await asyncio.to_thread(accounts.authenticate, presented, path)
        except AuthenticationError:
            return False
        return True

    return alive


StillValidDep = Annotated[Callable[[], Awaitable[bool]], Depends(bearer_still_valid)]


def is_admin(caller: Caller) -> bool:
    return caller.role == "admin"


def require_admin(caller: AnalystDep) -> Caller:
    """The caller, if an admin; 403 otherwise (the route exists for everyone to see)."""
    if not is_admin(caller):
        raise Forbidden("only an admin may do this")
    return caller


AdminDep = Annotated[Caller, Depends(require_admin)]
