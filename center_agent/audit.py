"""The audit trail: one record per release, per answer served from the store and per refusal,
written by the release gate and read by the center's operator (``GET /v1/audit``,
``fedstats center audit``; ``docs/privacy.md``, "Audit trail").

A record says who asked (the caller token's fingerprint, and the study, analyst and request ids
the coordinator sent: ``fedstats_service.context``), what (the dataset, the kind and the question:
the request as validated, in canonical JSON), when, on which data (the epoch and its data
fingerprint) and what came of it (``released``, ``cached`` or ``refused:<code>``, with the ε
spent: the sum over a dataset's records is what its budget spent).

Nothing in a record is a data value or a count: the question holds the request's parameters
(bounds, levels, K, limits a peer signed), the ids are checked shapes, the fingerprint is a
digest. The records are the operator's: a coordinator token cannot read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import Field
from sqlalchemy import Connection, Engine, select

from center_agent.db import audit_log, units_to_epsilon, utcnow
from fedstats_service import context
from shared.wire import WireModel, canonical_json

QUESTION_MAX_CHARS = 4000
"""A question longer than this (a refinement of many limits) is kept as its beginning and a
marker: a hostile caller must not be able to grow the ledger by megabytes per request."""
MAX_PAGE = 10_000
"""The most records one read returns."""


def question_text(payload: Any) -> str:
    """The question as recorded: its canonical JSON, cut to :data:`QUESTION_MAX_CHARS`."""
    text = canonical_json(payload)
    if len(text) <= QUESTION_MAX_CHARS:
        return text
    marker = f"...[{len(text)} chars, truncated]"
    return text[: QUESTION_MAX_CHARS - len(marker)] + marker


def record(conn: Connection, *, dataset: str, kind: str, caller: str, outcome: str,
           epsilon_units: int, question: str | None, request_key: str | None = None,
           epoch: int | None = None, data_fingerprint: str | None = None) -> None:
    """Write one record in ``conn``'s transaction (a release and its record commit together),
    with the ids of the call being served."""
    ids = context.current()
    conn.execute(audit_log.insert().values(
        at=utcnow(), dataset=dataset, kind=kind, caller=caller, request_key=request_key,
        epoch=epoch, epsilon_units=epsilon_units, outcome=outcome,
        request_id=ids.request_id, study_id=ids.study_id, analyst_id=ids.analyst_id,
        data_fingerprint=data_fingerprint, question=question,
    ))


class AuditRecord(WireModel):
    """One record of the audit trail."""

    id: int = Field(description="increasing with time; page with `after_id`")
    at: datetime = Field(description="when it was written (UTC)")
    dataset: str
    kind: str = Field(description="the release kind (its name in the center's routes)")
    outcome: str = Field(description="released, cached or refused:<error code>")
    epsilon: float = Field(description="ε spent (0 for an answer served from the store and a "
                                       "refusal)")
    caller: str = Field(description="the fingerprint of the token that called (never the "
                                    "token)")
    request_id: str | None = None
    study_id: str | None = Field(default=None, description="as the coordinator sent it")
    analyst_id: str | None = Field(default=None, description="as the coordinator sent it")
    request_key: str | None = Field(default=None,
                                    description="the stored answer's key (none: refused)")
    epoch: int | None = Field(default=None, description="the data version answered from")
    data_fingerprint: str | None = Field(default=None,
                                         description="the digest of that version's data")
    question: str | None = Field(default=None,
                                 description="the request as validated, in canonical JSON")


class AuditPage(WireModel):
    """Records in increasing ``id``; ``next_after_id`` is the ``after_id`` of the next page
    (None: this was the last)."""

    records: list[AuditRecord]
    next_after_id: int | None = None


@dataclass(frozen=True)
class AuditQuery:
    """Which records to read: all filters optional; ``newest`` takes the last ``limit`` records
    instead of the first after ``after_id`` (they are returned in increasing ``id`` either way).
    """

    since: datetime | None = None
    until: datetime | None = None
    dataset: str | None = None
    study: str | None = None
    analyst: str | None = None
    after_id: int = 0
    limit: int | None = 1000
    newest: bool = False


def _utc(moment: datetime) -> datetime:
    """An aware time in UTC; a naive one is taken as UTC (records are stamped in UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _row(row: Any) -> AuditRecord:
    values = dict(row._mapping)
    units = values.pop("epsilon_units")
    # SQLite gives the stamp back without its zone; it was written in UTC.
    values["at"] = _utc(values["at"])
    return AuditRecord(epsilon=units_to_epsilon(int(units)), **values)


def read(db: Engine | Connection, query: AuditQuery) -> AuditPage:
    """The records ``query`` selects, as a page."""
    stmt = select(audit_log).where(audit_log.c.id > query.after_id)
    if query.since is not None:
        stmt = stmt.where(audit_log.c.at >= _utc(query.since))
    if query.until is not None:
        stmt = stmt.where(audit_log.c.at < _utc(query.until))
    for column, value in ((audit_log.c.dataset, query.dataset),
                          (audit_log.c.study_id, query.study),
                          (audit_log.c.analyst_id, query.analyst)):
        if value is not None:
            stmt = stmt.where(column == value)
    stmt = stmt.order_by(audit_log.c.id.desc() if query.newest else audit_log.c.id)
    if query.limit is not None:
        stmt = stmt.limit(query.limit)
    if isinstance(db, Connection):
        rows = db.execute(stmt).all()
    else:
        with db.connect() as conn:
            rows = conn.execute(stmt).all()
    records = sorted((_row(row) for row in rows), key=lambda r: r.id)
    full = query.limit is not None and len(records) == query.limit and not query.newest
    return AuditPage(records=records, next_after_id=records[-1].id if full else None)
