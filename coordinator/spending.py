"""What a study's release costs an analyst's quota, release by release (the half of
:mod:`coordinator.quotas` that ``coordinator.recording`` calls before each request): kept apart
so the recording centers need neither the spec's accounting nor the analyses behind it.
"""

from __future__ import annotations

from pydantic import BaseModel

from coordinator.core.errors import CenterFailure, QuotaExceeded
from coordinator.db import EPSILON_TOLERANCE, QuotaRecord, Store

# A failure after which the center has spent nothing: it said no (a refusal, or a 429 of its
# compute allowance), or it was never reached. (A center's 500 keeps what the release paid, and
# computes the same question under it when asked again: the analyst's reservation is made again
# by the study that asks it, so giving it back here does not count it twice.)
NOTHING_SPENT = frozenset({"refused", "throttled", "error", "unreachable"})


def request_epsilon(request: BaseModel | None) -> float:
    """The ε a release request asks the center to spend (0 for a K-anonymous release)."""
    value = getattr(request, "epsilon", None)
    return float(value) if value is not None else 0.0


def fits(quota: QuotaRecord, asked: float) -> bool:
    """Whether ``asked`` more ε fits the quota (no quota: always)."""
    return quota.epsilon is None or quota.spent + asked <= quota.epsilon + EPSILON_TOLERANCE


def reserve(store: Store, analyst_id: str, center: str, dataset: str, epsilon: float) -> None:
    """Count ``epsilon`` as spent by the analyst at (center, dataset), or refuse (403
    ``quota_exceeded``) without counting anything."""
    refused = store.reserve(analyst_id, center, dataset, epsilon)
    if refused is not None:
        raise exceeded(refused, epsilon)


def exceeded(refused: QuotaRecord, asked: float) -> QuotaExceeded:
    """The 403 ``quota_exceeded`` of a reservation of ``asked`` that ``refused`` (the quota
    ``Store.reserve`` returned) did not let through."""
    assert refused.epsilon is not None
    return QuotaExceeded(refused.center, refused.dataset, quota=refused.epsilon,
                         spent=refused.spent, asked=asked)


def refund_after(failure: BaseException) -> bool:
    """Whether a reservation is given back after ``failure`` of the call it was made for."""
    return isinstance(failure, CenterFailure) and failure.kind in NOTHING_SPENT
