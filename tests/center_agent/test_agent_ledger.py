"""The privacy ledger on SQLite and PostgreSQL: debit before release, caching, concurrency,
durability under SIGKILL."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from center_agent.core.errors import (
    BudgetExceeded,
    CallCapExceeded,
    EpsilonCapExceeded,
    UnknownDataset,
)
from center_agent.db import Store, releases, spend_units, total_units
from center_agent.ledger import Caps, Ledger, request_key
from tests.helpers.ledger_worker import at_once
from tests.helpers.processes import clean_env
from tests.helpers.timing import scaled


def worker(*args: str, **pipes: Any) -> subprocess.Popen[Any]:
    """A separate process hitting the ledger (``tests.helpers.ledger_worker``)."""
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.ledger_worker", *args],
                            env=clean_env(), **pipes)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(ledger_url: str) -> Iterator[Store]:
    s = Store(ledger_url)
    s.ensure_budgets({"d": 5.0, "e": 1.0})
    yield s
    s.close()


@pytest.fixture
def ledger(store: Store) -> Ledger:
    return Ledger(store)


def test_debit_and_remaining(ledger: Ledger) -> None:
    assert ledger.remaining("d") == 5.0
    out = ledger.release("d", "k1", 1.5, lambda: {"median": 3.25})
    assert out == {"median": 3.25}
    assert ledger.spent("d") == 1.5
    assert ledger.remaining("d") == 3.5
    assert ledger.remaining("e") == 1.0  # budgets are per dataset


def test_identical_request_is_answered_from_the_store_and_spends_once(ledger: Ledger) -> None:
    calls = []

    def compute() -> dict[str, float]:
        calls.append(1)
        return {"noisy": random.random()}

    key = request_key("d", "age", "dp_quantile", {"q": [0.5], "bounds": [0, 120]}, 1.0)
    first = ledger.release("d", key, 1.0, compute)
    second = ledger.release("d", key, 1.0, compute)
    assert first == second  # averaging repeats gains nothing
    assert len(calls) == 1
    assert ledger.spent("d") == 1.0
    other = request_key("d", "age", "dp_quantile", {"q": [0.5], "bounds": [0, 120]}, 0.5)
    ledger.release("d", other, 0.5, compute)
    assert len(calls) == 2 and ledger.spent("d") == 1.5


def test_request_key_is_canonical() -> None:
    a = request_key("d", "x", "alg", {"b": 1, "a": [1.0, 2.0]}, 0.5)
    b = request_key("d", "x", "alg", {"a": [1.0, 2.0], "b": 1}, 0.5)
    assert a == b and len(a) == 64
    assert a != request_key("d", "x", "alg", {"a": [1.0, 2.0], "b": 2}, 0.5)
    assert a != request_key("d", "y", "alg", {"a": [1.0, 2.0], "b": 1}, 0.5)
    assert a != request_key("e", "x", "alg", {"a": [1.0, 2.0], "b": 1}, 0.5)
    assert a != request_key("d", "x", "other", {"a": [1.0, 2.0], "b": 1}, 0.5)
    with pytest.raises(ValueError):
        request_key("d", "x", "alg", {"a": math.nan}, 0.5)


def test_overspend_is_refused_with_the_remaining_budget(ledger: Ledger) -> None:
    ledger.release("d", "k1", 4.0, lambda: 1)
    calls = []
    with pytest.raises(BudgetExceeded) as info:
        ledger.release("d", "k2", 1.5, lambda: calls.append(1))
    assert info.value.status_code == 403
    assert info.value.remaining == pytest.approx(1.0)
    assert info.value.body()["remaining_epsilon"] == pytest.approx(1.0)
    assert calls == []  # nothing was computed
    assert ledger.spent("d") == 4.0
    ledger.release("d", "k3", 1.0, lambda: 2)  # exactly the rest is fine
    assert ledger.remaining("d") == 0.0


def test_float_sums_are_exact(ledger: Ledger) -> None:
    for i in range(50):
        ledger.release("d", f"k{i}", 0.1, lambda: None)
    assert ledger.remaining("d") == 0.0
    with pytest.raises(BudgetExceeded):
        ledger.release("d", "one-more", 1e-9, lambda: None)
    assert spend_units(0.1) == 100_000_000 and total_units(5.0) == 5_000_000_000
    assert spend_units(1e-10) == 1  # a spend never rounds to zero


def test_a_failed_computation_spends_nothing(ledger: Ledger) -> None:
    def boom() -> None:
        raise RuntimeError("mechanism failed")

    with pytest.raises(RuntimeError):
        ledger.release("d", "k1", 2.0, boom)
    assert ledger.spent("d") == 0.0
    assert ledger.release("d", "k1", 2.0, lambda: "ok") == "ok"  # nothing cached either


@pytest.mark.parametrize("eps", [-1.0, math.nan, math.inf, "x"])
def test_bad_epsilon_is_refused(ledger: Ledger, eps: object) -> None:
    with pytest.raises(ValueError, match="`epsilon`"):
        ledger.release("d", "k", eps, lambda: None)  # type: ignore[arg-type]


def test_zero_epsilon_release_is_stored_but_free(ledger: Ledger) -> None:
    assert ledger.release("d", "table", 0.0, lambda: [10, 20]) == [10, 20]
    assert ledger.spent("d") == 0.0


def test_unknown_dataset(ledger: Ledger) -> None:
    with pytest.raises(UnknownDataset):
        ledger.release("nope", "k", 1.0, lambda: None)
    with pytest.raises(UnknownDataset):
        ledger.remaining("nope")


def test_restart_keeps_spending_and_a_new_total_keeps_spent(ledger_url: str) -> None:
    s = Store(ledger_url)
    s.ensure_budgets({"d": 5.0})
    Ledger(s).release("d", "k", 2.0, lambda: None)
    s.close()
    s = Store(ledger_url)
    s.ensure_budgets({"d": 3.0})  # the operator lowered the total
    assert Ledger(s).spent("d") == 2.0
    assert Ledger(s).remaining("d") == 1.0
    s.close()


def test_call_cap_counts_per_scope_and_refuses_past_the_cap(ledger: Ledger) -> None:
    assert [ledger.count_call("d", "study-1", "yj_moments", 3) for _ in range(3)] == [1, 2, 3]
    with pytest.raises(CallCapExceeded) as info:
        ledger.count_call("d", "study-1", "yj_moments", 3)
    assert info.value.status_code == 403 and info.value.body()["cap"] == 3
    assert ledger.count_call("d", "study-2", "yj_moments", 3) == 1
    assert ledger.count_call("e", "study-1", "yj_moments", 3) == 1
    assert ledger.spent("d") == 0.0


def test_call_cap_holds_under_concurrency(ledger: Ledger) -> None:
    assert at_once(40, lambda _: ledger.count_call("d", "s", "yj_moments", 7),
                   CallCapExceeded) == 7


def test_200_concurrent_threads_never_overspend(ledger: Ledger) -> None:
    ok = at_once(200, lambda i: ledger.release("d", f"t{i}", 0.1,
                                               lambda: time.sleep(0.001) or {"i": i}),
                 BudgetExceeded)
    assert ok == 50
    assert ledger.spent("d") == 5.0
    with ledger.store.engine.connect() as conn:
        stored = conn.execute(sa.select(sa.func.count()).select_from(releases)).scalar_one()
    assert stored == 50


@pytest.mark.process
def test_200_concurrent_requests_from_4_processes_never_overspend(
    ledger: Ledger, ledger_url: str
) -> None:
    procs = [
        worker("spend", ledger_url, "d", "50", "0.1", stdout=subprocess.PIPE,
               stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = []
    try:
        for p in procs:
            outputs.append((*p.communicate(timeout=scaled(120)), p.returncode))
    finally:
        for p in procs:
            p.kill()
            p.communicate()
    for _out, err, code in outputs:
        assert code == 0, err
    results = [json.loads(out) for out, _err, _code in outputs]
    assert sum(r["ok"] for r in results) == 50
    assert sum(r["refused"] for r in results) == 150
    assert ledger.spent("d") == 5.0


@pytest.mark.process
def test_sigkill_mid_release_loses_no_recorded_spend(
    store: Store, ledger_url: str, tmp_path: Path
) -> None:
    """Kill a releasing process inside compute(); every answered release stays paid for, the
    interrupted one is neither paid nor stored, and a restarted ledger continues from there."""
    store.ensure_budgets({"big": 1000.0})
    # stdout is read line by line below; stderr goes to a file (an unread pipe could fill).
    with open(tmp_path / "worker.log", "w") as log:
        proc = worker("loop", ledger_url, "big", "0.5", stdout=subprocess.PIPE, stderr=log,
                      text=True)
    released = -1
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            line = proc.stdout.readline().strip()
            if not line:
                break
            step, i = line.split()
            if step == "released":
                released = int(i)
            elif step == "computing" and released >= 5:
                proc.send_signal(signal.SIGKILL)  # inside compute(): debited, not committed
                break
    finally:
        proc.kill()
        proc.wait(timeout=scaled(10))
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "worker.log").read_text()
    assert released >= 5

    fresh = Ledger(Store(ledger_url))
    assert fresh.spent("big") == 0.5 * (released + 1)
    with fresh.store.engine.connect() as conn:
        keys = set(
            conn.execute(sa.select(releases.c.request_key).where(releases.c.dataset == "big"))
            .scalars()
            .all()
        )
    assert keys == {f"loop-{i}" for i in range(released + 1)}
    # answered releases are served from the store after the restart, for free
    assert fresh.release("big", "loop-0", 0.5, lambda: {"i": -1}) == {"i": 0}
    assert fresh.spent("big") == 0.5 * (released + 1)
    fresh.store.close()


@pytest.mark.process
def test_random_sigkills_keep_spent_equal_to_stored_releases(
    store: Store, ledger_url: str
) -> None:
    """Whenever the kill lands, what is spent is exactly what was stored (and answered)."""
    store.ensure_budgets({"big": 1000.0})
    rng = random.Random(5)
    for _ in range(3):
        proc = worker("loop", ledger_url, "big", "0.25", stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
        time.sleep(1.0 + rng.random())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=scaled(10))
        with store.engine.connect() as conn:
            n_stored = conn.execute(
                sa.select(sa.func.count()).select_from(releases).where(releases.c.dataset == "big")
            ).scalar_one()
        assert Ledger(store).spent("big") == 0.25 * n_stored


def test_a_call_count_inside_a_release_joins_its_transaction(store: Store) -> None:
    """A refused call count inside a release's computation rolls the whole release back."""
    ledger = Ledger(store)
    ledger.release("d", "dp", 1.0, lambda: ledger.count_call("d", "token", "yj", 1))
    assert ledger.spent("d") == 1.0
    with pytest.raises(CallCapExceeded):
        ledger.release("d", "dp2", 1.0, lambda: ledger.count_call("d", "token", "yj", 1))
    assert ledger.spent("d") == 1.0
    with store.engine.connect() as conn:
        keys = conn.execute(sa.select(releases.c.request_key)).scalars().all()
    assert keys == ["dp"]  # the refused release was not stored


def test_per_request_and_per_period_caps(store: Store) -> None:
    """Caps are decided from the request and the ledger (what was spent, when) only."""
    ledger = Ledger(store, {"d": Caps(per_request=1.0, per_period=2.0,
                                      period=timedelta(days=7))})
    with pytest.raises(EpsilonCapExceeded, match="epsilon_per_request"):
        ledger.release("d", "big", 1.5, lambda: None)
    ledger.release("d", "a", 1.0, lambda: None)
    ledger.release("d", "b", 1.0, lambda: None)
    with pytest.raises(EpsilonCapExceeded, match="epsilon_per_period") as info:
        ledger.release("d", "c", 0.5, lambda: None)
    assert info.value.status_code == 403
    assert ledger.spent("d") == 2.0
    # Spends older than the period no longer count against it.
    with store.engine.begin() as conn:
        conn.execute(sa.update(releases).values(
            created_at=datetime.now(UTC) - timedelta(days=8)))
    ledger.release("d", "c", 0.5, lambda: None)
    assert ledger.spent("d") == 2.5
