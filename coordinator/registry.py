"""The registry as the coordinator sees it now: each center's health and remaining budgets
(:meth:`Registry.statuses`), and what each declares (:meth:`Registry.declarations`, the
catalog's source: ``coordinator.catalog``).

Concurrent askers share one round of questions: a dashboard polled by many analysts must not
multiply the requests every hospital answers. A call made while a round of its kind is in flight
waits for that round's answer; the first call after it starts a new round. Nothing is kept
beyond that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from coordinator.core.errors import CenterFailure
from coordinator.models import CenterProblem, CenterStatus, DatasetState, dataset_state
from coordinator.ports import CenterPort
from shared.protocol import Budget, CenterInfo

T = TypeVar("T")


@dataclass(frozen=True)
class Declaration:
    """One center's ``/v1/info`` and ``/v1/budget`` (each None when it failed, ``problem``
    says why: the info's failure first)."""

    center: str
    url: str | None
    info: CenterInfo | None
    budget: Budget | None
    problem: CenterProblem | None


def _problem(failure: CenterFailure) -> CenterProblem:
    return CenterProblem(kind=failure.kind, detail=failure.reason)


def _info_of(task: asyncio.Future[Declaration]) -> asyncio.Future[CenterInfo | None]:
    """The info ``task`` gives (None if it failed), in a future of its own: awaiting it, or
    cancelling the waiter, never cancels the round shared with other askers."""
    info: asyncio.Future[CenterInfo | None] = asyncio.get_running_loop().create_future()

    def done(answered: asyncio.Future[Declaration]) -> None:
        if info.done():
            return
        failed = answered.cancelled() or answered.exception() is not None
        info.set_result(None if failed else answered.result().info)

    task.add_done_callback(done)
    return info


class Registry:
    """The centers a coordinator knows, asked for their state on demand."""

    def __init__(self, centers: Mapping[str, CenterPort], urls: Mapping[str, str]) -> None:
        self.centers = dict(centers)
        self.urls = dict(urls)
        self._rounds: dict[str, asyncio.Future[Any]] = {}
        # The round of declarations in flight, with budgets (True) or info only (False).
        self._declaring: dict[bool, list[asyncio.Future[Declaration]]] = {}

    async def _shared(self, name: str, ask: Callable[[], Awaitable[T]]) -> T:
        """The answer of the round ``name`` in flight, or of a new one."""
        running = self._rounds.get(name)
        if running is None or running.done():
            running = self._rounds[name] = asyncio.ensure_future(ask())
        # Shielded: an asker that goes away does not cancel the round for the others.
        answer: T = await asyncio.shield(running)
        return answer

    async def statuses(self) -> list[CenterStatus]:
        """Every center's health and remaining budgets, asked in parallel (one round at a time)."""
        return await self._shared("statuses", lambda: self._ask_all(self._status))

    async def declarations(self, wait_s: float | None = None, *,
                           budgets: bool = True) -> list[Declaration]:
        """Every center's info (names, K, rounded sizes) and, with ``budgets``, its budget,
        asked in parallel (one round at a time). Only ``/v1/info`` and ``/v1/budget``: nothing
        is released.

        With ``wait_s``, a center that has not answered by then is given as not answering
        (``timeout``) and its answer is left to the round, which goes on for other askers: a
        slow hospital must not hold up a submission."""
        asked = self._declaring.get(budgets, [])
        if not asked or all(t.done() for t in asked):
            asked = self._declaring[budgets] = [
                asyncio.ensure_future(self._declaration(cid, port, budgets=budgets))
                for cid, port in self.centers.items()]
        if not asked:
            return []
        # Shielded (asyncio.wait never cancels them): an asker that goes away does not cancel
        # the round for the others.
        await asyncio.wait(asked, timeout=wait_s)
        return [task.result() if task.done() else self._late(cid, wait_s)
                for task, cid in zip(asked, self.centers, strict=True)]

    def infos(self, *, budgets: bool = False) -> dict[str, asyncio.Future[CenterInfo | None]]:
        """Each center's info in the latest round of :meth:`declarations` (with ``budgets`` or
        not), answered or still in flight; None when the center failed.

        A caller that gave up waiting for a slow center (``wait_s``) takes its answer from here
        when it comes instead of asking again: the question already asked is the one answered,
        however long the machine takes (a deadline missed under load must not turn into a
        second request)."""
        asked = self._declaring.get(budgets, [])
        return {cid: _info_of(task) for task, cid in zip(asked, self.centers, strict=True)}

    def _late(self, center_id: str, wait_s: float | None) -> Declaration:
        return Declaration(center=center_id, url=self.urls.get(center_id), info=None,
                           budget=None, problem=CenterProblem(
                               kind="timeout", detail=f"no answer within {wait_s:g} s"))

    async def _ask_all(self, ask: Callable[[str, CenterPort], Awaitable[T]]) -> list[T]:
        return list(await asyncio.gather(*(ask(cid, port) for cid, port in self.centers.items())))

    async def _status(self, center_id: str, port: CenterPort) -> CenterStatus:
        problem: CenterProblem | None = None
        remaining: dict[str, float] | None = None
        states: dict[str, DatasetState] | None = None
        healthy = False
        try:
            await port.health()
            healthy = True
            budget = await port.budget()
            remaining = {name: b.remaining_epsilon for name, b in budget.datasets.items()}
            # Each dataset's state: one dataset whose source fails is its own problem, shown
            # beside a healthy center.
            info = await port.info()
            states = {d.name: dataset_state(paused=d.paused, available=d.available)
                      for d in info.datasets}
        except CenterFailure as failure:
            problem = _problem(failure)
        return CenterStatus(id=port.center_id, url=self.urls.get(center_id), healthy=healthy,
                            serving=healthy and problem is None, problem=problem,
                            remaining_epsilon=remaining, datasets=states)

    async def _declaration(self, center_id: str, port: CenterPort, *,
                           budgets: bool) -> Declaration:
        async def attempt(call: Awaitable[T]) -> T | CenterFailure:
            try:
                return await call
            except CenterFailure as failure:
                return failure

        async def no_budget() -> None:
            return None

        info, budget = await asyncio.gather(attempt(port.info()),
                                            attempt(port.budget() if budgets else no_budget()))
        failed = [a for a in (info, budget) if isinstance(a, CenterFailure)]
        return Declaration(
            center=center_id, url=self.urls.get(center_id),
            info=info if isinstance(info, CenterInfo) else None,
            budget=budget if isinstance(budget, Budget) else None,
            problem=_problem(failed[0]) if failed else None,
        )
