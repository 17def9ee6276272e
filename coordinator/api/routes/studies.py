"""Studies: create (202, runs in the background; once per ``Idempotency-Key``), list, read with
provenance, follow (server-sent events), resume, cancel, figure, exports (CSV tables and a zip:
``coordinator.reporting.exports``).

An analyst lists and reads only the studies it owns or that were shared with it; an admin all
(``coordinator.api.access``). Reads with the provenance, creations, resumes and cancels are audited
(``coordinator.audit``); a quota that a spec cannot fit refuses it at once
(``coordinator.quotas``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from coordinator import audit, feed, quotas
from coordinator.analyses import algorithms
from coordinator.api.access import owned_study, readable_study, shown_plan, shown_result
from coordinator.api.deps import AnalystDep, RunnerDep, StillValidDep, StoreDep, is_admin
from coordinator.core.errors import Conflict, QuotaExceeded
from coordinator.db import Store, StudyRecord
from coordinator.models import (
    StudyCreated,
    StudyError,
    StudyPlan,
    StudyResult,
    StudySpec,
    StudyStatus,
    StudySummary,
    StudyView,
)
from coordinator.provenance import provenance as provenance_of
from coordinator.provenance import reproducibility
from coordinator.reporting import exports, figures
from coordinator.reporting.figures import FigureFormat, FigureName
from fedstats_service.auth import Caller

router = APIRouter(prefix="/studies", tags=["studies"])

# The study is looked up in the handler, not a dependency: the route's own parameters are
# validated first (422 before 404).


def _created(record: StudyRecord, request: Request, response: Response) -> StudyCreated:
    url = str(request.url_for("get_study", study_id=record.id))
    response.headers["Location"] = url
    return StudyCreated(id=record.id, status=record.status, status_url=url)


# Printable ASCII: a date, a UUID, a job name; never a secret (it is stored as given).
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", min_length=1, max_length=128, pattern=r"^[\x20-\x7e]+$",
    description="1-128 printable characters: a repeat of this request with the same key (by "
                "the same analyst) answers with the study the first made, started once; the "
                "same key with another spec is a 409 idempotency_conflict")]
REPLAYED_HEADER = "Idempotent-Replayed"


@router.post("", status_code=202, responses={200: {
    "model": StudyPlan, "description": "dry_run=true: what the study would spend and what "
    "would be refused; nothing is created, released or spent"}})
async def create_study(
    spec: StudySpec, runner: RunnerDep, analyst: AnalystDep, request: Request, response: Response,
    dry_run: Annotated[bool, Query(
        description="answer 200 with the study's plan (ε per center and analysis, budgets and "
                    "quota left after it, what would be refused) instead of starting it")] = False,
    idempotency_key: IdempotencyKey = None,
) -> StudyCreated | StudyPlan:
    """Start a study in the background; poll ``status_url`` for its result.

    403 ``quota_exceeded`` when the most the spec can spend does not fit the caller's ε quota
    at a selected center; 422 ``unknown_name`` when it names a dataset, variable or group level
    a selected center does not declare (``coordinator.catalog``). With ``Idempotency-Key``, a
    repeat answers with the study the key made (header ``Idempotent-Replayed: true``), or 409
    ``idempotency_conflict`` for another spec (docs/coordinator.md, "Idempotent submission")."""
    if dry_run:
        response.status_code = 200
        return await shown_plan(runner.store, analyst, await runner.plan(spec, analyst.analyst_id))
    if idempotency_key is not None:
        earlier = await runner.replay(spec, analyst_id=analyst.analyst_id,
                                      idempotency_key=idempotency_key)
        if earlier is not None:
            response.headers[REPLAYED_HEADER] = "true"
            return _created(earlier, request, response)
    runner.check(spec)
    selected = spec.centers or list(runner.centers)
    try:
        await asyncio.to_thread(quotas.check_spec, runner.store, analyst.analyst_id, spec,
                                selected)
    except QuotaExceeded as refused:
        await asyncio.to_thread(audit.record, runner.store, "quota.refused", caller=analyst,
                                detail=refused.detail)
        raise
    # A request with the same key that got here at the same moment gets the study the other
    # created (the store's unique key decides), started once.
    record = await runner.submit(spec, created_by=analyst.token_id,
                                 analyst_id=analyst.analyst_id, idempotency_key=idempotency_key)
    await asyncio.to_thread(audit.record, runner.store, "study.create", caller=analyst,
                            target=record.id)
    return _created(record, request, response)


@router.get("")
async def list_studies(
    store: StoreDep,
    analyst: AnalystDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    status: StudyStatus | None = None,
) -> list[StudySummary]:
    """The caller's studies and those shared with it (an admin: every study), newest first."""
    records = await asyncio.to_thread(
        store.list_studies, limit=limit, offset=offset, status=status,
        visible_to=None if is_admin(analyst) else (analyst.analyst_id or ""))
    summaries = []
    for r in records:
        spec = StudySpec.model_validate_json(r.spec)
        summaries.append(StudySummary(id=r.id, status=r.status, title=spec.title,
                                      dataset=spec.dataset,
                                      variable=spec.variable, created_by=r.analyst_id,
                                      created_at=r.created_at,
                                      updated_at=r.updated_at))
    return summaries


@router.get("/{study_id}", name="get_study", response_model=StudyView)
async def get_study(
    study_id: str,
    store: StoreDep,
    analyst: AnalystDep,
    provenance: Annotated[bool, Query(
        description="include every answer the centers gave (megabytes for a large study); "
                    "poll with false and read them once at the end")] = True,
) -> Response:
    """A study: status, results (when done), error (when failed) and what each center released
    (for an analyst without the raw numbers, for an admin as received:
    ``coordinator.provenance``).

    Infinite table limits are the strings ``"Infinity"``/``"-Infinity"``, as on the wire.
    """
    record = await readable_study(store, analyst, study_id)
    if provenance:
        await asyncio.to_thread(audit.record, store, "study.read", caller=analyst,
                                target=study_id)
    view = await study_view(store, analyst, record, provenance=provenance)
    return Response(view.model_dump_json(), media_type="application/json")


async def study_view(store: Store, analyst: Caller, record: StudyRecord, *,
                     provenance: bool) -> StudyView:
    """The study as the caller may see it; with the provenance, its reproducibility record."""
    released = await asyncio.to_thread(store.releases_of, record.id) if provenance else None
    count = len(released) if released is not None else await asyncio.to_thread(
        store.count_releases, record.id)
    spec = StudySpec.model_validate_json(record.spec)
    stored = StudyResult.model_validate_json(record.result) if record.result else None
    return StudyView(
        id=record.id,
        status=record.status,
        spec=spec,
        result=await shown_result(store, analyst, stored) if stored is not None else None,
        error=StudyError.model_validate_json(record.error) if record.error else None,
        provenance=[provenance_of(r, full=is_admin(analyst)) for r in released]
        if released is not None else None,
        releases_received=count,
        created_by=record.analyst_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        reproducibility=reproducibility(spec, stored, released, algorithms(spec))
        if released is not None else None,
    )


async def exported_view(store: Store, analyst: Caller, study_id: str) -> dict[str, Any]:
    """The view the exports are drawn from (audited as ``study.export``); 409 without a
    result."""
    record = await readable_study(store, analyst, study_id)
    if record.result is None:
        raise Conflict(f"study {study_id!r} is {record.status}; exports need a result")
    await asyncio.to_thread(audit.record, store, "study.export", caller=analyst,
                            target=study_id)
    view = await study_view(store, analyst, record, provenance=True)
    found: dict[str, Any] = json.loads(view.model_dump_json())
    return found


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def attachment(name: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{name}"'}


@router.get("/{study_id}/export.csv", response_class=Response,
            responses={200: {"content": {"text/csv": {}}}})
async def export_csv(study_id: str, store: StoreDep, analyst: AnalystDep,
                     part: exports.Part) -> Response:
    """One of the study's tables as tidy CSV (``part``: table1, tests, effects, ...;
    docs/coordinator.md, "Exports"); a table the study has nothing of is its header alone.
    409 before the study has a result."""
    view = await exported_view(store, analyst, study_id)
    text = exports.part_csv(view, part)
    return Response(text, media_type="text/csv; charset=utf-8",
                    headers=attachment(f"study-{study_id}-{part}.csv"))


@router.get("/{study_id}/export.zip", response_class=Response,
            responses={200: {"content": {"application/zip": {}}}})
async def export_zip(study_id: str, store: StoreDep, analyst: AnalystDep) -> Response:
    """Every table the study has as CSV, its Methods paragraph, spec and reproducibility
    record, in one zip. 409 before the study has a result."""
    view = await exported_view(store, analyst, study_id)
    data = await asyncio.to_thread(exports.bundle, view)
    return Response(data, media_type="application/zip",
                    headers=attachment(f"study-{study_id}.zip"))


@router.get("/{study_id}/export.xlsx", response_class=Response, responses={200: {"content": {
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": {}}}})
async def export_xlsx(study_id: str, store: StoreDep, analyst: AnalystDep) -> Response:
    """Every table the study has as a sheet of one XLSX workbook (numbers as numbers), with its
    Methods paragraph and spec. 409 before the study has a result."""
    view = await exported_view(store, analyst, study_id)
    data = await asyncio.to_thread(exports.workbook, view)
    return Response(data, media_type=XLSX, headers=attachment(f"study-{study_id}.xlsx"))


@router.get("/{study_id}/events", response_class=StreamingResponse, responses={200: {
    "content": {"text/event-stream": {}},
    "description": "server-sent events: `progress` at each change of status or answers "
                   "received, one `end` at a final status, then the stream closes"}})
async def study_events(
    study_id: str,
    store: StoreDep,
    analyst: AnalystDep,
    still_valid: StillValidDep,
    heartbeat_s: Annotated[float, Query(
        ge=0.05, le=300, description="seconds without a change after which the store is read "
        "again and a comment line is sent")] = feed.HEARTBEAT_S,
) -> StreamingResponse:
    """The study's progress pushed as it happens (``coordinator.feed``): what polling
    ``GET /v1/studies/{id}?provenance=false`` would show, one event per change; it ends when
    the token stops authenticating (rotated, expired or revoked)."""
    await readable_study(store, analyst, study_id)
    return StreamingResponse(feed.stream(store, study_id, heartbeat_s=heartbeat_s,
                                         alive=still_valid),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get(
    "/{study_id}/analyses/{index}/figure",
    responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}}},
    response_class=Response,
)
async def boxplot_figure(
    study_id: str,
    index: Annotated[int, Path(ge=0, le=1000)],
    store: StoreDep,
    analyst: AnalystDep,
    format: FigureFormat = "svg",
    name: Annotated[FigureName | None, Query(
        description="which figure (default: the analysis's first): table, effects (mwu), "
                    "boxplots, quantiles (dp_quantiles, quantiles)")] = None,
) -> Response:
    """A figure of a finished analysis (``index`` in the spec) as SVG or PNG: the boxplots of
    a ``dp_boxplot``, the federated table of a ``table`` (or of an ``mwu`` with the table
    test), the effect sizes of an ``mwu`` (``name=effects``), the quantiles of a
    ``dp_quantiles`` or ``quantiles``; 404 for an analysis without that figure, 409 before the
    study has a result."""
    record = await readable_study(store, analyst, study_id)
    image = await asyncio.to_thread(figures.analysis_figure, record, index, format, name)
    return Response(image, media_type=figures.MEDIA_TYPES[format])


@router.post("/{study_id}/resume", status_code=202)
async def resume_study(
    study_id: str, runner: RunnerDep, analyst: AnalystDep, request: Request, response: Response
) -> StudyCreated:
    """Run again what a study did not finish: a ``failed_resumable`` or ``partially_failed``
    study, or a ``failed`` one whose center was unreachable or timed out. Releases already
    received are not asked again; finished analyses keep their results."""
    await readable_study(runner.store, analyst, study_id)
    record = await runner.resume(study_id)
    await asyncio.to_thread(audit.record, runner.store, "study.resume", caller=analyst,
                            target=study_id)
    return _created(record, request, response)


@router.post("/{study_id}/cancel")
async def cancel_study(
    study_id: str, runner: RunnerDep, analyst: AnalystDep, request: Request, response: Response
) -> StudyCreated:
    """Stop a ``pending`` or ``running`` study (its owner or an admin; 403 for an analyst it
    was shared with): it becomes ``cancelled``, keeping the results it had and every release
    received; ``POST .../resume`` runs the rest later without paying twice. 409 for a study
    that already ended."""
    await owned_study(runner.store, analyst, study_id, to="cancel it")
    record = await runner.cancel(study_id)
    await asyncio.to_thread(audit.record, runner.store, "study.cancel", caller=analyst,
                            target=study_id)
    return _created(record, request, response)
