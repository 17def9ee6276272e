"""Every error the center agent answers with, rendered once as ``{"error": ..., "detail": ...}``.

Hierarchy::

    ServiceError                500 internal_error (``fedstats_service``: status, code, detail)
    ├── AuthenticationError     401 unauthenticated      (``fedstats_service``)
    ├── RequestTooLarge         413 request_too_large    (``fedstats_service``)
    ├── NotFound                404 not_found            (``fedstats_service``)
    │   ├── UnknownDataset      404 unknown_dataset
    │   ├── UnknownVariable     404 unknown_variable
    │   └── UnknownLevel        404 unknown_level
    └── CenterError         (the center's own errors)
        ├── DataSourceError         500 data_source_error (detail never names paths or SQL)
        └── PrivacyRefusal          403 privacy_refusal (the request is fine; releasing it is not)
            ├── BudgetExceeded      403 budget_exceeded (carries ``remaining_epsilon``)
            ├── ReleaseDisabled     403 release_disabled (a leaky release switched off)
            ├── CallCapExceeded     403 call_cap_exceeded (e.g. YJ moment calls per study)
            ├── KAnonymityRefusal   403 k_anonymity_refused (a count would fall in 1..K-1)
            └── DifferencingRefusal 409 differencing_refused

A :class:`PrivacyRefusal` is the center working as designed: the coordinator tells it apart from a
failure by its ``error`` code (and by the class in-process). Request validation errors are rendered
by ``fedstats_service.handlers`` as 422 ``validation_error`` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fedstats_service.errors import AuthenticationError as AuthenticationError
from fedstats_service.errors import NotFound as NotFound
from fedstats_service.errors import RequestTooLarge as RequestTooLarge
from fedstats_service.errors import ServiceError as ServiceError
from shared.binning import KAnonymityError


class CenterError(ServiceError):
    """Base of the center's own errors (the common ones come from ``fedstats_service``)."""


class UnknownDataset(NotFound):
    error = "unknown_dataset"

    def __init__(self, dataset: str) -> None:
        super().__init__(f"no dataset named {dataset!r} is exposed by this center")


class UnknownVariable(NotFound):
    error = "unknown_variable"

    def __init__(self, dataset: str, variable: str) -> None:
        super().__init__(f"dataset {dataset!r} exposes no variable or group column {variable!r}")


class UnknownLevel(NotFound):
    error = "unknown_level"

    def __init__(self, dataset: str, level: str) -> None:
        super().__init__(f"dataset {dataset!r} declares no group level {level!r}")


class InvalidRequest(CenterError):
    """Well-formed JSON whose values the statistics cannot use (e.g. a natural limit that
    excludes data); the detail says what to change."""

    status_code = 422
    error = "invalid_request"


class DataSourceError(CenterError):
    """The data behind a dataset could not be read; details go to the log, never to the client."""

    error = "data_source_error"


class PrivacyRefusal(CenterError):
    """A well-formed request whose answer would break a privacy guard."""

    status_code = 403
    error = "privacy_refusal"


class BudgetExceeded(PrivacyRefusal):
    error = "budget_exceeded"

    def __init__(self, dataset: str, requested: float, remaining: float) -> None:
        super().__init__(
            f"dataset {dataset!r}: requested epsilon {requested:g} exceeds the remaining "
            f"budget {remaining:g}",
            extra={"remaining_epsilon": remaining},
        )
        self.remaining = remaining


class ReleaseDisabled(PrivacyRefusal):
    error = "release_disabled"


class CallCapExceeded(PrivacyRefusal):
    error = "call_cap_exceeded"


class KAnonymityRefusal(PrivacyRefusal):
    """The answer would hold a count in 1..K-1 (a group too small, or a K below the center's)."""

    error = "k_anonymity_refused"


class DifferencingRefusal(PrivacyRefusal):
    status_code = 409
    error = "differencing_refused"


@contextmanager
def core_errors() -> Iterator[None]:
    """Run shared-core code: its refusals and input errors become typed center errors."""
    try:
        yield
    except KAnonymityError as exc:
        raise KAnonymityRefusal(str(exc)) from None
    except ServiceError:
        raise
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
