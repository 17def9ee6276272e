"""The one HTTP client of the coordinator: :class:`HttpCenter`, a ``CenterPort`` over httpx.

Per center, one ``httpx.AsyncClient`` with the center's base URL, the bearer token the center gave
us, explicit timeouts, the center's CA bundle when configured (else the system's trust store, or
``SSL_CERT_FILE``) and the coordinator's client certificate for centers that require one (mutual
TLS; ``fedstats_service.tls``). Example::

    center = HttpCenter("hospital_a", settings.centers["hospital_a"],
                        timeout=httpx.Timeout(120, connect=5), retry=settings.retry)
    info = await center.info()                      # CenterInfo, validated
    release = await center.release(kinds.TABLE, "cohort", TableRequest(variable="age", k=10))
    await center.aclose()

Retries, with exponential backoff (:class:`coordinator.core.config.RetryPolicy`):

* GETs (health, info, budget) are retried on any transport error, timeout and 502/503/504;
* POSTs (releases) are retried when the connection could not be made (the request was never
  sent) or dropped before any answer (e.g. a keep-alive connection the center closed as it was
  reused). Centers store every release under its request key, so a repeat of a request the center
  did answer returns that answer and spends nothing again. A POST that timed out is not retried:
  a coordinator that repeats a slow release piles work on a struggling center.

Every answer is validated into its wire model; anything else raises
:class:`coordinator.core.errors.CenterFailure` with the center's id and one kind: ``unreachable``,
``timeout``, ``refused`` (a privacy ``ErrorBody`` with 403/409), ``throttled`` (429: the
center's compute allowance for our token; resumable), ``error`` (any other error status) or
``malformed`` (including an answer longer than ``max_response_bytes``, which is never
read past that limit). The token travels only in the ``Authorization`` header; no message,
log line or provenance record holds it. Proxies from the environment are ignored
(``trust_env=False``): a center is reached exactly as configured.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from coordinator.batching import Call, ReleaseBatcher
from coordinator.core.config import CenterConfig, RetryPolicy, Settings
from coordinator.core.errors import CenterFailure, FailureKind
from fedstats_service import context, tls
from fedstats_service.errors import dotted
from fedstats_service.serving import CLIENT_KEEPALIVE_S
from shared.kinds import BATCH_PATH, Kind, Rel, Req
from shared.protocol import (
    BatchItem,
    BatchRelease,
    BatchRequest,
    Budget,
    CenterInfo,
    ErrorBody,
    Health,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: Error statuses a center answers when it refuses for privacy (``PrivacyRefusal``).
REFUSAL_STATUSES = frozenset({403, 409})
#: The status of a center that refuses more work from our token for now (its compute allowance).
THROTTLED_STATUS = 429
#: Statuses worth another try of an idempotent call (a proxy or a restarting center).
RETRY_STATUSES = frozenset({502, 503, 504})
#: The codes of a center without the batch route (404 for the path, 405 for the method).
NO_ROUTE = frozenset({"not_found", "method_not_allowed"})
#: How long the TLS diagnosis may take to connect when the client has no connect timeout.
DEFAULT_CONNECT_S = 5.0


def _validation_summary(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    where = dotted(first["loc"]) or "(body)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


class HttpCenter:
    """A :class:`coordinator.ports.CenterPort` over HTTP."""

    def __init__(
        self,
        center_id: str,
        config: CenterConfig,
        *,
        timeout: httpx.Timeout,
        retry: RetryPolicy,
        max_response_bytes: int = 50_000_000,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        client_cert: tuple[Path, Path] | None = None,
        batching: bool = True,
    ) -> None:
        self._id = center_id
        # Concurrent releases of a study go to the center in batches (coordinator.batching);
        # off after a center answered that it has no batch route (an older center).
        self.batching = batching
        self._batcher = ReleaseBatcher(self._release_one, self._release_many)
        self.base_url = config.base_url
        self.retry = retry
        self.max_response_bytes = max_response_bytes
        self._sleep = sleep
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20,
                              keepalive_expiry=CLIENT_KEEPALIVE_S)  # httpx's, but the expiry
        # The center's CA bundle (else the system's trust or SSL_CERT_FILE), and our client
        # certificate for a center that requires one (mutual TLS). A handshake the center
        # refuses is reported as such, not as a bare closed connection (DiagnosingTransport).
        verify = tls.client_context(config.ca_bundle, client_cert)
        if transport is None:
            transport = tls.DiagnosingTransport(
                verify, client_cert=client_cert is not None, limits=limits,
                probe_timeout_s=timeout.connect or DEFAULT_CONNECT_S)
        self._client = httpx.AsyncClient(
            base_url=f"{config.base_url}/v1",
            headers={"Authorization": f"Bearer {config.token.get_secret_value()}"},
            timeout=timeout,
            verify=verify,
            transport=transport,
            limits=limits,
            follow_redirects=False,
            trust_env=False,
        )

    @property
    def center_id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"HttpCenter({self._id!r}, {self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- the port ---------------------------------------------------------------------------

    async def health(self) -> Health:
        return await self._call("GET", "/health", Health)

    async def info(self) -> CenterInfo:
        return await self._call("GET", "/info", CenterInfo)

    async def budget(self) -> Budget:
        return await self._call("GET", "/budget", Budget)

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        if not self.batching:
            return await self._release_one(kind, dataset, request)
        answer = await self._batcher.release(kind, dataset, request)
        assert isinstance(answer, kind.release)
        return answer

    async def _release_one(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        return await self._call("POST", kind.url(dataset), kind.release, request)

    async def _release_many(self, dataset: str, calls: list[Call]) -> None:
        """Answers ``calls`` (each set on its future) from one batch request."""
        body = BatchRequest(items=[BatchItem(kind=call.kind.name, request=call.request.to_payload())
                                   for call in calls])
        try:
            batch = await self._call("POST", BATCH_PATH.format(dataset=dataset), BatchRelease,
                                     body, limit=self.max_response_bytes * len(calls))
        except CenterFailure as failure:
            if not (failure.kind == "error" and failure.center_error in NO_ROUTE):
                raise
            log.info("center %s has no batch route; its releases go one by one", self._id)
            self.batching = False
            results = await asyncio.gather(
                *(self._release_one(call.kind, dataset, call.request) for call in calls),
                return_exceptions=True)
            for call, result in zip(calls, results, strict=True):
                if isinstance(result, BaseException):
                    call.answer.set_exception(result)
                else:
                    call.answer.set_result(result)
            return
        if len(batch.answers) != len(calls):
            raise self._failure("malformed", f"POST /v1{BATCH_PATH.format(dataset=dataset)}: "
                                f"{len(batch.answers)} answers to {len(calls)} releases")
        for call, item in zip(calls, batch.answers, strict=True):
            what = f"POST /v1{call.kind.url(dataset)}"
            # BatchAnswer holds exactly one of them: the body its own call would have had.
            payload = item.release if item.error is None else item.error.model_dump()
            try:
                call.answer.set_result(
                    self._parse(what, item.status, json.dumps(payload).encode(), call.kind.release))
            except CenterFailure as failure:
                log.warning("center call failed: %s", failure.detail)
                call.answer.set_exception(failure)

    # -- transport ----------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, model: type[M], body: BaseModel | None = None,
        *, limit: int | None = None,
    ) -> M:
        """The validated answer; a failure that ends the call (after its retries) is logged
        here, once, at WARNING (a retry is logged at INFO as it is decided). ``limit`` is the
        longest answer read (``max_response_bytes`` unless given)."""
        try:
            return await self._attempts(method, path, model, body,
                                        limit or self.max_response_bytes)
        except CenterFailure as failure:
            log.warning("center call failed: %s", failure.detail)
            raise

    async def _attempts(
        self, method: str, path: str, model: type[M], body: BaseModel | None, limit: int
    ) -> M:
        idempotent = method == "GET"
        what = f"{method} /v1{path}"
        content = body.model_dump_json().encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        attempts = self.retry.attempts
        for attempt in range(1, attempts + 1):
            retryable = idempotent
            try:
                status, payload = await self._send(method, path, content, headers, limit)
            except _TooLarge:
                raise self._failure(
                    "malformed", f"{what}: the answer exceeds {limit} bytes"
                ) from None
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                # The request never left: safe to repeat, even a POST.
                failure = self._failure("unreachable", f"{what}: cannot connect ({_why(exc)})")
                retryable = True
            except httpx.TimeoutException:
                failure = self._failure("timeout", f"{what}: no answer within the timeout")
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # Dropped before an answer: a repeat is answered from the center's release store.
                failure = self._failure("unreachable", f"{what}: connection failed ({_why(exc)})")
                retryable = True
            except httpx.TransportError as exc:
                failure = self._failure("unreachable", f"{what}: connection failed ({_why(exc)})")
            else:
                if not (idempotent and status in RETRY_STATUSES and attempt < attempts):
                    return self._parse(what, status, payload, model)
                failure = self._failure("error", f"{what}: HTTP {status}")
            if not retryable or attempt == attempts:
                raise failure
            delay = self.retry.delay(attempt)
            log.info("center %s: %s; retry %d/%d in %.2fs", self._id, failure.reason,
                     attempt, attempts - 1, delay)
            await self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _send(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str] | None,
        limit: int,
    ) -> tuple[int, bytes]:
        """Status and body, never reading more than ``limit`` bytes of it. The request
        carries the call context's ids (``fedstats_service.context``: request, study, analyst),
        so that the center's log lines and audit records name what it served."""
        headers = {**context.current().headers(), **(headers or {})}
        async with self._client.stream(method, path, content=content, headers=headers) as answer:
            declared = answer.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise _TooLarge
            chunks, size = [], 0
            async for chunk in answer.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise _TooLarge
                chunks.append(chunk)
            return answer.status_code, b"".join(chunks)

    def _failure(
        self, kind: FailureKind, detail: str, center_error: str | None = None
    ) -> CenterFailure:
        return CenterFailure(self._id, kind, detail, center_error=center_error)

    def _parse(self, what: str, status: int, payload: bytes, model: type[M]) -> M:
        if 200 <= status < 300:
            try:
                return model.model_validate_json(payload)
            except ValidationError as exc:
                raise self._failure(
                    "malformed",
                    f"{what}: the answer is not a valid {model.__name__} "
                    f"({_validation_summary(exc)})",
                ) from None
        try:
            error: ErrorBody | None = ErrorBody.model_validate_json(payload)
        except ValidationError:
            error = None
        code = error.error if error is not None else None
        said = f": {error.detail}" if error is not None else ""
        if status in REFUSAL_STATUSES and error is not None:
            raise self._failure("refused", f"{what}: refused ({code}){said}", code)
        if status == THROTTLED_STATUS:
            # The center's work allowance for our token: the study can resume after it.
            raise self._failure("throttled", f"{what}: the center asks to wait ({code}){said}",
                                code)
        if status == 401:
            raise self._failure(
                "error", f"{what}: the center does not accept the coordinator's token", code
            )
        relayed = f" ({code}){said}" if code is not None else ""
        raise self._failure("error", f"{what}: HTTP {status}{relayed}", code)


class _TooLarge(Exception):
    """The center's answer is longer than the client accepts."""


def _why(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def build_centers(
    settings: Settings,
    *,
    transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
) -> dict[str, HttpCenter]:
    """One :class:`HttpCenter` per registered center (``transports`` is a test seam)."""
    timeout = httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s)
    transports = transports or {}
    return {
        center_id: HttpCenter(
            center_id, config, timeout=timeout, retry=settings.retry,
            max_response_bytes=settings.max_response_bytes, transport=transports.get(center_id),
            client_cert=settings.client_cert, batching=settings.batch_releases,
        )
        for center_id, config in settings.centers.items()
    }
