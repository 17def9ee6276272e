"""The service frame in process (httpx.ASGITransport): auth, typed errors, info, budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, Field

from center_agent.api.deps import authenticate
from center_agent.core.config import load_settings
from center_agent.core.errors import DataChanged
from center_agent.main import create_app
from tests.helpers.center import AUTH, OTHER_TOKEN, TOKEN, K
from tests.helpers.config import write_toml

pytestmark = pytest.mark.anyio


async def test_health_needs_no_token(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


@pytest.mark.parametrize("path", ["/v1/info", "/v1/budget", "/v1/budget/cohort"])
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["none", "empty", "wrong", "prefix", "basic", "no-scheme"],
)
async def test_401_without_a_valid_token(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> None:
    r = await client.get(path, headers=headers)
    assert r.status_code == 401
    assert r.json()["error"] == "unauthenticated"
    assert r.headers["www-authenticate"] == "Bearer"


async def test_every_configured_token_is_accepted(client: httpx.AsyncClient) -> None:
    for token in (TOKEN, OTHER_TOKEN):
        r = await client.get("/v1/budget", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200


async def test_no_route_but_health_is_public(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Every operation in the schema declares the bearer scheme and answers 401 without a token,
    except /v1/health; outside dev mode the docs and schema need a token too."""
    paths = app.openapi()["paths"]
    assert {"/v1/health", "/v1/info", "/v1/budget", "/v1/budget/{dataset}"} <= set(paths)
    for path, operations in paths.items():
        for method, operation in operations.items():
            url = path.replace("{dataset}", "cohort")
            r = await client.request(method.upper(), url)
            if path == "/v1/health":
                assert "security" not in operation
                assert r.status_code == 200
            else:
                assert operation["security"] == [{"HTTPBearer": []}], path
                assert r.status_code == 401, (method, path)
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert (await client.get(path)).status_code == 401  # nothing shows without a token
    assert (await client.get("/openapi.json", headers=AUTH)).json()["paths"].keys() == paths.keys()
    assert "swagger-ui" in (await client.get("/docs", headers=AUTH)).text
    assert (await client.get("/redoc", headers=AUTH)).status_code == 404  # one docs page


async def test_info_rounds_sizes_down_to_multiples_of_k(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/info", headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    assert body["center_id"] == "hospital-test"
    assert body["k"] == K
    assert body["neighbouring"] == "add_remove"
    assert body["quantile_loss_enabled"] is False
    (ds,) = body["datasets"]
    assert ds["name"] == "cohort"
    assert ds["variables"] == ["x", "y"]
    assert ds["group"] == {"column": "arm", "levels": ["a", "b"]}
    # 157 rows; 134 complete rows of a declared level (y missing or infinite in K of each, a
    # label undeclared or missing in 3): the one population every release counts, shown as
    # 130. (Holes were 8 and 6 in the levels: make_table now makes them K, as a level leaving
    # out 1..K-1 rows leaves out K - e more of keyed rank.)
    assert ds["n_records"] == 130
    assert set(ds["n_by_group"]) == {"a", "b"}
    assert ds["epoch"] == 1 and ds["paused"] is False
    assert len(body["signing_key"]) == 44  # base64 of 32 bytes
    for count in [ds["n_records"], *ds["n_by_group"].values()]:
        assert count % K == 0


async def test_budget_lists_every_dataset(client: httpx.AsyncClient) -> None:
    nothing = {"epsilon": 0.0, "delta": 1e-6, "epsilon_pure": 0.0, "releases": 0}
    r = await client.get("/v1/budget", headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    cohort = body["datasets"].pop("cohort")
    assert body == {"datasets": {}}
    guarantee = cohort.pop("guarantee")
    assert cohort == {"total_epsilon": 3.0, "spent_epsilon": 0.0, "remaining_epsilon": 3.0,
                      "exact_releases": {}}
    assert {key: guarantee[key] for key in nothing} == nothing
    r = await client.get("/v1/budget/cohort", headers=AUTH)
    assert r.json() == {"total_epsilon": 3.0, "spent_epsilon": 0.0, "remaining_epsilon": 3.0,
                        "exact_releases": {}, "guarantee": guarantee}


async def test_unknown_dataset_is_a_typed_404(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/budget/nope", headers=AUTH)
    assert r.status_code == 404
    assert r.json()["error"] == "unknown_dataset"
    assert "nope" in r.json()["detail"]


async def test_unknown_route_and_method_are_typed(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/nothing-here", headers=AUTH)
    assert r.status_code == 404
    assert r.json()["error"] == "not_found"
    r = await client.delete("/v1/health")
    assert r.status_code == 405
    assert r.json()["error"] == "method_not_allowed"


async def test_body_over_the_limit_is_413(client: httpx.AsyncClient, app: FastAPI) -> None:
    limit = app.state.services.settings.max_body_bytes
    r = await client.post("/v1/info", headers=AUTH, content=b"x" * (limit + 1))
    assert r.status_code == 413
    assert r.json()["error"] == "request_too_large"

    async def chunked() -> Any:  # no Content-Length: counted while read
        for _ in range(limit // 1000 + 2):
            yield b"y" * 1000

    r = await client.post("/v1/info", headers=AUTH, content=chunked())
    assert r.status_code == 413


# -- errors and refusals, through throw-away routes using the real dependencies ---------------


class _EchoBody(BaseModel):
    variable: str
    epsilon: float = Field(gt=0, allow_inf_nan=False)


def _add_test_routes(app: FastAPI) -> None:
    from fastapi import APIRouter, Depends

    router = APIRouter(prefix="/v1", dependencies=[Depends(authenticate)])

    @router.get("/_test_crash")
    def crash() -> None:
        raise RuntimeError("secret path /srv/data/patients.csv in a trace")

    @router.get("/_test_refusal")
    def refusal() -> None:
        raise DataChanged("cohort", 3)

    app.include_router(router)


DP = {"variable": "x", "epsilon": 0.5, "bounds": [0, 100], "levels": [0.5]}


async def test_release_route_validation_budget_and_cache(client: httpx.AsyncClient) -> None:
    url = "/v1/datasets/cohort/dp/quantiles"
    r = await client.post(url, headers=AUTH, json={"variable": "x", "bounds": [0, 1],
                                                    "levels": [0.5]})
    assert r.status_code == 422
    assert r.json()["error"] == "validation_error"
    assert "body.epsilon" in r.json()["detail"] and "body.epsilon" in r.json()["fields"]
    for bad in (0, -1, "NaN", "inf"):
        r = await client.post(url, headers=AUTH, json={**DP, "epsilon": bad})
        assert r.status_code == 422, bad
    r = await client.post(url, json=DP)
    assert r.status_code == 401
    r = await client.post(url, headers=AUTH, json={**DP, "variable": "secret"})
    assert r.status_code == 404 and r.json()["error"] == "unknown_variable"
    r = await client.post("/v1/datasets/other/dp/quantiles", headers=AUTH, json=DP)
    assert r.status_code == 404 and r.json()["error"] == "unknown_dataset"

    first = await client.post(url, headers=AUTH, json={**DP, "epsilon": 0.75})
    again = await client.post(url, headers=AUTH, json={**DP, "epsilon": 0.75})
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    budget = (await client.get("/v1/budget/cohort", headers=AUTH)).json()
    assert budget["spent_epsilon"] == 0.75  # the repeat spent nothing

    # One request may spend at most a quarter of the total (epsilon_per_request's default).
    r = await client.post(url, headers=AUTH, json={**DP, "epsilon": 0.8})
    assert r.status_code == 403
    assert r.json()["error"] == "epsilon_cap_exceeded"
    for bounds in ([0, 60], [0, 70], [0, 80]):
        r = await client.post(url, headers=AUTH, json={**DP, "epsilon": 0.75, "bounds": bounds})
        assert r.status_code == 200
    r = await client.post(url, headers=AUTH, json={**DP, "epsilon": 0.1, "bounds": [0, 90]})
    assert r.status_code == 403
    assert r.json()["error"] == "budget_exceeded"
    assert r.json()["remaining_epsilon"] == pytest.approx(0.0)


async def test_no_stack_trace_reaches_a_response(client: httpx.AsyncClient, app: FastAPI) -> None:
    _add_test_routes(app)
    r = await client.get("/v1/_test_crash", headers=AUTH)
    assert r.status_code == 500
    assert r.json() == {
        "error": "internal_error",
        "detail": "the center could not answer this request",
    }
    assert "secret" not in r.text and "Traceback" not in r.text


async def test_refusals_are_typed(client: httpx.AsyncClient, app: FastAPI) -> None:
    _add_test_routes(app)
    r = await client.get("/v1/_test_refusal", headers=AUTH)
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "data_changed" and body["epoch"] == 3
    assert "fedstats center epoch" in body["detail"]
    assert "I corrected a value: what now?" in body["detail"]


async def test_unreadable_source_is_503_without_details(
    client: httpx.AsyncClient, csv_path: Path
) -> None:
    csv_path.unlink()
    # /v1/info lists the dataset as unavailable (the center's other datasets stay usable:
    # tests/center_agent/test_agent_isolation.py); its releases are the 503.
    info = await client.get("/v1/info", headers=AUTH)
    assert info.status_code == 200
    assert info.json()["datasets"][0]["available"] is False
    r = await client.post("/v1/datasets/cohort/table", headers=AUTH,
                          json={"variable": "x", "groups": ["a", "b"], "k": 10})
    assert r.status_code == 503
    assert r.json()["error"] == "data_source_error"
    for text in (r.text, info.text):
        assert str(csv_path) not in text and "cohort.csv" not in text


@pytest.mark.parametrize("allowed", [False, True])
async def test_leaky_release_is_refused_unless_switched_on(
    tmp_path: Path, base_config: dict[str, Any], allowed: bool
) -> None:
    config = write_toml(tmp_path / "q.toml", {**base_config, "allow_quantile_loss": allowed})
    app = create_app(load_settings(config))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
        r = await client.post("/v1/datasets/cohort/quantile-loss", headers=AUTH,
                              json={"variable": "x", "u": 50.0, "level": 0.5})
        info = (await client.get("/v1/info", headers=AUTH)).json()
    app.state.services.close()
    assert info["quantile_loss_enabled"] is allowed
    if allowed:
        assert r.status_code == 200
    else:
        assert r.status_code == 403
        assert r.json()["error"] == "release_disabled"
        assert "allow_quantile_loss" in r.json()["detail"]


async def test_info_never_shows_a_small_count(tmp_path: Path, base_config: dict[str, Any]) -> None:
    """A level with 3 records is left out of the population; the dataset shows its other 10."""
    csv = tmp_path / "small.csv"
    csv.write_text("x,arm\n" + "".join(f"{i},{'b' if i < 3 else 'a'}\n" for i in range(13)))
    datasets = {
        "small": {
            "source": {"kind": "csv", "path": str(csv)},
            "variables": ["x"],
            "group": {"column": "arm", "levels": ["a", "b"]},
            "epsilon_total": 1.0,
        }
    }
    app = create_app(
        load_settings(write_toml(tmp_path / "s.toml", {**base_config, "datasets": datasets}))
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as client:
        (ds,) = (await client.get("/v1/info", headers=AUTH)).json()["datasets"]
    app.state.services.close()
    assert ds["n_records"] == 10
    assert ds["n_by_group"] == {"a": 10, "b": 0}
