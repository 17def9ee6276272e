"""Federated K-anonymous bin table (seed 001 Alg. 4-6; docs/methods.md §2), over ``CenterPort``s.

1. Sizes first (:func:`coordinator.protocols.survey.survey_centers`).
2. The largest center builds its own table (``POST .../table``).
3. The others, largest first, refine it one by one (``POST .../table/refine`` with the signed
   statement of the current limits, never counts: a center refines only limits a center it
   trusts signed); the coordinator folds each release in with
   ``shared.federation.apply_refinement`` and passes the refining center's signed statement of
   the refined limits to the next one.

This is ``shared.federation.federated_table`` over the network: the same order (ties broken by
the registry's order), the same core functions on each side.

Every release is checked before it is used, and a center whose numbers cannot be right is named
(``implausible``): the K it was made for, the number of groups, each count or run total 0 or >= K,
each group's total no larger than the center's declared size allows and no smaller than that
size (``/v1/info`` and every table count the same population, its size rounded down to K), the
refinement fitting the table, and the federated totals equal to the sum of the centers' totals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from coordinator.core.errors import CenterFailure
from coordinator.models import ReusedTable
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import left_out
from coordinator.protocols.survey import Survey, require, survey_centers
from shared import kinds
from shared.binning import BinTable, Extreme
from shared.federation import apply_refinement
from shared.privacy import isolating
from shared.protocol import (
    RELEASE_RTOL,
    BinTableRelease,
    RefinementRelease,
    RefinementRequest,
    SignedLimits,
    TableRequest,
)
from shared.signatures import decode_public_key, verifies


@dataclass(frozen=True)
class FederatedTable:
    """The federated table, who built it (``order[0]``) and who refined it, in order.

    ``center_totals[c]`` are the per-group totals center ``c`` released; ``excluded`` the centers
    left out (only with ``allow_partial``); ``reused`` the kept table it was read from
    (``coordinator.tables``) instead of asked, and ``reused_from`` the study that obtained that
    one (shown only to an admin and that study's owner: ``coordinator.api.access``).
    """

    table: BinTable
    order: tuple[str, ...]
    center_totals: dict[str, tuple[float, ...]]
    excluded: tuple[CenterFailure, ...]
    reused_from: str | None = None
    reused: ReusedTable | None = None
    center_tables: Mapping[str, BinTable] = field(default_factory=dict)
    """Each center's own table of the groups: the builder's, and with ``own_tables`` each
    refiner's, asked just before its refinement (empty for a table kept before)."""


def _implausible(center: str, detail: str) -> CenterFailure:
    return CenterFailure(center, "implausible", detail)


def isolates(counts: npt.ArrayLike, k: int) -> bool:
    """Whether any of ``counts`` lies in 1..K-1: no K-anonymous release holds such a count, so
    a center that sends one is ``implausible``."""
    return bool(isolating(np.asarray(counts, dtype=np.float64), k).any())


def _check_made_for(center: str, what: str, release_k: int, released_groups: int, *, k: int,
                    n_groups: int) -> None:
    """A release made for the K and the number of groups asked (``what`` names it)."""
    if release_k != k:
        raise _implausible(center, f"{what} made for k={release_k}, k={k} was asked")
    if released_groups != n_groups:
        raise _implausible(center, f"{what} has {released_groups} groups, {n_groups} asked")


def _check_totals(center: str, totals: np.ndarray, k: int, bounds: tuple[int, ...],
                  floors: tuple[int, ...] | None = None) -> None:
    """Each group's total within what the center declared: at most ``bounds`` and, with
    ``floors`` (its declared sizes), at least those: ``/v1/info`` and every table count the same
    population, and a declared size is that population's rounded down."""
    for g, (total, bound) in enumerate(zip(totals, bounds, strict=True)):
        if total > bound:
            raise _implausible(
                center, f"group {g} totals {total:g} records, more than its declared size allows "
                f"({bound})"
            )
        if floors is not None and total < floors[g]:
            raise _implausible(
                center, f"group {g} totals {total:g} records, fewer than its declared size "
                f"({floors[g]})"
            )
        if isolates(total, k):
            raise _implausible(center, f"group {g} totals {total:g}, between 1 and k-1={k - 1}")


def check_table_release(
    center: str, release: BinTableRelease, *, k: int, n_groups: int, bounds: tuple[int, ...],
    floors: tuple[int, ...] | None = None,
) -> tuple[float, ...]:
    """The per-group totals of a plausible one-center table; raises ``implausible`` otherwise."""
    _check_made_for(center, "table", release.k, len(release.counts), k=k, n_groups=n_groups)
    counts = np.asarray(release.counts, dtype=np.float64)
    if isolates(counts, k):
        raise _implausible(center, f"table holds a count between 1 and k-1={k - 1}")
    totals = counts.sum(axis=1)
    _check_totals(center, totals, k, bounds, floors)
    return tuple(float(t) for t in totals)


def check_refinement(
    center: str, release: RefinementRelease, *, k: int, n_groups: int, bounds: tuple[int, ...],
    floors: tuple[int, ...] | None = None,
) -> tuple[float, ...]:
    """The per-group totals of a plausible refinement; raises ``implausible`` otherwise."""
    _check_made_for(center, "refinement", release.k, len(release.runs), k=k, n_groups=n_groups)
    totals = []
    for g, runs in enumerate(release.runs):
        t = np.asarray(runs.totals, dtype=np.float64)
        if not np.all(np.isfinite(t)) or np.any(t < 0) or isolates(t, k):
            raise _implausible(
                center, f"group {g}: a run total is negative or between 1 and k-1={k - 1}"
            )
        totals.append(float(t.sum()))
    _check_totals(center, np.asarray(totals), k, bounds, floors)
    return tuple(totals)


def check_signed(center: str, signed: SignedLimits | None, table: BinTable,
                 key: str | None = None) -> SignedLimits:
    """The center's signed statement of ``table``'s limits (the next center refines only
    signed limits); ``implausible`` when it is missing, states other limits or, given the
    center's public ``key`` (from its ``/v1/info``), does not verify: the center that made the
    statement is named, not the next one that would refuse it."""
    if signed is None:
        raise _implausible(center, "the release carries no signed statement of its limits")
    stated = np.asarray(signed.statement.limits, dtype=np.float64)
    if stated.shape != table.limits.shape or not np.array_equal(stated, table.limits):
        raise _implausible(center, "the signed statement states other limits than the release")
    if key is not None:
        try:
            verified = verifies(signed, decode_public_key(key))
        except ValueError:
            raise _implausible(center, "its /v1/info shows no valid signing key") from None
        if not verified:
            raise _implausible(center, "its signed statement does not verify with the key its "
                               "/v1/info shows")
    return signed


def fold(center: str, table: BinTable, release: RefinementRelease,
         center_totals: tuple[float, ...]) -> BinTable:
    """``apply_refinement``, with a release that does not fit named as ``implausible``."""
    try:
        merged = apply_refinement(table, release.to_result())
    except ValueError as exc:
        raise _implausible(center, f"refinement does not fit the table: {exc}") from None
    expected = table.totals + np.asarray(center_totals)
    if not np.allclose(merged.totals, expected, rtol=RELEASE_RTOL, atol=RELEASE_RTOL):
        raise _implausible(center, "refinement changes the table's totals inconsistently")
    return merged


def build_order(sizes: Mapping[str, int], centers: Sequence[str]) -> list[str]:
    """The order ``centers`` build a table in: the largest (declared size of the groups asked)
    first; sorted() is stable, so equal sizes keep the given (the registry's) order."""
    return sorted(centers, key=lambda cid: -sizes[cid])


async def federated_bin_table(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, ...] | None = None,
    k: int = 10,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
    min_centers: int = 1,
    allow_partial: bool = False,
    survey: Survey | None = None,
    own_tables: bool = False,
) -> FederatedTable:
    """The federated table of ``variable``: one group, or one row per level of ``groups`` (two,
    or a study's k arms), in that order.

    With ``own_tables`` each refining center is asked for its own table of the groups just
    before its refinement (``center_tables``: per-center tests need them). Asked first, it is
    a view of the center's canonical table at its own limits and the refinement after it is
    admitted against it; asked after, the center's disclosure control would coarsen it against
    the refinement, whose limits are another center's (often to one bin)."""
    if survey is None:
        survey = await survey_centers(
            centers, dataset=dataset, variable=variable, groups=groups, k=k,
            min_centers=min_centers, allow_partial=allow_partial,
        )
    n_groups = 1 if groups is None else len(groups)
    ids = build_order(survey.sizes, [port.center_id for port in survey.usable])
    by_id = {port.center_id: port for port in survey.usable}
    order = [by_id[cid] for cid in ids]
    excluded = list(survey.excluded)
    table: BinTable | None = None
    signed: SignedLimits | None = None
    done: list[str] = []
    center_totals: dict[str, tuple[float, ...]] = {}
    center_tables: dict[str, BinTable] = {}
    for port in order:
        cid = port.center_id
        own: BinTable | None = None
        # Every release of the variable at this center counts at least these (one reading).
        floors = survey.floors(cid, variable)
        try:
            if table is None or signed is None:
                built = await port.release(
                    kinds.TABLE, dataset,
                    TableRequest(variable=variable, groups=groups, k=k, lower=lower, upper=upper),
                )
                totals = check_table_release(cid, built, k=k, n_groups=n_groups,
                                             bounds=survey.bounds[cid], floors=floors)
                merged = own = built.to_table()
                next_signed = check_signed(cid, built.signed, merged, survey.keys.get(cid))
            else:
                if own_tables:
                    mine = await port.release(kinds.TABLE, dataset, TableRequest(
                        variable=variable, groups=groups, k=k, lower=lower, upper=upper))
                    check_table_release(cid, mine, k=k, n_groups=n_groups,
                                        bounds=survey.bounds[cid], floors=floors)
                    own = mine.to_table()
                refinement = await port.release(
                    kinds.REFINE, dataset,
                    RefinementRequest(variable=variable, groups=groups, k=k, table=signed),
                )
                totals = check_refinement(cid, refinement, k=k, n_groups=n_groups,
                                          bounds=survey.bounds[cid], floors=floors)
                merged = fold(cid, table, refinement, totals)
                next_signed = check_signed(cid, refinement.signed, merged,
                                           survey.keys.get(cid))
        except CenterFailure as failure:
            if not allow_partial:
                raise
            excluded.append(left_out(failure))
            continue
        table, signed = merged, next_signed
        done.append(cid)
        center_totals[cid] = totals
        if own is not None:
            center_tables[cid] = own
    require(max(1, min_centers), done, excluded)
    assert table is not None  # require() refused an empty federation
    return FederatedTable(table, tuple(done), center_totals, tuple(excluded),
                          center_tables=center_tables)
