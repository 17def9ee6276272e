"""DP mode answers every DP kind whatever a selection holds (docs/privacy.md, "DP mode"):
levels of 0..K+1 records, a dataset of none, missing values per variable, a declared
resolution or none. No size-based exclusion or refusal is left: for each request the outcome
is a valid release, the same set of outcomes for every size, so whether an answer exists
tells nothing of the data. A K-anonymous dataset over the same rows still leaves its small
levels out (its counts there are protected by that rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from center_agent.core.config import load_settings
from center_agent.gate.kinds import KINDS
from center_agent.main import create_app
from tests.helpers.center import AUTH, TOKEN
from tests.helpers.config import write_toml

K = 3
LEVELS = tuple(f"l{j}" for j in range(K + 2))  # drawn sizes in 0..K+1 each
BOUNDS = [0.0, 10.0]
CATEGORIES = ("p", "q")


def dp_requests(group: str | None) -> dict[str, list[dict[str, Any]]]:
    """Every DP kind's requests of one selection (every algorithm of dp_quantiles)."""
    base = {"variable": "x", "epsilon": 0.5, "bounds": BOUNDS,
            **({"group": group} if group is not None else {})}
    return {
        "dp_quantiles": [{**base, "levels": [0.25, 0.5, 0.75], "algorithm": a}
                         for a in ("joint_exp", "private_quantile", "approx_quantile",
                                   "unbounded")],
        "dp_boxplot": [{**base, "n_public": 8}],
        "dp_extremes": [base],
        "dp_tree_histogram": [{**base, "grid": BOUNDS, "depth": 2, "branching": 2}],
        "dp_threshold_counts": [{**base, "lower": 3.0, "upper": 7.0}],
        "dp_describe": [{**base, "bins": 4}],
        "dp_categorical": [{"variable": "s", "epsilon": 0.5,
                            **({"group": group} if group is not None else {})}],
        # Two levels: the selection's level against another (the first against the second).
        "dp_life_table": [{"variable": "r", "epsilon": 0.5, "grid": [0.0, 2.0, 5.0, 20.0],
                           **({"group": group} if group is not None else {})}],
        "dp_mwu": [] if group is None else [
            {"variable": "x", "epsilon": 0.5,
             "groups": [group, LEVELS[1] if group == LEVELS[0] else LEVELS[0]]}],
    }


def test_every_dp_kind_is_covered() -> None:
    """A DP kind added later must be added here too: its answer on small data is part of
    what DP mode promises."""
    dp_kinds = {kind.name for kind in KINDS if not kind.exact}
    asked = {name for name, bodies in dp_requests(LEVELS[0]).items() if bodies}
    assert dp_kinds == asked, dp_kinds ^ asked


def write_rows(path: Path, rows: list[tuple[str | None, float | None, str | None]],
               grouped: bool = True) -> None:
    # A time-to-event variable beside them (time |x|, missing with x; the event every other
    # row): a record missing its time misses x too, so the populations are those of x and s.
    head = "arm,x,s,t,e\n" if grouped else "x,s,t,e\n"
    lines = []
    for i, (arm, x, s) in enumerate(rows):
        cells = [arm or ""] if grouped else []
        cells += ["" if x is None else f"{x:g}", s or "", "" if x is None else f"{abs(x):g}",
                  str(i % 2)]
        lines.append(",".join(cells))
    path.write_text(head + "".join(f"{line}\n" for line in lines))


@st.composite
def cases(draw: Any) -> tuple[dict[str, int], list[tuple[str | None, float | None, str | None]],
                              str, bool]:
    sizes = {level: draw(st.integers(0, K + 1)) for level in LEVELS}
    rows = []
    for level, n in sizes.items():
        for _ in range(n):
            x = draw(st.one_of(st.none(), st.integers(-5, 15).map(float)))
            rows.append((level, x, draw(st.sampled_from([*CATEGORIES, None]))))
    mode = draw(st.sampled_from(["complete_cases", "per_variable"]))
    return sizes, rows, mode, draw(st.booleans())


def config(tmp: Path, mode: str, resolution: bool, release_mode: str) -> dict[str, Any]:
    meta = {"x": {"bounds": BOUNDS, **({"resolution": 1.0} if resolution else {})}}
    dataset = {"variables": ["x"], "missing": mode, "categorical": {"s": list(CATEGORIES)},
               "time_to_event": {"r": {"time": "t", "event": "e", "follow_up": [0, 20]}},
               "epsilon_total": 1e6, "metadata": meta, "release_mode": release_mode}
    return {
        "center_id": "small", "k": K, "tokens": [TOKEN],
        "ledger_url": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "datasets": {
            "d": {**dataset, "source": {"kind": "csv", "path": str(tmp / "d.csv")},
                  "group": {"column": "arm", "levels": list(LEVELS)}},
            # No group column and no row at all: the whole dataset is an empty selection.
            "empty": {**dataset, "source": {"kind": "csv", "path": str(tmp / "empty.csv")}},
        },
    }


def answers(app: Any) -> dict[tuple[str, str, str | None, int], int]:
    """:func:`ask_all` of ``app`` in process, the app closed afterwards."""

    async def run() -> dict[tuple[str, str, str | None, int], int]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            return await ask_all(client)

    try:
        return anyio.run(run)
    finally:
        app.state.services.close()


async def ask_all(client: httpx.AsyncClient) -> dict[tuple[str, str, str | None, int], int]:
    """Every DP request of every selection: (dataset, kind, group, index) → status."""
    out = {}
    for dataset, groups in (("d", (None, *LEVELS)), ("empty", (None,))):
        for group in groups:
            for name, bodies in dp_requests(group).items():
                path = next(k.path for k in KINDS if k.name == name).format(dataset=dataset)
                for i, body in enumerate(bodies):
                    r = await client.post(f"/v1{path}", json=body, headers=AUTH)
                    assert r.status_code == 200, (dataset, name, group, r.text)
                    model = next(k.release_model for k in KINDS if k.name == name)
                    model.model_validate(r.json())  # a valid release, whatever the size
                    out[(dataset, name, group, i)] = r.status_code
    return out


@pytest.mark.slow  # 20 fresh centers, each asked 10 DP requests of 7 selections: ~90 s
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_a_dp_mode_center_answers_every_dp_kind_whatever_the_size(
        tmp_path_factory: Any, case: Any) -> None:
    sizes, rows, mode, resolution = case
    note(f"sizes={sizes}, mode={mode}, resolution={resolution}")
    tmp: Path = tmp_path_factory.mktemp("small")
    write_rows(tmp / "d.csv", rows)
    write_rows(tmp / "empty.csv", [], grouped=False)
    outcomes = answers(create_app(load_settings(write_toml(
        tmp / "c.toml", config(tmp, mode, resolution, "dp")))))
    # One outcome for every selection of every size: an answer.
    assert set(outcomes.values()) == {200}


def test_sizes_zero_to_k_plus_one_once(tmp_path: Path) -> None:
    """The quick loop's instance: one level of each size 0..K+1, both missing-value modes
    asked in turn, every answer a release."""
    for mode in ("complete_cases", "per_variable"):
        tmp = tmp_path / mode
        tmp.mkdir()
        rows = [(f"l{j}", float(i % 11), CATEGORIES[i % 2]) for j in range(K + 2)
                for i in range(j)]
        rows.append(("l2", None, None))  # a record missing x
        write_rows(tmp / "d.csv", rows)
        write_rows(tmp / "empty.csv", [], grouped=False)
        outcomes = answers(create_app(load_settings(write_toml(
            tmp / "c.toml", config(tmp, mode, True, "dp")))))
        assert set(outcomes.values()) == {200}
        # 11 requests of each selection, and one dp_mwu of each level against another.
        assert len(outcomes) == 11 * (len(LEVELS) + 2) + len(LEVELS)


def test_k_anonymous_mode_still_leaves_small_levels_out(tmp_path: Path) -> None:
    """The same rows in K-anonymous mode: a level of 1..K-1 records, and one of none, is
    refused as below K (its size shows as 0 in /v1/info); a level of K records is answered."""
    rows = [(f"l{j}", float(i), "p") for j in range(K + 2) for i in range(j)]
    write_rows(tmp_path / "d.csv", rows)
    write_rows(tmp_path / "empty.csv", [], grouped=False)
    settings_ = config(tmp_path, "complete_cases", False, "k_anonymous")
    del settings_["datasets"]["empty"]
    app = create_app(load_settings(write_toml(tmp_path / "c.toml", settings_)))

    async def run() -> dict[str, int]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
            assert info["n_by_group"] == {level: (K if level in ("l3", "l4") else 0)
                                          for level in LEVELS}
            out = {}
            for level in LEVELS:
                r = await client.post("/v1/datasets/d/dp/extremes", headers=AUTH,
                                      json={"variable": "x", "group": level, "epsilon": 0.5,
                                            "bounds": BOUNDS})
                out[level] = r.status_code
                if r.status_code != 200:
                    assert r.json()["error"] == "k_anonymity_refused"
            return out

    try:
        statuses = anyio.run(run)
    finally:
        app.state.services.close()
    # l4 holds K + 1 records: rounded down to K, answered.
    assert statuses == {"l0": 403, "l1": 403, "l2": 403, "l3": 200, "l4": 200}


@pytest.mark.parametrize("mode", ["per_variable", "complete_cases"])
def test_dp_describe_releases_the_missing_count_with_its_count(tmp_path: Path,
                                                               mode: str) -> None:
    """Counted per variable, the description's count part also releases the records missing
    the variable (one level, every record); with complete cases none is released (those
    records left the population). At ε = 10 the count part's ε is 1: the noisy count is within
    17 of the truth but with probability e^-17 < 1e-7."""
    rows = [("l1", float(i % 10), "p") for i in range(5)] + [("l1", None, "q")] * 40
    rows += [("l2", 1.0, "p")] * 3 + [("l2", None, None)] * 7
    write_rows(tmp_path / "d.csv", rows)
    write_rows(tmp_path / "empty.csv", [], grouped=False)
    app = create_app(load_settings(write_toml(tmp_path / "c.toml",
                                              config(tmp_path, mode, False, "dp"))))

    async def run() -> dict[str | None, Any]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            out = {}
            for group in ("l1", "l2", "l0", None):
                body = {"variable": "x", "epsilon": 10.0, "bins": 4,
                        **({"group": group} if group is not None else {})}
                r = await client.post("/v1/datasets/d/dp/describe", json=body, headers=AUTH)
                assert r.status_code == 200, r.text
                out[group] = r.json()
            return out

    try:
        released = anyio.run(run)
    finally:
        app.state.services.close()
    if mode == "complete_cases":
        assert all(r["missing"] is None for r in released.values())
        return
    truth = {"l1": 40, "l2": 7, "l0": 0, None: 47}
    for group, m in truth.items():
        assert released[group]["missing"] is not None
        assert abs(released[group]["missing"] - m) <= 17, (group, released[group])
    # One draw per question: the level's missing count is not the pooled one's.
    assert released["l1"]["missing"] != released[None]["missing"]
