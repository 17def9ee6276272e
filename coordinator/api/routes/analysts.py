"""Analyst accounts over the API, for admins: list, add (the token is in the answer, once),
revoke, and ε quotas per (center, dataset). An analyst may read its own quotas.

The same as ``fedstats coordinator analyst ...`` (``coordinator.admin``), for an admin without
shell access to the coordinator's host. Every change is audited.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path

from coordinator.api.deps import AccountsDep, AdminDep, AnalystDep, SettingsDep, is_admin
from coordinator.core.errors import AnalystNotFound
from coordinator.db import AnalystRecord, QuotaRecord
from coordinator.models import (
    AnalystCreated,
    AnalystId,
    AnalystView,
    NewAnalyst,
    Quota,
    QuotaRequest,
    RotateAnalyst,
)
from fedstats_service.errors import InvalidFields

router = APIRouter(prefix="/analysts", tags=["analysts"])

Dataset = Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[a-z][a-z0-9_-]*$")]
Center = Annotated[str, Path(min_length=1, max_length=64)]


def _view(record: AnalystRecord) -> AnalystView:
    return AnalystView(id=record.id, name=record.name, role=record.role,
                       created_at=record.created_at, revoked_at=record.revoked_at,
                       expires_at=record.expires_at)


def _quota(record: QuotaRecord) -> Quota:
    return Quota(analyst_id=record.analyst_id, center=record.center, dataset=record.dataset,
                 epsilon=record.epsilon, spent=record.spent)


@router.get("")
async def list_analysts(accounts: AccountsDep, admin: AdminDep) -> list[AnalystView]:
    """Every account, revoked ones included, oldest first (the configured tokens' analysts,
    ``config-...``, are not accounts)."""
    return [_view(a) for a in await asyncio.to_thread(accounts.list)]


@router.post("", status_code=201)
async def add_analyst(body: NewAnalyst, accounts: AccountsDep, admin: AdminDep) -> AnalystCreated:
    """A new account; its token is in this answer and nowhere else (only its hash is kept)."""
    try:
        made = await asyncio.to_thread(lambda: accounts.add(
            body.name, body.role, by=admin, expires_in_days=body.expires_in_days))
    except ValueError as exc:
        raise InvalidFields([{"loc": ("body", "name"), "msg": str(exc)}]) from None
    return AnalystCreated(**_view(made.analyst).model_dump(), token=made.token)


@router.post("/{analyst_id}/revoke")
async def revoke_analyst(
    analyst_id: AnalystId, accounts: AccountsDep, admin: AdminDep
) -> AnalystView:
    """Revoke an account: its token is refused from the next request on, by every process."""
    return _view(await asyncio.to_thread(accounts.revoke, analyst_id, by=admin))


@router.post("/{analyst_id}/rotate")
async def rotate_analyst(
    analyst_id: AnalystId, accounts: AccountsDep, admin: AdminDep,
    body: RotateAnalyst | None = None,
) -> AnalystCreated:
    """A new token for the account (in this answer only) and a new expiry (none: never); the
    old token is refused from the next request on, by every process."""
    days = body.expires_in_days if body is not None else None
    made = await asyncio.to_thread(lambda: accounts.rotate(analyst_id, by=admin,
                                                           expires_in_days=days))
    return AnalystCreated(**_view(made.analyst).model_dump(), token=made.token)


@router.get("/{analyst_id}/quotas")
async def list_quotas(
    analyst_id: AnalystId, accounts: AccountsDep, analyst: AnalystDep
) -> list[Quota]:
    """The analyst's quotas and what it spent, per (center, dataset): for admins and for the
    analyst itself. A (center, dataset) not listed, or listed without a quota, has no limit."""
    if not (is_admin(analyst) or analyst.analyst_id == analyst_id):
        raise AnalystNotFound(analyst_id)
    return [_quota(q) for q in await asyncio.to_thread(accounts.store.quotas_of, analyst_id)]


@router.put("/{analyst_id}/quotas/{center}/{dataset}")
async def set_quota(
    analyst_id: AnalystId, center: Center, dataset: Dataset, body: QuotaRequest,
    accounts: AccountsDep, settings: SettingsDep, admin: AdminDep,
) -> Quota:
    """Set the analyst's ε quota at a registered center's dataset (null: no limit)."""
    if center not in settings.centers:
        raise InvalidFields([{"loc": ("path", "center"),
                              "msg": f"not a registered center: {sorted(settings.centers)}"}])
    return _quota(await asyncio.to_thread(accounts.set_quota, analyst_id, center, dataset,
                                          body.epsilon, by=admin))
