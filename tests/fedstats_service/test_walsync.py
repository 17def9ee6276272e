"""Group commit (fedstats_service.walsync): a commit returns only after an fsync of the log that
started after it, and concurrent commits share fsyncs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, select, text

from fedstats_service import walsync
from fedstats_service.db import Database, make_engine
from tests.helpers.timing import scaled

metadata = MetaData()
rows = Table("walsync_row", metadata, Column("id", Integer, primary_key=True),
             Column("thread", Integer, nullable=False))


def _database(tmp_path: Path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'g.sqlite'}", metadata, what="ledger",
                    busy_timeout_s=scaled(30), begin_immediate=True, group_commit=True)


def test_group_commit_connections_leave_the_fsync_to_the_log_sync(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}", what="ledger", busy_timeout_s=1,
                         begin_immediate=True, group_commit=True)
    with engine.connect() as conn:
        assert isinstance(conn.connection.dbapi_connection, walsync.GroupCommitConnection)
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    engine.dispose()


def test_every_commit_returns_after_an_fsync_that_started_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads x 25 commits, real fsyncs. Each commit takes a number once SQLite has committed
    it; each fsync notes, when it starts, how many commits were numbered by then (those it
    covers). When a commit returns, a completed fsync must cover its number."""
    db = _database(tmp_path)
    guard = threading.Lock()
    numbered = 0
    covered_by_completed = 0
    real_wait, real_fsync = walsync.WalSync.wait, walsync.WalSync._fsync
    failures: list[str] = []

    def wait(self: walsync.WalSync) -> None:
        nonlocal numbered
        with guard:
            numbered += 1
            mine = numbered
        real_wait(self)
        with guard:
            if covered_by_completed < mine:
                failures.append(f"commit {mine} returned; fsyncs completed cover "
                                f"{covered_by_completed}")

    def fsync(self: walsync.WalSync) -> None:
        nonlocal covered_by_completed
        with guard:
            covers = numbered
        real_fsync(self)
        with guard:
            covered_by_completed = max(covered_by_completed, covers)

    monkeypatch.setattr(walsync.WalSync, "wait", wait)
    monkeypatch.setattr(walsync.WalSync, "_fsync", fsync)

    def writer(thread: int) -> None:
        for _ in range(25):
            with db.engine.begin() as conn:
                conn.execute(rows.insert().values(thread=thread))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert failures == []
        assert numbered == 200
        sync = walsync.wal_sync(str(tmp_path / "g.sqlite"))
        assert 1 <= sync.fsyncs <= 200
        with db.engine.connect() as conn:
            assert conn.execute(select(rows.c.id)).all().__len__() == 200
    finally:
        db.close()


def test_commits_made_during_an_fsync_share_the_next_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first fsync is held until the 7 other writers have committed and wait: exactly one
    more fsync then covers all 7 (2 fsyncs for 8 commits; synchronous=FULL would make 8)."""
    db = _database(tmp_path)
    sync = walsync.wal_sync(str(tmp_path / "g.sqlite"))
    before = sync.fsyncs  # the tables' creation
    real_fsync = walsync.WalSync._fsync
    first = threading.Event()
    calls: list[int] = []

    def fsync(self: walsync.WalSync) -> None:
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            first.set()
            while self.waiting < 7:  # ends when the 7 others wait; pytest's timeout guards it
                time.sleep(0.001)
        real_fsync(self)

    monkeypatch.setattr(walsync.WalSync, "_fsync", fsync)

    def writer(thread: int) -> None:
        with db.engine.begin() as conn:
            conn.execute(rows.insert().values(thread=thread))

    lead = threading.Thread(target=writer, args=(0,))
    lead.start()
    assert first.wait(scaled(60))
    others = [threading.Thread(target=writer, args=(i,)) for i in range(1, 8)]
    for t in others:
        t.start()
    for t in [lead, *others]:
        t.join()
    try:
        assert calls == [1, 2]
        assert sync.fsyncs == before + 2
        with db.engine.connect() as conn:
            assert sorted(conn.execute(select(rows.c.thread)).scalars()) == list(range(8))
    finally:
        db.close()


def test_a_failed_fsync_raises_to_its_committer_and_the_next_caller_syncs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _database(tmp_path)
    sync = walsync.wal_sync(str(tmp_path / "g.sqlite"))
    real_fsync = walsync.WalSync._fsync
    failing = [True]

    def fsync(self: walsync.WalSync) -> None:
        if failing.pop() if failing else False:
            raise OSError(5, "Input/output error")
        real_fsync(self)

    monkeypatch.setattr(walsync.WalSync, "_fsync", fsync)
    before = sync.fsyncs
    try:
        with pytest.raises(OSError, match="Input/output"), db.engine.begin() as conn:
            conn.execute(rows.insert().values(thread=1))
        with db.engine.begin() as conn:
            conn.execute(rows.insert().values(thread=2))
        assert sync.fsyncs == before + 1
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM walsync_row")).scalar() == 2
    finally:
        db.close()


def test_a_read_only_transaction_and_an_in_memory_database_need_no_fsync(
        tmp_path: Path) -> None:
    db = _database(tmp_path)
    sync = walsync.wal_sync(str(tmp_path / "g.sqlite"))
    try:
        with db.engine.connect() as conn:
            conn.execute(select(rows.c.id)).all()
            conn.rollback()
        before = sync.fsyncs
        with db.engine.connect() as conn:
            conn.execute(select(rows.c.id)).all()
        assert sync.fsyncs == before
    finally:
        db.close()
    memory = make_engine("sqlite://", what="ledger", busy_timeout_s=1, begin_immediate=True,
                         group_commit=True)
    with memory.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    memory.dispose()
