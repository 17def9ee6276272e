"""The error base of both services: an HTTP status, a stable machine code and a human detail,
rendered once as ``{"error": ..., "detail": ..., **extra}`` (:func:`error_body`; sent by
``fedstats_service.handlers`` and, before a route runs, by ``fedstats_service.middleware``)."""

from __future__ import annotations

from typing import Any, ClassVar


def error_body(error: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error answer (and of a study's stored error): ``error`` and
    ``detail`` first, then any extras."""
    return {"error": error, "detail": detail, **extra}


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


class AuthenticationError(ServiceError):
    status_code = 401
    error = "unauthenticated"

    def __init__(self, detail: str = "a valid bearer token is required") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFound(ServiceError):
    status_code = 404
    error = "not_found"


class RequestTooLarge(ServiceError):
    status_code = 413
    error = "request_too_large"


def error_responses() -> dict[int | str, dict[str, Any]]:
    """The typed error answers every protected route can give, for the OpenAPI schema."""
    from shared.protocol import ErrorBody  # the wire shape both services render

    described = {
        400: "a malformed request (e.g. an invalid Content-Length header)",
        401: "missing or invalid bearer token (`unauthenticated`)",
        403: "a privacy refusal: budget, K, a switched-off release, a call cap",
        404: "an unknown dataset, variable, level or study",
        409: "a refusal that depends on earlier releases (differencing) or on a study's state",
        413: "the request body is over the size limit",
        422: "the request does not validate; `detail` names each bad field",
    }
    return {code: {"model": ErrorBody, "description": text} for code, text in described.items()}
