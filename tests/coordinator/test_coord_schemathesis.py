"""Property-based API test: no request the coordinator's OpenAPI schema allows makes it answer 500.

Schemathesis generates bodies, paths and parameters for every operation (dev mode serves the
schema) and sends them with a valid analyst token through the ASGI app. Studies are accepted and
stored but not started (the runner's start is a no-op here): the point is the API surface.

Marked ``slow`` (48 s measured under load); schemathesis is imported by the tests that use
it, not when the suite is collected.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from coordinator.main import create_app
from coordinator.models import StudyResult, StudySpec
from coordinator.runner import StudyRunner
from coordinator.services import Services
from tests.helpers.coordinator import AUTH, Federations, settings_for, sqlite_url
from tests.helpers.fuzzing import aim_study, never_a_server_error, operations
from tests.helpers.timing import scaled

pytestmark = pytest.mark.slow

aim = aim_study("crp", ["ctl", "trt"], ["alpha", "beta"])


class NotStarting(StudyRunner):
    def _start(self, study_id: str, spec: StudySpec, previous: StudyResult | None = None,
               **_: Any) -> None:
        pass


@pytest.fixture
def schema(tmp_path: Path) -> Any:
    import schemathesis

    federation = Federations()
    base = Services.build(
        settings_for(sqlite_url(tmp_path), dev_mode=True), centers=federation(),
    )
    services = dataclasses.replace(
        base, runner=NotStarting(base.store, base.centers, min_centers=2)
    )
    app = create_app(services=services)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    services.store.close()
    federation.close()


def test_no_request_makes_a_server_error(schema: Any) -> None:
    found = operations(schema)
    assert len(found) >= 5
    never_a_server_error(found, AUTH, aim, max_examples=30)


def test_generated_studies_run_to_a_typed_end(tmp_path: Path) -> None:
    """Studies generated from the schema, run for real over in-process centers: each ends
    ``succeeded``, or ``partially_failed`` or ``failed`` with a typed error, never
    ``internal_error``."""
    federation = Federations()
    app = create_app(
        settings_for(sqlite_url(tmp_path), dev_mode=True, max_running_studies=1000),
        centers=federation(),
    )
    store = app.state.services.store
    import schemathesis

    operation = schemathesis.openapi.from_asgi("/openapi.json", app)["/v1/studies"]["POST"]
    ended: list[str] = []

    @given(case=operation.as_strategy())
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        aim(case)
        if isinstance(case.body, dict):
            case.body.pop("centers", None)
        response = case.call(headers=AUTH)
        if response.status_code == 409:
            # A generated Idempotency-Key reused with another spec, or a spec every center
            # would refuse (the submission's dry run: e.g. a K below the centers' own).
            assert response.json()["error"] in ("idempotency_conflict", "would_be_refused"), \
                response.text
            return
        if response.status_code == 200:  # a generated dry run: a plan, and no study
            assert (case.query or {}).get("dry_run") in (True, "true"), response.text
            assert "refusals" in response.json(), response.text
            return
        assert response.status_code in (202, 422), response.text
        if response.status_code != 202:
            return
        study_id = response.json()["id"]
        deadline = time.monotonic() + scaled(30)
        ends = ("succeeded", "partially_failed", "failed")
        while (record := store.get_study(study_id)).status not in ends:
            assert time.monotonic() < deadline, "the study did not end"
            time.sleep(0.01)
        error = json.loads(record.error) if record.error else {}
        assert error.get("error") != "internal_error", (case.body, error)
        ended.append(record.status)

    try:
        run()
    finally:
        store.close()
        federation.close()
    assert ended  # some generated studies were valid and ran
