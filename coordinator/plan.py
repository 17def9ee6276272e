"""The dry run: what a study would spend and what would be refused, without releasing anything
(``POST /v1/studies?dry_run=true``; docs/coordinator.md, "Dry run").

Read from the centers' info and budgets (``coordinator.registry``, the catalog's round) and the
analyst's quotas; the ε of each analysis is ``coordinator.quotas.analysis_spends``'s, the same
account the quota check at submission uses. What would be refused:

* ``unknown_name`` — a name a selected center does not declare (``coordinator.catalog``);
* ``center_k`` — a center whose K is above the study's ``k`` (it would refuse every release);
* ``dataset_paused`` — the center's data changed and releases wait for its operator;
* ``dataset_unavailable`` — the center cannot read the dataset's source now (its other
  datasets answer as usual);
* ``dp_mode_exact`` — the center releases the dataset in DP mode (``release_mode = "dp"``) and
  an analysis, as asked, is exact (``Analysis.exact``): the detail names the DP analysis to ask
  instead (``Analysis.dp_alternative``);
* ``budget_exceeded`` — the study's ε is more than the center's budget has left;
* ``quota_exceeded`` — ... more than the analyst's quota there has left (the submission is
  refused with 403, ``allow_partial`` or not);
* ``center_unavailable`` — the center's info could not be read now;
* ``too_few_centers`` — with ``allow_partial``, fewer than ``min_centers`` centers would remain;
* ``release_limit_reached`` — the study needs a new federated table and a center already keeps
  as many exact releases of the variable as its disclosure control remembers
  (``max_releases_per_variable``, read from its ``/v1/budget``).

The plan also says how the study would get its federated table (:class:`PlannedTable`): reused
from a table an earlier study obtained of the same centers at their current data versions
(``coordinator.tables``: nothing asked, nothing coarsened), or new, with each center's earlier
exact releases of the variable that will coarsen it, and the kept tables of the variable an
analyst could ask for instead.

A refusal is ``blocking`` when the study would be refused or fail; with ``allow_partial`` a
center-level refusal only leaves that center out.

For each Mann-Whitney analysis the plan gives the sum test's power (:class:`PlannedPower`,
``shared.mwu_power``) at the analysis's ε and the sizes the centers that would take part show
(rounded down to their K): at θ = 0.6 and 0.7 and the θ with 80 % power. At small ε the noise
can leave the test with power about α; the analyst learns it before anything is spent.

For each DP analysis (boxplots, DP quantiles, a DP Table 1) it gives each part's 95 % error at
the same sizes and the asked ε (:class:`PlannedUtility`, ``coordinator.utility``), and says
when it is uninformative (docs/methods.md §9.6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from coordinator.analyses import analysis_of
from coordinator.catalog import check_names, unknown_names
from coordinator.core.errors import UnknownName, WouldBeRefused
from coordinator.db import EPSILON_TOLERANCE, QuotaRecord
from coordinator.models import (
    CenterPlan,
    KeptTableView,
    PlannedPower,
    PlannedSpend,
    PlannedTable,
    PlanRefusal,
    StudyPlan,
    StudySpec,
)
from coordinator.protocols.table import build_order
from coordinator.quotas import analysis_spends, fits
from coordinator.registry import Declaration
from coordinator.tables import KeptTable, TableKey
from coordinator.utility import plan_utility
from shared.protocol import CenterInfo


def info_refusals(spec: StudySpec, center: str, info: CenterInfo) -> list[tuple[str, str]]:
    """What a center would refuse of ``spec``, read from its info alone (reason, detail): every
    release (its K above the study's, the dataset paused or unavailable), or in DP mode each
    exact analysis. The dry run lists them; a submission is refused for them unless the spec
    allows partial results (:func:`check_info`)."""
    out = []
    if info.k > spec.k:
        out.append(("center_k", f"center {center!r} releases only with K >= {info.k}; the "
                                f"study asks k = {spec.k} (raise the study's k to {info.k}, "
                                "or leave the center out)"))
    dataset = next((d for d in info.datasets if d.name == spec.dataset), None)
    if dataset is not None and dataset.paused:
        out.append(("dataset_paused", f"center {center!r} pauses releases of "
                                      f"{spec.dataset!r} until its operator starts a new epoch"))
    if dataset is not None and not dataset.available:
        out.append(("dataset_unavailable", f"center {center!r} cannot read the source of "
                                           f"{spec.dataset!r} now (its operator is told why in "
                                           "its log)"))
    if dataset is not None and dataset.release_mode == "dp":
        for index, part in enumerate(spec.analyses):
            analysis = analysis_of(part)
            if analysis.exact(spec, part):
                out.append(("dp_mode_exact", (
                    f"center {center!r} releases {spec.dataset!r} in DP mode (every release "
                    f"differentially private) and refuses analysis {index} ({part.kind}) as "
                    f"asked, which is exact: ask {analysis.dp_alternative} instead")))
    return out


def check_info(spec: StudySpec, infos: Mapping[str, CenterInfo], selected: Sequence[str], *,
               min_centers: int) -> None:
    """At submission: refuse (409 ``would_be_refused``) a spec some selected center would
    refuse every release of, from the info asked for its names (:func:`info_refusals`: its K,
    the dataset paused or unavailable), unless ``allow_partial`` (those centers are then left
    out) leaves at least ``min_centers``. Centers whose info could not be read are not held
    against it (the run names their failure and can be resumed)."""
    found = [(center, reason, detail) for center in selected if center in infos
             for reason, detail in info_refusals(spec, center, infos[center])]
    if not found:
        return
    left_out = {center for center, _r, _d in found}
    remain = [c for c in selected if c not in left_out]
    if spec.allow_partial and len(remain) >= min_centers:
        return
    hint = ("; with allow_partial = true the other centers would run it"
            if not spec.allow_partial else
            f"; only {len(remain)} center(s) would remain, the study needs {min_centers}")
    raise WouldBeRefused(
        "; ".join(detail for _c, _r, detail in found) + hint
        + " (fedstats study plan shows the whole dry run)",
        extra={"refusals": [{"center": c, "reason": r, "detail": d} for c, r, d in found]},
    )


def needs_table(spec: StudySpec) -> bool:
    """Whether a study of ``spec`` obtains a federated table (``coordinator.study``)."""
    return any(analysis_of(a).needs_table(a) for a in spec.analyses)


def _epochs(declarations: Sequence[Declaration], dataset: str) -> dict[str, int]:
    """Each center's current data version of ``dataset``, where its info was read."""
    epochs = {}
    for declared in declarations:
        info = declared.info
        found = next((d for d in info.datasets if d.name == dataset), None) if info else None
        if found is not None:
            epochs[declared.center] = found.epoch
    return epochs


def kept_views(kept: Sequence[KeptTable], epochs: Mapping[str, int]) -> list[KeptTableView]:
    """The kept tables as a plan (and the catalog) shows them."""
    views = []
    for table in kept:
        d = table.described
        views.append(KeptTableView(
            groups=d["groups"], k=d["k"], lower=d["lower"], upper=d["upper"],
            centers=d["centers"], study_id=table.study_id, created_at=table.created_at,
            current=all(epochs.get(c) == e for c, e in d["centers"].items()),
        ))
    return views


def _declared_size(declared: Declaration | None, dataset: str,
                   groups: tuple[str, ...] | None) -> int | None:
    """The size a center declares for the groups asked (what orders the table's builders)."""
    info = declared.info if declared is not None else None
    found = next((d for d in info.datasets if d.name == dataset), None) if info else None
    if found is None:
        return None
    if groups is None:
        return found.n_records
    return sum(found.n_by_group.get(level, 0) for level in groups)


def plan_table(spec: StudySpec, declarations: Sequence[Declaration], centers: Sequence[str],
               kept: Sequence[KeptTable]) -> tuple[PlannedTable, dict[str, str]]:
    """How the study would get its table from ``centers`` (those that would take part), and
    per center a refusal's detail where a new release of the table would be refused there.

    A center asked what it was asked before in the same epoch answers from its stored answer
    (the release gate's request keys): the builder's table, and a refinement of the same
    centers' table in the same order. So a new table's center releases nothing new where a
    kept table of the same groups, K and closing was built by the same centers before it, in
    the same order, at the current data versions; elsewhere its release is new, and refused
    past the center's cap on remembered releases (its ``/v1/budget``)."""
    epochs = _epochs(declarations, spec.dataset)
    views = kept_views(kept, epochs)
    lower, upper = spec.table_closing
    refused: dict[str, str] = {}
    if not all(c in epochs for c in centers):
        return PlannedTable(reused_from=None, centers=list(centers),
                            detail="a center's data version could not be read: the table "
                            "would be asked of the centers", kept=views), refused
    key = TableKey.of(dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
                      k=spec.k, lower=lower, upper=upper, epochs={c: epochs[c] for c in centers})
    wanted = key.described()
    for table in kept:
        if table.described == wanted:
            # Told by what it is: the study that obtained it is left to ``reused_from``, which
            # only an admin and that study's owner see (``coordinator.api.access``).
            return PlannedTable(
                reused=table.reused(), reused_from=table.study_id, centers=list(table.order),
                detail=f"the kept table of {spec.variable!r} (K {spec.k}) obtained on "
                f"{table.created_at} from these centers at their current data versions is "
                "reused: nothing is asked of the centers, nothing is coarsened", kept=views,
            ), refused

    by_center = {d.center: d for d in declarations}
    sizes = {c: _declared_size(by_center.get(c), spec.dataset, spec.groups) or 0
             for c in centers}
    order = build_order(sizes, centers)
    same_question = [t for t in kept
                     if all(t.described[f] == wanted[f] for f in ("groups", "k", "lower", "upper"))]
    releases: dict[str, Literal["stored", "new", "refused"]] = {}
    earlier = []
    # A refiner asked for its own table first (``Analysis.needs_center_tables``) makes two.
    own_tables = any(analysis_of(a).needs_center_tables(a) for a in spec.analyses)
    for i, center in enumerate(order):
        prefix = order[:i + 1]
        if any(t.order[:i + 1] == tuple(prefix)
               and all(t.described["centers"].get(c) == epochs[c] for c in prefix)
               for t in same_question):
            releases[center] = "stored"
            continue
        declared = by_center.get(center)
        budget = (declared.budget.datasets.get(spec.dataset)
                  if declared is not None and declared.budget is not None else None)
        use = budget.exact_releases.get(spec.variable) if budget is not None else None
        releases[center] = "new"
        if use is None:
            continue
        new = 2 if own_tables and i > 0 else 1
        if use.releases + new > use.max_releases:
            releases[center] = "refused"
            refused[center] = (
                f"center {center!r} keeps {use.releases} exact releases of {spec.variable!r}, "
                f"the most it remembers (max_releases_per_variable): it would refuse a new "
                f"release this table needs of it; a kept table listed in the plan can still be "
                f"reused by a study asking its groups, K, closing and centers")
        elif use.releases:
            earlier.append(f"{center} ({use.releases} of {use.max_releases})")
    parts = [f"a new table of {spec.variable!r} is asked of the centers, built in the order "
             f"{', '.join(order)}"]
    stored = [c for c in order if releases[c] == "stored"]
    if stored:
        parts.append(f"{', '.join(stored)} answer(s) from stored answers (asked the same before)")
    if earlier:
        parts.append("the new releases of centers with earlier exact releases of the variable "
                     "are coarsened until no combination with those isolates fewer than K "
                     f"records, so the table may have fewer bins than a first one: "
                     f"{', '.join(earlier)} releases kept")
    if any(v.current for v in views):
        parts.append("a kept table with current data versions is listed in `kept`: a study "
                     "asking its groups, K, closing and centers reuses it instead")
    return PlannedTable(reused_from=None, centers=order, releases=releases,
                        detail="; ".join(parts), kept=views), refused


def yj_data_not_offered(spec: StudySpec,
                        declarations: Sequence[Declaration | None]) -> list[tuple[str, str]]:
    """What the dry run says of each analysis, not blocking (``Analysis.plan_notes``: e.g. a
    ``quantiles`` analysis' YJ data that would not be offered), each with its reason
    (``Analysis.note_reason``), on the sizes the taking-part centers (``declarations``)
    declare."""

    def size_of(group: str | None) -> int:
        if group is None:
            return sum(_declared_size(d, spec.dataset, None) or 0 for d in declarations)
        return sum(_group_size(d, spec.dataset, group) for d in declarations)

    return [(analysis_of(analysis).note_reason, note)
            for index, analysis in enumerate(spec.analyses)
            for note in analysis_of(analysis).plan_notes(spec, analysis, index, size_of)]


def _group_size(declared: Declaration | None, dataset: str, group: str) -> int:
    info = declared.info if declared is not None else None
    found = next((d for d in info.datasets if d.name == dataset), None) if info else None
    return found.n_by_group.get(group, 0) if found is not None else 0


def plan_power(spec: StudySpec, declarations: Sequence[Declaration],
               centers: Sequence[str]) -> list[PlannedPower]:
    """The sum test's power for each Mann-Whitney analysis over ``centers`` (those whose sizes
    of both groups are known and at least 1)."""
    if spec.groups is None or len(spec.groups) != 2:
        return []
    by_center = {d.center: d for d in declarations}
    sizes: dict[str, tuple[int, int]] = {}
    for center in centers:
        declared = by_center.get(center)
        info = declared.info if declared is not None else None
        found = next((d for d in info.datasets if d.name == spec.dataset), None) if info else None
        if found is None:
            continue
        n, m = (found.n_by_group.get(level, 0) for level in spec.groups)
        if n >= 1 and m >= 1:
            sizes[center] = (n, m)
    if not sizes:
        return []
    planned = []
    for i, analysis in enumerate(spec.analyses):
        power = analysis_of(analysis).power(spec, analysis, i, sizes)
        if power is not None:
            planned.append(power)
    return planned


def plan_study(spec: StudySpec, declarations: Sequence[Declaration], selected: Sequence[str],
               *, min_centers: int, quotas: Mapping[str, QuotaRecord],
               kept: Sequence[KeptTable] = ()) -> StudyPlan:
    """The plan of ``spec`` over the ``selected`` centers; ``quotas[c]`` is the analyst's
    quota at center ``c`` for the spec's dataset (absent: no analyst, no limit); ``kept`` the
    coordinator's kept tables of the spec's variable."""
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
        else:
            for reason, detail in info_refusals(spec, center, info):
                refuse(reason, center, detail, blocking=not partial)
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
    table = None
    if needs_table(spec):
        taking_part = [c for c in selected if c not in left_out]
        table, limit_reached = plan_table(spec, declarations, taking_part, kept)
        for center, why in limit_reached.items():
            refuse("release_limit_reached", center, why, blocking=not partial)
        if limit_reached:
            table = table.model_copy(update={"centers": [c for c in table.centers
                                                         if c not in limit_reached]})
    remain = [c for c in selected if c not in left_out]
    for reason, why in yj_data_not_offered(spec, [by_center.get(c) for c in remain]):
        refuse(reason, None, why, blocking=False)
    if partial and len(remain) < min_centers:
        refuse("too_few_centers", None, f"{len(remain)} center(s) would take part "
               f"({', '.join(remain) or 'none'}); the study needs {min_centers}", blocking=True)
    return StudyPlan(dataset=spec.dataset, variable=spec.variable, centers=centers,
                     refusals=refusals, would_run=not any(r.blocking for r in refusals),
                     table=table, power=plan_power(spec, declarations, remain),
                     utility=plan_utility(spec, declarations, remain))
