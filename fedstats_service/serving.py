"""Serving an app with uvicorn, with the connection choices both services need."""

from __future__ import annotations

from pathlib import Path

import uvicorn
from fastapi import FastAPI

# An idle keep-alive connection is closed by the server after KEEP_ALIVE_S. Clients (the
# coordinator's httpx pool, keepalive_expiry = CLIENT_KEEPALIVE_S) must drop idle connections
# first: with equal timeouts (uvicorn's and httpx's defaults are both 5 s) a client can send a
# request on a connection the server is just closing, and the request is lost (ReadError).
KEEP_ALIVE_S = 15
CLIENT_KEEPALIVE_S = 5.0


def serve(
    app: FastAPI,
    *,
    host: str,
    port: int,
    certfile: Path | None = None,
    keyfile: Path | None = None,
) -> None:
    """Run ``app`` until interrupted (TLS when ``certfile`` and ``keyfile`` are given)."""
    uvicorn.run(
        app,
        host=host,
        port=port,
        ssl_certfile=str(certfile) if certfile else None,
        ssl_keyfile=str(keyfile) if keyfile else None,
        timeout_keep_alive=KEEP_ALIVE_S,
        server_header=False,
        log_level="info",
    )
