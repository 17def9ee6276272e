"""The dry run: what a study would spend and what would be refused, without releasing anything
(``POST /v1/studies?dry_run=true``; docs/coordinator.md, "Dry run").

Read from the centers' info and budgets (``coordinator.registry``, the catalog's round) and the
analyst's quotas; the ε of each analysis is ``coordinator.quotas.analysis_spends``'s, the same
account the quota check at submission uses. What would be refused:

* ``unknown_name`` — a name a selected center does not declare (``coordinator.catalog``);
* ``center_k`` — a center whose K is above the study's ``k`` (it would refuse every release);
* ``dataset_paused`` — the center's data changed and releases wait for its operator;
* ``budget_exceeded`` — the study's ε is more than the center's budget has left;
* ``quota_exceeded`` — ... more than the analyst's quota there has left (the submission is
  refused with 403, ``allow_partial`` or not);
* ``center_unavailable`` — the center's info could not be read now;
* ``too_few_centers`` — with ``allow_partial``, fewer than ``min_centers`` centers would remain.

A refusal is ``blocking`` when the study would be refused or fail; with ``allow_partial`` a
center-level refusal only leaves that center out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator.catalog import check_names, unknown_names
from coordinator.core.errors import UnknownName
from coordinator.db import EPSILON_TOLERANCE, QuotaRecord
from coordinator.models import CenterPlan, PlannedSpend, PlanRefusal, StudyPlan, StudySpec
from coordinator.quotas import analysis_spends, fits
from coordinator.registry import Declaration


def plan_study(spec: StudySpec, declarations: Sequence[Declaration], selected: Sequence[str],
               *, min_centers: int, quotas: Mapping[str, QuotaRecord]) -> StudyPlan:
    """The plan of ``spec`` over the ``selected`` centers; ``quotas[c]`` is the analyst's
    quota at center ``c`` for the spec's dataset (absent: no analyst, no limit)."""
    spends = analysis_spends(spec)
    planned = [PlannedSpend(analysis=i, kind=a.kind, epsilon=s.epsilon, exact=s.exact)
               for i, (a, s) in enumerate(zip(spec.analyses, spends, strict=True))]
    total = sum(s.epsilon for s in spends)
    exact = all(s.exact for s in spends)
    partial = spec.allow_partial
    refusals: list[PlanRefusal] = []
    left_out: set[str] = set()

    def refuse(reason: str, center: str | None, detail: str, *, blocking: bool) -> None:
        refusals.append(PlanRefusal.model_validate(
            {"reason": reason, "center": center, "detail": detail, "blocking": blocking}))
        if center is not None:
            left_out.add(center)

    try:
        check_names(spec, declarations, selected, min_centers=min_centers)
        names_block = False
    except UnknownName:
        names_block = True
    unknown = unknown_names(spec, declarations, selected)
    lacking = {c for u in unknown for c in u.centers}
    for u in unknown:
        for center in u.centers:
            refuse("unknown_name", center, u.describe(spec.dataset), blocking=names_block)

    by_center = {d.center: d for d in declarations}
    centers = []
    for center in selected:
        declared = by_center.get(center)
        info = declared.info if declared is not None else None
        if info is None:
            why = declared.problem.detail if declared and declared.problem else "no answer"
            refuse("center_unavailable", center, f"center {center!r} could not be asked: {why}",
                   blocking=not partial)
        elif info.k > spec.k:
            refuse("center_k", center, f"center {center!r} releases only with K >= {info.k}; "
                   f"the study asks k = {spec.k}", blocking=not partial)
        dataset = next((d for d in info.datasets if d.name == spec.dataset), None) if info else None
        if dataset is not None and dataset.paused:
            refuse("dataset_paused", center, f"center {center!r} pauses releases of "
                   f"{spec.dataset!r} until its operator starts a new epoch",
                   blocking=not partial)
        budget = (declared.budget.datasets.get(spec.dataset)
                  if declared is not None and declared.budget is not None else None)
        remaining = budget.remaining_epsilon if budget is not None else None
        if (remaining is not None and center not in lacking
                and total > remaining + EPSILON_TOLERANCE):
            refuse("budget_exceeded", center, f"the study spends {total:g} at center "
                   f"{center!r}, whose budget for {spec.dataset!r} has {remaining:g} left",
                   blocking=not partial)
        quota = quotas.get(center)
        if quota is not None and not fits(quota, total):
            refuse("quota_exceeded", center, f"your ε quota at center {center!r}, dataset "
                   f"{spec.dataset!r} is {quota.epsilon:g}, of which {quota.spent:g} is spent; "
                   f"this asks {total:g} more", blocking=True)
        limit = quota.epsilon if quota is not None else None
        spent = quota.spent if quota is not None else 0.0
        centers.append(CenterPlan(
            center=center, k=info.k if info is not None else None, spends=planned,
            epsilon=total, exact=exact, remaining_epsilon=remaining,
            remaining_after=remaining - total if remaining is not None else None,
            quota=limit, quota_spent=spent,
            quota_left_after=limit - spent - total if limit is not None else None,
        ))
    remain = [c for c in selected if c not in left_out]
    if partial and len(remain) < min_centers:
        refuse("too_few_centers", None, f"{len(remain)} center(s) would take part "
               f"({', '.join(remain) or 'none'}); the study needs {min_centers}", blocking=True)
    return StudyPlan(dataset=spec.dataset, variable=spec.variable, centers=centers,
                     refusals=refusals, would_run=not any(r.blocking for r in refusals))
