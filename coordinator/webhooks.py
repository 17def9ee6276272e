"""Completion webhooks: a signed notice POSTed when a study ends, to a URL its spec names.

Off unless the operator sets ``webhook_allowed_prefixes`` and ``webhook_secret``
(``coordinator.core.config``). A spec's ``webhook_url`` must lie below one of the prefixes,
parsed and normalized rather than compared as a string (``coordinator.core.urls``: scheme, host
and port exactly, the path segment by segment; user information, dot segments and encoded dots
or slashes refused), checked at submission (422 ``invalid_study`` naming ``body.webhook_url``),
so an analyst cannot make the coordinator call into the hospitals' or its own network: the
coordinator calls only the receivers its operator chose, at the normalized URL it checked.
Redirects are not followed (a receiver cannot send it elsewhere).

The notice (docs/coordinator.md, "Completion webhook")::

    POST <webhook_url>
    Content-Type: application/json
    X-Fedstats-Timestamp: 1767225600
    X-Fedstats-Delivery: 5f0c...            (the same on every retry of one notice)
    X-Fedstats-Signature: sha256=<hex HMAC-SHA256 of the body under webhook_secret>

    {"event": "study.finished", "delivery": "5f0c...", "study_id": "...", "status": "succeeded",
     "timestamp": 1767225600, "links": {"study": "/v1/studies/<id>"}}

The signature covers the exact body bytes, the timestamp and delivery id included: a receiver
checks it (in constant time), refuses a timestamp older than a few minutes and a delivery id it
has seen (replays). The notice holds no result, number or token; the receiver reads the study
with an analyst token (``links`` are relative to the coordinator's base URL).

It is sent when a study reaches a final status (``succeeded``, ``partially_failed``, ``failed``,
``cancelled``; not ``failed_resumable``, which a stopping coordinator leaves), in the background:
the study never waits for it. A delivery that fails (no connection, a timeout, 429 or 5xx) is
tried again, ``webhook_attempts`` in all, waiting ``webhook_backoff_s`` and doubling; another
answer (3xx, 4xx) is final. Failures are logged with the receiver's origin only: a URL's path
may hold a secret of the receiver's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from urllib.parse import quote, urlsplit

import httpx

from coordinator.core.config import Settings
from coordinator.core.errors import InvalidStudy
from coordinator.core.urls import WebhookURL, allowed_url, check_prefix
from fedstats_service import tls

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Fedstats-Signature"
TIMESTAMP_HEADER = "X-Fedstats-Timestamp"
DELIVERY_HEADER = "X-Fedstats-Delivery"
EVENT = "study.finished"
NOTIFIED = frozenset({"succeeded", "partially_failed", "failed", "cancelled"})
# How long a stopping coordinator lets deliveries under way finish.
CLOSE_GRACE_S = 5.0


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Fedstats-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, signature: str) -> bool:
    """Whether ``signature`` is ``body``'s (constant time): what a receiver checks."""
    return hmac.compare_digest(sign(secret, body), signature)


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url``: what the log may show of it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def notice(study_id: str, status: str, *, now: float | None = None) -> bytes:
    """The body of a study's notice (a new delivery id)."""
    return json.dumps({
        "event": EVENT,
        "delivery": uuid.uuid4().hex,
        "study_id": study_id,
        "status": status,
        "timestamp": int(time.time() if now is None else now),
        "links": {"study": f"/v1/studies/{quote(study_id, safe='')}"},
    }, separators=(",", ":")).encode()


class Notifier:
    """Checks webhook URLs at submission and delivers the notices of one coordinator process."""

    def __init__(
        self,
        prefixes: list[str],
        secret: bytes | None,
        *,
        attempts: int = 5,
        backoff_s: float = 1.0,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.prefixes = list(prefixes)
        self._receivers: list[WebhookURL] = [check_prefix(p) for p in prefixes]
        self.secret = secret
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[bool]] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> Notifier:
        secret = settings.webhook_secret
        return cls(settings.webhook_allowed_prefixes,
                   secret.get_secret_value().encode() if secret is not None else None,
                   attempts=settings.webhook_attempts, backoff_s=settings.webhook_backoff_s,
                   timeout_s=settings.webhook_timeout_s)

    @property
    def enabled(self) -> bool:
        return bool(self.prefixes) and self.secret is not None

    def check(self, url: str | None) -> None:
        """Refuse (422) a ``webhook_url`` this coordinator may not call."""
        if url is None:
            return
        if not self.enabled:
            raise InvalidStudy("this coordinator sends no webhooks (its operator sets "
                               "webhook_allowed_prefixes); leave webhook_url out",
                               extra={"fields": ["body.webhook_url"]})
        try:
            allowed_url(url, self._receivers)
        except ValueError as exc:
            raise InvalidStudy(f"webhook_url {exc}",
                               extra={"fields": ["body.webhook_url"]}) from None

    def notify(self, study_id: str, status: str, url: str | None) -> None:
        """Send the notice of a study that reached ``status`` in the background (nothing
        when it has no ``url``, webhooks are off, or the status is not final)."""
        if url is None or status not in NOTIFIED or not self.enabled:
            return
        try:
            # The normalized URL is the one called: what was checked is what is sent.
            target = allowed_url(url, self._receivers)
        except ValueError:
            # Allowed at submission, but the operator has changed the prefixes since.
            log.warning("study %s: webhook to %s not sent: no longer in "
                        "webhook_allowed_prefixes", study_id, origin(url))
            return
        task = asyncio.create_task(self.deliver(target, notice(study_id, status)),
                                   name=f"webhook-{study_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout_s, follow_redirects=False, trust_env=False,
                verify=tls.client_context(), transport=self._transport,
                headers={"User-Agent": "fedstats-coordinator"})
        return self._client

    async def deliver(self, url: str, body: bytes) -> bool:
        """POST ``body`` signed, tried again after a failure that may pass; True once the
        receiver answered 2xx."""
        assert self.secret is not None
        sent = json.loads(body)
        headers = {"Content-Type": "application/json",
                   SIGNATURE_HEADER: sign(self.secret, body),
                   TIMESTAMP_HEADER: str(sent["timestamp"]),
                   DELIVERY_HEADER: sent["delivery"]}
        where = origin(url)
        for attempt in range(1, self.attempts + 1):
            try:
                answer = await self._http().post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                said = tls.describe_failure(exc) or type(exc).__name__
                retry = True
            else:
                if answer.is_success:
                    log.info("study %s: webhook delivered to %s", sent["study_id"], where)
                    return True
                said = f"answered {answer.status_code}"
                retry = answer.status_code == 429 or answer.status_code >= 500
            if not retry or attempt == self.attempts:
                log.warning("study %s: webhook to %s failed (%s) after %d attempt(s); not "
                            "sent", sent["study_id"], where, said, attempt)
                return False
            log.info("study %s: webhook to %s failed (%s), attempt %d of %d",
                     sent["study_id"], where, said, attempt, self.attempts)
            await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        return False

    async def wait(self) -> None:
        """Until every delivery under way has ended (tests)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        """Let deliveries under way finish for a moment, stop the rest, close the client."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=CLOSE_GRACE_S)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("%d webhook notice(s) not sent: the coordinator is stopping",
                            len(pending))
                await asyncio.gather(*pending, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
