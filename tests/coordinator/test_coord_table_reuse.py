"""Reused tables instead of refusals (docs/coordinator.md, "Reused tables"), over in-process
centers through the analyst API.

A federated table a study obtained is kept; a later study that needs the same table (same
dataset, variable, groups in either order, K, closing, centers and their data versions) reads it
without asking any center for a table or refinement, and its result says what table it read
(and, to an admin or that study's owner only, which study obtained it).
The dry run says, before submission, whether the table would be reused or asked anew, which
centers' earlier releases would coarsen a new one, and which center would refuse one
(``release_limit_reached``): and a real run then does what it said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coordinator.db import Store
from coordinator.protocols.table import FederatedTable
from coordinator.tables import TableKey, TableMemory, decode, encode
from shared.binning import BinTable
from tests.coordinator.test_coord_catalog import BASE, center_audit, counted, serving
from tests.helpers.coordinator import CountingCenter, Federations
from tests.helpers.timing import scaled

pytestmark = pytest.mark.anyio

TABLE = {**BASE, "analyses": [{"kind": "table"}]}
QUANTILES = {**BASE, "analyses": [{"kind": "quantiles", "levels": [0.25, 0.5, 0.75],
                                   "estimators": ["interpolation"]}]}
TABLE_CALLS = {"table", "refine"}


def table_calls(centers: dict[str, Any]) -> int:
    return sum(c.calls[call] for c in centers.values() for call in TABLE_CALLS)


def test_a_kept_table_reads_back_in_either_group_order() -> None:
    fed = FederatedTable(
        BinTable(limits=np.array([-np.inf, 1.0, 2.0, np.inf]),
                 counts=np.array([[10.0, 0.0, 12.0], [20.0, 11.0, 0.0]]), k=10),
        ("alpha", "beta"), {"alpha": (12.0, 20.0), "beta": (10.0, 11.0)}, ())
    key = TableKey.of(dataset="d", variable="v", groups=("b", "a"), k=10, lower="buffer",
                      upper="buffer", epochs={"beta": 1, "alpha": 2})
    other = TableKey.of(dataset="d", variable="v", groups=("a", "b"), k=10, lower="buffer",
                        upper="buffer", epochs={"alpha": 2, "beta": 1})
    # One key for either order of the groups and of the centers ...
    assert key.digest() == other.digest() and key.swapped and not other.swapped
    kept = encode(fed, key.swapped)
    # ... the rows kept in the sorted order, and read back in the order asked.
    back = decode(kept, key.swapped, "s1")
    np.testing.assert_array_equal(back.table.counts, fed.table.counts)
    assert back.center_totals == fed.center_totals and back.reused_from == "s1"
    swapped = decode(kept, other.swapped, "s1")
    np.testing.assert_array_equal(swapped.table.counts, fed.table.counts[::-1])
    assert swapped.center_totals["alpha"] == (20.0, 12.0)
    # Any other part of the key is another table: a new epoch, K, closing or center set.
    for change in ({"epochs": {"alpha": 3, "beta": 1}}, {"k": 11}, {"lower": "infinite"},
                   {"epochs": {"alpha": 2}}):
        base: dict[str, Any] = {"dataset": "d", "variable": "v", "groups": ("a", "b"), "k": 10,
                                "lower": "buffer", "upper": "buffer",
                                "epochs": {"alpha": 2, "beta": 1}}
        assert TableKey.of(**{**base, **change}).digest() != key.digest()


async def test_a_later_study_reuses_the_table_without_asking_the_centers(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        first = await coord.run(TABLE)
        assert first["status"] == "succeeded", first
        asked = table_calls(centers)
        assert asked == 3  # one table, two refinements
        table = first["result"]["analyses"][0]
        assert table["reused_from"] is None

        # Quantiles of the same table, and the table with its groups swapped: nothing asked.
        quantiles = await coord.run(QUANTILES)
        assert quantiles["status"] == "succeeded", quantiles
        swapped = await coord.run({**TABLE, "groups": ["trt", "ctl"]})
        assert swapped["status"] == "succeeded", swapped
        assert table_calls(centers) == asked
        again = swapped["result"]["analyses"][0]
        assert again["reused_from"] == first["id"]
        assert again["limits"] == table["limits"]
        assert again["counts"] == table["counts"][::-1]
        assert again["order"] == table["order"]

        # Another K is another table: asked of the centers (and kept in turn).
        other_k = await coord.run({**TABLE, "k": 2 * BASE["k"]})
        assert other_k["status"] == "succeeded", other_k
        assert table_calls(centers) == asked + 3
        assert other_k["result"]["analyses"][0]["reused_from"] is None


async def test_the_dry_run_says_reuse_or_what_a_new_table_meets(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        plan = (await coord.post(TABLE, dry_run="true")).json()
        assert plan["table"]["reused_from"] is None and plan["table"]["kept"] == []
        assert "new table" in plan["table"]["detail"]
        # A study that needs no table plans none.
        dp = {**BASE, "analyses": [{"kind": "dp_quantiles", "epsilon": 0.5,
                                    "bounds": [0, 100], "levels": [0.5]}]}
        assert (await coord.post(dp, dry_run="true")).json()["table"] is None

        first = await coord.run(TABLE)
        plan = (await coord.post(QUANTILES, dry_run="true")).json()
        assert plan["table"]["reused_from"] == first["id"], plan
        assert plan["would_run"] is True

        # The builder and the first refiner alone: a new table, but both answer from what they
        # released before (the same questions in the same epoch).
        order = first["result"]["analyses"][0]["order"]
        prefix = {**QUANTILES, "centers": order[:2]}
        table = (await coord.post(prefix, dry_run="true")).json()["table"]
        assert table["reused_from"] is None and table["centers"] == order[:2]
        assert table["releases"] == {order[0]: "stored", order[1]: "stored"}
        # The builder and the last refiner: its refinement of another table is new, coarsened
        # against its earlier one.
        skip = {**QUANTILES, "centers": [order[0], order[2]]}
        plan = (await coord.post(skip, dry_run="true")).json()
        table = plan["table"]
        assert table["releases"] == {order[0]: "stored", order[2]: "new"}
        assert "coarsened" in table["detail"] and f"{order[2]} (1 of" in table["detail"]
        [kept] = table["kept"]
        assert kept["study_id"] == first["id"] and kept["current"] is True
        assert kept["centers"] == {"alpha": 1, "beta": 1, "gamma": 1}
        assert plan["would_run"] is True
        # Nothing was asked or released by the dry runs.
        assert table_calls(centers) == 3

        # What the plan said: the prefix study releases nothing new, the other one does.
        assert (await coord.run({**TABLE, "centers": order[:2]}))["status"] == "succeeded"
        audits = [center_audit(centers[c]) for c in order]
        assert [r.outcome for r in audits[0]][-1] == "cached"
        assert [r.outcome for r in audits[1]][-1] == "cached"
        assert (await coord.run({**TABLE, "centers": [order[0], order[2]]}))["status"] \
            == "succeeded"
        assert [r.outcome for r in center_audit(centers[order[2]])][-1] == "released"


async def test_a_center_at_its_release_cap_is_named_before_and_refuses_after(
        tmp_path: Path, federation: Federations) -> None:
    ports = federation(max_releases_per_variable=1)
    centers = {cid: CountingCenter(port) for cid, port in ports.items()}
    async with serving(tmp_path, centers) as coord:
        first = await coord.run(TABLE)
        assert first["status"] == "succeeded", first
        order = first["result"]["analyses"][0]["order"]
        skip = {**TABLE, "centers": [order[0], order[2]]}
        plan = (await coord.post(skip, dry_run="true")).json()
        reasons = {(r["reason"], r["center"], r["blocking"]) for r in plan["refusals"]}
        assert reasons == {("release_limit_reached", order[2], True)}
        assert plan["table"]["releases"] == {order[0]: "stored", order[2]: "refused"}
        assert plan["would_run"] is False
        # The same study with every center reuses the kept table: still possible.
        plan = (await coord.post(TABLE, dry_run="true")).json()
        assert plan["would_run"] is True and plan["table"]["reused_from"] == first["id"]

        # What the dry run said is what happens.
        view = await coord.run(skip)
        assert view["status"] == "failed", view
        assert view["error"]["center_error"] == "release_limit_reached"
        assert view["error"]["center"] == order[2] and "dry run" in view["error"]["detail"]
        reused = await coord.run(TABLE)
        assert reused["status"] == "succeeded"
        assert reused["result"]["analyses"][0]["reused_from"] == first["id"]


async def test_a_reused_table_names_no_other_analysts_study(
        tmp_path: Path, federation: Federations) -> None:
    """A dry run or a study answered from a kept table showed ``reused_from``: another
    analyst's study id and, beside it, when that study got the table. The table is now told by
    what it is (``reused``: dataset, variable, groups, K, closing, centers and their epochs,
    when); the study that obtained it is named only to an admin and to that study's owner —
    not to another analyst, nor to one a study was shared with — in the plan, its detail, its
    kept tables, a table result and an MWU's table, the report and the console's page."""
    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        accounts = coord.app.state.services.accounts
        made = {name: accounts.add(name, role) for name, role in (
            ("alice", "analyst"), ("bob", "analyst"), ("carol", "analyst"), ("root", "admin"))}
        alice, bob, carol, admin = ({"Authorization": f"Bearer {made[name].token}"}
                                    for name in ("alice", "bob", "carol", "root"))

        async def run_as(spec: dict[str, Any], auth: dict[str, str]) -> str:
            created = await coord.client.post("/v1/studies", json=spec, headers=auth)
            assert created.status_code == 202, created.text
            await coord.app.state.services.runner.wait(created.json()["id"])
            return str(created.json()["id"])

        async def view(study_id: str, auth: dict[str, str]) -> dict[str, Any]:
            answer = await coord.client.get(f"/v1/studies/{study_id}", headers=auth)
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        async def plan(auth: dict[str, str]) -> dict[str, Any]:
            answer = await coord.client.post("/v1/studies", json=TABLE,
                                             params={"dry_run": "true"}, headers=auth)
            assert answer.status_code == 200, answer.text
            return dict(answer.json()["table"])

        alices = await run_as(TABLE, alice)
        kept = (await view(alices, alice))["updated_at"]
        described = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"],
                     "k": BASE["k"], "lower": "buffer", "upper": "buffer",
                     "centers": {"alpha": 1, "beta": 1, "gamma": 1}}

        # Bob's dry run: the kept table described, nobody's study named.
        planned = await plan(bob)
        assert planned["reused_from"] is None
        assert {k: v for k, v in planned["reused"].items() if k != "obtained_at"} == described
        assert planned["reused"]["obtained_at"] <= kept
        assert [t["study_id"] for t in planned["kept"]] == [None]
        assert alices not in str(planned) and "kept table" in planned["detail"]
        # Alice (its owner) and an admin see the study named.
        assert (await plan(alice))["reused_from"] == alices
        mine = await plan(alice)
        assert [t["study_id"] for t in mine["kept"]] == [alices]
        assert (await plan(admin))["reused_from"] == alices

        # Bob's study reads the kept table (nothing asked), for a table and an MWU's table test.
        asked = table_calls(centers)
        bobs = await run_as({**BASE, "analyses": [{"kind": "table"},
                                                  {"kind": "mwu", "tests": ["table"]}]}, bob)
        assert table_calls(centers) == asked
        shown = await view(bobs, bob)
        table, mwu = shown["result"]["analyses"]
        for reused in (table, mwu["table"]):
            assert reused["reused_from"] is None and reused["reused"] == planned["reused"]
        assert alices not in str(shown)
        # Shared with Carol: she reads Bob's study, still not whose table it read.
        share = await coord.client.post(f"/v1/studies/{bobs}/shares",
                                        json={"analyst_id": made["carol"].analyst.id},
                                        headers=bob)
        assert share.status_code == 201, share.text
        assert alices not in str(await view(bobs, carol))
        # The admin reads Bob's study with its source.
        by_admin = (await view(bobs, admin))["result"]["analyses"]
        assert by_admin[0]["reused_from"] == alices == by_admin[1]["table"]["reused_from"]

        # The report and the console's page say the table was reused, without the id.
        from coordinator.reporting.report import report_sections
        page = report_sections(shown, console=True)
        assert "Read from a table the coordinator kept" in page and alices not in page
        assert "by study " + alices in report_sections(await view(bobs, admin), console=True)


async def test_a_table_being_built_is_waited_for_not_built_again(tmp_path: Path) -> None:
    """While one study builds a table (``TableMemory.building``), another needing it waits
    and reads the kept one; a build that keeps nothing (failed, partial) lets the waiter build
    it itself; another key does not wait."""
    import anyio

    from coordinator.db import Store
    from coordinator.tables import TableMemory
    from tests.helpers.coordinator import sqlite_url

    fed = FederatedTable(
        BinTable(limits=np.array([-np.inf, 1.0, np.inf]),
                 counts=np.array([[10.0, 12.0], [20.0, 11.0]]), k=10),
        ("alpha",), {"alpha": (22.0, 31.0)}, ())
    key = TableKey.of(dataset="d", variable="v", groups=("a", "b"), k=10, lower="buffer",
                      upper="buffer", epochs={"alpha": 1})
    other = TableKey.of(dataset="d", variable="w", groups=("a", "b"), k=10, lower="buffer",
                        upper="buffer", epochs={"alpha": 1})
    memory = TableMemory(Store(sqlite_url(tmp_path)))
    try:
        assert await memory.after_builds(key) is None  # nothing under way, nothing kept
        release, waiting = anyio.Event(), anyio.Event()
        got: list[FederatedTable | None] = []

        async def waiter() -> None:
            waiting.set()
            got.append(await memory.after_builds(key))

        async with anyio.create_task_group() as tg:
            with memory.building(key):
                tg.start_soon(waiter)
                await waiting.wait()
                assert await memory.after_builds(other) is None  # another table: no wait
                assert got == []  # the waiter waits while the build is under way
                await memory.keep(key, fed, "s1")
                release.set()
        assert got[0] is not None and got[0].reused_from == "s1"
        np.testing.assert_array_equal(got[0].table.counts, fed.table.counts)

        # A build that ends without keeping its table: the waiter hears None and builds.
        got.clear()
        async with anyio.create_task_group() as tg:
            with memory.building(other):
                tg.start_soon(lambda: _append(got, memory.after_builds(other)))
                await anyio.sleep(0)
        assert got == [None]
    finally:
        memory.store.close()


async def _append(into: list[Any], awaitable: Any) -> None:
    into.append(await awaitable)


async def test_concurrent_studies_of_one_table_walk_the_chain_once(
        tmp_path: Path, federation: Federations) -> None:
    """Four analysts submit the same table study at once: the centers are asked one table and
    two refinements in all, and three of the four studies read the first one's table."""
    import asyncio

    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        studies = await asyncio.gather(*(coord.run(TABLE) for _ in range(4)))
        assert [s["status"] for s in studies] == ["succeeded"] * 4, studies
        assert table_calls(centers) == 3
        tables = [s["result"]["analyses"][0] for s in studies]
        builders = [t for t in tables if t["reused_from"] is None]
        assert len(builders) == 1
        builder = next(s["id"] for s, t in zip(studies, tables, strict=True)
                       if t["reused_from"] is None)
        assert all(t["reused_from"] == builder for t in tables if t is not builders[0])
        assert all(t["counts"] == builders[0]["counts"] for t in tables)


async def test_a_build_that_starts_while_the_store_is_read_is_waited_for(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Study B reads the store (nothing kept), and before that read ends study A finds nothing
    either and starts building: B waits for A's table instead of building its own. Ordered by
    events, not by timing: B's read is held until A is building, and ends before A keeps."""
    import asyncio
    import threading

    key = TableKey.of(dataset="d", variable="v", groups=("a", "b"), k=10, lower="buffer",
                      upper="buffer", epochs={"alpha": 2, "beta": 1})
    fed = FederatedTable(
        BinTable(limits=np.array([-np.inf, 1.0, np.inf]),
                 counts=np.array([[10.0, 12.0], [20.0, 11.0]]), k=10),
        ("alpha", "beta"), {"alpha": (12.0, 20.0), "beta": (10.0, 11.0)}, ())
    memory = TableMemory(store)
    real = store.find_table
    reading, release, returned = threading.Event(), threading.Event(), threading.Event()
    calls = 0

    def find_table(digest: str) -> Any:
        nonlocal calls
        calls += 1
        first = calls == 1
        if first:
            reading.set()
            assert release.wait(scaled(60)), "the test never released the held read"
        try:
            return real(digest)
        finally:
            if first:
                returned.set()

    monkeypatch.setattr(store, "find_table", find_table)
    b = asyncio.ensure_future(memory.after_builds(key))
    await asyncio.to_thread(reading.wait)
    assert await memory.after_builds(key) is None  # A: nothing kept, nothing being built
    with memory.building(key):
        release.set()
        await asyncio.to_thread(returned.wait)  # B's read ended, finding nothing
        await memory.keep(key, fed, "study-a")
    got = await b
    assert got is not None and got.reused_from == "study-a"
    np.testing.assert_array_equal(got.table.counts, fed.table.counts)
