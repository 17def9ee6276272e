"""What scripts and schedulers rely on, over in-process centers (the analyst API through
``httpx.ASGITransport``): a submission repeated with its ``Idempotency-Key`` gets the study the
first made, started once (also when the repeats arrive together), and a key reused with another
spec is refused; a running study is cancelled, keeps what it received, and a resume pays nothing
twice (the centers' own ledgers say so); a study's end is announced to a real local HTTP
receiver, which checks the signature with its own HMAC; the OpenAPI schema is served to a caller
with a token only (docs/coordinator.md, "Idempotent submission", "Cancel", "Completion webhook").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.core.config import ConfigError, Settings
from coordinator.db import Store
from coordinator.main import create_app
from shared.kinds import Kind, Rel, Req
from tests.helpers.coordinator import (
    ANALYST_TOKEN,
    AUTH,
    CountingCenter,
    Federations,
    K,
    admin_auth,
    settings_for,
    sqlite_url,
)
from tests.helpers.timing import scaled

pytestmark = pytest.mark.anyio

BOX_EPSILON = 1.0
SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [
        {"kind": "table"},
        {"kind": "dp_boxplot", "group": "trt", "epsilon": BOX_EPSILON, "bounds": [0.0, 100.0],
         "depth": 4, "branching": 4},
    ],
}
# What one run of SPEC costs each center: its own box and its share of the pooled one.
STUDY_EPSILON = 2 * BOX_EPSILON
SECRET = "webhook-" + "0123456789abcdef-secret"


class Running:
    def __init__(self, app: Any, client: httpx.AsyncClient) -> None:
        self.app, self.client = app, client
        self.services = app.state.services

    async def create(self, spec: Mapping[str, Any], key: str | None = None,
                     auth: Mapping[str, str] = AUTH) -> httpx.Response:
        headers = {**auth, **({"Idempotency-Key": key} if key is not None else {})}
        return await self.client.post("/v1/studies", json=dict(spec), headers=headers)

    async def view(self, study_id: str, auth: Mapping[str, str] = AUTH) -> dict[str, Any]:
        await self.services.runner.wait(study_id)
        answer = await self.client.get(f"/v1/studies/{study_id}", headers=auth)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    async def cancel(self, study_id: str, auth: Mapping[str, str] = AUTH) -> httpx.Response:
        return await self.client.post(f"/v1/studies/{study_id}/cancel", headers=auth)

    def studies(self) -> list[str]:
        return [r.id for r in self.services.store.list_studies(limit=1000)]


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, centers: Mapping[str, Any], **settings: Any
                  ) -> AsyncIterator[Running]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    app = create_app(settings_for(sqlite_url(tmp_path), **settings), centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield Running(app, client)
        finally:
            await app.state.services.aclose()


def counted(federation: Federations) -> dict[str, CountingCenter]:
    return {cid: CountingCenter(port) for cid, port in federation().items()}


def tables_asked(centers: Mapping[str, CountingCenter]) -> dict[str, int]:
    """How many table releases (built or refined) each center was asked for."""
    return {cid: c.calls["table"] + c.calls["refine"] for cid, c in centers.items()}


async def spent(centers: Mapping[str, CountingCenter]) -> dict[str, float]:
    """ε each center's own ledger has spent on the dataset."""
    out = {}
    for cid, center in centers.items():
        budget = (await center.port.budget()).datasets["cohort"]
        out[cid] = budget.total_epsilon - budget.remaining_epsilon
    return out


def analyst_auth(app: Any, name: str) -> dict[str, str]:
    made = app.state.services.accounts.add(name, "analyst")
    return {"Authorization": f"Bearer {made.token}"}


# -- idempotent submission -----------------------------------------------------------------------


async def test_a_repeated_key_returns_the_first_study_started_once(
    tmp_path: Path, federation: Federations
) -> None:
    centers = counted(federation)
    async with serving(tmp_path, centers) as r:
        first = await r.create(SPEC, key="nightly 2026-01-31")
        assert first.status_code == 202, first.text
        assert "Idempotent-Replayed" not in first.headers
        study_id = first.json()["id"]
        assert (await r.view(study_id))["status"] == "succeeded"
        again = await r.create(SPEC, key="nightly 2026-01-31")
        assert again.status_code == 202
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json() == {**first.json(), "status": "succeeded"}  # the same study, now
        assert again.headers["Location"] == first.headers["Location"]
        assert r.studies() == [study_id]
        # Asked and paid once: one table release per center, one study's ε in each ledger.
        assert tables_asked(centers) == {cid: 1 for cid in centers}
        assert await spent(centers) == {cid: STUDY_EPSILON for cid in centers}
        # Another key (or none) is another study.
        other = await r.create(SPEC, key="nightly 2026-02-01")
        assert other.json()["id"] != study_id
        await r.view(other.json()["id"])
        audit = r.services.store.audit_entries(action="study.create")
        assert [a.target for a in audit] == [other.json()["id"], study_id]


async def test_the_same_key_with_another_spec_is_refused(
    tmp_path: Path, federation: Federations
) -> None:
    async with serving(tmp_path, counted(federation)) as r:
        first = await r.create(SPEC, key="k1")
        study_id = first.json()["id"]
        changed = await r.create({**SPEC, "k": K + 1}, key="k1")
        assert changed.status_code == 409
        body = changed.json()
        assert body["error"] == "idempotency_conflict"
        assert body["study_id"] == study_id
        assert "different spec" in body["detail"]
        await r.view(study_id)
        assert r.studies() == [study_id]


async def test_keys_belong_to_one_analyst(tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as r:
        ann, bob = analyst_auth(r.app, "Ann"), analyst_auth(r.app, "Bob")
        of_ann = (await r.create(SPEC, key="daily", auth=ann)).json()["id"]
        of_bob = await r.create(SPEC, key="daily", auth=bob)
        assert of_bob.status_code == 202 and "Idempotent-Replayed" not in of_bob.headers
        assert of_bob.json()["id"] != of_ann  # Bob neither gets nor learns of Ann's study
        for study_id in (of_ann, of_bob.json()["id"]):
            await r.services.runner.wait(study_id)


async def test_concurrent_repeats_create_one_study(
    tmp_path: Path, federation: Federations
) -> None:
    centers = counted(federation)
    async with serving(tmp_path, centers) as r:
        answers = await asyncio.gather(*(r.create(SPEC, key="burst") for _ in range(8)))
        assert {a.status_code for a in answers} == {202}
        ids = {a.json()["id"] for a in answers}
        assert len(ids) == 1 and r.studies() == list(ids)
        assert (await r.view(ids.pop()))["status"] == "succeeded"
        assert tables_asked(centers) == {cid: 1 for cid in centers}
        assert await spent(centers) == {cid: STUDY_EPSILON for cid in centers}



def test_the_store_creates_one_study_per_key_under_a_race(store: Store) -> None:
    """Threads insert at the same moment: the unique key lets one through, the others get its
    study (not a check and then an insert, which two could pass together)."""
    barrier = threading.Barrier(6)
    got: list[str] = []

    def create(i: int) -> None:
        barrier.wait()
        got.append(store.create_study(f"{i:032d}", "{}", analyst_id="ann",
                                      idempotency_key="same").id)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and len(set(got)) == 1
    assert [r.id for r in store.list_studies()] == got[:1]
    assert store.keyed_study("ann", "same") is not None
    assert store.keyed_study("bob", "same") is None


@pytest.mark.parametrize("key", ["", "x" * 129, "tab\there"])
async def test_a_bad_key_is_refused_naming_the_header(
    tmp_path: Path, federation: Federations, key: str
) -> None:
    async with serving(tmp_path, counted(federation)) as r:
        answer = await r.create(SPEC, key=key)
        assert answer.status_code == 422
        assert answer.json()["error"] == "validation_error"
        assert "Idempotency-Key" in answer.text
        assert r.studies() == []


# -- cancel --------------------------------------------------------------------------------------


class HeldBoxes(CountingCenter):
    """A center whose DP boxplot releases wait for ``hold`` before the center is asked."""

    def __init__(self, port: Any, hold: asyncio.Event) -> None:
        super().__init__(port)
        self.hold = hold

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        if kind.name.startswith("dp_"):
            await self.hold.wait()
        return await super().release(kind, dataset, request)


async def test_a_running_study_is_cancelled_and_resumed_without_paying_twice(
    tmp_path: Path, federation: Federations
) -> None:
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    async with serving(tmp_path, centers) as r:
        study_id = (await r.create(SPEC)).json()["id"]
        # The table is built (its releases recorded) while the boxes wait.
        for _ in range(500):
            if r.services.store.count_releases(study_id) >= 3 + 3 and set(
                    tables_asked(centers).values()) == {1}:
                break
            await asyncio.sleep(0.02)
        received = r.services.store.count_releases(study_id)
        assert received >= 6  # info and a table release per center
        cancelled = await r.cancel(study_id)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        view = await r.view(study_id)
        assert view["status"] == "cancelled"
        assert view["error"]["error"] == "cancelled"
        assert view["releases_received"] == received  # what it received stays recorded
        assert await spent(centers) == {cid: 0.0 for cid in centers}  # no box was asked
        assert [a.target for a in r.services.store.audit_entries(action="study.cancel")] == [
            study_id]
        assert (await r.cancel(study_id)).status_code == 409  # cancelled is final

        hold.set()
        resumed = await r.client.post(f"/v1/studies/{study_id}/resume", headers=AUTH)
        assert resumed.status_code == 202, resumed.text
        view = await r.view(study_id)
        assert view["status"] == "succeeded", view["error"]
        # The table was not asked again; the boxes once; each ledger paid one study.
        assert tables_asked(centers) == {cid: 1 for cid in centers}
        assert await spent(centers) == {cid: STUDY_EPSILON for cid in centers}


async def test_who_may_cancel(tmp_path: Path, federation: Federations) -> None:
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    async with serving(tmp_path, centers) as r:
        ann, bob = analyst_auth(r.app, "Ann"), analyst_auth(r.app, "Bob")
        admin = admin_auth(r.app)
        study_id = (await r.create(SPEC, auth=ann)).json()["id"]
        stranger = await r.cancel(study_id, auth=bob)
        assert stranger.status_code == 404 and stranger.json()["error"] == "study_not_found"
        bob_id = (await r.client.get("/v1/analysts", headers=admin)).json()
        bob_id = next(a["id"] for a in bob_id if a["name"] == "Bob")
        shared = await r.client.post(f"/v1/studies/{study_id}/shares", headers=ann,
                                     json={"analyst_id": bob_id})
        assert shared.status_code in (200, 201), shared.text
        reader = await r.cancel(study_id, auth=bob)
        assert reader.status_code == 403 and "cancel it" in reader.json()["detail"]
        assert (await r.cancel("0" * 32, auth=ann)).status_code == 404
        assert (await r.cancel(study_id, auth=admin)).json()["status"] == "cancelled"
        hold.set()


async def test_a_finished_study_cannot_be_cancelled(
    tmp_path: Path, federation: Federations
) -> None:
    async with serving(tmp_path, counted(federation)) as r:
        study_id = (await r.create(SPEC)).json()["id"]
        assert (await r.view(study_id))["status"] == "succeeded"
        refused = await r.cancel(study_id)
        assert refused.status_code == 409
        assert refused.json()["error"] == "conflict" and "succeeded" in refused.json()["detail"]
        assert (await r.view(study_id))["status"] == "succeeded"
        assert r.services.store.audit_entries(action="study.cancel") == []


# -- completion webhook --------------------------------------------------------------------------


@dataclass
class Receiver:
    """A real HTTP server on a loopback port that keeps every POST and answers the next of
    ``codes`` (then 200); ``hold`` (when cleared) keeps answers back."""

    url: str
    posts: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    hold: threading.Event = field(default_factory=threading.Event)

    def wait_for(self, n: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + scaled(timeout_s)
        while len(self.posts) < n and time.monotonic() < deadline:
            time.sleep(0.02)


@contextlib.contextmanager
def receiver() -> Iterator[Receiver]:
    made = Receiver(url="")
    made.hold.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            made.hold.wait(10)
            made.posts.append((self.path, dict(self.headers.items()), body))
            code = made.codes.pop(0) if made.codes else 200
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        made.hold.set()
        server.shutdown()
        server.server_close()


def webhook_settings(url: str, **more: Any) -> dict[str, Any]:
    return {"webhook_allowed_prefixes": [f"{url}/hooks/"], "webhook_secret": SECRET,
            "webhook_backoff_s": 0.0, **more}


def checked(post: tuple[str, dict[str, str], bytes]) -> dict[str, Any]:
    """The notice, after the receiver's own checks: the signature is the HMAC-SHA256 of the
    exact body under the shared secret, the timestamp header is the body's, and recent."""
    _, headers, body = post
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Fedstats-Signature"], f"sha256={expected}")
    notice = json.loads(body)
    assert headers["X-Fedstats-Timestamp"] == str(notice["timestamp"])
    assert headers["X-Fedstats-Delivery"] == notice["delivery"]
    assert abs(time.time() - notice["timestamp"]) < 60
    assert headers["Content-Type"] == "application/json"
    return dict(notice)


async def test_the_end_of_a_study_is_announced_signed_without_blocking_it(
    tmp_path: Path, federation: Federations
) -> None:
    with receiver() as hook:
        hook.hold.clear()  # the receiver takes its time
        async with serving(tmp_path, counted(federation), **webhook_settings(hook.url)) as r:
            spec = {**SPEC, "webhook_url": f"{hook.url}/hooks/study?team=stats"}
            study_id = (await r.create(spec)).json()["id"]
            view = await r.view(study_id)
            assert view["status"] == "succeeded"  # ended while the receiver still holds on
            assert view["spec"]["webhook_url"] == spec["webhook_url"]
            assert hook.posts == []
            hook.hold.set()
            await r.services.runner.notifier.wait()
        (post,) = hook.posts
        assert post[0] == "/hooks/study?team=stats"
        notice = checked(post)
        assert notice == {"event": "study.finished", "delivery": notice["delivery"],
                          "study_id": study_id, "status": "succeeded",
                          "timestamp": notice["timestamp"],
                          "links": {"study": f"/v1/studies/{study_id}"}}
        # Forged or altered, it would not verify.
        assert not hmac.compare_digest(
            post[1]["X-Fedstats-Signature"],
            "sha256=" + hmac.new(SECRET.encode(), post[2].replace(b"succeeded", b"failed"),
                                 hashlib.sha256).hexdigest())


async def test_a_failed_delivery_is_tried_again_and_a_cancel_is_announced(
    tmp_path: Path, federation: Federations
) -> None:
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    with receiver() as hook:
        hook.codes = [503, 502]
        async with serving(tmp_path, centers, **webhook_settings(hook.url)) as r:
            spec = {**SPEC, "webhook_url": f"{hook.url}/hooks/"}
            study_id = (await r.create(spec)).json()["id"]
            assert (await r.cancel(study_id)).status_code == 200
            await r.services.runner.notifier.wait()
            hold.set()
        assert len(hook.posts) == 3
        notices = [checked(p) for p in hook.posts]
        assert {n["status"] for n in notices} == {"cancelled"}
        assert len({n["delivery"] for n in notices}) == 1  # one notice, delivered on try 3
        assert len({p[2] for p in hook.posts}) == 1


async def test_an_unreachable_receiver_is_logged_by_its_origin_only(
    tmp_path: Path, federation: Federations, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="coordinator.webhooks")
    # A port bound and never listened on: every attempt is refused, and while the socket is
    # held nothing else on the machine can take the port and answer (a port merely closed
    # could be handed to another process and answer, say, 401).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as dead:
        dead.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{dead.getsockname()[1]}"
        await _unreachable_receiver_run(tmp_path, federation, caplog, url)


async def _unreachable_receiver_run(tmp_path: Path, federation: Federations,
                                    caplog: pytest.LogCaptureFixture, url: str) -> None:
    async with serving(tmp_path, counted(federation),
                       **webhook_settings(url, webhook_attempts=2)) as r:
        secret_path = f"{url}/hooks/T0KEN-in-path-s3cr3t"
        study_id = (await r.create({**SPEC, "webhook_url": secret_path})).json()["id"]
        assert (await r.view(study_id))["status"] == "succeeded"
        await r.services.runner.notifier.wait()
    failed = [m for m in caplog.messages if "not sent" in m]
    assert len(failed) == 1 and url in failed[0] and "after 2 attempt(s)" in failed[0]
    assert "s3cr3t" not in caplog.text and SECRET not in caplog.text


async def test_a_webhook_outside_the_allowed_prefixes_is_refused(
    tmp_path: Path, federation: Federations
) -> None:
    with receiver() as hook:
        port = hook.url.rsplit(":", 1)[1]
        async with serving(tmp_path, counted(federation), **webhook_settings(hook.url)) as r:
            for url in (f"{hook.url}/other/", f"{hook.url}/hooks",  # not under the prefix
                        f"http://127.0.0.1:{port}0/hooks/",  # another port
                        "http://169.254.169.254/latest/meta-data/",  # a cloud's metadata
                        f"{hook.url}/hooks/\\..\\admin"):
                refused = await r.create({**SPEC, "webhook_url": url})
                assert refused.status_code == 422, url
                assert refused.json()["fields"] == ["body.webhook_url"]
            assert r.studies() == []
        async with serving(tmp_path / "off", counted(federation)) as r:  # webhooks off
            refused = await r.create({**SPEC, "webhook_url": f"{hook.url}/hooks/"})
            assert refused.status_code == 422
            assert "sends no webhooks" in refused.json()["detail"]
        assert hook.posts == []


# Each way a URL's string begins with an allowed prefix while a server reads it elsewhere; under
# the old string check the first was accepted and POSTed to /admin/x.
TRICKS = [
    ("/hooks/../admin/x", "dot segment"),
    ("/hooks/./../admin/x", "dot segment"),
    ("/hooks/..;/admin/x", "dot segment"),
    ("/hooks/%2e%2e/admin/x", "percent-encoded dot"),
    ("/hooks/%2E%2E/admin/x", "percent-encoded dot"),
    ("/hooks/.%2e/admin/x", "percent-encoded dot"),
    ("/hooks/..%2fadmin/x", "percent-encoded dot"),
    ("/hooks/x%2F..%2F..%2Fadmin", "percent-encoded dot"),
    ("/hooks/..%5cadmin", "percent-encoded dot"),
    ("/hooks/%252e%252e/admin/x", "percent-encoded dot"),
    ("/hooks/\\..\\admin", "backslash"),
    ("/hooks//admin", "empty path segment"),
    ("/hooks/x#/../admin", "fragment"),
    ("/hooks/%zz", "%XX"),
    ("/hooks/ admin", "blank"),
    ("/hooks/\u00e9", "non-ASCII"),
]


async def test_webhook_tricks_are_refused_at_submission(
    tmp_path: Path, federation: Federations
) -> None:
    """Parsed, not prefixed: each trick is a 422 naming body.webhook_url and saying what the URL
    must not hold; userinfo that puts the allowed host before an @ is refused too; nothing is
    created, nothing is POSTed."""
    with receiver() as hook:
        host_port = hook.url.removeprefix("http://")
        urls = [(f"{hook.url}{path}", why) for path, why in TRICKS] + [
            (f"http://user@{host_port}/hooks/x", "user information"),
            (f"http://{host_port}@169.254.169.254/hooks/x", "user information"),
            (f"http://{host_port}%2f@evil/hooks/x", "user information"),
            (f"http://127.0.0.1.nip.io:{host_port.rsplit(':', 1)[1]}/hooks/x", "below one of"),
        ]
        async with serving(tmp_path, counted(federation), **webhook_settings(hook.url)) as r:
            for url, why in urls:
                refused = await r.create({**SPEC, "webhook_url": url})
                assert refused.status_code == 422, url
                assert refused.json()["error"] == "invalid_study", url
                assert refused.json()["fields"] == ["body.webhook_url"], url
                assert why in refused.json()["detail"], (url, refused.json()["detail"])
            assert r.studies() == []
        assert hook.posts == []


async def test_the_normalized_webhook_url_is_the_one_called(
    tmp_path: Path, federation: Federations
) -> None:
    """Unreserved characters percent-encoded: accepted, and the POST goes to the normalized URL
    (the one checked; scheme, host and default port: ``test_coord_webhook_urls.py``)."""
    with receiver() as hook:
        port = hook.url.rsplit(":", 1)[1]
        async with serving(tmp_path, counted(federation), **webhook_settings(hook.url)) as r:
            url = f"http://127.0.0.1:{port}/hooks/%7Eteam/d%6Fne?run=%2F1"
            study_id = (await r.create({**SPEC, "webhook_url": url})).json()["id"]
            assert (await r.view(study_id))["status"] == "succeeded"
            await r.services.runner.notifier.wait()
        (post,) = hook.posts
        assert post[0] == "/hooks/~team/done?run=%2F1"
        assert checked(post)["study_id"] == study_id


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"webhook_allowed_prefixes": ["https://hooks.example.org"], "webhook_secret": SECRET},
         "must end with /"),
        ({"webhook_allowed_prefixes": ["ftp://hooks.example.org/"], "webhook_secret": SECRET},
         "not an http(s) URL"),
        ({"webhook_allowed_prefixes": ["https://u:p@hooks.example.org/"],
          "webhook_secret": SECRET}, "no user"),
        ({"webhook_allowed_prefixes": ["https://hooks.example.org/a/../"],
          "webhook_secret": SECRET}, "dot segment"),
        ({"webhook_allowed_prefixes": ["https://hooks.example.org/a/?x=1"],
          "webhook_secret": SECRET}, "no query"),
        ({"webhook_allowed_prefixes": ["https://hooks.example.org/%2e/"],
          "webhook_secret": SECRET}, "percent-encoded dot"),
        ({"webhook_allowed_prefixes": ["https://hooks.example.org/"]}, "needs webhook_secret"),
        ({"webhook_allowed_prefixes": ["https://hooks.example.org/"], "webhook_secret": "short"},
         "webhook_secret"),
    ],
)
def test_webhook_settings_are_checked_at_start_up(
    tmp_path: Path, settings: dict[str, Any], named: str
) -> None:
    from tests.helpers.config import write_toml

    config = write_toml(tmp_path / "c.toml", {
        "analyst_tokens": [ANALYST_TOKEN], **settings,
        "centers": {"alpha": {"url": "http://a.test:8700", "token": "t" * 20}},
        "min_centers": 1})
    with pytest.raises(ConfigError) as raised:
        Settings.load(config)
    assert named in str(raised.value) and "webhook" in str(raised.value)
    assert SECRET not in str(raised.value)


# -- the schema ----------------------------------------------------------------------------------


async def test_the_schema_is_served_to_callers_with_a_token(
    tmp_path: Path, federation: Federations
) -> None:
    async with serving(tmp_path, counted(federation)) as r:
        for path in ("/openapi.json", "/docs"):
            assert (await r.client.get(path)).status_code == 401
            assert (await r.client.get(path, headers={"Authorization": "Bearer no"})
                    ).status_code == 401
        schema = await r.client.get("/openapi.json", headers=AUTH)
        assert schema.status_code == 200
        paths = schema.json()["paths"]
        assert "/v1/studies/{study_id}/cancel" in paths
        header = [p for p in paths["/v1/studies"]["post"]["parameters"]
                  if p["name"] == "Idempotency-Key"]
        assert header and header[0]["in"] == "header"
        assert (await r.client.get("/docs", headers=AUTH)).status_code == 200
    async with serving(tmp_path / "dev", counted(federation), dev_mode=True) as r:
        assert (await r.client.get("/openapi.json")).status_code == 200  # public in dev mode
