"""The center's own errors, under the one base of both services (``fedstats_service.errors``,
which also holds the errors every service answers with: 401, 404, 413, 422 ``validation_error``)::

    ServiceError                500 internal_error
    ├── ReleaseFailed           500 internal_error (a fault in the core; logged, no detail)
    ├── DataSourceError         500 data_source_error (detail never names paths or SQL)
    ├── DataMovedDuringRelease  503 data_moved (the data changed while a release was computed)
    ├── InvalidRequest          422 invalid_request (values the statistics cannot use)
    ├── ComputeAllowanceExceeded 429 compute_allowance_exceeded (the token's work per period is
    │                            used up; ``Retry-After`` and ``retry_after_s`` say when to ask)
    ├── Forbidden               403 forbidden (a valid token of the wrong role)
    ├── NotFound                404 not_found
    │   ├── UnknownDataset      404 unknown_dataset
    │   ├── UnknownVariable     404 unknown_variable
    │   └── UnknownLevel        404 unknown_level
    └── PrivacyRefusal          403 privacy_refusal (the request is fine; releasing it is not)
        ├── BudgetExceeded      403 budget_exceeded (carries ``remaining_epsilon``)
        ├── EpsilonCapExceeded  403 epsilon_cap_exceeded (per request or per period)
        ├── ReleaseDisabled     403 release_disabled (a leaky release switched off)
        ├── CallCapExceeded     403 call_cap_exceeded (e.g. YJ moment calls)
        ├── KAnonymityRefusal   403 k_anonymity_refused (a K or a level too small)
        ├── DPModeRefusal       403 dp_mode_refuses_exact (an exact release in DP mode)
        ├── UntrustedTable      403 untrusted_table (limits no trusted center signed)
        ├── DisclosureStateFull 403 release_limit_reached (caps on stored releases)
        ├── DataChanged         409 data_changed (the data changed; the check failed)
        └── HistoryNotSafe      409 data_changed (earlier releases unsafe on forced data)

These codes are the center's vocabulary on the wire: the coordinator relays them as a failure's
``center_error`` and, where it refuses on a center's behalf from its ``/v1/info`` (the survey),
uses the same classes' codes. A :class:`PrivacyRefusal` is the center working as designed: the
coordinator tells it apart from a failure by its status (403/409) and code. **Every refusal and
every error text is built from the request's fields and public settings only** (never from the
data: a refusal that depended on the data would be an oracle).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from fedstats_service.errors import NotFound as NotFound
from fedstats_service.errors import ServiceError as ServiceError
from shared.wire import CenterErrorCode

log = logging.getLogger(__name__)


class UnknownDataset(NotFound):
    error = CenterErrorCode.UNKNOWN_DATASET

    def __init__(self, dataset: str) -> None:
        super().__init__(f"no dataset named {dataset!r} is exposed by this center")


class UnknownVariable(NotFound):
    error = CenterErrorCode.UNKNOWN_VARIABLE

    def __init__(self, dataset: str, variable: str) -> None:
        super().__init__(f"dataset {dataset!r} exposes no variable or group column {variable!r}")


class UnknownLevel(NotFound):
    error = CenterErrorCode.UNKNOWN_LEVEL

    def __init__(self, dataset: str, level: str) -> None:
        super().__init__(f"dataset {dataset!r} declares no group level {level!r}")


class InvalidRequest(ServiceError):
    """Well-formed JSON whose values the statistics cannot use (decided from the request
    alone); the detail says what to change."""

    status_code = 422
    error = CenterErrorCode.INVALID_REQUEST


class ComputeAllowanceExceeded(ServiceError):
    """The calling token has used the work this center computes for one token per period
    (records x releases computed: settings ``compute_allowance``, ``compute_period_s``).
    Decided from the token's own earlier calls and the datasets' public sizes only; nothing was
    spent or computed. ``Retry-After`` (and ``retry_after_s`` in the body, for an item of a
    batch) is the number of seconds until the period ends."""

    status_code = 429
    error = CenterErrorCode.COMPUTE_ALLOWANCE_EXCEEDED

    def __init__(self, allowance: int, period_s: float, retry_after_s: int) -> None:
        super().__init__(
            f"this token has used the work this center computes per token in {period_s:g} s "
            f"({allowance} records x releases; settings compute_allowance, compute_period_s); "
            f"ask again in {retry_after_s} s (answers already given are served meanwhile)",
            extra={"retry_after_s": retry_after_s, "compute_allowance": allowance},
            headers={"Retry-After": str(retry_after_s)},
        )
        self.retry_after_s = retry_after_s


class Forbidden(ServiceError):
    """A valid token whose role may not use this route (an operator's token on a release route,
    the coordinator's on the audit trail); the detail says which token it takes."""

    status_code = 403
    error = CenterErrorCode.FORBIDDEN


class DataSourceError(ServiceError):
    """The data behind a dataset could not be read; details go to the log, never to the client.

    A 503: the caller asked nothing wrong, and the dataset answers again once its operator
    fixed the source (the start-up checks catch what is broken when the center starts)."""

    status_code = 503
    error = CenterErrorCode.DATA_SOURCE_ERROR


class DataMovedDuringRelease(ServiceError):
    """The dataset started a new epoch (its data changed) while an exact release was computed
    from the old data, outside the dataset's lock: it is not admitted against releases of data
    it was not computed from. Nothing was released or spent; asking again answers from the new
    data."""

    status_code = 503
    error = CenterErrorCode.DATA_MOVED

    def __init__(self, dataset: str) -> None:
        super().__init__(
            f"dataset {dataset!r}: the data changed while this release was computed; ask again",
            headers={"Retry-After": "1"},
        )


class PrivacyRefusal(ServiceError):
    """A well-formed request whose answer would break a privacy guard."""

    status_code = 403
    error = CenterErrorCode.PRIVACY_REFUSAL


class BudgetExceeded(PrivacyRefusal):
    error = CenterErrorCode.BUDGET_EXCEEDED

    def __init__(self, dataset: str, requested: float, remaining: float) -> None:
        super().__init__(
            f"dataset {dataset!r}: requested epsilon {requested:g} exceeds the remaining "
            f"budget {remaining:g}",
            extra={"remaining_epsilon": remaining},
        )
        self.remaining = remaining


class ReleaseDisabled(PrivacyRefusal):
    error = CenterErrorCode.RELEASE_DISABLED


class CallCapExceeded(PrivacyRefusal):
    error = CenterErrorCode.CALL_CAP_EXCEEDED


class KAnonymityRefusal(PrivacyRefusal):
    """A K below the center's, or a level whose public size is below K."""

    error = CenterErrorCode.K_ANONYMITY_REFUSED


class DPModeRefusal(PrivacyRefusal):
    """An exact release (or one that would show an exact size) of a dataset in DP mode
    (``release_mode = "dp"``): refused from the kind, the request and the configuration only,
    naming the differentially private alternative."""

    error = CenterErrorCode.DP_MODE_REFUSES_EXACT

    def __init__(self, dataset: str, kind: str, alternative: str) -> None:
        super().__init__(
            f"dataset {dataset!r} is released in DP mode (every release differentially "
            f"private): {kind} is an exact release and is refused; {alternative}"
        )


class EpsilonCapExceeded(PrivacyRefusal):
    """A request above the dataset's per-request ε, or past its ε per period."""

    error = CenterErrorCode.EPSILON_CAP_EXCEEDED


class UntrustedTable(PrivacyRefusal):
    """A refinement of limits that no trusted center signed for this question."""

    error = CenterErrorCode.UNTRUSTED_TABLE


class DisclosureStateFull(PrivacyRefusal):
    """The caps on what the center remembers of a variable's releases are reached."""

    error = CenterErrorCode.RELEASE_LIMIT_REACHED


class DataChanged(PrivacyRefusal):
    """The data changed since the epoch began and the version check failed (operator: roll)."""

    status_code = 409
    error = CenterErrorCode.DATA_CHANGED

    def __init__(self, dataset: str, epoch: int) -> None:
        super().__init__(
            f"dataset {dataset!r} changed since its epoch {epoch} began, and answers from the "
            "new data could be subtracted from earlier ones; releases are paused until the "
            "data pass the center's version check or its operator starts a new epoch "
            "(fedstats center epoch; operators: docs/deploy.md, \"I corrected a value: what "
            "now?\")",
            extra={"epoch": epoch},
        )


class HistoryNotSafe(PrivacyRefusal):
    """Earlier releases are not K-anonymous on the current data (only after a forced epoch)."""

    status_code = 409
    error = CenterErrorCode.DATA_CHANGED

    def __init__(self, dataset: str, variable: str | None = None) -> None:
        which = "this variable" if variable is None else f"{variable!r}"
        super().__init__(
            f"dataset {dataset!r}: a new epoch was forced over data on which earlier releases "
            f"of {which} are not K-anonymous; no exact release of it is possible until the "
            "data change so that they are, or the center's operator starts a new version of "
            "it (operators: fedstats center epoch names the variable and the command; "
            "docs/deploy.md, \"I corrected a value: what now?\")",
            extra={} if variable is None else {"variable": variable},
        )


@contextmanager
def core_errors() -> Iterator[None]:
    """Run shared-core code on data behind the gate. The gate validated the request from its
    fields; a core error here is a fault, never something to tell the caller about (its text
    could hold data): it is logged and answered with a bare 500."""
    try:
        yield
    except ServiceError:
        raise
    except Exception:
        log.exception("a release failed in the core")
        raise ReleaseFailed("the release could not be computed") from None


class ReleaseFailed(ServiceError):
    """A fault while computing a release (logged with its trace; the detail holds no data)."""

    error = CenterErrorCode.INTERNAL_ERROR
