"""The coordinator's own errors, under the one base of both services (``fedstats_service.errors``,
which also holds the errors every service answers with: 401, 404, 413, 422 ``validation_error``)::

    ServiceError                500 internal_error
    ├── NotFound                404 not_found
    │   ├── StudyNotFound       404 study_not_found (also another analyst's study: not 403,
    │   │                            which would confirm that it exists)
    │   └── AnalystNotFound     404 analyst_not_found
    ├── Forbidden               403 forbidden (an admin's action, sharing a study one does not own)
    │   └── QuotaExceeded       403 quota_exceeded (names center, dataset, quota, spent, asked)
    ├── Conflict                409 conflict (e.g. resuming a study that did not fail resumably)
    │   └── IdempotencyConflict 409 idempotency_conflict (an Idempotency-Key reused with another
    │                                spec; names the study it made)
    ├── InvalidStudy            422 invalid_study (a spec that validates but cannot run here)
    │   └── UnknownName         422 unknown_name (a name the selected centers do not declare)
    ├── AnalysisFailed          422 analysis_failed (the released numbers admit no answer, e.g.
    │                                a pooled DP histogram that is empty after its noise)
    ├── CenterFailure           502 center_failure (names ``center`` and ``kind``)
    ├── TooFewCenters           503 too_few_centers (fewer than ``min_centers`` answered)
    └── Busy                    503 busy (``max_running_studies`` studies are running)

A :class:`CenterFailure` has one ``kind`` of :data:`FailureKind`:

* ``unreachable`` — no connection could be made (after the retries a call allows);
* ``timeout`` — connected, but no answer within the read timeout;
* ``refused`` — the center answered a privacy refusal (403/409 with its ``ErrorBody``): the
  center working as designed; its code is kept in ``center_error`` (``budget_exceeded``, ...);
* ``error`` — any other error answer (401 for our token, 404 unknown dataset/variable, 422, 5xx);
  the center's own code is kept in ``center_error`` when it sent one;
* ``throttled`` — the center answered 429: the coordinator's token used the work the center
  computes per period (``compute_allowance_exceeded``, its code kept in ``center_error``); the
  detail says when to ask again (``Retry-After``). Resumable: the study runs again once the
  period ends, paying nothing twice;
* ``malformed`` — a success answer that is not the wire model it should be;
* ``implausible`` — a well-formed answer whose numbers cannot be right (a count in 1..K-1,
  totals larger than the center's size, a refinement that does not fit the table).

Details relay what the center said (truncated), never the coordinator's tokens.
"""

from __future__ import annotations

from typing import Literal

from fedstats_service.errors import NotFound as NotFound
from fedstats_service.errors import ServiceError as ServiceError

FailureKind = Literal["unreachable", "timeout", "refused", "throttled", "error", "malformed",
                      "implausible"]
MAX_RELAYED_DETAIL = 500


class StudyNotFound(NotFound):
    error = "study_not_found"

    def __init__(self, study_id: str) -> None:
        super().__init__(f"no study with id {study_id!r}")


class AnalystNotFound(NotFound):
    error = "analyst_not_found"

    def __init__(self, analyst_id: str) -> None:
        super().__init__(f"no analyst with id {analyst_id!r}")


class Forbidden(ServiceError):
    status_code = 403
    error = "forbidden"


class QuotaExceeded(Forbidden):
    """The analyst's ε quota at (center, dataset) does not hold what a study asks; nothing was
    asked of that center (``coordinator.quotas``)."""

    error = "quota_exceeded"

    def __init__(self, center: str, dataset: str, *, quota: float, spent: float,
                 asked: float) -> None:
        super().__init__(
            f"your ε quota at center {center!r}, dataset {dataset!r} is {quota:g}, of which "
            f"{spent:g} is spent; this asks {asked:g} more (the coordinator's operator sets "
            "quotas)",
            extra={"center": center, "dataset": dataset, "quota": quota, "spent": spent,
                   "asked": asked},
        )


class Conflict(ServiceError):
    status_code = 409
    error = "conflict"


class IdempotencyConflict(Conflict):
    """The analyst sent this ``Idempotency-Key`` before with another spec; nothing was created
    (docs/coordinator.md, "Idempotent submission")."""

    error = "idempotency_conflict"

    def __init__(self, study_id: str) -> None:
        super().__init__(
            f"this Idempotency-Key already created study {study_id!r} with a different spec; "
            "send the same spec to get that study back, or use a new key for a new study",
            extra={"study_id": study_id},
        )


class InvalidStudy(ServiceError):
    status_code = 422
    error = "invalid_study"


class UnknownName(InvalidStudy):
    """A spec names a dataset, variable or group level that selected centers do not declare
    (``coordinator.catalog.check_names``); ``unknown`` lists each name and the centers lacking
    it. Nothing was asked of any center but its info."""

    error = "unknown_name"


class WouldBeRefused(ServiceError):
    """A spec that selected centers would refuse every release of, known from their info at
    submission (``coordinator.plan.check_info``): nothing was created, asked or spent.
    ``refusals`` lists each center, reason and detail; ``allow_partial`` runs the rest."""

    status_code = 409
    error = "would_be_refused"


class AnalysisFailed(ServiceError):
    """Every center answered, but the numbers admit no result (the detail says why)."""

    status_code = 422
    error = "analysis_failed"


class CenterFailure(ServiceError):
    """One center did not give a usable answer; ``center`` and ``kind`` say who and how."""

    status_code = 502
    error = "center_failure"

    def __init__(
        self,
        center: str,
        kind: FailureKind,
        detail: str,
        *,
        center_error: str | None = None,
    ) -> None:
        detail = detail[:MAX_RELAYED_DETAIL]
        super().__init__(
            f"center {center!r} ({kind}): {detail}",
            extra={"center": center, "kind": kind, "center_error": center_error},
        )
        self.center = center
        self.kind: FailureKind = kind
        self.center_error = center_error
        self.reason = detail


class Busy(ServiceError):
    status_code = 503
    error = "busy"

    def __init__(self, running: int) -> None:
        super().__init__(f"{running} studies are running, the most this coordinator runs at "
                         "once; try again later", headers={"Retry-After": "30"})


class TooFewCenters(ServiceError):
    """Fewer centers than ``min_centers`` gave usable answers; ``failures`` says why."""

    status_code = 503
    error = "too_few_centers"

    def __init__(self, needed: int, usable: list[str], failures: list[CenterFailure]) -> None:
        reasons = "; ".join(f.detail for f in failures) or "no center was selected"
        super().__init__(
            f"{len(usable)} usable center(s), the study needs {needed}: {reasons}",
            extra={
                "usable": usable,
                "failures": [f.body() for f in failures],
            },
        )
        self.failures = failures
