"""What a DP analysis' ε buys, before and after it is spent (docs/methods.md §9.6).

* :func:`plan_utility` — the dry run's part (``coordinator.plan``): for each DP analysis, each
  released part's 95 % error at the sizes the taking-part centers show (rounded down to their
  K) and the asked ε (``shared.dp_utility``: the mechanisms' known error laws, public numbers
  only), flagged uninformative past ``shared.dp_utility.UNINFORMATIVE_SHARE``.
* the report's part is ``coordinator.reporting.report_flags``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from coordinator.models import (
    DescribeAnalysis,
    DPBoxplotAnalysis,
    DPQuantilesAnalysis,
    PlannedError,
    PlannedUtility,
    StudySpec,
)
from coordinator.registry import Declaration
from shared.dp_utility import (
    UNINFORMATIVE_SHARE,
    PartError,
    box_errors,
    describe_errors,
    pct,
    pooled_box_errors,
    quantiles_errors,
)
from shared.protocol import CenterInfo, DatasetInfo

POOLED = "pooled"
SHOWN = pct(UNINFORMATIVE_SHARE)


def _dataset(info: CenterInfo | None, dataset: str) -> DatasetInfo | None:
    return next((d for d in info.datasets if d.name == dataset), None) if info else None


def _size(found: DatasetInfo, group: str | None) -> int:
    # A DP-mode dataset without a declared size shows none: planned as an empty selection.
    return (found.n_records or 0) if group is None else found.n_by_group.get(group, 0)


def _planned(center: str, err: PartError, *, arm: str | None = None,
             variable: str | None = None) -> PlannedError:
    return PlannedError(center=center, arm=arm, variable=variable, part=err.part, n=err.n,
                        error=err.error, unit=err.unit, share=err.share,
                        uninformative=err.uninformative)


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
        errors: list[PlannedError] = []
        if isinstance(analysis, DPBoxplotAnalysis):
            epsilon = analysis.epsilon
            sizes = {c: _size(d, analysis.group) for c, (d, _i) in found.items()}
            if analysis.per_center:
                for c, n in sizes.items():
                    errors += [_planned(c, e) for e in box_errors(
                        epsilon, n, analysis.bounds, neighbouring=found[c][1].neighbouring)]
            if analysis.pooled and sizes:
                errors += [_planned(POOLED, e) for e in pooled_box_errors(
                    epsilon, list(sizes.values()), analysis.bounds, branching=analysis.branching,
                    depth=analysis.depth, relations=[i.neighbouring for _d, i in found.values()])]
        elif isinstance(analysis, DPQuantilesAnalysis):
            epsilon = analysis.epsilon
            for c, (d, info) in found.items():
                errors += [_planned(c, e) for e in quantiles_errors(
                    analysis.algorithm, analysis.levels, epsilon, _size(d, analysis.group),
                    analysis.bounds, info.neighbouring)]
        elif isinstance(analysis, DescribeAnalysis) and analysis.method == "dp":
            assert analysis.epsilon is not None  # a dp describe has one (its validator)
            epsilon = analysis.epsilon
            arms: Sequence[str | None] = spec.groups if spec.groups is not None else (None,)
            for variable in analysis.described(spec.variable):
                for c, (d, info) in found.items():
                    bounds = (analysis.bounds or {}).get(variable)
                    meta = d.metadata.get(variable)
                    bounds = bounds or (meta.bounds if meta is not None else None)
                    if bounds is None:
                        continue
                    for arm in arms:
                        errors += [_planned(c, e, arm=arm, variable=variable) for e in
                                   describe_errors(epsilon, _size(d, arm), bounds,
                                                   info.neighbouring)]
        else:
            continue
        out.append(PlannedUtility(
            analysis=index, kind=analysis.kind, epsilon=epsilon, threshold=UNINFORMATIVE_SHARE,
            errors=errors, uninformative=any(e.uninformative for e in errors),
            detail=_detail(index, analysis.kind, epsilon, errors)))
    return out
