"""Studies in the background: ``POST /v1/studies`` returns at once, an asyncio task does the work.

Lifecycle (statuses of :mod:`coordinator.db`)::

    pending ──start──▶ running ──▶ succeeded
                           │
                           ├──▶ failed            (a CenterFailure, TooFewCenters, a bad spec:
                           │                       the error names the center and the kind)
                           └──▶ failed_resumable  (the coordinator stopped mid-study)
    failed_resumable ──resume──▶ running ...

Restart policy: a coordinator does **not** resume studies by itself. At start-up every study
still ``pending`` or ``running`` (its process died) is marked ``failed_resumable``; an analyst
resumes it with ``POST /v1/studies/{id}/resume``. The rerun goes through
:class:`coordinator.recording.RecordedCenter`, so every release the study already received is
taken from the store, not asked again; only the missing ones are requested.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping

from pydantic import ValidationError

from coordinator.core.errors import (
    AnalysisFailed,
    Busy,
    Conflict,
    InvalidStudy,
    ServiceError,
    StudyNotFound,
)
from coordinator.db import Store, StudyRecord
from coordinator.models import StudySpec
from coordinator.ports import CenterPort
from coordinator.recording import RecordedCenter
from coordinator.study import run_study
from fedstats_service.errors import describe_errors

log = logging.getLogger(__name__)

INTERNAL_ERROR = ServiceError("the study failed unexpectedly").body()


class StudyRunner:
    """Starts, tracks and stops the study tasks of one coordinator process."""

    def __init__(
        self,
        store: Store,
        centers: Mapping[str, CenterPort],
        *,
        min_centers: int,
        max_running: int = 16,
    ) -> None:
        self.store = store
        self.centers = dict(centers)
        self.min_centers = min_centers
        self.max_running = max_running
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def check(self, spec: StudySpec) -> None:
        """Refuse (422) a spec that names centers the registry does not hold."""
        unknown = [c for c in spec.centers or [] if c not in self.centers]
        if unknown:
            raise InvalidStudy(
                f"unknown center(s) {unknown}; registered: {sorted(self.centers)}",
                extra={"fields": ["body.centers"]},
            )
        selected = spec.centers or list(self.centers)
        if len(selected) < self.min_centers:
            raise InvalidStudy(
                f"a study needs at least {self.min_centers} centers, {len(selected)} selected",
                extra={"fields": ["body.centers"]},
            )

    def _room(self) -> None:
        if len(self._tasks) >= self.max_running:
            raise Busy(len(self._tasks))

    async def submit(self, spec: StudySpec, *, created_by: str | None = None) -> StudyRecord:
        """Record the study and start it; returns at once (status ``pending``).

        Refused (503 ``busy``) while ``max_running`` studies run."""
        self.check(spec)
        self._room()
        study_id = uuid.uuid4().hex
        record = await asyncio.to_thread(
            lambda: self.store.create_study(study_id, spec.model_dump_json(),
                                            created_by=created_by)
        )
        self._start(study_id, spec)
        return record

    async def resume(self, study_id: str) -> StudyRecord:
        """Run a ``failed_resumable`` study again from its recorded releases."""
        record = await asyncio.to_thread(self.store.get_study, study_id)
        if record is None:
            raise StudyNotFound(study_id)
        self._room()
        moved = await asyncio.to_thread(
            self.store.set_status, study_id, "pending", only_from=("failed_resumable",)
        )
        if not moved:
            raise Conflict(f"study {study_id!r} is {record.status}; only a failed_resumable "
                           "study can be resumed")
        self._start(study_id, StudySpec.model_validate_json(record.spec))
        updated = await asyncio.to_thread(self.store.get_study, study_id)
        assert updated is not None
        return updated

    def _start(self, study_id: str, spec: StudySpec) -> None:
        task = asyncio.create_task(self._run(study_id, spec), name=f"study-{study_id}")
        self._tasks[study_id] = task
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        study_id = task.get_name().removeprefix("study-")
        if self._tasks.get(study_id) is task:
            del self._tasks[study_id]
        if not task.cancelled() and task.exception() is not None:
            # Only the store itself failing gets here (every study error is recorded in _run);
            # the study stays pending/running and becomes failed_resumable at the next start.
            log.error("study %s could not be recorded", study_id, exc_info=task.exception())

    async def _run(self, study_id: str, spec: StudySpec) -> None:
        store = self.store
        await asyncio.to_thread(store.set_status, study_id, "running")
        selected = spec.centers or list(self.centers)
        ports = [RecordedCenter(self.centers[c], store, study_id) for c in selected]
        try:
            result = await run_study(spec, ports, min_centers=self.min_centers)
        except (ServiceError, ValidationError) as exc:
            if isinstance(exc, ValidationError):
                # The spec allowed a request the wire models refuse: a gap between the two,
                # reported as the analysis failing (and logged to be fixed), never a trace.
                log.warning("study %s: a request failed validation: %s", study_id, exc)
                problems = describe_errors(exc.errors(include_url=False, include_input=False))
                exc = AnalysisFailed(f"a request to the centers would be invalid: {problems}")
            log.info("study %s failed: %s", study_id, exc.detail)
            await asyncio.to_thread(store.set_status, study_id, "failed",
                                    error=json.dumps(exc.body()))
        except asyncio.CancelledError:
            # Shutting down: leave the study resumable (mark_interrupted does it in close()).
            raise
        except Exception:
            log.exception("study %s raised", study_id)
            await asyncio.to_thread(store.set_status, study_id, "failed",
                                    error=json.dumps(INTERNAL_ERROR))
        else:
            await asyncio.to_thread(store.set_status, study_id, "succeeded",
                                    result=result.model_dump_json())

    async def wait(self, study_id: str) -> None:
        """Until the study's task (if any) is done; for tests and graceful shutdown."""
        task = self._tasks.get(study_id)
        if task is not None:
            await asyncio.wait({task})

    async def close(self) -> None:
        """Cancel running studies; they are left ``failed_resumable``."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self.store.mark_interrupted)
