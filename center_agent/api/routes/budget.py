from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetDep, DatasetsDep, GateDep, LedgerDep
from center_agent.gate import ReleaseGate
from center_agent.ledger import Ledger
from shared.protocol import Budget, DatasetBudget, ExactReleaseUse

router = APIRouter(tags=["privacy"])


def _budget(ledger: Ledger, gate: ReleaseGate, dataset: str) -> DatasetBudget:
    return DatasetBudget(
        total_epsilon=ledger.total(dataset),
        spent_epsilon=ledger.spent(dataset),
        remaining_epsilon=ledger.remaining(dataset),
        exact_releases={
            variable: ExactReleaseUse(releases=n, max_releases=gate.disclosure.max_releases,
                                      limits=limits, max_limits=gate.disclosure.max_limits)
            for variable, (n, limits) in gate.exact_release_use(dataset).items()
        },
    )


@router.get("/budget")
def budget(datasets: DatasetsDep, ledger: LedgerDep, gate: GateDep) -> Budget:
    """Total, spent and remaining ε of every dataset, and the use of each variable's exact
    release caps."""
    return Budget(datasets={name: _budget(ledger, gate, name) for name in datasets})


@router.get("/budget/{dataset}")
def dataset_budget(dataset: DatasetDep, ledger: LedgerDep, gate: GateDep) -> DatasetBudget:
    """Total, spent and remaining ε of one dataset, and its exact release caps' use."""
    return _budget(ledger, gate, dataset.name)
