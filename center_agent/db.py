"""The center's own database: privacy budgets, stored releases, the reservations of releases
paid and being computed, each token's work per period, the record sets every exact release
counted and their atoms per epoch, the data epochs, the center's secrets and the audit log.

One :class:`Store` per process, shared by the ledger and the release gate. SQLite (the default)
runs in WAL mode, every commit durable before it returns by a log fsync shared with the
concurrent commits (group commit, ``fedstats_service.walsync``: the fsync is made after the write
lock is let go, so concurrent releases do not queue behind each other's fsyncs), and opens every
transaction with ``BEGIN IMMEDIATE`` (``fedstats_service.db``), so writers are serialized by the
database itself, across threads and processes. PostgreSQL locks
the dataset's budget row with ``SELECT ... FOR UPDATE``. Either way, :meth:`Store.locked` yields
a connection inside one transaction that no other ledger or gate transaction on the same dataset
can interleave with; it commits on a clean exit and rolls back on any exception.

Tables are created when missing; a column added to a table after its first release is added to
an existing ledger by :func:`migrate` when a store opens (an old ledger keeps working).

ε amounts are stored as integers in units of 1e-9 (spends rounded up, totals rounded down), so 200
debits of 0.01 add up exactly and a float rounding error can never let a request through.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from fedstats_service.db import Database, add_missing_columns
from fedstats_service.db import utcnow as utcnow

EPSILON_UNIT = Decimal("1e-9")

metadata = MetaData()

budgets = Table(
    "fedstats_budget",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("total_units", BigInteger, nullable=False),
    Column("spent_units", BigInteger, nullable=False),
)

releases = Table(
    "fedstats_release",
    metadata,
    Column("request_key", String(64), primary_key=True),
    Column("dataset", String(128), nullable=False, index=True),
    Column("epsilon_units", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

reservations = Table(
    # DP releases paid for and being computed (or whose computation failed): the payment is
    # committed before the computation starts, outside the dataset's lock
    # (center_agent.gate); the answer replaces the row in fedstats_release when it is stored.
    "fedstats_reservation",
    metadata,
    Column("request_key", String(64), primary_key=True),
    Column("dataset", String(128), nullable=False, index=True),
    Column("epsilon_units", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

compute_use = Table(
    # Work done per calling token and period (records x releases computed), against the
    # center's compute allowance (center_agent.ledger.Ledger.charge_compute).
    "fedstats_compute_use",
    metadata,
    Column("caller", String(64), primary_key=True),
    Column("window", BigInteger, primary_key=True),
    Column("units", BigInteger, nullable=False),
)

call_counts = Table(
    "fedstats_call_count",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("scope", String(128), primary_key=True),
    Column("kind", String(64), primary_key=True),
    Column("calls", Integer, nullable=False),
)

released_limits = Table(
    # The auditor's table before the release gate: read once to import old releases
    # (center_agent.gate.disclosure), never written.
    "fedstats_released_limits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", String(128), nullable=False),
    Column("variable", String(128), nullable=False),
    Column("grouping", String(128), nullable=False),
    Column("limits_hash", String(64), nullable=False),
    Column("limits", Text, nullable=False),
    Column("labels", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("dataset", "variable", "grouping", "limits_hash"),
)

release_sets = Table(
    # Every exact release as the record sets it counted (center_agent.gate.disclosure.Partition).
    "fedstats_release_set",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", String(128), nullable=False),
    Column("variable", String(128), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("request_key", String(64), nullable=False),
    Column("n_limits", Integer, nullable=False),
    Column("partition", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("dataset", "variable", "request_key"),
)

atom_snapshots = Table(
    # Per (dataset, variable, epoch): the atoms of every set released so far and their counts on
    # that epoch's data, kept for the check when the data change (center_agent.gate.epochs).
    "fedstats_atom_snapshot",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("variable", String(128), primary_key=True),
    Column("epoch", Integer, primary_key=True),
    Column("snapshot", LargeBinary, nullable=False),
)

epochs = Table(
    # The data version every release of an epoch is computed from.
    "fedstats_epoch",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("epoch", Integer, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("sizes", Text, nullable=False),
    # Per variable and level, the records whose value is present (missing = "per_variable");
    # NULL: complete cases, every variable present on every record of the level.
    Column("present", Text, nullable=True),
    Column("reason", String(32), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    # The dataset's release mode when the epoch began ("dp", or NULL: K-anonymous): a DP-mode
    # epoch released nothing exactly, and its data were never checked (center_agent.gate.epochs).
    Column("release_mode", String(16), nullable=True),
    # Per declared level, the source's rows labelled with it (the level's size plus the rows it
    # leaves out); NULL: an epoch started before they were kept (gate.epochs: unknown).
    Column("enrolled", Text, nullable=True),
)

variable_versions = Table(
    # A variable's exact releases start a new memory from ``since_epoch`` on: the operator's way
    # out of a forced epoch over which the earlier releases are not K-anonymous
    # (center_agent.gate.disclosure, ``Disclosure.renew``). No row: version 1, since epoch 1.
    "fedstats_variable_version",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("variable", String(128), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("since_epoch", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

placed_numbers = Table(
    # The numbers ledgers made before placed_blocks kept, one row each, as float.hex (exact):
    # still read (center_agent.gate.gaps.placed), never written.
    "fedstats_placed_number",
    metadata,
    Column("dataset", String(128), primary_key=True),
    Column("variable", String(128), primary_key=True),
    Column("value", String(32), primary_key=True),
)

placed_blocks = Table(
    # The numbers the center placed between data of a variable (limits, split limits, buffers),
    # one row per release that placed new ones: ``numbers`` the sorted distinct float64 values
    # (little-endian, exact) none of the earlier rows holds. A later release reuses a number in
    # the gap that holds it (center_agent.gate.gaps).
    "fedstats_placed_block",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", String(128), nullable=False, index=True),
    Column("variable", String(128), nullable=False),
    Column("numbers", LargeBinary, nullable=False),
)

secrets_table = Table(
    # The center's secrets: the key of its release randomness and its signing key.
    "fedstats_secret",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
)

audit_log = Table(
    # Who asked what, when, and what came of it (released, cached or refused): written by the
    # release gate, read by the operator (center_agent.audit). Columns after `outcome` came
    # later; :func:`migrate` adds them to a ledger made before, so they must stay nullable.
    "fedstats_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("dataset", String(128), nullable=False, index=True),
    Column("kind", String(64), nullable=False),
    Column("caller", String(32), nullable=False),
    Column("request_key", String(64), nullable=True),
    Column("epoch", Integer, nullable=True),
    Column("epsilon_units", BigInteger, nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("request_id", String(64), nullable=True),
    Column("study_id", String(64), nullable=True),
    Column("analyst_id", String(64), nullable=True),
    Column("data_fingerprint", String(64), nullable=True),
    Column("question", Text, nullable=True),
)

# Columns added to a table after its first release: {table: names}, each nullable.
ADDED_COLUMNS: dict[Table, tuple[str, ...]] = {
    audit_log: ("request_id", "study_id", "analyst_id", "data_fingerprint", "question"),
    epochs: ("present", "release_mode", "enrolled"),
}


def migrate(conn: Connection) -> list[str]:
    """Add the :data:`ADDED_COLUMNS` a ledger made by an older release lacks
    (``fedstats_service.db.add_missing_columns``); returns ``table.column`` of each added.
    Concurrent starts: SQLite's ``BEGIN IMMEDIATE`` (the ledger's transactions) serializes them
    before the columns are read; PostgreSQL's ``ADD COLUMN IF NOT EXISTS`` makes a second adder
    a no-op."""
    return add_missing_columns(conn, ADDED_COLUMNS)


def spend_units(epsilon: float) -> int:
    """ε as integer units, rounded up (a spend never counts for less than it is)."""
    return int((Decimal(repr(float(epsilon))) / EPSILON_UNIT).to_integral_value(ROUND_CEILING))


def total_units(epsilon: float) -> int:
    """ε as integer units, rounded down (a budget never counts for more than it is)."""
    return int((Decimal(repr(float(epsilon))) / EPSILON_UNIT).to_integral_value(ROUND_FLOOR))


def units_to_epsilon(units: int) -> float:
    return float(Decimal(units) * EPSILON_UNIT)


# The dataset locks this context (thread or task) holds: (id(store), dataset) -> connection.
_held_locks: ContextVar[dict[tuple[int, str], Connection] | None] = ContextVar(
    "fedstats_held_locks", default=None
)


class UnknownLedgerDataset(KeyError):
    """The dataset has no budget row (it is not configured)."""


class Store(Database):
    """Tables, engine and the per-dataset lock shared by the ledger and the release gate."""

    def __init__(self, url: str, *, busy_timeout_s: float = 60.0) -> None:
        super().__init__(url, metadata, what="ledger", busy_timeout_s=busy_timeout_s,
                         begin_immediate=True, group_commit=True)
        with self.engine.begin() as conn:
            migrate(conn)

    def ensure_budgets(self, totals: Mapping[str, float]) -> None:
        """Create a budget row per dataset; a changed total (operator's decision) is updated.

        Spent amounts are never reset.
        """
        for dataset, total in totals.items():
            if not (math.isfinite(total) and total > 0):
                raise ValueError(f"total epsilon of {dataset!r} must be finite and > 0")
            units = total_units(total)
            with self.engine.begin() as conn:
                row = conn.execute(
                    select(budgets.c.total_units).where(budgets.c.dataset == dataset)
                ).first()
                if row is None:
                    conn.execute(
                        budgets.insert().values(dataset=dataset, total_units=units, spent_units=0)
                    )
                elif row.total_units != units:
                    conn.execute(
                        update(budgets)
                        .where(budgets.c.dataset == dataset)
                        .values(total_units=units)
                    )

    @contextmanager
    def locked(self, dataset: str) -> Iterator[tuple[Connection, int, int]]:
        """One transaction holding the dataset's lock; yields (connection, total, spent) units.

        Commits when the outermost block exits normally, rolls back (nothing spent, nothing
        stored) on any exception. Re-entrant: a ``locked(dataset)`` opened inside another one for
        the same dataset (say a call count inside ``Ledger.release``'s compute)
        joins the outer transaction instead of waiting for its own lock. Raises
        :class:`UnknownLedgerDataset` if the dataset has no budget row.
        """
        held = _held_locks.get() or {}
        outer = held.get((id(self), dataset))
        if outer is not None:
            total, spent = self._budget_row(outer, dataset, lock=False)
            yield outer, total, spent
            return
        with self.engine.begin() as conn:
            total, spent = self._budget_row(conn, dataset, lock=not self.is_sqlite)
            token = _held_locks.set({**held, (id(self), dataset): conn})
            try:
                yield conn, total, spent
            finally:
                _held_locks.reset(token)

    @staticmethod
    def _budget_row(conn: Connection, dataset: str, *, lock: bool) -> tuple[int, int]:
        stmt = select(budgets.c.total_units, budgets.c.spent_units).where(
            budgets.c.dataset == dataset
        )
        if lock:
            stmt = stmt.with_for_update()
        row = conn.execute(stmt).first()
        if row is None:
            raise UnknownLedgerDataset(dataset)
        return int(row.total_units), int(row.spent_units)


POPULATION_SECRET = "population_leave_out"
"""The secret of the rows a level leaves out beyond its own (``center_agent.data.leave_out``):
kept beside the others, never released; every process of a center reads the same one, so all
build the same population from the same data."""


def population_secret(store: Store) -> bytes:
    """The center's leave-out secret (:data:`POPULATION_SECRET`), made at the first start
    (here, not in ``center_agent.gate.keys``: the operator's commands read it without loading
    the release gate)."""
    return stored_secret(store, POPULATION_SECRET, lambda: secrets.token_bytes(32))


def stored_secret(store: Store, name: str, make: Any) -> bytes:
    """The secret ``name`` from the ledger's database, made (once, by one process) if absent."""
    query = select(secrets_table.c.value).where(secrets_table.c.name == name)
    for _ in range(2):
        try:
            with store.engine.begin() as conn:
                row = conn.execute(query).first()
                if row is not None:
                    return bytes(row.value)
                value: bytes = make()
                conn.execute(secrets_table.insert().values(name=name, value=value))
                return value
        except IntegrityError:  # another process made it first: read theirs
            continue
    raise RuntimeError(f"the center's secret {name!r} could not be read or made")
