"""The coordinator's store: studies, their releases, analyst accounts, shares, ε quotas and the
audit log.

SQLAlchemy Core on SQLite (the default; WAL mode, ``synchronous=FULL``) or PostgreSQL by URL
(``fedstats_service.db``). Tables:

* ``coordinator_study`` — one row per study: its spec, status, result and error (JSON text), the
  analyst who owns it (``analyst_id``) and the fingerprint of the token that created it
  (``created_by``, never the token);
* ``coordinator_release`` — one row per answer a center gave a study (``info``, ``table``,
  ``refine``, ``mwu``, ...), keyed by (study, center, request key): a study that runs again
  (resumed after a restart) gets the recorded answer instead of asking the center a second time;
* ``coordinator_analyst`` — analyst accounts: id, name, role (``analyst`` | ``admin``), the
  argon2 hash of the token (never the token), created and revoked times
  (:mod:`coordinator.accounts`);
* ``coordinator_share`` — (study, analyst) pairs: who may read a study besides its owner;
* ``coordinator_quota`` / ``coordinator_spent`` — per (analyst, center, dataset): the most ε the
  analyst's studies may spend there, and what they spent (:meth:`Store.reserve`);
* ``coordinator_table`` — the federated tables studies obtained, kept for later studies that
  need the same table (:mod:`coordinator.tables`);
* ``coordinator_session`` — the web console's sign-ins (``coordinator.ui.sessions``);
* ``coordinator_audit`` — who did what, when (:mod:`coordinator.audit`);
* ``coordinator_idempotency`` — (analyst, ``Idempotency-Key``) → the study that request created:
  a repeat returns that study instead of starting another (:meth:`Store.create_study`). The
  primary key makes two concurrent requests with one key create one study, not a check first.

Status values: ``pending`` → ``running`` → ``succeeded`` | ``partially_failed`` (some analyses
finished) | ``failed``, or ``cancelled`` by its owner (``POST .../cancel``); a study found
``pending`` or ``running`` when a coordinator starts was interrupted (the process died) and
becomes ``failed_resumable`` (:meth:`Store.mark_interrupted`); ``POST /v1/studies/{id}/resume``
runs what did not finish again from its recorded releases (``coordinator.runner.resumable``).

Several coordinator processes over one PostgreSQL store (``shared_store``, docs/deploy.md) do
not mark anything at start: each ``pending``/``running`` study is held by the process running
it (``owner``) until ``lease_until``, a lease the process renews while it runs; a process
claims the studies no live process holds (:meth:`Store.claim_studies`, ``FOR UPDATE SKIP
LOCKED``) and runs them on from their recorded releases. Every write a study makes checks its
lease in the same transaction (:meth:`Store.check_lease_in`), so a process that lost a study
records nothing more of it.

Older stores keep opening: new tables are created when the store opens, and the one column added
to an existing table (``coordinator_study.analyst_id``) is added by :func:`_upgrade` (idempotent;
studies of before are given to the analyst of the configured token that made them,
``config-<fingerprint>``, ``coordinator.accounts``).

The store is synchronous (short transactions); async code calls it through ``asyncio.to_thread``.
The writes a study makes per release (the look-up and reservation, the record, a refund) have a
``*_in(conn, ...)`` form that runs within a given transaction: ``coordinator.commits`` commits a
protocol round's writes together (:meth:`Store.write_many`, one fsync), each durably before its
caller goes on. :attr:`Store.commits` counts the transactions committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    case,
    cast,
    delete,
    event,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError

from fedstats_service.db import Database, add_missing_columns, utcnow
from fedstats_service.errors import error_body

if TYPE_CHECKING:  # annotations only: the store (and the operator's commands) need no models
    from coordinator.models import StudyStatus

T = TypeVar("T")

INTERRUPTED: tuple[StudyStatus, ...] = ("pending", "running")
#: The statuses a study is held (leased) in by the process running it.
HELD: tuple[StudyStatus, ...] = ("pending", "running")
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
    # Added after the first release (_upgrade adds it to an older store).
    Column("analyst_id", String(64), nullable=True, index=True),
    # Several coordinator processes over one store (:meth:`Store.claim_studies`): the process
    # running the study and until when it holds it (seconds since the epoch, the database's
    # clock: hosts' clocks may differ). Both None: no process holds it.
    Column("owner", String(64), nullable=True),
    Column("lease_until", Float, nullable=True),
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

analysts = Table(
    "coordinator_analyst",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("role", String(16), nullable=False),
    Column("token_hash", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("revoked_at", String(40), nullable=True),
    # When the token stops working (None: never); a rotation sets a new token and expiry.
    Column("expires_at", String(40), nullable=True),
)

shares = Table(
    "coordinator_share",
    metadata,
    Column("study_id", String(36), ForeignKey("coordinator_study.id", ondelete="CASCADE"),
           primary_key=True),
    Column("analyst_id", String(64), primary_key=True, index=True),
    Column("shared_by", String(64), nullable=True),
    Column("created_at", String(40), nullable=False),
)

quotas = Table(
    "coordinator_quota",
    metadata,
    Column("analyst_id", String(64), primary_key=True),
    Column("center", String(64), primary_key=True),
    Column("dataset", String(128), primary_key=True),
    Column("epsilon", Float, nullable=False),
    Column("set_at", String(40), nullable=False),
)

spent = Table(
    "coordinator_spent",
    metadata,
    Column("analyst_id", String(64), primary_key=True),
    Column("center", String(64), primary_key=True),
    Column("dataset", String(128), primary_key=True),
    Column("epsilon", Float, nullable=False),
)

idempotency = Table(
    "coordinator_idempotency",
    metadata,
    Column("analyst_id", String(64), primary_key=True),
    Column("key", String(128), primary_key=True),
    Column("study_id", String(36), ForeignKey("coordinator_study.id", ondelete="CASCADE"),
           nullable=False),
    Column("created_at", String(40), nullable=False),
)

# The federated tables studies obtained, kept for later studies asking the same table
# (coordinator.tables): keyed by the digest of (dataset, variable, groups, K, closing, centers,
# their epochs).
tables = Table(
    "coordinator_table",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("dataset", String(128), nullable=False),
    Column("variable", String(128), nullable=False),
    Column("described", Text, nullable=False),
    Column("table", Text, nullable=False),
    Column("study_id", String(36), nullable=False),
    Column("created_at", String(40), nullable=False),
    Index("ix_coordinator_table_variable", "dataset", "variable"),
)

# Console sign-ins (coordinator.ui.sessions): the SHA-256 of the cookie, never the cookie.
sessions = Table(
    "coordinator_session",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("analyst_id", String(64), nullable=False, index=True),
    Column("token_id", String(16), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("expires_at", String(40), nullable=False),
    # What ties the session to the token that opened it (coordinator.ui.sessions.binding):
    # a session whose binding is not the account's current one is over (NULL: a sign-in of
    # before bindings, over too).
    Column("token_binding", String(64), nullable=True),
)

audit = Table(
    "coordinator_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", String(40), nullable=False),
    Column("analyst_id", String(64), nullable=True, index=True),
    Column("token_id", String(16), nullable=True),
    Column("action", String(32), nullable=False, index=True),
    Column("target", String(200), nullable=True),
    Column("request_id", String(64), nullable=True),
    Column("detail", Text, nullable=True),
)

# Sums of ε in floating point: a spend that reaches the quota up to rounding still fits.
EPSILON_TOLERANCE = 1e-9


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
    analyst_id: str | None = None
    #: The coordinator process holding the study (several processes over one store), if any.
    owner: str | None = None


@dataclass(frozen=True)
class ReleaseRecord:
    center: str
    kind: str
    request: str
    response: str
    received_at: str


@dataclass(frozen=True)
class AnalystRecord:
    id: str
    name: str
    role: str
    token_hash: str
    created_at: str
    revoked_at: str | None
    expires_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def expired(self, at: str | None = None) -> bool:
        """Whether its token has expired by ``at`` (ISO 8601 UTC as :func:`now`; default now)."""
        return self.expires_at is not None and self.expires_at <= (at or now())


@dataclass(frozen=True)
class ShareRecord:
    study_id: str
    analyst_id: str
    shared_by: str | None
    created_at: str


@dataclass(frozen=True)
class QuotaRecord:
    """An analyst's quota at one (center, dataset) (None: no quota, unlimited) and the ε spent
    there so far."""

    analyst_id: str
    center: str
    dataset: str
    epsilon: float | None
    spent: float


@dataclass(frozen=True)
class TableRecord:
    """A kept federated table: its key's description and the table (JSON text), the study that
    obtained it, when."""

    key: str
    described: str
    table: str
    study_id: str
    created_at: str


@dataclass(frozen=True)
class SessionRecord:
    """A console sign-in: whose, by which token (its fingerprint), its CSRF token, until when."""

    analyst_id: str
    token_id: str
    csrf: str
    created_at: str
    expires_at: str
    token_binding: str | None = None


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: str
    analyst_id: str | None
    token_id: str | None
    action: str
    target: str | None
    request_id: str | None
    detail: str | None


def _study(row: Any) -> StudyRecord:
    return StudyRecord(row.id, row.spec, row.status, row.result, row.error, row.created_at,
                       row.updated_at, row.created_by, row.analyst_id, row.owner)


def _analyst(row: Any) -> AnalystRecord:
    return AnalystRecord(row.id, row.name, row.role, row.token_hash, row.created_at,
                         row.revoked_at, row.expires_at)


def _table(row: Any) -> TableRecord:
    return TableRecord(row.key, row.described, row.table, row.study_id, row.created_at)


def _add_columns(engine: Engine, table: Table, columns: list[str]) -> bool:
    """Add the ``columns`` ``table`` lacks; True if they were missing. Another process (the
    CLI next to a running coordinator) may add them at the same moment: that counts as added
    just now, so what follows an addition (filling, indexing: idempotent) still runs."""
    try:
        with engine.begin() as conn:
            return bool(add_missing_columns(conn, {table: columns}))
    except DBAPIError:
        if columns[-1] not in {c["name"] for c in inspect(engine).get_columns(table.name)}:
            raise
        return True


def _upgrade(engine: Engine) -> None:
    """Bring a store made by an older version up to date; does nothing on a current one.

    ``coordinator_study.analyst_id`` (the owner) is added, indexed, and filled for the studies
    of before: their ``created_by`` is the fingerprint of a configured analyst token, whose
    analyst is ``config-<fingerprint>`` (``coordinator.accounts``); ``coordinator_analyst``
    gains ``expires_at`` (the accounts of before never expire)."""
    _add_columns(engine, analysts, ["expires_at"])
    _add_columns(engine, sessions, ["token_binding"])
    _add_columns(engine, studies, ["owner", "lease_until"])
    if not _add_columns(engine, studies, ["analyst_id"]):
        return
    with engine.begin() as conn:
        conn.execute(text("CREATE INDEX IF NOT EXISTS ix_coordinator_study_analyst_id "
                          "ON coordinator_study (analyst_id)"))
        _own_old_studies(conn)


def _own_old_studies(conn: Connection) -> None:
    conn.execute(
        update(studies)
        .where(studies.c.analyst_id.is_(None), studies.c.created_by.is_not(None))
        .values(analyst_id=literal("config-") + studies.c.created_by)
    )


class LeaseLost(Exception):
    """The process no longer holds the study it writes for: its lease ran out and another
    process claimed it (or it ended meanwhile). Raised before anything is written."""

    def __init__(self, study_id: str, owner: str) -> None:
        super().__init__(f"study {study_id}: {owner} no longer holds it")
        self.study_id = study_id


class Store(Database):
    """Studies and the releases they received; analysts, shares, quotas and the audit log."""

    def __init__(self, url: str) -> None:
        super().__init__(url, metadata, what="store", busy_timeout_s=30.0)
        _upgrade(self.engine)
        self._dialect = sqlite if self.is_sqlite else postgresql
        #: Transactions committed through this store's engine (each one fsync of SQLite's log
        #: with ``synchronous=FULL``; one WAL flush on PostgreSQL): the benchmarks and the
        #: group-commit tests read it.
        self.commits = 0
        event.listen(self.engine, "commit", self._count_commit)

    # -- studies ------------------------------------------------------------------------------

    def create_study(
        self, study_id: str, spec: str, *, created_by: str | None = None,
        analyst_id: str | None = None, idempotency_key: str | None = None,
        lease: tuple[str, float] | None = None,
    ) -> StudyRecord:
        """A new ``pending`` study owned by ``analyst_id``; ``created_by`` is the fingerprint of
        the token it was created with.

        With ``idempotency_key``, the study and the key are inserted in one transaction: when
        the analyst already used that key (even a moment ago, in a request still running), the
        key's primary key refuses the insert, nothing is created, and the study made with the
        key is returned instead (:meth:`keyed_study`; compare its ``id`` to ``study_id``).

        With ``lease`` (owner, seconds), the new study is held by that process from the start
        (:meth:`claim_studies`): no other process takes it while the lease is renewed."""
        stamp = now()
        owner, until = ((None, None) if lease is None
                        else (lease[0], self._clock_sql() + lease[1]))
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(studies).values(
                    id=study_id, spec=spec, status="pending", result=None, error=None,
                    created_by=created_by, analyst_id=analyst_id, created_at=stamp,
                    updated_at=stamp, owner=owner, lease_until=until,
                ))
                if idempotency_key is not None:
                    conn.execute(insert(idempotency).values(
                        analyst_id=analyst_id or "", key=idempotency_key, study_id=study_id,
                        created_at=stamp))
        except IntegrityError:
            found = (self.keyed_study(analyst_id, idempotency_key)
                     if idempotency_key is not None else None)
            if found is None:
                raise  # not the key (a study id used twice): a bug, not a repeat
            return found
        return StudyRecord(study_id, spec, "pending", None, None, stamp, stamp, created_by,
                           analyst_id, owner)

    def keyed_study(self, analyst_id: str | None, key: str) -> StudyRecord | None:
        """The study the analyst created with ``Idempotency-Key: key``, if any."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(studies).join(idempotency, idempotency.c.study_id == studies.c.id)
                .where(idempotency.c.analyst_id == (analyst_id or ""),
                       idempotency.c.key == key)
            ).first()
        return _study(row) if row is not None else None

    def get_study(self, study_id: str) -> StudyRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(studies).where(studies.c.id == study_id)).first()
        return _study(row) if row is not None else None

    def list_studies(
        self, *, limit: int = 100, offset: int = 0, status: StudyStatus | None = None,
        visible_to: str | None = None,
    ) -> list[StudyRecord]:
        """Newest first; with ``visible_to``, only the studies that analyst owns or that were
        shared with them."""
        stmt = select(studies).order_by(studies.c.created_at.desc(), studies.c.id)
        if status is not None:
            stmt = stmt.where(studies.c.status == status)
        if visible_to is not None:
            shared = select(shares.c.study_id).where(shares.c.analyst_id == visible_to)
            stmt = stmt.where(or_(studies.c.analyst_id == visible_to, studies.c.id.in_(shared)))
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
        held_by: str | None = None,
        lease: tuple[str, float] | None = None,
    ) -> bool:
        """Move a study to ``status`` (from one of ``only_from`` when given); False if it did not.

        ``result`` and ``error`` are replaced (a study that runs again starts clean). With
        ``held_by``, only while that process holds it (its lease may have run out: another
        process may hold it now); with ``lease`` (owner, seconds), that process holds it after.
        """
        stmt = update(studies).where(studies.c.id == study_id)
        if only_from is not None:
            stmt = stmt.where(studies.c.status.in_(only_from))
        if held_by is not None:
            stmt = stmt.where(studies.c.owner == held_by)
        values: dict[str, Any] = {"status": status, "result": result, "error": error,
                                  "updated_at": now()}
        if lease is not None:
            values.update(owner=lease[0], lease_until=self._clock_sql() + lease[1])
        with self.engine.begin() as conn:
            done = conn.execute(stmt.values(**values))
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

    # -- leases: several coordinator processes over one store ---------------------------------

    def _clock_sql(self) -> Any:
        """The database's clock in seconds since the epoch, as SQL: every process (every host)
        compares leases on one clock."""
        if self.is_sqlite:
            return (func.julianday("now") - 2440587.5) * 86400.0
        return cast(func.extract("epoch", func.clock_timestamp()), Float)

    def claim_studies(self, owner: str, lease_s: float, *, limit: int) -> list[StudyRecord]:
        """Up to ``limit`` studies ``pending`` or ``running`` that no process holds (their
        holder stopped, or died and its lease ran out), now held by ``owner`` for ``lease_s``
        seconds, oldest first; each claim is audited (``study.claimed``: by whom, from whom).

        The rows are read ``FOR UPDATE SKIP LOCKED`` (PostgreSQL): two processes claiming at
        once lock different rows and never claim one study twice; a row another transaction
        holds (its owner renewing, a claim under way) is skipped, not waited for. (SQLite has
        one writer at a time, which serialises the claims the same way.)"""
        if limit <= 0:
            return []
        with self.engine.begin() as conn:
            clock = conn.execute(select(self._clock_sql())).scalar_one()
            rows = conn.execute(
                select(studies)
                .where(studies.c.status.in_(HELD),
                       or_(studies.c.lease_until.is_(None), studies.c.lease_until < clock))
                .order_by(studies.c.updated_at, studies.c.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            ).all()
            if not rows:
                return []
            conn.execute(update(studies).where(studies.c.id.in_([r.id for r in rows]))
                         .values(owner=owner, lease_until=clock + lease_s))
            stamp = now()
            conn.execute(insert(audit), [
                {"at": stamp, "analyst_id": r.analyst_id, "token_id": None,
                 "action": "study.claimed", "target": r.id, "request_id": None,
                 "detail": json.dumps({"owner": owner, "from": r.owner, "status": r.status})}
                for r in rows])
        return [StudyRecord(r.id, r.spec, r.status, r.result, r.error, r.created_at,
                            r.updated_at, r.created_by, r.analyst_id, owner) for r in rows]

    def renew_leases(self, owner: str, study_ids: Sequence[str], lease_s: float) -> set[str]:
        """Extend ``owner``'s leases of ``study_ids`` by ``lease_s`` from now; returns those it
        lost: claimed by another process (after its lease ran out) or cancelled (through
        another process). A study that ended otherwise is not lost: it was ended here, or by
        the process that took it, and either way there is nothing left to stop."""
        if not study_ids:
            return set()
        with self.engine.begin() as conn:
            held = set(conn.execute(
                update(studies)
                .where(studies.c.id.in_(list(study_ids)), studies.c.owner == owner,
                       studies.c.status.in_(HELD))
                .values(lease_until=self._clock_sql() + lease_s)
                .returning(studies.c.id)
            ).scalars().all())
            others = [s for s in study_ids if s not in held]
            if not others:
                return set()
            lost = conn.execute(
                select(studies.c.id).where(studies.c.id.in_(others),
                                           studies.c.status.in_((*HELD, "cancelled")))
            ).scalars().all()
        return set(lost)

    def release_leases(self, owner: str) -> int:
        """Let go of every study ``owner`` holds (a process stopping): another process claims
        them at once (:meth:`claim_studies`) instead of after their leases run out."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(studies)
                .where(studies.c.owner == owner, studies.c.status.in_(HELD))
                .values(owner=None, lease_until=None))
        return int(done.rowcount)

    def check_lease_in(self, conn: Connection, study_id: str, owner: str) -> None:
        """Raise :class:`LeaseLost` unless ``owner`` holds the study, within ``conn``'s
        transaction: its row is locked ``FOR SHARE`` until the transaction ends, so no claim
        (``FOR UPDATE``) takes it between this check and the writes that follow it."""
        held = conn.execute(
            select(studies.c.id)
            .where(studies.c.id == study_id, studies.c.owner == owner,
                   studies.c.status.in_(HELD))
            .with_for_update(read=True)
        ).first()
        if held is None:
            raise LeaseLost(study_id, owner)

    # -- releases -----------------------------------------------------------------------------

    def find_release(self, study_id: str, center: str, request_key: str) -> str | None:
        """The recorded response (JSON text) to this request, if the study received one."""
        with self.engine.connect() as conn:
            return self.find_release_in(conn, study_id, center, request_key)

    @staticmethod
    def find_release_in(conn: Connection, study_id: str, center: str,
                        request_key: str) -> str | None:
        """:meth:`find_release` on ``conn`` (within a group commit's transaction)."""
        found: str | None = conn.execute(
            select(releases.c.response).where(
                releases.c.study_id == study_id,
                releases.c.center == center,
                releases.c.request_key == request_key,
            )
        ).scalar_one_or_none()
        return found

    def record_release(
        self, study_id: str, center: str, kind: str, request_key: str, request: str,
        response: str,
    ) -> None:
        """Record one answer; a second record of the same request keeps the first."""
        self.write(self.record_release_in, study_id, center, kind, request_key, request,
                   response)

    def record_release_in(
        self, conn: Connection, study_id: str, center: str, kind: str, request_key: str,
        request: str, response: str,
    ) -> None:
        """:meth:`record_release` within ``conn``'s transaction (a group commit,
        ``coordinator.commits``)."""
        # The unique key (study, center, request) may already hold this answer: a resumed study
        # was answered from it, and the first record is the one to keep. ON CONFLICT rather
        # than catching the IntegrityError: the other writes of the transaction stay valid.
        conn.execute(self._dialect.insert(releases).values(
            study_id=study_id, center=center, kind=kind, request_key=request_key,
            request=request, response=response, received_at=now(),
        ).on_conflict_do_nothing())

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

    # -- federated tables ---------------------------------------------------------------------

    def keep_table(self, key: str, dataset: str, variable: str, described: str, table: str,
                   study_id: str) -> None:
        """Keep a federated table under ``key``; a table already kept there stays (the first
        study that obtained it keeps the credit; equal keys hold equal tables)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(tables).values(
                    key=key, dataset=dataset, variable=variable, described=described,
                    table=table, study_id=study_id, created_at=now(),
                ))
        except IntegrityError:
            return

    def find_table(self, key: str) -> TableRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(tables).where(tables.c.key == key)).one_or_none()
        return None if row is None else _table(row)

    def tables_of(self, dataset: str, variable: str) -> list[TableRecord]:
        """Every kept table of ``variable``, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(tables).where(tables.c.dataset == dataset, tables.c.variable == variable)
                .order_by(tables.c.created_at)
            ).all()
        return [_table(r) for r in rows]

    # -- console sessions ---------------------------------------------------------------------

    def add_session(self, id_hash: str, analyst_id: str, token_id: str, csrf: str,
                    expires_at: str, token_binding: str) -> None:
        with self.engine.begin() as conn:
            # Expired sign-ins go as new ones come: the table holds only live sessions.
            conn.execute(delete(sessions).where(sessions.c.expires_at <= now()))
            conn.execute(insert(sessions).values(
                id_hash=id_hash, analyst_id=analyst_id, token_id=token_id, csrf=csrf,
                created_at=now(), expires_at=expires_at, token_binding=token_binding))

    def get_session(self, id_hash: str) -> SessionRecord | None:
        """The session, unless it expired."""
        with self.engine.connect() as conn:
            row = conn.execute(select(sessions).where(
                sessions.c.id_hash == id_hash, sessions.c.expires_at > now())).one_or_none()
        return None if row is None else SessionRecord(row.analyst_id, row.token_id, row.csrf,
                                                       row.created_at, row.expires_at,
                                                       row.token_binding)

    def delete_session(self, id_hash: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(sessions).where(sessions.c.id_hash == id_hash))

    # -- analysts -----------------------------------------------------------------------------

    def add_analyst(self, analyst_id: str, name: str, role: str, token_hash: str,
                    expires_at: str | None = None) -> AnalystRecord:
        stamp = now()
        with self.engine.begin() as conn:
            conn.execute(insert(analysts).values(id=analyst_id, name=name, role=role,
                                                 token_hash=token_hash, created_at=stamp,
                                                 revoked_at=None, expires_at=expires_at))
        return AnalystRecord(analyst_id, name, role, token_hash, stamp, None, expires_at)

    def rotate_analyst(self, analyst_id: str, token_hash: str,
                       expires_at: str | None) -> AnalystRecord | None:
        """A new token (its hash) and expiry for an active account: the old token stops
        working at once. None if there is no such active account."""
        with self.engine.begin() as conn:
            changed = conn.execute(
                update(analysts)
                .where(analysts.c.id == analyst_id, analysts.c.revoked_at.is_(None))
                .values(token_hash=token_hash, expires_at=expires_at)).rowcount
            # The old token's console sessions end with it, in every process on the store.
            conn.execute(delete(sessions).where(sessions.c.analyst_id == analyst_id))
        return self.get_analyst(analyst_id) if changed else None

    def get_analyst(self, analyst_id: str) -> AnalystRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(analysts).where(analysts.c.id == analyst_id)).first()
        return _analyst(row) if row is not None else None

    def list_analysts(self) -> list[AnalystRecord]:
        """Oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(analysts).order_by(analysts.c.created_at,
                                                          analysts.c.id)).all()
        return [_analyst(r) for r in rows]

    def revoke_analyst(self, analyst_id: str) -> AnalystRecord | None:
        """Revoke the account (its first revocation time is kept); None if there is none."""
        with self.engine.begin() as conn:
            conn.execute(update(analysts)
                         .where(analysts.c.id == analyst_id, analysts.c.revoked_at.is_(None))
                         .values(revoked_at=now()))
            conn.execute(delete(sessions).where(sessions.c.analyst_id == analyst_id))
        return self.get_analyst(analyst_id)

    # -- shares -------------------------------------------------------------------------------

    def share(self, study_id: str, analyst_id: str, *, shared_by: str | None) -> ShareRecord:
        """Let ``analyst_id`` read the study; sharing twice keeps the first record."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(shares).values(study_id=study_id, analyst_id=analyst_id,
                                                   shared_by=shared_by, created_at=now()))
        except IntegrityError:
            pass  # already shared
        found = [s for s in self.shares_of(study_id) if s.analyst_id == analyst_id]
        return found[0]

    def unshare(self, study_id: str, analyst_id: str) -> bool:
        """Withdraw a share; False if there was none."""
        with self.engine.begin() as conn:
            done = conn.execute(delete(shares).where(shares.c.study_id == study_id,
                                                     shares.c.analyst_id == analyst_id))
        return done.rowcount == 1

    def shares_of(self, study_id: str) -> list[ShareRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(shares).where(shares.c.study_id == study_id)
                                .order_by(shares.c.created_at, shares.c.analyst_id)).all()
        return [ShareRecord(r.study_id, r.analyst_id, r.shared_by, r.created_at) for r in rows]

    def is_shared(self, study_id: str, analyst_id: str) -> bool:
        with self.engine.connect() as conn:
            found = conn.execute(select(shares.c.study_id).where(
                shares.c.study_id == study_id, shares.c.analyst_id == analyst_id)).first()
        return found is not None

    # -- quotas -------------------------------------------------------------------------------

    def set_quota(self, analyst_id: str, center: str, dataset: str,
                  epsilon: float | None) -> QuotaRecord:
        """Set (or with None remove) the analyst's quota at (center, dataset); what was spent
        there stays counted."""
        key = (quotas.c.analyst_id == analyst_id, quotas.c.center == center,
               quotas.c.dataset == dataset)
        with self.engine.begin() as conn:
            conn.execute(delete(quotas).where(*key))
            if epsilon is not None:
                conn.execute(insert(quotas).values(analyst_id=analyst_id, center=center,
                                                   dataset=dataset, epsilon=epsilon,
                                                   set_at=now()))
        return self.quota(analyst_id, center, dataset)

    def quota(self, analyst_id: str, center: str, dataset: str) -> QuotaRecord:
        """The quota (None: unlimited) and what the analyst spent at (center, dataset)."""
        with self.engine.connect() as conn:
            return self._quota(conn, analyst_id, center, dataset)

    @staticmethod
    def _quota(conn: Connection, analyst_id: str, center: str, dataset: str) -> QuotaRecord:
        limit = conn.execute(select(quotas.c.epsilon).where(
            quotas.c.analyst_id == analyst_id, quotas.c.center == center,
            quotas.c.dataset == dataset)).scalar_one_or_none()
        used = conn.execute(select(spent.c.epsilon).where(
            spent.c.analyst_id == analyst_id, spent.c.center == center,
            spent.c.dataset == dataset)).scalar_one_or_none()
        return QuotaRecord(analyst_id, center, dataset, limit, float(used or 0.0))

    def quotas_of(self, analyst_id: str | None = None) -> list[QuotaRecord]:
        """Every (analyst, center, dataset) with a quota or a spending, by analyst, center and
        dataset; one analyst's with ``analyst_id``."""
        with self.engine.connect() as conn:
            limits = {(r.analyst_id, r.center, r.dataset): float(r.epsilon)
                      for r in conn.execute(select(quotas)).all()}
            used = {(r.analyst_id, r.center, r.dataset): float(r.epsilon)
                    for r in conn.execute(select(spent)).all()}
        keys = sorted(set(limits) | set(used))
        return [QuotaRecord(a, c, d, limits.get((a, c, d)), used.get((a, c, d), 0.0))
                for a, c, d in keys if analyst_id is None or a == analyst_id]

    def reserve(self, analyst_id: str, center: str, dataset: str,
                epsilon: float) -> QuotaRecord | None:
        """Count ``epsilon`` as spent by the analyst at (center, dataset) if it fits the quota
        (or there is none): None. Otherwise nothing is counted and the quota that refuses it is
        returned.

        One conditional UPDATE, so two studies (or two coordinator processes) cannot both take
        the last of a quota."""
        return self.write(self.reserve_in, analyst_id, center, dataset, epsilon)

    def reserve_in(self, conn: Connection, analyst_id: str, center: str, dataset: str,
                   epsilon: float) -> QuotaRecord | None:
        """:meth:`reserve` within ``conn``'s transaction (a group commit,
        ``coordinator.commits``): the refusing quota is read in the same transaction."""
        key = and_(spent.c.analyst_id == analyst_id, spent.c.center == center,
                   spent.c.dataset == dataset)
        limit = select(quotas.c.epsilon).where(
            quotas.c.analyst_id == analyst_id, quotas.c.center == center,
            quotas.c.dataset == dataset).scalar_subquery()
        conn.execute(self._dialect.insert(spent).values(
            analyst_id=analyst_id, center=center, dataset=dataset, epsilon=0.0,
        ).on_conflict_do_nothing())
        done = conn.execute(
            update(spent)
            .where(key, or_(limit.is_(None),
                            spent.c.epsilon + epsilon <= limit + EPSILON_TOLERANCE))
            .values(epsilon=spent.c.epsilon + epsilon)
        )
        if done.rowcount == 1:
            return None
        return self._quota(conn, analyst_id, center, dataset)

    def refund(self, analyst_id: str, center: str, dataset: str, epsilon: float) -> None:
        """Give back a reservation the center did not spend (never below zero)."""
        self.write(self.refund_in, analyst_id, center, dataset, epsilon)

    def refund_in(self, conn: Connection, analyst_id: str, center: str, dataset: str,
                  epsilon: float) -> None:
        """:meth:`refund` within ``conn``'s transaction."""
        left = spent.c.epsilon - epsilon
        conn.execute(update(spent).where(
            spent.c.analyst_id == analyst_id, spent.c.center == center,
            spent.c.dataset == dataset,
        ).values(epsilon=case((left < 0, 0.0), else_=left)))

    # -- writes, alone or grouped -------------------------------------------------------------

    def write(self, write: Callable[..., T], *args: Any) -> T:
        """``write(conn, *args)`` in a transaction of its own (one commit)."""
        with self.engine.begin() as conn:
            return write(conn, *args)

    def write_many(self, writes: Sequence[Callable[[Connection], Any]]) -> list[Any]:
        """Each of ``writes`` in order, in **one** transaction: one commit, so one fsync of the
        log for all of them (a group commit; ``coordinator.commits`` gathers them). Returns
        each write's result, or the exception it raised.

        When the group fails (a write raised: the transaction is rolled back, on PostgreSQL it
        is unusable anyway), each write runs again in a transaction of its own, so a write
        fails only for its own reason and none is half done."""
        try:
            with self.engine.begin() as conn:
                return [write(conn) for write in writes]
        except Exception:
            if len(writes) == 1:
                raise
        out: list[Any] = []
        for write in writes:
            try:
                with self.engine.begin() as conn:
                    out.append(write(conn))
            except Exception as failure:  # the caller of this write gets it
                out.append(failure)
        return out

    def _count_commit(self, _conn: Connection) -> None:
        self.commits += 1

    # -- audit --------------------------------------------------------------------------------

    def record_audit(
        self, action: str, *, analyst_id: str | None = None, token_id: str | None = None,
        target: str | None = None, request_id: str | None = None, detail: str | None = None,
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(audit).values(
                at=now(), analyst_id=analyst_id, token_id=token_id, action=action,
                target=target, request_id=request_id, detail=detail,
            ))

    def audit_entries(
        self, *, limit: int = 100, offset: int = 0, analyst_id: str | None = None,
        action: str | None = None,
    ) -> list[AuditRecord]:
        """Newest first, filtered by analyst and action when given."""
        stmt = select(audit).order_by(audit.c.id.desc())
        if analyst_id is not None:
            stmt = stmt.where(audit.c.analyst_id == analyst_id)
        if action is not None:
            stmt = stmt.where(audit.c.action == action)
        with self.engine.connect() as conn:
            rows = conn.execute(stmt.limit(limit).offset(offset)).all()
        return [AuditRecord(r.id, r.at, r.analyst_id, r.token_id, r.action, r.target,
                            r.request_id, r.detail) for r in rows]
