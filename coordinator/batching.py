"""Release calls to one center made while it is busy with the study, sent as one batch.

A study's analyses run concurrently (``coordinator.study``), so several of them ask the same
center for releases at about the same time. :class:`ReleaseBatcher` keeps, per dataset and call
context (study, analyst), at most one request in flight to the center: the first call goes after
a few turns of the event loop (so calls made in the same step join it), and calls made while a
request is in flight wait for it to end and then go together in one
``POST /v1/datasets/{dataset}/releases`` (group commit). One authenticated request and one ledger
transaction at the center instead of one per release, with the same per-release accounting,
audit records and stored answers (``center_agent.gate``). Each caller gets its own item's answer,
or its own error, exactly as from a call of its own; a lone call goes to its kind's own route.

Holding calls back costs no throughput: the center answers one dataset's releases one at a time
anyway (each holds the dataset's lock, ``center_agent.db.Store.locked``), and a waiting call
would have waited there.

The protocols do not know: :meth:`coordinator.client.HttpCenter.release` goes through here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fedstats_service import context
from shared.kinds import Kind
from shared.protocol import MAX_BATCH, WireModel

log = logging.getLogger(__name__)

#: Turns of the event loop a call waits for others to join it before a request leaves: enough
#: for every analysis started in the same step to reach its call, too few to notice (each turn
#: is microseconds).
SETTLE_TURNS = 3
#: A request larger than this goes alone (a table of many limits): batching it saves nothing
#: next to its size.
MAX_ITEM_BYTES = 64_000
#: The most request bytes one batch carries: under a center's default ``max_body_bytes``
#: (10^6) with room for the envelope.
MAX_BATCH_BYTES = 500_000

LaneKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Call:
    """One release call waiting in a batch."""

    kind: Kind[Any, Any]
    request: WireModel
    answer: asyncio.Future[WireModel] = field(repr=False)
    size: int = 0


SendOne = Callable[[Kind[Any, Any], str, WireModel], Awaitable[WireModel]]
SendMany = Callable[[str, list[Call]], Awaitable[None]]


class ReleaseBatcher:
    """Gathers one center's release calls per dataset and call context into batches.

    ``send_one`` answers a single call (its kind's own route); ``send_many`` answers a batch,
    setting each call's ``answer`` (a result or an exception). :attr:`sent` counts the requests
    made by size (1 for a lone call), for benchmarks and tests.
    """

    def __init__(self, send_one: SendOne, send_many: SendMany, *,
                 max_items: int = MAX_BATCH, max_item_bytes: int = MAX_ITEM_BYTES,
                 max_batch_bytes: int = MAX_BATCH_BYTES) -> None:
        self._send_one = send_one
        self._send_many = send_many
        self.max_items = max_items
        self.max_item_bytes = max_item_bytes
        self.max_batch_bytes = max_batch_bytes
        self.sent: dict[int, int] = {}
        self._waiting: dict[LaneKey, list[Call]] = {}
        self._lanes: set[asyncio.Task[None]] = set()

    async def release(self, kind: Kind[Any, Any], dataset: str, request: WireModel) -> WireModel:
        """``request``'s answer, sent in a batch with the calls waiting beside it."""
        size = len(request.model_dump_json())
        if size > self.max_item_bytes:
            self._count(1)
            return await self._send_one(kind, dataset, request)
        loop = asyncio.get_running_loop()
        # Calls of different studies never share a batch: the batch carries one call context.
        key = (dataset, tuple(sorted(context.current().headers().items())))
        call = Call(kind, request, loop.create_future(), size)
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.append(call)  # the lane's task sends it with the next batch
        else:
            self._waiting[key] = [call]
            # The lane runs in this call's context (create_task copies it): its headers are
            # every batch's of the lane, the same by the key.
            task = loop.create_task(self._lane(key))
            self._lanes.add(task)
            task.add_done_callback(self._lanes.discard)
        return await call.answer

    async def _lane(self, key: LaneKey) -> None:
        """Sends the lane's waiting calls, a batch at a time, until none is left."""
        dataset = key[0]
        waiting = self._waiting[key]
        try:
            while waiting:
                for _ in range(SETTLE_TURNS):
                    await asyncio.sleep(0)
                calls = self._next_batch(waiting)
                del waiting[:len(calls)]
                await self._send(dataset, calls)
        finally:
            del self._waiting[key]
            for call in waiting:  # only when cancelled: none may wait forever
                if not call.answer.done():
                    call.answer.set_exception(asyncio.CancelledError())

    def _next_batch(self, waiting: list[Call]) -> list[Call]:
        """The longest run of waiting calls, in order, within the item and byte limits (at
        least one)."""
        total = 0
        for taken, call in enumerate(waiting[:self.max_items]):
            total += call.size
            if taken and total > self.max_batch_bytes:
                return waiting[:taken]
        return waiting[:self.max_items]

    def _count(self, size: int) -> None:
        self.sent[size] = self.sent.get(size, 0) + 1

    async def _send(self, dataset: str, calls: list[Call]) -> None:
        self._count(len(calls))
        try:
            if len(calls) == 1:
                call = calls[0]
                result = await self._send_one(call.kind, dataset, call.request)
                if not call.answer.done():
                    call.answer.set_result(result)
            else:
                log.debug("%d releases of %r in one request", len(calls), dataset)
                await self._send_many(dataset, calls)
        except BaseException as exc:  # each waiting caller gets the failure, none waits forever
            for call in calls:
                if not call.answer.done():
                    call.answer.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        for call in calls:
            if not call.answer.done():  # pragma: no cover - send_many answers every call
                call.answer.set_exception(RuntimeError("the batch left this call unanswered"))
