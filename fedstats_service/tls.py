"""TLS on the client side: the coordinator calling centers, the ``fedstats`` command calling a
coordinator. Which certificates a client trusts, the certificate it presents (mutual TLS), and
why a TLS connection failed, in words (``docs/coordinator.md``, "TLS").

Trust, in this order: a CA bundle the caller names (a center's ``ca_bundle``, the CLI's
``--ca-bundle``), and only it; else ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when either is set
(OpenSSL's own variables, honoured here although httpx runs with ``trust_env=False``); else the
system's trust store, or, on a system without one, the Mozilla bundle httpx ships (``certifi``).
TLS 1.2 is the oldest version spoken.

A server that requires a client certificate (mutual TLS) and gets none, or one no CA it trusts
signed, refuses it in the handshake, but Python's asyncio servers (uvicorn) close the connection
without sending the TLS alert that says so: the client sees only a connection closed without an
answer, the same as a server that crashed. :class:`DiagnosingTransport` tells the two apart by
opening one more TLS connection (:func:`probe`) when a call over HTTPS fails that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import certifi
import httpx

MIN_VERSION = ssl.TLSVersion.TLSv1_2
#: OpenSSL's variables naming a CA file and a CA directory (``ssl.get_default_verify_paths``).
TRUST_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR")
#: How long :func:`probe` waits for a server to close a connection it refused. A server that
#: accepted the handshake waits for a request far longer (uvicorn: ``header_timeout_s``).
PROBE_READ_S = 1.0

NO_CLIENT_CERT = ("TLS handshake failed: the server requires a client certificate (mutual TLS) "
                  "and none was presented")
CLIENT_CERT_REFUSED = ("TLS handshake failed: the server did not accept the client certificate "
                       "presented (certificate required: not signed by a CA it trusts, expired, "
                       "or not for client use)")


class TrustError(ValueError):
    """A CA bundle or client certificate that cannot serve; the message names the file."""


def client_context(
    ca_bundle: Path | None = None, client_cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    """A client's context: verifies the server's certificate and host name against the trust
    above, and presents ``client_cert`` (certificate, key: PEM files) when given.

    Raises :class:`TrustError` for a file that cannot be read or is not PEM (or a key that does
    not match its certificate).
    """
    if ca_bundle is not None:
        try:
            context = ssl.create_default_context(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise TrustError(f"{ca_bundle}: not a readable PEM file of CA certificates "
                             f"({_reason(exc)})") from None
    else:
        context = ssl.create_default_context()  # OpenSSL's default paths, TRUST_ENV included
        paths = ssl.get_default_verify_paths()
        if not trust_from_env() and paths.cafile is None and paths.capath is None:
            # No system store (e.g. a python.org build on macOS): httpx's own default.
            context.load_verify_locations(cafile=certifi.where())
    context.minimum_version = MIN_VERSION
    if client_cert is not None:
        certfile, keyfile = client_cert
        try:
            context.load_cert_chain(str(certfile), str(keyfile))
        except (OSError, ssl.SSLError) as exc:
            raise TrustError(f"{certfile}, {keyfile}: not a readable PEM certificate and its "
                             f"private key ({_reason(exc)})") from None
    return context


def _reason(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc).replace("_", " ").lower()
    return exc.strerror or type(exc).__name__


def trust_from_env() -> dict[str, str]:
    """The trust variables set in the environment (name -> value)."""
    return {name: os.environ[name] for name in TRUST_ENV if os.environ.get(name)}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def describe_failure(exc: BaseException) -> str | None:
    """The TLS library's reason when ``exc`` (or what caused it) is a TLS error, in words:
    ``TLS handshake failed: certificate verify failed (self-signed certificate in certificate
    chain)``; ``None`` for any other error."""
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return ("TLS handshake failed: certificate verify failed "
                    f"({cause.verify_message or cause.reason})")
        if isinstance(cause, ssl.SSLError):
            reason = (cause.reason or type(cause).__name__).replace("_", " ").lower()
            return f"TLS handshake failed: {reason}"
    return None


async def probe(
    url: httpx.URL, context: ssl.SSLContext, *, client_cert: bool, timeout_s: float
) -> str | None:
    """Why the server at ``url`` refuses TLS connections made with ``context`` (which presents
    a client certificate or not, as ``client_cert`` says), or ``None`` when it accepts them or
    cannot be reached at all (nothing to say about TLS then).

    A refused client certificate shows as the connection reset in the handshake (TLS 1.2) or
    closed right after it, before any request (TLS 1.3).
    """
    refused = CLIENT_CERT_REFUSED if client_cert else NO_CLIENT_CERT
    host, port = url.host, url.port or 443
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context, server_hostname=host), timeout_s)
    except ssl.SSLError as exc:
        return describe_failure(exc)
    except ConnectionResetError:
        return refused
    except (OSError, TimeoutError):
        return None
    try:
        first = await asyncio.wait_for(reader.read(1), PROBE_READ_S)
    except TimeoutError:
        return None  # the server waits for a request: it accepted us
    except ssl.SSLError as exc:  # a server that does send the alert (certificate required)
        return describe_failure(exc)
    except OSError:
        return refused
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    return refused if first == b"" else None


class DiagnosingTransport(httpx.AsyncBaseTransport):
    """httpx's transport over ``context``; a call over HTTPS that fails in the TLS handshake,
    or on a connection the server closed without answering, raises ``httpx.ConnectError`` whose
    text says why when TLS is the reason (:func:`describe_failure`, :func:`probe`): the request
    never reached the server. Other errors pass unchanged."""

    def __init__(self, context: ssl.SSLContext, *, client_cert: bool, probe_timeout_s: float,
                 limits: httpx.Limits) -> None:
        self._inner = httpx.AsyncHTTPTransport(verify=context, limits=limits)
        self._context = context
        self._client_cert = client_cert
        self._probe_timeout_s = probe_timeout_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._inner.handle_async_request(request)
        except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError) as exc:
            said = describe_failure(exc)
            if said is None and request.url.scheme == "https":
                said = await probe(request.url, self._context, client_cert=self._client_cert,
                                   timeout_s=self._probe_timeout_s)
            if said is None:
                raise
            raise httpx.ConnectError(said, request=request) from exc

    async def aclose(self) -> None:
        await self._inner.aclose()
