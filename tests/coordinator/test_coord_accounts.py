"""Analyst accounts, ownership, sharing, ε quotas, the analysts' provenance and the audit log:
the real coordinator app over in-process centers (``httpx.ASGITransport``), its store read
directly where the point is what is stored, and the ``fedstats coordinator`` command for real."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import sqlalchemy as sa
from argon2 import PasswordHasher
from fastapi import FastAPI

from coordinator.accounts import CACHE_TTL_S, Accounts
from coordinator.core.config import Settings
from coordinator.core.errors import CenterFailure, QuotaExceeded
from coordinator.db import QuotaRecord, Store
from coordinator.main import create_app
from coordinator.recording import RecordedCenter
from shared import kinds
from shared.protocol import DPQuantilesRequest
from tests.helpers.config import write_toml
from tests.helpers.coordinator import (
    ANALYST_TOKEN,
    AUTH,
    CENTER_TOKENS,
    CountingCenter,
    Federations,
    K,
    settings_for,
    sqlite_url,
)
from tests.helpers.processes import clean_env, fedstats
from tests.helpers.timing import scaled

pytestmark = pytest.mark.anyio

SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [{"kind": "table"}, {"kind": "mwu"}],
}
# Each center spends ε = 0.5 on its own box and 0.5 on the pooled one.
BOXES: dict[str, Any] = {**SPEC, "analyses": [
    {"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0, 100], "group": "trt"}]}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class CountingHasher(PasswordHasher):
    """argon2, counting the verifications it does."""

    verified = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.verified += 1
        return super().verify(hash, password)


class Coordinator:
    """The app, a client, its centers (each counting the calls it forwards) and three accounts:
    two analysts (ann, bob) and an admin."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient,
                 centers: dict[str, CountingCenter]) -> None:
        self.app, self.client, self.centers = app, client, centers
        self.accounts: Accounts = app.state.services.accounts
        self.store: Store = app.state.services.store
        made = {name: self.accounts.add(name, role) for name, role in
                (("ann", "analyst"), ("bob", "analyst"), ("ada", "admin"))}
        self.ids = {name: m.analyst.id for name, m in made.items()}
        self.auth = {name: bearer(m.token) for name, m in made.items()}
        self.tokens = {name: m.token for name, m in made.items()}

    async def create(self, who: str, spec: dict[str, Any] = SPEC) -> str:
        created = await self.client.post("/v1/studies", json=spec, headers=self.auth[who])
        assert created.status_code == 202, created.text
        study_id = str(created.json()["id"])
        await self.app.state.services.runner.wait(study_id)
        return study_id

    async def view(self, who: str, study_id: str) -> httpx.Response:
        return await self.client.get(f"/v1/studies/{study_id}", headers=self.auth[who])

    async def spent(self) -> dict[str, float]:
        """ε each center's ledger spent on ``cohort``, as the center itself says."""
        budgets = {cid: await c.port.budget() for cid, c in self.centers.items()}
        return {cid: b.datasets["cohort"].spent_epsilon for cid, b in budgets.items()}


@contextlib.asynccontextmanager
async def coordinator_over(settings: Settings, federation: Federations
                           ) -> AsyncIterator[Coordinator]:
    centers = {cid: CountingCenter(port) for cid, port in federation().items()}
    app = create_app(settings, centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield Coordinator(app, client, centers)
        finally:
            await app.state.services.aclose()


@pytest.fixture
async def coord(tmp_path: Path, federation: Federations) -> AsyncIterator[Coordinator]:
    async with coordinator_over(settings_for(sqlite_url(tmp_path)), federation) as c:
        yield c


# -- ownership and sharing ------------------------------------------------------------------


async def test_analysts_do_not_see_each_others_studies(coord: Coordinator) -> None:
    ann_study = await coord.create("ann", BOXES)
    bob_study = await coord.create("bob")
    c = coord.client
    listed = {who: [s["id"] for s in (await c.get("/v1/studies", headers=coord.auth[who])
                                      ).json()] for who in ("ann", "bob", "ada")}
    assert listed["ann"] == [ann_study] and listed["bob"] == [bob_study]
    assert sorted(listed["ada"]) == sorted([ann_study, bob_study])  # an admin sees all

    # Someone else's study is a 404 like a study that does not exist: read, figure, resume,
    # shares; the body says nothing more than for an unknown id.
    unknown = await coord.view("bob", "0" * 32)
    for method, path in [("GET", ""), ("GET", "?provenance=false"),
                         ("GET", "/analyses/0/figure"), ("POST", "/resume"),
                         ("GET", "/shares")]:
        answer = await c.request(method, f"/v1/studies/{ann_study}{path}",
                                 headers=coord.auth["bob"])
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"] == unknown.json()["error"] == "study_not_found"
    own = await coord.view("ann", ann_study)
    assert own.status_code == 200 and own.json()["created_by"] == coord.ids["ann"]
    figure = await c.get(f"/v1/studies/{ann_study}/analyses/0/figure", headers=coord.auth["ann"])
    assert figure.status_code == 200
    admin = await coord.view("ada", ann_study)
    assert admin.status_code == 200 and admin.json()["created_by"] == coord.ids["ann"]


async def test_sharing_lets_an_analyst_read_and_resume_and_can_be_withdrawn(
    coord: Coordinator,
) -> None:
    c = coord.client
    study = await coord.create("ann")
    shares = f"/v1/studies/{study}/shares"
    # Only the owner (or an admin) shares; with an account that exists.
    assert (await c.post(shares, json={"analyst_id": coord.ids["ann"]},
                         headers=coord.auth["ann"])).status_code == 422
    nobody = await c.post(shares, json={"analyst_id": "f" * 12}, headers=coord.auth["ann"])
    assert nobody.status_code == 404 and nobody.json()["error"] == "analyst_not_found"
    made = await c.post(shares, json={"analyst_id": coord.ids["bob"]}, headers=coord.auth["ann"])
    assert made.status_code == 201, made.text
    assert made.json()["analyst_id"] == coord.ids["bob"]
    assert made.json()["shared_by"] == coord.ids["ann"]

    assert (await coord.view("bob", study)).status_code == 200
    assert [s["id"] for s in (await c.get("/v1/studies", headers=coord.auth["bob"])).json()] == [
        study]
    # A shared analyst may not share further, nor withdraw shares: 403 (it knows the study).
    further = await c.post(shares, json={"analyst_id": coord.ids["ada"]},
                           headers=coord.auth["bob"])
    assert further.status_code == 403 and further.json()["error"] == "forbidden"
    assert (await c.delete(f"{shares}/{coord.ids['bob']}",
                           headers=coord.auth["bob"])).status_code == 403
    # ... but may resume it (here a study made resumable by hand, as a restart would).
    assert coord.store.set_status(study, "failed_resumable")
    resumed = await c.post(f"/v1/studies/{study}/resume", headers=coord.auth["bob"])
    assert resumed.status_code == 202, resumed.text
    await coord.app.state.services.runner.wait(study)
    assert (await coord.view("ann", study)).json()["status"] == "succeeded"

    withdrawn = await c.delete(f"{shares}/{coord.ids['bob']}", headers=coord.auth["ann"])
    assert withdrawn.status_code == 204
    assert (await coord.view("bob", study)).status_code == 404
    assert (await c.get("/v1/studies", headers=coord.auth["bob"])).json() == []
    again = await c.delete(f"{shares}/{coord.ids['bob']}", headers=coord.auth["ann"])
    assert again.status_code == 404
    def actions(who: str) -> list[str]:
        return [e.action for e in coord.store.audit_entries(analyst_id=coord.ids[who])]

    assert [a for a in actions("ann") if "share" in a] == ["study.unshare", "study.share"]
    assert "study.resume" in actions("bob")


# -- tokens ----------------------------------------------------------------------------------


async def test_a_revoked_token_is_refused_at_once_even_while_cached(coord: Coordinator) -> None:
    hasher = CountingHasher()
    now = [1000.0]
    coord.accounts.hasher, coord.accounts.clock = hasher, lambda: now[0]
    c = coord.client
    for _ in range(3):
        assert (await c.get("/v1/studies", headers=coord.auth["bob"])).status_code == 200
    assert hasher.verified == 1  # argon2 once; then the cache ...
    now[0] += CACHE_TTL_S + 1
    assert (await c.get("/v1/studies", headers=coord.auth["bob"])).status_code == 200
    assert hasher.verified == 2  # ... for a short time only
    # Revoked by another process on the same store (the operator's command line).
    other = Accounts(Store(coord.store.url))
    other.revoke(coord.ids["bob"])
    other.store.close()
    refused = await c.get("/v1/studies", headers=coord.auth["bob"])
    assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"
    assert hasher.verified == 2  # refused from the account's row, before any hashing
    # A wrong secret for a live account, a malformed account token: 401.
    forged = coord.tokens["ann"][:-4] + "AAAA"
    for token in (forged, "fsa_", "fsa_zz_x", "fsa_" + coord.ids["ann"]):
        assert (await c.get("/v1/studies", headers=bearer(token))).status_code == 401
    # The configured token still works, as its own analyst.
    assert (await c.get("/v1/studies", headers=AUTH)).status_code == 200


async def test_tokens_are_stored_only_as_argon2_hashes(
    coord: Coordinator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await coord.create("ann")
    await coord.client.get("/v1/studies", headers=bearer(coord.tokens["bob"] + "x"))  # refused
    path = coord.store.url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT id, token_hash FROM coordinator_analyst").fetchall()
        dump = "\n".join(db.iterdump())
    assert len(rows) == 3 and all(h.startswith("$argon2id$") for _, h in rows)
    for token in coord.tokens.values():
        # fsa_<id>_<secret>, and the secret (URL-safe base64) may itself hold "_": split where
        # the coordinator does (a split at the last "_" gave a few characters now and then,
        # which a dump of hashes can hold by chance).
        secret = token.removeprefix("fsa_").partition("_")[2]
        assert len(secret) >= 40
        assert token not in dump and secret not in dump
        assert token not in caplog.text and secret not in caplog.text
    assert ANALYST_TOKEN not in dump
    refused = [e for e in coord.store.audit_entries(action="auth.refused")]
    assert refused and refused[0].token_id is not None and refused[0].analyst_id is None
    assert refused[0].detail == f"claimed analyst {coord.ids['bob']}"


# -- provenance -------------------------------------------------------------------------------


async def test_an_analyst_sees_provenance_without_the_raw_numbers(coord: Coordinator) -> None:
    spec = {**SPEC, "analyses": [*SPEC["analyses"], *BOXES["analyses"]]}
    study = await coord.create("ann", spec)
    mine = (await coord.view("ann", study)).json()
    full = (await coord.view("ada", study)).json()
    assert mine["status"] == full["status"] == "succeeded"
    assert mine["result"] == full["result"] and len(mine["provenance"]) == len(full["provenance"])
    # No answer, no center table or run totals, no local U, no signed statement of limits.
    assert all(p["response"] is None for p in mine["provenance"])
    keys = {key for p in mine["provenance"] for key in [*p, *(p["request"] or {})]}
    assert not keys & {"counts", "runs", "totals", "statistic", "signed", "table", "below",
                       "sum_yj", "variance"}
    assert all(p["response"] is not None for p in full["provenance"])
    by_call = {p["call"]: p for p in mine["provenance"]}
    assert by_call["refine"]["request"] == {"variable": "crp", "groups": ["ctl", "trt"], "k": K}
    assert by_call["table"]["epsilon"] == by_call["refine"]["epsilon"] == 0.0
    box = by_call["dp_boxplot"]
    assert box["epsilon"] == 0.5 and box["request"]["epsilon"] == 0.5
    assert box["mechanism"] and box["noise_scale"] and box["noise_scale"] > 0
    tree = by_call["dp_tree_histogram"]
    assert tree["mechanism"] == "laplace" and tree["noise_scale"] > 0
    assert by_call["info"]["epsilon"] is None
    # What the analyst's provenance states is what the raw answers say.
    full_box = next(p for p in full["provenance"]
                    if p["call"] == "dp_boxplot" and p["center"] == box["center"])
    assert box["noise_scale"] == full_box["response"]["outlier_scale"]


# -- quotas ----------------------------------------------------------------------------------


async def test_a_quota_refuses_a_study_before_any_center_is_asked(coord: Coordinator) -> None:
    before = await coord.spent()
    coord.accounts.set_quota(coord.ids["ann"], "beta", "cohort", 0.6)
    refused = await coord.client.post("/v1/studies", json=BOXES, headers=coord.auth["ann"])
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert body["error"] == "quota_exceeded"
    assert (body["center"], body["dataset"], body["quota"], body["spent"], body["asked"]) == (
        "beta", "cohort", 0.6, 0.0, 1.0)
    assert {cid: sum(c.calls.values()) for cid, c in coord.centers.items()} == {
        "alpha": 0, "beta": 0, "gamma": 0}
    assert await coord.spent() == before
    assert coord.store.list_studies() == []
    # Not bob's quota, and a study without ε (tables, MWU) is not counted.
    await coord.create("bob", BOXES)
    await coord.create("ann")
    assert coord.store.quota(coord.ids["bob"], "beta", "cohort").spent == pytest.approx(1.0)
    assert coord.store.quota(coord.ids["ann"], "beta", "cohort").spent == 0.0
    refusals = coord.store.audit_entries(action="quota.refused")
    assert [r.analyst_id for r in refusals] == [coord.ids["ann"]]


async def test_concurrent_studies_cannot_spend_past_a_quota(coord: Coordinator) -> None:
    """Two studies pass the check at submit (nothing is spent yet); as they run, each release's
    ε is reserved before its center is asked, so they cannot both have all they need: one at
    least fails with quota_exceeded, and no center spent more than the quota (nor more than
    the coordinator counted)."""
    quota = 1.5
    for cid in coord.centers:
        coord.accounts.set_quota(coord.ids["ann"], cid, "cohort", quota)
    gate = asyncio.Event()
    for center in coord.centers.values():
        center.gate = gate
    before = await coord.spent()
    created = [await coord.client.post("/v1/studies", json=BOXES, headers=coord.auth["ann"])
               for _ in range(2)]
    assert [r.status_code for r in created] == [202, 202]
    gate.set()
    for r in created:
        await coord.app.state.services.runner.wait(r.json()["id"])
    views = [(await coord.view("ann", r.json()["id"])).json() for r in created]
    failed = [v for v in views if v["status"] != "succeeded"]
    assert failed, views
    for view in failed:
        assert "quota_exceeded" in json.dumps([view["error"], view["result"]])
    after = await coord.spent()
    for cid in coord.centers:
        counted = coord.store.quota(coord.ids["ann"], cid, "cohort").spent
        assert counted <= quota + 1e-9
        assert after[cid] - before[cid] <= counted + 1e-9


async def test_a_release_is_charged_once_and_a_recorded_one_is_free(
    tmp_path: Path, federation: Federations
) -> None:
    store = Store(sqlite_url(tmp_path))
    try:
        store.create_study("s" * 32, "{}", analyst_id="ann")
        store.set_quota("ann", "alpha", "cohort", 1.0)
        port = CountingCenter(federation()["alpha"])
        recorded = RecordedCenter(port, store, "s" * 32, analyst_id="ann")
        ask = DPQuantilesRequest(variable="crp", group="ctl", epsilon=0.75, bounds=(0.0, 100.0),
                                 levels=[0.5])
        first = await recorded.release(kinds.DP_QUANTILES, "cohort", ask)
        again = await recorded.release(kinds.DP_QUANTILES, "cohort", ask)  # from the records
        assert again == first and port.calls["dp_quantiles"] == 1
        assert store.quota("ann", "alpha", "cohort").spent == pytest.approx(0.75)
        more = ask.model_copy(update={"group": "trt"})
        with pytest.raises(QuotaExceeded) as caught:
            await recorded.release(kinds.DP_QUANTILES, "cohort", more)
        assert port.calls["dp_quantiles"] == 1  # not asked
        assert caught.value.body()["spent"] == pytest.approx(0.75)
        assert store.quota("ann", "alpha", "cohort").spent == pytest.approx(0.75)
        # A refusal by the center itself gives the reservation back.
        unknown = ask.model_copy(update={"group": "nope", "epsilon": 0.2})
        with pytest.raises(CenterFailure) as failure:
            await recorded.release(kinds.DP_QUANTILES, "cohort", unknown)
        assert failure.value.kind in ("error", "refused")
        assert store.quota("ann", "alpha", "cohort").spent == pytest.approx(0.75)
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_store_counts_spending_against_a_quota_all_or_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = sqlite_url(tmp_path) if backend == "sqlite" else request.getfixturevalue("pg_url")
    store = Store(url)
    try:
        assert store.reserve("a", "alpha", "cohort", 5.0) is None  # no quota: counted, no limit
        store.set_quota("a", "alpha", "cohort", 6.0)
        assert store.reserve("a", "alpha", "cohort", 1.0) is None  # reaches it exactly
        assert store.reserve("a", "alpha", "cohort", 0.1) == QuotaRecord(
            "a", "alpha", "cohort", 6.0, 6.0)  # refused, nothing counted
        assert store.quota("b", "alpha", "cohort").spent == 0.0
        store.refund("a", "alpha", "cohort", 2.0)
        assert store.quota("a", "alpha", "cohort").spent == pytest.approx(4.0)
        store.refund("a", "alpha", "cohort", 10.0)
        assert store.quota("a", "alpha", "cohort").spent == 0.0  # never below zero
        # Concurrent reservations (threads, each its own connection) never overshoot.
        store.set_quota("a", "alpha", "cohort", 3.0)
        with ThreadPoolExecutor(8) as pool:
            refused = list(pool.map(lambda _: store.reserve("a", "alpha", "cohort", 1.0),
                                    range(8)))
        assert sum(r is None for r in refused) == 3
        assert store.quota("a", "alpha", "cohort").spent == pytest.approx(3.0)
        assert store.set_quota("a", "alpha", "cohort", None).epsilon is None  # removed
        assert store.reserve("a", "alpha", "cohort", 100.0) is None
    finally:
        store.close()


# -- admin API and audit ---------------------------------------------------------------------


async def test_admins_manage_accounts_and_read_the_audit_log(coord: Coordinator) -> None:
    c, admin = coord.client, coord.auth["ada"]
    for path, method in [("/v1/audit", "GET"), ("/v1/analysts", "GET"),
                         ("/v1/analysts", "POST")]:
        answer = await c.request(method, path, headers=coord.auth["ann"],
                                 json={"name": "eve"} if method == "POST" else None)
        assert answer.status_code == 403 and answer.json()["error"] == "forbidden"
    made = await c.post("/v1/analysts", json={"name": "Eve", "role": "analyst"}, headers=admin)
    assert made.status_code == 201
    eve = made.json()
    assert eve["token"].startswith(f"fsa_{eve['id']}_")
    assert (await c.get("/v1/studies", headers=bearer(eve["token"]))).status_code == 200
    listed = (await c.get("/v1/analysts", headers=admin)).json()
    assert [a["name"] for a in listed] == ["ann", "bob", "ada", "Eve"]
    assert all("token" not in a and "token_hash" not in a for a in listed)
    quota = await c.put(f"/v1/analysts/{eve['id']}/quotas/alpha/cohort", json={"epsilon": 2},
                        headers=admin)
    assert quota.json() == {"analyst_id": eve["id"], "center": "alpha", "dataset": "cohort",
                            "epsilon": 2.0, "spent": 0.0}
    assert (await c.put(f"/v1/analysts/{eve['id']}/quotas/nowhere/cohort", json={"epsilon": 2},
                        headers=admin)).status_code == 422
    own = await c.get(f"/v1/analysts/{eve['id']}/quotas", headers=bearer(eve["token"]))
    assert [q["epsilon"] for q in own.json()] == [2.0]
    assert (await c.get(f"/v1/analysts/{eve['id']}/quotas",
                        headers=coord.auth["ann"])).status_code == 404
    revoked = await c.post(f"/v1/analysts/{eve['id']}/revoke", headers=admin)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert (await c.get("/v1/studies", headers=bearer(eve["token"]))).status_code == 401

    study = await coord.create("ann")
    await coord.view("ann", study)
    entries = (await c.get("/v1/audit", params={"limit": 1000}, headers=admin)).json()
    actions = [e["action"] for e in entries]
    for action in ("analyst.add", "quota.set", "analyst.revoke", "study.create", "study.read",
                   "auth.refused"):
        assert action in actions, action
    read = next(e for e in entries if e["action"] == "study.read")
    assert (read["analyst_id"], read["target"]) == (coord.ids["ann"], study)
    assert read["request_id"] and read["token_id"]
    only = (await c.get("/v1/audit", params={"action": "study.create"}, headers=admin)).json()
    assert [e["target"] for e in only] == [study]
    paged = (await c.get("/v1/audit", params={"limit": 2, "offset": 1}, headers=admin)).json()
    assert [e["id"] for e in paged] == [e["id"] for e in entries[1:3]]
    assert not any(t in json.dumps(entries) for t in (eve["token"], *coord.tokens.values()))


# -- settings and migration ------------------------------------------------------------------


async def test_without_configured_tokens_the_coordinator_starts_and_says_how_to_get_in(
    tmp_path: Path, federation: Federations, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(sqlite_url(tmp_path), analyst_tokens=[])
    async with coordinator_over(settings, federation) as coord:
        assert "no analyst can call this coordinator" in caplog.text
        assert "fedstats coordinator analyst add" in caplog.text
        assert (await coord.client.get("/v1/studies", headers=AUTH)).status_code == 401
        assert (await coord.client.get("/v1/studies",
                                       headers=coord.auth["ann"])).status_code == 200
    caplog.clear()
    async with coordinator_over(settings_for(sqlite_url(tmp_path)), federation):
        assert "accounts are recommended" in caplog.text
        assert "no analyst can call" not in caplog.text


OLD_SCHEMA = """
CREATE TABLE coordinator_study (
    id VARCHAR(36) NOT NULL, spec TEXT NOT NULL, status VARCHAR(32) NOT NULL, result TEXT,
    error TEXT, created_by VARCHAR(16), created_at VARCHAR(40) NOT NULL,
    updated_at VARCHAR(40) NOT NULL, PRIMARY KEY (id));
CREATE INDEX ix_coordinator_study_status ON coordinator_study (status);
CREATE TABLE coordinator_release (
    id INTEGER NOT NULL, study_id VARCHAR(36) NOT NULL, center VARCHAR(64) NOT NULL,
    kind VARCHAR(32) NOT NULL, request_key VARCHAR(64) NOT NULL, request TEXT NOT NULL,
    response TEXT NOT NULL, received_at VARCHAR(40) NOT NULL, PRIMARY KEY (id),
    UNIQUE (study_id, center, request_key),
    FOREIGN KEY(study_id) REFERENCES coordinator_study (id) ON DELETE CASCADE);
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_store_made_by_an_older_version_keeps_opening(
    backend: str, tmp_path: Path, federation: Federations, request: pytest.FixtureRequest
) -> None:
    """The tables of the version before accounts, with a study its configured token made: the
    store opens (twice), the new tables and column are there, and the study is still its
    token's, which lists and reads it; no other analyst sees it."""
    url = sqlite_url(tmp_path) if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in OLD_SCHEMA.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement.replace("INTEGER NOT NULL, study_id",
                                                       "SERIAL NOT NULL, study_id")
                                     if backend == "postgresql" else statement)
        spec = json.dumps({**SPEC})
        fingerprint = __import__("hashlib").sha256(ANALYST_TOKEN.encode()).hexdigest()[:16]
        conn.exec_driver_sql(
            "INSERT INTO coordinator_study (id, spec, status, result, error, created_by, "
            "created_at, updated_at) VALUES ('old', %s, 'failed', NULL, NULL, %s, "
            "'2025-01-01T00:00:00+00:00', '2025-01-01T00:00:00+00:00')"
            if backend == "postgresql" else
            "INSERT INTO coordinator_study (id, spec, status, result, error, created_by, "
            "created_at, updated_at) VALUES ('old', ?, 'failed', NULL, NULL, ?, "
            "'2025-01-01T00:00:00+00:00', '2025-01-01T00:00:00+00:00')",
            (spec, fingerprint))
    engine.dispose()
    for _ in range(2):
        Store(url).close()
    async with coordinator_over(settings_for(url), federation) as coord:
        record = coord.store.get_study("old")
        assert record is not None and record.analyst_id == f"config-{fingerprint}"
        listed = (await coord.client.get("/v1/studies", headers=AUTH)).json()
        assert [s["id"] for s in listed] == ["old"]
        assert (await coord.client.get("/v1/studies/old", headers=AUTH)).status_code == 200
        assert (await coord.view("ann", "old")).status_code == 404
        columns = {c["name"] for c in sa.inspect(coord.store.engine).get_columns(
            "coordinator_study")}
        assert "analyst_id" in columns


# -- the command line --------------------------------------------------------------------------


@pytest.mark.process
def test_the_operator_manages_accounts_with_the_command_line(tmp_path: Path) -> None:
    """``fedstats coordinator analyst add|list|quota|revoke`` and ``audit`` on the store a
    running coordinator uses: the printed token works at once, and is refused at once after
    ``revoke`` (another process), though the coordinator had verified it."""
    config = write_toml(tmp_path / "coordinator.toml", {
        "store_url": sqlite_url(tmp_path),
        "centers": {cid: {"url": f"http://{cid}.test:8700", "token": token}
                    for cid, token in CENTER_TOKENS.items()},
    })

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*fedstats(), "coordinator", *args, "--config", str(config)],
                              env=clean_env(), capture_output=True, text=True, timeout=scaled(120))

    added = cli("analyst", "add", "--name", "Grace H", "--role", "admin")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    analyst_id = token.split("_")[1]
    assert token.startswith("fsa_") and token not in added.stderr
    assert "shown this once" in added.stderr
    assert cli("analyst", "add", "--name", " ").returncode == 2
    quota = cli("analyst", "quota", analyst_id, "--center", "alpha", "--dataset", "cohort",
                "--epsilon", "2.5")
    assert quota.returncode == 0, quota.stderr
    assert cli("analyst", "quota", analyst_id, "--center", "nowhere", "--dataset", "cohort",
               "--epsilon", "1").returncode == 2
    listed = cli("analyst", "list")
    assert listed.returncode == 0 and analyst_id in listed.stdout and "Grace H" in listed.stdout
    assert "2.5" in listed.stdout and token not in listed.stdout

    settings = Settings.load(config)

    async def use(expected: int) -> None:
        app = create_app(settings, centers={})
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            for _ in range(2):
                answer = await client.get("/v1/studies", headers=bearer(token))
                assert answer.status_code == expected, answer.text
        await app.state.services.aclose()

    asyncio.run(use(200))
    revoked = cli("analyst", "revoke", analyst_id)
    assert revoked.returncode == 0, revoked.stderr
    assert cli("analyst", "revoke", "f" * 12).returncode == 2
    asyncio.run(use(401))

    exported = cli("audit", "--format", "json")
    assert exported.returncode == 0, exported.stderr
    actions = [e["action"] for e in json.loads(exported.stdout)]
    assert actions[:3] == ["auth.refused", "auth.refused", "analyst.revoke"]
    assert {"analyst.add", "quota.set"} <= set(actions)
    csv_out = tmp_path / "audit.csv"
    assert cli("audit", "--format", "csv", "--action", "quota.set", "--out",
               str(csv_out)).returncode == 0
    lines = csv_out.read_text().splitlines()
    assert lines[0].startswith("id,at,analyst_id") and len(lines) == 2
    assert csv_out.stat().st_mode & 0o777 == 0o600
    assert token not in exported.stdout + csv_out.read_text()


# -- token lifetimes: expiry and rotation ------------------------------------------------------


async def test_an_expired_token_is_refused_with_a_clear_401(coord: Coordinator) -> None:
    made = coord.accounts.add("eve", "analyst", expires_in_days=30)
    assert made.analyst.expires_at is not None and not made.analyst.expired()
    ok = await coord.client.get("/v1/studies", headers=bearer(made.token))
    assert ok.status_code == 200  # verified and remembered
    # Its expiry passes (set in the store, as time would): refused at once, cache or not.
    with coord.store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE coordinator_analyst SET expires_at = '2000-01-01T00:00:00' "
                             "WHERE id = ?", (made.analyst.id,))
    refused = await coord.client.get("/v1/studies", headers=bearer(made.token))
    assert refused.status_code == 401
    assert refused.json()["detail"] == (
        f"the token of analyst {made.analyst.id} expired at 2000-01-01T00:00:00 UTC; ask the "
        "coordinator's operator for a new one (fedstats coordinator analyst rotate)")
    # A wrong token naming the account learns nothing of its expiry.
    guess = f"fsa_{made.analyst.id}_{'x' * 43}"
    wrong = await coord.client.get("/v1/studies", headers=bearer(guess))
    assert wrong.status_code == 401 and "expired" not in wrong.text
    # The admin sees the expiry; a rotation gives a working token that never expires.
    listed = (await coord.client.get("/v1/analysts", headers=coord.auth["ada"])).json()
    assert next(a for a in listed if a["id"] == made.analyst.id)["expires_at"].startswith(
        "2000-01-01")
    rotated = await coord.client.post(f"/v1/analysts/{made.analyst.id}/rotate",
                                      headers=coord.auth["ada"])
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["expires_at"] is None
    fresh = rotated.json()["token"]
    assert (await coord.client.get("/v1/studies", headers=bearer(fresh))).status_code == 200
    assert (await coord.client.get("/v1/studies", headers=bearer(made.token))).status_code == 401


async def test_a_rotated_token_is_refused_at_once_even_while_cached_elsewhere(
    coord: Coordinator
) -> None:
    """Another process's accounts (the CLI on the same store) rotate the token: this
    coordinator had verified the old one and still remembers it, yet refuses it next."""
    old = coord.tokens["bob"]
    assert (await coord.client.get("/v1/studies", headers=coord.auth["bob"])).status_code == 200
    other = Accounts(Store(str(coord.store.engine.url)))
    new = other.rotate(coord.ids["bob"], expires_in_days=7)
    assert new.token != old and new.analyst.expires_at is not None
    assert (await coord.client.get("/v1/studies", headers=bearer(old))).status_code == 401
    assert (await coord.client.get("/v1/studies", headers=bearer(new.token))).status_code == 200
    with pytest.raises(ValueError, match="expiry"):
        other.rotate(coord.ids["bob"], expires_in_days=0)
    other.store.close()


def test_the_cli_adds_with_an_expiry_lists_it_and_rotates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedstats_cli.cli import main

    config = write_toml(tmp_path / "coordinator.toml", {
        "store_url": sqlite_url(tmp_path),
        "centers": {"alpha": {"url": "http://alpha.test:8700"}},
    })
    run = lambda *a: main(["coordinator", "analyst", *a, "--config", str(config)])  # noqa: E731
    assert run("add", "--name", "Temp", "--expires-in", "90") == 0
    out = capsys.readouterr()
    token = out.out.strip()
    analyst_id = token.split("_")[1]
    assert "expiring" in out.err
    assert run("list") == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if analyst_id in line)
    assert row.split()[4][:2] == "20"  # an expiry date, not "-"
    assert run("rotate", analyst_id) == 0
    rotated = capsys.readouterr()
    assert rotated.out.strip().startswith(f"fsa_{analyst_id}_")
    assert rotated.out.strip() != token and "never expiring" in rotated.err
    assert run("add", "--name", "Bad", "--expires-in", "-1") == 2
    assert run("rotate", "f" * 12) == 2
