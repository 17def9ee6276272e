"""Attacks on the HTTP surface of a real center process and a real coordinator process: token
guessing, missing and malformed tokens, wrong schemes, token prefixes, duplicate Authorization
headers; path traversal and encoded slashes in names; huge headers; oversized bodies with and
without Content-Length. Nothing may answer 2xx without a valid token, nothing may answer 500,
no answer may hold a file path, data or a token, and both services stay up."""

from __future__ import annotations

import http.client
import json
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.attacks import small_counts
from tests.helpers.center import TOKEN, Center, K, center_process
from tests.helpers.coordinator import ANALYST_TOKEN, coordinator_config
from tests.helpers.processes import running_coordinator
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process


@dataclass
class Services:
    center: Center
    coordinator_port: int
    workdir: Path


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    workdir = tmp_path_factory.mktemp("http")
    with center_process(workdir, {"cohort": 3.0}) as center:
        config, port = coordinator_config(workdir / "coordinator.toml", {"alpha": center.url},
                                          min_centers=1)
        with running_coordinator(config, port):
            yield Services(center, port, workdir)


# (service, port getter, token, a GET that needs the token, a POST that needs it)
def targets(s: Services) -> list[tuple[str, int, str, str, str]]:
    return [
        ("center", s.center.port, TOKEN, "/v1/info", "/v1/datasets/cohort/mwu"),
        ("coordinator", s.coordinator_port, ANALYST_TOKEN, "/v1/centers", "/v1/studies"),
    ]


def raw(port: int, method: str, path: str, headers: list[tuple[str, str]],
        body: bytes | None = None) -> tuple[int, bytes]:
    """One request sent as written (no path normalisation, repeated headers kept)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def assert_nothing_leaked(services: Services, status: int, body: bytes) -> None:
    assert status != 500 and status < 600, body
    text = body.decode(errors="replace")
    for secret in (TOKEN, ANALYST_TOKEN, str(services.workdir), "Traceback", "root:"):
        assert secret not in text


def assert_still_up(services: Services) -> None:
    for _, port, token, get, _ in targets(services):
        r = httpx.get(f"http://127.0.0.1:{port}{get}",
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 200, r.text


BAD_AUTHORIZATIONS = [
    None,                          # missing
    "",                            # empty
    "Bearer",                      # scheme without a token
    "Bearer ",                     # scheme and a space
    "Basic {token}",               # the right token, wrong scheme
    "Token {token}",
    "{token}",                     # no scheme at all
    "Bearer {prefix}",             # all but the last character
    "Bearer {token}x",             # one character more
    "Bearer {head}",               # the first 8 characters
    "Bearer {token} {token}",      # twice
    "Bearer\t{token}x",
    "Bearer " + "A" * 8000,        # a very long guess
    "Bearer {other}",              # the other service's token
]


@pytest.mark.parametrize("template", BAD_AUTHORIZATIONS)
def test_missing_malformed_and_wrong_tokens_get_401(services: Services,
                                                    template: str | None) -> None:
    """Attack: every bad credential form, on a GET and a POST of both services."""
    for name, port, token, get, post in targets(services):
        other = ANALYST_TOKEN if name == "center" else TOKEN
        headers = [] if template is None else [("Authorization", template.format(
            token=token, prefix=token[:-1], head=token[:8], other=other))]
        for method, path in (("GET", get), ("POST", post)):
            status, body = raw(services.center.port if name == "center" else port,
                               method, path, headers, b"{}" if method == "POST" else None)
            assert status == 401, (name, template, status, body)
            assert_nothing_leaked(services, status, body)


def test_guessing_tokens(services: Services) -> None:
    """Attack: 300 random tokens of the real tokens' length and alphabet, and every prefix of
    the real token; none is accepted (401 each)."""
    for _, port, token, get, _ in targets(services):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            guesses = [secrets.token_urlsafe(len(token))[: len(token)] for _ in range(150)]
            guesses += [token[:i] for i in range(1, len(token))]
            for guess in guesses:
                r = c.get(get, headers={"Authorization": f"Bearer {guess}"})
                assert r.status_code == 401, guess
                assert r.headers.get("www-authenticate", "").lower().startswith("bearer")
    assert_still_up(services)


@pytest.mark.parametrize("order", ["valid_first", "invalid_first", "both_invalid"])
def test_duplicate_authorization_headers(services: Services, order: str) -> None:
    """Attack: two Authorization headers (a proxy may check one, the service read the other).
    Two invalid ones are never accepted; with one valid the answer is 200 or 401 (which one the
    service reads), never 500 and never data without one valid token present."""
    for _, port, token, get, _ in targets(services):
        valid, invalid = f"Bearer {token}", f"Bearer {token[:-1]}"
        pair = {"valid_first": [valid, invalid], "invalid_first": [invalid, valid],
                "both_invalid": [invalid, invalid + "z"]}[order]
        status, body = raw(port, "GET", get, [("Authorization", v) for v in pair])
        assert_nothing_leaked(services, status, body)
        assert status in ((401,) if order == "both_invalid" else (200, 400, 401)), body


CENTER_PATHS = [
    "/v1/datasets/..%2F..%2F..%2Fetc%2Fpasswd/table",
    "/v1/datasets/%2e%2e/table",
    "/v1/datasets/../../etc/passwd",
    "/v1/datasets/cohort/../cohort/table",
    "/v1/datasets/cohort%2Ftable/table",
    "/v1/datasets/cohort%00/table",
    "/v1/datasets/cohort.csv/table",
    "/v1/datasets/%63ohort/table",          # 'c' percent-encoded: the real name, decoded
    "/v1/budget/..%2Fcohort",
    "/v1/budget/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/v1//budget",
    "/v1/datasets/cohort/table?dataset=../x",
    "/../../../../etc/passwd",
    "/v1/datasets/" + "a" * 5000 + "/table",
]


@pytest.mark.parametrize("path", CENTER_PATHS)
def test_path_tricks_on_the_center(services: Services, path: str) -> None:
    """Attack: traversal, encoded slashes, NUL and oversized names in the dataset segment.
    Each is a typed 4xx or, for the one that decodes to the real name, the normal answer (still
    K-anonymous); never a file, a path or a 500."""
    body = b'{"variable": "x", "groups": ["a", "b"], "k": 10}'
    auth = [("Authorization", f"Bearer {TOKEN}"), ("Content-Type", "application/json")]
    for method in ("GET", "POST"):
        status, answer = raw(services.center.port, method, path, auth,
                             body if method == "POST" else None)
        assert_nothing_leaked(services, status, answer)
        assert status in (200, 400, 404, 405, 414, 422), (path, status, answer)
        if status == 200:
            assert small_counts(json.loads(answer)) == []
    assert_still_up(services)


@pytest.mark.parametrize("variable", ["../x", "x/../y", "x%00", "x; DROP TABLE t", "notes",
                                      "arm", "X", "x ", "*"])
def test_undeclared_or_crafted_variable_names(services: Services, variable: str) -> None:
    """Attack: column names outside the declared ones (the free-text column 'notes', the group
    column itself, traversal, SQL, case and whitespace variants): 404 unknown_variable or 422."""
    with httpx.Client(base_url=services.center.url, timeout=30,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        for path, body in [
            ("/v1/datasets/cohort/table", {"variable": variable, "k": K}),
            ("/v1/datasets/cohort/mwu", {"variable": variable, "groups": ["a", "b"]}),
            ("/v1/datasets/cohort/dp/quantiles", {"variable": variable, "levels": [0.5],
                                                  "epsilon": 0.1, "bounds": [0, 1]}),
        ]:
            r = c.post(path, json=body)
            assert r.status_code in (404, 422), r.text
            assert_nothing_leaked(services, r.status_code, r.content)
        assert c.get("/v1/budget/cohort").json()["spent_epsilon"] == 0.0


@pytest.mark.parametrize("path", ["/v1/studies/..%2F..%2Fetc%2Fpasswd",
                                  "/v1/studies/../centers", "/v1/studies/%00",
                                  "/v1/studies/1' OR '1'='1", "/v1/studies/" + "9" * 5000,
                                  "/v1/studies/x/analyses/0/figure?format=../../x"])
def test_path_tricks_on_the_coordinator(services: Services, path: str) -> None:
    """Attack: traversal, SQL and oversized study ids: a typed 4xx, never a 500."""
    status, answer = raw(services.coordinator_port, "GET", path.replace(" ", "%20"),
                         [("Authorization", f"Bearer {ANALYST_TOKEN}")])
    assert_nothing_leaked(services, status, answer)
    assert status in (200, 400, 404, 405, 409, 414, 422), (path, status, answer)


@pytest.mark.parametrize("shape", ["one_huge", "many"])
def test_huge_headers(services: Services, shape: str) -> None:
    """Attack: a 200 KB header, or 2,000 headers, on both services: refused by the HTTP layer
    (4xx or the connection closed), never a 500, and both services keep answering."""
    headers = ([("X-Pad", "a" * 200_000)] if shape == "one_huge"
               else [(f"X-Pad-{i}", "a" * 50) for i in range(2000)])
    for _, port, token, get, _ in targets(services):
        try:
            status, body = raw(port, "GET", get,
                               [("Authorization", f"Bearer {token}"), *headers])
        except (ConnectionError, http.client.HTTPException):
            continue  # the server hung up: refused
        assert_nothing_leaked(services, status, body)
        assert status in (200, 400, 413, 431), (status, body)
    assert_still_up(services)


@pytest.mark.parametrize("declared", [True, False])
def test_oversized_bodies_get_413(services: Services, declared: bool) -> None:
    """Attack: a 2 MB body (over both services' limits), with a Content-Length and chunked
    without one: 413 request_too_large before any route runs; nothing is spent."""
    chunk = b"[" + b"0," * 1_000_000 + b"0]"
    hung_up: list[str] = []
    for name, port, token, _, post in targets(services):
        content = chunk if declared else iter([chunk[i:i + 65536]
                                               for i in range(0, len(chunk), 65536)])
        with httpx.Client(timeout=30) as c:
            try:
                r = c.post(f"http://127.0.0.1:{port}{post}", content=content, headers={
                    "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            except httpx.TransportError:
                hung_up.append(name)  # answered 413 and closed while we were still sending
                continue
        assert r.status_code == 413, (name, r.status_code, r.text)
        assert r.json()["error"] == "request_too_large"
    assert len(hung_up) < 2, "neither service's 413 could be read"
    with httpx.Client(timeout=30) as c:
        b = c.get(f"{services.center.url}/v1/budget/cohort",
                  headers={"Authorization": f"Bearer {TOKEN}"})
        assert b.json()["spent_epsilon"] == 0.0
    assert_still_up(services)


def test_a_lying_or_invalid_content_length(services: Services) -> None:
    """Attack: Content-Length not a number, negative, or huge with a tiny body: a 4xx or the
    connection closed; never a 500; the services keep answering."""
    for _, port, token, _, post in targets(services):
        for value in ("abc", "-1", "99999999999999999999", "1e3"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.putrequest("POST", post)
                conn.putheader("Authorization", f"Bearer {token}")
                conn.putheader("Content-Length", value)
                conn.endheaders(b"{}")
                response = conn.getresponse()
                status, body = response.status, response.read()
            except (ConnectionError, http.client.HTTPException, TimeoutError):
                continue
            finally:
                conn.close()
            assert_nothing_leaked(services, status, body)
            assert 400 <= status < 500, (value, status, body)
    assert_still_up(services)


def send_raw(port: int, request: bytes) -> tuple[int, str]:
    """``request``'s bytes as they are (no client would send them): the status and content type
    of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(30)) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    content_type = {k.lower(): v for k, v in fields.items()}.get("content-type", "")
    return int(head[0].split(" ")[1]), content_type


@pytest.mark.parametrize("target", [b"/v1/audit?since=\x01", b"/v1/audit?since=\xff",
                                    b"/v1/au dit", b"/v1/health?a=\x7f"])
def test_a_request_the_server_cannot_parse_gets_an_error_its_schema_declares(
        services: Services, target: bytes) -> None:
    """Attack: a request target with a control or non-ASCII byte (schemathesis's negative cases
    send them). The HTTP server answers 400 in plain text before the app sees it; the OpenAPI
    schema of each service declares that content type for a 400 of every operation, so a
    client generator or a fuzzer never meets an undeclared one."""
    for _, port, token, _, _ in targets(services):
        status, content_type = send_raw(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n"
                                        + f"Authorization: Bearer {token}\r\n".encode()
                                        + b"Connection: close\r\n\r\n")
        assert status == 400, (port, target, status)
        schema = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=scaled(30),
                           headers={"Authorization": f"Bearer {token}"}).json()
        media = content_type.split(";")[0].strip()
        for path, operations in schema["paths"].items():
            for method, operation in operations.items():
                for code in ("400", "503"):  # what the HTTP server itself may answer
                    declared = operation["responses"][code]["content"]
                    assert media in declared, (method, path, code, sorted(declared))
                for code, response in operation["responses"].items():
                    if code[0] in "45":
                        assert response.get("content"), (method, path, code)
    assert_still_up(services)
