from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetDep, DatasetsDep, LedgerDep
from center_agent.ledger import Ledger
from shared.protocol import Budget, DatasetBudget

router = APIRouter(tags=["privacy"])


def _budget(ledger: Ledger, dataset: str) -> DatasetBudget:
    return DatasetBudget(
        total_epsilon=ledger.total(dataset),
        spent_epsilon=ledger.spent(dataset),
        remaining_epsilon=ledger.remaining(dataset),
    )


@router.get("/budget")
def budget(datasets: DatasetsDep, ledger: LedgerDep) -> Budget:
    """Total, spent and remaining ε of every dataset."""
    return Budget(datasets={name: _budget(ledger, name) for name in datasets})


@router.get("/budget/{dataset}")
def dataset_budget(dataset: DatasetDep, ledger: LedgerDep) -> DatasetBudget:
    """Total, spent and remaining ε of one dataset."""
    return _budget(ledger, dataset.name)
