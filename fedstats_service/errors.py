"""The one error base of both services: an HTTP status, a stable machine code and a human detail,
rendered once as ``{"error": ..., "detail": ..., **extra}`` (:func:`error_body`; sent by
``fedstats_service.handlers`` and, before a route runs, by ``fedstats_service.middleware``).

The errors every service can answer with, whatever its domain::

    ServiceError                500 internal_error
    ├── BadRequest              400 bad_request        (e.g. an invalid Content-Length header)
    ├── AuthenticationError     401 unauthenticated
    ├── NotFound                404 not_found          (a service's own 404s refine the code)
    ├── RequestTimeout          408 request_timeout    (the body did not arrive in time)
    ├── RequestTooLarge         413 request_too_large
    ├── InvalidFields           422 validation_error   (names each bad field in ``fields``)
    └── DatabaseBusy            503 busy               (its database past its wait; retry)

Each service's ``core/errors.py`` derives its own errors from these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar


def error_body(error: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error answer (and of a study's stored error): ``error`` and
    ``detail`` first, then any extras."""
    return {"error": error, "detail": detail, **extra}


def dotted(location: Sequence[Any]) -> str:
    """A pydantic error's location as one dotted key (``body.epsilon``, ``datasets.a.path``)."""
    return ".".join(str(part) for part in location)


def describe_errors(errors: Iterable[Mapping[str, Any]], *, empty: str = "") -> str:
    """Pydantic errors as ``key: message; key: message`` (``empty`` stands for the key of an
    error of the whole input). Never the offending input: it may be a secret or data."""
    return "; ".join(f"{dotted(err.get('loc', ())) or empty}: {err.get('msg', 'invalid')}"
                     for err in errors)


class ServiceError(Exception):
    """Base of every error a service answers with."""

    status_code: ClassVar[int] = 500
    error: ClassVar[str] = "internal_error"

    def __init__(
        self,
        detail: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = dict(extra or {})
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The JSON body sent to the client: ``error`` and ``detail`` first, then any extras."""
        return error_body(self.error, self.detail, **self.extra)


class BadRequest(ServiceError):
    status_code = 400
    error = "bad_request"


class AuthenticationError(ServiceError):
    status_code = 401
    error = "unauthenticated"

    def __init__(self, detail: str = "a valid bearer token is required") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFound(ServiceError):
    status_code = 404
    error = "not_found"


class RequestTimeout(ServiceError):
    status_code = 408
    error = "request_timeout"


class RequestTooLarge(ServiceError):
    status_code = 413
    error = "request_too_large"


class DatabaseBusy(ServiceError):
    """The service's database did not give a connection, or its write lock, within the wait
    (``busy_timeout_s``): the request changed nothing (its transaction rolled back) and may be
    sent again; ``Retry-After`` says when."""

    status_code = 503
    error = "busy"

    def __init__(self, service: str) -> None:
        super().__init__(f"the {service}'s database is busy with other requests; nothing was "
                         "done, send the request again", headers={"Retry-After": "1"})


class InvalidFields(ServiceError):
    """A request that does not validate; ``fields`` lists the dotted key of each bad field."""

    status_code = 422
    error = "validation_error"

    def __init__(self, errors: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(describe_errors(errors, empty="(request)"),
                         extra={"fields": [dotted(err.get("loc", ())) for err in errors]})


# What the HTTP server (uvicorn) itself answers, before the app sees the request, as plain text:
# 400 "Invalid HTTP request received." for a request it cannot parse (a control or non-ASCII
# byte in the target, a Content-Length that is not a number), and 503 "Service Unavailable"
# past ``max_concurrency`` (``fedstats_service.serving``). Every error answer's content type is
# declared (a client generator, or schemathesis, must not meet an undeclared one).
TRANSPORT_ERRORS: dict[int, str] = {
    400: "a malformed request: `{error, detail}` from the service (e.g. an invalid "
         "Content-Length header), or plain text from the HTTP server for a request it cannot "
         "parse",
    503: "busy: past the concurrent request limit (plain text from the HTTP server), the "
         "service's database busy past its wait (`busy`, with Retry-After; nothing was done) or, "
         "from the coordinator, too many studies running (`busy`)",
}
PLAIN_TEXT = {"text/plain": {"schema": {"type": "string"}}}


def transport_responses() -> dict[int | str, dict[str, Any]]:
    """The error answers any route can give, the public ones included (:data:`TRANSPORT_ERRORS`),
    for the OpenAPI schema: the service's JSON error body or the HTTP server's plain text."""
    from shared.protocol import ErrorBody  # the wire shape both services render

    return {code: {"model": ErrorBody, "description": text, "content": dict(PLAIN_TEXT)}
            for code, text in TRANSPORT_ERRORS.items()}


def error_responses() -> dict[int | str, dict[str, Any]]:
    """The typed error answers every protected route can give, for the OpenAPI schema (with
    :func:`transport_responses`: a route's own 400 replaces the app's, so it says both)."""
    from shared.protocol import ErrorBody  # the wire shape both services render

    described = {
        401: "missing or invalid bearer token (`unauthenticated`)",
        403: "a privacy refusal: budget, K, a switched-off release, a call cap",
        404: "an unknown dataset, variable, level or study",
        409: "a refusal that depends on earlier releases (differencing) or on a study's state",
        413: "the request body is over the size limit",
        422: "the request does not validate; `detail` names each bad field",
    }
    typed: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody, "description": text} for code, text in described.items()}
    return dict(sorted({**transport_responses(), **typed}.items(), key=lambda kv: int(kv[0])))
