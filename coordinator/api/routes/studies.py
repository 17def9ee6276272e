"""Studies: create (202, runs in the background), list, read with provenance, resume, figure."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from coordinator import figures
from coordinator.api.deps import AnalystDep, RunnerDep, StoreDep
from coordinator.core.errors import Conflict, NotFound, StudyNotFound
from coordinator.db import ReleaseRecord, Store, StudyRecord
from coordinator.figures import FigureFormat
from coordinator.models import (
    DPBoxplotResult,
    Provenance,
    StudyCreated,
    StudyError,
    StudyResult,
    StudySpec,
    StudyStatus,
    StudySummary,
    StudyView,
)

router = APIRouter(prefix="/studies", tags=["studies"])


async def _study(store: Store, study_id: str) -> StudyRecord:
    # Not a dependency: the route's own parameters are validated first (422 before 404).
    record = await asyncio.to_thread(store.get_study, study_id)
    if record is None:
        raise StudyNotFound(study_id)
    return record


def _created(record: StudyRecord, request: Request, response: Response) -> StudyCreated:
    url = str(request.url_for("get_study", study_id=record.id))
    response.headers["Location"] = url
    return StudyCreated(id=record.id, status=record.status, status_url=url)


@router.post("", status_code=202)
async def create_study(
    spec: StudySpec, runner: RunnerDep, analyst: AnalystDep, request: Request, response: Response
) -> StudyCreated:
    """Start a study in the background; poll ``status_url`` for its result."""
    return _created(await runner.submit(spec, created_by=analyst.token_id), request, response)


@router.get("")
async def list_studies(
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    status: StudyStatus | None = None,
) -> list[StudySummary]:
    """Studies, newest first."""
    records = await asyncio.to_thread(store.list_studies, limit=limit, offset=offset,
                                      status=status)
    summaries = []
    for r in records:
        spec = StudySpec.model_validate_json(r.spec)
        summaries.append(StudySummary(id=r.id, status=r.status, dataset=spec.dataset,
                                      variable=spec.variable, created_by=r.created_by,
                                      created_at=r.created_at,
                                      updated_at=r.updated_at))
    return summaries


def _provenance(record: ReleaseRecord) -> Provenance:
    asked = json.loads(record.request)
    return Provenance(center=record.center, call=record.kind, dataset=asked["dataset"] or None,
                      request=asked["request"], response=json.loads(record.response),
                      received_at=record.received_at)


@router.get("/{study_id}", name="get_study", response_model=StudyView)
async def get_study(
    study_id: str,
    store: StoreDep,
    provenance: Annotated[bool, Query(
        description="include every answer the centers gave (megabytes for a large study); "
                    "poll with false and read them once at the end")] = True,
) -> Response:
    """A study: status, results (when done), error (when failed) and what each center released.

    Infinite table limits are the strings ``"Infinity"``/``"-Infinity"``, as on the wire.
    """
    record = await _study(store, study_id)
    released = await asyncio.to_thread(store.releases_of, study_id) if provenance else None
    count = len(released) if released is not None else await asyncio.to_thread(
        store.count_releases, study_id)
    view = StudyView(
        id=record.id,
        status=record.status,
        spec=StudySpec.model_validate_json(record.spec),
        result=StudyResult.model_validate_json(record.result) if record.result else None,
        error=StudyError.model_validate_json(record.error) if record.error else None,
        provenance=[_provenance(r) for r in released] if released is not None else None,
        releases_received=count,
        created_by=record.created_by,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )
    return Response(view.model_dump_json(), media_type="application/json")


@router.get(
    "/{study_id}/analyses/{index}/figure",
    responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}}},
    response_class=Response,
)
async def boxplot_figure(
    study_id: str,
    index: Annotated[int, Path(ge=0, le=1000)],
    store: StoreDep,
    format: FigureFormat = "svg",
) -> Response:
    """The boxplots of a finished ``dp_boxplot`` analysis (``index`` in the spec) as SVG or PNG."""
    record = await _study(store, study_id)
    if record.status != "succeeded" or record.result is None:
        raise Conflict(f"study {study_id!r} is {record.status}; figures need a result")
    analyses = StudyResult.model_validate_json(record.result).analyses
    if index >= len(analyses) or not isinstance(analyses[index], DPBoxplotResult):
        raise NotFound(f"analysis {index} of study {study_id!r} is not a dp_boxplot")
    result = analyses[index]
    assert isinstance(result, DPBoxplotResult)
    spec = StudySpec.model_validate_json(record.spec)
    title = f"{spec.dataset}.{spec.variable}" + (f" ({result.group})" if result.group else "")
    image = await asyncio.to_thread(figures.boxplot_figure, result, title=title, fmt=format)
    return Response(image, media_type=figures.MEDIA_TYPES[format])


@router.post("/{study_id}/resume", status_code=202)
async def resume_study(
    study_id: str, runner: RunnerDep, request: Request, response: Response
) -> StudyCreated:
    """Run a ``failed_resumable`` study again; releases already received are not asked again."""
    return _created(await runner.resume(study_id), request, response)
