"""Log lines of both services: timestamped, in one format, each tagged with the request it serves.

:func:`configure` is called once as a service process starts (``fedstats_service.entry.main``),
before uvicorn serves; uvicorn is run with ``log_config=None`` (``fedstats_service.serving``), so
its own loggers (``uvicorn.error``, ``uvicorn.access``) keep propagating to the root handler
installed here and come out in the same format. Two formats (settings ``log_format``):

* ``text``: ``2025-03-01T09:30:12.345Z INFO coordinator.client <message> request_id=... study=...
  analyst=...`` (the ids only when known; a traceback follows on its own lines);
* ``json``: one object per line with ``ts``, ``level``, ``logger``, ``msg``, ``service``,
  ``request_id``, ``study_id``, ``analyst_id`` (null when not known) and ``exc`` (the traceback,
  only when there is one).

The ids are those of ``fedstats_service.context.current()`` when the line is logged
(:class:`ContextFilter`): a center's line names the coordinator's request and the study it serves.

A safety net, :class:`RedactFilter`: the text of every record (message and traceback) has the
secrets of the service's settings, ``Bearer <credentials>`` and analyst tokens (``fsa_...``)
replaced by ``[redacted]``. No code logs a token (fingerprints name them:
``fedstats_service.auth.fingerprint``); the net is for what a library might put in an error.
See docs/coordinator.md, "Logs".
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

from pydantic import BaseModel, SecretStr

from fedstats_service import context
from fedstats_service.settings import ServiceSettings

REDACTED = "[redacted]"
# Secrets shorter than this are not searched for: only dev mode accepts them, and replacing a
# short word ("dev") everywhere would garble every line.
MIN_REDACTED_LENGTH = 8
# Libraries that log every request at INFO (httpx: each center call's URL and status); the
# coordinator's client logs what matters itself, so these speak at WARNING unless debugging.
CHATTY = ("httpx", "httpcore")

# A credential after "Bearer" (any case); 16+ token characters, so that prose ("the bearer token
# is not valid") stays as it is.
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}")
_ANALYST_TOKEN = re.compile(r"\bfsa_[A-Za-z0-9_\-]{8,}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # tabs stay; newlines would forge lines

IDS = (("request_id", "request_id"), ("study_id", "study"), ("analyst_id", "analyst"))


def utc_timestamp(created: float) -> str:
    """ISO-8601 in UTC with milliseconds: ``2025-03-01T09:30:12.345Z``."""
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class ContextFilter(logging.Filter):
    """Puts the ids of the current call context and the service's name on every record."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        ids = context.current()
        record.request_id = ids.request_id
        record.study_id = ids.study_id
        record.analyst_id = ids.analyst_id
        record.service = self.service
        return True


class RedactFilter(logging.Filter):
    """Replaces ``secrets``, ``Bearer <...>`` and ``fsa_...`` tokens in a record's message and
    traceback with ``[redacted]`` (the record is rewritten: every handler sees the safe text)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first: a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_REDACTED_LENGTH},
                              key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _BEARER.sub(f"Bearer {REDACTED}", text)
        return _ANALYST_TOKEN.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = self.redact(message)
        if safe != message:
            record.msg, record.args = safe, None
        if record.exc_info and not record.exc_text:
            # Rendered here, once, so that the formatter prints the redacted text.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def _ids(record: logging.LogRecord) -> dict[str, str | None]:
    return {name: getattr(record, name, None) for name, _ in IDS}


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <logger> <message> request_id=... study=... analyst=...``."""

    def format(self, record: logging.LogRecord) -> str:
        message = _CONTROL.sub(lambda m: repr(m.group())[1:-1], record.getMessage())
        ids = _ids(record)
        tags = "".join(f" {label}={ids[name]}" for name, label in IDS if ids[name] is not None)
        line = f"{utc_timestamp(record.created)} {record.levelname} {record.name} {message}{tags}"
        exc = self._exception(record)
        return f"{line}\n{exc}" if exc else line

    def _exception(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        parts = [record.exc_text, self.formatStack(record.stack_info) if record.stack_info
                 else None]
        return "\n".join(p for p in parts if p)


class JsonFormatter(TextFormatter):
    """One JSON object per line (see the module docstring for its keys)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": utc_timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "service": getattr(record, "service", None),
            **_ids(record),
        }
        exc = self._exception(record)
        if exc:
            entry["exc"] = exc
        return json.dumps(entry, ensure_ascii=False, default=str)


class ServiceHandler(logging.StreamHandler[IO[str]]):
    """The handler :func:`configure` installs on the root logger (found again by its type)."""


def secrets_of(value: object) -> Iterator[str]:
    """Every :class:`SecretStr` in ``value`` (settings, their tables, lists and dicts)."""
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from secrets_of(getattr(value, name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from secrets_of(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from secrets_of(item)


def configure(settings: ServiceSettings, stream: IO[str] | None = None) -> logging.Handler:
    """Send every log record of the process (ours, uvicorn's, the libraries') through one
    handler on ``stream`` (stderr) in the settings' ``log_format`` and at their ``log_level``.

    Called again (tests), it replaces the handler it installed before and leaves any other
    handler alone."""
    level = logging.getLevelName(settings.log_level.upper())
    handler = ServiceHandler(stream if stream is not None else sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    handler.addFilter(ContextFilter(settings.SERVICE))
    handler.addFilter(RedactFilter(secrets_of(settings)))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ServiceHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # uvicorn's loggers propagate to the root handler; none of their own may print twice.
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    for name in CHATTY:
        logging.getLogger(name).setLevel(level if level == logging.DEBUG else logging.WARNING)
    logging.captureWarnings(True)  # Python warnings in the same format, not bare on stderr
    return handler
