"""Several coordinator processes over one store (``coordinator.leases``): a study is held by one
process at a time, claimed ``FOR UPDATE SKIP LOCKED`` by another only when no live process
holds it (two claimers never take one study), and a process that lost a study writes nothing
more for it and asks its centers nothing more. Each process is a :class:`Store` of its own
(its own engine and connections) over one database.

No lease here runs out by waiting: a lease of 0 s has run out by the next transaction (the
database's clock moves on), and one of an hour does not run out during a test."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from coordinator.db import LeaseLost, Store, studies
from coordinator.leases import Lease
from coordinator.recording import RecordedCenter
from coordinator.runner import StudyRunner
from tests.coordinator.test_coord_api import SPEC
from tests.helpers.coordinator import CountingCenter, Federations, settings_for
from tests.helpers.timing import scaled

pytestmark = pytest.mark.anyio

HOUR = 3600.0


def new_id() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def other(store: Store) -> Iterator[Store]:
    """A second process's store over the same database."""
    made = Store(str(store.engine.url.render_as_string(hide_password=False)))
    yield made
    made.close()


def claims(store: Store) -> list[tuple[str | None, dict[str, Any]]]:
    """The ``study.claimed`` audit rows, oldest first: (study, detail)."""
    rows = store.audit_entries(action="study.claimed", limit=1000)
    return [(r.target, json.loads(r.detail or "{}")) for r in reversed(rows)]


def test_a_held_study_is_not_claimed_until_its_lease_runs_out(store: Store, other: Store) -> None:
    held = store.create_study(new_id(), "{}", lease=("a", HOUR))
    lapsed = store.create_study(new_id(), "{}", lease=("dead", 0.0))
    assert store.set_status(lapsed.id, "running", held_by="dead")
    ended = store.create_study(new_id(), "{}", lease=("dead", 0.0))
    assert store.set_status(ended.id, "succeeded", held_by="dead")

    got = other.claim_studies("b", HOUR, limit=10)
    assert [r.id for r in got] == [lapsed.id]  # not a's (held), not the ended one
    assert got[0].owner == "b" and got[0].status == "running"
    assert other.claim_studies("b", HOUR, limit=10) == []  # b holds it now
    assert claims(store) == [(lapsed.id, {"owner": "b", "from": "dead", "status": "running"})]
    assert store.renew_leases("a", [held.id], HOUR) == set()  # nothing lost
    assert store.renew_leases("dead", [lapsed.id], HOUR) == {lapsed.id}  # lost to b
    assert store.renew_leases("dead", [ended.id], HOUR) == set()  # ended: nothing to stop


def test_a_process_that_lost_a_study_writes_nothing_for_it(store: Store, other: Store) -> None:
    """``a``'s lease ran out and ``b`` claimed the study: a's renewal, its status change and its
    release writes are refused (LeaseLost, nothing written); b's go through."""
    study = store.create_study(new_id(), "{}", lease=("a", 0.0))
    assert [r.id for r in other.claim_studies("b", HOUR, limit=1)] == [study.id]
    assert store.renew_leases("a", [study.id], HOUR) == {study.id}
    assert not store.set_status(study.id, "running", only_from=("pending",), held_by="a")
    with pytest.raises(LeaseLost), store.engine.begin() as conn:
        store.check_lease_in(conn, study.id, "a")
    with other.engine.begin() as conn:
        other.check_lease_in(conn, study.id, "b")
    assert other.set_status(study.id, "running", only_from=("pending",), held_by="b")
    assert other.set_status(study.id, "succeeded", only_from=("running",), held_by="b")
    assert store.get_study(study.id).status == "succeeded"  # type: ignore[union-attr]


def test_a_study_cancelled_through_another_process_is_lost_to_its_holder(
        store: Store, other: Store) -> None:
    study = store.create_study(new_id(), "{}", lease=("a", HOUR))
    assert other.set_status(study.id, "cancelled", only_from=("pending", "running"))
    assert store.renew_leases("a", [study.id], HOUR) == {study.id}
    assert other.claim_studies("b", HOUR, limit=10) == []


def test_a_process_stopping_lets_its_studies_go_at_once(store: Store, other: Store) -> None:
    mine = [store.create_study(new_id(), "{}", lease=("a", HOUR)).id for _ in range(3)]
    theirs = store.create_study(new_id(), "{}", lease=("c", HOUR)).id
    assert other.claim_studies("b", HOUR, limit=10) == []
    assert store.release_leases("a") == 3
    assert sorted(r.id for r in other.claim_studies("b", HOUR, limit=10)) == sorted(mine)
    assert store.get_study(theirs).owner == "c"  # type: ignore[union-attr]


def test_skip_locked_claims_pass_a_row_being_claimed(pg_url: str) -> None:
    """PostgreSQL: while one transaction holds a free study's row (a claim under way), another
    process's claim skips that row instead of waiting for it, and takes the others."""
    first, second = Store(pg_url), Store(pg_url)
    try:
        ids = [first.create_study(new_id(), "{}", lease=("dead", 0.0)).id for _ in range(3)]
        with first.engine.begin() as conn:
            conn.execute(sa.select(studies.c.id).where(studies.c.id == ids[0])
                         .with_for_update())
            got: list[str] = []
            claimer = threading.Thread(target=lambda: got.extend(
                r.id for r in second.claim_studies("b", HOUR, limit=10)))
            claimer.start()
            claimer.join(timeout=scaled(30))  # a hang guard: SKIP LOCKED does not wait
            assert not claimer.is_alive(), "the claim waited for the locked row"
        assert sorted(got) == sorted(ids[1:])
        assert [r.id for r in first.claim_studies("a", HOUR, limit=10)] == [ids[0]]
    finally:
        first.close()
        second.close()


def test_concurrent_claims_never_take_one_study_twice(pg_url: str) -> None:
    """PostgreSQL: four processes claim 60 free studies at once, a few at a time: each study is
    claimed exactly once (the claims' union is every study, their audit rows one per study)."""
    stores = [Store(pg_url) for _ in range(4)]
    try:
        ids = {stores[0].create_study(new_id(), "{}", lease=("dead", 0.0)).id
               for _ in range(60)}
        got: dict[str, list[str]] = {f"p{i}": [] for i in range(4)}
        start = threading.Barrier(4)

        def claim(i: int) -> None:
            start.wait()
            while batch := stores[i].claim_studies(f"p{i}", HOUR, limit=3):
                got[f"p{i}"].extend(r.id for r in batch)

        workers = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=scaled(60))
            assert not w.is_alive()
        claimed = [s for batch in got.values() for s in batch]
        assert sorted(claimed) == sorted(ids)  # every study, none twice
        audited = claims(stores[0])
        assert sorted(t for t, _ in audited if t is not None) == sorted(ids)
        for study_id, detail in audited:
            assert study_id in got[detail["owner"]]
            owner = stores[0].get_study(study_id).owner  # type: ignore[arg-type, union-attr]
            assert owner == detail["owner"]
    finally:
        for s in stores:
            s.close()


async def test_a_lost_lease_asks_the_center_nothing(store: Store, other: Store,
                                                    federation: Federations) -> None:
    """A recording center of process ``a`` for a study ``b`` claimed: the release is refused
    before anything is reserved or asked (the center sees no call)."""
    study = store.create_study(new_id(), "{}", analyst_id="ann", lease=("a", 0.0))
    other.claim_studies("b", HOUR, limit=1)
    port = CountingCenter(next(iter(federation().values())))
    recorded = RecordedCenter(port, store, study.id, analyst_id="ann", owner="a")
    with pytest.raises(LeaseLost):
        await recorded.info()
    assert port.calls == {} and store.releases_of(study.id) == []
    assert store.quotas_of("ann") == []


async def test_a_study_whose_process_died_is_run_on_by_another(
        store: Store, federation: Federations) -> None:
    """Process ``dead`` started a study (it got the centers' info) and died; its lease ran out.
    Another process's runner claims it at its next beat and runs it to the end from what was
    recorded: the info is not asked again."""
    centers = {cid: CountingCenter(p) for cid, p in federation().items()}
    spec = json.dumps(SPEC)
    study = store.create_study(new_id(), spec, analyst_id="ann", lease=("dead", HOUR))
    assert store.set_status(study.id, "running", held_by="dead")
    dying = [RecordedCenter(c, store, study.id, analyst_id="ann", owner="dead")
             for c in centers.values()]
    for port in dying:
        await port.info()
    assert store.renew_leases("dead", [study.id], 0.0) == set()  # its last beat
    runner = StudyRunner(store, centers, min_centers=2, lease=Lease(HOUR, owner="b"))
    try:
        assert await runner.renew_and_claim() == [study.id]
        await runner.wait(study.id)
    finally:
        await runner.close()
    done = store.get_study(study.id)
    assert done is not None and done.status == "succeeded" and done.owner == "b"
    assert [c.calls["info"] for c in centers.values()] == [1, 1, 1]
    assert claims(store) == [(study.id, {"owner": "b", "from": "dead", "status": "running"})]


def test_a_shared_store_must_be_postgresql(tmp_path: Any) -> None:
    with pytest.raises(ValidationError, match="shared_store needs a PostgreSQL store_url"):
        settings_for(f"sqlite:///{tmp_path / 'c.sqlite'}", shared_store=True)
    shared = settings_for("postgresql+psycopg://u@127.0.0.1/db", shared_store=True,
                          study_lease_s=5.0)
    assert shared.shared_store and shared.study_lease_s == 5.0


async def test_a_process_stopping_hands_its_running_study_to_another(
        store: Store, federation: Federations) -> None:
    """Runner ``a`` claims a study and is held up at its centers; it stops cleanly (its task
    cancelled, its lease let go), and runner ``b`` claims the study at once (from nobody) and
    runs it to the end. ``a`` ended nothing: the study's end is b's."""
    ports = federation()
    held_up = {cid: HeldUp(p) for cid, p in ports.items()}
    study = store.create_study(new_id(), json.dumps(SPEC), analyst_id="ann",
                               lease=("dead", 0.0))
    a = StudyRunner(store, held_up, min_centers=2, lease=Lease(HOUR, owner="a"))
    assert await a.renew_and_claim() == [study.id]
    await asyncio.wait_for(wait_until(lambda: any(c.asked for c in held_up.values())),
                           scaled(60))  # a hang guard
    await a.close()
    assert store.get_study(study.id).status == "running"  # type: ignore[union-attr]
    b = StudyRunner(store, ports, min_centers=2, lease=Lease(HOUR, owner="b"))
    try:
        assert await b.renew_and_claim() == [study.id]
        await b.wait(study.id)
    finally:
        await b.close()
    done = store.get_study(study.id)
    assert done is not None and done.status == "succeeded" and done.owner == "b"
    assert [d for _, d in claims(store)] == [
        {"owner": "a", "from": "dead", "status": "pending"},
        {"owner": "b", "from": None, "status": "running"}]


class HeldUp:
    """A center port whose calls never come back (until the caller is cancelled)."""

    def __init__(self, port: Any) -> None:
        self.center_id = port.center_id
        self.asked = 0

    async def _never(self, *_args: Any) -> Any:
        self.asked += 1
        await asyncio.Event().wait()

    info = health = budget = release = _never


async def wait_until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)
