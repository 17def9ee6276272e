"""Serving an app with uvicorn, with the connection choices both services need.

* Keep-alive: an idle connection is closed by the server after KEEP_ALIVE_S; clients (the
  coordinator's httpx pool) drop theirs after CLIENT_KEEPALIVE_S, first (see below).
* Request heads: a connection must deliver a request's head within ``header_timeout_s`` of
  opening (or of sending the first byte of its next request); otherwise it is closed
  (:class:`HeadTimeoutProtocol`). uvicorn alone waits forever, so a few hundred connections that
  send nothing, or a byte at a time, hold a service's every slot.
* Bodies: ``fedstats_service.middleware.BodySizeLimit`` reads a body within ``body_timeout_s``.
* Concurrency: at most ``max_concurrency`` connections and requests at once; beyond them uvicorn
  answers 503 at once instead of queueing without bound.
* TLS (:func:`tls_options`): HTTPS with a certificate and its key, TLS 1.2 at least; mutual TLS
  with a client CA: a client without a certificate that CA signed cannot connect (the handshake
  fails; ``docs/coordinator.md``, "TLS").
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from fedstats_service.timeouts import BODY_TIMEOUT_S as BODY_TIMEOUT_S
from fedstats_service.timeouts import HEADER_TIMEOUT_S as HEADER_TIMEOUT_S

# An idle keep-alive connection is closed by the server after KEEP_ALIVE_S. Clients (the
# coordinator's httpx pool, keepalive_expiry = CLIENT_KEEPALIVE_S) must drop idle connections
# first: with equal timeouts (uvicorn's and httpx's defaults are both 5 s) a client can send a
# request on a connection the server is just closing, and the request is lost (ReadError).
KEEP_ALIVE_S = 15
CLIENT_KEEPALIVE_S = 5.0
MAX_CONCURRENCY = 128


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head does not arrive in time.

    The clock starts when the connection opens, and again when the first bytes of a further
    request arrive on a kept-alive connection; it stops when h11 has the whole head.
    """

    header_timeout_s: float = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._head_timer is None:
                self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def protocol(header_timeout_s: float) -> type[HeadTimeoutProtocol]:
    """:class:`HeadTimeoutProtocol` with its timeout set."""
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,),
                {"header_timeout_s": header_timeout_s})


def tls_options(
    certfile: Path | None, keyfile: Path | None, client_ca: Path | None = None
) -> dict[str, Any]:
    """uvicorn's TLS arguments: none without ``certfile``; with it, HTTPS on ``certfile`` and
    ``keyfile``, and with ``client_ca`` a client certificate signed by it required.

    The context uvicorn builds from them (``ssl.SSLContext(PROTOCOL_TLS_SERVER)``) speaks TLS
    1.2 at least: Python's default since 3.10, checked by the tests (``tests/cli``).
    """
    if certfile is None:
        if keyfile is not None or client_ca is not None:
            raise ValueError("a TLS key or client CA needs a certificate (certfile)")
        return {}
    options: dict[str, Any] = {
        "ssl_certfile": str(certfile),
        "ssl_keyfile": str(keyfile) if keyfile else None,
        "ssl_version": ssl.PROTOCOL_TLS_SERVER,
    }
    if client_ca is not None:
        options |= {"ssl_ca_certs": str(client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


def serve(
    app: FastAPI,
    *,
    host: str,
    port: int,
    certfile: Path | None = None,
    keyfile: Path | None = None,
    client_ca: Path | None = None,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    max_concurrency: int = MAX_CONCURRENCY,
) -> None:
    """Run ``app`` until interrupted (TLS when ``certfile`` and ``keyfile`` are given; mutual
    TLS when ``client_ca`` is too: :func:`tls_options`)."""
    uvicorn.run(
        app,
        host=host,
        port=port,
        http=protocol(header_timeout_s),
        **tls_options(certfile, keyfile, client_ca),
        timeout_keep_alive=KEEP_ALIVE_S,
        limit_concurrency=max_concurrency,
        server_header=False,
        log_level="info",
        log_config=None,  # keep fedstats_service.logging's handler and format (one per process)
    )
