"""A study's progress pushed to its readers: ``GET /v1/studies/{id}/events`` (server-sent
events) instead of polling ``GET /v1/studies/{id}``.

The stream sends one event each time the study's state — its status and the number of answers
its centers gave — differs from the last one sent: ``progress`` while it runs, then one ``end``
when it reaches a final status (:data:`FINAL`), after which the stream closes. Each event's data
is ``{"id", "status", "releases_received", "updated_at"}`` (JSON), its ``id:`` the event's
number in the stream. Nothing is sent for a state nobody could see (several changes between two
reads are one event).

The process that runs a study wakes its streams when the study records an answer
(``coordinator.recording``) or changes status (``coordinator.runner``), so an event follows a
change at once, without a poll. A study run by another coordinator process over the same store
(or a wake-up lost to a race) is still followed: without a notice the stream reads the store
again every ``heartbeat_s`` and sends a comment line, which also keeps proxies from closing an
idle connection. A client that cannot stream (an older coordinator: 404) polls, as before.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

from coordinator.db import Store
from coordinator.models import StudyStatus

#: The statuses a study waits in for nobody: the stream ends there (a resume starts another
#: wait).
FINAL: frozenset[StudyStatus] = frozenset(
    {"succeeded", "partially_failed", "failed", "failed_resumable", "cancelled"})
#: How long a stream waits for a notice before it reads the store again (and sends a comment).
HEARTBEAT_S = 5.0


class StudyFeed:
    """Change notices of the studies of one store in this process: a version per study, bumped
    by :meth:`changed`, and the streams waiting for it to move."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}

    def version(self, study_id: str) -> int:
        return self._versions.get(study_id, 0)

    def watching(self, study_id: str) -> int:
        """How many streams wait for the study to change (tests wait for a stream this way)."""
        return len(self._waiting.get(study_id, ()))

    def changed(self, study_id: str) -> None:
        """The study's state changed (called on the event loop that runs it)."""
        self._versions[study_id] = self.version(study_id) + 1
        for waiter in self._waiting.pop(study_id, set()):
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, study_id: str, seen: int, timeout_s: float) -> bool:
        """Until the study's version moves past ``seen`` (True) or ``timeout_s`` passes
        (False)."""
        if self.version(study_id) != seen:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(study_id, set()).add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(study_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiting[study_id]
        return True


_feeds: weakref.WeakKeyDictionary[Store, StudyFeed] = weakref.WeakKeyDictionary()


def for_store(store: Store) -> StudyFeed:
    """The one :class:`StudyFeed` of ``store`` in this process."""
    feed = _feeds.get(store)
    if feed is None:
        feed = _feeds[store] = StudyFeed()
    return feed


def event(number: int, name: str, data: dict[str, object]) -> str:
    """One server-sent event (``text/event-stream``)."""
    return f"id: {number}\nevent: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def stream(store: Store, study_id: str, *, heartbeat_s: float = HEARTBEAT_S,
                 alive: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[str]:
    """The study's events (module docstring) until its ``end``; a comment each
    ``heartbeat_s`` without a change. With ``alive`` (the console's session check, or the API's
    bearer token checked again), the stream ends as soon as it answers False, checked before
    every event and heartbeat."""
    feed = for_store(store)
    last: tuple[str, int] | None = None
    sent = 0
    while True:
        if alive is not None and not await alive():
            return
        # The version is taken before the read: a change after the read moves it, so the
        # wait below returns at once instead of missing it.
        seen = feed.version(study_id)
        record = await asyncio.to_thread(store.get_study, study_id)
        if record is None:  # deleted meanwhile (an operator's clean-up)
            return
        count = await asyncio.to_thread(store.count_releases, study_id)
        state = (record.status, count)
        if state != last:
            last = state
            sent += 1
            final = record.status in FINAL
            yield event(sent, "end" if final else "progress", {
                "id": study_id, "status": record.status, "releases_received": count,
                "updated_at": record.updated_at})
            if final:
                return
        if not await feed.wait(study_id, seen, heartbeat_s):
            yield ": heartbeat\n\n"
