"""Attacks on categorical counts and missing counts, against a real center process
(docs/privacy.md, guarantee 15). The attacker holds a token and knows every record; it asks the
categorical table in every wording (levels, order, pooled, a larger K), Mann-Whitney sizes and
tables of variables with missing values, the levels' sizes, and the ε-DP counts, then appends a
few records (a count of 1..K-1 in a category, in a missing cell) and asks again. From all of it,
it computes every count the releases determine — the atoms of each variable's released sets,
the levels' sizes released beside them — and the test asserts each is 0 or >= K, and that the
records it wanted to single out (3 "current" smokers in arm a, 3 records missing y in arm a, 2
appended) are in no count it can isolate.
"""

from __future__ import annotations

from collections import Counter
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
from tests.helpers.leave_out import key_of, ledger_secret, per_variable
from tests.helpers.processes import running_center

pytestmark = pytest.mark.process

K = 5
D = "/datasets/d"
CATEGORIES = ["never", "former", "current"]


def records() -> list[tuple[str, float, float | None, str | None]]:
    """(arm, x, y, smoking). Arm a: 3 "current" (1..K-1), 3 records missing y (1..K-1: they
    leave arm a), 6 missing a label; arm b: 7 missing y (a released missing count)."""
    rows: list[tuple[str, float, float | None, str | None]] = []
    rng = np.random.default_rng(28)
    for i in range(40):
        smoking = (["never"] * 20 + ["former"] * 11 + ["current"] * 3 + [None] * 6)[i]
        rows.append(("a", float(rng.integers(0, 50)), None if i in (4, 25, 33)
                     else float(rng.integers(0, 50)), smoking))
    for i in range(30):
        smoking = CATEGORIES[i % 3]
        rows.append(("b", float(rng.integers(0, 50)), None if i < 7
                     else float(rng.integers(0, 50)), smoking))
    return rows


def write(path: Path, rows: list[tuple[str, float, float | None, str | None]]) -> None:
    write_csv(pa.table({
        "arm": [r[0] for r in rows], "x": [r[1] for r in rows],
        "y": pa.array([r[2] for r in rows], pa.float64()),
        "smoking": pa.array([r[3] for r in rows], pa.string()),
    }), path)


@pytest.fixture
def center(tmp_path: Path) -> Iterator[tuple[httpx.Client, Path, Path]]:
    csv = tmp_path / "cohort.csv"
    write(csv, records())
    port = free_port()
    config = write_toml(tmp_path / "center.toml", {
        "center_id": "adv-cat", "k": K, "tokens": [TOKEN], "port": port,
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "datasets": {"d": {"source": {"kind": "csv", "path": str(csv)},
                           "variables": ["x", "y"], "missing": "per_variable",
                           "categorical": {"smoking": CATEGORIES},
                           "group": {"column": "arm", "levels": ["a", "b"]},
                           "epsilon_total": 5.0}},
    })
    with running_center(config, port), httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=AUTH, timeout=60) as c:
        yield c, csv, tmp_path / "ledger.sqlite"


def code(smoking: str | None) -> int:
    return CATEGORIES.index(smoking) if smoking in CATEGORIES else len(CATEGORIES)


def atoms(released: list[dict[str, list[list[int]]]],
          population: list[tuple[str, float, float | None, str | None]]) -> Counter[Any]:
    """The records sharing the released cell of every categorical release (per level: the
    cells of codes each release showed for it, or for all levels pooled under "*")."""
    counter: Counter[Any] = Counter()
    for arm, _x, _y, smoking in population:
        c = code(smoking)
        key = tuple(next((j for j, cell in enumerate(r.get(arm, r.get("*", [])))
                          if c in cell), None) for r in released)
        counter[(arm, *key)] += 1
    return counter


def test_differencing_categories_missing_counts_and_tables(
        center: tuple[httpx.Client, Path, Path]) -> None:
    client, csv, ledger = center
    truth = records()
    # The population the checker expects (guarantee 15): the 3 records of arm a missing y
    # (1..K-1) leave arm a, and K - 3 more of keyed rank with them (the rows an arm leaves out
    # number 0 or >= K: its enrolment minus its size is never 3); arm b keeps its 7 missing
    # (>= K) as a released count. The checker reads the center's secret from its ledger to
    # know which; the attacker never can.
    key = key_of("d", ledger_secret(ledger))
    population = []
    for arm in ("a", "b"):
        content = [(x, y, float(code(s))) for a, x, y, s in truth if a == arm]
        kept = per_variable(content, 2, K, key)
        assert kept is not None and not kept[1]
        population += [(arm, x, y, (*CATEGORIES, None)[int(c)]) for x, y, c in kept[0]]
    assert len(population) == 35 + 30

    released: list[dict[str, list[list[int]]]] = []
    answers: list[Any] = []
    for body in ({"groups": ["a", "b"], "k": K}, {"groups": ["b", "a"], "k": K},
                 {"k": K}, {"groups": ["a", "b"], "k": K + 4}):
        r = client.post(D + "/categorical", json={"variable": "smoking", **body})
        assert r.status_code == 200, r.text
        answer = r.json()
        answers.append(answer)
        cells = [[code(c) for c in cell] for cell in answer["cells"]]
        rows = body.get("groups") or ["*"]
        released.append({level: cells for level in rows})
        for row in answer["counts"]:
            assert all(c == 0 or c >= K for c in row), answer
    # "current" (3 in arm a) is never a cell of its own: merged with its neighbour.
    assert all(["current"] not in a["cells"] for a in answers)
    # Sizes beside them: Mann-Whitney's n and m, the tables' totals, /v1/info.
    sizes: dict[str, set[int]] = {"a": set(), "b": set()}
    present_y: dict[str, set[int]] = {"a": set(), "b": set()}
    for variable, into in (("x", sizes), ("y", present_y)):
        r = client.post(D + "/mwu", json={"variable": variable, "groups": ["a", "b"]})
        assert r.status_code == 200, r.text
        into["a"].add(r.json()["n_x"])
        into["b"].add(r.json()["n_y"])
        table = client.post(D + "/table", json={"variable": variable, "groups": ["a", "b"],
                                            "k": K}).json()
        for level, row in zip("ab", table["counts"], strict=True):
            into[level].add(int(sum(row)))
    for level, row in zip("ab", answers[0]["counts"], strict=True):
        sizes[level].add(sum(row))
    # One population: every release of a level totals one size; y's present count differs
    # from it by the missing count, which is 0 or >= K.
    assert sizes == {"a": {35}, "b": {30}} and present_y == {"a": {35}, "b": {23}}
    missing = {level: next(iter(sizes[level])) - next(iter(present_y[level])) for level in "ab"}
    assert missing == {"a": 0, "b": 7}
    # The same counts, exact, as the missing release says them: nothing beyond.
    said = client.post(D + "/missing", json={"variable": "y"}).json()
    assert (said["n"], said["present"], said["missing"]) == ([35, 30], [35, 23], [0, 7])
    # Every count the categorical releases and the sizes determine: atoms 0 or >= K.
    for atom, n in atoms(released, population).items():
        assert n == 0 or n >= K, (atom, n)
    # The ε-DP twin: paid once, the same answer when asked again.
    body = {"variable": "smoking", "group": "a", "epsilon": 1.0}
    first = client.post(D + "/dp/categorical", json=body)
    assert first.status_code == 200, first.text
    assert client.post(D + "/dp/categorical", json=body).json() == first.json()
    spent = client.get("/budget").json()["datasets"]["d"]["spent_epsilon"]
    assert spent == pytest.approx(1.0)

    # Over time: 2 records appended, one "current" smoker in arm a and one record of arm b
    # missing y: every set they join moves by 1..K-1, so the change is held.
    write(csv, [*truth, ("a", 7.0, 8.0, "current"), ("b", 9.0, None, "never")])
    again = [client.post(D + "/categorical", json={"variable": "smoking", "groups": ["a", "b"],
                                               "k": K}).json(),
             client.post(D + "/mwu", json={"variable": "y", "groups": ["a", "b"]}).json()]
    assert again[0] == answers[0]
    assert (again[1]["n_x"], again[1]["n_y"]) == (35, 23)
    # A new question is answered from the epoch's data too: nothing of the 2 records shows.
    fresh = client.post(D + "/mwu", json={"variable": "x", "groups": ["b", "a"], "epsilon": 0.5})
    assert fresh.status_code == 200, fresh.text
    assert (fresh.json()["n_x"], fresh.json()["n_y"]) == (30, 35)
