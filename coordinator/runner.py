"""Studies in the background: ``POST /v1/studies`` returns at once, an asyncio task does the work.

Lifecycle (statuses of :mod:`coordinator.db`)::

    pending ──start──▶ running ──▶ succeeded         (every analysis gave its result)
                           │
                           ├──▶ partially_failed  (some did, some failed: each failed one
                           │                       holds its error, the others their results)
                           ├──▶ failed            (none did: a CenterFailure, TooFewCenters, a
                           │                       bad spec; the error names the center and kind)
                           └──▶ failed_resumable  (the coordinator stopped mid-study)
    pending | running ──cancel──▶ cancelled         (its owner or an admin stopped it)
    failed_resumable | partially_failed | cancelled | failed (unreachable, timeout)
        ──resume──▶ pending ...

A cancelled study keeps what it had (the results a resumed run kept, every release received);
its task is stopped where it is, so analyses under way give no result. A resume runs them
again from the recorded releases, paying nothing twice (docs/coordinator.md, "Cancel").

With an ``Idempotency-Key``, a repeated submission gets the study the key made instead of a new
one (:meth:`StudyRunner.replay`, ``coordinator.db.Store.create_study``); a study with a
``webhook_url`` sends a signed notice when it ends (``coordinator.webhooks``).

A resumed study keeps the analyses that succeeded and runs the others again; a ``failed`` one is
resumable only when a center could not be reached in time (``unreachable``, ``timeout``) or
asked to wait (``throttled``: its compute allowance for our token, 429): any other failure
would come back the same (a refusal, an implausible answer, a bad spec).

Several processes over one PostgreSQL store (``shared_store``): each process holds the studies
it runs by a lease it renews, and runs on the studies of a process that died once their leases
ran out (:mod:`coordinator.leases`); nothing is marked at start-up. With one process:

Restart policy: a coordinator does **not** resume studies by itself. At start-up every study
still ``pending`` or ``running`` (its process died) is marked ``failed_resumable``; an analyst
resumes it with ``POST /v1/studies/{id}/resume``. The rerun goes through
:class:`coordinator.recording.RecordedCenter`, so every release the study already received is
taken from the store, not asked again; only the missing ones are requested, so a resumed study
never pays twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping

from coordinator import feed, guarantees, provenance
from coordinator.catalog import check_names
from coordinator.core.errors import (
    Busy,
    Conflict,
    IdempotencyConflict,
    InvalidStudy,
    ServiceError,
    StudyNotFound,
)
from coordinator.db import HELD, LeaseLost, Store, StudyRecord
from coordinator.leases import Lease
from coordinator.models import FailedAnalysis, StudyPlan, StudyResult, StudySpec, StudyStatus
from coordinator.plan import check_info, plan_study
from coordinator.ports import CenterPort
from coordinator.recording import Declared, RecordedCenter
from coordinator.registry import Registry
from coordinator.study import run_study
from coordinator.tables import TableMemory
from coordinator.webhooks import Notifier
from fedstats_service.context import CallContext, current, set_current
from fedstats_service.errors import error_body

log = logging.getLogger(__name__)

INTERNAL_ERROR = ServiceError("the study failed unexpectedly").body()
# How long a submission waits for the centers' info to check the spec's names: a center slower
# than this is not held against the spec (its run takes the same answer when it comes: asked
# once either way).
NAMES_WAIT_S = 3.0
# A center that could not be reached in time, or that asked to wait (its compute allowance for
# our token, 429), may answer when asked again.
TRANSIENT_KINDS = frozenset({"unreachable", "timeout", "throttled"})
CANCELLABLE: tuple[StudyStatus, ...] = ("pending", "running")
CANCELLED_ERROR = json.dumps(error_body(
    "cancelled", "the study was cancelled; POST .../resume runs what it did not finish from its "
    "recorded releases"))


def resumable(record: StudyRecord) -> bool:
    """Whether ``record`` may run again: interrupted, partially failed, or failed only because
    centers could not be reached in time."""
    if record.status in ("failed_resumable", "partially_failed", "cancelled"):
        return True
    if record.status != "failed" or record.error is None:
        return False
    error = json.loads(record.error)
    if error.get("error") == "center_failure":
        return error.get("kind") in TRANSIENT_KINDS
    if error.get("error") == "too_few_centers":
        failures = error.get("failures") or []
        return bool(failures) and all(f.get("kind") in TRANSIENT_KINDS for f in failures)
    return False


def outcome(result: StudyResult) -> tuple[StudyStatus, str | None, str | None]:
    """The status a study ends with, the result to store and the error: succeeded when every
    analysis did, partially_failed when some did (the error is the first failed one's), failed
    when none did (the first failed one's error, no result: as before analyses had a status)."""
    failed = [a for a in result.analyses if isinstance(a, FailedAnalysis)]
    if not failed:
        return "succeeded", result.model_dump_json(), None
    error = failed[0].error.model_dump_json()
    if len(failed) < len(result.analyses):
        return "partially_failed", result.model_dump_json(), error
    return "failed", None, error


def failures(result: StudyResult) -> str:
    """The failed analyses and why, for the log."""
    return "; ".join(f"analysis {i} ({a.kind}): {a.error.detail}"
                     for i, a in enumerate(result.analyses) if isinstance(a, FailedAnalysis))


class StudyRunner:
    """Starts, tracks and stops the study tasks of one coordinator process."""

    def __init__(
        self,
        store: Store,
        centers: Mapping[str, CenterPort],
        *,
        min_centers: int,
        max_running: int = 16,
        notifier: Notifier | None = None,
        registry: Registry | None = None,
        lease: Lease | None = None,
    ) -> None:
        self.store = store
        # Several processes over the store: this one's lease (None: the only process).
        self.lease = lease
        self._keeper: asyncio.Task[None] | None = None
        self.centers = dict(centers)
        self.min_centers = min_centers
        self.max_running = max_running
        self.notifier = notifier or Notifier([], None)
        # What the centers declare (names, K, budgets), for the checks at submission and the
        # dry run; the app's registry when given, so they share its rounds with /v1/catalog.
        self.registry = registry or Registry(self.centers, {})
        # Tables studies obtained, read by later studies that need the same one.
        self.tables = TableMemory(store)
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
        self.notifier.check(spec.webhook_url)

    async def check_names(self, spec: StudySpec) -> dict[str, Declared]:
        """Refuse (422 ``unknown_name``) a spec naming a dataset, variable or group level the
        selected centers do not declare, and (409 ``would_be_refused``) one a center would
        refuse every release of, from their info alone (``coordinator.catalog``,
        ``coordinator.plan.check_info``).

        Returns the info of each selected center, answered or (a center slower than
        ``NAMES_WAIT_S``) still to come: the study's survey takes it instead of asking again
        (one round trip fewer per center, and never two questions for one answer)."""
        selected = spec.centers or list(self.centers)
        declared = await self.registry.declarations(wait_s=NAMES_WAIT_S, budgets=False)
        check_names(spec, declared, selected, min_centers=self.min_centers)
        answered = {d.center: d.info for d in declared if d.info is not None}
        check_info(spec, {c: i for c, i in answered.items() if c in selected}, selected,
                   min_centers=self.min_centers)
        coming = self.registry.infos(budgets=False)
        return {c: answered.get(c) or coming[c] for c in selected if c in coming}

    async def plan(self, spec: StudySpec, analyst_id: str | None = None) -> StudyPlan:
        """What ``spec`` would spend and what would be refused (``coordinator.plan``): nothing
        is created, released or spent."""
        self.check(spec)
        selected = spec.centers or list(self.centers)
        declarations = await self.registry.declarations()
        quotas = {} if analyst_id is None else await asyncio.to_thread(
            lambda: {c: self.store.quota(analyst_id, c, spec.dataset) for c in selected})
        kept = await asyncio.to_thread(self.tables.kept, spec.dataset, spec.variable)
        # In a thread: the plan's power of noisy Mann-Whitney tests inverts noise laws (~0.1-1 s).
        return await asyncio.to_thread(
            lambda: plan_study(spec, declarations, selected, min_centers=self.min_centers,
                               quotas=quotas, kept=kept))

    def _room(self) -> None:
        if len(self._tasks) >= self.max_running:
            raise Busy(len(self._tasks))

    async def submit(self, spec: StudySpec, *, created_by: str | None = None,
                     analyst_id: str | None = None,
                     idempotency_key: str | None = None) -> StudyRecord:
        """Record the study, owned by ``analyst_id``, and start it; returns at once (status
        ``pending``).

        With ``idempotency_key`` already used by the analyst (a concurrent request included),
        returns the study that key made, started once (409 ``idempotency_conflict`` when it was
        made with another spec).

        Refused (503 ``busy``) while ``max_running`` studies run, (422 ``unknown_name``)
        when it names what the selected centers do not declare (:meth:`check_names`), and (409
        ``would_be_refused``) when a selected center would refuse all of it, known from its
        info (its K above the study's, the dataset paused or unavailable), unless
        ``allow_partial`` runs the rest (``coordinator.plan.check_info``)."""
        self.check(spec)
        self._room()
        declared = await self.check_names(spec)
        study_id = uuid.uuid4().hex
        record = await asyncio.to_thread(
            lambda: self.store.create_study(study_id, spec.model_dump_json(),
                                            created_by=created_by, analyst_id=analyst_id,
                                            idempotency_key=idempotency_key,
                                            lease=self._held())
        )
        if record.id != study_id:  # the key's study, made by a request a moment before
            return self._same_spec(record, spec)
        self._start(study_id, spec, declared=declared)
        return record

    async def replay(self, spec: StudySpec, *, analyst_id: str | None,
                     idempotency_key: str) -> StudyRecord | None:
        """The study the analyst made with ``idempotency_key``, if any (409
        ``idempotency_conflict`` when with another spec): asked before anything else, so a
        repeat is answered even when a quota or ``max_running`` would refuse a new study."""
        record = await asyncio.to_thread(self.store.keyed_study, analyst_id, idempotency_key)
        return self._same_spec(record, spec) if record is not None else None

    @staticmethod
    def _same_spec(record: StudyRecord, spec: StudySpec) -> StudyRecord:
        if StudySpec.model_validate_json(record.spec) != spec:
            raise IdempotencyConflict(record.id)
        return record

    async def resume(self, study_id: str) -> StudyRecord:
        """Run a study that did not succeed again from its recorded releases (see
        :func:`resumable`); the analyses it has results of keep them, the others run."""
        record = await asyncio.to_thread(self.store.get_study, study_id)
        if record is None:
            raise StudyNotFound(study_id)
        self._room()
        # Moved only from the status read (and so with the result read): two resumes of one
        # study cannot both start it. The result is kept while it runs again.
        moved = resumable(record) and await asyncio.to_thread(
            lambda: self.store.set_status(study_id, "pending", result=record.result,
                                          only_from=(record.status,), lease=self._held()))
        if not moved:
            raise Conflict(f"study {study_id!r} is {record.status}; only a failed_resumable or "
                           "partially_failed study, or one that failed because a center was "
                           "unreachable or timed out, can be resumed")
        log.info("study %s pending: resumed (was %s)", study_id, record.status)
        feed.for_store(self.store).changed(study_id)
        previous = StudyResult.model_validate_json(record.result) if record.result else None
        self._start(study_id, StudySpec.model_validate_json(record.spec), previous)
        updated = await asyncio.to_thread(self.store.get_study, study_id)
        assert updated is not None
        return updated

    async def cancel(self, study_id: str) -> StudyRecord:
        """Stop a ``pending`` or ``running`` study: its task is cancelled (a release under way
        is not waited for: if the center spent on it, a resume gets the same answer from the
        center's release memory), and it becomes ``cancelled`` keeping the results it had. 409
        for a study in any other status (one that ended meanwhile included)."""
        record = await asyncio.to_thread(self.store.get_study, study_id)
        if record is None:
            raise StudyNotFound(study_id)
        task = self._tasks.get(study_id)
        if record.status in CANCELLABLE and task is not None:
            task.cancel()
            await asyncio.wait({task})
            record = await asyncio.to_thread(self.store.get_study, study_id)
            assert record is not None
        # Moved only from pending/running: a study that ended meanwhile keeps its status.
        moved = record.status in CANCELLABLE and await asyncio.to_thread(
            self.store.set_status, study_id, "cancelled", result=record.result,
            error=CANCELLED_ERROR, only_from=CANCELLABLE)
        if not moved:
            raise Conflict(f"study {study_id!r} is {record.status}; only a pending or running "
                           "study can be cancelled")
        log.info("study %s cancelled", study_id)
        feed.for_store(self.store).changed(study_id)
        self.notifier.notify(study_id, "cancelled",
                             StudySpec.model_validate_json(record.spec).webhook_url)
        updated = await asyncio.to_thread(self.store.get_study, study_id)
        assert updated is not None
        return updated

    def _held(self) -> tuple[str, float] | None:
        return self.lease.of() if self.lease is not None else None

    def start(self) -> None:
        """With a lease (several processes over the store): start renewing this process's
        leases and claiming the studies no live process holds (:meth:`_keep_leases`)."""
        if self.lease is not None and self._keeper is None:
            self._keeper = asyncio.create_task(self._keep_leases(self.lease),
                                               name="study-leases")

    async def _keep_leases(self, lease: Lease) -> None:
        """Every ``heartbeat_s``: renew the leases of the studies running here, stop those this
        process no longer holds (another claimed it after a stall longer than the lease, or it
        was cancelled elsewhere), and claim free studies while there is room."""
        while True:
            try:
                await self.renew_and_claim()
            except Exception:  # the store unreachable a moment: try again at the next beat
                log.exception("study leases: renewal or claim failed")
            await asyncio.sleep(lease.heartbeat_s)

    async def renew_and_claim(self) -> list[str]:
        """One beat of :meth:`_keep_leases`; returns the ids of the studies claimed."""
        lease = self.lease
        assert lease is not None
        running = dict(self._tasks)
        lost = await asyncio.to_thread(self.store.renew_leases, lease.owner, list(running),
                                       lease.seconds)
        for study_id, task in running.items():
            if study_id in lost and not task.done():
                log.warning("study %s: no longer held by this process (%s); stopped here",
                            study_id, lease.owner)
                task.cancel()
        claimed = await asyncio.to_thread(self.store.claim_studies, lease.owner, lease.seconds,
                                          limit=self.max_running - len(self._tasks))
        for record in claimed:
            if record.id in self._tasks:  # this process's own, let go a moment ago
                continue
            log.info("study %s claimed by %s (was %s): running on from its recorded releases",
                     record.id, lease.owner, record.status)
            previous = (StudyResult.model_validate_json(record.result)
                        if record.result else None)
            self._start(record.id, StudySpec.model_validate_json(record.spec), previous)
        return [r.id for r in claimed]

    def _start(self, study_id: str, spec: StudySpec, previous: StudyResult | None = None, *,
               declared: Mapping[str, Declared] | None = None) -> None:
        self.start()
        task = asyncio.create_task(self._run(study_id, spec, previous, declared or {}),
                                   name=f"study-{study_id}")
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

    async def _run(self, study_id: str, spec: StudySpec, previous: StudyResult | None = None,
                   declared: Mapping[str, Declared] | None = None) -> None:
        """Runs the study and records how it ended; ``declared``: the centers' info asked at
        submission a moment before (or still coming), which the survey takes as each center's
        answer."""
        store = self.store
        # The owner goes with every center call (the client's headers) and pays its quota.
        record = await asyncio.to_thread(store.get_study, study_id)
        owner = record.analyst_id if record is not None else None
        set_current(CallContext(request_id=current().request_id, study_id=study_id,
                                analyst_id=owner))
        # A resumed study shows the results it keeps while it runs (and keeps them if the
        # coordinator stops again).
        kept = previous.model_dump_json() if previous is not None else None
        # Only from pending: a study cancelled meanwhile (by another process) stays cancelled.
        # Held by this process (several over the store): also a study claimed while running.
        holder = self.lease.owner if self.lease is not None else None
        if not await asyncio.to_thread(
                lambda: store.set_status(study_id, "running", result=kept,
                                         only_from=HELD if holder else ("pending",),
                                         held_by=holder)):
            return
        log.info("study %s running", study_id)
        feed.for_store(store).changed(study_id)
        selected = spec.centers or list(self.centers)
        declared = declared or {}
        ports = [RecordedCenter(self.centers[c], store, study_id, analyst_id=owner,
                                declared=declared.get(c), owner=holder)
                 for c in selected]
        try:
            result = await run_study(spec, ports, min_centers=self.min_centers,
                                     previous=previous, tables=self.tables,
                                     study_id=study_id)
        except asyncio.CancelledError:
            # Shutting down (mark_interrupted leaves it resumable in close()), cancelled
            # (cancel() records it) or lost to another process (it runs it on).
            raise
        except LeaseLost:
            log.warning("study %s: another process holds it now; stopped here", study_id)
            return
        except Exception:
            log.exception("study %s raised", study_id)
            log.info("study %s failed: %s", study_id, INTERNAL_ERROR["detail"])
            status: StudyStatus = "failed"
            stored: str | None = None
            error: str | None = json.dumps(INTERNAL_ERROR)
        else:
            # The software that computed it, for the reproducibility record, and each included
            # center's lifetime guarantee now that the study's releases are paid.
            result = result.model_copy(update={
                "software": await asyncio.to_thread(provenance.software),
                "guarantees": await guarantees.collect(ports, spec.dataset, result)})
            status, stored, error = outcome(result)
            if status == "succeeded":
                log.info("study %s succeeded", study_id)
            else:
                log.info("study %s %s: %s", study_id, status, failures(result))
        # Only from running: a study cancelled meanwhile (by another process) stays cancelled;
        # only while held here: a process that lost it to another records nothing.
        if await asyncio.to_thread(lambda: store.set_status(
                study_id, status, result=stored, error=error, only_from=("running",),
                held_by=holder)):
            feed.for_store(store).changed(study_id)  # its event streams send the end
            self.notifier.notify(study_id, status, spec.webhook_url)

    async def wait(self, study_id: str) -> None:
        """Until the study's task (if any) is done; for tests and graceful shutdown."""
        task = self._tasks.get(study_id)
        if task is not None:
            await asyncio.wait({task})

    async def close(self) -> None:
        """Cancel running studies; they are left ``failed_resumable`` (one process), or let go
        for another process to run on (several over the store)."""
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        for study_id in self._tasks:
            log.info("study %s %s: the coordinator is stopping", study_id,
                     "failed_resumable" if self.lease is None else "let go")
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.lease is None:
            await asyncio.to_thread(self.store.mark_interrupted)
        else:
            await asyncio.to_thread(self.store.release_leases, self.lease.owner)
        await self.notifier.aclose()
