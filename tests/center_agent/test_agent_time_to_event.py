"""Time-to-event variables at a center (``[datasets.X.time_to_event.v]``) and their one release,
the ε-DP life table (``POST /v1/datasets/{d}/dp/life-table``): the declaration validated at
start-up, the time and event columns read by one joint read from every source (rows aligned with
the group column, missing values per the dataset's mode, bad values a data problem), the
declaration in ``/v1/info``, and the release end to end: the core's noise law, paid before it
is computed, the same question the same answer, refusals from the request and configuration,
DP mode; and an attacker who tries every other kind on the time-to-event columns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from fastapi import FastAPI

from center_agent.core.config import ConfigError, DatasetConfig, load_settings
from center_agent.core.errors import DataSourceError
from center_agent.data import Dataset, Datasets
from center_agent.main import create_app
from shared.dp.life_table import life_table_cells
from shared.protocol import DPLifeTableRelease
from tests.helpers.center import AUTH, K, write_csv, write_parquet, write_sql
from tests.helpers.config import write_toml
from tests.helpers.leave_out import SECRET

URL = "/v1/datasets/cohort/dp/life-table"
N = 200
GRID = [0.0, 15.0, 30.0, 60.0, 90.0]
TTE = {"readmission": {"time": "days", "event": "readmitted", "event_values": ["yes"],
                       "censored_values": ["no"], "follow_up": [0, 90], "unit": "days"}}


def make_rows(n: int = N, seed: int = 7) -> pa.Table:
    """x always present; arm a (even rows) / b (odd rows); ``days`` missing in rows i % 10 == 0
    (20 of level a), ``readmitted`` missing in rows i % 10 == 1 (20 of level b): each level
    misses 0 or >= K, so no keyed leave-out takes more. Some times beyond the 90-day
    follow-up, one exactly 0."""
    rng = np.random.default_rng(seed)
    days: list[float | None] = [float(v) for v in np.round(rng.exponential(50.0, n), 1)]
    event: list[str | None] = [str(v) for v in rng.choice(["yes", "no"], n)]
    days[2] = 0.0
    for i in range(n):
        if i % 10 == 0:
            days[i] = None
        if i % 10 == 1:
            event[i] = None
    return pa.table({"x": pa.array(np.round(rng.normal(50, 10, n), 2)),
                     "arm": pa.array(["a" if i % 2 == 0 else "b" for i in range(n)]),
                     "days": pa.array(days, pa.float64()),
                     "readmitted": pa.array(event, pa.string())})


ROWS = make_rows()


def expected(table: pa.Table = ROWS) -> dict[str, list[tuple[float, float]]]:
    """Per level, the (time, event) of the records holding both, sorted: a plain reference."""
    out: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    for row in table.to_pylist():
        if row["days"] is not None and row["readmitted"] is not None:
            out[row["arm"]].append((row["days"], 1.0 if row["readmitted"] == "yes" else 0.0))
    return {level: sorted(rows) for level, rows in out.items()}


def dataset_config(source: dict[str, Any], **extra: Any) -> DatasetConfig:
    return DatasetConfig.model_validate({
        "source": source, "variables": ["x"], "group": {"column": "arm", "levels": ["a", "b"]},
        "epsilon_total": 1.0, "time_to_event": TTE, **extra})


@pytest.fixture
def open_dataset() -> Iterator[Callable[..., Dataset]]:
    made: list[Dataset] = []

    def make(config: DatasetConfig, name: str = "cohort") -> Dataset:
        made.append(Dataset(name, config, K, secret=SECRET))
        return made[-1]

    yield make
    for dataset in made:
        dataset.source.close()


# -- the declaration -------------------------------------------------------------------------


def _base(tmp_path: Path, **tte: Any) -> dict[str, Any]:
    path = write_csv(ROWS, tmp_path / "cohort.csv")
    return {
        "center_id": "hospital-test", "k": K, "tokens": ["tok-" + "a1b2c3d4e5f6a7b8c9d0"],
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "datasets": {"cohort": {
            "source": {"kind": "csv", "path": str(path)}, "variables": ["x"],
            "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 1.0,
            "time_to_event": {"readmission": {**TTE["readmission"], **tte}}}},
    }


@pytest.mark.parametrize(("change", "match"), [
    ({"event": "days"}, r"time_to_event\.readmission.*two columns"),
    ({"follow_up": [90, 0]}, r"time_to_event\.readmission.*follow_up"),
    ({"follow_up": [-1, 90]}, r"time_to_event\.readmission.*follow_up"),
    ({"follow_up": [0, float("inf")]}, r"time_to_event\.readmission.*follow_up"),
    ({"censored_values": ["yes"]}, r"time_to_event\.readmission.*both in `event_values`"),
    ({"event_values": []}, r"time_to_event\.readmission\.event_values"),
    ({"event_values": ["yes", "yes"]}, r"time_to_event\.readmission.*twice"),
    ({"time": "not a column"}, r"time_to_event\.readmission\.time"),
    ({"follow": [0, 90]}, r"time_to_event\.readmission\.follow"),  # a typo: not a default
    ({"time": "arm"}, r"group column 'arm'"),
    ({"event": "arm"}, r"group column 'arm'"),
])
def test_a_bad_declaration_stops_start_up_naming_the_key(
        tmp_path: Path, change: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_settings(write_toml(tmp_path / "bad.toml", _base(tmp_path, **change)))


def test_a_time_to_event_name_is_its_own(tmp_path: Path) -> None:
    config = _base(tmp_path)
    config["datasets"]["cohort"]["time_to_event"]["x"] = TTE["readmission"]
    with pytest.raises(ConfigError, match="also declared a variable"):
        load_settings(write_toml(tmp_path / "bad.toml", config))
    config = _base(tmp_path)
    config["datasets"]["cohort"]["categorical"] = {"days": ["1"]}
    with pytest.raises(ConfigError, match="declared categorical"):
        load_settings(write_toml(tmp_path / "bad.toml", config))


def test_defaults_are_one_for_the_event_and_zero_for_censored(tmp_path: Path) -> None:
    config = _base(tmp_path)
    tte = config["datasets"]["cohort"]["time_to_event"]["readmission"]
    del tte["event_values"], tte["censored_values"], tte["unit"]
    declared = load_settings(write_toml(tmp_path / "ok.toml", config)).datasets["cohort"]
    readmission = declared.time_to_event["readmission"]
    assert (readmission.event_values, readmission.censored_values) == ([1], [0])
    assert readmission.unit is None and readmission.follow_up == (0.0, 90.0)


# -- the joint read ----------------------------------------------------------------------------


@pytest.fixture(params=["csv", "parquet", "sqlite-table", "pg-table", "pg-query"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    kind = request.param
    if kind == "csv":
        return {"kind": "csv", "path": str(write_csv(ROWS, tmp_path / "d.csv"))}
    if kind == "parquet":
        return {"kind": "parquet", "path": str(write_parquet(ROWS, tmp_path / "d.parquet"))}
    url = (f"sqlite:///{tmp_path / 'w.sqlite'}" if kind.startswith("sqlite")
           else request.getfixturevalue("pg_url"))
    write_sql(ROWS, url, "cohort_rows")
    if kind.endswith("table"):
        return {"kind": "sql", "url": url, "table": "cohort_rows"}
    return {"kind": "sql", "url": url,
            "query": "SELECT x, arm, days, readmitted FROM cohort_rows WHERE 1 = 1"}


@pytest.mark.parametrize("missing", ["complete_cases", "per_variable"])
def test_every_source_reads_the_time_and_event_together(
        open_dataset: Callable[..., Dataset], source: dict[str, Any], missing: str) -> None:
    dataset = open_dataset(dataset_config(source, missing=missing))
    dataset.check_columns()
    population = dataset.population()
    want = expected()
    assert {level: [tuple(r) for r in rows.tolist()]
            for level, rows in population.joint["readmission"].items()} == want
    # Complete cases: a record missing its time or event leaves the population (every release
    # counts the same records); per variable: only the life table misses it.
    if missing == "complete_cases":
        assert population.sizes == {"a": 80, "b": 80}
        assert population.level("x", "a").size == 80
    else:
        assert population.sizes == {"a": 100, "b": 100}
        assert population.level("x", "a").size == 100
    pooled = population.joint_selection("readmission", None)
    assert sorted(map(tuple, pooled.tolist())) == sorted(want["a"] + want["b"])
    assert not population.joint["readmission"]["a"].flags.writeable


def test_the_row_order_and_the_source_kind_tell_nothing(
        open_dataset: Callable[..., Dataset], tmp_path: Path) -> None:
    order = np.random.default_rng(3).permutation(N)
    shuffled = ROWS.take(pa.array(order))
    a = open_dataset(dataset_config({"kind": "csv", "path": str(write_csv(
        ROWS, tmp_path / "a.csv"))}), "one").population()
    b = open_dataset(dataset_config({"kind": "parquet", "path": str(write_parquet(
        shuffled, tmp_path / "b.parquet"))}), "one").population()
    assert a.fingerprint == b.fingerprint
    # A changed time is a changed population.
    days = ROWS["days"].to_pylist()
    days[3] = (days[3] or 0.0) + 1.0
    changed = ROWS.set_column(2, "days", pa.array(days, pa.float64()))
    c = open_dataset(dataset_config({"kind": "csv", "path": str(write_csv(
        changed, tmp_path / "c.csv"))}), "one").population()
    assert c.fingerprint != a.fingerprint


def test_event_codes_as_numbers_booleans_or_labels(
        open_dataset: Callable[..., Dataset], tmp_path: Path) -> None:
    """An integer, float, boolean or text column: 1 and 1.0 read as the declared 1."""
    flags = [None if e is None else e == "yes" for e in ROWS["readmitted"].to_pylist()]
    for name, column, values in [
        ("int", pa.array([None if f is None else int(f) for f in flags], pa.int64()), ([1], [0])),
        ("float", pa.array([None if f is None else float(f) for f in flags]), ([1], [0])),
        ("bool", pa.array(flags, pa.bool_()), ([True], [False])),
    ]:
        table = ROWS.set_column(3, "readmitted", column)
        path = write_parquet(table, tmp_path / f"{name}.parquet")
        tte = {"readmission": {**TTE["readmission"], "event_values": values[0],
                               "censored_values": values[1]}}
        config = DatasetConfig.model_validate({
            "source": {"kind": "parquet", "path": str(path)}, "variables": ["x"],
            "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 1.0,
            "time_to_event": tte})
        population = open_dataset(config, name).population()
        assert {level: [tuple(r) for r in rows.tolist()]
                for level, rows in population.joint["readmission"].items()} == expected(), name


@pytest.mark.parametrize(("day", "event", "match"), [
    (-1.0, "yes", r"column 'days' of time-to-event variable 'readmission' holds a negative or "
                  r"infinite time \(first in data row 4"),
    (float("inf"), "yes", "negative or infinite time"),
    (5.0, "maybe", r"column 'readmitted' .* neither an event nor a censoring value \(first in "
                   r"data row 4.*event_values"),
])
def test_a_bad_time_or_event_is_a_data_problem_told_without_the_value(
        open_dataset: Callable[..., Dataset], tmp_path: Path, day: float, event: str,
        match: str) -> None:
    days, events = ROWS["days"].to_pylist(), ROWS["readmitted"].to_pylist()
    days[3], events[3] = day, event
    # Row 3 is undeclared: a row outside the population is checked too.
    arm = ROWS["arm"].to_pylist()
    arm[3] = "z"
    table = pa.table({"x": ROWS["x"], "arm": pa.array(arm), "days": pa.array(days, pa.float64()),
                      "readmitted": pa.array(events, pa.string())})
    dataset = open_dataset(dataset_config({"kind": "csv", "path": str(write_csv(
        table, tmp_path / "bad.csv"))}))
    with pytest.raises(DataSourceError, match=match) as caught:
        dataset.check_columns()
    assert "maybe" not in caught.value.detail and "-1" not in caught.value.detail
    # On a request the caller is told the source could not be read, nothing more.
    with pytest.raises(DataSourceError, match="could not be read") as caught:
        dataset.population()
    assert "days" not in caught.value.detail


def test_a_missing_column_isolates_its_dataset(tmp_path: Path) -> None:
    good = dataset_config({"kind": "csv", "path": str(write_csv(ROWS, tmp_path / "g.csv"))})
    without = ROWS.drop_columns(["readmitted"])
    bad = dataset_config({"kind": "csv", "path": str(write_csv(without, tmp_path / "b.csv"))})
    datasets = Datasets({"good": Dataset("good", good, K, secret=SECRET),
                         "bad": Dataset("bad", bad, K, secret=SECRET)})
    try:
        problems = datasets.check_columns()
        assert list(problems) == ["bad"]
        assert "['readmitted'] are not in its source" in problems["bad"]
        assert "time_to_event" in problems["bad"]
        assert datasets["good"].population().joint["readmission"]["a"].shape == (80, 2)
    finally:
        datasets.close()


# -- the release, end to end -----------------------------------------------------------------


def center(tmp_path: Path, rows: pa.Table = ROWS, name: str = "center", **dataset: Any
           ) -> FastAPI:
    path = write_csv(rows, tmp_path / f"{name}.csv")
    declared = {"source": {"kind": "csv", "path": str(path)}, "variables": ["x"],
                "group": {"column": "arm", "levels": ["a", "b"]}, "epsilon_total": 10.0,
                "epsilon_per_request": 10.0, "time_to_event": TTE, **dataset}
    declared = {key: value for key, value in declared.items() if value is not None}
    config = {"center_id": "hospital-test", "k": K, "tokens": ["tok-" + "a1b2c3d4e5f6a7b8c9d0"],
              "ledger_url": f"sqlite:///{tmp_path / f'{name}-ledger.sqlite'}",
              "datasets": {"cohort": declared}}
    return create_app(load_settings(write_toml(tmp_path / f"{name}.toml", config)))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    application = center(tmp_path, epsilon_total=500.0, epsilon_per_request=100.0)
    yield application
    application.state.services.close()


@pytest.fixture
async def client(app: FastAPI) -> Any:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        yield c


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(url, json=body, headers=AUTH)


async def _spent(client: httpx.AsyncClient) -> float:
    return float((await client.get("/v1/budget/cohort", headers=AUTH)).json()["spent_epsilon"])


@pytest.mark.anyio
async def test_info_shows_the_follow_up_and_nothing_of_the_columns(
        client: httpx.AsyncClient) -> None:
    info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
    assert info["time_to_event"] == {"readmission": {"follow_up": [0.0, 90.0], "unit": "days"}}
    assert info["variables"] == ["x"]
    assert "readmitted" not in str(info) and str(info).count("days") == 1  # the unit


@pytest.mark.anyio
async def test_a_huge_epsilon_releases_the_exact_cells(client: httpx.AsyncClient) -> None:
    """The noise law is the core's: Laplace(1/ε) per cell (add/remove), so at ε = 100 every
    noisy count lies within 0.5 of the exact histogram (probability 1 − 16·e^-50)."""
    want = expected()
    for group in ("a", "b", None):
        body = {"variable": "readmission", "epsilon": 100.0, "grid": GRID,
                **({"group": group} if group else {})}
        r = await _post(client, URL, body)
        assert r.status_code == 200, r.text
        release = DPLifeTableRelease.model_validate_json(r.content)
        rows = want[group] if group else want["a"] + want["b"]
        d, w = life_table_cells([t for t, _ in rows], [e for _, e in rows], GRID)
        np.testing.assert_allclose(release.noisy_events, d, atol=0.5)
        np.testing.assert_allclose(release.noisy_censored, w, atol=0.5)
        assert (release.mechanism, release.neighbouring, release.delta) == (
            "laplace", "add_remove", 0.0)
        assert release.sensitivity == 1.0 and release.scale == pytest.approx(0.01)
        assert release.cell_variance == pytest.approx(2e-4)
        # Times beyond 90 days: censored in the last interval, none an event there.
        beyond = [e for t, e in rows if t > 90]
        assert beyond and w[-1] >= len(beyond)
        table = release.to_life_table()
        assert table.at_risk[0] == pytest.approx(len(rows), abs=8 * 0.5)
    assert await _spent(client) == pytest.approx(300.0)


@pytest.mark.anyio
async def test_paid_before_computed_once_and_replayed(client: httpx.AsyncClient) -> None:
    body = {"variable": "readmission", "group": "a", "epsilon": 1.0, "grid": GRID}
    first = await _post(client, URL, body)
    assert first.status_code == 200, first.text
    assert await _spent(client) == pytest.approx(1.0)
    # The same question in another wording (integers for the grid's limits): the stored answer.
    again = await _post(client, URL, {**body, "grid": [0, 15, 30, 60, 90]})
    assert again.json() == first.json()
    assert await _spent(client) == pytest.approx(1.0)
    # Another ε or grid is another question, paid again.
    other = await _post(client, URL, {**body, "grid": [0, 45, 90]})
    assert other.status_code == 200 and await _spent(client) == pytest.approx(2.0)


@pytest.mark.anyio
async def test_refusals_come_from_the_request_and_the_configuration(
        client: httpx.AsyncClient) -> None:
    good = {"variable": "readmission", "epsilon": 1.0, "grid": GRID}
    cases: list[tuple[dict[str, Any], int, str, str]] = [
        ({**good, "variable": "x"}, 404, "unknown_variable", "x"),
        ({**good, "variable": "days"}, 404, "unknown_variable", "days"),
        ({**good, "group": "z"}, 404, "unknown_level", "z"),
        ({**good, "grid": [0, 30, 120]}, 422, "invalid_request", "[0, 90]"),
        ({**good, "grid": [30, 60]}, 200, "", ""),  # inside: answered
        ({**good, "grid": [0, 30, 30]}, 422, "validation_error", "grid"),
        ({**good, "grid": [-5, 30]}, 422, "validation_error", "grid"),
        ({**good, "grid": [0]}, 422, "validation_error", "grid"),
        ({**good, "epsilon": 101.0}, 422, "validation_error", "epsilon"),
        ({**good, "epsilon": 1e-4}, 422, "invalid_request", "min_epsilon_per_release"),
    ]
    for body, status, error, named in cases:
        r = await _post(client, URL, body)
        assert (r.status_code, r.json().get("error", "")) == (status, error), (body, r.text)
        assert named in r.text, (body, r.text)
    r = await _post(client, URL.replace("cohort", "nope"), good)
    assert r.status_code == 404
    assert await _spent(client) == 1.0  # the one answered


@pytest.mark.anyio
async def test_the_per_request_cap_refuses_before_anything_is_read(tmp_path: Path) -> None:
    app = center(tmp_path, epsilon_total=4.0, epsilon_per_request=None)
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            r = await _post(client, URL, {"variable": "readmission", "epsilon": 1.5,
                                          "grid": GRID})
            assert r.status_code == 403 and r.json()["error"] == "epsilon_cap_exceeded", r.text
            assert await _spent(client) == 0.0
    finally:
        app.state.services.close()


async def _exhaust(app: FastAPI) -> list[tuple[int, str, str]]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    out = []
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
        for i in range(4):
            r = await _post(client, URL, {"variable": "readmission", "epsilon": 0.9,
                                          "grid": [0.0, 10.0 + i, 90.0]})
            body = r.json()
            out.append((r.status_code, body.get("error", ""), body.get("detail", "")))
    return out


@pytest.mark.anyio
async def test_an_exhausted_budget_refuses_whatever_the_data(tmp_path: Path) -> None:
    other = make_rows(seed=99)  # other times, other events
    one = center(tmp_path, name="one", epsilon_total=2.0, epsilon_per_request=1.0)
    two = center(tmp_path, other, name="two", epsilon_total=2.0, epsilon_per_request=1.0)
    try:
        seen = [await _exhaust(one), await _exhaust(two)]
    finally:
        one.state.services.close()
        two.state.services.close()
    assert seen[0] == seen[1]
    assert [s for s, _, _ in seen[0]] == [200, 200, 403, 403]
    assert seen[0][2][1] == "budget_exceeded"


@pytest.mark.anyio
async def test_dp_mode_answers_it(tmp_path: Path) -> None:
    app = center(tmp_path, release_mode="dp", missing="per_variable")
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
            assert info["time_to_event"]["readmission"]["follow_up"] == [0.0, 90.0]
            for group in ("a", "b", None):
                r = await _post(client, URL, {"variable": "readmission", "epsilon": 0.5,
                                              "grid": GRID, "group": group})
                assert r.status_code == 200, r.text
                assert DPLifeTableRelease.model_validate_json(r.content).epsilon == 0.5
            assert await _spent(client) == pytest.approx(1.5)
            exact = await _post(client, "/v1/datasets/cohort/table", {"variable": "x", "k": K})
            assert exact.json()["error"] == "dp_mode_refuses_exact"
    finally:
        app.state.services.close()


@pytest.mark.anyio
async def test_swap_neighbours_double_the_sensitivity(tmp_path: Path) -> None:
    path = write_csv(ROWS, tmp_path / "s.csv")
    config = {"center_id": "s", "k": K, "tokens": ["tok-" + "a1b2c3d4e5f6a7b8c9d0"],
              "neighbouring": "swap", "ledger_url": f"sqlite:///{tmp_path / 's.sqlite'}",
              "datasets": {"cohort": {"source": {"kind": "csv", "path": str(path)},
                                      "variables": ["x"], "epsilon_total": 8.0,
                                      "group": {"column": "arm", "levels": ["a", "b"]},
                                      "time_to_event": TTE}}}
    app = create_app(load_settings(write_toml(tmp_path / "s.toml", config)))
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            r = await _post(client, URL, {"variable": "readmission", "epsilon": 1.0,
                                          "grid": GRID})
            release = DPLifeTableRelease.model_validate_json(r.content)
            assert (release.neighbouring, release.sensitivity, release.scale) == (
                "swap", 2.0, 2.0)
    finally:
        app.state.services.close()


# -- the attacker ------------------------------------------------------------------------------


def _other_kinds(name: str) -> list[tuple[str, dict[str, Any]]]:
    bounds = [0.0, 200.0]
    return [
        ("table", {"variable": name, "k": K}),
        ("table", {"variable": name, "groups": ["a", "b"], "k": K}),
        ("mwu", {"variable": name, "groups": ["a", "b"]}),
        ("mwu", {"variable": name, "groups": ["a", "b"], "epsilon": 1.0}),
        ("dp/mwu", {"variable": name, "groups": ["a", "b"], "epsilon": 1.0}),
        ("dp/quantiles", {"variable": name, "epsilon": 1.0, "bounds": bounds,
                          "levels": [0.5]}),
        ("dp/boxplot", {"variable": name, "epsilon": 1.0, "bounds": bounds, "n_public": 50}),
        ("dp/extremes", {"variable": name, "epsilon": 1.0, "bounds": bounds}),
        ("dp/tree-histogram", {"variable": name, "epsilon": 1.0, "bounds": bounds,
                               "grid": bounds, "depth": 2, "branching": 2}),
        ("dp/threshold-counts", {"variable": name, "epsilon": 1.0, "bounds": bounds,
                                 "lower": 1.0, "upper": 100.0}),
        ("dp/describe", {"variable": name, "epsilon": 1.0, "bounds": bounds}),
        ("yj-moments", {"variable": name, "lmbda": 1.0, "epsilon": 1.0, "bounds": bounds}),
        ("categorical", {"variable": name, "k": K}),
        ("dp/categorical", {"variable": name, "epsilon": 1.0}),
        ("missing", {"variable": name}),
    ]


@pytest.mark.anyio
async def test_no_other_kind_releases_the_time_or_event_columns(
        client: httpx.AsyncClient, app: FastAPI) -> None:
    """Every other kind, asked for the variable's name or either of its columns: 404 before
    anything is read or paid; and every path of the API is one of the declared kinds (no
    route reads a column the configuration did not declare for it)."""
    from center_agent.gate.kinds import KINDS

    paths = {kind.path.removeprefix("/datasets/{dataset}/") for kind in KINDS}
    tried = set()
    for name in ("readmission", "days", "readmitted"):
        for path, body in _other_kinds(name):
            tried.add(path)
            r = await _post(client, f"/v1/datasets/cohort/{path}", body)
            assert (r.status_code, r.json()["error"]) == (404, "unknown_variable"), (
                path, body, r.text)
    assert paths - tried == {"dp/life-table", "table/refine", "quantile-loss"}
    assert await _spent(client) == 0.0
    # The numeric variable's releases count the population and nothing of the times: its
    # table's total is the population's size (rounded sizes in /v1/info), not a count of
    # records with a time.
    r = await _post(client, "/v1/datasets/cohort/missing", {"variable": "x"})
    assert r.json()["present"] == [80, 80]


@pytest.mark.anyio
async def test_the_operator_may_also_declare_the_time_as_a_variable(tmp_path: Path) -> None:
    """Then, and only then, the time column is a numeric variable like any other (the
    operator's explicit choice, guarantee 17)."""
    app = center(tmp_path, variables=["x", "days"], epsilon_total=500.0,
                 epsilon_per_request=100.0)
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            r = await _post(client, "/v1/datasets/cohort/dp/quantiles", {
                "variable": "days", "epsilon": 1.0, "bounds": [0, 400], "levels": [0.5]})
            assert r.status_code == 200, r.text
            r = await _post(client, URL, {"variable": "readmission", "epsilon": 100.0,
                                          "grid": GRID, "group": "a"})
            release = DPLifeTableRelease.model_validate_json(r.content)
            rows = expected()["a"]
            d, w = life_table_cells([t for t, _ in rows], [e for _, e in rows], GRID)
            np.testing.assert_allclose(release.noisy_events, d, atol=0.5)
            np.testing.assert_allclose(release.noisy_censored, w, atol=0.5)
    finally:
        app.state.services.close()
