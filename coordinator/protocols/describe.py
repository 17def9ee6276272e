"""Descriptive statistics of several variables ("Table 1"): per center, per arm and pooled
(docs/coordinator.md, "Describe"; the estimators: ``shared.describe``, docs/methods.md).

Two modes, the analyst's choice:

* ``dp`` — every center releases an ε-DP description of each variable and arm
  (``POST .../dp/describe``, ε each), asked in parallel and checked. A center's overall row
  pools its arms, and the pooled rows pool the centers (``shared.describe.pool_descriptions``:
  counts, sums and histograms add; post-processing, no further ε). Pooled quartiles are read
  off the summed histogram's consistent subdivisions; no row has a minimum or maximum. Every
  number carries its 95 % interval (``shared.describe.Summary``).
* ``table`` — no ε: each variable's federated K-anonymous table (the study's own table for the
  study's variable; the caller passes them in), read by ``shared.describe.table_describe``;
  with ``per_center``, each center's own K-anonymous table of the variable (``POST
  .../table``, an exact release its disclosure control admits like any other) gives its rows.

A center failing any request is left out of every row (``allow_partial``) or fails the
analysis, so every pooled row holds the same centers.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from coordinator.core.errors import AnalysisFailed, CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require
from coordinator.protocols.table import FederatedTable, check_table_release
from shared import kinds
from shared.binning import BinTable, Extreme
from shared.consistency import NoisyCounts
from shared.describe import (
    DescribePart,
    DPDescription,
    Summary,
    dp_range,
    histogram_edges,
    pool_descriptions,
    table_describe,
)
from shared.protocol import (
    RELEASE_RTOL,
    BinTableRelease,
    DescribeRelease,
    DescribeRequest,
    TableRequest,
)

ALL = "all"
"""The arm of every record: the study without ``groups``, or both arms together."""
POOLED = "pooled"
"""The center of the rows pooled over centers."""
DP_CENTER_METHOD = ("dp: Laplace count; JointExp quartiles; Laplace sums of the values clipped "
                    "to a DP range from the quartiles; Laplace histogram tree")
DP_POOLED_METHOD = ("dp: sums of the noisy counts, sums and histogram trees; quartiles from "
                    "the summed consistent tree")
TABLE_METHOD = ("table: mean/SD from bin midpoints; quartiles by interpolation with buffers")


@dataclass(frozen=True)
class DescribeLine:
    """One row before it becomes the study's: variable, center or "pooled", arm, summary."""

    variable: str
    center: str
    arm: str
    summary: Summary
    method: str
    epsilon: float


@dataclass(frozen=True)
class FederatedDescribe:
    lines: tuple[DescribeLine, ...]
    spent: dict[str, float]
    noise: dict[str, tuple[DescribePart, ...]]
    units: dict[str, str]
    excluded: tuple[CenterFailure, ...]
    tables: dict[str, FederatedTable] = field(default_factory=dict)
    releases: dict[tuple[str, str, str], NoisyCounts] = field(default_factory=dict)
    """DP: per (variable, center, arm) the description's noisy counts of the arm's records,
    (present, missing) or (present,) under complete cases, each with its Laplace variance
    (the one size per arm of a consistent Table 1: ``coordinator.protocols.table_one``)."""


def check_release(center: str, release: DescribeRelease, asked: DescribeRequest) -> None:
    """A plausible description: the ε, bounds and bins asked, the ε split adding up to ε,
    quantiles inside the bounds, the sums centred on the DP range its quartiles give (or, from
    a center one version older, on the bounds' midpoint)."""
    def implausible(detail: str) -> CenterFailure:
        return CenterFailure(center, "implausible", detail)

    if not math.isclose(release.epsilon, asked.epsilon, rel_tol=RELEASE_RTOL):
        raise implausible(f"reports ε = {release.epsilon:g}, {asked.epsilon:g} was asked")
    if not math.isclose(sum(p.epsilon for p in release.parts), asked.epsilon,
                        rel_tol=1e-6):
        raise implausible("its ε split does not add up to the ε asked")
    if asked.bounds is not None and tuple(release.bounds) != tuple(asked.bounds):
        raise implausible("clipped to other bounds than asked")
    a, b = release.bounds
    if not a < b:
        raise implausible("states bounds with lower >= upper")
    if not np.allclose(release.edges, histogram_edges((a, b), asked.bins), rtol=RELEASE_RTOL):
        raise implausible("its histogram has other bins than asked")
    if not all(a <= v <= b for v in release.quantiles):
        raise implausible(f"a quantile lies outside the bounds [{a:g}, {b:g}]")
    lo, hi = release.clip if release.clip is not None else (a, b)
    if not a <= lo < hi <= b:
        raise implausible(f"its DP range lies outside the bounds [{a:g}, {b:g}]")
    if not math.isclose(release.center, (lo + hi) / 2.0, rel_tol=RELEASE_RTOL,
                        abs_tol=1e-12 * (b - a)):
        raise implausible("its sums are not centered on its range's midpoint")
    if release.clip is not None:
        if release.subdivisions is None:
            raise implausible("its histogram has no subdivisions")
        by_level = dict(zip(release.levels, release.quantiles, strict=True))
        if 0.25 not in by_level or 0.75 not in by_level:
            raise implausible("it released no quartiles")
        expected = dp_range((by_level[0.25], by_level[0.75]), (a, b))
        if not np.allclose(release.clip, expected, rtol=RELEASE_RTOL, atol=1e-12 * (b - a)):
            raise implausible("its DP range is not the one its quartiles give")


def _pool(variable: str, parts: Sequence[DPDescription]) -> DPDescription:
    try:
        return pool_descriptions(parts)
    except ValueError:
        raise AnalysisFailed(
            f"the centers clipped {variable!r} to different declared bounds, so their "
            "descriptions cannot be pooled: give `bounds` for it in the analysis") from None


async def _units(ports: Sequence[CenterPort], dataset: str,
                 variables: Sequence[str]) -> dict[str, str]:
    """The declared unit of each variable, from the first center that declares one (public
    metadata in ``/v1/info``); none when no info can be read."""
    units: dict[str, str] = {}
    for port in ports:
        try:
            info = await port.info()
        except CenterFailure:
            continue
        found = next((d for d in info.datasets if d.name == dataset), None)
        if found is None:
            continue
        for v in variables:
            meta = found.metadata.get(v)
            if v not in units and meta is not None and meta.unit:
                units[v] = meta.unit
        break
    return units


async def federated_describe(
    survey: Survey,
    *,
    dataset: str,
    variables: Sequence[str],
    groups: tuple[str, str] | None,
    k: int,
    mode: str,
    epsilon: float | None,
    bounds: dict[str, tuple[float, float]] | None,
    bins: int,
    per_center: bool,
    pooled: bool,
    min_centers: int,
    allow_partial: bool,
    table_of: Callable[[str], Awaitable[FederatedTable]],
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> FederatedDescribe:
    """Describe ``variables`` over the survey's usable centers (module docstring)."""
    units = await _units(survey.usable, dataset, variables)
    if mode == "dp":
        assert epsilon is not None
        return await _dp(survey, dataset=dataset, variables=variables, groups=groups,
                         epsilon=epsilon, bounds=bounds or {}, bins=bins, per_center=per_center,
                         pooled=pooled, min_centers=min_centers, allow_partial=allow_partial,
                         units=units)
    return await _table(survey, dataset=dataset, variables=variables, groups=groups, k=k,
                        per_center=per_center, pooled=pooled, min_centers=min_centers,
                        allow_partial=allow_partial, table_of=table_of, lower=lower,
                        upper=upper, units=units)


async def _dp(survey: Survey, *, dataset: str, variables: Sequence[str],
              groups: tuple[str, str] | None, epsilon: float,
              bounds: dict[str, tuple[float, float]], bins: int, per_center: bool,
              pooled: bool, min_centers: int, allow_partial: bool,
              units: dict[str, str]) -> FederatedDescribe:
    arms: list[str | None] = list(groups) if groups is not None else [None]
    asks = [(v, arm, DescribeRequest(variable=v, group=arm, epsilon=epsilon,
                                     bounds=bounds.get(v), bins=bins))
            for v in variables for arm in arms]

    async def ask(request: DescribeRequest) -> tuple[dict[str, DescribeRelease],
                                                     list[CenterFailure]]:
        return await ask_all(
            survey.usable, lambda p: p.release(kinds.DP_DESCRIBE, dataset, request),
            lambda c, r: check_release(c, r, request), allow_partial=allow_partial)

    answers = await asyncio.gather(*(ask(request) for _, _, request in asks))
    failures = {f.center: f for _, failed in answers for f in failed}
    good = [p.center_id for p in survey.usable if p.center_id not in failures]
    excluded = [*survey.excluded, *failures.values()]
    require(max(1, min_centers), good, excluded)
    got = {(v, arm): released for (v, arm, _), (released, _) in zip(asks, answers, strict=True)}
    lines: list[DescribeLine] = []
    noise: dict[str, tuple[DescribePart, ...]] = {}
    spent = {c: 0.0 for c in good}
    releases: dict[tuple[str, str, str], NoisyCounts] = {}
    for v in variables:
        first = got[(v, arms[0])][good[0]].to_result()
        noise[v] = first.parts
        by_center = {c: [got[(v, arm)][c].to_result() for arm in arms] for c in good}
        for c in good:
            spent[c] += sum(d.spent.epsilon for d in by_center[c])
            for arm, d in zip(arms, by_center[c], strict=True):
                scale = d.noise()[0].count
                if scale > 0:
                    found = (d.count,) if d.missing is None else (d.count, d.missing)
                    releases[(v, c, arm or ALL)] = NoisyCounts(
                        tuple(("describe", v, c, arm or ALL, j) for j in range(len(found))),
                        tuple(float(x) for x in found), 2.0 * scale * scale)
        if per_center:
            for c in good:
                for arm, d in zip(arms, by_center[c], strict=True):
                    lines.append(DescribeLine(v, c, arm or ALL, d.summary(), DP_CENTER_METHOD,
                                              d.spent.epsilon))
                if groups is not None:
                    lines.append(DescribeLine(v, c, ALL, _pool(v, by_center[c]).summary(),
                                              DP_POOLED_METHOD, epsilon * len(arms)))
        if pooled:
            for i, arm in enumerate(arms):
                both = _pool(v, [by_center[c][i] for c in good])
                lines.append(DescribeLine(v, POOLED, arm or ALL, both.summary(),
                                          DP_POOLED_METHOD, epsilon))
            if groups is not None:
                every = _pool(v, [d for c in good for d in by_center[c]])
                lines.append(DescribeLine(v, POOLED, ALL, every.summary(), DP_POOLED_METHOD,
                                          epsilon * len(arms)))
    return FederatedDescribe(tuple(lines), spent, noise, units, tuple(excluded),
                             releases=releases)


def _rows_of(table: BinTable, variable: str, center: str,
             groups: tuple[str, str] | None) -> list[DescribeLine]:
    """A table's rows (each arm, then both together) as described lines."""
    def line(arm: str, one: BinTable, group: int = 0) -> DescribeLine:
        try:
            summary = table_describe(one, group)
        except ValueError as exc:
            raise AnalysisFailed(f"{variable!r} at {center}: {exc}") from None
        return DescribeLine(variable, center, arm, summary, TABLE_METHOD, 0.0)

    if groups is None:
        return [line(ALL, table)]
    together = BinTable(limits=table.limits, counts=table.counts.sum(axis=0, keepdims=True),
                        k=table.k)
    out = [line(arm, table, g) for g, arm in enumerate(groups)
           if float(table.counts[g].sum()) > 0]
    return [*out, line(ALL, together)]


async def _table(survey: Survey, *, dataset: str, variables: Sequence[str],
                 groups: tuple[str, str] | None, k: int, per_center: bool, pooled: bool,
                 min_centers: int, allow_partial: bool,
                 table_of: Callable[[str], Awaitable[FederatedTable]], lower: Extreme,
                 upper: Extreme, units: dict[str, str]) -> FederatedDescribe:
    tables = dict(zip(variables, await asyncio.gather(*(table_of(v) for v in variables)),
                      strict=True))
    excluded = {f.center: f for t in tables.values() for f in t.excluded}
    lines: list[DescribeLine] = []
    n_groups = 1 if groups is None else 2
    own: dict[str, dict[str, BinTable]] = {}
    if per_center:
        # After the federated tables: each center's own table is one more exact release of
        # the variable, admitted by its disclosure control against the refinement it gave.
        ports = [p for p in survey.usable if p.center_id not in excluded]
        for v in variables:
            request = TableRequest(variable=v, groups=groups, k=k, lower=lower, upper=upper)

            def check(center: str, release: BinTableRelease, v: str = v) -> None:
                check_table_release(center, release, k=k, n_groups=n_groups,
                                    bounds=survey.bounds[center],
                                    floors=survey.floors(center, v))

            async def ask(port: CenterPort, r: TableRequest = request) -> BinTableRelease:
                return await port.release(kinds.TABLE, dataset, r)

            released, failed = await ask_all(ports, ask, check, allow_partial=allow_partial)
            excluded.update({f.center: f for f in failed})
            own[v] = {c: r.to_table() for c, r in released.items()}
    good = [p.center_id for p in survey.usable if p.center_id not in excluded]
    all_excluded = [*survey.excluded, *(f for f in excluded.values()
                                        if f not in survey.excluded)]
    require(max(1, min_centers), good, all_excluded)
    for v in variables:
        if per_center:
            for c in good:
                lines.extend(_rows_of(own[v][c], v, c, groups))
        if pooled:
            lines.extend(_rows_of(tables[v].table, v, POOLED, groups))
    return FederatedDescribe(tuple(lines), {c: 0.0 for c in good}, {}, units,
                             tuple(all_excluded), tables)
