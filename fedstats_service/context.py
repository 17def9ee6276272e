"""Who a request is for, carried from the analyst through the coordinator to every center call.

One :class:`CallContext` per request (or per study task), in a context variable: the request id
(``X-Request-ID``: taken from the caller when well formed, made otherwise), and on the
coordinator's calls to centers the study and the analyst they serve. The coordinator's HTTP client
sends them as headers (:data:`REQUEST_ID_HEADER`, :data:`STUDY_HEADER`, :data:`ANALYST_HEADER`);
a center records them with each release in its audit log, and every log line carries them.

An asyncio task copies the context it was created in, so a study task started while serving a
request keeps that request's id unless it sets its own.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

REQUEST_ID_HEADER = "X-Request-ID"
STUDY_HEADER = "X-Fedstats-Study"
ANALYST_HEADER = "X-Fedstats-Analyst"

# What a caller may send as an id: short, printable, no separators a log reader could trip on.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


def clean_id(value: str | None) -> str | None:
    """``value`` when it is a well-formed id (letters, digits, ``._:-``, at most 64), else None:
    an id from the wire goes into logs and the audit trail, so nothing else is kept."""
    if value is None:
        return None
    value = value.strip()
    return value if _ID.fullmatch(value) else None


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class CallContext:
    """The ids a request carries (None: not known here)."""

    request_id: str | None = None
    study_id: str | None = None
    analyst_id: str | None = None

    def headers(self) -> dict[str, str]:
        """The headers that carry this context to the next service."""
        pairs = ((REQUEST_ID_HEADER, self.request_id), (STUDY_HEADER, self.study_id),
                 (ANALYST_HEADER, self.analyst_id))
        return {name: value for name, value in pairs if value is not None}


_EMPTY = CallContext()
_current: ContextVar[CallContext | None] = ContextVar("fedstats_call_context", default=None)


def current() -> CallContext:
    """The context of the request (or study task) being served."""
    return _current.get() or _EMPTY


@contextmanager
def bound(**ids: str | None) -> Iterator[CallContext]:
    """Within the block, the current context with ``ids`` replaced (``request_id``,
    ``study_id``, ``analyst_id``)."""
    context = replace(current(), **ids)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def set_current(context: CallContext) -> None:
    """Make ``context`` current for the rest of this task (a study task sets its own once)."""
    _current.set(context)
