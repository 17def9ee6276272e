"""A SQL source's password: from a file (a Docker secret) or the environment, never in the
settings file or the URL, never logged; and docs/deploy.md's example role (its GRANT) and source
(its ``version_query``), run together against the machine's PostgreSQL as the docs write them."""

from __future__ import annotations

import logging
import re
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from center_agent.core.config import ConfigError, load_settings
from center_agent.core.errors import DataSourceError
from center_agent.main import create_app
from tests.helpers.center import AUTH, K
from tests.helpers.config import write_toml

ROOT = Path(__file__).resolve().parents[2]
SECRET = "pw-" + uuid.uuid4().hex  # what must never be seen
ROWS = 40


def docs_blocks() -> tuple[str, dict[str, Any]]:
    """The SQL and the TOML block of docs/deploy.md, "SQL sources" (the GRANT and the
    source with its version_query)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text[text.index("### SQL sources"):]
    sql = re.search(r"```sql\n(.*?)```", section, re.S)
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    assert sql is not None and toml is not None
    source = tomllib.loads(toml.group(1))["datasets"]["cohort"]["source"]
    return sql.group(1), source


@pytest.fixture
def warehouse(pg_base_url: str) -> Iterator[tuple[str, str, str]]:
    """A schema holding ``cohort`` (arm, los_days, age, updated_at and a column nobody may
    read) and a role made by the docs' SQL (names made unique): (schema, role, its URL)."""
    schema = f"research_{uuid.uuid4().hex[:10]}"
    role = f"fedstats_ro_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_base_url)
    sql, _ = docs_blocks()
    statements = [s.strip() for s in sql.split(";") if s.strip()]
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.cohort (arm TEXT, los_days DOUBLE "
                             "PRECISION, age DOUBLE PRECISION, updated_at TIMESTAMP DEFAULT "
                             "now(), name TEXT)")
        conn.execute(sa.text(f"INSERT INTO {schema}.cohort (arm, los_days, age, name) VALUES "
                             "(:arm, :los, :age, 'secret')"),
                     [{"arm": "control" if i % 2 else "treated", "los": i % 9 + 0.5,
                       "age": 40 + i} for i in range(ROWS)])
        for statement in statements:
            conn.exec_driver_sql(statement.replace("research.", f"{schema}.")
                                 .replace("SCHEMA research", f"SCHEMA {schema}")
                                 .replace("fedstats_ro", role)
                                 .replace("the password in db_password", SECRET))
    url = sa.make_url(pg_base_url).set(username=role, password=None)
    try:
        yield schema, role, url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def center(tmp_path: Path, source: dict[str, Any]) -> Path:
    return write_toml(tmp_path / "center.toml", {
        "center_id": "hospital-secrets", "k": K, "tokens": [AUTH["Authorization"][7:]],
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}", "log_level": "debug",
        "datasets": {"cohort": {"source": source, "variables": ["los_days", "age"],
                                "group": {"column": "arm", "levels": ["control", "treated"]},
                                "epsilon_total": 1.0}},
    })


def docs_source(schema: str, url: str, **changes: Any) -> dict[str, Any]:
    _, source = docs_blocks()
    assert source.pop("password_file") == "/run/secrets/db_password"  # the Docker secret's
    source = {**source, "url": url,
              "table": source["table"].replace("research.", f"{schema}."),
              "version_query": source["version_query"].replace("research.", f"{schema}.")}
    return {k: v for k, v in {**source, **changes}.items() if v is not None}


@pytest.mark.anyio
async def test_the_docs_grant_and_version_query_work_together_and_the_password_stays_hidden(
    tmp_path: Path, warehouse: tuple[str, str, str], caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema, _role, url = warehouse
    secret_file = tmp_path / "db_password"
    secret_file.write_text(SECRET + "\n")
    caplog.set_level(logging.DEBUG)
    settings = load_settings(center(tmp_path, docs_source(schema, url,
                                                          password_file=str(secret_file))))
    app = create_app(settings)
    try:
        dataset = app.state.services.datasets["cohort"]
        assert dataset.source.engine.url.password == SECRET  # it is the one used
        assert dataset.population().n == ROWS
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            info = await client.get("/v1/info", headers=AUTH)
            table = await client.post("/v1/datasets/cohort/table", headers=AUTH, json={
                "variable": "los_days", "groups": ["control", "treated"], "k": K})
        assert info.status_code == 200 and table.status_code == 200, table.text
        seen = caplog.text + capsys.readouterr().err + info.text + repr(settings)
        assert SECRET not in seen
    finally:
        app.state.services.close()


def test_without_the_version_querys_column_the_docs_grant_would_fail(
    tmp_path: Path, warehouse: tuple[str, str, str], pg_base_url: str
) -> None:
    """What the docs said before: the declared columns only. The version query then fails."""
    schema, role, url = warehouse
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'REVOKE SELECT (updated_at) ON {schema}.cohort FROM "{role}"')
    admin.dispose()
    with pytest.raises(DataSourceError) as caught:
        create_app(load_settings(center(tmp_path, docs_source(schema, url))))
    assert "42501" in caught.value.detail or "permission" in caught.value.detail


def test_the_password_from_the_environment_and_refused_twice(
    tmp_path: Path, warehouse: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema, _role, url = warehouse
    config = center(tmp_path, docs_source(schema, url))
    monkeypatch.setenv("FEDSTATS_CENTER_DATASETS__COHORT__SOURCE__PASSWORD", SECRET)
    settings = load_settings(config)
    app = create_app(settings)
    try:
        assert app.state.services.datasets["cohort"].source.engine.url.password == SECRET
        assert SECRET not in repr(settings) and SECRET not in caplog.text
    finally:
        app.state.services.close()
    secret_file = tmp_path / "db_password"
    secret_file.write_text(SECRET)
    both = center(tmp_path, docs_source(schema, url, password_file=str(secret_file)))
    with pytest.raises(ConfigError) as caught:
        load_settings(both)
    assert "give the password once" in str(caught.value) and SECRET not in str(caught.value)
    monkeypatch.delenv("FEDSTATS_CENTER_DATASETS__COHORT__SOURCE__PASSWORD")
    in_url = sa.make_url(url).set(password=SECRET).render_as_string(hide_password=False)
    with pytest.raises(ConfigError) as caught:
        load_settings(center(tmp_path, docs_source(schema, in_url,
                                                   password_file=str(secret_file))))
    assert "`url` holds a password" in str(caught.value) and SECRET not in str(caught.value)
    secret_file.write_text("\n")
    with pytest.raises(ConfigError, match="password_file is empty"):
        load_settings(center(tmp_path, docs_source(schema, url, password_file=str(secret_file))))


def test_a_connection_that_fails_does_not_show_the_password(
    tmp_path: Path, warehouse: tuple[str, str, str], caplog: pytest.LogCaptureFixture,
) -> None:
    schema, _role, url = warehouse
    secret_file = tmp_path / "db_password"
    secret_file.write_text(SECRET)
    wrong = sa.make_url(url).set(database="no_such_db_" + uuid.uuid4().hex[:6])
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DataSourceError) as caught:
        create_app(load_settings(center(tmp_path, docs_source(
            schema, wrong.render_as_string(hide_password=False),
            password_file=str(secret_file)))))
    assert SECRET not in caught.value.detail and SECRET not in caplog.text
