"""The catalog: what every center holds, as it publishes it (docs/coordinator.md, "Catalog"),
and the check of a spec's names against it at submission.

Built from each center's ``/v1/info`` and ``/v1/budget`` (``coordinator.registry``), nothing
else: names, K, sizes the center already rounds down to its K, remaining ε. The sizes are
rounded down to the center's K here again, so a center that sends a finer size by mistake does
not make the catalog show it.

Names at submission (:func:`check_names`): a spec whose dataset, variable or group levels (the
study's ``groups`` and each DP analysis's ``group``) a selected center does not declare is
refused (422 ``unknown_name``, naming each name, the centers lacking it and what they declare)
before any release is asked. A center whose info cannot be read is not held against the spec:
its study's own run names the failure and can be resumed when the center is back. With
``allow_partial`` a center lacking a name would be left out, so the spec is refused only when
fewer than ``min_centers`` selected centers would remain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.analyses import analysis_of
from coordinator.core.errors import UnknownName
from coordinator.models import (
    Catalog,
    CatalogCenter,
    CatalogDataset,
    CatalogEntry,
    CatalogTimeToEvent,
    StudySpec,
)
from coordinator.registry import Declaration
from shared.protocol import CenterInfo, DatasetInfo


def rounded(n: int, k: int) -> int:
    """``n`` rounded down to a multiple of ``k``."""
    return max(0, n) // k * k


def _entry(declared: Declaration, info: CenterInfo, dataset: DatasetInfo) -> CatalogEntry:
    k = info.k
    levels = list(dataset.group.levels) if dataset.group is not None else []
    budget = declared.budget.datasets.get(dataset.name) if declared.budget is not None else None
    if dataset.release_mode == "dp":
        # The operator's declared sizes as declared (public statements, not read from the
        # data), none for a level without one: a DP-mode center has no level "below K", and
        # a level it declares no size of is not one of 0 records (docs/privacy.md, "DP mode").
        n_records = dataset.n_records
        by_group = {level: n for level in levels
                    if (n := dataset.n_by_group.get(level)) is not None}
    else:
        n_records = rounded(dataset.n_records, k) if dataset.n_records is not None else None
        by_group = {level: rounded(dataset.n_by_group.get(level, 0), k) for level in levels}
    return CatalogEntry(
        center=declared.center, k=k, variables=list(dataset.variables),
        group_column=dataset.group.column if dataset.group is not None else None,
        levels=levels, release_mode=dataset.release_mode,
        n_records=n_records, n_by_group=by_group,
        epoch=dataset.epoch, paused=dataset.paused, available=dataset.available,
        remaining_epsilon=budget.remaining_epsilon if budget is not None else None,
        metadata=dict(dataset.metadata),
        categorical={name: list(c) for name, c in dataset.categorical.items()},
        time_to_event={name: CatalogTimeToEvent(follow_up=tte.follow_up, unit=tte.unit)
                       for name, tte in dataset.time_to_event.items()},
    )


def _union(lists: Sequence[Sequence[str]]) -> list[str]:
    """Every name once, in the order first declared."""
    return list(dict.fromkeys(name for names in lists for name in names))


def build_catalog(declarations: Sequence[Declaration]) -> Catalog:
    """Every dataset any center declares, each center's part of it, and every center."""
    entries: dict[str, list[CatalogEntry]] = {}
    for declared in declarations:
        if declared.info is not None:
            for dataset in declared.info.datasets:
                entries.setdefault(dataset.name, []).append(
                    _entry(declared, declared.info, dataset))
    datasets = [
        CatalogDataset(name=name, variables=_union([e.variables for e in parts]),
                       levels=_union([e.levels for e in parts]),
                       categorical=_union([list(e.categorical) for e in parts]),
                       time_to_event=_union([list(e.time_to_event) for e in parts]),
                       centers=parts)
        for name, parts in entries.items()
    ]
    centers = [CatalogCenter(id=d.center, url=d.url,
                             k=d.info.k if d.info is not None else None, problem=d.problem)
               for d in declarations]
    return Catalog(datasets=datasets, centers=centers)


@dataclass(frozen=True)
class Unknown:
    """A name of the spec that ``centers`` do not declare (they declare ``declared``)."""

    what: str
    name: str
    field: str
    centers: tuple[str, ...]
    declared: tuple[str, ...]

    def describe(self, dataset: str) -> str:
        where = "" if self.what == "dataset" else f" in dataset {dataset!r}"
        theirs = ", ".join(self.declared) or "none"
        return (f"{self.what} {self.name!r} is not declared{where} by center(s) "
                f"{', '.join(self.centers)} (declared there: {theirs})")


def _level_names(spec: StudySpec) -> list[tuple[str, str]]:
    """Every group level the spec names, with its field."""
    named = [(level, "body.groups") for level in spec.groups or ()]
    for i, analysis in enumerate(spec.analyses):
        named += analysis_of(analysis).level_names(analysis, i)
    return named


def _describe_names(spec: StudySpec, found: DatasetInfo) -> list[tuple[str, str, str]]:
    """What a center lacks for the spec's analyses besides its dataset, variable and levels
    (each analysis says: ``coordinator.analyses``), e.g. a describe's other variables."""
    return [lacked for i, analysis in enumerate(spec.analyses)
            for lacked in analysis_of(analysis).lacking(spec, analysis, i, found)]


def unknown_names(spec: StudySpec, declarations: Sequence[Declaration],
                  selected: Sequence[str]) -> list[Unknown]:
    """The spec's names that selected centers (those whose info was read) do not declare."""
    lacking: dict[tuple[str, str, str], list[str]] = {}
    theirs: dict[tuple[str, str, str], list[list[str]]] = {}

    def lacks(what: str, name: str, field: str, center: str, declared: list[str]) -> None:
        key = (what, name, field)
        lacking.setdefault(key, []).append(center)
        theirs.setdefault(key, []).append(declared)

    by_center = {d.center: d.info for d in declarations if d.info is not None}
    for center in selected:
        info = by_center.get(center)
        if info is None:
            continue
        found = next((d for d in info.datasets if d.name == spec.dataset), None)
        if found is None:
            lacks("dataset", spec.dataset, "body.dataset", center,
                  [d.name for d in info.datasets])
            continue
        if spec.variable not in found.variables:
            lacks("variable", spec.variable, "body.variable", center, list(found.variables))
        levels = list(found.group.levels) if found.group is not None else []
        for level, field in _level_names(spec):
            if level not in levels:
                lacks("group level", level, field, center, levels)
        for what, name, field in _describe_names(spec, found):
            known = (list(found.variables) if what == "variable" else
                     list(found.categorical) if what == "categorical variable" else
                     list(found.time_to_event) if what == "time-to-event variable" else
                     [f"{v} to {t.follow_up[1]:g}" for v, t in found.time_to_event.items()]
                     if what == "time-to-event follow-up" else
                     list(found.n_by_group) if what.startswith("public size") else
                     [v for v, m in found.metadata.items() if m.bounds is not None])
            lacks(what, name, field, center, known)
    return [Unknown(what, name, field, tuple(centers), tuple(_union(theirs[(what, name, field)])))
            for (what, name, field), centers in lacking.items()]


def check_names(spec: StudySpec, declarations: Sequence[Declaration], selected: Sequence[str],
                *, min_centers: int) -> None:
    """Refuse (422 ``unknown_name``) a spec naming what selected centers do not declare (see
    the module's docstring for a center that did not answer and for ``allow_partial``)."""
    unknown = unknown_names(spec, declarations, selected)
    if not unknown:
        return
    if spec.allow_partial:
        left_out = {c for u in unknown for c in u.centers}
        if len([c for c in selected if c not in left_out]) >= min_centers:
            return
    raise UnknownName(
        "; ".join(u.describe(spec.dataset) for u in unknown),
        extra={
            "fields": list(dict.fromkeys(u.field for u in unknown)),
            "unknown": [{"what": u.what, "name": u.name, "field": u.field,
                         "centers": list(u.centers), "declared": list(u.declared)}
                        for u in unknown],
        },
    )
