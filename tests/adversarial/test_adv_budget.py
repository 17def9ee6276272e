"""Budget attacks on real center processes: averaging repeated DP answers, paying less by varying
parameters, overspending with concurrent requests, and replaying after a SIGKILL and restart.
Each ends checking the ledger's spend against what was answered: never over the total, never a
release unpaid."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.attacks import budget, small_counts
from tests.helpers.center import AUTH, Center, K, center_config, center_process
from tests.helpers.processes import running_center
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

TOTAL = 3.0
DATASETS = {"repeat": TOTAL, "vary": TOTAL, "race": TOTAL, "same": TOTAL, "mixed": TOTAL,
            "batched": TOTAL}


@pytest.fixture(scope="module")
def center(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    # Room for every concurrent attack at once (the concurrency cap has its own test).
    with center_process(tmp_path_factory.mktemp("budget"), DATASETS,
                        max_concurrency=400) as running:
        yield running


@pytest.fixture(scope="module")
def client(center: Center) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=60) as c:
        yield c


def quantiles(epsilon: float, upper: float = 100.0) -> dict[str, Any]:
    return {"variable": "x", "levels": [0.5], "epsilon": epsilon, "bounds": [0.0, upper]}


def test_identical_dp_requests_get_the_identical_answer_and_pay_once(
    client: httpx.Client,
) -> None:
    """Attack: average 20 answers to the same DP quantile request. Every answer must be the
    first one (nothing fresh to average) and ε is spent once."""
    answers = [client.post("/v1/datasets/repeat/dp/quantiles", json=quantiles(0.5))
               for _ in range(20)]
    assert {r.status_code for r in answers} == {200}
    assert all(r.json() == answers[0].json() for r in answers)
    assert budget(client, "repeat")["spent_epsilon"] == pytest.approx(0.5)


def test_slightly_varied_requests_each_pay_until_the_budget_is_spent(
    client: httpx.Client,
) -> None:
    """Attack: vary the upper bound by 1e-9 so each request is 'new' and cheap to average.
    Each pays ε = 0.5; after 6 the dataset's 3.0 is spent and the 7th is refused with 403
    and the remaining ε; spent never exceeds the total."""
    answers = [client.post("/v1/datasets/vary/dp/quantiles",
                           json=quantiles(0.5, 100.0 + i * 1e-9)) for i in range(8)]
    assert [r.status_code for r in answers] == [200] * 6 + [403] * 2
    refusal = answers[6].json()
    assert refusal["error"] == "budget_exceeded"
    assert refusal["remaining_epsilon"] == pytest.approx(0.0, abs=1e-9)
    assert budget(client, "vary") == pytest.approx(
        {"total_epsilon": TOTAL, "spent_epsilon": TOTAL, "remaining_epsilon": 0.0}, abs=1e-9)


async def post_all(url: str, path: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """Every body POSTed at once, each on its own connection; one answered 503 ``busy`` (the
    center's database past its wait on a loaded machine: nothing was done) is sent again, as
    the coordinator's client does, until each has its answer."""
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=0)
    answers: list[httpx.Response | None] = [None] * len(bodies)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120, limits=limits) as c:
        for _ in range(50):  # a hang guard only: each round ends when the center answers
            todo = [i for i, a in enumerate(answers) if a is None or _busy(a)]
            if not todo:
                break
            sent = await asyncio.gather(*(c.post(path, json=bodies[i]) for i in todo))
            for i, answer in zip(todo, sent, strict=True):
                answers[i] = answer
    assert all(a is not None and not _busy(a) for a in answers), "busy after 50 rounds"
    return [a for a in answers if a is not None]


def _busy(answer: httpx.Response) -> bool:
    return (answer.status_code == 503
            and answer.headers.get("content-type", "").startswith("application/json")
            and answer.json().get("error") == "busy")


def test_150_concurrent_distinct_requests_never_overspend(
    center: Center, client: httpx.Client
) -> None:
    """Attack: 150 distinct DP quantile requests of ε = 0.05 at once (7.5 in all against a
    total of 3.0), hoping the checks race. Exactly floor(3.0 / 0.05) = 60 may be answered, the
    rest refused with 403; the ledger's spend equals the answered releases' ε."""
    bodies = [quantiles(0.05, 100.0 + i) for i in range(150)]
    answers = asyncio.run(post_all(center.url, "/v1/datasets/race/dp/quantiles", bodies))
    codes = [r.status_code for r in answers]
    assert set(codes) <= {200, 403}, {r.status_code: r.text for r in answers}
    assert all(r.json()["error"] == "budget_exceeded" for r in answers if r.status_code == 403)
    assert codes.count(200) == 60
    spent = budget(client, "race")["spent_epsilon"]
    assert spent == pytest.approx(60 * 0.05) and spent <= TOTAL + 1e-9


def test_concurrent_batches_and_single_calls_never_overspend(
    center: Center, client: httpx.Client
) -> None:
    """Attack: the batch route (``/v1/datasets/{dataset}/releases``) and the single route at
    once: 8 concurrent batches of 15 DP quantile requests of ε = 0.05, the first 30 distinct
    requests asked by two batches each and also one by one, 90 distinct in all (4.5 against 3.0).
    Exactly 60 distinct ones may be answered; every copy of one request gets the same answer
    whichever route asked; the ledger's spend equals the answered requests' ε."""
    distinct = [quantiles(0.05, 200.0 + i) for i in range(90)]
    batches = [distinct[(i * 15) % 90:(i * 15) % 90 + 15] for i in range(8)]

    async def go() -> tuple[list[httpx.Response], list[httpx.Response]]:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=center.url, headers=AUTH, timeout=120,
                                     limits=limits) as c:
            batched = [c.post("/v1/datasets/batched/releases", json={"items": [
                {"kind": "dp_quantiles", "request": body} for body in items]})
                for items in batches]
            single = [c.post("/v1/datasets/batched/dp/quantiles", json=body)
                      for body in distinct[:30]]
            answers = await asyncio.gather(*batched, *single)
            return list(answers[:len(batched)]), list(answers[len(batched):])

    batched, single = asyncio.run(go())
    assert {r.status_code for r in batched} == {200}, [r.text for r in batched]
    answers: dict[float, set[str]] = {}
    for items, r in zip(batches, batched, strict=True):
        for body, item in zip(items, r.json()["answers"], strict=True):
            assert item["status"] in (200, 403), item
            if item["status"] == 403:
                assert item["error"]["error"] == "budget_exceeded"
            answers.setdefault(body["bounds"][1], set()).add(json.dumps(item, sort_keys=True))
    for body, r in zip(distinct[:30], single, strict=True):
        assert r.status_code in (200, 403), r.text
        as_item = ({"status": 200, "release": r.json(), "error": None} if r.status_code == 200
                   else {"status": 403, "release": None, "error": r.json()})
        answers[body["bounds"][1]].add(json.dumps(as_item, sort_keys=True))
    released = [upper for upper, seen in answers.items()
                if any('"status": 200' in copy for copy in seen)]
    # A request answered once is answered the same everywhere, never refused (refusals of one
    # request may differ in the remaining ε they state).
    assert all(len(answers[upper]) == 1 for upper in released)
    assert len(released) == 60
    spent = budget(client, "batched")["spent_epsilon"]
    assert spent == pytest.approx(60 * 0.05) and spent <= TOTAL + 1e-9


def test_concurrent_identical_requests_pay_once(center: Center, client: httpx.Client) -> None:
    """Attack: 100 copies of one DP boxplot request at once, hoping several compute (and pay)
    fresh noise before the first is stored. All answers are identical; ε is spent once."""
    body = {"variable": "x", "group": "a", "epsilon": 0.75, "bounds": [0.0, 100.0]}
    answers = asyncio.run(post_all(center.url, "/v1/datasets/same/dp/boxplot", [body] * 100))
    assert {r.status_code for r in answers} == {200}, answers[0].text
    assert len({r.text for r in answers}) == 1
    assert budget(client, "same")["spent_epsilon"] == pytest.approx(0.75)


def test_concurrent_mixed_releases_never_overspend(center: Center, client: httpx.Client) -> None:
    """Attack: 120 concurrent requests over every DP endpoint (quantiles, boxplot, extremes,
    tree histogram, threshold counts, noisy MWU) at ε = 0.1 each; spent stays <= the total and
    equals the ε of the answered ones; no exact count below K in any answer."""
    base = {"variable": "x", "bounds": [0.0, 100.0]}
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("dp/quantiles", {"levels": [0.5]}),
        ("dp/boxplot", {"group": "b"}),
        ("dp/extremes", {}),
        ("dp/tree-histogram", {"grid": [0.0, 100.0], "depth": 3, "branching": 2}),
        ("dp/threshold-counts", {"lower": 30.0, "upper": 70.0}),
    ]

    asked: list[float] = []  # the ε each request asks, in order

    async def go() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=120, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=center.url, headers=AUTH, timeout=120,
                                     limits=limits) as c:
            calls = []
            for i in range(120):
                asked.append(0.1 + i * 1e-6 if i % 6 == 5 else 0.1)
                if i % 6 == 5:
                    calls.append(c.post("/v1/datasets/mixed/mwu", json={
                        "variable": "x", "groups": ["a", "b"], "epsilon": 0.1 + i * 1e-6}))
                    continue
                path, extra = kinds[i % 6]
                body = {**base, **extra, "epsilon": 0.1, "bounds": [0.0, 100.0 + i]}
                calls.append(c.post(f"/v1/datasets/mixed/{path}", json=body))
            return list(await asyncio.gather(*calls))

    answers = asyncio.run(go())
    assert {r.status_code for r in answers} <= {200, 403}, [r.text for r in answers
                                                            if r.status_code not in (200, 403)]
    paid = 0.0
    for r, epsilon in zip(answers, asked, strict=True):
        if r.status_code == 200:
            assert small_counts(r.json()) == []
            assert r.json().get("epsilon", epsilon) == pytest.approx(epsilon)
            paid += epsilon
        else:
            assert r.json()["error"] == "budget_exceeded"
    spent = budget(client, "mixed")["spent_epsilon"]
    assert spent <= TOTAL + 1e-9
    assert spent == pytest.approx(paid, abs=1e-8)


def test_replay_after_sigkill_and_restart(tmp_path: Path) -> None:
    """Attack: get DP and table releases, SIGKILL the center, restart it on the same ledger, and
    ask again hoping for fresh noise, fresh random limits or a reset budget. Every answer is
    identical to before and the spend is unchanged; the refused request stays refused."""
    config, port = center_config(tmp_path, {"cohort": 2.0})  # at most 0.5 per request
    url = f"http://127.0.0.1:{port}"
    requests = [
        ("/v1/datasets/cohort/dp/quantiles", quantiles(0.5)),
        ("/v1/datasets/cohort/dp/boxplot",
         {"variable": "x", "epsilon": 0.5, "bounds": [0.0, 100.0]}),
        ("/v1/datasets/cohort/table", {"variable": "x", "groups": ["a", "b"], "k": K}),
        ("/v1/datasets/cohort/dp/quantiles", quantiles(0.5, 90.0)),
        ("/v1/datasets/cohort/dp/quantiles", quantiles(0.5, 80.0)),
        ("/v1/datasets/cohort/dp/quantiles", quantiles(0.25)),  # over budget
    ]
    with running_center(config, port) as proc, httpx.Client(base_url=url, headers=AUTH,
                                                             timeout=30) as c:
        before = [c.post(path, json=body) for path, body in requests]
        spent_before = budget(c, "cohort")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=scaled(10))
    assert [r.status_code for r in before] == [200, 200, 200, 200, 200, 403]
    assert before[-1].json()["error"] == "budget_exceeded"
    assert spent_before["spent_epsilon"] == pytest.approx(2.0)
    with running_center(config, port), httpx.Client(base_url=url, headers=AUTH,
                                                     timeout=30) as c:
        after = [c.post(path, json=body) for path, body in requests]
        assert budget(c, "cohort") == spent_before
    for b, a in zip(before, after, strict=True):
        assert (a.status_code, a.json()) == (b.status_code, b.json())
