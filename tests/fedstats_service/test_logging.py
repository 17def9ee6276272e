"""Log lines (``fedstats_service.logging``, docs/coordinator.md "Logs"): their two formats, the
ids of the request they were logged for, the redaction net; the coordinator's client carrying
the ids to a center; and, with real processes, one request id from the analyst's call through
the coordinator to the center's log, with no token in either log."""

from __future__ import annotations

import io
import json
import logging
import re
import time
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import httpx
import pytest
from fastapi import APIRouter
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.core.errors import CenterFailure
from fedstats_service import context
from fedstats_service import logging as service_logging
from fedstats_service.app import create_service_app
from fedstats_service.auth import fingerprint
from fedstats_service.settings import ServiceSettings
from shared.protocol import Health
from tests.helpers.center import TOKEN, center_config
from tests.helpers.coordinator import ANALYST_TOKEN, AUTH, coordinator_config
from tests.helpers.processes import log_file, running_center, running_coordinator
from tests.helpers.timing import scaled

SECRET = "the-service-secret-0123456789"
TEXT_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>[A-Z]+) (?P<logger>\S+) "
    r"(?P<rest>.*)$")


class _Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="FEDSTATS_TEST_")
    SERVICE: ClassVar[str] = "test service"
    CONFIG_ENV: ClassVar[str] = "FEDSTATS_TEST_CONFIG"

    tokens: list[SecretStr] = Field(default_factory=lambda: [SecretStr(SECRET)])
    port: int = 0
    max_body_bytes: int = 2048
    max_concurrency: int = 4

    @property
    def bearer_tokens(self) -> list[SecretStr]:
        return self.tokens


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """:func:`configure` changes process-wide state; every test gets it back as it was."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    named = {name: (logging.getLogger(name).level, logging.getLogger(name).propagate,
                    list(logging.getLogger(name).handlers))
             for name in ("uvicorn", "uvicorn.error", "uvicorn.access",
                          *service_logging.CHATTY)}
    try:
        yield
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        for name, (lvl, propagate, old) in named.items():
            logger = logging.getLogger(name)
            logger.setLevel(lvl)
            logger.propagate = propagate
            logger.handlers[:] = old


def configured(**settings: Any) -> io.StringIO:
    out = io.StringIO()
    service_logging.configure(_Settings(**settings), stream=out)
    return out


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def near_now(ts: str, minutes: float = 1) -> bool:
    """Whether ``ts`` is an ISO-8601 UTC time (``...Z``) within ``minutes`` of now."""
    when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return (ts.endswith("Z") and when.utcoffset() == timedelta(0)
            and abs(datetime.now(UTC) - when) < timedelta(minutes=minutes))


def test_text_lines_carry_a_utc_time_level_logger_message_and_ids() -> None:
    out = configured()
    log = logging.getLogger("fedstats.test")
    log.info("outside any request")
    with context.bound(request_id="req-1", study_id="study-7", analyst_id="ana"):
        log.warning("inside: %d centers", 3)
    with context.bound(request_id="req-2"):
        log.info("only a request\nINFO forged line")
    first, second, third = lines(out)
    parsed = TEXT_LINE.fullmatch(first)
    assert parsed is not None and near_now(parsed["ts"])
    assert parsed["level"] == "INFO" and parsed["logger"] == "fedstats.test"
    assert parsed["rest"] == "outside any request"  # no ids when none is known
    assert second.endswith(" WARNING fedstats.test inside: 3 centers request_id=req-1 "
                           "study=study-7 analyst=ana")
    # A newline in a message cannot start a line of its own.
    assert third.endswith(r" INFO fedstats.test only a request\nINFO forged line request_id=req-2")


def test_json_lines_are_one_object_each_with_the_agreed_keys() -> None:
    out = configured(log_format="json")
    log = logging.getLogger("fedstats.test")
    with context.bound(request_id="req-1", study_id="study-7"):
        log.info("hello %s", "there")
        try:
            raise ValueError("no good")
        except ValueError:
            log.exception("it failed")
    hello, failed = (json.loads(line) for line in lines(out))
    assert near_now(hello["ts"]) and hello["ts"].endswith("Z")
    assert hello == {"ts": hello["ts"], "level": "INFO", "logger": "fedstats.test",
                     "msg": "hello there", "service": "test service", "request_id": "req-1",
                     "study_id": "study-7", "analyst_id": None}
    assert failed["level"] == "ERROR" and failed["msg"] == "it failed"
    assert failed["exc"].startswith("Traceback") and "ValueError: no good" in failed["exc"]


def test_the_level_setting_drops_lower_lines_and_quiets_httpx() -> None:
    out = configured(log_format="json", log_level="warning")
    logging.getLogger("fedstats.test").info("dropped")
    logging.getLogger("fedstats.test").warning("kept")
    assert [json.loads(line)["msg"] for line in lines(out)] == ["kept"]
    configured(log_level="info")
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    configured(log_level="debug")
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG


def test_configure_twice_keeps_one_handler_and_uvicorn_goes_through_it() -> None:
    configured()
    out = configured(log_format="json")
    mine = [h for h in logging.getLogger().handlers
            if isinstance(h, service_logging.ServiceHandler)]
    assert len(mine) == 1
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET",
                                             "/v1/health", "1.1", 200)
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 42)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
    got = [json.loads(line) for line in lines(out)]
    assert [(g["logger"], g["msg"]) for g in got[:2]] == [
        ("uvicorn.access", '127.0.0.1:5 - "GET /v1/health HTTP/1.1" 200'),
        ("uvicorn.error", "Started server process [42]")]
    assert got[2]["logger"] == "py.warnings" and "a library's warning" in got[2]["msg"]


def test_secrets_bearer_credentials_and_analyst_tokens_are_redacted() -> None:
    out = configured(log_format="json")
    log = logging.getLogger("fedstats.test")
    analyst = "fsa_" + "Zx8" * 10
    log.warning("sent %s and Authorization: Bearer %s and %s", SECRET,
                "abcdefghijklmnop0123", analyst)
    log.info("the bearer token is not valid for this center")  # prose is left alone
    try:
        raise RuntimeError(f"a library echoed {SECRET}")
    except RuntimeError:
        log.exception("failed")
    first, prose, failed = (json.loads(line) for line in lines(out))
    assert first["msg"] == ("sent [redacted] and Authorization: Bearer [redacted] and "
                            "[redacted]")
    assert prose["msg"] == "the bearer token is not valid for this center"
    assert SECRET not in failed["exc"] and "a library echoed [redacted]" in failed["exc"]


@pytest.mark.anyio
async def test_a_served_request_logs_its_request_id_and_a_bad_token_by_fingerprint() -> None:
    out = configured(log_format="json")
    router = APIRouter(prefix="/v1")
    route_log = logging.getLogger("fedstats.test.route")

    @router.get("/work")
    def work() -> dict[str, str]:  # a sync route: run in a worker thread
        route_log.info("working")
        return {"ok": "yes"}

    settings = _Settings()

    async def close() -> None:
        return None

    app = create_service_app(settings, router, title="t", services=SimpleNamespace(),
                             close=close, trust_context_ids=True)
    wrong = "wrong-token-" + "9" * 20
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as client:
        ok = await client.get("/v1/work", headers={"Authorization": f"Bearer {SECRET}",
                                                   "X-Request-ID": "req-abc",
                                                   "X-Fedstats-Study": "study-9"})
        refused = await client.get("/v1/work", headers={"Authorization": f"Bearer {wrong}"})
    assert ok.status_code == 200 and refused.status_code == 401
    got = [json.loads(line) for line in lines(out)]
    working = next(g for g in got if g["msg"] == "working")
    assert (working["request_id"], working["study_id"]) == ("req-abc", "study-9")
    failed = next(g for g in got if g["logger"] == "fedstats_service.middleware")
    assert failed["level"] == "WARNING" and failed["msg"] == (
        f"authentication failed (unauthenticated) on /v1/work: token {fingerprint(wrong)}")
    assert failed["request_id"] == refused.headers["X-Request-ID"]
    assert wrong not in out.getvalue() and SECRET not in out.getvalue()


@pytest.mark.anyio
async def test_the_coordinators_client_sends_the_context_and_logs_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        if len(seen) == 1:
            return httpx.Response(503)
        if len(seen) == 2:
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(500, json={"error": "internal_error", "detail": "oops"})

    center = HttpCenter(
        "alpha", CenterConfig(url="http://alpha.test", token=SecretStr(TOKEN)),
        timeout=httpx.Timeout(1.0), transport=httpx.MockTransport(answer),
        retry=RetryPolicy(attempts=2, backoff_initial_s=0.0, backoff_max_s=0.0))
    caplog.set_level(logging.INFO, logger="coordinator.client")
    try:
        with context.bound(request_id="req-1", study_id="study-2", analyst_id="ana-3"):
            assert await center.health() == Health(status="ok")  # after one retry
            with pytest.raises(CenterFailure):
                await center.budget()
    finally:
        await center.aclose()
    for headers in seen:
        assert (headers["x-request-id"], headers["x-fedstats-study"],
                headers["x-fedstats-analyst"]) == ("req-1", "study-2", "ana-3")
    records = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert records == [
        ("INFO", "center alpha: GET /v1/health: HTTP 503; retry 1/1 in 0.00s"),
        ("WARNING", "center call failed: center 'alpha' (error): GET /v1/budget: HTTP 500 "
                    "(internal_error): oops"),
    ]
    assert not any(TOKEN in message for _, message in records)


@pytest.mark.process
def test_one_request_id_from_the_analyst_to_the_centers_log(tmp_path: Path) -> None:
    center_toml, center_port = center_config(tmp_path, {"cohort": 3.0}, name="hospital",
                                             log_format="json")
    coordinator_toml, port = coordinator_config(
        tmp_path / "coordinator.toml", {"hospital": f"http://127.0.0.1:{center_port}"},
        min_centers=1, log_format="json")
    spec = {"dataset": "cohort", "variable": "x", "groups": ["a", "b"], "k": 10,
            "analyses": [{"kind": "mwu", "tests": ["sum"]}]}
    wrong = "not-a-token-of-ours-" + "7" * 20
    with running_center(center_toml, center_port), \
            running_coordinator(coordinator_toml, port), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=30) as client:
        done = client.post("/v1/studies", json=spec, headers={"X-Request-ID": "test-req-123"})
        assert done.status_code == 202, done.text
        assert done.headers["X-Request-ID"] == "test-req-123"
        study_id = done.json()["id"]
        deadline = time.monotonic() + scaled(60)
        while (status := client.get(done.json()["status_url"]).json()["status"]) in (
                "pending", "running"):
            assert time.monotonic() < deadline, "the study did not finish"
            time.sleep(0.1)
        assert status == "succeeded"
        assert client.get("/v1/studies", headers={
            "Authorization": f"Bearer {wrong}"}).status_code == 401
    coordinator_log = parsed_log(coordinator_toml)
    center_log = parsed_log(center_toml)
    assert any(e["request_id"] == "test-req-123" for e in coordinator_log)
    assert any(e["logger"] == "fedstats_service.middleware" and fingerprint(wrong) in e["msg"]
               for e in coordinator_log)
    served = [e for e in center_log if e["request_id"] == "test-req-123"]
    assert served, "no center line carries the analyst's request id"
    # The releases name the study; the info asked when the names were checked at submission
    # (before the study existed) names none, and no line names another.
    releases = [e for e in served if e["logger"] == "center_agent.gate"]
    assert releases and all(e["study_id"] == study_id for e in releases)
    assert {e["study_id"] for e in served} <= {study_id, None}
    assert {e["service"] for e in coordinator_log} == {"coordinator"}
    assert {e["service"] for e in center_log} == {"center"}
    for path in (coordinator_toml, center_toml):
        text = log_file(path).read_text()
        for secret in (TOKEN, ANALYST_TOKEN, wrong):
            assert secret not in text, f"a token in {log_file(path).name}"


def parsed_log(config: Path) -> list[dict[str, Any]]:
    """Every line of a service's log, each a JSON object with a UTC ``ts``."""
    entries = [json.loads(line) for line in log_file(config).read_text().splitlines()]
    assert entries and all(near_now(e["ts"], minutes=10) for e in entries)
    return entries
