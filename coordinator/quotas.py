"""Per-analyst ε quotas, on top of the centers' own budgets.

A quota caps the ε an analyst's studies may make one center spend on one dataset, whatever the
center's budget still allows. It is kept in the store per (analyst, center, dataset) with what the
analyst's studies spent there (``coordinator.db``: ``coordinator_quota``, ``coordinator_spent``).
**No quota row means no limit** (admins included): the operator sets quotas with
``fedstats coordinator analyst quota ID --center C --dataset D --epsilon E``.

Two checks, both refusing with 403 ``quota_exceeded`` (names center, dataset, quota, spent and
what was asked) before anything is asked of that center:

* at submit, :func:`check_spec`: what a spec spends per center (:func:`spec_epsilon`, from
  :func:`analysis_spends`, which sums what each analysis declares it sends,
  ``coordinator.analyses``: the one account the dry run reads too) must fit what is left of
  every selected center's quota, so most refusals come before a study starts;
* at each release, :func:`reserve` (called by ``coordinator.recording.RecordedCenter``): the
  request's ε is counted as spent, atomically (``Store.reserve``: two studies, or two processes,
  cannot both take the last of a quota), before the center is asked. A release the study already
  received is answered from its records and costs nothing again. When the center's answer shows
  it spent nothing (it refused, answered an error, or could not be reached) the ε is given back
  (:func:`refund_after`; this half lives in ``coordinator.spending``); after a timeout or an
  answer the coordinator rejected it is kept, as the center may have spent it.

The quota is the study owner's: a study resumed by an analyst it was shared with spends its
owner's quota, as it runs its owner's spec.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.analyses import Spend, analysis_of
from coordinator.core.errors import QuotaExceeded
from coordinator.db import Store
from coordinator.models import StudySpec

# The half each release calls (``coordinator.recording``) lives in ``coordinator.spending``.
from coordinator.spending import (
    NOTHING_SPENT,
    exceeded,
    fits,
    refund_after,
    request_epsilon,
    reserve,
)

__all__ = ["NOTHING_SPENT", "Spend", "analysis_spends", "check_spec", "exceeded", "fits",
           "refund_after", "request_epsilon", "reserve", "spec_epsilon"]


def analysis_spends(spec: StudySpec) -> list[Spend]:
    """**The** ε each analysis of ``spec`` makes each center it asks spend, in the spec's order
    (the quota check and the dry run both read it: ``coordinator.plan``).

    A request another analysis of the study already sends is counted once: the center answers
    a request it answered before from its store, at no cost (docs/privacy.md). For the same
    reason a request an earlier study sent costs nothing again, which this cannot know: then
    the amount is an upper bound.
    """
    seen: set[tuple[object, ...]] = set()
    out = []
    for analysis in spec.analyses:
        total, exact = 0.0, True
        for key, spend in analysis_of(analysis).requests(spec, analysis):
            if key not in seen:
                seen.add(key)
                total += spend.epsilon
                exact = exact and spend.exact
        out.append(Spend(total, exact))
    return out


def spec_epsilon(spec: StudySpec) -> float:
    """The most ε the spec can make each center spend on its dataset (:func:`analysis_spends`)."""
    return sum(s.epsilon for s in analysis_spends(spec))


def check_spec(store: Store, analyst_id: str | None, spec: StudySpec,
               centers: Iterable[str]) -> None:
    """Refuse (403 ``quota_exceeded``) a spec whose most possible spending does not fit the
    analyst's remaining quota at one of ``centers``."""
    asked = spec_epsilon(spec)
    if analyst_id is None or asked <= 0:
        return
    for center in centers:
        quota = store.quota(analyst_id, center, spec.dataset)
        if not fits(quota, asked):
            assert quota.epsilon is not None
            raise QuotaExceeded(center, spec.dataset, quota=quota.epsilon, spent=quota.spent,
                                asked=asked)
