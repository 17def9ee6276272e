"""What a DP analysis' ε buys, before and after it is spent (docs/methods.md §9.6).

* :func:`plan_utility` — the dry run's part (``coordinator.plan``): for each DP analysis (its
  ``Analysis.planned_errors``), each released part's 95 % error at the sizes the taking-part
  centers show (rounded down to their K) and the asked ε (``shared.dp_utility``: the
  mechanisms' known error laws, public numbers only), flagged uninformative past
  ``shared.dp_utility.UNINFORMATIVE_SHARE``.
* the report's part is ``coordinator.reporting.report_flags``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from coordinator.analyses import REGISTRY
from coordinator.analyses.base import POOLED
from coordinator.models import PlannedError, PlannedUtility, StudySpec
from coordinator.registry import Declaration
from shared.dp_utility import UNINFORMATIVE_SHARE, pct
from shared.protocol import CenterInfo, DatasetInfo

SHOWN = pct(UNINFORMATIVE_SHARE)
__all__ = ["POOLED", "SHOWN", "plan_utility"]


def _dataset(info: CenterInfo | None, dataset: str) -> DatasetInfo | None:
    return next((d for d in info.datasets if d.name == dataset), None) if info else None


def _shown(e: PlannedError) -> str:
    where = " · ".join(x for x in (e.center, e.variable, e.arm) if x)
    if e.unit == "records":
        return f"{e.part} ± {math.ceil(e.error)} records of n = {e.n} at {where} ({pct(e.share)})"
    return f"{e.part} ± {e.error:.3g} at {where} ({pct(e.share)} of the bounds)"


def _detail(index: int, kind: str, epsilon: float, errors: list[PlannedError]) -> str:
    head = f"analysis {index} ({kind}) at ε = {epsilon:g}"
    if not errors:
        return (f"{head}: no error predicted (no taking-part center's size is known, or no "
                "public bounds for a described variable)")
    bad = [e for e in errors if e.uninformative]
    if not bad:
        worst = max(errors, key=lambda e: e.share)
        return (f"{head}: every part's 95 % error is within {SHOWN} of its "
                f"size or bounds (largest: {_shown(worst)})")
    bad.sort(key=lambda e: -e.share)
    shown = "; ".join(_shown(e) for e in bad[:4])
    more = f"; and {len(bad) - 4} more" if len(bad) > 4 else ""
    return (f"{head}: UNINFORMATIVE — 95 % error above {SHOWN} of the size "
            f"or bounds: {shown}{more}. More ε, more records per center (or the pooled box), "
            "or narrower public bounds would help; where the data fill a small part of the "
            "bounds the values can be worse still")


def plan_utility(spec: StudySpec, declarations: Sequence[Declaration],
                 centers: Sequence[str]) -> list[PlannedUtility]:
    """Each DP analysis' predicted 95 % errors over ``centers`` (those that would take part,
    whose info was read)."""
    by_center = {d.center: d for d in declarations}
    found: dict[str, tuple[DatasetInfo, CenterInfo]] = {}
    for center in centers:
        declared = by_center.get(center)
        info = declared.info if declared is not None else None
        dataset = _dataset(info, spec.dataset)
        if info is not None and dataset is not None:
            found[center] = (dataset, info)
    out = []
    for index, analysis in enumerate(spec.analyses):
        predicted = REGISTRY[analysis.kind].planned_errors(spec, analysis, found)
        if predicted is None:
            continue
        epsilon, errors = predicted
        out.append(PlannedUtility(
            analysis=index, kind=analysis.kind, epsilon=epsilon, threshold=UNINFORMATIVE_SHARE,
            errors=errors, uninformative=any(e.uninformative for e in errors),
            detail=_detail(index, analysis.kind, epsilon, errors)))
    return out
