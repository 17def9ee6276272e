"""K-anonymous bin tables: a center's own table, and its refinement of a coordinator's table.

Both are released through the ledger at ε = 0 (a repeated request gets the identical randomized
limits back instead of fresh ones to average) and admitted by the auditor in the same transaction
(a table that would let earlier releases be subtracted down to fewer than K records is refused).
"""

from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import (
    AuditorDep,
    DatasetDep,
    LedgerDep,
    RngDep,
    SettingsDep,
    effective_k,
)
from center_agent.core.errors import core_errors
from center_agent.ledger import JSONPayload, request_key
from shared.federation import refined_limits
from shared.protocol import BinTableRelease, RefinementRelease, RefinementRequest, TableRequest
from shared.releases import refinement_release, table_release

router = APIRouter(tags=["tables"])


@router.post("/datasets/{dataset}/table")
def own_table(
    dataset: DatasetDep,
    body: TableRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    auditor: AuditorDep,
    rng: RngDep,
) -> BinTableRelease:
    """This center's K-anonymous table of one variable (one group, or two declared levels)."""
    k = effective_k(body.k, settings)
    groups = dataset.groups(body.variable, body.groups)

    def compute() -> JSONPayload:
        with core_errors():
            release = table_release(groups.arrays, body.model_copy(update={"k": k}), rng)
        auditor.admit_table(
            dataset.name, body.variable, groups.grouping, release.limits, groups.by_name, k
        )
        return release.to_payload()

    key = request_key(dataset.name, body.variable, "table", body.to_payload(), 0.0)
    return BinTableRelease.model_validate(ledger.release(dataset.name, key, 0.0, compute))


@router.post("/datasets/{dataset}/table/refine")
def refine(
    dataset: DatasetDep,
    body: RefinementRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    auditor: AuditorDep,
    rng: RngDep,
) -> RefinementRelease:
    """This center's refinement of a table it is given the limits of (Algorithms 4-6)."""
    k = effective_k(body.k, settings)
    groups = dataset.groups(body.variable, body.groups)

    def compute() -> JSONPayload:
        with core_errors():
            release = refinement_release(groups.arrays, body.model_copy(update={"k": k}), rng)
            cells = refined_limits(body.limits, release)
        runs = dict(zip(groups.by_name, (r.run_of_cell for r in release.runs), strict=True))
        auditor.admit_table(
            dataset.name, body.variable, groups.grouping, cells, groups.by_name, k, labels=runs
        )
        return release.to_payload()

    key = request_key(dataset.name, body.variable, "refine", body.to_payload(), 0.0)
    return RefinementRelease.model_validate(ledger.release(dataset.name, key, 0.0, compute))
