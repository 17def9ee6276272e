"""Timing (``docs/privacy.md``, "Work bounded, and timing"): the work of a refusal and of a
coarsening does not depend on where the data lie.

Work is counted, not timed: a refusal reads no value at all; disclosure control's admission
makes the same operations, on arrays of the same sizes, whether a cell of the candidate is empty
or full and wherever its records lie inside it, and its coarsening rounds are bounded by the
candidate's limits."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from center_agent.core.config import load_settings
from center_agent.core.errors import (
    BudgetExceeded,
    ComputeAllowanceExceeded,
    EpsilonCapExceeded,
    InvalidRequest,
    KAnonymityRefusal,
)
from center_agent.data import Population
from center_agent.db import Store
from center_agent.gate import disclosure as memory
from center_agent.gate import kinds as gate_kinds
from center_agent.gate.disclosure import Disclosure, Partition
from center_agent.services import Services
from fedstats_service.errors import ServiceError
from shared.protocol import DPQuantilesRequest, TableRequest
from tests.center_agent.test_agent_disclosure import Bins
from tests.helpers.config import write_toml

K = 10
LIMITS = [10.0, 20.0, 30.0, 40.0]
KIND = {kind.name: kind for kind in gate_kinds.KINDS}


def population(values: Mapping[str, list[float]]) -> Population:
    arrays = {level: np.sort(np.asarray(v, dtype=np.float64)) for level, v in values.items()}
    for a in arrays.values():
        a.flags.writeable = False
    digest = hashlib.sha256(repr(sorted((k, a.tobytes()) for k, a in arrays.items())).encode())
    return Population(levels=tuple(arrays), excluded=(), values={"v": arrays},
                      fingerprint=digest.hexdigest())


def spread(counts: list[int], *, at: str = "even") -> list[float]:
    """``counts[j]`` records in cell j of LIMITS (right-closed), evenly spread through it; those
    of cell 1, (10, 20], all at its right end or all at its left end (just past 10) with
    ``at``. (Cell 1 is also a cell of every earlier release here: moving records inside it
    moves none from one atom to another.)"""
    edges = [0.0, *LIMITS, 50.0]
    out: list[float] = []
    for j, count in enumerate(counts):
        lo, hi = edges[j], edges[j + 1]
        if at == "even" or j != 1:
            out += list(np.linspace(lo, hi, count + 2)[1:-1])
        elif at == "right":
            out += [hi] * count
        else:
            out += [float(np.nextafter(lo, np.inf))] * count
    return out


class Work:
    """Counts what an admission does: calls of each step and the sizes of the arrays each
    works on (what its time is made of)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ops: list[tuple[str, tuple[int, ...]]] = []
        for name in ("cell_counts", "combine", "small", "atoms", "atom_totals"):
            monkeypatch.setattr(memory, name, self.counted(name, getattr(memory, name)))

    def counted(self, name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sizes = tuple(int(np.size(a)) for a in args if isinstance(a, np.ndarray))
            self.ops.append((name, sizes))
            return fn(*args, **kwargs)
        return wrapper


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    s.ensure_budgets({"d": 1.0})
    yield s
    s.close()


def admission_work(store: Store, pop: Population, monkeypatch: pytest.MonkeyPatch,
                   key: str) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """The operations of admitting a table with LIMITS (after one earlier table), and the
    coarsening rounds."""
    disclosure = Disclosure(K, max_releases=64, max_limits=100_000)
    rounds = 0
    with store.locked("d") as (conn, _t, _s):
        earlier = Bins(Partition.bins([25.0], ["a", "b"]))
        disclosure.admit(conn, dataset="d", variable="v", epoch=1, population=pop,
                         candidate=earlier, request_key=f"{key}-0")
        work = Work(monkeypatch)
        candidate = Bins(Partition.bins(LIMITS, ["a", "b"]))
        real = Bins.coarsen

        def coarsen(self: Bins, bad: Any) -> Bins:
            nonlocal rounds
            rounds += 1
            return real(self, bad)

        monkeypatch.setattr(Bins, "coarsen", coarsen)
        disclosure.admit(conn, dataset="d", variable="v", epoch=1, population=pop,
                         candidate=candidate, request_key=f"{key}-1")
        monkeypatch.setattr(Bins, "coarsen", real)
        monkeypatch.undo()
    return work.ops, rounds


def test_admission_work_is_the_same_for_an_empty_and_a_full_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cell (10, 20] empty, full, or full with its records at either end: the same operations
    on arrays of the same sizes, and no coarsening (every atom holds 0 or >= K records)."""
    other = spread([15, 12, 24, 11, 20])
    cases = {
        "empty": spread([15, 0, 24, 11, 20]),
        "full": spread([15, 30, 24, 11, 20]),
        "full, at the right end": spread([15, 30, 24, 11, 20], at="right"),
        "full, at the left end": spread([15, 30, 24, 11, 20], at="left"),
    }
    seen = {}
    for i, (name, a) in enumerate(cases.items()):
        store = Store(f"sqlite:///{tmp_path / f'ledger-{i}.sqlite'}")
        store.ensure_budgets({"d": 1.0})
        seen[name] = admission_work(store, population({"a": a, "b": other}), monkeypatch,
                                    name)
        store.close()
    assert seen["empty"][1] == 0
    assert all(work == seen["empty"] for work in seen.values()), seen


def test_coarsening_work_does_not_depend_on_where_records_lie_and_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell of 3 records (coarsened): the same work wherever the 3 lie in it; the rounds are
    at most the candidate's limits (each round removes at least one)."""
    other = spread([15, 12, 24, 11, 20])
    seen = []
    for i, at in enumerate(("even", "right", "left")):
        store = Store(f"sqlite:///{tmp_path / f'ledger-{i}.sqlite'}")
        store.ensure_budgets({"d": 1.0})
        seen.append(admission_work(
            store, population({"a": spread([15, 3, 24, 11, 20], at=at), "b": other}),
            monkeypatch, at))
        store.close()
    assert 1 <= seen[0][1] <= len(LIMITS)
    assert seen[1] == seen[0] and seen[2] == seen[0]


# -- refusals read no value ------------------------------------------------------------------


@pytest.fixture
def services(tmp_path: Path, base_config: dict[str, Any]) -> Iterator[Services]:
    config = {**base_config, "compute_allowance": 140, "compute_period_s": 86_400}
    built = Services.build(load_settings(write_toml(tmp_path / "c.toml", config)))
    yield built
    built.close()


def quantiles(epsilon: float, upper: float = 100.0, group: str | None = None
              ) -> DPQuantilesRequest:
    return DPQuantilesRequest(variable="x", levels=[0.5], epsilon=epsilon, bounds=(0.0, upper),
                              group=group)


def test_refusals_read_no_value(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal decided before a computation (the request, public sizes, the budget and
    caps, the compute allowance) is made without reading one value of the data: its work is the
    same wherever the data lie."""
    gate = services.gate
    dp = KIND["dp_quantiles"]
    gate.release(dp, "cohort", quantiles(0.5), "first")  # uses the allowance of "first"
    read: list[str] = []
    for name in ("level", "pooled", "selection"):
        real = getattr(Population, name)

        def reading(self: Population, *args: Any, _name: str = name, _real: Any = real) -> Any:
            read.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(Population, name, reading)
    refusals: list[tuple[Any, Any, type[ServiceError], str]] = [
        (dp, quantiles(1e-4), InvalidRequest, "someone"),                # below the least ε
        (KIND["table"], TableRequest(variable="x", k=2), KAnonymityRefusal, "someone"),
        (KIND["table"], TableRequest(variable="x", k=10_000), KAnonymityRefusal, "someone"),
        (dp, quantiles(0.76), EpsilonCapExceeded, "someone"),            # over a quarter
        (dp, quantiles(0.5, 90.0), ComputeAllowanceExceeded, "first"),   # allowance used
    ]
    for kind, request, error, caller in refusals:
        with pytest.raises(error):
            gate.release(kind, "cohort", request, caller)
    assert read == []
    gate.release(dp, "cohort", quantiles(0.0011, 91.0), "second")  # computed: values read
    assert read
    read.clear()
    services.store.ensure_budgets({"cohort": 0.5 + 0.0011 + 1e-4})
    with pytest.raises(BudgetExceeded):
        gate.release(dp, "cohort", quantiles(0.5, 95.0), "another")
    assert read == []
