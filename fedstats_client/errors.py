"""The coordinator's error answers as Python exceptions.

Every error the coordinator answers with has the body ``{"error": code, "detail": text,
...extras}`` (docs/coordinator.md, "The analyst API (`/v1`)"); :func:`from_answer` turns it
into the exception of its code, keeping the code, the HTTP status, the detail and the extras
(a center failure names ``center`` and ``kind``; a quota names ``center``, ``dataset``,
``quota``, ``spent``, ``asked``). A study that ends without a result raises
:class:`StudyFailed` with the same fields taken from the study's stored error.

No exception ever holds the caller's token: the client never puts it in a message.
"""

from __future__ import annotations

from typing import Any


class FedstatsError(Exception):
    """Base of every error of the client. ``code`` is the coordinator's machine code
    (``not_found``, ``quota_exceeded``, ...), ``status`` the HTTP status (None when no answer
    came), ``detail`` the human text and ``body`` the whole error body."""

    def __init__(self, detail: str, *, code: str = "error", status: int | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {detail}" if status is None else
                         f"{code} ({status}): {detail}")
        self.detail = detail
        self.code = code
        self.status = status
        self.body: dict[str, Any] = dict(body or {"error": code, "detail": detail})


class ConfigurationError(FedstatsError, ValueError):
    """The client cannot be set up as asked (no token, an unreadable CA bundle); the message
    names the argument or environment variable to fix."""


class Unsupported(FedstatsError):
    """The coordinator does not offer what was asked (an older version without the route)."""


class ConnectionFailed(FedstatsError):
    """The coordinator could not be reached (refused, timed out, TLS refused: the text says
    which and, for an untrusted certificate, what to pass as ``ca_bundle``)."""


class AuthenticationError(FedstatsError):
    """401: no token, or one the coordinator does not accept (unknown, revoked)."""


class Forbidden(FedstatsError):
    """403: an admin's action, or sharing a study the caller does not own."""


class QuotaExceeded(Forbidden):
    """403 ``quota_exceeded``: the study does not fit the caller's ε quota at ``center`` for
    ``dataset``; nothing was asked of that center."""

    @property
    def center(self) -> str | None:
        return self.body.get("center")

    @property
    def dataset(self) -> str | None:
        return self.body.get("dataset")

    @property
    def quota(self) -> float | None:
        return self.body.get("quota")

    @property
    def spent(self) -> float | None:
        return self.body.get("spent")

    @property
    def asked(self) -> float | None:
        return self.body.get("asked")


class NotFound(FedstatsError):
    """404: no such study (or one the caller may not read), analyst, analysis or route."""


class Conflict(FedstatsError):
    """409: the study is not in a state that allows it (e.g. resuming a finished study)."""


class InvalidRequest(FedstatsError):
    """422: the spec or a parameter does not validate, or cannot run here; ``fields`` lists the
    dotted keys to fix when the coordinator names them."""

    @property
    def fields(self) -> list[str]:
        return list(self.body.get("fields") or [])


class CenterFailed(FedstatsError):
    """502 ``center_failure``: a center gave no usable answer; ``center`` and ``kind`` say who
    and how (unreachable, timeout, refused, error, malformed, implausible)."""

    @property
    def center(self) -> str | None:
        return self.body.get("center")

    @property
    def kind(self) -> str | None:
        return self.body.get("kind")


class Unavailable(FedstatsError):
    """503: the coordinator is busy, or too few centers answered; retry later."""


class StudyFailed(FedstatsError):
    """A study that ended without a result (``failed``, ``failed_resumable``, ``cancelled``):
    the study's stored error, ``center`` and ``kind`` naming the center when one failed it.
    ``study`` is the study as last read (``study.id`` to resume it)."""

    def __init__(self, study: Any, body: dict[str, Any]) -> None:
        self.study = study
        self.study_id: str = study.id
        self.study_status: str = study.status
        super().__init__(f"study {study.id} {study.status}: {body.get('detail', '')}",
                         code=str(body.get("error", "study_failed")), body=body)

    @property
    def center(self) -> str | None:
        return self.body.get("center")

    @property
    def kind(self) -> str | None:
        return self.body.get("kind")

    @property
    def resumable(self) -> bool:
        """Whether ``resume`` may run it again (docs/coordinator.md, "Statuses and partial
        results"); the coordinator decides, this is its rule of thumb."""
        return self.study_status == "failed_resumable" or (
            self.study_status == "failed" and self.kind in ("unreachable", "timeout"))


class AnalysisFailed(FedstatsError):
    """An analysis of a ``partially_failed`` study that gave no result, read as if it had one;
    ``index`` is its place in the spec, ``center``/``kind`` name the center that failed it."""

    def __init__(self, index: int, analysis_kind: str, body: dict[str, Any]) -> None:
        self.index = index
        self.analysis_kind = analysis_kind
        super().__init__(f"analysis {index} ({analysis_kind}) failed: {body.get('detail', '')}",
                         code=str(body.get("error", "analysis_failed")), body=body)

    @property
    def center(self) -> str | None:
        return self.body.get("center")

    @property
    def kind(self) -> str | None:
        return self.body.get("kind")


class NoSuchAnalysis(LookupError):
    """The study asked for no analysis of that kind."""


#: The exception of each error code; a code not listed falls back to its HTTP status.
BY_CODE: dict[str, type[FedstatsError]] = {
    "unauthenticated": AuthenticationError,
    "quota_exceeded": QuotaExceeded,
    "center_failure": CenterFailed,
}
BY_STATUS: dict[int, type[FedstatsError]] = {
    401: AuthenticationError,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidRequest,
    502: CenterFailed,
    503: Unavailable,
}


def from_answer(status: int, body: Any, text: str = "") -> FedstatsError:
    """The exception for an error answer: its JSON ``body`` when it is the error body, else
    the start of its ``text`` (a proxy's HTML page, say)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code, detail = body["error"], str(body.get("detail", ""))
    else:
        code, detail, body = f"http_{status}", text[:500] or f"HTTP {status}", None
    kind = BY_CODE.get(code) or BY_STATUS.get(status) or FedstatsError
    return kind(detail, code=code, status=status, body=body)
