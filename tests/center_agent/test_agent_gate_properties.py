"""Property test of the release gate, as an attacker holding a token would drive it.

Random data (ties, missing values, undeclared and missing labels, a level smaller than K), a
random K, and a random sequence of requests over the whole API — tables of any grouping (every
record, or two or three levels in any order), K and closing, refinements of tables a trusted
peer signed at random limits, exact and noisy Mann-Whitney, DP releases, YJ moments,
``/v1/info`` — with the data file changed between requests (records appended, removed, edited:
corrections). Natural limits are any number, a raw value, one
ulp either side of one, or a number the center released before (the chain that converged on a raw
value); the center refines its own views and peers' tables closed by buffers or natural limits;
tables and refinements also travel in batches. Every answer is kept with the data it was computed
from: the epoch's (a change that fails the version check is held, and releases keep coming from
the epoch's data; ``gate.epochs``), which the reference checks against the per-record truth of
that version.

Checked with an independent reference (plain per-record loops, none of the gate's code):

* every exact count released is 0 or >= K, and is the true count of the population;
* the *atoms* of every table and refinement released so far and of the levels' sizes (records
  sharing the released set of every one of them) hold 0 or >= K records of every data version
  answers came from, and change by 0 or >= K between two such versions: no combination of the
  released counts isolates 1..K-1 records;
* one population: an ungrouped table totals its levels' tables, and every variable's tables
  total the same;
* the same question gets the same answer while the data do not change;
* no answer or error text holds a raw value the caller did not send;
* **one number per gap** (docs/privacy.md, guarantee 13): every number the center placed between
  data (a table's limits and buffers, a refinement's split limits and moved buffers; not the
  numbers the caller sent) lies strictly inside a gap between two consecutive distinct raw
  values of the data it was computed from, or beyond them; and a number never released before
  lands only in a gap holding no earlier one. With appends only, each gap holds at most one
  number for ever; a removal that merges gaps keeps theirs, and no new one joins them.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from center_agent.core.config import load_settings
from center_agent.main import create_app
from tests.helpers import leave_out
from tests.helpers.center import AUTH, PEER_ID, PEER_PUBLIC_KEY, TOKEN, peer_table
from tests.helpers.config import write_toml

LEVELS = ("a", "b", "c")
OFFSET = 0.37  # raw values all carry these digits, so a raw value in a text is recognizable


# -- data -------------------------------------------------------------------------------------

Row = tuple[str | None, float | None, float | None, str | None]  # (label, x, y, s)
CATEGORIES = ("p", "q", "r")
"""The categorical variable ``s``'s declared categories; "junk" and a missing label fall in its
missing cell (code 3)."""
LABELS = (*CATEGORIES, "junk", None)


@st.composite
def datasets(draw: Any) -> tuple[int, float, list[Row]]:
    k = draw(st.integers(2, 6))
    grid = draw(st.sampled_from([1.0, 0.5, 0.01]))
    sizes = {"a": draw(st.integers(k, 8 * k)), "b": draw(st.integers(k, 8 * k)),
             "c": draw(st.integers(0, 2 * k)), "z": draw(st.integers(0, 3)),
             None: draw(st.integers(0, 3))}
    rows: list[Row] = []
    for label, n in sizes.items():
        for _ in range(n):
            rows.append((label, _value(draw, grid), None if draw(st.integers(0, 9)) == 0
                         else _value(draw, grid), draw(st.sampled_from(LABELS))))
    return k, grid, rows


def _value(draw: Any, grid: float) -> float:
    return round(draw(st.integers(-30, 30)) * grid + OFFSET, 6)


def write_rows(path: Path, rows: list[Row]) -> None:
    lines = ["x,y,arm,s"]
    for label, x, y, s in rows:
        lines.append(",".join(["" if v is None else repr(v) for v in (x, y)]
                              + ["" if label is None else label, "" if s is None else s]))
    path.write_text("\n".join(lines) + "\n")


def code(s: str | None) -> float:
    return float(CATEGORIES.index(s)) if s in CATEGORIES else float(len(CATEGORIES))


def population(rows: list[Row], k: int, mode: str, key: bytes
               ) -> dict[str, dict[str, list[float]]]:
    """The population rule by hand. ``complete_cases``: rows of declared levels with x and y
    present, in levels holding >= K of them. ``per_variable`` (docs/privacy.md, guarantee 15):
    per level, a variable missing on 1..K-1 records drops them, one present on 1..K-1 is
    withheld, until nothing changes; a level left with < K records is out. Either way a level
    leaving out 1..K-1 of its rows leaves out K - e more, of least keyed rank under ``key``
    (guarantee 2; ``tests.helpers.leave_out``, record by record). Per level: each variable's
    present values ("s": its category codes, the missing cell 3), "*", one entry per record of
    the level (its size), and "+", one per row labelled with it (its public enrolment)."""
    by_level: dict[str, list[Row]] = {level: [] for level in LEVELS}
    for row in rows:
        if row[0] in by_level:
            by_level[row[0]].append(row)
    out: dict[str, dict[str, list[float]]] = {}
    for level, records in by_level.items():
        content = [(r[1], r[2], code(r[3])) for r in records]
        withheld: set[int] = set()
        kept: list[Any] | None
        if mode == "complete_cases":
            complete = [c for c in content if c[0] is not None and c[1] is not None]
            kept = leave_out.fill_up(len(content), complete, k, key)
        else:
            chosen = leave_out.per_variable(content, 2, k, key)
            kept, withheld = chosen if chosen is not None else (None, set())
        if kept is None:
            continue
        out[level] = {
            "x": [] if 0 in withheld else [c[0] for c in kept if c[0] is not None],
            "y": [] if 1 in withheld else [c[1] for c in kept if c[1] is not None],
            "s": [c[2] for c in kept],
            "*": [0.0] * len(kept),
            "+": [0.0] * len(records),
        }
    return out


# -- the attacker's record of what was released ------------------------------------------------


class Released:
    """Sets of records one answer counted: per level, the set of each cell (or pooled)."""

    def __init__(self, variable: str, limits: list[float], labels: dict[str, list[int]],
                 pooled: bool, totals: dict[str, list[float]]) -> None:
        self.variable = variable
        self.interior = [float(v) for v in limits[1:-1]]
        self.labels = labels
        self.pooled = pooled
        self.totals = totals  # released count of each set, per level key ("*": pooled)

    def set_of(self, level: str, value: float) -> tuple[Any, ...] | None:
        if level not in self.labels:
            return None
        cell = sum(1 for c in self.interior if value > c)  # right-closed cells
        label = self.labels[level][cell]
        return ("*", label) if self.pooled else (level, label)


def atoms(released: list[Released], pop: dict[str, dict[str, list[float]]],
          variable: str) -> Counter[tuple[Any, ...]]:
    """Records sharing the released set of every release of ``variable``, and their level
    (levels' sizes are released exactly: by MWU, YJ moments, grouped tables)."""
    counter: Counter[tuple[Any, ...]] = Counter()
    mine = [r for r in released if r.variable == variable]
    for level, columns in pop.items():
        for value in columns[variable]:
            counter[(level, *(r.set_of(level, value) for r in mine))] += 1
        # The records missing the variable: the rest of the level, one released set of every
        # release of the variable (the level's size is released).
        counter[(level, "missing")] += len(columns["*"]) - len(columns[variable])
    return counter


def small(n: int, k: int) -> bool:
    return 0 < abs(n) < k


# -- the run ----------------------------------------------------------------------------------


@st.composite
def operations(draw: Any, k: int) -> list[tuple[Any, ...]]:
    groups = st.sampled_from([None, ("a", "b"), ("b", "a"), ("a", "c")])
    # A table or refinement may count any number of levels, one row each in the order asked.
    table_groups = st.sampled_from([None, ("a", "b"), ("b", "a"), ("a", "c"), ("a", "b", "c"),
                                    ("c", "a", "b")])
    # A natural limit: any number; a raw value, or one ulp below or above one; a number the
    # center released (a chain of natural limits, each set to the last cut near a raw value).
    natural = st.one_of(
        st.integers(-40, 40).map(lambda v: v + 0.25),
        st.tuples(st.just("raw"), st.integers(0, 10**6), st.sampled_from([-1, 0, 1])),
        st.tuples(st.just("placed"), st.integers(0, 10**6)),
    )
    extreme = st.one_of(st.sampled_from(["buffer", "infinite"]), natural)
    table = st.tuples(st.just("table"), st.sampled_from(["x", "y"]), table_groups,
                      st.sampled_from([k, k, k + 1, 2 * k]), extreme, extreme)
    # A peer's table closed at each end by an open end, a buffer or a natural limit.
    peer_end = st.one_of(st.just("infinite"), st.tuples(st.just("buffer"), st.integers(0, 40)),
                         st.tuples(st.just("natural"), natural))
    refine = st.tuples(st.just("refine"), st.sampled_from(["x", "y"]), table_groups,
                       st.sampled_from([k, k, 2 * k]),
                       st.lists(st.integers(-35, 35), min_size=1, max_size=30, unique=True),
                       peer_end, peer_end)
    own = st.tuples(st.just("refine_own"), st.sampled_from(["x", "y"]), table_groups)
    # The categorical variable's counts per category (cells merged by the K rule), any K.
    cat = st.tuples(st.just("cat"), st.just("s"), groups, st.sampled_from([k, k, k + 2]))
    op = st.one_of(
        table, table, refine, refine, refine, own, cat, cat,
        st.tuples(st.just("batch"), st.lists(st.one_of(table, refine, own, cat), min_size=1,
                                             max_size=4)),
        st.tuples(st.just("dpcat"), st.sampled_from([None, "a", "c"])),
        st.tuples(st.just("missing"), st.sampled_from(["x", "y"])),
        st.tuples(st.just("mwu"), st.sampled_from(["x", "y"]),
                  st.sampled_from([("a", "b"), ("b", "a"), ("a", "c")]),
                  st.sampled_from([None, 0.2])),
        st.tuples(st.just("dp"), st.sampled_from([None, "a", "c"])),
        st.tuples(st.just("yj"), st.sampled_from([None, "a"]), st.sampled_from([0.5, 1.0])),
        st.tuples(st.just("info")),
        st.tuples(st.just("change"),
                  st.sampled_from(["append", "remove", "edit", "missing", "block", "block",
                                   "block"]),
                  st.integers(1, 4 * k + 2)),
        st.tuples(st.just("repeat")),
    )
    return draw(st.lists(op, min_size=6, max_size=24))


class Attacker:
    def __init__(self, client: httpx.AsyncClient, k: int, mode: str, key: bytes) -> None:
        self.client = client
        self.k = k
        self.mode = mode  # the dataset's `missing` setting
        # The checker's copy of the center's leave-out key (read from its ledger; the attacker
        # proper never uses it: only the reference population does).
        self.key = key
        # Every exact answer in order, with the data version it came from (None: sizes only).
        self.history: list[tuple[int, Released | None]] = []
        self.answers: dict[tuple[int, str], str] = {}
        self.last: tuple[str, dict[str, Any]] | None = None
        self.own: dict[str, dict[str, Any]] = {}
        self.texts: list[tuple[int, str, str | None, set[float]]] = []
        # Every number the center placed between data, in release order: (version, variable,
        # number).
        self.placed: list[tuple[int, str, float]] = []
        self.epochs: dict[int, int] = {}  # epoch -> the data version it began on

    async def post(self, version: int, path: str, body: dict[str, Any]) -> httpx.Response:
        r = await self.client.post(path, json=body, headers=AUTH)
        assert r.status_code < 500, r.text
        variable = None if r.status_code != 200 else body.get("variable")
        self.texts.append((version, r.text, variable, _numbers_in(body)))
        if r.status_code == 200:
            self.same_answer(version, path, body, r.json())
        self.last = (path, body)
        return r

    def same_answer(self, version: int, path: str, body: dict[str, Any], answer: Any) -> None:
        key = (version, path + json.dumps(body, sort_keys=True))
        text = json.dumps(answer, sort_keys=True)
        previous = self.answers.setdefault(key, text)
        assert previous == text, "the same question got another answer"

    def place(self, version: int, variable: str, numbers: list[Any], sent: set[float]) -> None:
        """Keep the finite ``numbers`` of a release the caller did not send."""
        for value in numbers:
            if isinstance(value, (int, float)) and math.isfinite(value) and value not in sent:
                self.placed.append((version, variable, float(value)))


def _numbers_in(value: Any) -> set[float]:
    found: set[float] = set()
    if isinstance(value, dict):
        for v in value.values():
            found |= _numbers_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            found |= _numbers_in(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found.add(float(value))
    return found


@pytest.mark.slow  # 150 random sequences of releases, each over a fresh center: ~30 s
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), case=datasets())
def test_no_sequence_of_requests_isolates_fewer_than_k_records(
    tmp_path_factory: Any, data: Any, case: Any
) -> None:
    k, grid, rows = case
    mode = data.draw(st.sampled_from(["complete_cases", "per_variable"]))
    note(f"k={k}, grid={grid}, mode={mode}, rows={rows}")
    ops = data.draw(operations(k))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    tmp: Path = tmp_path_factory.mktemp("gate")
    csv = tmp / "d.csv"
    write_rows(csv, rows)
    config = {
        "center_id": "prop", "k": k, "tokens": [TOKEN],
        "ledger_url": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "peers": {PEER_ID: PEER_PUBLIC_KEY},
        "datasets": {"d": {"source": {"kind": "csv", "path": str(csv)},
                           "variables": ["x", "y"], "missing": mode,
                           "categorical": {"s": list(CATEGORIES)},
                           "group": {"column": "arm", "levels": list(LEVELS)},
                           "epsilon_total": 1000.0}},
    }
    app = create_app(load_settings(write_toml(tmp / "c.toml", config)))
    key = leave_out.key_of("d", leave_out.ledger_secret(tmp / "ledger.sqlite"))
    versions = [list(rows)]

    async def run() -> Attacker:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            attacker = Attacker(client, k, mode, key)
            for op in ops:
                await step(attacker, op, versions, csv, k, grid, rng)
            return attacker

    try:
        attacker = anyio.run(run)
    finally:
        app.state.services.close()
    check(attacker, versions, k)


async def answering_version(attacker: Attacker, versions: list[list[Row]]) -> int:
    """The data version the center answers from now: its epoch's (``/v1/info``, asked with
    nothing changed since, admits as the next request does). A change that fails the version
    check is held, so this is not always the newest version; an epoch seen for the first time
    began on the newest."""
    r = await attacker.client.get("/v1/info", headers=AUTH)
    assert r.status_code == 200, r.text
    dataset = r.json()["datasets"][0]
    assert dataset["paused"] is False  # a held change never pauses a running center
    return attacker.epochs.setdefault(dataset["epoch"], len(versions) - 1)


async def step(attacker: Attacker, op: tuple[Any, ...], versions: list[list[Row]], csv: Path,
               k: int, grid: float, rng: np.random.Generator) -> None:
    kind = op[0]
    if kind != "change":
        v = await answering_version(attacker, versions)
        pop = population(versions[v], k, attacker.mode, attacker.key)
    if kind == "change":
        rows = list(versions[-1])
        _, how, n = op
        if how == "append":
            for _ in range(n):
                label = str(rng.choice(["a", "b", "c"]))
                rows.append((label, round(int(rng.integers(-30, 31)) * grid + OFFSET, 6),
                             round(int(rng.integers(-30, 31)) * grid + OFFSET, 6),
                             LABELS[int(rng.integers(len(LABELS)))]))
        elif how == "block":  # many records at one point: a change the check can let through
            label = str(rng.choice(["a", "b"]))
            x, y = (round(int(rng.integers(-30, 31)) * grid + OFFSET, 6) for _ in range(2))
            rows += [(label, x, y, LABELS[int(rng.integers(len(LABELS)))])] * (k + n)
        elif how == "remove":
            rows = rows[: max(0, len(rows) - n)]
        elif how == "missing":  # a correction: a wrong value set to missing (NULL)
            i = int(rng.integers(len(rows)))
            label, _x, y, cat = rows[i]
            rows[i] = (label, None, y, cat)
        else:
            i = int(rng.integers(len(rows)))
            label, _x, y, _cat = rows[i]
            # An edited value, and its category recoded (a correction of a label).
            rows[i] = (label, round(int(rng.integers(-30, 31)) * grid + OFFSET, 6), y,
                       LABELS[int(rng.integers(len(LABELS)))])
        versions.append(rows)
        write_rows(csv, rows)
        return
    if kind == "repeat":
        if attacker.last is not None:
            await attacker.post(v, *attacker.last)
        return
    if kind == "info":
        r = await attacker.client.get("/v1/info", headers=AUTH)
        assert r.status_code == 200, r.text
        shown = r.json()["datasets"][0]
        for size in [shown["n_records"], *shown["n_by_group"].values(),
                     *(n for sizes in shown["n_by_variable"].values() for n in sizes.values())]:
            assert size % k == 0
        return
    if kind == "batch":
        prepared = [(sub, prepare(attacker, sub, v, versions, k, grid)) for sub in op[1]]
        items = [(sub, p) for sub, p in prepared if p is not None]
        if not items:
            return
        body = {"items": [{"kind": p[0], "request": p[2]} for _, p in items]}
        r = await attacker.client.post("/v1/datasets/d/releases", json=body, headers=AUTH)
        assert r.status_code == 200, r.text
        attacker.texts.append((v, r.text, None, _numbers_in(body)))
        for (sub, (_name, path, request)), answer in zip(items, r.json()["answers"],
                                                          strict=True):
            assert answer["status"] < 500, answer
            if answer["status"] == 200:
                attacker.same_answer(v, path, request, answer["release"])
                absorb(attacker, sub, v, pop, request, answer["release"])
        return
    if kind in ("table", "refine", "refine_own", "cat"):
        ready = prepare(attacker, op, v, versions, k, grid)
        if ready is None:
            return
        _name, path, body = ready
        r = await attacker.post(v, path, body)
        if r.status_code == 200:
            absorb(attacker, op, v, pop, body, r.json())
        return
    if kind == "mwu":
        _, variable, groups, eps = op
        body: dict[str, Any] = {"variable": variable, "groups": list(groups)}
        if eps is not None:
            body["epsilon"] = eps
        r = await attacker.post(v, "/v1/datasets/d/mwu", body)
        if r.status_code == 200:
            m = r.json()
            for level, n in zip(groups, (m["n_x"], m["n_y"]), strict=True):
                assert n == len(pop[level][variable]) and n >= k
            attacker.history.append((v, None))
        else:
            assert r.json()["error"] in ("k_anonymity_refused", "data_changed"), r.text
        return
    if kind == "dp":
        body = {"variable": "x", "group": op[1], "epsilon": 0.1, "bounds": [-40, 40],
                "levels": [0.25, 0.5]}
        await attacker.post(v, "/v1/datasets/d/dp/quantiles", body)
        return
    if kind == "missing":
        r = await attacker.post(v, "/v1/datasets/d/missing", {"variable": op[1]})
        assert r.status_code == 200, r.text
        m = r.json()
        for level, n, present, missing in zip(m["levels"], m["n"], m["present"], m["missing"],
                                              strict=True):
            columns = pop.get(level, {"*": [], op[1]: []})
            assert (n, present) == (len(columns["*"]), len(columns[op[1]]))
            assert missing == n - present and not small(missing, k) and not small(present, k)
        attacker.history.append((v, None))
        return
    if kind == "dpcat":
        r = await attacker.post(v, "/v1/datasets/d/dp/categorical",
                                {"variable": "s", "group": op[1], "epsilon": 0.1})
        assert r.status_code == 200 or r.json()["error"] == "k_anonymity_refused", r.text
        return
    if kind == "yj":
        body = {"variable": "x", "group": op[1], "lmbda": op[2], "epsilon": 0.1,
                "bounds": [-40, 40]}
        r = await attacker.post(v, "/v1/datasets/d/yj-moments", body)
        if r.status_code == 200:
            n = r.json()["n"]
            expected = (len(pop[op[1]]["x"]) if op[1] else sum(len(c["x"]) for c in pop.values()))
            assert n == expected and n >= k
            attacker.history.append((v, None))
        return
    raise AssertionError(op)


def natural_value(attacker: Attacker, choice: Any, variable: str,
                  pop: dict[str, dict[str, list[float]]]) -> float | str:
    """A generated natural limit as a number (see ``operations``)."""
    if not isinstance(choice, tuple):
        return choice  # type: ignore[no-any-return]
    if choice[0] == "raw":
        raw = sorted({value for columns in pop.values() for value in columns[variable]})
        if not raw:
            return 0.25
        value = raw[choice[1] % len(raw)]
        return math.nextafter(value, choice[2] * math.inf) if choice[2] else value
    mine = [value for _, name, value in attacker.placed if name == variable]
    return mine[choice[1] % len(mine)] if mine else 0.25


def prepare(attacker: Attacker, op: tuple[Any, ...], v: int, versions: list[list[Row]], k: int,
            grid: float) -> tuple[str, str, dict[str, Any]] | None:
    """The (kind, path, body) of a table, refinement or categorical operation, or None when
    there is none."""
    pop = population(versions[v], k, attacker.mode, attacker.key)
    kind, variable, groups = op[0], op[1], op[2]
    if kind == "cat":
        return "categorical", "/v1/datasets/d/categorical", {"variable": variable,
                                                              "groups": groups, "k": op[3]}
    if kind == "table":
        kk = op[3]
        lower, upper = (natural_value(attacker, e, variable, pop) for e in op[4:6])
        if isinstance(lower, float) and isinstance(upper, float) and lower >= upper:
            return None
        body = {"variable": variable, "groups": groups, "k": kk, "lower": lower, "upper": upper}
        return "table", "/v1/datasets/d/table", body
    if kind == "refine":
        kk, cuts, low_end, high_end = op[3:7]
        inner = sorted(c * grid + grid / 3 for c in cuts)
        ends = []
        for end, side in ((low_end, -1), (high_end, 1)):
            if end == "infinite":
                ends.append((side * math.inf, "buffer"))
            elif end[0] == "buffer":  # a finite buffer beyond the peer's limits
                ends.append(((inner[0] if side < 0 else inner[-1]) + side * (end[1] + 0.5),
                             "buffer"))
            else:
                value = natural_value(attacker, end[1], variable, pop)
                ends.append((float(value), "natural"))
        (lo, lower), (hi, upper) = ends
        inner = [c for c in inner if lo < c < hi]
        if not lo < hi:
            return None
        signed = peer_table([lo, *inner, hi], variable=variable, groups=groups, k=kk,
                            dataset="d", lower=lower, upper=upper)
    else:
        signed = attacker.own.get(variable)
        if signed is None or tuple(signed["statement"]["groups"] or ()) != tuple(groups or ()):
            return None
        kk = signed["statement"]["k"]
    body = {"variable": variable, "groups": groups, "k": kk, "table": signed}
    return "refine", "/v1/datasets/d/table/refine", body


def absorb(attacker: Attacker, op: tuple[Any, ...], v: int,
           pop: dict[str, dict[str, list[float]]], body: dict[str, Any],
           release: dict[str, Any]) -> None:
    """Keep a table's or refinement's answer: its counted sets, the numbers it placed, and its
    signed statement for the center to refine next."""
    variable, groups = body["variable"], body["groups"]
    levels = list(groups) if groups else None
    sent = _numbers_in(body)
    if op[0] == "cat":
        # Cells of codes (0..2 the categories, 3 the missing cell) between limits j + 1/2.
        cells = [[3 if c is None else CATEGORIES.index(c) for c in cell]
                 for cell in release["cells"]]
        assert [c for cell in cells for c in cell] == [0, 1, 2, 3]
        limits = [-0.5, *(max(cell) + 0.5 for cell in cells[:-1]), 3.5]
        record(attacker, v, pop, variable, limits, levels,
               [list(range(len(cells)))] * len(release["counts"]), release["counts"])
        missing = release["missing"]
        assert (missing is not None) == (cells[-1] == [3])
        return
    if op[0] == "table":
        limits = release["limits"]
        record(attacker, v, pop, variable, limits, levels,
               [list(range(len(limits) - 1))] * len(release["counts"]), release["counts"])
        attacker.place(v, variable, limits, sent)
    else:
        limits = release["signed"]["statement"]["limits"]
        record(attacker, v, pop, variable, limits, levels,
               [g["run_of_cell"] for g in release["runs"]],
               [g["totals"] for g in release["runs"]])
        attacker.place(v, variable, [*release["split_limits"], release["lower"],
                                     release["upper"]], sent)
    attacker.own[variable] = release["signed"]


def record(attacker: Attacker, version: int, pop: dict[str, dict[str, list[float]]],
           variable: str, limits: list[Any], levels: list[str] | None,
           labels: list[list[int]], counts: list[list[float]]) -> None:
    """Keep a table or refinement as the sets it counted, after checking its counts are true."""
    lim = [float(v) for v in limits]
    k = attacker.k
    if levels is None:
        labelled = {level: labels[0] for level in pop}
        released = Released(variable, lim, labelled, True, {"*": counts[0]})
    else:
        labelled = dict(zip(levels, labels, strict=True))
        released = Released(variable, lim, labelled, False,
                            dict(zip(levels, counts, strict=True)))
    for key, totals in released.totals.items():
        assert all(c == 0 or c >= k for c in totals), totals
        true = [0.0] * len(totals)
        for level, columns in pop.items():
            if key not in ("*", level):
                continue
            for value in columns[variable]:
                cell = sum(1 for c in lim[1:-1] if value > c)
                true[labelled[level][cell]] += 1
        assert true == [float(c) for c in totals], (key, true, totals)
    attacker.history.append((version, released))
    # One population: the released sets of a release cover its levels whole.
    for key, totals in released.totals.items():
        whole = sum(len(c[variable]) for lv, c in pop.items() if key in ("*", lv))
        assert sum(totals) == whole


def check_gaps(attacker: Attacker, versions: list[list[Row]], k: int) -> None:
    """One number per gap (module docstring): per variable, in release order, each number the
    center placed against the raw values of the data it came from and the numbers before it."""
    seen: dict[str, set[float]] = {"x": set(), "y": set()}
    for v, variable, number in attacker.placed:
        known = seen[variable]
        if number in known:
            continue  # a number released before, in the gap that holds it
        pop = population(versions[v], k, attacker.mode, attacker.key)
        raw = {value for columns in pop.values() for value in columns[variable]}
        assert number not in raw, (v, variable, number)
        lo = max((r for r in raw if r < number), default=-math.inf)
        hi = min((r for r in raw if r > number), default=math.inf)
        others = sorted(d for d in known if lo < d < hi)
        assert not others, (f"a second number in the gap ({lo}, {hi}) of {variable!r} "
                            f"(data version {v}): {number} beside {others}")
        known.add(number)


def check(attacker: Attacker, versions: list[list[Row]], k: int) -> None:
    check_gaps(attacker, versions, k)
    answered = sorted({v for v, _ in attacker.history})
    last = {v: max(i for i, (w, _) in enumerate(attacker.history) if w == v) for v in answered}

    def released_until(v: int) -> list[Released]:
        return [r for _, r in attacker.history[: last[v] + 1] if r is not None]

    mode = attacker.mode
    key = attacker.key
    for v in answered:
        pop = population(versions[v], k, mode, key)
        upto = released_until(v)
        # The public enrolment as side information: each level's labelled rows minus its size,
        # or minus a variable's present count, is 0 or >= K (the rows it leaves out).
        for columns in pop.values():
            for name in ("*", "x", "y"):
                if name == "*" or columns[name]:
                    assert not small(len(columns["+"]) - len(columns[name]), k), (v, name)
        for variable in ("x", "y", "s"):
            for signature, n in atoms(upto, pop, variable).items():
                assert not small(n, k), (v, variable, signature, n)
    for i, v in enumerate(answered):
        for w in answered[i + 1:]:
            upto = released_until(v)
            before = population(versions[v], k, mode, key)
            after = population(versions[w], k, mode, key)
            for variable in ("x", "y", "s"):
                old, new = atoms(upto, before, variable), atoms(upto, after, variable)
                for signature in set(old) | set(new):
                    assert not small(new[signature] - old[signature], k), (v, w, signature)
            for level in LEVELS:
                n_v = len(before.get(level, {"*": []})["*"])
                n_w = len(after.get(level, {"*": []})["*"])
                assert not small(n_w - n_v, k), (v, w, level)
                if level in before and level in after:  # enrolment minus size, both times
                    left_v = len(before[level]["+"]) - n_v
                    left_w = len(after[level]["+"]) - n_w
                    assert not small(left_w - left_v, k), (v, w, level, left_v, left_w)
    for v, text, variable, sent in attacker.texts:
        # An answer about one variable against that variable's values (on a grid, a limit below
        # every x may well equal some y); an error text against every value.
        # Only records of the population: the others' values enter no release (on a grid, a
        # buffer may well equal the value of a record with a missing y).
        pop = population(versions[v], k, mode, key)
        names = ("x", "y") if variable in (None, "s") else (variable,)
        raw = {value for columns in pop.values() for name in names for value in columns[name]}
        for token in re.findall(r"-?\d+\.\d+", text):
            value = float(token)
            if value in raw and value not in sent:
                # Only limits, whiskers and DP values carry decimals; none may be a raw value.
                raise AssertionError(f"raw value {token} in an answer: {text[:300]}")
