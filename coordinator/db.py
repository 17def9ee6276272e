"""The coordinator's store: studies, their status and results, and every center release received.

SQLAlchemy Core on SQLite (the default; WAL mode, ``synchronous=FULL``) or PostgreSQL by URL
(``fedstats_service.db``).
Two tables:

* ``coordinator_study`` — one row per study: its spec, status, result and error (JSON text), and
  who created it (the analyst token's fingerprint, never the token);
* ``coordinator_release`` — one row per answer a center gave a study (``info``, ``table``,
  ``refine``, ``mwu``), keyed by (study, center, request key): a study that runs again (resumed
  after a restart) gets the recorded answer instead of asking the center a second time.

Status values: ``pending`` → ``running`` → ``succeeded`` | ``failed``; a study found ``pending``
or ``running`` when a coordinator starts was interrupted (the process died) and becomes
``failed_resumable`` (:meth:`Store.mark_interrupted`); ``POST /v1/studies/{id}/resume`` runs it
again from its recorded releases.

The store is synchronous (short transactions); async code calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from coordinator.models import StudyStatus
from fedstats_service.db import Database, utcnow
from fedstats_service.errors import error_body

INTERRUPTED: tuple[StudyStatus, ...] = ("pending", "running")
INTERRUPTED_ERROR = json.dumps(error_body(
    "interrupted", "the coordinator stopped during this study; POST .../resume runs it again "
    "from its recorded releases"))

metadata = MetaData()

studies = Table(
    "coordinator_study",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("spec", Text, nullable=False),
    Column("status", String(32), nullable=False, index=True),
    Column("result", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_by", String(16), nullable=True),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
)

releases = Table(
    "coordinator_release",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_id", String(36), ForeignKey("coordinator_study.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("center", String(64), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("request_key", String(64), nullable=False),
    Column("request", Text, nullable=False),
    Column("response", Text, nullable=False),
    Column("received_at", String(40), nullable=False),
    UniqueConstraint("study_id", "center", "request_key"),
)


def now() -> str:
    """UTC, ISO 8601 with microseconds: sorts as text, the same on every backend."""
    return utcnow().isoformat(timespec="microseconds")


@dataclass(frozen=True)
class StudyRecord:
    id: str
    spec: str
    status: StudyStatus
    result: str | None
    error: str | None
    created_at: str
    updated_at: str
    created_by: str | None = None


@dataclass(frozen=True)
class ReleaseRecord:
    center: str
    kind: str
    request: str
    response: str
    received_at: str


def _study(row: Any) -> StudyRecord:
    return StudyRecord(row.id, row.spec, row.status, row.result, row.error, row.created_at,
                       row.updated_at, row.created_by)


class Store(Database):
    """Studies and the releases they received."""

    def __init__(self, url: str) -> None:
        super().__init__(url, metadata, what="store", busy_timeout_s=30.0)

    # -- studies ------------------------------------------------------------------------------

    def create_study(
        self, study_id: str, spec: str, *, created_by: str | None = None
    ) -> StudyRecord:
        """A new ``pending`` study; ``created_by`` is the analyst token's fingerprint."""
        stamp = now()
        with self.engine.begin() as conn:
            conn.execute(insert(studies).values(
                id=study_id, spec=spec, status="pending", result=None, error=None,
                created_by=created_by, created_at=stamp, updated_at=stamp,
            ))
        return StudyRecord(study_id, spec, "pending", None, None, stamp, stamp, created_by)

    def get_study(self, study_id: str) -> StudyRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(studies).where(studies.c.id == study_id)).first()
        return _study(row) if row is not None else None

    def list_studies(
        self, *, limit: int = 100, offset: int = 0, status: StudyStatus | None = None
    ) -> list[StudyRecord]:
        """Newest first."""
        stmt = select(studies).order_by(studies.c.created_at.desc(), studies.c.id)
        if status is not None:
            stmt = stmt.where(studies.c.status == status)
        with self.engine.connect() as conn:
            rows = conn.execute(stmt.limit(limit).offset(offset)).all()
        return [_study(r) for r in rows]

    def set_status(
        self,
        study_id: str,
        status: StudyStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        only_from: tuple[StudyStatus, ...] | None = None,
    ) -> bool:
        """Move a study to ``status`` (from one of ``only_from`` when given); False if it did not.

        ``result`` and ``error`` are replaced (a study that runs again starts clean).
        """
        stmt = update(studies).where(studies.c.id == study_id)
        if only_from is not None:
            stmt = stmt.where(studies.c.status.in_(only_from))
        with self.engine.begin() as conn:
            done = conn.execute(
                stmt.values(status=status, result=result, error=error, updated_at=now())
            )
        return done.rowcount == 1

    def mark_interrupted(self) -> int:
        """Studies left ``pending``/``running`` by a process that died become resumable."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(studies)
                .where(studies.c.status.in_(INTERRUPTED))
                .values(status="failed_resumable", updated_at=now(), error=INTERRUPTED_ERROR)
            )
        return int(done.rowcount)

    # -- releases -----------------------------------------------------------------------------

    def find_release(self, study_id: str, center: str, request_key: str) -> str | None:
        """The recorded response (JSON text) to this request, if the study received one."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(releases.c.response).where(
                    releases.c.study_id == study_id,
                    releases.c.center == center,
                    releases.c.request_key == request_key,
                )
            ).scalar_one_or_none()

    def record_release(
        self, study_id: str, center: str, kind: str, request_key: str, request: str,
        response: str,
    ) -> None:
        """Record one answer; a second record of the same request keeps the first."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(releases).values(
                    study_id=study_id, center=center, kind=kind, request_key=request_key,
                    request=request, response=response, received_at=now(),
                ))
        except IntegrityError:
            # The unique key (study, center, request) already holds this answer: a resumed
            # study was answered from it, and the first record is the one to keep.
            return

    def count_releases(self, study_id: str) -> int:
        """How many answers the study received."""
        with self.engine.connect() as conn:
            return int(conn.execute(
                select(func.count()).select_from(releases).where(releases.c.study_id == study_id)
            ).scalar_one())

    def releases_of(self, study_id: str) -> list[ReleaseRecord]:
        """Every answer the study received, in the order received."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(releases).where(releases.c.study_id == study_id).order_by(releases.c.id)
            ).all()
        return [ReleaseRecord(r.center, r.kind, r.request, r.response, r.received_at)
                for r in rows]
