from __future__ import annotations

from fastapi import APIRouter

from center_agent.accountant import Accountant
from center_agent.api.deps import AccountantDep, DatasetDep, DatasetsDep, GateDep, LedgerDep
from center_agent.gate import ReleaseGate
from center_agent.ledger import Ledger
from shared.protocol import Budget, DatasetBudget, ExactReleaseUse, LifetimeGuarantee

router = APIRouter(tags=["privacy"])


def _budget(ledger: Ledger, gate: ReleaseGate, accountant: Accountant,
            dataset: str) -> DatasetBudget:
    guarantee = accountant.guarantee(dataset)
    return DatasetBudget(
        total_epsilon=ledger.total(dataset),
        spent_epsilon=ledger.spent(dataset),
        remaining_epsilon=ledger.remaining(dataset),
        exact_releases={
            variable: ExactReleaseUse(releases=n, max_releases=gate.disclosure.max_releases,
                                      limits=limits, max_limits=gate.disclosure.max_limits)
            for variable, (n, limits) in gate.exact_release_use(dataset).items()
        },
        guarantee=LifetimeGuarantee(
            epsilon=guarantee.epsilon, delta=guarantee.delta,
            epsilon_pure=guarantee.epsilon_pure, releases=guarantee.releases,
            method=guarantee.method,
            line=guarantee.line(f"each patient at center {gate.settings.center_id}, "
                                f"dataset {dataset}")),
    )


@router.get("/budget")
def budget(datasets: DatasetsDep, ledger: LedgerDep, gate: GateDep,
           accountant: AccountantDep) -> Budget:
    """Total, spent and remaining ε of every dataset, its lifetime (ε, δ) guarantee, and the use
    of each variable's exact release caps."""
    return Budget(datasets={name: _budget(ledger, gate, accountant, name) for name in datasets})


@router.get("/budget/{dataset}")
def dataset_budget(dataset: DatasetDep, ledger: LedgerDep, gate: GateDep,
                   accountant: AccountantDep) -> DatasetBudget:
    """Total, spent and remaining ε of one dataset, its lifetime guarantee, and its exact
    release caps' use."""
    return _budget(ledger, gate, accountant, dataset.name)
