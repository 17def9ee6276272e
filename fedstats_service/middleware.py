"""Pure ASGI guards run before any route: the call context, the bearer token, then the body's
size and time.

* :class:`CallContextMiddleware` binds the request's ids (``fedstats_service.context``) for
  everything that runs for it, and answers with its ``X-Request-ID``.

* :class:`BearerGate` answers 401 to a request without a valid token **before its body is read**
  (an unauthenticated client cannot make a service buffer megabytes, or wait for them).
* :class:`BodySizeLimit` answers 413 when the body is longer than ``max_body_bytes`` (a declared
  ``Content-Length`` over the limit is refused without reading; otherwise the body is read, never
  more than the limit plus one chunk, and replayed to the application), and 408 when the body
  does not arrive within ``body_timeout_s``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fedstats_service import context
from fedstats_service.auth import fingerprint
from fedstats_service.errors import (
    AuthenticationError,
    BadRequest,
    RequestTimeout,
    RequestTooLarge,
    ServiceError,
)
from fedstats_service.serving import BODY_TIMEOUT_S

log = logging.getLogger(__name__)


class CallContextMiddleware:
    """Bind the request's :class:`fedstats_service.context.CallContext` and echo its id.

    The request id is the caller's ``X-Request-ID`` when well formed, a new one otherwise. The
    study and analyst ids are taken from their headers only when ``trust_ids`` (a center: they
    come from the coordinator holding its token, and are recorded as the coordinator's claim);
    the coordinator learns the analyst from the token, never from a header.
    """

    def __init__(self, app: ASGIApp, *, trust_ids: bool) -> None:
        self.app = app
        self.trust_ids = trust_ids

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1")
                   for name, value in scope.get("headers") or []}

        def header(name: str) -> str | None:
            return context.clean_id(headers.get(name.lower()))

        request_id = header(context.REQUEST_ID_HEADER) or context.new_request_id()
        ids: dict[str, str | None] = {"request_id": request_id}
        if self.trust_ids:
            ids |= {"study_id": header(context.STUDY_HEADER),
                    "analyst_id": header(context.ANALYST_HEADER)}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    *message.get("headers", []),
                    (context.REQUEST_ID_HEADER.lower().encode(), request_id.encode()),
                ]}
            await send(message)

        with context.bound(**ids):
            await self.app(scope, receive, send_with_id)


class BearerGate:
    """401 unless ``check(token, path)`` accepts the request's bearer token (paths in
    ``public`` excepted, and paths under ``public_prefixes``: the coordinator's console, which
    signs its callers in by a session of its own). ``check`` (a
    ``fedstats_service.auth.Authenticator``) raises
    :class:`AuthenticationError` or returns the caller, which is put in
    ``scope["state"]["caller"]``; a caller with an ``analyst_id`` binds it to the request's
    call context."""

    def __init__(self, app: ASGIApp, check: Callable[[str | None, str], object],
                 public: Collection[str], public_prefixes: Collection[str] = ()) -> None:
        self.app = app
        self.check = check
        self.public = frozenset(public)
        self.prefixes = tuple(public_prefixes)

    def _public(self, path: str) -> bool:
        return path in self.public or any(path == p or path.startswith(p + "/")
                                          for p in self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._public(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        token = None
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, credentials = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    token = credentials.strip() or None
                break  # the first Authorization header is the one read
        try:
            # In a worker thread: an authenticator may read a database or verify a slow hash
            # (the coordinator's argon2), which must not stall every other request.
            caller = await asyncio.to_thread(self.check, token, scope.get("path", ""))
        except AuthenticationError as exc:
            # The fingerprint names the token (repeated attempts, a leaked token) without it.
            log.warning("authentication failed (%s) on %s: %s", exc.error, scope.get("path", ""),
                        f"token {fingerprint(token)}" if token else "no bearer token")
            await send_error(send, exc)
            return
        scope.setdefault("state", {})["caller"] = caller
        analyst_id = getattr(caller, "analyst_id", None)
        if analyst_id is None:
            await self.app(scope, receive, send)
            return
        # The token names the analyst (the coordinator's accounts): every log line of the
        # request says so.
        with context.bound(analyst_id=analyst_id):
            await self.app(scope, receive, send)


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int,
                 body_timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > self.max_body_bytes
            except ValueError:
                await send_error(send, BadRequest("invalid Content-Length header"))
                return
            if too_large:
                await self._refuse_too_large(send)
                return

        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # client went away
                        return
                    body = message.get("body", b"")
                    size += len(body)
                    if size > self.max_body_bytes:
                        await self._refuse_too_large(send)
                        return
                    chunks.append(body)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await send_error(send, RequestTimeout(
                f"the request body did not arrive within {self.body_timeout_s:g} s"))
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse_too_large(self, send: Send) -> None:
        await send_error(send, RequestTooLarge(
            f"request body exceeds the limit of {self.max_body_bytes} bytes"))


async def send_error(send: Send, error: ServiceError) -> None:
    """Answer with ``error`` before any route ran, closing the connection (the rest of the
    request is not read)."""
    encoded = json.dumps(error.body()).encode()
    await send({
        "type": "http.response.start",
        "status": error.status_code,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(encoded)).encode()),
            *((name.lower().encode("latin-1"), value.encode("latin-1"))
              for name, value in (error.headers or {}).items()),
            (b"connection", b"close"),
        ],
    })
    await send({"type": "http.response.body", "body": encoded})
