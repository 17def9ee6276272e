"""Sharing a study: its owner (or an admin) lets other analysts read and resume it.

A shared analyst cannot share further; someone who may not read the study gets 404
(``coordinator.api.access``). Shares and their withdrawals are audited.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response

from coordinator import audit
from coordinator.api.access import owned_study, readable_study
from coordinator.api.deps import AccountsDep, AnalystDep, StoreDep
from coordinator.core.errors import AnalystNotFound, NotFound
from coordinator.db import ShareRecord
from coordinator.models import AnalystId, Share, ShareRequest
from fedstats_service.errors import InvalidFields

router = APIRouter(prefix="/studies/{study_id}/shares", tags=["studies"])


def _share(record: ShareRecord) -> Share:
    return Share(study_id=record.study_id, analyst_id=record.analyst_id,
                 shared_by=record.shared_by, created_at=record.created_at)


@router.get("")
async def list_shares(study_id: str, store: StoreDep, analyst: AnalystDep) -> list[Share]:
    """Who the study is shared with (anyone who may read it may see this)."""
    await readable_study(store, analyst, study_id)
    return [_share(s) for s in await asyncio.to_thread(store.shares_of, study_id)]


@router.post("", status_code=201)
async def share_study(
    study_id: str, body: ShareRequest, store: StoreDep, accounts: AccountsDep,
    analyst: AnalystDep,
) -> Share:
    """Let another analyst read (and resume) the study: its owner or an admin only (403 for an
    analyst it was shared with); 404 ``analyst_not_found`` for an unknown or revoked one."""
    record = await owned_study(store, analyst, study_id)
    if body.analyst_id == record.analyst_id:
        raise InvalidFields([{"loc": ("body", "analyst_id"),
                              "msg": "the study's owner reads it already"}])
    if not await asyncio.to_thread(accounts.known, body.analyst_id):
        raise AnalystNotFound(body.analyst_id)
    shared = await asyncio.to_thread(store.share, study_id, body.analyst_id,
                                     shared_by=analyst.analyst_id)
    await asyncio.to_thread(audit.record, store, "study.share", caller=analyst,
                            target=study_id, detail=f"with {body.analyst_id}")
    return _share(shared)


@router.delete("/{analyst_id}", status_code=204, response_class=Response)
async def unshare_study(
    study_id: str, analyst_id: AnalystId, store: StoreDep, analyst: AnalystDep
) -> Response:
    """Withdraw a share: the analyst no longer sees the study (its owner or an admin only)."""
    await owned_study(store, analyst, study_id)
    if not await asyncio.to_thread(store.unshare, study_id, analyst_id):
        raise NotFound(f"study {study_id!r} is not shared with {analyst_id!r}")
    await asyncio.to_thread(audit.record, store, "study.unshare", caller=analyst,
                            target=study_id, detail=f"with {analyst_id}")
    return Response(status_code=204)
