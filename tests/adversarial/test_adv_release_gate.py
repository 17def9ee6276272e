"""The attacks of issue 12 on real center processes, each written as the attacker: a caller
holding a valid center token, who knows every value of the synthetic data, computes what it
learns and the test asserts it learns nothing (no raw value, no count in 1..K-1, no ε unpaid).

1. data in error texts, and refusals as a 1-bit oracle (natural limits);
2. fresh randomized limits per trivially different request;
3. refine as an emptiness oracle (caller-made limits);
4. counts below K by subtraction across populations (groupings, variables);
5. differencing over time (a record appended between two requests);
6. exact YJ moment sums (invented study names, Newton's identities);
7. a joining center's buffer computed over fewer than K records;

plus the refusals that must stay decided from the request alone (levels, K) and the one request
that would spend the whole budget.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest

from tests.helpers.attacks import small_counts
from tests.helpers.center import (
    AUTH,
    Center,
    K,
    center_config,
    center_process,
    make_table,
    write_csv,
)
from tests.helpers.processes import run_module, running_center

pytestmark = pytest.mark.process

DATASETS = {f"d{i}": 3.0 for i in range(10)}  # one isolated memory per attack


@pytest.fixture(scope="module")
def center(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    with center_process(tmp_path_factory.mktemp("gate"), DATASETS) as running:
        yield running


@pytest.fixture(scope="module")
def client(center: Center) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=60) as c:
        yield c


@contextlib.contextmanager
def own_center(tmp_path: Path, name: str, epsilon: float = 3.0,
               **extra: Any) -> Iterator[tuple[httpx.Client, str, Path]]:
    """A center of the attack's own (dataset ``d`` over ``<name>.csv``), running: a client with
    the token, the URL of the center's API (``.../v1``) and its configuration file."""
    config, port = center_config(tmp_path, {"d": epsilon}, name=name, **extra)
    with running_center(config, port), httpx.Client(headers=AUTH, timeout=60) as c:
        yield c, f"http://127.0.0.1:{port}/v1", config


def population_x(center: Center, levels: tuple[str, ...] = ("a", "b")) -> dict[str, np.ndarray]:
    """The attacker's oracle: x of each level's complete rows (y present and finite)."""
    table = make_table()
    x = np.asarray(table["x"].to_numpy())
    y = np.asarray(table["y"].to_numpy(zero_copy_only=False), dtype=float)
    arm = table["arm"].to_pylist()
    return {level: np.sort(x[[a == level and np.isfinite(v) for a, v in zip(arm, y,
                                                                           strict=True)]])
            for level in levels}


NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")


def raw_values(center: Center) -> set[float]:
    """Every raw value of the data file with decimals (the CSV holds x and y to 3 decimals;
    whole numbers would be confused with counts)."""
    table = make_table()
    return {float(v) for name in ("x", "y") for v in table[name].to_pylist()
            if v is not None and np.isfinite(v) and v != int(v)}


def numbers_in(text: str) -> set[float]:
    return {float(token) for token in NUMBER.findall(text)}


def assert_no_raw_value(center: Center, *responses: httpx.Response,
                        sent: frozenset[float] | set[float] = frozenset()) -> None:
    raw = raw_values(center) - set(sent)
    for r in responses:
        assert r.status_code != 500, r.text
        found = numbers_in(r.text) & raw
        assert not found, f"raw values {sorted(found)[:5]} in {r.text[:300]}"
        if r.status_code == 200:
            assert small_counts(r.json()) == [], r.json()


def table(client: httpx.Client, ds: str, **body: Any) -> httpx.Response:
    return client.post(f"/v1/datasets/{ds}/table",
                       json={"variable": "x", "groups": ["a", "b"], "k": K, **body})


# -- 1. data in error texts; refusals as an oracle ---------------------------------------------


def test_natural_limits_never_refuse_and_never_tell_the_minimum(
    center: Center, client: httpx.Client
) -> None:
    """Attack: binary-search the minimum with natural lower limits (a refusal 'excludes data',
    or a text holding the minimum, would give it to 1e-12 in ~50 requests). Every answer is a
    200; its interior limits are the canonical table's, cut at the public limit; so what the
    search shows about the minimum is no more than the first canonical bin already showed."""
    values = np.concatenate(list(population_x(center).values()))
    canonical = table(client, "d0").json()
    inner = np.asarray(canonical["limits"][1:-1])
    lo, hi = float(values.min()) - 10, float(values.max()) + 10
    answers = []
    for _ in range(40):
        mid = (lo + hi) / 2
        r = table(client, "d0", lower=mid)
        answers.append(r)
        assert r.status_code == 200, r.text
        got = r.json()
        # A pure function of the public limit and the canonical table: the limits above it.
        assert got["limits"][0] == mid
        np.testing.assert_array_equal(got["limits"][1:-1], inner[inner > mid])
        assert [sum(row) for row in got["counts"]] == [sum(row) for row in canonical["counts"]]
        # The attacker's step: did the table change shape? (It does only at canonical limits.)
        if len(got["limits"]) < len(canonical["limits"]):
            hi = mid
        else:
            lo = mid
    assert_no_raw_value(center, *answers, sent={float(r.json()["limits"][0]) for r in answers})
    # The search converges on the first interior limit, a randomized point between two data
    # values, never on the minimum.
    assert abs(lo - inner[0]) < 1e-6 and abs(lo - values.min()) > 1e-3


def test_error_texts_hold_no_data(center: Center, client: httpx.Client) -> None:
    """Attack: provoke every refusal and error a center has and read the texts."""
    values = population_x(center)["a"]
    v = float(values[values.size // 2])
    bodies = [
        ("table", {"variable": "x", "groups": ["a", "b"], "k": 2}),
        ("table", {"variable": "x", "groups": ["a", "b"], "k": 10_000}),
        ("table", {"variable": "x", "groups": ["a", "c"], "k": K}),
        ("table", {"variable": "x", "groups": ["a", "b"], "k": K, "lower": v, "upper": v}),
        ("table/refine", {"variable": "x", "groups": ["a", "b"], "k": K,
                          "table": {"statement": {"center_id": "center", "dataset": "d1",
                                                  "variable": "x", "groups": ["a", "b"],
                                                  "k": K, "limits": [0, v, 100],
                                                  "lower": "buffer", "upper": "buffer"},
                                    "signature": "A" * 88}}),
        ("mwu", {"variable": "x", "groups": ["a", "zz"]}),
        ("dp/quantiles", {"variable": "x", "levels": [0.5], "epsilon": 2.9,
                          "bounds": [v, v + 1]}),
        ("dp/boxplot", {"variable": "x", "epsilon": 0.5, "bounds": [-1e300, 1e300]}),
        ("yj-moments", {"variable": "x", "lmbda": 1.0}),
        ("yj-moments", {"variable": "x", "lmbda": -10.0, "epsilon": 0.1,
                        "bounds": [-1e15, 0]}),
        ("quantile-loss", {"variable": "x", "u": v, "level": 0.5}),
    ]
    answers = [client.post(f"/v1/datasets/d1/{path}", json=body) for path, body in bodies]
    assert all(r.status_code in (403, 404, 409, 422) for r in answers), [
        (r.status_code, r.text) for r in answers]
    assert_no_raw_value(center, *answers, sent={v, v + 1})  # v is the caller's own input


# -- 2. fresh randomized limits per request ----------------------------------------------------


def test_trivially_different_tables_share_their_limits(
    center: Center, client: httpx.Client
) -> None:
    """Attack: 150 tables that differ in a natural limit by 1e-3, the order of the levels, the
    other extreme or K, hoping each draws fresh randomized limits (150 draws pin every value to
    < 1 % of its gap). Every interior limit of every answer is one of the canonical table's."""
    canonical = set(table(client, "d2").json()["limits"][1:-1])
    variants = []
    for i in range(150):
        groups = ["a", "b"] if i % 3 else ["b", "a"]
        extra: dict[str, Any] = {"lower": -1000.0 - i / 1000}
        if i % 5 == 0:
            extra["upper"] = "infinite"
        if i % 7 == 0:
            extra["k"] = K + i % 4
        variants.append(table(client, "d2", groups=groups, **extra))
    assert {r.status_code for r in variants} == {200}
    seen = set()
    for r in variants:
        seen |= set(r.json()["limits"][1:-1])
    assert seen <= canonical
    assert_no_raw_value(center, *variants)


# -- 3. refine as an emptiness oracle ----------------------------------------------------------


def test_caller_made_limits_are_never_refined(center: Center, client: httpx.Client) -> None:
    """Attack: binary-search one record with refinements of limits (v - δ, v + δ] the caller
    makes: unsigned, signed with a key of its own, or a genuine statement with one limit moved.
    All are refused before any data is read (403 untrusted_table), with the same text whatever
    the data around v."""
    own = table(client, "d3").json()["signed"]
    values = population_x(center)["a"]
    texts = set()
    for v in values[[5, 20, 40]]:
        forged = {"statement": {**own["statement"],
                                "limits": [own["statement"]["limits"][0], float(v) - 1e-6,
                                           float(v) + 1e-6, own["statement"]["limits"][-1]]},
                  "signature": own["signature"]}
        for signed in (forged, {**own, "signature": "B" * 88}):
            r = client.post("/v1/datasets/d3/table/refine", json={
                "variable": "x", "groups": ["a", "b"], "k": K, "table": signed})
            assert r.status_code == 403 and r.json()["error"] == "untrusted_table", r.text
            texts.add(r.json()["detail"])
    assert len(texts) == 1  # the refusal says nothing about where v lies


# -- 4. counts below K by subtraction across populations ----------------------------------------


def test_totals_of_every_grouping_and_variable_agree(center: Center, client: httpx.Client) -> None:
    """Attack: subtract the grouped totals from the ungrouped ones (undeclared or missing labels
    counted in one and not the other gave 5), and the totals of two variables (missing values
    gave 4). One population: every difference is 0."""
    grouped = table(client, "d4").json()
    pooled = client.post("/v1/datasets/d4/table", json={"variable": "x", "k": K}).json()
    other = client.post("/v1/datasets/d4/table", json={"variable": "y", "k": K}).json()
    mwu = client.post("/v1/datasets/d4/mwu", json={"variable": "y", "groups": ["a", "b"]}).json()
    info = client.get("/v1/info").json()["datasets"]
    n_a, n_b = (sum(row) for row in grouped["counts"])
    assert sum(pooled["counts"][0]) == n_a + n_b == sum(other["counts"][0])
    assert (mwu["n_x"], mwu["n_y"]) == (n_a, n_b)
    truth = population_x(center)
    assert (n_a, n_b) == (truth["a"].size, truth["b"].size)
    d4 = next(d for d in info if d["name"] == "d4")
    assert d4["n_records"] == (n_a + n_b) // K * K


def test_a_grouped_table_and_an_ungrouped_refinement_isolate_nothing(
    tmp_path: Path,
) -> None:
    """Attack: a grouped table, then an ungrouped refinement (on a peer's genuine limits) and a
    grouped one, hoping per-bin counts of 1..K-1 fall out of the differences ([2, 3] before).
    Every atom of the answers, on the raw data, holds 0 or >= K records of the population."""
    peer_config, peer_port = center_config(tmp_path, {"d": 3.0}, name="peer", n=400, seed=7)
    config, port = center_config(tmp_path, {"d": 3.0}, name="target")
    with running_center(peer_config, peer_port), running_center(config, port), \
            httpx.Client(headers=AUTH, timeout=60) as c:
        peer = f"http://127.0.0.1:{peer_port}/v1/datasets/d"
        target = f"http://127.0.0.1:{port}/v1/datasets/d"
        released = []
        own = c.post(f"{target}/table", json={"variable": "x", "groups": ["a", "b"], "k": K})
        assert own.status_code == 200
        released.append((own.json()["limits"], {lv: list(range(len(own.json()["limits"]) - 1))
                                                for lv in ("a", "b")}, False))
        for groups in (None, ["a", "b"], ["b", "a"]):
            signed = c.post(f"{peer}/table", json={"variable": "x", "groups": groups,
                                                   "k": K}).json()["signed"]
            r = c.post(f"{target}/table/refine", json={"variable": "x", "groups": groups,
                                                       "k": K, "table": signed})
            assert r.status_code == 200, r.text
            release = r.json()
            assert small_counts(release) == []
            limits = release["signed"]["statement"]["limits"]
            if groups is None:
                labels = {lv: release["runs"][0]["run_of_cell"] for lv in ("a", "b")}
            else:
                labels = {lv: g["run_of_cell"] for lv, g in zip(groups, release["runs"],
                                                                strict=True)}
            released.append((limits, labels, groups is None))
    truth = {level: population_x_of(tmp_path / "target.csv", level) for level in ("a", "b")}
    assert_atoms_safe(released, truth)


def population_x_of(csv: Path, level: str) -> np.ndarray:
    import pyarrow.csv as pa_csv

    t = pa_csv.read_csv(csv)
    x = np.asarray(t["x"].to_numpy(zero_copy_only=False), dtype=float)
    y = np.asarray(t["y"].to_numpy(zero_copy_only=False), dtype=float)
    arm = t["arm"].to_pylist()
    return np.sort(x[[a == level and np.isfinite(v) for a, v in zip(arm, y, strict=True)]])


def assert_atoms_safe(released: list[tuple[list[float], dict[str, list[int]], bool]],
                      truth: dict[str, np.ndarray]) -> None:
    """Records sharing the released set of every release (an atom) number 0 or >= K: a plain
    per-record reference, independent of the center's code."""
    atoms: dict[tuple[Any, ...], int] = {}
    for level, values in truth.items():
        for v in values:
            key = []
            for limits, labels, pooled in released:
                inner = [float(c) for c in limits[1:-1]]
                cell = sum(1 for c in inner if v > c)
                key.append(("*" if pooled else level, labels[level][cell]))
            atoms[tuple(key)] = atoms.get(tuple(key), 0) + 1
    small = [n for n in atoms.values() if 0 < n < K]
    assert small == [], f"atoms of {small} records can be isolated"


# -- 5. differencing over time -----------------------------------------------------------------


def test_a_record_appended_between_two_requests_is_not_revealed(tmp_path: Path) -> None:
    """Attack: take a table, a refinement and an MWU; append one record to the data file; ask
    again (the same questions, new wordings, and the MWU with the levels swapped: a 'new' key
    before) hoping to see which bin the record joined and its rank. The change is held: every
    release still comes from the data of the epoch (the record is in none, the sizes are the
    epoch's), /v1/info shows nothing of it, and the operator's check refuses to roll while one
    record is all that changed."""
    csv = tmp_path / "t5.csv"
    with own_center(tmp_path, "t5") as (c, url, config):
        tab = c.post(f"{url}/datasets/d/table", json={"variable": "x", "groups": ["a", "b"],
                                                      "k": K})
        mwu = c.post(f"{url}/datasets/d/mwu", json={"variable": "x", "groups": ["a", "b"]})
        info = c.get(f"{url}/info").json()
        assert tab.status_code == mwu.status_code == 200
        data = make_table()
        row = {name: data[name].to_pylist()[10] for name in data.column_names}
        row["x"] = 55.5
        write_csv(pa.concat_tables([data, pa.Table.from_pylist([row], schema=data.schema)]), csv)
        again = [
            c.post(f"{url}/datasets/d/table", json={"variable": "x", "groups": ["a", "b"],
                                                    "k": K, "lower": 0.0}),
            c.post(f"{url}/datasets/d/mwu", json={"variable": "x", "groups": ["b", "a"]}),
            c.post(f"{url}/datasets/d/table/refine", json={
                "variable": "x", "groups": ["a", "b"], "k": K, "table": tab.json()["signed"]}),
            c.post(f"{url}/datasets/d/dp/quantiles", json={
                "variable": "x", "levels": [0.5], "epsilon": 0.5, "bounds": [0, 100]}),
        ]
        for r in again:
            assert r.status_code == 200, r.text
            assert "55.5" not in r.text
        new_table, swapped = again[0].json(), again[1].json()
        assert [sum(c) for c in new_table["counts"]] == [sum(c) for c in tab.json()["counts"]]
        assert (swapped["n_x"], swapped["n_y"]) == (mwu.json()["n_y"], mwu.json()["n_x"])
        assert swapped["statistic"] == -mwu.json()["statistic"]
        held = c.get(f"{url}/info").json()
        assert held == info  # nothing of the held change shows
        # The operator's check names the problem and refuses to roll without --force.
        check = run_module("fedstats_cli", "center", "epoch", "--config", str(config), "--roll",
                           timeout_s=120)
        assert check.returncode == 1, check.stdout + check.stderr
        assert "changed by +1" in check.stdout and "not rolled" in check.stdout
        # Back to the data of the epoch: the stored answers again, identical.
        write_csv(data, csv)
        back = c.post(f"{url}/datasets/d/mwu", json={"variable": "x", "groups": ["b", "a"]})
        assert back.status_code == 200
        assert back.json()["statistic"] == -mwu.json()["statistic"]


def test_many_records_appended_at_once_start_a_new_epoch(tmp_path: Path) -> None:
    """The data grow by a block of K records at one point: every released set and size changes
    by 0 or >= K, so the version check passes and releases resume in epoch 2."""
    csv = tmp_path / "t5b.csv"
    with own_center(tmp_path, "t5b") as (c, url, _):
        first = c.post(f"{url}/datasets/d/table", json={"variable": "x", "groups": ["a", "b"],
                                                        "k": K})
        assert first.status_code == 200
        data = make_table()
        row = {name: data[name].to_pylist()[10] for name in data.column_names}
        row.update(x=49.999, y=1.0, arm="a")
        block = pa.Table.from_pylist([row] * K, schema=data.schema)
        write_csv(pa.concat_tables([data, block]), csv)
        second = c.post(f"{url}/datasets/d/table", json={"variable": "x", "groups": ["a", "b"],
                                                         "k": K})
        assert second.status_code == 200, second.text
        assert c.get(f"{url}/info").json()["datasets"][0]["epoch"] == 2
        assert sum(second.json()["counts"][0]) == sum(first.json()["counts"][0]) + K


# -- 6. YJ moment sums -------------------------------------------------------------------------


def test_yj_moments_are_never_exact_and_newton_recovers_nothing(tmp_path: Path) -> None:
    """Attack: exact sums at 9 λ values, under invented study names for fresh call caps, solved
    by Newton's identities, recovered all 12 values of a small dataset to 0.005. Now un-noised
    or 'study'-named requests are refused (422); with the noise every release carries, the same
    solve (10 values, λ = 1..10, ε = 5 each: generous) lands nowhere near the values."""
    csv = tmp_path / "small.csv"
    values = np.round(np.random.default_rng(5).uniform(1, 9, 10), 3)
    csv.write_text("x,y,arm\n" + "".join(f"{v},{v},a\n" for v in values))
    with own_center(tmp_path, "small", 1000.0) as (c, api, _):  # reads small.csv
        url = f"{api}/datasets/d/yj-moments"
        for study in ("s1", "s2", "s3", "s4", "s5"):
            r = c.post(url, json={"variable": "x", "lmbda": 1.0, "study": study})
            assert r.status_code == 422
        sums = []
        for j in range(1, 11):
            r = c.post(url, json={"variable": "x", "lmbda": float(j), "epsilon": 5.0,
                                  "bounds": [0.0, 10.0]})
            assert r.status_code == 200, r.text
            body = r.json()
            # Σ (x + 1)^λ = λ·Σ YJ(x; λ) + n for x >= 0: the power sums of x + 1.
            sums.append(j * body["sum_yj"] + body["n"])
    recovered = newton_roots(np.asarray(sums), 10) - 1
    assert np.nanmin(np.abs(np.sort(recovered.real) - np.sort(values))) > 0.05 or \
        np.abs(recovered.imag).max() > 0.05


def newton_roots(power_sums: np.ndarray, n: int) -> np.ndarray:
    """The n numbers whose first n power sums are ``power_sums`` (Newton's identities)."""
    e = np.zeros(n + 1)
    e[0] = 1.0
    for k in range(1, n + 1):
        e[k] = sum((-1) ** (i - 1) * e[k - i] * power_sums[i - 1] for i in range(1, k + 1)) / k
    coefficients = [(-1) ** k * e[k] for k in range(n + 1)]
    return np.roots(coefficients)


# -- 7. a joining center's buffer -------------------------------------------------------------


def test_a_joining_centers_moved_limit_is_not_a_raw_value(tmp_path: Path) -> None:
    """Attack: a joining center holds one record below the table (before, the new limit was
    its extreme value less the gap of a one-record cell: the record itself). The moved limit is
    now its minimum less (1/2 + w) times the mean gap of its K most extreme values, w the keyed
    fraction of the gap below the data: below every value, equal to none, and off the minimum
    by at least half that gap."""
    builder_config, builder_port = center_config(tmp_path, {"d": 3.0}, name="builder")
    joiner_csv = tmp_path / "joiner.csv"
    data = make_table(157, seed=3)
    x = np.asarray(data["x"].to_numpy()).copy()
    x[1] = 1.234  # far below the builder's table (N(50, 10) data); row 1 is a complete row
    write_csv(data.set_column(0, "x", pa.array(x)), joiner_csv)
    joiner_config, joiner_port = center_config(tmp_path, {"d": 3.0}, name="joiner")
    with running_center(builder_config, builder_port), \
            running_center(joiner_config, joiner_port), \
            httpx.Client(headers=AUTH, timeout=60) as c:
        built = c.post(f"http://127.0.0.1:{builder_port}/v1/datasets/d/table",
                       json={"variable": "x", "k": K}).json()
        joined = c.post(f"http://127.0.0.1:{joiner_port}/v1/datasets/d/table/refine",
                        json={"variable": "x", "k": K, "table": built["signed"]})
    assert joined.status_code == 200, joined.text
    lower = joined.json()["lower"]
    pool = np.sort(population_x_of(joiner_csv, "a").tolist() + population_x_of(joiner_csv,
                                                                               "b").tolist())
    assert pool[0] == 1.234
    gap = (pool[K - 1] - pool[0]) / (K - 1)
    assert pool[0] - 1.5 * gap <= lower <= pool[0] - 0.5 * gap
    assert lower not in set(x.tolist()) and pool[0] - lower > 1.0


# -- refusals decided from the request alone; the whole budget in one request -----------------


@pytest.mark.parametrize(
    ("groups", "status"),
    [(["a", "a"], 404), (["a", "c"], 404), (["a", "A"], 404), (["a", ""], 404)],
)
def test_undeclared_or_repeated_levels_are_refused(
    client: httpx.Client, groups: list[str], status: int
) -> None:
    """Attack: overlapping or undeclared group definitions (a level twice; the undeclared label
    'c' present in the data; a case variant; empty) in tables and MWU."""
    answers = [
        client.post("/v1/datasets/d5/table", json={"variable": "x", "groups": groups, "k": K}),
        client.post("/v1/datasets/d5/mwu", json={"variable": "x", "groups": groups}),
    ]
    for r in answers:
        assert r.status_code in (404, 422), r.text


def test_a_study_k_below_the_centers_k_is_refused(client: httpx.Client) -> None:
    answers = [client.post("/v1/datasets/d6/table", json={"variable": "x", "k": 2})]
    for r in answers:
        assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused", r.text


def test_one_request_cannot_spend_the_whole_budget(client: httpx.Client) -> None:
    """Attack: threshold counts at ε = 10 (a rounded Laplace(0.1) count is the exact count)
    and at ε = the whole budget: refused by the per-request cap, nothing spent."""
    for epsilon in (10.0, 3.0, 0.76):
        r = client.post("/v1/datasets/d7/dp/threshold-counts", json={
            "variable": "x", "epsilon": epsilon, "bounds": [0, 100], "lower": 40, "upper": 60})
        assert r.status_code == 403 and r.json()["error"] == "epsilon_cap_exceeded", r.text
    assert client.get("/v1/budget/d7").json()["spent_epsilon"] == 0.0


def test_released_state_is_capped(tmp_path: Path) -> None:
    """Attack: many refinements of genuine tables to make the disclosure memory, and with it
    every later admission, grow without bound (12 refinements of 55k limits once made tables
    ~100x slower). Past max_releases_per_variable the center refuses (403
    release_limit_reached), decided from the count of earlier releases."""
    with own_center(tmp_path, "capped", max_releases_per_variable=4) as (c, api, _):
        url = f"{api}/datasets/d"
        codes = []
        for k, groups in itertools.product((K, K + 1, K + 2), (["a", "b"], None)):
            signed = c.post(f"{url}/table", json={"variable": "x", "groups": groups,
                                                  "k": k}).json()["signed"]
            r = c.post(f"{url}/table/refine", json={"variable": "x", "groups": groups, "k": k,
                                                    "table": signed})
            codes.append((r.status_code, r.json().get("error")))
    assert codes[:3] == [(200, None)] * 3  # the table and three refinements: four releases
    assert set(codes[3:]) == {(403, "release_limit_reached")}
