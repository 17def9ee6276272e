"""One request to every center at once (``asyncio.gather``), each answer checked.

A failing center raises :class:`coordinator.core.errors.CenterFailure` (the first, in the given
order) or, with ``allow_partial``, is returned among the failures; any other exception (a bug)
propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort

R = TypeVar("R")


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
            failures.append(failure)
    return got, failures
