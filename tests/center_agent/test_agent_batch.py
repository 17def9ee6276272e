"""Several releases in one call (``POST /v1/datasets/{dataset}/releases``): each item answered
exactly as its own call would be — the same stored answer, the same ε accounting, its own audit
record — and an item that is invalid, refused or fails leaves the others as they are."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from center_agent.core.errors import ReleaseFailed
from center_agent.gate import kinds as gate_kinds
from fedstats_service.context import ANALYST_HEADER, REQUEST_ID_HEADER, STUDY_HEADER
from shared.protocol import MAX_BATCH, BatchRelease
from tests.helpers.center import AUTH, K

pytestmark = pytest.mark.anyio

BATCH = "/v1/datasets/cohort/releases"
OPERATOR = "op-" + "0123456789abcdef0123"


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    return {**base_config, "operator_tokens": [OPERATOR]}


def quantiles(epsilon: float, upper: float = 100.0) -> dict[str, Any]:
    return {"variable": "x", "levels": [0.5], "epsilon": epsilon, "bounds": [0.0, upper]}


TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}
MWU = {"variable": "x", "groups": ["a", "b"]}


async def batch(client: httpx.AsyncClient, *items: tuple[str, Any],
                headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    r = await client.post(BATCH, headers={**AUTH, **(headers or {})},
                          json={"items": [{"kind": k, "request": q} for k, q in items]})
    assert r.status_code == 200, r.text
    return [a.model_dump() for a in BatchRelease.model_validate_json(r.content).answers]


async def spent(client: httpx.AsyncClient) -> float:
    r = await client.get("/v1/budget", headers=AUTH)
    return float(r.json()["datasets"]["cohort"]["spent_epsilon"])


async def test_each_item_is_answered_as_its_own_call_would_be(
    client: httpx.AsyncClient,
) -> None:
    answers = await batch(client, ("table", TABLE), ("mwu", MWU),
                          ("dp_quantiles", quantiles(0.25)))
    assert [a["status"] for a in answers] == [200, 200, 200]
    assert await spent(client) == pytest.approx(0.25)
    # Asked again one by one: the stored answers, nothing spent again.
    for (path, body), answer in zip(
            [("table", TABLE), ("mwu", MWU), ("dp/quantiles", quantiles(0.25))], answers,
            strict=True):
        alone = await client.post(f"/v1/datasets/cohort/{path}", json=body, headers=AUTH)
        assert alone.status_code == 200, alone.text
        assert alone.json() == answer["release"]
    assert await spent(client) == pytest.approx(0.25)


async def test_a_repeated_item_is_paid_once_and_answered_the_same(
    client: httpx.AsyncClient,
) -> None:
    answers = await batch(client, *[("dp_quantiles", quantiles(0.5))] * 3)
    assert {a["status"] for a in answers} == {200}
    assert len({str(a["release"]) for a in answers}) == 1
    assert await spent(client) == pytest.approx(0.5)


async def test_items_over_the_budget_are_refused_alone(client: httpx.AsyncClient) -> None:
    # The test dataset holds ε = 3, at most 0.75 a request: 4 of 5 distinct requests fit.
    items = [("dp_quantiles", quantiles(0.75, 100.0 + i)) for i in range(5)]
    answers = await batch(client, ("mwu", MWU), *items)
    assert [a["status"] for a in answers] == [200, 200, 200, 200, 200, 403]
    assert answers[-1]["error"]["error"] == "budget_exceeded"
    assert await spent(client) == pytest.approx(3.0)


async def test_invalid_and_unknown_items_are_answered_in_their_slots(
    client: httpx.AsyncClient,
) -> None:
    answers = await batch(
        client,
        ("nonsense", {}),
        ("dp_quantiles", {**quantiles(0.5), "levels": [2.0]}),
        ("mwu", {**MWU, "groups": ["a", "zzz"]}),
        ("dp_quantiles", quantiles(0.5)),
    )
    assert [a["status"] for a in answers] == [404, 422, 404, 200]
    assert "no release kind named 'nonsense'" in answers[0]["error"]["detail"]
    assert "items.1.request.levels" in answers[1]["error"]["detail"]
    assert answers[2]["error"]["error"] == "unknown_level"
    assert await spent(client) == pytest.approx(0.5)


async def test_a_failing_item_fails_alone_and_keeps_its_payment(
        client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault computing one release (a bug, a broken library): that item answers 500, the
    items before and after it stand. Its ε was paid before it was computed and stays spent
    (as after a killed process: center_agent.gate, "When the computation fails"); the same
    question asked again is computed under that payment, never debited twice."""
    boxplot = next(kind for kind in gate_kinds.KINDS if kind.name == "dp_boxplot")
    working = type(boxplot).compute_release

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("the core broke")

    monkeypatch.setattr(type(boxplot), "compute_release", staticmethod(broken))
    box = {"variable": "x", "group": "a", "epsilon": 0.5, "bounds": [0.0, 100.0]}
    answers = await batch(client, ("dp_quantiles", quantiles(0.5)), ("dp_boxplot", box),
                          ("dp_quantiles", quantiles(0.5, 90.0)))
    assert [a["status"] for a in answers] == [200, 500, 200]
    assert answers[1]["error"]["error"] == ReleaseFailed.error
    assert "the core broke" not in str(answers[1])
    assert await spent(client) == pytest.approx(1.5)
    again = await batch(client, ("dp_boxplot", box))
    assert again[0]["status"] == 500 and await spent(client) == pytest.approx(1.5)

    monkeypatch.setattr(type(boxplot), "compute_release", working)
    fixed = await batch(client, ("dp_boxplot", box))
    assert fixed[0]["status"] == 200
    assert await spent(client) == pytest.approx(1.5)  # computed under the first payment
    assert (await batch(client, ("dp_boxplot", box)))[0] == fixed[0]


async def test_every_item_has_its_audit_record(client: httpx.AsyncClient) -> None:
    items = [("mwu", MWU), *[("dp_quantiles", quantiles(0.75, 100.0 + i)) for i in range(5)]]
    await batch(client, *items, headers={STUDY_HEADER: "study-1", ANALYST_HEADER: "ana",
                                         REQUEST_ID_HEADER: "req-1"})
    r = await client.get("/v1/audit", headers={"Authorization": f"Bearer {OPERATOR}"})
    assert r.status_code == 200, r.text
    records = r.json()["records"]
    assert [e["outcome"] for e in records] == ["released"] * 5 + ["refused:budget_exceeded"]
    assert [e["kind"] for e in records] == ["mwu"] + ["dp_quantiles"] * 5
    assert {(e["study_id"], e["analyst_id"], e["request_id"]) for e in records} == {
        ("study-1", "ana", "req-1")}
    assert sum(e["epsilon"] for e in records) == pytest.approx(await spent(client))


async def test_the_batch_route_keeps_the_roles_and_limits(client: httpx.AsyncClient) -> None:
    body = {"items": [{"kind": "mwu", "request": MWU}]}
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    assert (await client.post(BATCH, json=body, headers=operator)).status_code == 403
    assert (await client.post(BATCH, json=body)).status_code == 401
    too_many = {"items": [{"kind": "mwu", "request": MWU}] * (MAX_BATCH + 1)}
    r = await client.post(BATCH, json=too_many, headers=AUTH)
    assert r.status_code == 422 and "items" in r.json()["detail"]
    r = await client.post("/v1/datasets/nope/releases", json=body, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_dataset"


async def test_a_batch_matches_its_calls_one_by_one(client: httpx.AsyncClient,
                                                    app: FastAPI) -> None:
    """The refinement and table answers are the stored answers of their question, whichever
    route asked first."""
    first = (await client.post("/v1/datasets/cohort/table", json=TABLE, headers=AUTH)).json()
    answers = await batch(client, ("table", TABLE), ("table", {**TABLE, "k": 2 * K}))
    assert answers[0]["release"] == first
    coarser = await client.post("/v1/datasets/cohort/table", json={**TABLE, "k": 2 * K},
                                headers=AUTH)
    assert answers[1]["release"] == coarser.json()

