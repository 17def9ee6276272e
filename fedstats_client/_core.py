"""What the sync and async clients share: settings from the arguments or the environment, the
TLS context, the routes, and reading an answer (a model, or the exception of its error body).

Neither client sends anything here; each does its own I/O with httpx.
"""

from __future__ import annotations

import io
import json
import os
import ssl
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from coordinator import models
from fedstats_client.errors import (
    ConfigurationError,
    ConnectionFailed,
    FedstatsError,
    StudyFailed,
    from_answer,
)
from fedstats_client.progress import Progress
from fedstats_client.results import StudyRecord

M = TypeVar("M", bound=BaseModel)

TOKEN_ENV = "FEDSTATS_ANALYST_TOKEN"
URL_ENV = "FEDSTATS_COORDINATOR_URL"
#: Statuses a study does not leave by itself (``cancelled`` once the coordinator has it).
FINAL = frozenset({"succeeded", "partially_failed", "failed", "failed_resumable", "cancelled"})
#: Final statuses without a result to read: waiting on one raises StudyFailed.
UNFINISHED = frozenset({"failed", "failed_resumable", "cancelled"})
USER_AGENT = "fedstats-client/0.1"


class ModelList(list[M]):
    """The coordinator's answer as a list of models, and as a pandas frame."""

    def to_frame(self) -> Any:
        import pandas

        return pandas.DataFrame([m.model_dump(mode="json") for m in self])


@dataclass(frozen=True)
class Settings:
    """Where the coordinator is and how to call it (the token is only ever in ``headers``)."""

    base_url: str
    headers: dict[str, str]
    verify: ssl.SSLContext
    timeout: float

    def __repr__(self) -> str:  # never the token
        return f"Settings(base_url={self.base_url!r})"


def settings(
    base_url: str | None,
    token: str | None,
    ca_bundle: str | Path | None,
    timeout: float,
    cert: tuple[str | Path, str | Path] | None = None,
) -> Settings:
    """Settings from the arguments, else ``FEDSTATS_COORDINATOR_URL``, ``FEDSTATS_ANALYST_TOKEN``
    and ``SSL_CERT_FILE``/``SSL_CERT_DIR`` (which OpenSSL reads: httpx alone, with
    ``trust_env=False``, would not)."""
    base_url = base_url or os.environ.get(URL_ENV)
    if not base_url:
        raise ConfigurationError(f"no coordinator URL: pass base_url or set {URL_ENV}",
                                 code="no_url")
    if not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must start with http:// or https://, not "
                                 f"{base_url[:40]!r}", code="bad_url")
    token = token or os.environ.get(TOKEN_ENV)
    if not token:
        raise ConfigurationError(f"no analyst token: pass token or set {TOKEN_ENV}",
                                 code="no_token")
    return Settings(base_url=base_url.rstrip("/"),
                    headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT},
                    verify=tls_context(ca_bundle, cert), timeout=timeout)


def tls_context(ca_bundle: str | Path | None,
                cert: tuple[str | Path, str | Path] | None = None) -> ssl.SSLContext:
    """Trust ``ca_bundle`` only when given, else OpenSSL's defaults (``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` when set, else the system's store); present ``cert`` (certificate, key)
    when given. TLS 1.2 at least (docs/coordinator.md, "TLS")."""
    try:
        context = ssl.create_default_context(
            cafile=str(ca_bundle) if ca_bundle is not None else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"ca_bundle {ca_bundle}: not a readable PEM file of CA "
                                 f"certificates ({exc})", code="bad_ca_bundle") from None
    if ca_bundle is None and not any(os.environ.get(v) for v in ("SSL_CERT_FILE",
                                                                  "SSL_CERT_DIR")):
        paths = ssl.get_default_verify_paths()
        if paths.cafile is None and paths.capath is None:  # no system store: httpx's bundle
            import certifi

            context.load_verify_locations(cafile=certifi.where())
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        try:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"cert {cert[0]}, {cert[1]}: not a readable PEM "
                                     f"certificate and key ({exc})", code="bad_cert") from None
    return context


def study_path(study_id: str, *rest: str) -> str:
    return "/".join([f"/v1/studies/{quote(study_id, safe='')}",
                     *(quote(part, safe='') for part in rest)])


def connection_failed(exc: httpx.TransportError, base_url: str) -> ConnectionFailed:
    """Why the coordinator could not be reached, with the fix for an untrusted certificate."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return ConnectionFailed(
                f"{base_url}: TLS certificate verify failed ({cause.verify_message}); pass "
                "the CA that signed the coordinator's certificate as ca_bundle (or set "
                "SSL_CERT_FILE)", code="tls")
        if isinstance(cause, ssl.SSLError):
            return ConnectionFailed(f"{base_url}: TLS handshake failed ({cause.reason})",
                                    code="tls")
        cause = cause.__cause__ or cause.__context__
    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "unreachable"
    hint = (f" (is the coordinator running and listening at {base_url}? `fedstats health "
            f"{base_url}` checks; set the URL with base_url or {URL_ENV})"
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) else "")
    return ConnectionFailed(f"cannot reach the coordinator at {base_url}: "
                            f"{type(exc).__name__}: {exc}{hint}", code=kind)


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return None


def check(answer: httpx.Response, expected: Iterable[int] = (200,)) -> httpx.Response:
    """``answer`` when its status is expected, else the exception of its error body."""
    if answer.status_code not in set(expected):
        raise from_answer(answer.status_code, _json(answer), answer.text)
    return answer


def model(answer: httpx.Response, kind: type[M]) -> M:
    try:
        return kind.model_validate_json(answer.content)
    except ValidationError as exc:
        raise FedstatsError(f"the coordinator's answer is not a {kind.__name__}: "
                            f"{exc.error_count()} problem(s), first "
                            f"{exc.errors(include_input=False)[0]['msg']}",
                            code="malformed_answer", status=answer.status_code) from None


def models_of(answer: httpx.Response, kind: type[M]) -> ModelList[M]:
    body = _json(answer)
    if not isinstance(body, list):
        raise FedstatsError(f"the coordinator's answer is not a list of {kind.__name__}",
                            code="malformed_answer", status=answer.status_code)
    try:
        return ModelList(kind.model_validate(item) for item in body)
    except ValidationError as exc:
        raise FedstatsError(f"the coordinator's answer is not a list of {kind.__name__}: "
                            f"{exc.errors(include_input=False)[0]['msg']}",
                            code="malformed_answer", status=answer.status_code) from None


def record(answer: httpx.Response) -> StudyRecord:
    return StudyRecord(model(answer, models.StudyView))


def finished(study: StudyRecord, raise_on_failure: bool) -> StudyRecord:
    """``study``, or :class:`StudyFailed` when it ended without a result and that is asked."""
    if raise_on_failure and study.status in UNFINISHED:
        body = study.error or {"error": study.status, "detail": f"the study is {study.status}"}
        raise StudyFailed(study, body)
    return study


class Waiting:
    """One wait's clock and progress lines (the polling itself is the client's)."""

    def __init__(self, study_id: str, progress: Progress, timeout: float | None) -> None:
        self.study_id = study_id
        self.progress = progress
        self.started = time.monotonic()
        self.timeout = timeout
        self.last: tuple[str, int] | None = None

    def seen(self, view: StudyRecord) -> bool:
        """Show the study's state; whether it is final. Raises TimeoutError past the timeout
        (the study keeps running: wait again, or cancel it)."""
        return self.seen_state(view.status, view.view.releases_received)

    def seen_event(self, event: StudyEvent | None) -> bool:
        """:meth:`seen` of a pushed event (None: a heartbeat, for the timeout only)."""
        if event is None:
            return self.seen_state(self.last[0], self.last[1]) if self.last else False
        return self.seen_state(event.status, event.releases_received)

    def seen_state(self, status: str, releases_received: int) -> bool:
        """:meth:`seen` of a status and count."""
        state = (status, releases_received)
        elapsed = time.monotonic() - self.started
        if state != self.last:  # a line per change: a log of the wait stays short
            self.last = state
            self.progress.update(f"study {self.study_id}: {state[0]}, {state[1]} releases "
                                 f"received ({elapsed:.0f} s)")
        if status in FINAL:
            return True
        if self.timeout is not None and elapsed > self.timeout:
            raise TimeoutError(f"study {self.study_id} still {status} after "
                               f"{self.timeout:g} s (it keeps running: wait again or cancel)")
        return False


@dataclass(frozen=True)
class StudyEvent:
    """One event of ``GET /v1/studies/{id}/events``: ``progress`` or ``end``."""

    name: str
    status: str
    releases_received: int


class EventParser:
    """Server-sent events from a stream's lines (``text/event-stream``): :meth:`line` returns
    the event a blank line completes, or None (a comment, a heartbeat, is an empty event: its
    caller checks its timeout)."""

    def __init__(self) -> None:
        self._fields: dict[str, str] = {}

    def line(self, line: str) -> StudyEvent | None:
        if line.startswith(":"):
            return None
        if line:
            name, _, value = line.partition(":")
            self._fields[name] = value.removeprefix(" ")
            return None
        fields, self._fields = self._fields, {}
        if "data" not in fields:
            return None
        data = json.loads(fields["data"])
        return StudyEvent(fields.get("event", "message"), str(data["status"]),
                          int(data["releases_received"]))


def events_path(study_id: str) -> str:
    return study_path(study_id, "events")


# Answers after which the client polls instead of following the study's events: a coordinator
# from before the events route (404 on the route: the study itself is checked by the poll).
def can_follow(answer: httpx.Response) -> bool:
    return answer.status_code == 200 and answer.headers.get(
        "content-type", "").startswith("text/event-stream")


def idempotency(key: str | None) -> dict[str, str]:
    return {"Idempotency-Key": key} if key is not None else {}


def statuses(status: str | Sequence[str] | None) -> dict[str, Any]:
    return {} if status is None else {"status": status}



def unpack_exports(data: bytes, directory: str | Path) -> list[Path]:
    """The files of a study's export zip (``GET /v1/studies/{id}/export.zip``) written into
    ``directory`` (made if missing), flat: only each member's file name is used, so no member
    can write outside it. Returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            name = PurePosixPath(member.filename).name
            if member.is_dir() or not name or name.startswith("."):
                continue
            path = out / name
            path.write_bytes(archive.read(member))
            written.append(path)
    return written


def write_file(data: bytes, path: str | Path) -> Path:
    """``data`` written to ``path`` (its folder made if missing), whole or not at all: written
    beside it first, then renamed over it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target
