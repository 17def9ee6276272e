"""The store's group commit (``coordinator.commits``): the writes of one step of the event loop
commit in one transaction, each with its own outcome, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from coordinator.commits import GroupCommit
from coordinator.db import QuotaRecord, Store

pytestmark = pytest.mark.anyio



async def test_a_rounds_reservations_and_records_commit_once_in_order(store: Store) -> None:
    """20 reservations of 0.1 against a quota of 1.0, made in one step (as a round's centers
    make them), and 3 records: one transaction; the first 10 reservations are counted, the
    other 10 refused with the quota as it stood, a record repeated keeps the first."""
    store.create_study("s" * 32, "{}")
    store.set_quota("ann", "alpha", "cohort", 1.0)
    writes = GroupCommit(store)
    before = store.commits
    reserved, *recorded = await asyncio.gather(
        asyncio.gather(*(writes.reserve("ann", "alpha", "cohort", 0.1) for _ in range(20))),
        writes.record_release("s" * 32, "alpha", "dp", "k1", "{}", '{"a": 1}'),
        writes.record_release("s" * 32, "alpha", "dp", "k1", "{}", '{"a": 2}'),
        writes.record_release("s" * 32, "beta", "dp", "k1", "{}", '{"b": 1}'),
    )
    assert store.commits - before == 1
    assert writes.groups == {23: 1}
    assert recorded == [None, None, None]
    assert reserved[:10] == [None] * 10
    refused = reserved[10:]
    assert all(isinstance(r, QuotaRecord) and r.epsilon == 1.0 for r in refused)
    assert [r.spent for r in refused] == pytest.approx([1.0] * 10)  # type: ignore[union-attr]
    assert store.quota("ann", "alpha", "cohort").spent == pytest.approx(1.0)
    assert [r.response for r in store.releases_of("s" * 32)] == ['{"a": 1}', '{"b": 1}']


async def test_a_failing_write_fails_alone(store: Store) -> None:
    """A record for a study that does not exist (its foreign key refuses it) in a group of two
    reservations: its caller gets the IntegrityError, the reservations are counted. The group's
    transaction was rolled back and each write ran in its own: two commits, none half done."""
    store.set_quota("ann", "alpha", "cohort", 1.0)
    writes = GroupCommit(store)
    before = store.commits
    first, orphan, second = await asyncio.gather(
        writes.reserve("ann", "alpha", "cohort", 0.25),
        writes.record_release("x" * 32, "alpha", "dp", "k1", "{}", "{}"),
        writes.reserve("ann", "alpha", "cohort", 0.25),
        return_exceptions=True)
    assert first is None and second is None
    assert isinstance(orphan, IntegrityError)
    assert store.commits - before == 2
    assert store.quota("ann", "alpha", "cohort").spent == pytest.approx(0.5)
    assert store.releases_of("x" * 32) == []


async def test_writes_made_while_a_group_commits_go_in_the_next(store: Store) -> None:
    """Each caller resumes after its own group committed; a write made then starts a group of
    its own: three rounds one after the other are three transactions of their writes."""
    store.create_study("s" * 32, "{}")
    writes = GroupCommit(store)
    before = store.commits
    for round_ in range(3):
        found = await asyncio.gather(*(
            writes.find_or_reserve("s" * 32, f"c{i}", f"k{round_}", ("ann", "cohort", 0.5))
            for i in range(4)))
        assert found == [(None, None)] * 4  # nothing recorded: reserved (no quota)
        await asyncio.gather(*(
            writes.record_release("s" * 32, f"c{i}", "dp", f"k{round_}", "{}", f'"{i}"')
            for i in range(4)))
    assert store.commits - before == 6
    assert writes.groups == {4: 6}
    assert store.quota("ann", "c0", "cohort").spent == pytest.approx(1.5)
    # A recorded answer is found and costs nothing again.
    again = await writes.find_or_reserve("s" * 32, "c2", "k1", ("ann", "cohort", 0.5))
    assert again == ('"2"', None)
    assert store.quota("ann", "c2", "cohort").spent == pytest.approx(1.5)
