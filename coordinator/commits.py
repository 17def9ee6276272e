"""Group commit: the store writes a protocol round makes, committed together, each durably.

A round of a study asks every center at once (``coordinator.study``), and each release writes
the store twice through :class:`coordinator.recording.RecordedCenter`: the reservation of its ε
before the center is asked (``Store.reserve``), the answer after (``Store.record_release``).
One transaction each is one fsync each (SQLite with ``synchronous=FULL``): a 50-center round
was 100 commits, and the coordinator spent most of its time waiting on them.

:class:`GroupCommit` keeps, per event loop, one writer: a write waits a few turns of the loop
(so the writes made in the same step, the round's, join it), then every waiting write goes in
**one** transaction (``Store.write_many``); writes made while that transaction commits wait and
go together in the next one. Each caller resumes only after the transaction holding its write
has committed: durability is unchanged — a reservation is on disk before its center is asked, an
answer before the study goes on — only the number of fsyncs falls (to about two per round, for
all of the round's centers, and studies running at the same time share them).

Kill the coordinator mid-round and what it recorded is what it committed: a reservation not
committed was never acted on (its center was not asked); an answer not committed is asked again
by the resumed study, and the center answers it from its release memory without spending again
(docs/privacy.md). Writes of one transaction keep their own outcome: ``Store.write_many`` runs
them one by one again when the group fails, so a write fails only for its own reason.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from coordinator.db import QuotaRecord, Store

#: Turns of the event loop a write waits for the others of its step (each turn is
#: microseconds): enough for every center call a round starts in one step to reach its write.
SETTLE_TURNS = 3
#: The most writes in one transaction (a bound on how long one commit holds SQLite's lock).
MAX_GROUP = 1000


@dataclass
class _Pending:
    write: Callable[[Connection], Any]
    done: asyncio.Future[Any] = field(repr=False)


class GroupCommit:
    """The grouped writer of ``store`` (one per store: :func:`for_store`).

    :attr:`groups` counts the transactions it committed by size, for benchmarks and tests."""

    def __init__(self, store: Store, *, max_group: int = MAX_GROUP) -> None:
        self.store = store
        self.max_group = max_group
        self.groups: dict[int, int] = {}
        # Per event loop (a test may run several loops one after the other over one store).
        self._waiting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Pending]] = (
            weakref.WeakKeyDictionary())
        self._writers: set[asyncio.Task[None]] = set()

    async def run(self, write: Callable[[Connection], Any]) -> Any:
        """``write(conn)``'s result once the transaction holding it has committed (its
        exception if it raised)."""
        loop = asyncio.get_running_loop()
        pending = _Pending(write, loop.create_future())
        waiting = self._waiting.get(loop)
        if waiting is not None:
            waiting.append(pending)  # the loop's writer commits it with the next group
        else:
            self._waiting[loop] = [pending]
            # Not the caller's task: a study cancelled mid-write leaves the others' writes
            # (and its own, which may commit: a reservation then kept unspent, never lost).
            task = loop.create_task(self._writer(loop))
            self._writers.add(task)
            task.add_done_callback(self._writers.discard)
        return await pending.done

    async def reserve(self, analyst_id: str, center: str, dataset: str,
                      epsilon: float) -> QuotaRecord | None:
        """``Store.reserve``, grouped: None when counted, else the quota that refuses it."""
        result: QuotaRecord | None = await self.run(
            lambda conn: self.store.reserve_in(conn, analyst_id, center, dataset, epsilon))
        return result

    async def find_or_reserve(
        self, study_id: str, center: str, request_key: str,
        charge: tuple[str, str, float] | None, *, held_by: str | None = None,
    ) -> tuple[str | None, QuotaRecord | None]:
        """The study's recorded answer to the request, if any; else, with ``charge`` (analyst,
        dataset, ε), the reservation of that ε at ``center`` (``Store.reserve``): (None, None)
        when counted, (None, the refusing quota) when not. One write of the group: the look-up
        and the reservation see the same state, and a round's look-ups share its transaction
        instead of a thread hop each. With ``held_by`` (a process of several over the store),
        ``coordinator.db.LeaseLost`` unless it still holds the study: nothing reserved, and the
        center is not asked."""

        def write(conn: Connection) -> tuple[str | None, QuotaRecord | None]:
            if held_by is not None:
                self.store.check_lease_in(conn, study_id, held_by)
            found = self.store.find_release_in(conn, study_id, center, request_key)
            if found is not None or charge is None:
                return found, None
            analyst_id, dataset, epsilon = charge
            return None, self.store.reserve_in(conn, analyst_id, center, dataset, epsilon)

        result: tuple[str | None, QuotaRecord | None] = await self.run(write)
        return result

    async def refund(self, analyst_id: str, center: str, dataset: str, epsilon: float) -> None:
        """``Store.refund``, grouped."""
        await self.run(lambda conn: self.store.refund_in(conn, analyst_id, center, dataset,
                                                         epsilon))

    async def record_release(self, study_id: str, center: str, kind: str, request_key: str,
                             request: str, response: str, *, held_by: str | None = None) -> None:
        """``Store.record_release``, grouped; with ``held_by``, only while that process holds
        the study (``coordinator.db.LeaseLost`` otherwise)."""

        def write(conn: Connection) -> None:
            if held_by is not None:
                self.store.check_lease_in(conn, study_id, held_by)
            self.store.record_release_in(conn, study_id, center, kind, request_key, request,
                                         response)

        await self.run(write)

    async def _writer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commits the loop's waiting writes, a group at a time, until none is left."""
        waiting = self._waiting[loop]
        try:
            while waiting:
                for _ in range(SETTLE_TURNS):
                    await asyncio.sleep(0)
                group = waiting[:self.max_group]
                del waiting[:len(group)]
                self.groups[len(group)] = self.groups.get(len(group), 0) + 1
                try:
                    results = await asyncio.to_thread(self.store.write_many,
                                                      [p.write for p in group])
                except BaseException as failure:  # every waiting caller gets it
                    for p in group:
                        if not p.done.done():
                            p.done.set_exception(failure)
                    if not isinstance(failure, Exception):
                        raise
                    continue
                for p, result in zip(group, results, strict=True):
                    if p.done.done():  # its caller was cancelled
                        continue
                    if isinstance(result, Exception):
                        p.done.set_exception(result)
                    else:
                        p.done.set_result(result)
        finally:
            del self._waiting[loop]
            for p in waiting:  # only when cancelled (the loop closing): none may wait forever
                if not p.done.done():
                    p.done.set_exception(asyncio.CancelledError())


_writers: weakref.WeakKeyDictionary[Store, GroupCommit] = weakref.WeakKeyDictionary()


def for_store(store: Store) -> GroupCommit:
    """The one :class:`GroupCommit` of ``store``: every study of a process shares its groups."""
    writer = _writers.get(store)
    if writer is None:
        writer = _writers[store] = GroupCommit(store)
    return writer
