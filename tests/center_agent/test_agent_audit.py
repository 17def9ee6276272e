"""The audit trail end to end: what the gate records with every release, answer from the store
and refusal (who, what, on which data), ``GET /v1/audit`` for the operator alone, the
migration of a ledger made before the trail had its ids and questions, and
``fedstats center audit`` on a real center's ledger (``docs/privacy.md``, "Audit trail")."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from center_agent import operator
from center_agent.api.deps import roles
from center_agent.api.router import api_router
from center_agent.audit import (
    QUESTION_MAX_CHARS,
    AuditPage,
    AuditQuery,
    question_text,
    read,
)
from center_agent.audit import record as write_record
from center_agent.core.config import ConfigError, Settings, load_settings
from center_agent.db import Store, migrate
from center_agent.gate.kinds import KINDS
from center_agent.main import create_app
from center_agent.services import Services
from fedstats_cli.cli import main
from fedstats_service import handlers
from fedstats_service.auth import fingerprint
from fedstats_service.context import ANALYST_HEADER, REQUEST_ID_HEADER, STUDY_HEADER
from shared.protocol import canonical_json
from tests.helpers.center import AUTH, OTHER_TOKEN, TOKEN, center_process, dataset_config, write_csv
from tests.helpers.config import write_toml
from tests.helpers.processes import clean_env, fedstats

OPERATOR_TOKEN = "op-" + "0f1e2d3c4b5a69788796"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
AUDIT = "/v1/audit"
TABLE = "/v1/datasets/cohort/table"
MWU = "/v1/datasets/cohort/mwu"
DPQ = "/v1/datasets/cohort/dp/quantiles"
DP_BODY = {"variable": "x", "levels": [0.25, 0.5, 0.75], "epsilon": 0.4,
           "bounds": [31000, 34000]}


def distinctive_table(n: int = 120) -> pa.Table:
    """Values no parameter, id or digest of the tests could hold by chance (31xxx.xxxxx, and
    y at 7xx.xxxx), so a data value in a record would be found."""
    rng = np.random.default_rng(7)
    x = np.round(31000 + 2000 * rng.random(n) + 0.123457, 5)
    y = np.round(700 + 99 * rng.random(n) + 0.000321, 4)
    arm = ["a" if i % 2 else "b" for i in range(n)]
    return pa.table({"x": pa.array(x), "y": pa.array(y), "arm": pa.array(arm)})


def data_strings(table: pa.Table) -> set[str]:
    """Every way a value of x or y could be written into a record."""
    found = set()
    for name in ("x", "y"):
        for value in table[name].to_pylist():
            found |= {repr(value), str(value), f"{value:g}", f"{value:.6g}", f"{value:.3f}"}
    return found


@pytest.fixture
def table() -> pa.Table:
    return distinctive_table()


@pytest.fixture
def base_config(tmp_path: Path, table: pa.Table) -> dict[str, Any]:
    csv_path = write_csv(table, tmp_path / "distinctive.csv")
    other_path = write_csv(table, tmp_path / "distinctive-other.csv")  # one source per dataset
    return {
        "center_id": "hospital-audit",
        "k": 10,
        "tokens": [TOKEN, OTHER_TOKEN],
        "operator_tokens": [OPERATOR_TOKEN],
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "datasets": {
            "cohort": dataset_config({"kind": "csv", "path": str(csv_path)}),
            "other": dataset_config({"kind": "csv", "path": str(other_path)}),
        },
    }


def call(study: str, analyst: str, request: str | None = None) -> dict[str, str]:
    """The coordinator's headers for one call of a study."""
    headers = {**AUTH, STUDY_HEADER: study, ANALYST_HEADER: analyst}
    if request is not None:
        headers[REQUEST_ID_HEADER] = request
    return headers


async def trail(client: httpx.AsyncClient, **params: Any) -> AuditPage:
    r = await client.get(AUDIT, params=params, headers=OPERATOR)
    assert r.status_code == 200, r.text
    return AuditPage.model_validate_json(r.content)


async def spent(client: httpx.AsyncClient, dataset: str = "cohort") -> float:
    r = await client.get(f"/v1/budget/{dataset}", headers=AUTH)
    return float(r.json()["spent_epsilon"])


# -- what is recorded ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_release_is_recorded_once_with_who_what_and_the_data_version(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    asked = [
        (TABLE, {"variable": "x", "groups": ["a", "b"], "k": 10}, "req-table"),
        (MWU, {"variable": "x", "groups": ["a", "b"]}, "req-mwu"),
        (DPQ, DP_BODY, "req-dp"),
    ]
    for path, body, request_id in asked:
        r = await client.post(path, json=body, headers=call("study-7", "alice", request_id))
        assert r.status_code == 200, r.text
    records = (await trail(client)).records
    assert [r.request_id for r in records] == ["req-table", "req-mwu", "req-dp"]
    population = app.state.services.datasets["cohort"].population()
    kinds = {kind.path.format(dataset="cohort"): kind for kind in KINDS}
    for record, (path, body, _) in zip(records, asked, strict=True):
        kind = kinds[path.removeprefix("/v1")]
        assert (record.dataset, record.kind, record.outcome) == ("cohort", kind.name, "released")
        assert (record.study_id, record.analyst_id) == ("study-7", "alice")
        assert record.caller == fingerprint(TOKEN)
        assert record.epoch == 1 and record.data_fingerprint == population.fingerprint
        assert record.request_key is not None and len(record.request_key) == 64
        # The question is the request as validated: its fields with their defaults.
        assert record.question == canonical_json(
            kind.request_model.model_validate(body).to_payload())
        assert record.at > datetime.now(UTC) - timedelta(minutes=5)
    assert [r.epsilon for r in records] == [0.0, 0.0, 0.4]
    assert sum(r.epsilon for r in records) == pytest.approx(await spent(client))


@pytest.mark.anyio
async def test_a_repeat_is_recorded_as_cached_with_no_epsilon(client: httpx.AsyncClient) -> None:
    first = await client.post(DPQ, json=DP_BODY, headers=call("study-1", "alice", "r1"))
    again = await client.post(DPQ, json=DP_BODY, headers=call("study-2", "bob", "r2"))
    assert first.json() == again.json()
    released, cached = (await trail(client)).records
    assert (released.outcome, released.epsilon) == ("released", 0.4)
    assert (cached.outcome, cached.epsilon) == ("cached", 0.0)
    assert (cached.study_id, cached.analyst_id, cached.request_id) == ("study-2", "bob", "r2")
    assert cached.request_key == released.request_key
    assert cached.question == released.question
    assert await spent(client) == pytest.approx(0.4)


@pytest.mark.anyio
async def test_a_refusal_is_recorded_with_its_code_and_nothing_spent(
    client: httpx.AsyncClient,
) -> None:
    # The dataset's cap per request is a quarter of its 3.0.
    body = {**DP_BODY, "epsilon": 1.0}
    r = await client.post(DPQ, json=body, headers=call("study-9", "mallory", "r-big"))
    assert r.status_code == 403 and r.json()["error"] == "epsilon_cap_exceeded"
    small_k = await client.post(TABLE, json={"variable": "x", "k": 2},
                                headers=call("study-9", "mallory"))
    assert small_k.status_code == 403
    cap, k = (await trail(client)).records
    assert (cap.outcome, cap.epsilon, cap.request_key) == ("refused:epsilon_cap_exceeded",
                                                           0.0, None)
    assert (cap.study_id, cap.analyst_id, cap.request_id) == ("study-9", "mallory", "r-big")
    assert json.loads(cap.question or "{}")["epsilon"] == 1.0  # what was asked is kept
    assert k.outcome == f"refused:{small_k.json()['error']}"
    assert await spent(client) == 0.0


@pytest.mark.anyio
async def test_a_request_id_made_by_the_center_is_the_one_recorded(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"]}, headers=AUTH)
    (record,) = (await trail(client)).records
    assert record.request_id == r.headers[REQUEST_ID_HEADER]
    assert (record.study_id, record.analyst_id) == (None, None)


@pytest.mark.anyio
async def test_a_malformed_id_header_is_not_recorded(client: httpx.AsyncClient) -> None:
    headers = {**AUTH, STUDY_HEADER: "study 1; DROP TABLE", ANALYST_HEADER: "x" * 65}
    assert (await client.post(MWU, json={"variable": "x", "groups": ["a", "b"]},
                              headers=headers)).status_code == 200
    (record,) = (await trail(client)).records
    assert (record.study_id, record.analyst_id) == (None, None)


@pytest.mark.anyio
async def test_no_data_value_appears_in_any_audit_field(
    client: httpx.AsyncClient, table: pa.Table
) -> None:
    """Releases of every sort, cached, refused, on both variables: not one value of the data,
    in any of the ways it could be written, is in the trail."""
    headers = call("study-3", "carol")
    for body in ({"variable": "x", "groups": ["a", "b"], "k": 10}, {"variable": "y", "k": 10}):
        assert (await client.post(TABLE, json=body, headers=headers)).status_code == 200
    for variable in ("x", "y"):
        assert (await client.post(MWU, json={"variable": variable, "groups": ["b", "a"]},
                                  headers=headers)).status_code == 200
    for body in (DP_BODY, DP_BODY, {**DP_BODY, "epsilon": 2.0},
                 {"variable": "y", "levels": [0.5], "epsilon": 0.3, "bounds": [0, 1000]}):
        await client.post(DPQ, json=body, headers=headers)
    page = await trail(client)
    assert len(page.records) == 8
    written = page.model_dump_json()
    leaked = sorted(s for s in data_strings(table) if s in written)
    assert leaked == []
    # The check can fail: a value in a record would be found.
    assert repr(table["x"][0].as_py()) in data_strings(table)


def test_a_long_question_is_cut_and_marked() -> None:
    payload = {"limits": list(range(5000))}
    text = question_text(payload)
    assert len(text) == QUESTION_MAX_CHARS
    assert text.endswith(f"...[{len(canonical_json(payload))} chars, truncated]")
    assert question_text({"k": 10}) == '{"k":10}'


# -- who may read it ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_coordinators_token_cannot_read_the_trail(client: httpx.AsyncClient) -> None:
    for token in (TOKEN, OTHER_TOKEN):
        r = await client.get(AUDIT, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "forbidden" and "operator_tokens" in r.json()["detail"]


@pytest.mark.anyio
async def test_an_operator_token_releases_nothing_and_describes_nothing(
    client: httpx.AsyncClient,
) -> None:
    """Every route of the coordinator, each release kind's among them, refuses the operator's
    token with 403 (a body that would be valid is sent, so the role alone refuses it)."""
    before = (await trail(client)).records
    routes = [("GET", "/v1/info"), ("GET", "/v1/budget"), ("GET", "/v1/budget/cohort")]
    routes += [("POST", "/v1" + kind.path.format(dataset="cohort")) for kind in KINDS]
    assert len(routes) == 3 + len(KINDS)
    for method, path in routes:
        body = {"variable": "x", "groups": ["a", "b"], "k": 10} if method == "POST" else None
        r = await client.request(method, path, json=body, headers=OPERATOR)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"] == "forbidden" and "audit" in r.json()["detail"], path
    assert (await trail(client)).records == before  # and nothing reached the gate
    assert (await client.get("/v1/info", headers=AUTH)).status_code == 200


@pytest.mark.anyio
async def test_the_trail_without_a_valid_token_is_401(client: httpx.AsyncClient) -> None:
    assert (await client.get(AUDIT)).status_code == 401
    bogus = await client.get(AUDIT, headers={"Authorization": "Bearer " + "z" * 32})
    assert bogus.status_code == 401 and "not valid" in bogus.json()["detail"]


@pytest.mark.anyio
async def test_without_operator_tokens_the_trail_refuses_everyone_saying_what_to_set(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    settings = load_settings(write_toml(tmp_path / "no-operator.toml",
                                        {**base_config, "operator_tokens": []}))
    application = create_app(settings)
    try:
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
            for headers in ({}, OPERATOR):
                r = await c.get(AUDIT, headers=headers)
                assert r.status_code == 401 and "operator_tokens" in r.json()["detail"]
            r = await c.get(AUDIT, headers=AUTH)
            assert r.status_code == 403 and "operator_tokens" in r.json()["detail"]
            assert (await c.get("/v1/info", headers=AUTH)).status_code == 200
    finally:
        application.state.services.close()


@pytest.mark.anyio
async def test_the_roles_hold_without_the_middleware(settings: Settings) -> None:
    """An app assembled from the router alone (no bearer gate): the routers' dependencies
    still tell the roles apart."""
    services = Services.build(settings)
    application = FastAPI()
    application.state.services = services
    application.state.authenticate = roles(settings)
    handlers.install(application, "center")
    application.include_router(api_router)
    try:
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
            assert (await c.get(AUDIT, headers=OPERATOR)).status_code == 200
            assert (await c.get(AUDIT, headers=AUTH)).status_code == 403
            assert (await c.get(AUDIT)).status_code == 401
            assert (await c.get("/v1/info", headers=OPERATOR)).status_code == 403
            assert (await c.get("/v1/info", headers=AUTH)).status_code == 200
    finally:
        services.close()


@pytest.mark.parametrize(("operator_tokens", "named"), [
    ([TOKEN], "operator_tokens"),
    (["changeme"], "operator token #0"),
    (["short-token"], "operator token #0"),
])
def test_operator_tokens_are_checked_at_start_up(
    tmp_path: Path, base_config: dict[str, Any], operator_tokens: list[str], named: str
) -> None:
    config = write_toml(tmp_path / "bad.toml", {**base_config, "operator_tokens": operator_tokens})
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert named in str(caught.value)
    assert TOKEN not in str(caught.value)


# -- reading it: filters and pages --------------------------------------------------------------


@pytest.fixture
async def filled(client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """Seven records: five in study s1 (alice, then bob), two in study s2 on dataset other."""
    mwu = {"variable": "x", "groups": ["a", "b"]}
    for i in range(3):
        await client.post(MWU, json=mwu, headers=call("s1", "alice", f"a{i}"))
    for i in range(2):
        await client.post(MWU, json=mwu, headers=call("s1", "bob", f"b{i}"))
    for i in range(2):
        await client.post("/v1/datasets/other/mwu", json=mwu, headers=call("s2", "bob", f"o{i}"))
    yield client


@pytest.mark.anyio
async def test_pages_cover_the_trail_once_in_order(filled: httpx.AsyncClient) -> None:
    every = (await trail(filled)).records
    assert len(every) == 7 and [r.id for r in every] == sorted(r.id for r in every)
    seen, after, pages = [], 0, 0
    while True:
        page = await trail(filled, limit=3, after_id=after)
        seen += page.records
        pages += 1
        assert len(page.records) <= 3
        if page.next_after_id is None:
            break
        after = page.next_after_id
    assert seen == every and pages == 3


@pytest.mark.anyio
async def test_filters_select_by_dataset_study_analyst_and_time(
    filled: httpx.AsyncClient,
) -> None:
    def ids(page: AuditPage) -> list[str | None]:
        return [r.request_id for r in page.records]

    assert ids(await trail(filled, dataset="other")) == ["o0", "o1"]
    assert ids(await trail(filled, study="s1")) == ["a0", "a1", "a2", "b0", "b1"]
    assert ids(await trail(filled, analyst="bob")) == ["b0", "b1", "o0", "o1"]
    assert ids(await trail(filled, study="s1", analyst="bob")) == ["b0", "b1"]
    assert ids(await trail(filled, study="nobody")) == []
    every = (await trail(filled)).records
    cut = every[3].at
    later = await trail(filled, since=cut.isoformat())
    assert all(r.at >= cut for r in later.records) and every[3] in later.records
    earlier = await trail(filled, until=cut.isoformat())
    assert all(r.at < cut for r in earlier.records)
    assert len(later.records) + len(earlier.records) == 7
    # A time without a zone is UTC.
    naive = cut.astimezone(UTC).replace(tzinfo=None).isoformat()
    assert (await trail(filled, since=naive)).records == later.records


@pytest.mark.anyio
@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 10_001}, "limit"),
    ({"limit": 0}, "limit"),
    ({"after_id": -1}, "after_id"),
    ({"since": "last tuesday"}, "since"),
    ({"sice": "2026-01-01"}, "sice"),
])
async def test_bad_query_parameters_are_a_422_naming_them(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    r = await client.get(AUDIT, params=params, headers=OPERATOR)
    assert r.status_code == 422, r.text
    assert any(field in f for f in r.json()["fields"]), r.json()


# -- a ledger made before -----------------------------------------------------------------------

OLD_AUDIT = """CREATE TABLE fedstats_audit (
    id INTEGER NOT NULL {pk},
    at TIMESTAMP {tz} NOT NULL,
    dataset VARCHAR(128) NOT NULL,
    kind VARCHAR(64) NOT NULL,
    caller VARCHAR(32) NOT NULL,
    request_key VARCHAR(64),
    epoch INTEGER,
    epsilon_units BIGINT NOT NULL,
    outcome VARCHAR(32) NOT NULL{primary}
)"""


def old_ledger(url: str) -> None:
    """The audit table as releases before the trail's ids wrote it, with one record."""
    engine = sa.create_engine(url)
    postgres = engine.dialect.name == "postgresql"
    ddl = OLD_AUDIT.format(
        pk="GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if postgres else "",
        tz="WITH TIME ZONE" if postgres else "", primary="" if postgres else ",\n PRIMARY KEY (id)")
    with engine.begin() as conn:
        conn.exec_driver_sql(ddl)
        conn.exec_driver_sql(
            "INSERT INTO fedstats_audit (at, dataset, kind, caller, request_key, epoch, "
            "epsilon_units, outcome) VALUES ('2025-03-01 10:00:00', 'cohort', 'mwu', "
            "'0123456789abcdef', NULL, 1, 0, 'released')")
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old-ledger.sqlite'}"
    url: str = request.getfixturevalue("pg_url")
    return url


def test_an_old_ledger_gains_the_new_columns_and_keeps_its_records(ledger_url: str) -> None:
    old_ledger(ledger_url)
    store = Store(ledger_url)
    try:
        columns = {c["name"] for c in sa.inspect(store.engine).get_columns("fedstats_audit")}
        assert {"request_id", "study_id", "analyst_id", "data_fingerprint",
                "question"} <= columns
        (old,) = read(store.engine, AuditQuery()).records
        assert (old.dataset, old.kind, old.outcome, old.epoch) == ("cohort", "mwu", "released", 1)
        assert (old.study_id, old.question) == (None, None)
        assert old.at == datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
        with store.engine.begin() as conn:
            assert migrate(conn) == []  # idempotent: nothing left to add
    finally:
        store.close()
    Store(ledger_url).close()  # a second start on the migrated ledger


@pytest.mark.anyio
async def test_a_center_on_an_old_ledger_records_the_whole_trail(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    url = f"sqlite:///{tmp_path / 'old-center.sqlite'}"
    old_ledger(url)
    settings = load_settings(write_toml(tmp_path / "old.toml", {**base_config, "ledger_url": url}))
    application = create_app(settings)
    try:
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
            r = await c.post(MWU, json={"variable": "x", "groups": ["a", "b"]},
                             headers=call("s-old", "dora", "r-old"))
            assert r.status_code == 200, r.text
            old, new = (await trail(c)).records
    finally:
        application.state.services.close()
    assert old.study_id is None
    assert (new.study_id, new.analyst_id, new.request_id) == ("s-old", "dora", "r-old")
    assert new.data_fingerprint is not None and new.question is not None


# -- the operator's command on a real center ----------------------------------------------------


@pytest.mark.process
def test_the_operator_exports_a_real_centers_trail_as_csv(tmp_path: Path) -> None:
    """A real center process serves releases (with the coordinator's headers); its operator
    reads the same records over HTTP and with ``fedstats center audit --format csv`` on the
    ledger, as on the center's host."""
    with center_process(tmp_path, {"cohort": 3.0},
                        operator_tokens=[OPERATOR_TOKEN]) as center, httpx.Client(
            base_url=center.url, trust_env=False, timeout=30) as http:
        for path, body, request_id in (
            (TABLE, {"variable": "x", "groups": ["a", "b"], "k": 10}, "p-table"),
            (DPQ, {**DP_BODY, "bounds": [0, 100]}, "p-dp"),
            (DPQ, {**DP_BODY, "bounds": [0, 100]}, "p-dp-again"),
        ):
            r = http.post(path, json=body, headers=call("s-proc", "erin", request_id))
            assert r.status_code == 200, r.text
        assert http.get(AUDIT, headers=AUTH).status_code == 403
        served = http.get(AUDIT, headers=OPERATOR)
        assert served.status_code == 200, served.text
        over_http = AuditPage.model_validate_json(served.content).records
        done = subprocess.run(
            [*fedstats(), "center", "audit", "--config", str(center.config), "--format", "csv",
             "--study", "s-proc"],
            env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [r["request_id"] for r in rows] == ["p-table", "p-dp", "p-dp-again"]
    assert [r["outcome"] for r in rows] == ["released", "released", "cached"]
    assert [float(r["epsilon"]) for r in rows] == [0.0, 0.4, 0.0]
    assert {r["study_id"] for r in rows} == {"s-proc"} and {r["analyst_id"] for r in rows} == {
        "erin"}
    assert [int(r["id"]) for r in rows] == [r.id for r in over_http]
    assert [r["question"] for r in rows] == [r.question for r in over_http]
    assert [r["data_fingerprint"] for r in rows] == [r.data_fingerprint for r in over_http]
    assert TOKEN not in done.stdout and OPERATOR_TOKEN not in done.stdout


def test_the_operator_command_filters_limits_and_writes_a_private_file(
    tmp_path: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(settings.ledger_url)
    try:
        with store.engine.begin() as conn:
            for i in range(5):
                write_record(conn, dataset="cohort" if i < 4 else "other", kind="mwu", caller="c",
                             outcome="released", epsilon_units=0, question=f'{{"i":{i}}}')
    finally:
        store.close()
    out = tmp_path / "trail.json"
    assert operator.audit(settings, fmt="json", out=out, dataset="cohort") == 0
    assert out.stat().st_mode & 0o777 == 0o600
    exported = json.loads(out.read_text())
    assert [r["question"] for r in exported] == [f'{{"i":{i}}}' for i in range(4)]
    capsys.readouterr()
    assert operator.audit(settings, limit=2) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].endswith('{"i":3}') and lines[1].endswith('{"i":4}')
    assert operator.audit(settings, limit=0) == 2


def test_the_operator_command_refuses_a_time_it_cannot_read(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["center", "audit", "--config", str(config_file), "--since", "last tuesday"])
    assert exited.value.code == 2
    assert "ISO 8601" in capsys.readouterr().err
    assert main(["center", "audit", "--config", str(config_file), "--since", "2026-01-01",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split(",")[:3] == ["id", "at", "dataset"]
