"""Per-analyst ε quotas, on top of the centers' own budgets.

A quota caps the ε an analyst's studies may make one center spend on one dataset, whatever the
center's budget still allows. It is kept in the store per (analyst, center, dataset) with what the
analyst's studies spent there (``coordinator.db``: ``coordinator_quota``, ``coordinator_spent``).
**No quota row means no limit** (admins included): the operator sets quotas with
``fedstats coordinator analyst quota ID --center C --dataset D --epsilon E``.

Two checks, both refusing with 403 ``quota_exceeded`` (names center, dataset, quota, spent and
what was asked) before anything is asked of that center:

* at submit, :func:`check_spec`: the most a spec can spend per center (:func:`spec_epsilon`) must
  fit what is left of every selected center's quota, so most refusals come before a study starts;
* at each release, :func:`reserve` (called by ``coordinator.recording.RecordedCenter``): the
  request's ε is counted as spent, atomically (``Store.reserve``: two studies, or two processes,
  cannot both take the last of a quota), before the center is asked. A release the study already
  received is answered from its records and costs nothing again. When the center's answer shows
  it spent nothing (it refused, answered an error, or could not be reached) the ε is given back
  (:func:`refund_after`); after a timeout or an answer the coordinator rejected it is kept, as
  the center may have spent it.

The quota is the study owner's: a study resumed by an analyst it was shared with spends its
owner's quota, as it runs its owner's spec.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from coordinator.core.errors import CenterFailure, QuotaExceeded
from coordinator.db import EPSILON_TOLERANCE, Store
from coordinator.models import (
    DPBoxplotAnalysis,
    DPQuantilesAnalysis,
    MWUAnalysis,
    QuantilesAnalysis,
    StudySpec,
)

# A failure after which the center has spent nothing: it said no, or it was never reached.
NOTHING_SPENT = frozenset({"refused", "error", "unreachable"})


def request_epsilon(request: BaseModel | None) -> float:
    """The ε a release request asks the center to spend (0 for a K-anonymous release)."""
    value = getattr(request, "epsilon", None)
    return float(value) if value is not None else 0.0


def spec_epsilon(spec: StudySpec) -> float:
    """The most ε the spec can make each center spend on its dataset: an MWU with ε, each box
    of a DP boxplot (its own and the pooled one), DP quantiles, and the YJ fit on the centers'
    moment sums (at most its ε per group)."""
    groups = 2 if spec.groups is not None else 1
    total = 0.0
    for analysis in spec.analyses:
        if isinstance(analysis, MWUAnalysis) and analysis.epsilon is not None:
            total += analysis.epsilon
        elif isinstance(analysis, DPBoxplotAnalysis):
            total += analysis.epsilon * (int(analysis.per_center) + int(analysis.pooled))
        elif isinstance(analysis, DPQuantilesAnalysis):
            total += analysis.epsilon
        elif (isinstance(analysis, QuantilesAnalysis) and "yj_data" in analysis.estimators
              and analysis.epsilon is not None):
            total += analysis.epsilon * groups
    return total


def check_spec(store: Store, analyst_id: str | None, spec: StudySpec,
               centers: Iterable[str]) -> None:
    """Refuse (403 ``quota_exceeded``) a spec whose most possible spending does not fit the
    analyst's remaining quota at one of ``centers``."""
    asked = spec_epsilon(spec)
    if analyst_id is None or asked <= 0:
        return
    for center in centers:
        quota = store.quota(analyst_id, center, spec.dataset)
        if quota.epsilon is not None and quota.spent + asked > quota.epsilon + EPSILON_TOLERANCE:
            raise QuotaExceeded(center, spec.dataset, quota=quota.epsilon, spent=quota.spent,
                                asked=asked)


def reserve(store: Store, analyst_id: str, center: str, dataset: str, epsilon: float) -> None:
    """Count ``epsilon`` as spent by the analyst at (center, dataset), or refuse (403
    ``quota_exceeded``) without counting anything."""
    refused = store.reserve(analyst_id, center, dataset, epsilon)
    if refused is not None:
        assert refused.epsilon is not None
        raise QuotaExceeded(center, dataset, quota=refused.epsilon, spent=refused.spent,
                            asked=epsilon)


def refund_after(failure: BaseException) -> bool:
    """Whether a reservation is given back after ``failure`` of the call it was made for."""
    return isinstance(failure, CenterFailure) and failure.kind in NOTHING_SPENT
