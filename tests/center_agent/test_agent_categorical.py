"""Categorical variables (``POST /v1/datasets/{d}/categorical`` and ``/dp/categorical``): counts
per category and level as the per-record truth of the population has them, every cell 0 or
>= K with cells merged in the declared order (the missing cell last), one stored answer per
variable and epoch whatever the wording, the DP twin paid before it is computed; and the shared
core (``shared.category_counts``) against brute-force references."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from fastapi import FastAPI

from center_agent.core.config import ConfigError, load_settings
from center_agent.main import create_app
from shared.category_counts import (
    category_counts,
    dp_category_counts,
    geometric_halfwidth,
    merge_adjacent,
)
from shared.protocol import CategoricalRelease, DPCategoricalRelease
from tests.helpers.center import AUTH, K, write_csv
from tests.helpers.config import write_toml

URL = "/v1/datasets/cohort/categorical"
DP_URL = "/v1/datasets/cohort/dp/categorical"
SMOKING = ["never", "former", "current"]


# -- the core ----------------------------------------------------------------------------------


def test_category_counts_are_the_per_record_counts() -> None:
    rng = np.random.default_rng(1)
    groups = [rng.integers(0, 5, n).astype(float) for n in (0, 1, 37)]
    counts = category_counts(groups, 4)
    for row, codes in zip(counts, groups, strict=True):
        truth = Counter(int(c) for c in codes)
        assert row.tolist() == [truth[j] for j in range(5)]
    with pytest.raises(ValueError, match="codes"):
        category_counts([np.array([0.5])], 4)
    with pytest.raises(ValueError, match="codes"):
        category_counts([np.array([5.0])], 4)


def _adjacent_partitions(n: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every way to cut 0..n-1 into runs of adjacent cells."""
    out = []
    for cuts in itertools.product([False, True], repeat=n - 1):
        runs, current = [], [0]
        for j, cut in enumerate(cuts, start=1):
            if cut:
                runs.append(tuple(current))
                current = [j]
            else:
                current.append(j)
        runs.append(tuple(current))
        out.append(tuple(runs))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_merging_keeps_every_cell_zero_or_k_and_merges_only_neighbours(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    n_cells = int(rng.integers(1, 7))
    table = rng.choice([0, 1, 2, k - 1, k, k + 3], size=(int(rng.integers(1, 3)), n_cells))
    merged = merge_adjacent(table, k)
    # Runs of adjacent cells in the declared order, covering every cell once.
    assert merged.cells in _adjacent_partitions(n_cells)
    for g in range(table.shape[0]):
        assert merged.counts[g].tolist() == [int(table[g, list(c)].sum()) for c in merged.cells]
    if len(merged.cells) > 1:
        assert all(c == 0 or c >= k for c in merged.counts.ravel())
    # Nothing merged when nothing needed it.
    if not ((table > 0) & (table < k)).any():
        assert merged.cells == tuple((j,) for j in range(n_cells))


def test_the_merge_rule_on_small_cases() -> None:
    # A lone small cell joins the next; the last joins the one before; a run merges together.
    assert merge_adjacent([[10, 2, 10, 10]], 5).cells == ((0,), (1, 2), (3,))
    assert merge_adjacent([[10, 10, 2]], 5).cells == ((0,), (1, 2))
    # A run of two small cells merges into 4 < 5, which then joins the next cell.
    assert merge_adjacent([[10, 2, 2, 10]], 5).cells == ((0,), (1, 2, 3))
    assert merge_adjacent([[10, 2, 2, 10]], 5).counts.tolist() == [[10, 14]]
    assert merge_adjacent([[1, 1]], 5).cells == ((0, 1),)  # one cell: the total, as it is


def test_geometric_halfwidth_is_the_least_covering_width() -> None:
    for eps in (0.05, 0.3, 1.0, 4.0):
        alpha = math.exp(-eps)
        h = geometric_halfwidth(alpha)

        def mass(w: int, a: float = alpha) -> float:
            return sum((1 - a) / (1 + a) * a ** abs(z) for z in range(-w, w + 1))

        assert mass(h) >= 0.95 - 1e-12
        assert h == 0 or mass(h - 1) < 0.95


def test_dp_counts_have_the_stated_noise_law() -> None:
    rng = np.random.default_rng(3)
    codes = np.repeat([0.0, 1.0, 2.0], [30, 0, 12])
    draws = np.array([dp_category_counts(codes, 2, epsilon=0.5, neighbouring="add_remove",
                                         rng=rng).counts for _ in range(4000)])
    noise = draws - np.array([30, 0, 12])
    first = dp_category_counts(codes, 2, epsilon=0.5, neighbouring="add_remove", rng=rng)
    assert first.sensitivity == 1 and first.alpha == pytest.approx(math.exp(-0.5))
    assert noise.mean() == pytest.approx(0.0, abs=0.15)
    assert noise.var() == pytest.approx(first.variance, rel=0.1)
    swap = dp_category_counts(codes, 2, epsilon=0.5, neighbouring="swap", rng=rng)
    assert swap.sensitivity == 2 and swap.alpha == pytest.approx(math.exp(-0.25))


# -- the center --------------------------------------------------------------------------------


@pytest.fixture
def rows() -> pa.Table:
    """Level a: 30 never, 12 former, 3 current (a cell of 1..K-1), 11 missing or undeclared;
    level b: 20 never, 10 former, 10 current, no missing; K rows of level a missing x (out of
    the population, whatever their category: K of them, as 1..K-1 would make K - e more leave
    level a, of keyed rank, and the counts below could not be written by hand)."""
    smoking: list[str | None] = (["never"] * 30 + ["former"] * 12 + ["current"] * 3
                                 + [None] * 6 + ["unknown"] * 5
                                 + ["never"] * 20 + ["former"] * 10 + ["current"] * 10
                                 + ["current"] * K)
    arm = ["a"] * 56 + ["b"] * 40 + ["a"] * K
    x: list[float | None] = [float(i % 17) for i in range(96)] + [None] * K
    return pa.table({"x": pa.array(x, pa.float64()), "smoking": pa.array(smoking, pa.string()),
                     "arm": arm})


@pytest.fixture
def csv_path(tmp_path: Path, rows: pa.Table) -> Path:
    return write_csv(rows, tmp_path / "cohort.csv")


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    cohort = base_config["datasets"]["cohort"]
    cohort["variables"] = ["x"]
    cohort["categorical"] = {"smoking": SMOKING}
    cohort["epsilon_total"] = 10.0
    return base_config


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(url, json=body, headers=AUTH)


@pytest.mark.anyio
async def test_counts_per_category_and_level_with_small_cells_merged(
        client: httpx.AsyncClient) -> None:
    r = await _post(client, URL, {"variable": "smoking", "groups": ["a", "b"], "k": K})
    assert r.status_code == 200, r.text
    release = CategoricalRelease.model_validate_json(r.content)
    # current holds 3 in level a: merged with the next cell (missing: 11) in both levels.
    assert release.cells == [["never"], ["former"], ["current", None]]
    assert release.counts == [[30, 12, 14], [20, 10, 10]]
    assert release.missing is None
    # The levels' totals are the population's sizes (rows missing x left out, one population).
    info = (await client.get("/v1/info", headers=AUTH)).json()["datasets"][0]
    assert sum(release.counts[0]) == 56 and sum(release.counts[1]) == 40
    assert info["n_by_group"] == {"a": 50, "b": 40}
    # Another wording is a view of the one stored table: levels swapped, pooled, a larger K.
    swapped = (await _post(client, URL, {"variable": "smoking", "groups": ["b", "a"],
                                         "k": K})).json()
    assert swapped["counts"] == [[20, 10, 10], [30, 12, 14]]
    pooled = (await _post(client, URL, {"variable": "smoking", "k": K})).json()
    assert pooled["counts"] == [[50, 22, 24]]
    coarse = (await _post(client, URL, {"variable": "smoking", "groups": ["a", "b"],
                                        "k": 13})).json()
    assert coarse["cells"] == [["never"], ["former", "current", None]]
    assert coarse["counts"] == [[30, 26], [20, 20]]
    # The same question, the same answer.
    again = await _post(client, URL, {"variable": "smoking", "groups": ["a", "b"], "k": K})
    assert again.json() == r.json()


@pytest.fixture
def complete(rows: pa.Table) -> pa.Table:
    """No category of 1..K-1: the missing cell is released alone."""
    smoking = ["never"] * 40 + ["current"] * 10 + [None] * 10 + ["never"] * 20 + ["former"] * 20
    arm = ["a"] * 60 + ["b"] * 40
    return pa.table({"x": pa.array([1.0] * 100), "smoking": pa.array(smoking, pa.string()),
                     "arm": arm})


@pytest.mark.anyio
async def test_the_missing_cell_is_released_alone_when_it_holds_zero_or_k(
        tmp_path: Path, base_config: dict[str, Any], complete: pa.Table) -> None:
    from center_agent.main import create_app

    write_csv(complete, tmp_path / "cohort.csv")
    app = create_app(load_settings(write_toml(tmp_path / "c2.toml", base_config)))
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
            r = await _post(client, URL, {"variable": "smoking", "groups": ["a", "b"], "k": K})
            assert r.status_code == 200, r.text
            release = CategoricalRelease.model_validate_json(r.content)
            assert release.cells == [["never"], ["former"], ["current"], [None]]
            assert release.counts == [[40, 0, 10, 10], [20, 20, 0, 0]]
            assert release.missing == [10, 0]
    finally:
        app.state.services.close()


@pytest.mark.anyio
async def test_refusals_are_decided_from_the_request_and_the_configuration(
        client: httpx.AsyncClient) -> None:
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        (URL, {"variable": "x", "k": K}, 404, "unknown_variable"),  # numeric, not categorical
        (URL, {"variable": "nope", "k": K}, 404, "unknown_variable"),
        (URL, {"variable": "smoking", "groups": ["a", "z"], "k": K}, 404, "unknown_level"),
        (URL, {"variable": "smoking", "k": K - 1}, 403, "k_anonymity_refused"),
        (DP_URL, {"variable": "x", "epsilon": 1.0}, 404, "unknown_variable"),
        ("/v1/datasets/cohort/table", {"variable": "smoking", "k": K}, 404, "unknown_variable"),
        ("/v1/datasets/cohort/mwu", {"variable": "smoking", "groups": ["a", "b"]}, 404,
         "unknown_variable"),
    ]
    for url, body, status, error in cases:
        r = await _post(client, url, body)
        assert (r.status_code, r.json()["error"]) == (status, error), (url, body, r.text)
        assert "never" not in r.text or "smoking" in str(body)


@pytest.mark.anyio
async def test_dp_counts_are_paid_once_and_stored(client: httpx.AsyncClient,
                                                  app: FastAPI) -> None:
    body = {"variable": "smoking", "group": "a", "epsilon": 1.0}
    r = await _post(client, DP_URL, body)
    assert r.status_code == 200, r.text
    release = DPCategoricalRelease.model_validate_json(r.content)
    assert release.categories == SMOKING and len(release.counts) == 3
    assert release.alpha == pytest.approx(math.exp(-1.0)) and release.sensitivity == 1
    budget = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert budget["spent_epsilon"] == pytest.approx(1.0)
    again = await _post(client, DP_URL, body)
    assert again.json() == r.json()
    budget = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert budget["spent_epsilon"] == pytest.approx(1.0)
    # Beyond the budget: refused, nothing spent.
    r = await _post(client, DP_URL, {"variable": "smoking", "epsilon": 2.5})
    assert r.status_code == 200
    r = await _post(client, DP_URL, {"variable": "smoking", "group": "b", "epsilon": 2.5})
    assert r.status_code == 200
    r = await _post(client, DP_URL, {"variable": "smoking", "group": "b", "epsilon": 2.4})
    assert r.status_code == 200
    r = await _post(client, DP_URL, {"variable": "smoking", "epsilon": 2.0})
    assert (r.status_code, r.json()["error"]) == (403, "budget_exceeded")


@pytest.mark.parametrize(("categorical", "match"), [
    ({"x": ["a"]}, "both as variables and as categorical"),
    ({"arm": ["a"]}, "group column"),
    ({"s": []}, "no category"),
    ({"s": ["a", "a"]}, "distinct"),
])
def test_bad_declarations_stop_start_up(tmp_path: Path, base_config: dict[str, Any],
                                        categorical: dict[str, list[str]], match: str) -> None:
    base_config["datasets"]["cohort"]["categorical"] = categorical
    with pytest.raises(ConfigError, match=match):
        load_settings(write_toml(tmp_path / "bad.toml", base_config))


@pytest.mark.anyio
async def test_dp_mode_refuses_the_exact_counts_and_answers_their_dp_twin(
        tmp_path: Path, base_config: dict[str, Any]) -> None:
    """In DP mode (docs/privacy.md, guarantee 16) the categorical table and the missing counts
    are exact kinds, refused before anything is read and naming the twin; the ε-DP counts are
    answered and paid."""
    cohort = base_config["datasets"]["cohort"]
    cohort["release_mode"] = "dp"
    app = create_app(load_settings(write_toml(tmp_path / "dp.toml", base_config)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
        table = await _post(client, URL, {"variable": "smoking", "groups": ["a", "b"], "k": K})
        assert table.status_code == 403, table.text
        assert table.json()["error"] == "dp_mode_refuses_exact"
        assert "dp_categorical" in table.json()["detail"]
        missing = await _post(client, "/v1/datasets/cohort/missing", {"variable": "x"})
        assert missing.status_code == 403 and missing.json()["error"] == "dp_mode_refuses_exact"
        dp = await _post(client, "/v1/datasets/cohort/dp/categorical",
                         {"variable": "smoking", "group": "a", "epsilon": 0.5})
        assert dp.status_code == 200, dp.text
        budget = (await client.get("/v1/budget/cohort", headers=AUTH)).json()
        assert budget["spent_epsilon"] == pytest.approx(0.5)
        assert budget["guarantee"]["releases"] == 1
    app.state.services.close()
