"""Who may see and manage a study.

A study belongs to the analyst who created it. Its owner and the analysts it was shared with may
read it (view, figures) and resume it; only its owner (or an admin) may share or cancel it. An
admin sees every study. Any other caller gets 404 ``study_not_found``, as for a study that does
not exist: a 403 would confirm that it does.

A study's id is its owner's too: a table reused from a kept one (``coordinator.tables``) names
the study that obtained it (``reused_from``; a kept table's ``study_id`` in a dry run) only to
an admin and to that study's owner. Anyone else reads what the table is (``reused``: dataset,
variable, groups, K, closing, centers, epochs, when), not whose study got it
(:func:`shown_result`, :func:`shown_plan`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from coordinator.api.deps import is_admin
from coordinator.core.errors import Forbidden, StudyNotFound
from coordinator.db import Store, StudyRecord
from coordinator.models import MWUResult, StudyPlan, StudyResult, TableResult
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


def _shown_ids(store: Store, caller: Caller, study_ids: Iterable[str]) -> set[str]:
    """Of ``study_ids``, those the caller may see named: every one for an admin, its own
    studies for an analyst (a study shared with it is not enough: its owner chose to share
    the results, not who else ran what)."""
    wanted = set(study_ids)
    if is_admin(caller):
        return wanted
    shown = set()
    for study_id in wanted:
        record = store.get_study(study_id)
        if record is not None and owns(caller, record):
            shown.add(study_id)
    return shown


def _table_shown(table: TableResult, shown: set[str]) -> TableResult:
    if table.reused_from is None or table.reused_from in shown:
        return table
    return table.model_copy(update={"reused_from": None})


async def shown_result(store: Store, caller: Caller, result: StudyResult) -> StudyResult:
    """``result`` with each reused table's ``reused_from`` left out unless the caller may see
    that study named (module docstring)."""
    tables = [a.table if isinstance(a, MWUResult) else a for a in result.analyses]
    sources = [t.reused_from for t in tables if isinstance(t, TableResult) and t.reused_from]
    if not sources:
        return result
    shown = await asyncio.to_thread(_shown_ids, store, caller, sources)
    analyses = []
    for analysis in result.analyses:
        if isinstance(analysis, TableResult):
            analysis = _table_shown(analysis, shown)
        elif isinstance(analysis, MWUResult) and analysis.table is not None:
            analysis = analysis.model_copy(
                update={"table": _table_shown(analysis.table, shown)})
        analyses.append(analysis)
    return result.model_copy(update={"analyses": analyses})


async def shown_plan(store: Store, caller: Caller, plan: StudyPlan) -> StudyPlan:
    """``plan`` with the study that obtained a kept table (the one it would reuse, and each one
    it lists) left out unless the caller may see that study named (module docstring)."""
    planned = plan.table
    if planned is None:
        return plan
    sources = [t.study_id for t in planned.kept if t.study_id is not None]
    if planned.reused_from is not None:
        sources.append(planned.reused_from)
    shown = await asyncio.to_thread(_shown_ids, store, caller, sources)
    kept = [t if t.study_id is None or t.study_id in shown
            else t.model_copy(update={"study_id": None}) for t in planned.kept]
    reused_from = planned.reused_from if planned.reused_from in shown else None
    return plan.model_copy(update={"table": planned.model_copy(
        update={"kept": kept, "reused_from": reused_from})})
