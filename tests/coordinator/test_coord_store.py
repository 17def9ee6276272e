"""The store on SQLite and on PostgreSQL: studies, statuses, releases recorded once, and the
restart marking."""

from __future__ import annotations

from pathlib import Path

from coordinator.db import Store
from tests.helpers.coordinator import sqlite_url


def test_study_lifecycle(store: Store) -> None:
    first = store.create_study("a" * 32, '{"spec": 1}')
    assert first.status == "pending" and first.result is None
    store.create_study("b" * 32, '{"spec": 2}')
    assert store.set_status("a" * 32, "running")
    assert store.set_status("a" * 32, "succeeded", result='{"r": 1}')
    done = store.get_study("a" * 32)
    assert done is not None and (done.status, done.result, done.error) == (
        "succeeded", '{"r": 1}', None)
    assert done.updated_at >= done.created_at
    assert store.get_study("c" * 32) is None
    assert [s.id for s in store.list_studies()] == ["b" * 32, "a" * 32]  # newest first
    assert [s.id for s in store.list_studies(status="succeeded")] == ["a" * 32]
    assert [s.id for s in store.list_studies(limit=1, offset=1)] == ["a" * 32]
    # Conditional moves: only from the given statuses.
    assert not store.set_status("a" * 32, "pending", only_from=("failed_resumable",))


def test_releases_are_recorded_once_in_order(store: Store) -> None:
    store.create_study("s" * 32, "{}")
    store.record_release("s" * 32, "alpha", "info", "k1", '{"q": 1}', '{"a": 1}')
    store.record_release("s" * 32, "alpha", "info", "k1", '{"q": 1}', '{"a": 2}')  # kept first
    store.record_release("s" * 32, "beta", "info", "k1", '{"q": 1}', '{"b": 1}')
    assert store.find_release("s" * 32, "alpha", "k1") == '{"a": 1}'
    assert store.find_release("s" * 32, "alpha", "k2") is None
    assert [(r.center, r.response) for r in store.releases_of("s" * 32)] == [
        ("alpha", '{"a": 1}'), ("beta", '{"b": 1}')]


def test_interrupted_studies_become_resumable(store: Store) -> None:
    for i, status in enumerate(["pending", "running", "succeeded", "failed"]):
        store.create_study(str(i) * 32, "{}")
        store.set_status(str(i) * 32, status)  # type: ignore[arg-type]
    assert store.mark_interrupted() == 2
    statuses = {s.id[0]: s.status for s in store.list_studies()}
    assert statuses == {"0": "failed_resumable", "1": "failed_resumable", "2": "succeeded",
                        "3": "failed"}
    assert "interrupted" in (store.get_study("1" * 32).error or "")  # type: ignore[union-attr]
    assert store.mark_interrupted() == 0


def test_the_store_survives_reopening(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    Store(url).create_study("d" * 32, "{}")
    reopened = Store(url)
    assert reopened.get_study("d" * 32) is not None
    reopened.close()
