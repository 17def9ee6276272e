"""Group commit for SQLite: the commits of concurrent threads made durable by shared fsyncs.

With ``synchronous=FULL`` every commit ends in an fsync of the write-ahead log, made while the
database's write lock is still held; writers are serialized (``BEGIN IMMEDIATE``), so N
concurrent commits cost N fsyncs one after the other, and each writer waits for all the
fsyncs before its own. Under disk load (50-120 ms an fsync) that serial chain, not the work,
bounds a center answering many studies at once.

A :class:`GroupCommitConnection` commits with ``synchronous=NORMAL`` instead (the log's frames are
written to the file at the commit, not synced, and the write lock is released at once), then
waits in :meth:`WalSync.wait` until an fsync of the log **that started after its commit** has
completed. Whoever finds no fsync running starts one; everyone who committed before it started
is covered by it, so N concurrent commits share a few fsyncs. ``commit()`` returns only once the
transaction is on disk, as with ``synchronous=FULL``: a caller that presents something after its
transaction (a release, a refusal, a budget) presents only what a power cut cannot take back.
What another thread reads between a commit and its fsync may still be lost in a power cut, but
then so is the transaction that wrote it, and its writer has not returned, so nothing it wrote
has left the process yet (docs/privacy.md, "Durability").

Why an fsync of the log file covers the commit: in WAL mode a commit appends its frames to the
``-wal`` file with ``write()``; ``fsync`` of any descriptor of that file flushes all of them. If
the log is gone (the last connection checkpointed and deleted it), its frames are in the
database file, which SQLite synced after the checkpoint; if it was reset by a checkpoint, the
frames it overwrote had been copied and synced by that checkpoint (SQLite syncs the log before
and the database after each checkpoint at ``synchronous=NORMAL``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

_registry_lock = threading.Lock()
_registry: dict[str, WalSync] = {}


class WalSync:
    """The shared fsyncs of one database file's write-ahead log (one per file and process)."""

    def __init__(self, database_path: str) -> None:
        self.path = database_path + "-wal"
        self._cond = threading.Condition()
        self._started = 0  # fsyncs started so far (numbered 1, 2, ...)
        self._completed = 0  # the highest number of an fsync that completed
        self._running = False
        self.fsyncs = 0  # completed, for the benchmarks and tests
        self.commits = 0  # commits that waited here
        self.waiting = 0  # callers waiting for an fsync another caller runs

    def wait(self) -> None:
        """Return once an fsync of the log started after this call began has completed (so it
        covers every commit made before the call)."""
        with self._cond:
            self.commits += 1
            needed = self._started + 1
            while self._completed < needed:
                if self._running:
                    self.waiting += 1
                    try:
                        self._cond.wait()
                    finally:
                        self.waiting -= 1
                    continue
                self._running = True
                self._started += 1
                number = self._started
                try:
                    self._cond.release()
                    try:
                        self._fsync()
                    finally:
                        self._cond.acquire()
                    self._completed = max(self._completed, number)
                    self.fsyncs += 1
                finally:
                    # A failed fsync raises to its caller; whoever else waits starts the next.
                    self._running = False
                    self._cond.notify_all()

    def _fsync(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return  # checkpointed into the database file and deleted: synced by SQLite
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def every_sync() -> list[WalSync]:
    """The :class:`WalSync` of every database file this process committed to."""
    with _registry_lock:
        return list(_registry.values())


def wal_sync(database_path: str) -> WalSync:
    """The :class:`WalSync` of ``database_path`` in this process."""
    key = os.path.realpath(database_path)
    with _registry_lock:
        sync = _registry.get(key)
        if sync is None:
            sync = _registry[key] = WalSync(key)
        return sync


class GroupCommitConnection(sqlite3.Connection):
    """A ``sqlite3`` connection whose :meth:`commit` returns once the transaction is durable,
    by a log fsync shared with concurrent commits (module docstring). Give it as the
    ``factory`` of :func:`sqlite3.connect`, with ``PRAGMA synchronous=NORMAL`` and
    ``journal_mode=WAL`` set on the connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rows: list[Any] = self.execute("PRAGMA database_list").fetchall()
        main = next((row[2] for row in rows if row[1] == "main"), "")
        self._sync = wal_sync(main) if main else None  # None: in memory, nothing to sync

    def commit(self) -> None:
        committing = self.in_transaction
        super().commit()
        if committing and self._sync is not None:
            self._sync.wait()
