"""Work bounded per request and per token (``center_agent.gate``, ``docs/privacy.md``, "Work
bounded"): a computation runs outside the dataset's lock, so a stored answer never waits behind
it; the same question asked while it is computed gets its answer (one computation, one
payment); a DP release's ε has a floor; a token's work per period has an allowance (429).

The computations are held with events, never timed: what is asserted is the order in which
things happen while a computation is held (the generous waits only stop a broken gate from
hanging the suite)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from center_agent.core.config import load_settings
from center_agent.core.errors import ComputeAllowanceExceeded, InvalidRequest
from center_agent.gate import ReleaseGate
from center_agent.gate import kinds as gate_kinds
from center_agent.main import create_app
from center_agent.services import Services
from fedstats_service.errors import ServiceError
from shared.protocol import BinTableRelease, DPQuantilesRequest, TableRequest, WireModel
from tests.helpers.center import AUTH, TOKEN, K
from tests.helpers.config import write_toml

GUARD_S = 120.0
"""How long a step may take before the test calls the gate broken (never reached when it works;
a hang otherwise)."""

KIND = {kind.name: kind for kind in gate_kinds.KINDS}
TABLE = TableRequest(variable="x", groups=("a", "b"), k=K)
CALLER = "caller-fingerprint"


def quantiles(upper: float = 100.0, epsilon: float = 0.1) -> DPQuantilesRequest:
    return DPQuantilesRequest(variable="x", levels=[0.5], epsilon=epsilon, bounds=(0.0, upper))


@pytest.fixture
def services(tmp_path: Path, base_config: dict[str, Any]) -> Iterator[Services]:
    built = Services.build(load_settings(write_toml(tmp_path / "c.toml", base_config)))
    yield built
    built.close()


class Held:
    """A DP quantiles computation that stops inside the core until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        kind = gate_kinds.DPQuantilesKind
        real = kind.compute_release

        def held(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.entered.set()
            assert self.release.wait(GUARD_S), "the held computation was never released"
            return real(*args, **kwargs)

        monkeypatch.setattr(kind, "compute_release", staticmethod(held))


def in_thread(gate: ReleaseGate, request: WireModel, out: list[Any],
              kind: str = "dp_quantiles") -> threading.Thread:
    def run() -> None:
        try:
            out.append(gate.release(KIND[kind], "cohort", request, CALLER))
        except ServiceError as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_stored_answer_is_not_blocked_by_a_running_computation(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = services.gate
    table = gate.release(KIND["table"], "cohort", TABLE, CALLER)  # stored before
    held = Held(monkeypatch)
    out: list[Any] = []
    worker = in_thread(gate, quantiles(), out)
    assert held.entered.wait(GUARD_S)
    # The computation is held inside the core: the stored table, a stored answer of another
    # question, and a refusal are answered meanwhile (before the old gate released its lock).
    assert gate.release(KIND["table"], "cohort", TABLE, CALLER) == table
    with pytest.raises(InvalidRequest):
        gate.release(KIND["dp_quantiles"], "cohort", quantiles(epsilon=1e-5), CALLER)
    assert worker.is_alive() and not out  # still held
    held.release.set()
    worker.join(GUARD_S)
    assert len(out) == 1 and not isinstance(out[0], ServiceError)


def test_an_exact_release_is_computed_while_a_dp_release_is(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table never asked before (a computation and a disclosure admission) goes through while
    a DP computation is held."""
    gate = services.gate
    held = Held(monkeypatch)
    out: list[Any] = []
    worker = in_thread(gate, quantiles(), out)
    assert held.entered.wait(GUARD_S)
    table = gate.release(KIND["table"], "cohort", TABLE, CALLER)
    assert isinstance(table, BinTableRelease) and table.counts and worker.is_alive()
    held.release.set()
    worker.join(GUARD_S)


def test_the_same_question_asked_while_it_is_computed_gets_its_answer(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = services.gate
    held = Held(monkeypatch)
    waiting = threading.Event()
    reserve = gate._reserve

    def watched(*args: Any, **kwargs: Any) -> Any:
        leads, follows = reserve(*args, **kwargs)
        if follows:
            waiting.set()
        return leads, follows

    monkeypatch.setattr(gate, "_reserve", watched)
    first: list[Any] = []
    second: list[Any] = []
    one = in_thread(gate, quantiles(), first)
    assert held.entered.wait(GUARD_S)
    two = in_thread(gate, quantiles(), second)
    assert waiting.wait(GUARD_S)  # the second found the first in flight, and waits for it
    held.release.set()
    one.join(GUARD_S)
    two.join(GUARD_S)
    assert held.calls == 1
    assert first == second and not isinstance(first[0], ServiceError)
    assert services.ledger.spent("cohort") == pytest.approx(0.1)


def test_a_question_asked_twice_in_one_batch_is_computed_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held(monkeypatch)
    held.release.set()
    kind = KIND["dp_quantiles"]
    answers = services.gate.release_batch("cohort", [(kind, quantiles()), (kind, quantiles())],
                                          CALLER)
    assert held.calls == 1 and answers[0] == answers[1]
    assert services.ledger.spent("cohort") == pytest.approx(0.1)


# -- the least ε of a DP release ------------------------------------------------------------------


def test_an_epsilon_below_the_centers_least_is_refused_from_the_request(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = services.gate
    least = services.settings.min_epsilon_per_release
    assert least == 1e-3  # the default
    monkeypatch.setattr(type(services.datasets["cohort"]), "population",
                        lambda _self: pytest.fail("the data were read"))
    with pytest.raises(InvalidRequest) as refused:
        gate.release(KIND["dp_quantiles"], "cohort", quantiles(epsilon=least / 2), CALLER)
    assert refused.value.status_code == 422
    assert "min_epsilon_per_release" in refused.value.detail
    assert refused.value.extra["min_epsilon_per_release"] == least
    assert services.ledger.spent("cohort") == 0.0


def test_an_epsilon_at_the_least_is_released(services: Services) -> None:
    least = services.settings.min_epsilon_per_release
    services.gate.release(KIND["dp_quantiles"], "cohort", quantiles(epsilon=least), CALLER)
    assert services.ledger.spent("cohort") == pytest.approx(least)


# -- the compute allowance ------------------------------------------------------------------------


@pytest.fixture
def allowance_config(base_config: dict[str, Any]) -> dict[str, Any]:
    # The test dataset's public size is 130 (its 134 records, rounded down to K: each level of
    # make_table leaves out K of its rows): three releases computed fit, a fourth does not.
    return {**base_config, "compute_allowance": 3 * 130 + 129, "compute_period_s": 86_400}


@pytest.mark.anyio
async def test_a_tokens_work_per_period_is_bounded_with_a_429(
    tmp_path: Path, allowance_config: dict[str, Any]
) -> None:
    config = write_toml(tmp_path / "allowance.toml", allowance_config)
    app = create_app(load_settings(config))
    url = "/v1/datasets/cohort/dp/quantiles"
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
        r = await client.get("/v1/info", headers=AUTH)
        assert r.json()["datasets"][0]["n_records"] == 130, r.json()
        bodies = [quantiles(upper=100.0 + i).to_payload() for i in range(4)]
        answers = [await client.post(url, json=body, headers=AUTH) for body in bodies[:3]]
        assert [a.status_code for a in answers] == [200, 200, 200]
        refused = await client.post(url, json=bodies[3], headers=AUTH)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"] == ComputeAllowanceExceeded.error
        retry = int(refused.headers["Retry-After"])
        assert 1 <= retry <= 86_400 and refused.json()["retry_after_s"] == retry
        assert "compute_allowance" in refused.json()["detail"]
        # Nothing was spent for it; answers already given are still served, at no work.
        assert (await client.post(url, json=bodies[0], headers=AUTH)).json() == answers[0].json()
        budget = (await client.get("/v1/budget/cohort", headers=AUTH)).json()
        assert budget["spent_epsilon"] == pytest.approx(0.3)
        # In a batch: that item's slot holds the 429, the others their answers.
        batch = await client.post("/v1/datasets/cohort/releases", headers=AUTH, json={"items": [
            {"kind": "dp_quantiles", "request": bodies[1]},
            {"kind": "dp_quantiles", "request": bodies[3]}]})
        assert [a["status"] for a in batch.json()["answers"]] == [200, 429]
        assert batch.json()["answers"][1]["error"]["retry_after_s"] >= 1
        # Per token: the other token has its own allowance.
        other = {"Authorization": "Bearer " + load_settings(config).tokens[1].get_secret_value()}
        assert (await client.post(url, json=bodies[3], headers=other)).status_code == 200
    app.state.services.close()
    # Kept in the ledger: a restart gives the token no new work.
    again = create_app(load_settings(config))
    transport = httpx.ASGITransport(app=again, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
        r = await client.post(url, json=quantiles(upper=200.0).to_payload(), headers=AUTH)
        assert r.status_code == 429
    again.state.services.close()
    assert TOKEN not in refused.text


def test_the_default_allowance_is_far_above_a_study(services: Services) -> None:
    """The default lets one token compute 10^9 records x releases per hour: a study of the
    demo's size (about a thousand records at its largest center, a few dozen releases) uses
    under 10^-3 of it."""
    from fedstats_cli.synth import HOSPITALS

    settings = services.settings
    assert settings.compute_allowance == 1_000_000_000 and settings.compute_period_s == 3600
    largest = max(h.n_control + h.n_treated for h in HOSPITALS)
    assert largest * 100 < settings.compute_allowance / 1000  # 100 releases, far more than
    # a demo study asks


def test_exact_releases_computed_together_are_admitted_one_after_the_other(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table's candidate is computed (outside the lock) and held before its admission; a
    refinement of the same variable is computed and admitted meanwhile. The table is then
    admitted against it: every atom of both, with the levels' sizes, holds 0 or >= K records,
    and the disclosure memory holds both, the refinement first."""
    from center_agent.gate.disclosure import Partition, atoms, cell_counts, edges_of, small
    from shared.binning import bin_table
    from shared.protocol import RefinementRequest
    from tests.helpers.center import peer_table

    gate = services.gate
    computed, go = threading.Event(), threading.Event()
    real = gate.admit
    main = threading.current_thread()

    def held(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not main:  # the table's, computed in the worker
            computed.set()
            assert go.wait(GUARD_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate, "admit", held)
    out: list[Any] = []
    worker = in_thread(gate, TABLE, out, kind="table")
    assert computed.wait(GUARD_S)
    rng = np.random.default_rng(7)
    peer = bin_table(rng.normal(50, 10, 300), rng.normal(52, 10, 300), k=K, rng=rng)
    refine = RefinementRequest.model_validate(
        {"variable": "x", "groups": ["a", "b"], "k": K, "table": peer_table(peer.limits.tolist())})
    gate.release(KIND["refine"], "cohort", refine, CALLER)
    assert worker.is_alive()  # the table still waits to be admitted
    go.set()
    worker.join(GUARD_S)
    assert len(out) == 1 and not isinstance(out[0], ServiceError), out
    population = services.datasets["cohort"].population()
    with services.store.engine.connect() as conn:
        history = gate.disclosure.history(conn, "cohort", "x")
    table_interior = np.asarray(out[0].limits)[1:-1]
    assert len(history) == 2
    assert np.array_equal(history[1].interior, table_interior)  # admitted second
    assert not np.array_equal(history[0].interior, table_interior)
    levels = population.levels
    every = [Partition.totals(levels), *history]
    edges = edges_of(every)
    counts = cell_counts(population, "x", levels, edges)
    assert not small(atoms(every, levels, edges), counts, K).any()
    # Computed at once, both place a gap's keyed number (and a release whose read of the
    # placed numbers went stale is computed again under the lock): no gap holds two numbers.
    from center_agent.gate import gaps

    with services.store.engine.connect() as conn:
        placed = gaps.placed(conn, "cohort", "x")
    raw = np.unique(population.pooled("x"))
    assert not np.isin(placed, raw).any()
    gap_of = np.searchsorted(raw, placed)
    assert np.unique(gap_of).size == gap_of.size, "a gap holds two numbers"


def test_an_exact_release_of_data_that_changed_while_it_was_computed_is_not_admitted(
    services: Services, monkeypatch: pytest.MonkeyPatch, csv_path: Path
) -> None:
    """The data change (K records added: the version check passes) and a new epoch starts
    while a table computed from the old data waits for its admission: it is not admitted
    against releases of data it was not computed from (503 data_moved, nothing remembered);
    asked again, the table is computed from the new data."""
    import os

    import pyarrow as pa

    from center_agent.core.errors import DataMovedDuringRelease
    from tests.helpers.center import make_table, write_csv

    gate = services.gate
    computed, go = threading.Event(), threading.Event()
    real = gate.admit
    main = threading.current_thread()

    def held(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not main:
            computed.set()
            assert go.wait(GUARD_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate, "admit", held)
    out: list[Any] = []
    worker = in_thread(gate, TABLE, out, kind="table")
    assert computed.wait(GUARD_S)
    old = make_table()
    added = pa.table({"x": [60.0] * K, "y": [1.0] * K, "arm": ["a"] * K,
                      "notes": ["added"] * K}, schema=old.schema)
    write_csv(pa.concat_tables([old, added]), csv_path)
    stat = csv_path.stat()
    os.utime(csv_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert gate.describe("cohort").epoch == 2
    go.set()
    worker.join(GUARD_S)
    assert len(out) == 1 and isinstance(out[0], DataMovedDuringRelease), out
    assert out[0].status_code == 503
    with services.store.engine.connect() as conn:
        assert gate.disclosure.history(conn, "cohort", "x") == []
    table = gate.release(KIND["table"], "cohort", TABLE, CALLER)
    assert isinstance(table, BinTableRelease)
    # 134 records before (each level of make_table leaving out K rows), K complete ones added.
    assert sum(map(sum, table.counts)) == 134 + K
