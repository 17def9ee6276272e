from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetDep, DatasetsDep, LedgerDep
from shared.protocol import Budget, DatasetBudget

router = APIRouter(tags=["privacy"])


@router.get("/budget")
def budget(datasets: DatasetsDep, ledger: LedgerDep) -> Budget:
    """Total, spent and remaining ε of every dataset."""
    return Budget(
        datasets={
            name: DatasetBudget(
                total_epsilon=ledger.total(name),
                spent_epsilon=ledger.spent(name),
                remaining_epsilon=ledger.remaining(name),
            )
            for name in datasets
        }
    )


@router.get("/budget/{dataset}")
def dataset_budget(dataset: DatasetDep, ledger: LedgerDep) -> DatasetBudget:
    """Total, spent and remaining ε of one dataset."""
    return DatasetBudget(
        total_epsilon=ledger.total(dataset.name),
        spent_epsilon=ledger.spent(dataset.name),
        remaining_epsilon=ledger.remaining(dataset.name),
    )
