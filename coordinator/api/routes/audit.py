"""The coordinator's audit log (``coordinator.audit``), for admins: newest first, paged, filtered
by analyst and action."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query

from coordinator.api.deps import AdminDep, StoreDep
from coordinator.db import AuditRecord
from coordinator.models import AuditEntry

router = APIRouter(tags=["audit"])


def entry(record: AuditRecord) -> AuditEntry:
    return AuditEntry(id=record.id, at=record.at, analyst_id=record.analyst_id,
                      token_id=record.token_id, action=record.action, target=record.target,
                      request_id=record.request_id, detail=record.detail)


@router.get("/audit")
async def read_audit(
    store: StoreDep,
    admin: AdminDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    analyst_id: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=32)] = None,
) -> list[AuditEntry]:
    """Who did what, when: study.create, study.read, study.resume, study.share,
    study.unshare, analyst.add, analyst.revoke, quota.set, quota.refused, auth.refused,
    study.claimed."""
    records = await asyncio.to_thread(store.audit_entries, limit=limit, offset=offset,
                                      analyst_id=analyst_id, action=action)
    return [entry(r) for r in records]
