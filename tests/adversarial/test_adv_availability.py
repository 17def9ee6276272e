"""Availability attacks on a real center process (header and body timeouts of 2 s and 40
concurrent connections here, to keep the test short; every bound on how long the center takes
is :func:`~tests.helpers.timing.scaled`): bodies sent before a token is checked,
heads and bodies that never finish, a flood of connections, numbers that overflow. The center
must answer at once where it can, drop what stalls, stay up for the coordinator, and never 500.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.center import AUTH, TOKEN, Center, center_process
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

HEAD_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
MAX_CONCURRENCY = 40


@pytest.fixture(scope="module")
def center(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    with center_process(tmp_path_factory.mktemp("avail"), {"cohort": 3.0},
                        header_timeout_s=HEAD_TIMEOUT_S, body_timeout_s=BODY_TIMEOUT_S,
                        max_concurrency=MAX_CONCURRENCY) as running:
        yield running


def connect(center: Center) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", center.port), timeout=10)
    return s


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def read_all(s: socket.socket, timeout: float) -> bytes:
    s.settimeout(timeout)
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except TimeoutError:  # the center sent nothing more for `timeout`: that is the answer
        return b"".join(chunks)
    return b"".join(chunks)


def test_the_token_is_checked_before_any_body_is_read(center: Center) -> None:
    """Attack: 150 unauthenticated POSTs declaring 900 kB bodies and sending 100 bytes (each body
    once cost the center its buffering, +134 MB in all). Each is answered at once (401, or 503
    past the concurrency cap) without waiting for the body, and the center's memory does not
    grow with them."""
    before = rss_kb(center.proc.pid)
    sockets = []
    started = time.monotonic()
    for _ in range(150):
        s = connect(center)
        s.sendall(b"POST /v1/datasets/cohort/mwu HTTP/1.1\r\nHost: c\r\n"
                  b"Authorization: Bearer not-the-token-0000000000\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n"
                  + b"x" * 100)
        sockets.append(s)
    answers = [read_all(s, scaled(5.0)) for s in sockets]
    elapsed = time.monotonic() - started
    for s in sockets:
        s.close()
    # 401, or 503 past the concurrency cap: either way at once, without reading the body.
    assert {a[:12] for a in answers} <= {b"HTTP/1.1 401", b"HTTP/1.1 503"}, answers[0][:200]
    assert elapsed < scaled(BODY_TIMEOUT_S * 10)  # answered, not timed out one by one
    assert rss_kb(center.proc.pid) - before < 30_000


def test_heads_that_never_finish_are_dropped_and_the_center_stays_up(center: Center) -> None:
    """Attack: 300 connections that send half a request head (or a byte now and then) and wait,
    which once held every slot of a center until they closed. The center closes each one
    HEAD_TIMEOUT_S after it opened, and answers the coordinator meanwhile or at once after."""
    stalled = []
    for i in range(300):
        try:
            s = connect(center)
        except OSError:  # the listen backlog is full: the attack is already refused
            continue
        s.sendall(b"GET /v1/info HTTP/1.1\r\nHost: c\r\n" if i % 2 else b"G")
        stalled.append(s)
    assert len(stalled) > 100

    def drip(s: socket.socket) -> None:  # a byte every 0.5 s: data do not reset the clock
        for _ in range(8):
            time.sleep(0.5)
            try:
                s.sendall(b"X")
            except OSError:
                return

    drips = [threading.Thread(target=drip, args=(s,)) for s in stalled[:5]]
    for t in drips:
        t.start()
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=30) as client:
        during = client.get("/v1/health")
        assert during.status_code in (200, 503)  # at once, never a hang
        time.sleep(HEAD_TIMEOUT_S)  # the earliest the center may drop them
        for t in drips:
            t.join()
        after = client.get("/v1/info")
        assert after.status_code == 200, after.text
    dropped = 0
    deadline = time.monotonic() + scaled(5.0)  # the center's own timer, on a busy machine
    for s in stalled:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            dropped += s.recv(1) == b""
        except ConnectionResetError:  # closed by the center, with a reset
            dropped += 1
        except TimeoutError:  # still open: not dropped, and the assertion below says so
            pass
        s.close()
    assert dropped == len(stalled)  # every stalled connection was closed by the center


def test_a_body_that_never_arrives_is_a_408(center: Center) -> None:
    """Attack (with a valid token): declare a body and stall. The center stops waiting after
    BODY_TIMEOUT_S and answers 408, spending nothing."""
    s = connect(center)
    s.sendall(b"POST /v1/datasets/cohort/dp/quantiles HTTP/1.1\r\nHost: c\r\n"
              + f"Authorization: Bearer {TOKEN}\r\n".encode()
              + b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"variable\"")
    started = time.monotonic()
    answer = read_all(s, BODY_TIMEOUT_S + scaled(5))
    s.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert BODY_TIMEOUT_S - 0.5 < time.monotonic() - started < BODY_TIMEOUT_S + scaled(4)
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=30) as client:
        assert client.get("/v1/budget/cohort").json()["spent_epsilon"] == 0.0


def test_a_flood_of_connections_is_turned_away_not_queued(center: Center) -> None:
    """Attack: many authenticated requests at once on a center limited to MAX_CONCURRENCY.
    Those past the limit are answered 503 at once; every answer is a 200 or a 503; the center
    serves normally afterwards."""
    results: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            r = httpx.get(f"{center.url}/v1/info", headers=AUTH, timeout=30)
            code = r.status_code
        except httpx.HTTPError:
            code = -1
        with lock:
            results.append(code)

    threads = [threading.Thread(target=one) for _ in range(120)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results) <= {200, 503, -1}, results
    assert results.count(200) > 0
    assert httpx.get(f"{center.url}/v1/info", headers=AUTH, timeout=30).status_code == 200


@pytest.mark.parametrize(("path", "body"), [
    ("dp/quantiles", {"variable": "x", "levels": [0.5], "epsilon": 0.5,
                      "bounds": [-1.7e308, 1.7e308]}),
    ("dp/quantiles", {"variable": "x", "levels": [0.5], "epsilon": 0.5, "bounds": [0, 1e30]}),
    ("dp/quantiles", {"variable": "x", "levels": [0.5], "epsilon": 1e-300, "bounds": [0, 1]}),
    ("dp/boxplot", {"variable": "x", "epsilon": 0.5, "bounds": [0, 100], "n_public": 10**400}),
    ("yj-moments", {"variable": "x", "epsilon": 1e-6, "bounds": [-1e15, 1e15], "lmbda": 10}),
    ("yj-moments", {"variable": "x", "epsilon": 0.5, "bounds": [-1e15, 0], "lmbda": -10}),
])
def test_numbers_that_overflow_are_a_422(center: Center, path: str,
                                         body: dict[str, object]) -> None:
    """Bounds whose width is not finite (or that lose every digit), ε that underflows, a public
    size or a noise scale beyond floating point: a 422 that says what to change, never a 500
    from an OverflowError inside a mechanism."""
    r = httpx.post(f"{center.url}/v1/datasets/cohort/{path}", json=body, headers=AUTH,
                   timeout=30)
    assert r.status_code == 422, r.text
    assert r.json()["error"] in ("validation_error", "invalid_request")
