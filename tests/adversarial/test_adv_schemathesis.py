"""Schemathesis over both OpenAPI schemas, every check enabled, against real processes: a center
(``python -m center_agent``, dev mode) and a coordinator (``python -m coordinator``, dev mode)
registered with it. Positive and negative cases for every operation, half of them aimed at the
real dataset so the numbers reach the statistics; every answer is also searched for an exact
count in 1..K-1, and the center's budget is checked against its total afterwards."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from tests.helpers.attacks import small_counts
from tests.helpers.center import AUTH, center_process
from tests.helpers.coordinator import ANALYST_TOKEN, coordinator_config
from tests.helpers.fuzzing import aim_center, aim_study, operations
from tests.helpers.processes import running_coordinator
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

EXAMPLES = 20  # per operation and generation mode


# schemathesis is imported by the functions that use it, not when the suite is collected (it
# takes seconds, and a run that deselects these tests must not pay for them).


def every_check() -> list[Any]:
    import schemathesis.specs.openapi.checks  # noqa: F401  (registers the OpenAPI checks)
    from schemathesis.checks import CHECKS

    checks = CHECKS.get_all()
    assert len(checks) >= 10, [c.__name__ for c in checks]
    return checks


aim_coordinator = aim_study("x", ["a", "b"], ["alpha"])


def property_test(operation: Any, mode: Any, base_url: str, headers: dict[str, str],
                  aim: Callable[[Any], None], failures: list[str]) -> Callable[[], None]:
    """A Hypothesis test sending ``operation``'s generated cases (``mode``: a schemathesis
    ``GenerationMode``); check failures are collected (one line each), a 500 or a small count
    fails at once."""
    from schemathesis import GenerationMode
    from schemathesis.core.failures import FailureGroup

    checks = every_check()
    label = f"{operation.label} [{mode}]"

    @given(case=operation.as_strategy(generation_mode=mode), aimed=st.booleans())
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: Any, aimed: bool) -> None:
        if aimed and mode == GenerationMode.POSITIVE:
            aim(case)  # (aiming a negative case could repair what it violates)
        response = case.call(base_url=base_url, headers=headers, timeout=scaled(60))
        assert response.status_code < 500, (case.path, response.text)
        if response.status_code == 200 and response.content:
            assert small_counts(response.json()) == [], response.text
        try:
            case.validate_response(response, checks=checks, headers=headers)
        except FailureGroup as group:
            failures.extend(f"{label}: {type(e).__name__} on {response.status_code}"
                            for e in group.exceptions)


    return run


def fuzz(schema: Any, base_url: str, headers: dict[str, str],
         aim: Callable[[Any], None]) -> list[str]:
    """Every operation, positive then negative cases; returns the distinct check failures."""
    from schemathesis import GenerationMode

    failures: list[str] = []
    found = operations(schema)
    assert found
    for operation in found:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                property_test(operation, mode, base_url, headers, aim, failures)()
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE  # nothing to violate (e.g. /v1/health)
    return sorted(set(failures))


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    workdir = tmp_path_factory.mktemp("schemathesis")
    with center_process(workdir, {"cohort": 1e6}, dev_mode=True) as center:
        config, port = coordinator_config(workdir / "coordinator.toml", {"alpha": center.url},
                                          min_centers=1, dev_mode=True)
        with running_coordinator(config, port):
            yield center.url, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def center_findings(services: tuple[str, str]) -> list[str]:
    import schemathesis

    url, _ = services
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    findings = fuzz(schema, url, AUTH, aim_center)
    spent = httpx.get(f"{url}/v1/budget/cohort", headers=AUTH).json()
    assert spent["spent_epsilon"] <= spent["total_epsilon"]
    return findings


@pytest.fixture(scope="module")
def coordinator_findings(services: tuple[str, str]) -> list[str]:
    import schemathesis

    _, url = services
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return fuzz(schema, url, {"Authorization": f"Bearer {ANALYST_TOKEN}"}, aim_coordinator)


# What the schemas do not say, and nothing more: typed 4xx refusals the schema does not list
# (401, 403, 404, 409, 413), the services' {"error", "detail"} 422 body where FastAPI documents
# its own validation-error shape, 4xx for requests the JSON schema allows but the models'
# validators refuse (bounds out of order, unsorted levels, unknown names), and unknown query
# parameters ignored by a GET (schemathesis counts ``GET /v1/studies?=true`` as a violation).
DOCUMENTATION_GAP = re.compile(
    r": (UndefinedStatusCode on 4\d\d|JsonSchemaError on 422|RejectedPositiveData on 4\d\d)$"
    r"|^GET .*: AcceptedNegativeData on 200$")


def security_findings(findings: list[str]) -> list[str]:
    return [f for f in findings if not DOCUMENTATION_GAP.search(f)]


def test_center_schema_every_check(center_findings: list[str]) -> None:
    """Attack: schema-conforming and schema-violating requests to every center operation, every
    schemathesis check on. No 500, no small count, no ignored auth, no unsupported method or
    resource check failing: the only findings are the documentation gaps named above."""
    assert security_findings(center_findings) == []


def test_coordinator_schema_every_check(coordinator_findings: list[str]) -> None:
    """Attack: as for the center, on every coordinator operation (studies run for real against
    the center process)."""
    assert security_findings(coordinator_findings) == []


SCHEMA_GAP = ("the typed error answers (400-422, {error, detail}) are documented, but model "
              "validators refuse some schema-valid bodies (422: e.g. unordered levels, bounds "
              "with lower >= upper, which JSON Schema cannot express here) and unknown query "
              "parameters are ignored")


@pytest.mark.xfail(strict=True, reason=SCHEMA_GAP)
def test_center_schema_documents_every_answer(center_findings: list[str]) -> None:
    """The strict form: the center's schema describes every answer it gives."""
    assert center_findings == []


@pytest.mark.xfail(strict=True, reason=SCHEMA_GAP)
def test_coordinator_schema_documents_every_answer(coordinator_findings: list[str]) -> None:
    """The strict form: the coordinator's schema describes every answer it gives."""
    assert coordinator_findings == []
