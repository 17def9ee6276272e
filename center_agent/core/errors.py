"""Every error the center agent answers with, rendered once as ``{"error": ..., "detail": ...}``.

Hierarchy::

    CenterError                 500 internal_error (base: carries ``status_code`` and ``error``)
    ├── AuthenticationError     401 unauthenticated
    ├── NotFound                404 not_found
    │   ├── UnknownDataset      404 unknown_dataset
    │   ├── UnknownVariable     404 unknown_variable
    │   └── UnknownLevel        404 unknown_level
    ├── RequestTooLarge         413 request_too_large
    ├── DataSourceError         500 data_source_error (detail never names paths or SQL)
    └── PrivacyRefusal          403 privacy_refusal (the request is fine; releasing it is not)
        ├── BudgetExceeded      403 budget_exceeded (carries ``remaining_epsilon``)
        ├── ReleaseDisabled     403 release_disabled (a leaky release switched off)
        ├── CallCapExceeded     403 call_cap_exceeded (e.g. YJ moment calls per study)
        ├── KAnonymityRefusal   403 k_anonymity_refused (a count would fall in 1..K-1)
        └── DifferencingRefusal 409 differencing_refused

A :class:`PrivacyRefusal` is the center working as designed: the coordinator tells it apart from a
failure by its ``error`` code (and by the class in-process). Request validation errors are rendered
by ``center_agent.api.handlers`` as 422 ``validation_error`` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from shared.binning import KAnonymityError


class CenterError(Exception):
    """Base of all center errors: an HTTP status, a stable machine code and a human detail."""

    status_code: ClassVar[int] = 500
    error: ClassVar[str] = "internal_error"

    def __init__(
        self,
        detail: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = dict(extra or {})
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The JSON body sent to the client: ``error`` and ``detail`` first, then any extras."""
        return {"error": self.error, "detail": self.detail, **self.extra}


class AuthenticationError(CenterError):
    status_code = 401
    error = "unauthenticated"

    def __init__(self, detail: str = "a valid bearer token is required") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFound(CenterError):
    status_code = 404
    error = "not_found"


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


class RequestTooLarge(CenterError):
    status_code = 413
    error = "request_too_large"


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
    except CenterError:
        raise
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
