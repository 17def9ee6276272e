"""DP mode (``release_mode = "dp"``, docs/privacy.md "DP mode"): every exact kind is refused with
403 ``dp_mode_refuses_exact`` from the request and the configuration alone (so also when the
source cannot be read), ``/v1/info`` shows declared sizes only, and over a random sequence of
requests no exact kind is ever answered while the accountant's pure ε is the sum of what the
answered DP requests paid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from center_agent.core.config import ConfigError, load_settings
from tests.helpers.center import AUTH, peer_table
from tests.helpers.config import write_toml

pytestmark = pytest.mark.anyio
D = "/v1/datasets/cohort"
BOUNDS = [0, 100]


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    dataset = base_config["datasets"]["cohort"]
    dataset["release_mode"] = "dp"
    dataset["declared_n_by_group"] = {"a": 70}
    return base_config


# Every exact request a caller could make of the cohort (path, body): refused in DP mode.
EXACT: list[tuple[str, dict[str, Any]]] = [
    (f"{D}/table", {"variable": "x", "groups": ["a", "b"], "k": 10}),
    (f"{D}/table", {"variable": "y", "k": 20}),
    (f"{D}/table/refine", {"variable": "x", "groups": ["a", "b"], "k": 10,
                           "table": peer_table([float("-inf"), 50.0, float("inf")])}),
    (f"{D}/mwu", {"variable": "x", "groups": ["a", "b"]}),
    (f"{D}/mwu", {"variable": "x", "groups": ["b", "a"], "epsilon": 0.1}),
    (f"{D}/yj-moments", {"variable": "x", "lmbda": 1.0, "epsilon": 0.1, "bounds": BOUNDS}),
    (f"{D}/quantile-loss", {"variable": "x", "u": 50.0, "level": 0.5}),
    # The whisker buffer of a selection with no declared size would take its size rounded to K.
    (f"{D}/dp/boxplot", {"variable": "x", "group": "b", "epsilon": 0.1, "bounds": BOUNDS}),
    (f"{D}/dp/boxplot", {"variable": "x", "epsilon": 0.1, "bounds": BOUNDS}),
]


def _dp(rng: np.random.Generator, step: int) -> tuple[str, dict[str, Any]]:
    """A random ε-DP request of the cohort (its bounds vary, so most are new questions)."""
    eps = float(rng.choice([0.01, 0.02, 0.05]))
    base = {"variable": str(rng.choice(["x", "y"])), "epsilon": eps,
            "bounds": [0, 100 + step], "group": [None, "a", "b"][int(rng.integers(3))]}
    kind = str(rng.choice(["quantiles", "extremes", "tree", "threshold", "describe", "box"]))
    if kind == "quantiles":
        return f"{D}/dp/quantiles", {**base, "levels": [0.25, 0.5]}
    if kind == "extremes":
        return f"{D}/dp/extremes", base
    if kind == "tree":
        return f"{D}/dp/tree-histogram", {**base, "grid": [0, 100], "depth": 2, "branching": 2}
    if kind == "threshold":
        return f"{D}/dp/threshold-counts", {**base, "lower": 40.0, "upper": 60.0}
    if kind == "describe":
        return f"{D}/dp/describe", {**base, "epsilon": 0.05, "bins": 4}
    return f"{D}/dp/boxplot", {**base, "n_public": 80}


def _refused_as_exact(r: httpx.Response) -> bool:
    return r.status_code == 403 and r.json()["error"] == "dp_mode_refuses_exact"


async def test_info_shows_the_mode_and_declared_sizes_only(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/info", headers=AUTH)
    assert r.status_code == 200, r.text
    (cohort,) = r.json()["datasets"]
    assert cohort["release_mode"] == "dp"
    # The declared size of level a, nothing for b or the whole dataset (not the data's 70s).
    assert cohort["n_records"] is None
    assert cohort["n_by_group"] == {"a": 70}


@pytest.mark.parametrize(("path", "body"), EXACT, ids=[f"{p.split('/')[-1]}-{i}"
                                                          for i, (p, _b) in enumerate(EXACT)])
async def test_every_exact_kind_is_refused_before_the_data_are_read(
        client: httpx.AsyncClient, csv_path: Path, path: str, body: dict[str, Any]) -> None:
    r = await client.post(path, json=body, headers=AUTH)
    assert _refused_as_exact(r), r.text
    assert "DP mode" in r.json()["detail"]
    # The same answer with the source gone: the refusal read nothing.
    csv_path.unlink()
    again = await client.post(path, json=body, headers=AUTH)
    assert _refused_as_exact(again), again.text
    assert again.json() == r.json()
    # While a DP release of the unreadable source is the 503 every release is.
    dp = await client.post(f"{D}/dp/extremes", headers=AUTH,
                           json={"variable": "x", "epsilon": 0.1, "bounds": BOUNDS})
    assert dp.status_code == 503 and dp.json()["error"] == "data_source_error"


async def test_the_refusal_names_the_dp_alternative(client: httpx.AsyncClient) -> None:
    details = {}
    for path, body in EXACT:
        r = await client.post(path, json=body, headers=AUTH)
        details[path.split("/")[-1]] = r.json()["detail"]
    assert "dp_tree_histogram" in details["table"] and "dp_describe" in details["refine"]
    assert "dp_quantiles" in details["mwu"] and "dp_quantiles" in details["yj-moments"]
    assert "n_public" in details["boxplot"]


async def test_declared_sizes_stand_in_for_the_rounded_ones(client: httpx.AsyncClient) -> None:
    box = await client.post(f"{D}/dp/boxplot", headers=AUTH,
                            json={"variable": "x", "group": "a", "epsilon": 0.1,
                                  "bounds": BOUNDS})
    assert box.status_code == 200, box.text
    assert box.json()["n"] == 70  # the declared size of a, not its size rounded to K
    quantiles = {}
    for group in ("a", "b"):
        r = await client.post(f"{D}/dp/quantiles", headers=AUTH,
                              json={"variable": "x", "group": group, "epsilon": 0.1,
                                    "bounds": BOUNDS, "levels": [0.5]})
        assert r.status_code == 200, r.text
        quantiles[group] = r.json()["n_public"]
    assert quantiles == {"a": 70, "b": None}


async def test_random_requests_never_answer_an_exact_kind(
        client: httpx.AsyncClient, csv_path: Path) -> None:
    rng = np.random.default_rng(32)
    paid: dict[str, float] = {}  # the reference: each answered DP question → its ε
    asked: list[tuple[str, dict[str, Any]]] = []
    answered = refused = 0
    for step in range(60):
        if step == 45:
            csv_path.unlink()  # from here on nothing can be read: exact kinds still refused
        roll = rng.random()
        if asked and roll < 0.15:
            path, body = asked[int(rng.integers(len(asked)))]
        elif roll < 0.5:
            path, body = EXACT[int(rng.integers(len(EXACT)))]
        else:
            path, body = _dp(rng, step)
        body = {k: v for k, v in body.items() if v is not None}
        r = await client.post(path, json=body, headers=AUTH)
        exact = (path, body) in EXACT
        if exact:
            assert _refused_as_exact(r), r.text
            refused += 1
        elif step >= 45:
            assert r.status_code == 503, r.text
        else:
            assert r.status_code == 200, r.text
            answered += 1
            paid.setdefault(f"{path} {sorted(body.items())}", body["epsilon"])
        asked.append((path, body))
        budget = await client.get("/v1/budget/cohort", headers=AUTH)
        guarantee = budget.json()["guarantee"]
        assert guarantee["epsilon_pure"] == pytest.approx(sum(paid.values()), abs=1e-9)
        assert guarantee["epsilon_pure"] == pytest.approx(budget.json()["spent_epsilon"],
                                                          abs=1e-9)
        assert guarantee["releases"] == len(paid)
    assert answered >= 15 and refused >= 15  # the sequence exercised both sides


async def test_a_k_anonymous_dataset_is_unchanged(tmp_path: Path,
                                                  base_config: dict[str, Any]) -> None:
    dataset = base_config["datasets"]["cohort"]
    del dataset["release_mode"], dataset["declared_n_by_group"]
    from center_agent.main import create_app

    app = create_app(load_settings(write_toml(tmp_path / "k.toml", base_config)))
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
            info = (await c.get("/v1/info", headers=AUTH)).json()["datasets"][0]
            assert info["release_mode"] == "k_anonymous" and info["n_records"] % 10 == 0
            assert info["n_records"] > 0
            r = await c.post(*EXACT[0][:1], json=EXACT[0][1], headers=AUTH)
            assert r.status_code == 200, r.text
    finally:
        app.state.services.close()


@pytest.mark.parametrize(("change", "message"), [
    ({"neighbouring": "swap"}, "needs neighbouring = \"add_remove\""),
    ({"datasets.release_mode": "k_anonymous"}, "shown only with release_mode"),
    ({"datasets.declared_n_by_group": {"c": 5}}, "undeclared level(s) ['c']"),
])
def test_configuration_errors_name_the_fix(tmp_path: Path, base_config: dict[str, Any],
                                           change: dict[str, Any], message: str) -> None:
    ((key, value),) = change.items()
    if key.startswith("datasets."):
        base_config["datasets"]["cohort"][key.split(".", 1)[1]] = value
    else:
        base_config[key] = value
    with pytest.raises(ConfigError, match=None) as err:
        load_settings(write_toml(tmp_path / "bad.toml", base_config))
    assert message in str(err.value)


async def test_the_coordinators_catalog_shows_the_mode(client: httpx.AsyncClient) -> None:
    """The catalog entry built from this center's /v1/info: the mode, the declared sizes."""
    from coordinator.catalog import build_catalog
    from coordinator.registry import Declaration
    from shared.protocol import CenterInfo

    info = CenterInfo.model_validate((await client.get("/v1/info", headers=AUTH)).json())
    catalog = build_catalog([Declaration("hospital-test", None, info, None, None)])
    (entry,) = catalog.model_dump()["datasets"][0]["centers"]
    assert entry["release_mode"] == "dp"
    # As declared: b declares no size, so none is shown (not a level of 0 records).
    assert entry["n_records"] is None and entry["n_by_group"] == {"a": 70}
    # A declared size below K is shown as declared, not rounded to a "below K" 0.
    (dataset,) = info.datasets
    tiny = info.model_copy(update={"datasets": [dataset.model_copy(
        update={"n_by_group": {"a": 70, "b": 3}, "n_records": 73})]})
    catalog = build_catalog([Declaration("hospital-test", None, tiny, None, None)])
    (entry,) = catalog.model_dump()["datasets"][0]["centers"]
    assert entry["n_by_group"] == {"a": 70, "b": 3} and entry["n_records"] == 73
