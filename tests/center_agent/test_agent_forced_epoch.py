"""The way out of a forced epoch: a variable whose earlier exact releases hold 1..K-1 records of
the forced epoch's data is named (``Disclosure.blocked``) and refused with its name; a change of
the data that heals every such set unblocks it by itself; the operator's new version of it
(``Disclosure.renew``) admits releases again against a new memory, checked against the records
one at a time; the operator's command (``center_agent.operator.epoch``) says all of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from center_agent.core.errors import HistoryNotSafe
from center_agent.db import Store
from center_agent.gate.disclosure import Disclosure, Partition
from center_agent.gate.epochs import Epochs
from tests.center_agent.test_agent_disclosure import (
    A,
    Bins,
    K,
    population,
    reference_atoms,
)
from tests.center_agent.test_agent_disclosure import store as store  # the same two ledgers


def admit(store: Store, epochs: Epochs, values: dict[str, list[float]], interior: list[float],
          key: str) -> Partition:
    """A table of ``interior`` limits released from ``values``, in the epoch they belong to."""
    pop = population(values)
    with store.locked("d") as (conn, _t, _s):
        epoch = epochs.admit(conn, "d", pop)
        out = epochs.disclosure.admit(conn, dataset="d", variable="v", epoch=epoch.number,
                                      population=pop,
                                      candidate=Bins(Partition.bins(interior, ["a"])),
                                      request_key=key)
    return out.partition


def forced(store: Store) -> tuple[Epochs, dict[str, list[float]]]:
    """Epoch 1 released {10, 20} over 1..30; three records above 20 removed and the epoch
    forced: the released set (20, inf) holds 7 records of the new data."""
    epochs = Epochs(K, Disclosure(K, max_releases=64, max_limits=100_000))
    admit(store, epochs, {"a": A}, [10.0, 20.0], "t1")
    fewer = {"a": A[:27]}
    with store.locked("d") as (conn, _t, _s):
        new, problems = epochs.roll(conn, "d", population(fewer), force=True)
    assert new is not None and new.number == 2 and problems
    return epochs, fewer


def test_a_forced_epoch_names_the_blocked_variable_and_refuses_with_its_name(store: Store
                                                                             ) -> None:
    epochs, fewer = forced(store)
    with store.locked("d") as (conn, _t, _s):
        assert epochs.disclosure.blocked(conn, "d", population(fewer)) == {"v": 1}
    with pytest.raises(HistoryNotSafe) as refused:
        admit(store, epochs, fewer, [], "t2")
    assert refused.value.extra == {"variable": "v"}
    assert "'v'" in refused.value.detail and "new version" in refused.value.detail


def test_data_that_heal_every_set_unblock_the_variable_by_themselves(store: Store) -> None:
    epochs, _ = forced(store)
    # K + 3 new records above 20: (20, inf) holds 7 + K + 3 >= K, and every set and size moved
    # by 0 or >= K against epoch 1 and epoch 2; the check passes and epoch 3 starts.
    healed = {"a": [*A[:27], *[25.5 + i / 100 for i in range(K + 3)]]}
    with store.locked("d") as (conn, _t, _s):
        assert epochs.check(conn, "d", population(healed)) == []
        assert epochs.disclosure.blocked(conn, "d", population(healed)) == {}
    admit(store, epochs, healed, [10.0, 20.0], "t3")


def test_a_new_version_admits_releases_against_a_new_memory(store: Store) -> None:
    epochs, fewer = forced(store)
    disclosure = epochs.disclosure
    with store.locked("d") as (conn, _t, _s):
        assert disclosure.version(conn, "d", "v").number == 1
        version = disclosure.renew(conn, "d", "v", 2)
        assert (version.number, version.since_epoch) == (2, 2)
        assert disclosure.blocked(conn, "d", population(fewer)) == {}
        assert disclosure.usage(conn, "d") == {}  # the caps count the new version's releases
        assert disclosure.snapshots(conn, "d") == {}  # epoch 1's atoms left the check
        with pytest.raises(ValueError, match="already"):
            disclosure.renew(conn, "d", "v", 2)
    released = [admit(store, epochs, fewer, [5.0, 15.0, 25.0], "t4"),
                admit(store, epochs, fewer, [12.0], "t5")]
    # The new version's atoms, record by record, on the data they were released from.
    atoms = reference_atoms([Partition.totals(["a"]), *released], fewer)
    assert not [n for n in atoms.values() if 0 < n < K], atoms
    assert released[0].interior.size < 3  # (25, inf) holds 2: coarsened, not released as is
    with store.locked("d") as (conn, _t, _s):
        assert disclosure.usage(conn, "d")["v"][0] == 2
        assert {epoch for _, epoch in disclosure.snapshots(conn, "d")} == {2}


def test_a_variable_is_renewed_only_over_the_data_its_epoch_pinned(store: Store) -> None:
    """Renewal is refused while a change of the data is held (its blocked sets are those of
    data no release comes from), for an unknown variable, and for one that is not blocked."""
    from center_agent.operator import _renew

    epochs, fewer = forced(store)
    said: list[str] = []
    with store.locked("d") as (conn, _t, _s):
        assert _renew(epochs, conn, "d", population({"a": A[:26]}), "v", say=said.append) == 1
        assert "the data changed since the epoch began" in said[-1]
        assert _renew(epochs, conn, "d", population(fewer), "w", say=said.append) == 1
        assert "no variable 'w'" in said[-1]
        assert _renew(epochs, conn, "d", population(fewer), "v", say=said.append) == 0
        assert _renew(epochs, conn, "d", population(fewer), "v", say=said.append) == 1
        assert "'v' is not blocked" in said[-1]
        assert epochs.disclosure.version(conn, "d", "v").number == 2


@pytest.mark.process
def test_a_forced_epoch_has_a_way_out_end_to_end(tmp_path: Path) -> None:
    """A real center and the operator's real command: a released bin of arm a loses all but
    one record; the check refuses to roll, ``--force`` rolls and names ``x`` as blocked with
    both ways out; tables of x are refused (409, naming x) while y is released; ``--renew y``
    is refused (not blocked), ``--renew x`` starts version 2; then tables of x are released
    again (every count 0 or >= K), the report is clean and the audit trail holds both of the
    operator's actions."""
    import httpx
    import numpy as np

    from tests.helpers.center import AUTH, center_config, make_table, write_csv
    from tests.helpers.processes import run_module, running_center

    config, port = center_config(tmp_path, {"d": 3.0}, name="forced")
    url = f"http://127.0.0.1:{port}/v1/datasets/d"
    table = {"variable": "x", "groups": ["a", "b"], "k": K}

    def epoch(*args: str) -> tuple[int, str]:
        done = run_module("fedstats_cli", "center", "epoch", "--config", str(config),
                          "--dataset", "d", *args, timeout_s=120)
        return done.returncode, done.stdout + done.stderr

    data = make_table()
    x = np.asarray(data["x"].to_numpy())
    y = np.asarray(data["y"].to_numpy(zero_copy_only=False), dtype=float)
    arm = np.asarray(data["arm"].to_pylist())
    with running_center(config, port), httpx.Client(headers=AUTH, timeout=60) as c:
        first = c.post(f"{url}/table", json=table)
        assert first.status_code == 200, first.text
        limits = np.asarray(first.json()["limits"], dtype=float)
        counts = first.json()["counts"][0]  # arm a
        cell = int(np.argmax(counts))
        inside = np.flatnonzero((arm == "a") & np.isfinite(y) & (x > limits[cell])
                                & (x <= limits[cell + 1]))
        assert inside.size == counts[cell] >= K
        gone = set(inside[1:].tolist())  # one record of the bin is left
        write_csv(data.take([i for i in range(len(x)) if i not in gone]),
                  tmp_path / "forced.csv")
        status, out = epoch("--roll")
        assert status == 1 and "not rolled" in out, out
        status, out = epoch("--roll", "--force")
        assert "started epoch 2 (forced" in out, out
        assert status == 1 and "'x' is blocked" in out and "--renew x" in out, out
        refused = c.post(f"{url}/table", json=table)
        assert refused.status_code == 409, refused.text
        assert refused.json()["variable"] == "x" and "new version" in refused.json()["detail"]
        other = c.post(f"{url}/table", json={**table, "variable": "y"})
        assert other.status_code == 200, other.text
        status, out = epoch("--renew", "y")
        assert status == 1 and "'y' is not blocked" in out, out
        status, out = epoch("--renew", "x")
        assert status == 0 and "'x' starts version 2 in epoch 2" in out, out
        again = c.post(f"{url}/table", json=table)
        assert again.status_code == 200, again.text
        assert all(n == 0 or n >= K for row in again.json()["counts"] for n in row)
        assert sum(again.json()["counts"][0]) == sum(counts) - len(gone)
        status, out = epoch()
        assert status == 0 and "blocked" not in out, out
    audit = run_module("fedstats_cli", "center", "audit", "--config", str(config),
                       "--format", "json", timeout_s=120)
    assert audit.returncode == 0, audit.stderr
    import json

    records = json.loads(audit.stdout)
    operator = [(r["kind"], r["epoch"]) for r in records if r["caller"] == "operator"]
    assert operator == [("epoch_roll", 2), ("variable_version", 2)]
