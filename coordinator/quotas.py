"""Per-analyst ε quotas, on top of the centers' own budgets.

A quota caps the ε an analyst's studies may make one center spend on one dataset, whatever the
center's budget still allows. It is kept in the store per (analyst, center, dataset) with what the
analyst's studies spent there (``coordinator.db``: ``coordinator_quota``, ``coordinator_spent``).
**No quota row means no limit** (admins included): the operator sets quotas with
``fedstats coordinator analyst quota ID --center C --dataset D --epsilon E``.

Two checks, both refusing with 403 ``quota_exceeded`` (names center, dataset, quota, spent and
what was asked) before anything is asked of that center:

* at submit, :func:`check_spec`: what a spec spends per center (:func:`spec_epsilon`, from
  :func:`analysis_spends`, the one account of what an analysis spends, which the dry run reads
  too) must fit what is left of every selected center's quota, so most refusals come before a
  study starts;
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
from dataclasses import dataclass

from pydantic import BaseModel

from coordinator.core.errors import CenterFailure, QuotaExceeded
from coordinator.db import EPSILON_TOLERANCE, QuotaRecord, Store
from coordinator.models import (
    MWU_TESTS,
    Analysis,
    DescribeAnalysis,
    DPBoxplotAnalysis,
    DPQuantilesAnalysis,
    MWUAnalysis,
    QuantilesAnalysis,
    StudySpec,
)
from shared.dp.pooled import COUNT_SHARE, EXTREMES_SHARE, HISTOGRAM_SHARE

# A failure after which the center has spent nothing: it said no (a refusal, or a 429 of its
# compute allowance), or it was never reached. (A center's 500 keeps what the release paid, and
# computes the same question under it when asked again: the analyst's reservation is made again
# by the study that asks it, so giving it back here does not count it twice.)
NOTHING_SPENT = frozenset({"refused", "throttled", "error", "unreachable"})


def request_epsilon(request: BaseModel | None) -> float:
    """The ε a release request asks the center to spend (0 for a K-anonymous release)."""
    value = getattr(request, "epsilon", None)
    return float(value) if value is not None else 0.0


@dataclass(frozen=True)
class Spend:
    """The ε one analysis makes each center it asks spend; ``exact`` False: at most this."""

    epsilon: float
    exact: bool = True


# The tests of an MWU whose local U each center releases (noised with the analysis's ε); the
# table test reads the study's K-anonymous table and spends nothing.
LOCAL_MWU_TESTS = frozenset(MWU_TESTS) - {"table"}


def _requests(spec: StudySpec, analysis: Analysis) -> list[tuple[tuple[object, ...], Spend]]:
    """The DP requests (or rounds) ``analysis`` sends every center, each with a key that is the
    same for the same request in another analysis of ``spec``, and the ε each spends.

    It follows the protocols (``coordinator/protocols/``): an MWU's noisy local U (ε, only with
    a local test); a DP boxplot's own box (ε) and its pooled box (round 1, the extremes, 3ε/8;
    rounds 2 and 3, the tree histogram ε/2 and the outlier counts ε/8: their requests follow
    from round 1, the same only for the same analysis); DP quantiles (ε); a DP describe (ε per
    variable and arm); the YJ data fit (at most ε per group: each λ Brent tries costs
    ε / DP_MAX_EVALUATIONS, and it may stop early).
    """
    v = spec.variable
    if isinstance(analysis, MWUAnalysis):
        if analysis.epsilon is None or not LOCAL_MWU_TESTS & set(analysis.tests):
            return []
        return [(("mwu", v, spec.groups, analysis.epsilon), Spend(analysis.epsilon))]
    if isinstance(analysis, DPBoxplotAnalysis):
        eps, box = analysis.epsilon, (v, analysis.group, analysis.epsilon, analysis.bounds)
        parts: list[tuple[tuple[object, ...], Spend]] = []
        if analysis.per_center:
            parts.append((("dp_boxplot", *box), Spend(eps)))
        if analysis.pooled:
            # As the protocol computes each round's ε (coordinator/protocols/boxplot.py).
            parts.append((("dp_extremes", *box), Spend(2 * EXTREMES_SHARE * eps)))
            parts.append((("pooled", *box, analysis.depth, analysis.branching),
                          Spend(HISTOGRAM_SHARE * eps + 2 * COUNT_SHARE * eps)))
        return parts
    if isinstance(analysis, DPQuantilesAnalysis):
        return [(("dp_quantiles", v, analysis.group, analysis.epsilon, analysis.bounds,
                  tuple(analysis.levels), analysis.algorithm), Spend(analysis.epsilon))]
    if isinstance(analysis, DescribeAnalysis) and analysis.method == "dp":
        assert analysis.epsilon is not None  # a dp describe has its ε (DescribeAnalysis)
        arms: tuple[str | None, ...] = spec.groups if spec.groups is not None else (None,)
        # One ε-DP description per variable and arm (coordinator/protocols/describe.py).
        return [(("dp_describe", name, arm, analysis.epsilon,
                  (analysis.bounds or {}).get(name), analysis.bins), Spend(analysis.epsilon))
                for name in analysis.described(v) for arm in arms]
    if (isinstance(analysis, QuantilesAnalysis) and "yj_data" in analysis.estimators
            and analysis.epsilon is not None):
        groups: tuple[str | None, ...] = spec.groups if spec.groups is not None else (None,)
        # Brent's λs follow from the answers, so the same fit asks the same requests.
        return [(("yj_data", v, g, analysis.epsilon, analysis.bounds),
                 Spend(analysis.epsilon, exact=False)) for g in groups]
    return []


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
        for key, spend in _requests(spec, analysis):
            if key not in seen:
                seen.add(key)
                total += spend.epsilon
                exact = exact and spend.exact
        out.append(Spend(total, exact))
    return out


def spec_epsilon(spec: StudySpec) -> float:
    """The most ε the spec can make each center spend on its dataset (:func:`analysis_spends`)."""
    return sum(s.epsilon for s in analysis_spends(spec))


def fits(quota: QuotaRecord, asked: float) -> bool:
    """Whether ``asked`` more ε fits the quota (no quota: always)."""
    return quota.epsilon is None or quota.spent + asked <= quota.epsilon + EPSILON_TOLERANCE


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
