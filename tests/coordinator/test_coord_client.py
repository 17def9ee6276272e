"""The HTTP client against ``httpx.MockTransport``: validated answers, retries only where safe,
and every failure typed with the center's id and its kind, never holding the token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.core.errors import CenterFailure
from shared import kinds
from shared.protocol import MWURequest, TableRequest
from tests.helpers.coordinator import CENTER_TOKENS, center_info_json, json_response

pytestmark = pytest.mark.anyio

TOKEN = CENTER_TOKENS["alpha"]
TABLE = {"limits": ["-Infinity", 1.5, "Infinity"], "counts": [[10, 20], [0, 30]], "k": 10}
REQ = TableRequest(variable="crp", groups=("ctl", "trt"), k=10)


class Recorder:
    """A MockTransport handler answering from a list of responses or exceptions, in order."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        return answer


def center(handler: Recorder, attempts: int = 3, max_bytes: int = 50_000_000) -> HttpCenter:
    sleeps: list[float] = []

    async def no_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    port = HttpCenter(
        "alpha",
        CenterConfig(url="http://alpha.test:8700/", token=TOKEN),
        timeout=httpx.Timeout(2.0, connect=1.0),
        retry=RetryPolicy(attempts=attempts, backoff_initial_s=0.5, backoff_max_s=1.0),
        max_response_bytes=max_bytes,
        transport=httpx.MockTransport(handler),
        sleep=no_sleep,
    )
    port.sleeps = sleeps  # type: ignore[attr-defined]
    return port


def assert_clean(failure: CenterFailure) -> None:
    """The failure names the center and never carries the coordinator's token."""
    assert failure.center == "alpha"
    assert TOKEN not in str(failure.body()) and TOKEN not in failure.detail


async def test_answers_are_validated_into_wire_models() -> None:
    handler = Recorder(json_response(200, TABLE))
    port = center(handler)
    release = await port.release(kinds.TABLE, "cohort", REQ)
    assert release.counts == [[10, 20], [0, 30]] and release.limits[0] == float("-inf")
    sent = handler.requests[0]
    assert sent.url == "http://alpha.test:8700/v1/datasets/cohort/table"
    assert sent.headers["Authorization"] == f"Bearer {TOKEN}"
    assert sent.read() == REQ.model_dump_json().encode()
    handler.answers = [json_response(200, center_info_json("alpha"))]
    assert (await port.info()).datasets[0].n_by_group == {"ctl": 100, "trt": 100}
    handler.answers = [json_response(200, {"statistic": 3.0, "variance": 9.0, "n_x": 20,
                                           "n_y": 30})]
    mwu = await port.release(kinds.MWU, "cohort",
                             MWURequest(variable="crp", groups=("ctl", "trt")))
    assert mwu.noise_variance == 0.0
    await port.aclose()


async def test_get_retries_with_backoff_then_succeeds() -> None:
    handler = Recorder(httpx.ConnectError("refused"), json_response(503, {}),
                       json_response(200, {"status": "ok"}))
    port = center(handler)
    assert (await port.health()).status == "ok"
    assert len(handler.requests) == 3
    assert port.sleeps == [0.5, 1.0]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "unreachable"),
        (httpx.ConnectTimeout("timed out"), "unreachable"),
        (httpx.ReadTimeout("timed out"), "timeout"),
        (httpx.RemoteProtocolError("peer closed"), "unreachable"),
    ],
)
async def test_transport_failures_of_a_get(answer: Exception, kind: str) -> None:
    handler = Recorder(answer)
    port = center(handler)
    with pytest.raises(CenterFailure) as caught:
        await port.info()
    assert caught.value.kind == kind
    assert len(handler.requests) == 3  # GETs are retried on every transport failure
    assert_clean(caught.value)


@pytest.mark.parametrize(
    "dropped",
    [
        httpx.ConnectError("refused"),  # never sent
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ReadError(""),  # a reused keep-alive connection the center had just closed
    ],
)
async def test_a_post_is_retried_when_its_connection_failed(dropped: Exception) -> None:
    handler = Recorder(dropped, json_response(200, TABLE))
    port = center(handler)
    assert (await port.release(kinds.TABLE, "cohort", REQ)).k == 10
    assert len(handler.requests) == 2


async def test_a_post_is_not_retried_when_slow_or_answered() -> None:
    slow = Recorder(httpx.ReadTimeout("timed out"))
    port = center(slow)
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    assert caught.value.kind == "timeout" and len(slow.requests) == 1
    busy = Recorder(json_response(503, {"error": "busy", "detail": "later"}))
    port = center(busy)
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    assert caught.value.kind == "error" and len(busy.requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        (403, {"error": "budget_exceeded", "detail": "requested 1 > 0.5",
               "remaining_epsilon": 0.5}, "refused", "budget_exceeded"),
        (409, {"error": "data_changed", "detail": "the data changed; releases wait for the "
                                                 "operator's new epoch"}, "refused",
         "data_changed"),
        (403, {"error": "untrusted_table", "detail": "the table to refine is not signed by a "
                                                    "center this one trusts"}, "refused",
         "untrusted_table"),
        (403, {"error": "epsilon_cap_exceeded", "detail": "one request may spend at most 0.75"},
         "refused", "epsilon_cap_exceeded"),
        (404, {"error": "unknown_variable", "detail": "no variable 'x'"}, "error",
         "unknown_variable"),
        (422, {"error": "validation_error", "detail": "body.k: too small"}, "error",
         "validation_error"),
        (500, {"error": "internal_error", "detail": "the center could not answer"}, "error",
         "internal_error"),
        (500, "<html>Bad gateway</html>", "error", None),
        (403, "not json", "error", None),
        (401, {"error": "unauthenticated", "detail": "the bearer token is not valid"}, "error",
         "unauthenticated"),
    ],
)
async def test_error_answers(status: int, body: Any, kind: str, code: str | None) -> None:
    port = center(Recorder(json_response(status, body)))
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    failure = caught.value
    assert (failure.kind, failure.center_error) == (kind, code)
    assert f"HTTP {status}" in failure.detail or failure.kind == "refused" or status == 401
    if isinstance(body, dict) and kind == "refused":
        assert body["detail"] in failure.detail  # the center's reason is relayed
    assert_clean(failure)


@pytest.mark.parametrize(
    "body",
    [
        b"not json at all",
        b'{"limits": [1, 0], "counts": [[10]], "k": 10}',  # decreasing limits
        b'{"limits": [0, 1], "counts": [[-10]], "k": 10}',  # negative count
        b'{"limits": [0, 1], "counts": [[10]], "k": 10, "smuggled": 1}',  # unknown field
        b"[]",
    ],
)
async def test_malformed_answers(body: bytes) -> None:
    port = center(Recorder(httpx.Response(200, content=body)))
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    assert caught.value.kind == "malformed"
    assert "BinTableRelease" in caught.value.detail
    assert_clean(caught.value)


async def test_an_info_without_the_fields_we_rely_on_is_malformed() -> None:
    port = center(Recorder(json_response(200, {"center_id": "alpha"})))
    with pytest.raises(CenterFailure) as caught:
        await port.info()
    assert caught.value.kind == "malformed" and "CenterInfo" in caught.value.detail


async def test_an_oversized_answer_is_not_read() -> None:
    big = json_response(200, {**TABLE, "limits": [float(i) for i in range(5000)],
                              "counts": [[10.0] * 4999]})
    port = center(Recorder(big), max_bytes=10_000)
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    assert caught.value.kind == "malformed" and "exceeds 10000 bytes" in caught.value.detail

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b"1," * 200

    def chunked(request: httpx.Request) -> httpx.Response:
        # No Content-Length: the limit holds while streaming.
        return httpx.Response(200, content=chunks())

    port = center(Recorder(httpx.Response(200)), max_bytes=10_000)
    port._client._transport = httpx.MockTransport(chunked)
    with pytest.raises(CenterFailure, match="exceeds 10000 bytes"):
        await port.release(kinds.TABLE, "cohort", REQ)


THROTTLED = {"error": "compute_allowance_exceeded",
             "detail": "this token has used the work this center computes per token in 3600 s "
                       "(...); ask again in 120 s", "retry_after_s": 120}


async def test_a_429_is_a_named_resumable_failure() -> None:
    """A center's compute allowance for our token (429 with Retry-After): ``throttled``, the
    center's code and its words kept, alone or as an item of a batch; a study failed by it is
    resumable (it may pass once the center's period ends)."""
    import json
    from types import SimpleNamespace

    from coordinator.core.errors import CenterFailure as Failure
    from coordinator.runner import resumable

    port = center(Recorder(json_response(429, THROTTLED)))
    port.batching = False
    with pytest.raises(CenterFailure) as caught:
        await port.release(kinds.TABLE, "cohort", REQ)
    failure = caught.value
    assert (failure.kind, failure.center_error) == ("throttled", "compute_allowance_exceeded")
    assert "ask again in 120 s" in failure.detail
    assert len(port._client._transport.handler.requests) == 1  # type: ignore[attr-defined]
    assert_clean(failure)

    # Two calls at once travel as one batch; its second item is throttled.
    batched = center(Recorder(json_response(200, {"answers": [
        {"status": 200, "release": TABLE}, {"status": 429, "error": THROTTLED}]})))
    other = REQ.model_copy(update={"k": 20})
    first, second = await asyncio.gather(batched.release(kinds.TABLE, "cohort", REQ),
                                         batched.release(kinds.TABLE, "cohort", other),
                                         return_exceptions=True)
    assert not isinstance(first, BaseException)
    assert isinstance(second, CenterFailure)
    assert (second.kind, second.center_error) == ("throttled", "compute_allowance_exceeded")

    from coordinator.quotas import refund_after

    assert refund_after(failure)  # the center spent nothing: the analyst's quota is given back
    record = SimpleNamespace(status="failed", error=json.dumps(
        Failure("alpha", "throttled", "ask again in 120 s").body()))
    assert resumable(record)  # type: ignore[arg-type]
