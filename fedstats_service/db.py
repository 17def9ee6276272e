"""A service's own database (the center's ledger, the coordinator's store): SQLite (the default)
or PostgreSQL, both pooled, opened with its tables by :class:`Database`.

SQLite runs in WAL mode with ``synchronous=FULL`` (a committed transaction survives a power cut),
or with ``group_commit`` its commits durable by log fsyncs shared between threads
(:mod:`fedstats_service.walsync`: durable when ``commit()`` returns all the same), and foreign keys
on; a connection waits up to ``busy_timeout_s`` for another writer. With ``begin_immediate``
every transaction opens with ``BEGIN IMMEDIATE``, so writers are serialized by the database
itself, across threads and processes, from the transaction's first statement (the center's
ledger needs that: it reads a budget and then spends it). PostgreSQL connections are
checked before use (``pool_pre_ping``); a caller waits up to ``busy_timeout_s`` for one.

A SQLite connection costs its pragmas on every open, so the pool keeps connections open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, MetaData, Table, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import QueuePool

from fedstats_service.settings import check_database_url
from fedstats_service.walsync import GroupCommitConnection


def utcnow() -> datetime:
    """The time a service stamps its records with: aware, in UTC (never the host's zone)."""
    return datetime.now(UTC)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # A group-commit connection syncs the log itself after its commit (fedstats_service.walsync).
    grouped = isinstance(dbapi_connection, GroupCommitConnection)
    cursor.execute(f"PRAGMA synchronous={'NORMAL' if grouped else 'FULL'}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_deferred_to_sqlalchemy(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's own handling defers it).
    dbapi_connection.isolation_level = None


def _sqlite_begin_immediate(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str, *, what: str, busy_timeout_s: float,
                begin_immediate: bool = False, group_commit: bool = False) -> Engine:
    """An engine on ``url`` (SQLite or PostgreSQL; ``what`` names the database in the error).
    ``group_commit``: SQLite commits made durable by log fsyncs shared between threads
    (:mod:`fedstats_service.walsync`; durable when ``commit()`` returns, as without it);
    PostgreSQL groups its commits' log flushes itself."""
    check_database_url(url, what)
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_size=5, max_overflow=10, pool_timeout=busy_timeout_s,
                             pool_pre_ping=True)
    connect_args: dict[str, Any] = {"timeout": busy_timeout_s, "check_same_thread": False}
    if group_commit:
        connect_args["factory"] = GroupCommitConnection
    engine = create_engine(
        parsed,
        connect_args=connect_args,
        # The pool's wait as long as the lock's (SQLAlchemy's default is 30 s, which 150
        # concurrent writers on a loaded machine outwaited: a 500 where a wait was due).
        poolclass=QueuePool, pool_size=5, max_overflow=20, pool_timeout=busy_timeout_s,
    )
    if begin_immediate:
        event.listen(engine, "connect", _sqlite_deferred_to_sqlalchemy)
        event.listen(engine, "begin", _sqlite_begin_immediate)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def add_missing_columns(conn: Connection, added: Mapping[Table, Sequence[str]]) -> list[str]:
    """Add the columns of ``added`` (table -> column names, as declared in its metadata) that a
    database made by an older release lacks (``ALTER TABLE ... ADD COLUMN``, SQLite or
    PostgreSQL); returns ``table.column`` of each added. Idempotent: a column present is left
    alone, so a service runs it on every start.

    ``create_all`` makes missing tables but never changes an existing one, hence this step. An
    added column must be nullable (the rows of before have no value for it); on PostgreSQL the
    statement says ``IF NOT EXISTS``, so a second process adding it at the same moment is a
    no-op.
    """
    done = []
    preparer = conn.dialect.identifier_preparer
    for table, names in added.items():
        present = {column["name"] for column in inspect(conn).get_columns(table.name)}
        for name in names:
            if name in present:
                continue
            column = table.c[name]
            assert column.nullable, f"{table.name}.{name}: an added column must be nullable"
            kind = column.type.compile(dialect=conn.dialect)
            guard = "IF NOT EXISTS " if conn.dialect.name == "postgresql" else ""
            conn.exec_driver_sql(
                f"ALTER TABLE {preparer.quote(table.name)} ADD COLUMN {guard}"
                f"{preparer.quote(name)} {kind}"
            )
            done.append(f"{table.name}.{name}")
    return done


class Database:
    """The engine on ``url`` with the tables of ``metadata`` created (arguments as for
    :func:`make_engine`). A service's store subclasses it with its queries."""

    def __init__(self, url: str, metadata: MetaData, *, what: str, busy_timeout_s: float,
                 begin_immediate: bool = False, group_commit: bool = False) -> None:
        self.url = url
        self.engine = make_engine(url, what=what, busy_timeout_s=busy_timeout_s,
                                  begin_immediate=begin_immediate, group_commit=group_commit)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        try:
            metadata.create_all(self.engine)
        except DBAPIError:  # another process created the tables at the same moment
            metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()
