"""A DP-mode center answers the DP twin of the Mann-Whitney release (``dp_mwu``;
docs/privacy.md "DP mode", docs/methods.md §3.10) and refuses the exact one, naming the twin:
paid once before it is computed, the same question (in either order of the levels) the same
answer, a release the coordinator's checks accept, nothing in it but the DP numbers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from coordinator.protocols.dp_mwu import check_dp_mwu_release
from shared.dp.mwu import SIZE_SHARE
from shared.protocol import DPMWURelease, DPMWURequest
from tests.helpers.center import AUTH

pytestmark = pytest.mark.anyio
D = "/v1/datasets/cohort"
ASK = {"variable": "x", "groups": ["a", "b"], "epsilon": 0.5}


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    dataset = base_config["datasets"]["cohort"]
    dataset["release_mode"] = "dp"
    dataset["epsilon_total"] = 1.6
    dataset["epsilon_per_request"] = 0.8
    return base_config


async def spent(client: httpx.AsyncClient) -> float:
    r = await client.get("/v1/budget", headers=AUTH)
    return float(r.json()["datasets"]["cohort"]["spent_epsilon"])


async def test_dp_mode_answers_dp_mwu_and_refuses_mwu(client: httpx.AsyncClient) -> None:
    for body in ({"variable": "x", "groups": ["a", "b"]},
                 {"variable": "x", "groups": ["a", "b"], "epsilon": 0.5}):
        r = await client.post(f"{D}/mwu", json=body, headers=AUTH)
        assert r.status_code == 403 and r.json()["error"] == "dp_mode_refuses_exact", r.text
        assert "dp_mwu" in r.json()["detail"]
    assert await spent(client) == 0.0
    r = await client.post(f"{D}/dp/mwu", json=ASK, headers=AUTH)
    assert r.status_code == 200, r.text
    release = DPMWURelease.model_validate(r.json())
    # Only the DP numbers: no exact size, no tie count, no exact noise scale of the sizes.
    assert set(r.json()) == {"statistic", "n_x_hat", "n_y_hat", "cap", "epsilon", "size_epsilon",
                             "u_epsilon", "margin", "neighbouring", "noise"}
    assert release.epsilon == pytest.approx(0.5)
    assert release.size_epsilon == pytest.approx(0.5 * SIZE_SHARE)
    assert release.neighbouring == "add_remove"
    check_dp_mwu_release("hospital-test", release, DPMWURequest.model_validate(ASK))
    assert await spent(client) == pytest.approx(0.5)


async def test_paid_once_and_the_same_question_gets_the_same_answer(
        client: httpx.AsyncClient) -> None:
    first = await client.post(f"{D}/dp/mwu", json=ASK, headers=AUTH)
    assert first.status_code == 200, first.text
    again = await client.post(f"{D}/dp/mwu", json=ASK, headers=AUTH)
    assert again.json() == first.json()
    # The levels the other way round: the stored answer, Ũ negated and the sizes swapped.
    swapped = await client.post(f"{D}/dp/mwu", headers=AUTH,
                                json={**ASK, "groups": ["b", "a"]})
    assert swapped.status_code == 200, swapped.text
    a, b = first.json(), swapped.json()
    assert b["statistic"] == -a["statistic"]
    assert (b["n_x_hat"], b["n_y_hat"]) == (a["n_y_hat"], a["n_x_hat"])
    assert b["cap"] == a["cap"] and b["noise"] == a["noise"]
    assert await spent(client) == pytest.approx(0.5)
    # The default split written out is the same question; another split is another one.
    same = await client.post(f"{D}/dp/mwu", headers=AUTH,
                             json={**ASK, "size_share": SIZE_SHARE})
    assert same.json() == first.json()
    other = await client.post(f"{D}/dp/mwu", headers=AUTH, json={**ASK, "size_share": 0.5})
    assert other.status_code == 200, other.text
    assert await spent(client) == pytest.approx(1.0)
    # Beyond the budget (1.6): refused before anything is computed, nothing spent.
    over = await client.post(f"{D}/dp/mwu", headers=AUTH, json={**ASK, "epsilon": 0.7})
    assert over.status_code == 403 and over.json()["error"] == "budget_exceeded", over.text
    assert await spent(client) == pytest.approx(1.0)


@pytest.mark.parametrize(("body", "error"), [
    ({**ASK, "groups": ["a", "c"]}, "unknown_level"),
    ({**ASK, "variable": "notes"}, "unknown_variable"),
    ({**ASK, "epsilon": 0.0}, "validation_error"),
    ({**ASK, "size_share": 1.0}, "validation_error"),
    ({**ASK, "groups": ["a"]}, "validation_error"),
])
async def test_bad_requests_are_4xx_and_spend_nothing(
        client: httpx.AsyncClient, body: dict[str, Any], error: str) -> None:
    r = await client.post(f"{D}/dp/mwu", json=body, headers=AUTH)
    assert 400 <= r.status_code < 500 and r.json()["error"] == error, r.text
    assert await spent(client) == 0.0
