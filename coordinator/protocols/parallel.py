"""Concurrency of the protocols: one request to every center at once (:func:`ask_all`, each
answer checked) and several protocols at once (:func:`all_or_first_failure`).

In :func:`ask_all` a failing center raises :class:`coordinator.core.errors.CenterFailure` (the
first, in the given order) or, with ``allow_partial``, is returned among the failures; any other
exception (a bug) propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort

log = logging.getLogger(__name__)

R = TypeVar("R")


def left_out(failure: CenterFailure) -> CenterFailure:
    """``failure``, logged as a center left out of the study (``allow_partial``)."""
    log.warning("center %s left out of the study (allow_partial): %s, %s", failure.center,
                failure.kind, failure.reason)
    return failure


async def ask_all(
    ports: Sequence[CenterPort],
    ask: Callable[[CenterPort], Awaitable[R]],
    check: Callable[[str, R], None],
    *,
    allow_partial: bool,
) -> tuple[dict[str, R], list[CenterFailure]]:
    """``({center: answer}, failures)`` in the order of ``ports``."""
    answers = await asyncio.gather(*(ask(p) for p in ports), return_exceptions=True)
    got: dict[str, R] = {}
    failures: list[CenterFailure] = []
    for port, answer in zip(ports, answers, strict=True):
        try:
            if isinstance(answer, BaseException):
                raise answer
            check(port.center_id, answer)
            got[port.center_id] = answer
        except CenterFailure as failure:
            if not allow_partial:
                raise
            failures.append(left_out(failure))
    return got, failures


async def all_or_first_failure(runs: Sequence[Coroutine[Any, Any, R]]) -> list[R]:
    """The results of ``runs``, run concurrently, in their order.

    As soon as one raises, the others are cancelled (no center keeps working for a study that
    has failed) and the exception of the first failed run, in the given order, is raised.
    """
    tasks = [asyncio.ensure_future(run) for run in runs]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()  # no-op on the finished ones
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
    return [task.result() for task in tasks]
