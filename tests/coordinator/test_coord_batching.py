"""A study's concurrent releases to one center in one request (``coordinator.batching``, through
``HttpCenter.release``), against ``httpx.MockTransport``: calls made together share a request,
calls made while one is in flight go in the next, each caller gets its own answer or its own
failure naming the center, studies never share a request, and a center without the batch route
is asked one by one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from coordinator.batching import ReleaseBatcher
from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.core.errors import CenterFailure
from fedstats_service import context
from shared import kinds
from shared.protocol import MWURequest, WireModel
from tests.helpers.coordinator import CENTER_TOKENS, json_response

pytestmark = pytest.mark.anyio

BATCH = "/v1/datasets/cohort/releases"
MWU_ANSWER = {"statistic": 120.0, "variance": 900.0, "n_x": 20, "n_y": 20}
Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def mwu(i: int) -> MWURequest:
    return MWURequest(variable=f"v{i}", groups=("ctl", "trt"))


def answer_of(item: dict[str, Any]) -> dict[str, Any]:
    """A center's answer to one item: an MWU release, or a refusal for variable ``v13``."""
    if item["request"]["variable"] == "v13":
        return {"status": 403, "error": {"error": "budget_exceeded", "detail": "no ε left"}}
    return {"status": 200, "release": {**MWU_ANSWER,
                                       "statistic": float(item["request"]["variable"][1:])}}


class FakeCenter:
    """Answers the batch route (or, ``batch_route=False``, only the kinds' own routes) and
    records every request; ``hold`` keeps the first request open until released."""

    def __init__(self, *, batch_route: bool = True, hold: bool = False) -> None:
        self.batch_route = batch_route
        self.requests: list[httpx.Request] = []
        self.gate = asyncio.Event()
        if not hold:
            self.gate.set()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        await self.gate.wait()
        body = json.loads(request.content)
        if request.url.path == BATCH:
            if not self.batch_route:
                return json_response(404, {"error": "not_found", "detail": "Not Found"})
            return json_response(200, {"answers": [answer_of(i) for i in body["items"]]})
        one = answer_of({"request": body})
        return json_response(one["status"], one.get("release") or one["error"])

    def sizes(self) -> list[int]:
        return [len(json.loads(r.content)["items"]) if r.url.path == BATCH else 1
                for r in self.requests]


def center(handler: Handler, *, batching: bool = True) -> HttpCenter:
    return HttpCenter(
        "alpha", CenterConfig(url="http://alpha.test:8700/", token=CENTER_TOKENS["alpha"]),
        timeout=httpx.Timeout(2.0, connect=1.0), retry=RetryPolicy(attempts=1),
        transport=httpx.MockTransport(handler), batching=batching,
    )


async def ask(port: HttpCenter, *indices: int) -> list[Any]:
    return list(await asyncio.gather(
        *(port.release(kinds.MWU, "cohort", mwu(i)) for i in indices), return_exceptions=True))


async def test_calls_made_together_share_one_request_and_keep_their_own_answers() -> None:
    fake = FakeCenter()
    port = center(fake)
    answers = await ask(port, 1, 2, 3, 13, 5)
    assert fake.sizes() == [5]
    assert [a.statistic for a in answers if not isinstance(a, Exception)] == [1, 2, 3, 5]
    refused = answers[3]
    assert isinstance(refused, CenterFailure)
    assert (refused.center, refused.kind, refused.center_error) == (
        "alpha", "refused", "budget_exceeded")
    await port.aclose()


async def test_calls_made_while_one_is_in_flight_go_together_next() -> None:
    fake = FakeCenter(hold=True)
    port = center(fake)
    first = asyncio.ensure_future(ask(port, 1))
    while not fake.requests:
        await asyncio.sleep(0)
    later = asyncio.ensure_future(ask(port, 2, 3, 4))
    for _ in range(20):
        await asyncio.sleep(0)
    assert fake.sizes() == [1]  # the others wait for the request in flight
    fake.gate.set()
    assert [a.statistic for a in [*await first, *await later]] == [1, 2, 3, 4]
    assert fake.sizes() == [1, 3]
    assert port._batcher.sent == {1: 1, 3: 1}
    await port.aclose()


async def test_studies_never_share_a_request() -> None:
    fake = FakeCenter()
    port = center(fake)

    async def in_study(study: str, index: int) -> Any:
        with context.bound(study_id=study):
            return await port.release(kinds.MWU, "cohort", mwu(index))

    await asyncio.gather(in_study("s1", 1), in_study("s2", 2), in_study("s1", 3))
    by_study = sorted((r.headers.get(context.STUDY_HEADER), n)
                      for r, n in zip(fake.requests, fake.sizes(), strict=True))
    assert by_study == [("s1", 2), ("s2", 1)]
    await port.aclose()


async def test_a_center_without_the_batch_route_is_asked_one_by_one() -> None:
    fake = FakeCenter(batch_route=False)
    port = center(fake)
    answers = await ask(port, 1, 2, 13)
    assert [a.statistic for a in answers[:2]] == [1, 2]
    assert isinstance(answers[2], CenterFailure) and answers[2].kind == "refused"
    assert fake.sizes() == [3, 1, 1, 1] and not port.batching
    await ask(port, 4, 5)  # from then on, one by one at once
    assert fake.sizes()[4:] == [1, 1]
    await port.aclose()


async def test_a_failed_batch_fails_each_of_its_callers_naming_the_center() -> None:
    async def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("connection reset", request=request)

    port = center(down)
    answers = await ask(port, 1, 2)
    assert all(isinstance(a, CenterFailure) and a.center == "alpha" for a in answers)
    await port.aclose()


async def test_a_batch_answer_of_the_wrong_length_is_malformed() -> None:
    async def short(request: httpx.Request) -> httpx.Response:
        return json_response(200, {"answers": [answer_of({"request": {"variable": "v1"}})]})

    port = center(short)
    answers = await ask(port, 1, 2)
    assert all(isinstance(a, CenterFailure) and a.kind == "malformed" for a in answers)
    await port.aclose()


async def test_batches_stay_within_the_item_and_byte_limits() -> None:
    sent: list[int] = []

    async def one(kind: Any, dataset: str, request: WireModel) -> WireModel:
        sent.append(1)
        return request

    async def many(dataset: str, calls: list[Any]) -> None:
        sent.append(len(calls))
        for call in calls:
            call.answer.set_result(call.request)

    size = len(mwu(10).model_dump_json())
    batcher = ReleaseBatcher(one, many, max_items=4, max_item_bytes=10 * size,
                             max_batch_bytes=3 * size)
    big = MWURequest(variable="v" * (12 * size), groups=("ctl", "trt"))
    asked = [mwu(10 + i) for i in range(7)] + [big]
    got = await asyncio.gather(*(batcher.release(kinds.MWU, "cohort", r) for r in asked))
    assert got == asked
    assert sorted(sent) == [1, 1, 3, 3]  # the big one alone, at once; 7 in batches of <= 3
