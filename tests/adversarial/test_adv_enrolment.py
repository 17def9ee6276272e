"""Subtracting released sizes from a public enrolment, against a real center process
(docs/privacy.md, "No count in 1..K−1" and guarantee 15).

A trial publishes its arms' enrolment. The attacker holds a token and that enrolment; it asks
every exact release that carries a size — ``/v1/info``, Mann-Whitney's n and m, tables' totals
(per arm and pooled), the ``missing`` release's n and present counts, YJ moments' n — of
datasets whose arm a misses y on e records, e in 1..K-1 and e >= K, with complete cases and with
``missing = "per_variable"``, and of an arm too small to keep. Every enrolment minus every size
it saw must be 0 or >= K: never the 1..K-1 records of an arm that miss a value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest

from fedstats_cli.procs import free_port
from tests.helpers.center import AUTH, TOKEN, write_csv
from tests.helpers.config import write_toml
from tests.helpers.processes import running_center

pytestmark = pytest.mark.process

K = 5
MISSING = [1, 3, K - 1, K, K + 2]
"""Records of arm a missing y, one dataset each."""
ENROLMENT = {"a": 40, "b": 30}
SMALL = {"a": 7, "b": 30}
"""The "small" dataset: arm a of 7 records, 3 missing y: 4 complete, fewer than K would stay
once K leave (it is out whole)."""


def table(enrolment: dict[str, int], missing_y: int, seed: int) -> pa.Table:
    """Arm a misses y on ``missing_y`` records; arm b misses x on K + 1 (a released missing
    count per variable, every row of b left out with complete cases)."""
    rng = np.random.default_rng(seed)
    n = sum(enrolment.values())
    x = rng.integers(0, 30, n).astype(float)
    y = rng.integers(0, 30, n).astype(float)
    y[:missing_y] = np.nan
    b = enrolment["a"]
    x[b:b + K + 1] = np.nan
    arm = ["a"] * enrolment["a"] + ["b"] * enrolment["b"]
    return pa.table({"x": pa.array(x, from_pandas=True), "y": pa.array(y, from_pandas=True),
                     "arm": arm})


@pytest.fixture(params=["complete_cases", "per_variable"])
def center(request: pytest.FixtureRequest, tmp_path: Path
           ) -> Iterator[tuple[httpx.Client, str]]:
    datasets: dict[str, Any] = {}
    for i, (name, enrolment, missing) in enumerate(
            [*((f"e{e}", ENROLMENT, e) for e in MISSING), ("small", SMALL, 3)]):
        path = write_csv(table(enrolment, missing, seed=i), tmp_path / f"{name}.csv")
        datasets[name] = {"source": {"kind": "csv", "path": str(path)}, "variables": ["x", "y"],
                          "missing": request.param,
                          "group": {"column": "arm", "levels": ["a", "b"]},
                          "epsilon_total": 5.0}
    port = free_port()
    config = write_toml(tmp_path / "center.toml", {
        "center_id": "adv-enrolment", "k": K, "tokens": [TOKEN], "port": port,
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}", "datasets": datasets,
    })
    with running_center(config, port), httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=AUTH, timeout=60) as client:
        yield client, request.param


def sizes_released(client: httpx.Client, name: str) -> dict[str, set[int]]:
    """Every size the attacker sees per arm ("*": every record), from every kind that
    releases one (403 refusals release none)."""
    seen: dict[str, set[int]] = {"a": set(), "b": set(), "*": set()}
    info = next(d for d in client.get("/info").json()["datasets"] if d["name"] == name)
    for level, n in info["n_by_group"].items():
        seen[level].add(n)
    seen["*"].add(info["n_records"])
    for by_level in info["n_by_variable"].values():
        for level, n in by_level.items():
            seen[level].add(n)
    base = f"/datasets/{name}"
    for variable in ("x", "y"):
        r = client.post(base + "/mwu", json={"variable": variable, "groups": ["a", "b"]})
        if r.status_code == 200:
            seen["a"].add(r.json()["n_x"])
            seen["b"].add(r.json()["n_y"])
        else:
            assert r.json()["error"] == "k_anonymity_refused", r.text
        for groups in (["a", "b"], None):
            r = client.post(base + "/table", json={"variable": variable, "groups": groups,
                                                   "k": K})
            if r.status_code != 200:
                assert r.json()["error"] == "k_anonymity_refused", r.text
                continue
            for level, row in zip(groups or ["*"], r.json()["counts"], strict=True):
                seen[level].add(int(sum(row)))
        r = client.post(base + "/missing", json={"variable": variable})
        assert r.status_code == 200, r.text
        m = r.json()
        for level, n, present in zip(m["levels"], m["n"], m["present"], strict=True):
            seen[level] |= {n, present}
        for group in ("a", None):
            r = client.post(base + "/yj-moments", json={
                "variable": variable, "group": group, "lmbda": 1.0, "epsilon": 0.1,
                "bounds": [-1, 31]})
            if r.status_code == 200:
                seen[group or "*"].add(r.json()["n"])
            else:
                assert r.json()["error"] == "k_anonymity_refused", r.text
    return seen


def test_no_enrolment_minus_a_released_size_is_1_to_k_minus_1(
        center: tuple[httpx.Client, str]) -> None:
    client, mode = center
    for name, enrolment in [*((f"e{e}", ENROLMENT) for e in MISSING), ("small", SMALL)]:
        seen = sizes_released(client, name)
        public = {**enrolment, "*": sum(enrolment.values())}
        for level, sizes in seen.items():
            for size in sizes:
                gap = public[level] - size
                assert gap == 0 or gap >= K, (name, level, size, public[level])
        if name == "small":
            continue
        # The releases did carry arm a's exact size (the attack had something to subtract):
        # 1..K-1 missing leave K out; more, with complete cases, leave themselves out, and per
        # variable stay (their count, >= K, released beside the size).
        e = int(name[1:])
        left = K if e < K else (e if mode == "complete_cases" else 0)
        assert ENROLMENT["a"] - left in seen["a"], (name, seen)


def test_an_arm_too_small_to_leave_out_k_is_out_whole(center: tuple[httpx.Client, str]
                                                       ) -> None:
    """7 enrolled, 3 missing y: the arm is out (0 in /v1/info, refused), never a size of 4 or
    of 2 beside a public 7."""
    client, _mode = center
    info = next(d for d in client.get("/info").json()["datasets"] if d["name"] == "small")
    assert info["n_by_group"]["a"] == 0
    r = client.post("/datasets/small/mwu", json={"variable": "x", "groups": ["a", "b"]})
    assert (r.status_code, r.json()["error"]) == (403, "k_anonymity_refused")
