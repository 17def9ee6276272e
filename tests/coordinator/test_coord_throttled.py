"""A center's compute allowance for the coordinator's token (429 ``compute_allowance_exceeded``)
over in-process centers: the study does not crash; the analyses that needed the center fail
naming it as ``throttled`` with the center's words, and the study is resumable."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from coordinator.models import FailedAnalysis, StudySpec
from coordinator.runner import outcome, resumable
from coordinator.study import run_study
from tests.helpers.coordinator import Federations, K

pytestmark = pytest.mark.anyio


async def test_a_throttled_center_fails_the_study_resumably(federation: Federations) -> None:
    spec = StudySpec.model_validate({
        "dataset": "cohort", "variable": "crp", "k": K, "groups": ["ctl", "trt"],
        "analyses": [{"kind": "dp_boxplot", "group": "trt", "epsilon": 0.25,
                      "bounds": [0.0, 100.0]}]})
    # An allowance below one release of any center's dataset: every computation is refused.
    ports = federation.ports(compute_allowance=1)
    result = await run_study(spec, ports, min_centers=2)
    failed = result.analyses[0]
    assert isinstance(failed, FailedAnalysis), failed
    error = failed.error.model_dump()
    assert error["error"] == "center_failure" and error["kind"] == "throttled", error
    assert error["center_error"] == "compute_allowance_exceeded"
    assert "ask again in" in error["detail"]
    status, _result, stored_error = outcome(result)
    assert status == "failed" and stored_error is not None
    assert resumable(SimpleNamespace(status=status, error=stored_error))  # type: ignore[arg-type]
    assert json.loads(stored_error)["kind"] == "throttled"
