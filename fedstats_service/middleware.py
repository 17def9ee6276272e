"""Request size limit: a body longer than ``max_body_bytes`` is answered 413 before any route runs.

Pure ASGI: a declared ``Content-Length`` over the limit is refused without reading; otherwise the
body is read (never more than the limit plus one chunk) and replayed to the application.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > self.max_body_bytes
            except ValueError:
                await self._refuse(send, 400, "bad_request", "invalid Content-Length header")
                return
            if too_large:
                await self._refuse_too_large(send)
                return

        chunks: list[bytes] = []
        size = 0
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

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse_too_large(self, send: Send) -> None:
        await self._refuse(
            send, 413, "request_too_large",
            f"request body exceeds the limit of {self.max_body_bytes} bytes",
        )

    @staticmethod
    async def _refuse(send: Send, status: int, error: str, detail: str) -> None:
        body = json.dumps({"error": error, "detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
