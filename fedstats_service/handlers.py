"""Exception handlers: every error leaves as ``{"error": ..., "detail": ...}``, never a trace."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from fedstats_service.errors import (
    AuthenticationError,
    DatabaseBusy,
    InvalidFields,
    NotFound,
    RequestTooLarge,
    ServiceError,
    error_body,
)

log = logging.getLogger(__name__)

# Starlette's own errors, by status, in the services' vocabulary.
_HTTP_CODES = {
    **{cls.status_code: cls.error for cls in (AuthenticationError, NotFound, RequestTooLarge)},
    403: "forbidden",
    405: "method_not_allowed",
}


def _answer(exc: ServiceError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


async def service_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    if exc.status_code >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc.detail)
    return _answer(exc)


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 naming each bad field (``body.epsilon: ...``); the offending input is not echoed."""
    assert isinstance(exc, RequestValidationError)
    return _answer(InvalidFields(exc.errors()))


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own errors (unknown route, wrong method) in our shape."""
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else code
    return JSONResponse(error_body(code, detail), status_code=exc.status_code,
                        headers=exc.headers)


def database_busy(exc: BaseException) -> bool:
    """No pooled connection within the pool's wait, or SQLite's write lock not within its busy
    timeout (``fedstats_service.db``), raised as such or as the cause of another error."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, PoolTimeout):
            return True
        if isinstance(seen, OperationalError) and "database is locked" in str(seen.orig):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def install(app: FastAPI, service: str) -> None:
    """Register the handlers; ``service`` names the service in the bare 500's detail."""

    async def unhandled_error_handler(request: Request, exc: Exception) -> JSONResponse:
        """Anything unexpected: logged here with its trace, answered with a bare 500 — but a
        database that stayed busy past its wait (a loaded machine, many writers) is a 503 the
        caller may retry: the transaction rolled back, nothing was done."""
        if database_busy(exc):
            log.warning("%s %s: database busy past its wait", request.method, request.url.path)
            return _answer(DatabaseBusy(service))
        log.error("%s %s raised", request.method, request.url.path, exc_info=exc)
        return _answer(ServiceError(f"the {service} could not answer this request"))

    app.add_exception_handler(ServiceError, service_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(Exception, unhandled_error_handler)
