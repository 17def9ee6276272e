"""Federated Kruskal-Wallis (and Jonckheere-Terpstra) across k arms from K-anonymous tables,
over ``CenterPort``s (docs/methods.md §12).

1. The study's federated table of the k arms, one row per arm
   (:func:`coordinator.protocols.table.federated_bin_table`): Kruskal-Wallis on it, records in
   one bin tied (``shared.kruskal.table_test``).
2. Each center's own table of the arms (the builder's table; each refiner's asked with the
   federated table, just before its refinement: ``federated_bin_table``'s ``own_tables``): its
   own Kruskal-Wallis, and the stratified sum and weighted tests over them
   (``shared.kruskal.sum_test``/``weighted_test``). Only for a kept table obtained without
   them is each center asked for its own table after it (one more exact release, which the
   center's disclosure control may coarsen against its refinement).
3. With ``ordered``: Jonckheere-Terpstra on the federated table and summed over the centers'.

Nothing here spends ε, and nothing is released that the tables do not show: every number is a
function of K-anonymous releases (docs/privacy.md, "Tables of k arms").
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require
from coordinator.protocols.table import FederatedTable, check_table_release
from shared import jonckheere, kinds, kruskal
from shared.binning import BinTable, Extreme
from shared.protocol import BinTableRelease, TableRequest


@dataclass(frozen=True)
class FederatedKruskal:
    """``table``: KW of the federated table; ``centers``: each center's own (table, KW);
    ``stratified``: the sum and weighted tests over them; ``trend``: with ``ordered``, JT of
    the federated table (``"table"``) and summed over the centers (``"sum"``)."""

    table: FederatedTable
    federated: kruskal.KruskalResult
    centers: dict[str, tuple[BinTable, kruskal.KruskalResult]]
    stratified: dict[str, kruskal.FederatedKruskalResult]
    trend: dict[str, jonckheere.JonckheereResult | jonckheere.FederatedJonckheereResult]
    excluded: tuple[CenterFailure, ...]


async def federated_kruskal(
    survey: Survey,
    table: Awaitable[FederatedTable],
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, ...],
    k: int,
    lower: Extreme,
    upper: Extreme,
    min_centers: int,
    allow_partial: bool,
    ordered: bool = False,
    alternative: str = "increasing",
) -> FederatedKruskal:
    """Kruskal-Wallis of ``variable`` across the arms ``groups`` (module docstring); ``table``
    the study's federated table of those arms."""
    fed = await table
    excluded = list(fed.excluded)
    own = {c: fed.center_tables[c] for c in fed.order if c in fed.center_tables}
    # A table kept before centers' own tables were kept: each center asked for its own.
    ports = {p.center_id: p for p in survey.usable}
    missing = [ports[c] for c in fed.order if c in ports and c not in own]
    if missing:
        request = TableRequest(variable=variable, groups=groups, k=k, lower=lower,
                               upper=upper)

        async def ask(port: CenterPort) -> BinTableRelease:
            return await port.release(kinds.TABLE, dataset, request)

        def check(center: str, release: BinTableRelease) -> None:
            check_table_release(center, release, k=k, n_groups=len(groups),
                                bounds=survey.bounds[center],
                                floors=survey.floors(center, variable))

        released, failed = await ask_all(missing, ask, check, allow_partial=allow_partial)
        excluded += failed
        own.update({c: r.to_table() for c, r in released.items()})
        own = {c: own[c] for c in fed.order if c in own}
        require(max(1, min_centers), list(own), excluded)
    local = {c: (t, kruskal.table_test(t)) for c, t in own.items()}
    parts = [r for _, r in local.values()]
    stratified = {"sum": kruskal.sum_test(parts), "weighted": kruskal.weighted_test(parts)}
    trend: dict[str, jonckheere.JonckheereResult | jonckheere.FederatedJonckheereResult] = {}
    if ordered:
        trend["table"] = jonckheere.table_test(fed.table, alternative=alternative)
        trend["sum"] = jonckheere.sum_test(
            [jonckheere.table_test(t, alternative=alternative) for t in own.values()],
            alternative=alternative)
    return FederatedKruskal(fed, kruskal.table_test(fed.table), local, stratified, trend,
                            tuple(excluded))
