"""The plumbing both services share, on its own: the error body, the start-up exit codes, the
database engine, and the app factory's guards (both services' suites drive them end to end)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, ClassVar

import httpx
import pytest
from fastapi import APIRouter, Depends
from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict
from sqlalchemy import MetaData, text
from sqlalchemy.exc import OperationalError

from fedstats_service.app import create_service_app, services_part
from fedstats_service.auth import Caller, bearer_auth
from fedstats_service.db import Database, make_engine
from fedstats_service.entry import reporting_errors
from fedstats_service.errors import NotFound, error_body
from fedstats_service.settings import ConfigError, ServiceSettings

TOKEN = "a-long-random-token-0123456789"


def test_the_error_body_names_error_and_detail_first() -> None:
    body = error_body("busy", "try later", retry=30)
    assert list(body) == ["error", "detail", "retry"]
    assert NotFound("no such thing").body() == {"error": "not_found", "detail": "no such thing"}


def test_start_up_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def bad_config() -> int:
        raise ConfigError("FEDSTATS_X_CONFIG: configuration file 'x.toml' does not exist")

    def refused() -> int:
        raise NotFound("dataset 'cohort' has no column 'age'")

    assert reporting_errors("center", lambda: 0) == 0
    assert reporting_errors("center", bad_config) == 2
    assert capsys.readouterr().err == (
        "fedstats center: FEDSTATS_X_CONFIG: configuration file 'x.toml' does not exist\n")
    assert reporting_errors("coordinator", refused) == 2
    assert capsys.readouterr().err == "fedstats coordinator: dataset 'cohort' has no column 'age'\n"


def test_sqlite_is_durable_and_other_databases_are_refused(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}", what="ledger", busy_timeout_s=1,
                         begin_immediate=True)
    with engine.connect() as conn:
        pragma = {name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                  for name in ("journal_mode", "synchronous", "foreign_keys")}
    engine.dispose()
    assert pragma == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1}  # 2: FULL
    with pytest.raises(ValueError, match="the ledger runs on sqlite or postgresql, not 'mysql'"):
        make_engine("mysql://db/x", what="ledger", busy_timeout_s=1)


def test_begin_immediate_takes_the_write_lock_at_begin(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    first = Database(url, MetaData(), what="store", busy_timeout_s=0.05, begin_immediate=True)
    second = Database(url, MetaData(), what="store", busy_timeout_s=0.05, begin_immediate=True)
    try:
        with first.engine.begin() as conn:
            conn.execute(text("SELECT 1"))  # a read, yet the database is locked for writers
            with pytest.raises(OperationalError, match="locked"), second.engine.begin() as other:
                other.execute(text("SELECT 1"))
    finally:
        first.close()
        second.close()


class _Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="FEDSTATS_TEST_")
    SERVICE: ClassVar[str] = "test service"
    CONFIG_ENV: ClassVar[str] = "FEDSTATS_TEST_CONFIG"

    tokens: list[SecretStr]
    port: int = 0
    max_body_bytes: int = 2048
    max_concurrency: int = 4

    @property
    def bearer_tokens(self) -> list[SecretStr]:
        return self.tokens


authenticate = bearer_auth(services_part("settings"), description="the test token")
router = APIRouter(prefix="/v1")


@router.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.post("/echo")
def echo(caller: Annotated[Caller, Depends(authenticate)]) -> dict[str, str]:
    return {"caller": caller.token_id}


def _app() -> Any:
    settings = _Settings(tokens=[SecretStr(TOKEN)])

    async def close() -> None:
        return None

    return create_service_app(settings, router, title="test",
                              services=SimpleNamespace(settings=settings), close=close)


@pytest.mark.anyio
async def test_the_app_checks_the_token_before_the_body_and_names_the_caller() -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app()),
                                 base_url="http://test") as client:
        assert (await client.get("/v1/health")).json() == {"status": "ok"}
        r = await client.post("/v1/echo", content=b"x" * 10_000)  # over the limit, no token
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"] == "unauthenticated"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        r = await client.post("/v1/echo", content=b"x" * 10_000, headers=auth)
        assert r.status_code == 413 and r.json()["error"] == "request_too_large"
        r = await client.post("/v1/echo", headers=auth)
        assert r.status_code == 200 and len(r.json()["caller"]) == 16
        r = await client.get("/v1/nothing", headers=auth)
        assert r.json() == {"error": "not_found", "detail": "Not Found"}


@pytest.mark.anyio
@pytest.mark.parametrize("held", ["write_lock", "every_connection"])
async def test_a_database_busy_past_its_wait_is_a_503_to_retry_not_a_500(
        tmp_path: Path, held: str) -> None:
    """Another writer holds SQLite's lock, or every pooled connection is out, past the wait
    (``busy_timeout_s``): the caller gets 503 ``busy`` with ``Retry-After`` (its transaction
    rolled back), as a concurrent burst on a loaded machine once got a bare 500."""
    engine = make_engine(f"sqlite:///{tmp_path / 'busy.sqlite'}", what="test",
                         busy_timeout_s=0.2, begin_immediate=True)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    writes = APIRouter(prefix="/v1")

    @writes.post("/write")
    def write(caller: Annotated[Caller, Depends(authenticate)]) -> dict[str, int]:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
        return {"written": 1}

    settings = _Settings(tokens=[SecretStr(TOKEN)], max_concurrency=40)

    async def close() -> None:
        return None

    app = create_service_app(settings, writes, title="test",
                             services=SimpleNamespace(settings=settings), close=close)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    holders = [engine.connect() for _ in range(25 if held == "every_connection" else 1)]
    try:
        if held == "write_lock":
            holders[0].begin()
            holders[0].execute(text("INSERT INTO t VALUES (0)"))
        # Exception handlers answer, and Starlette re-raises to the server (which logs it);
        # the transport must not re-raise it into the test.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            r = await client.post("/v1/write", headers=auth)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "busy" and r.headers["retry-after"] == "1"
            assert "nothing was done" in r.json()["detail"]
            for conn in holders:
                conn.rollback()
                conn.close()
            holders = []
            r = await client.post("/v1/write", headers=auth)  # the retry
            assert r.status_code == 200
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM t")).scalar() == 1
    finally:
        for conn in holders:
            conn.close()
        engine.dispose()


@pytest.mark.anyio
async def test_any_other_database_error_stays_a_500() -> None:
    from fedstats_service.handlers import database_busy

    assert not database_busy(OperationalError("SELECT 1", {}, Exception("no such table: t")))
    assert database_busy(OperationalError("BEGIN", {}, Exception("database is locked")))
    wrapped = RuntimeError("while recording")
    wrapped.__cause__ = OperationalError("BEGIN", {}, Exception("database is locked"))
    assert database_busy(wrapped)
