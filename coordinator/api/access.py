"""Who may see and manage a study.

A study belongs to the analyst who created it. Its owner and the analysts it was shared with may
read it (view, figures) and resume it; only its owner (or an admin) may share or cancel it. An
admin sees every study. Any other caller gets 404 ``study_not_found``, as for a study that does
not exist: a 403 would confirm that it does.
"""

from __future__ import annotations

import asyncio

from coordinator.api.deps import is_admin
from coordinator.core.errors import Forbidden, StudyNotFound
from coordinator.db import Store, StudyRecord
from fedstats_service.auth import Caller


def owns(caller: Caller, record: StudyRecord) -> bool:
    return record.analyst_id is not None and record.analyst_id == caller.analyst_id


async def readable_study(store: Store, caller: Caller, study_id: str) -> StudyRecord:
    """The study, if the caller may read it; 404 otherwise."""
    record = await asyncio.to_thread(store.get_study, study_id)
    if record is None:
        raise StudyNotFound(study_id)
    if is_admin(caller) or owns(caller, record):
        return record
    if caller.analyst_id is not None and await asyncio.to_thread(
            store.is_shared, study_id, caller.analyst_id):
        return record
    raise StudyNotFound(study_id)


async def owned_study(store: Store, caller: Caller, study_id: str, *,
                      to: str = "share it") -> StudyRecord:
    """The study, if the caller owns it or is an admin; 404 if it may not even read it, 403 if
    it was only shared with the caller (the message says it may not ``to``)."""
    record = await readable_study(store, caller, study_id)
    if not (is_admin(caller) or owns(caller, record)):
        raise Forbidden(f"only the owner of study {study_id!r} (or an admin) may {to}")
    return record
