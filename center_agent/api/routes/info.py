from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetsDep, GateDep, SettingsDep
from shared.protocol import CenterInfo, DatasetInfo, GroupInfo

router = APIRouter(tags=["service"])


@router.get("/info")
def info(settings: SettingsDep, datasets: DatasetsDep, gate: GateDep) -> CenterInfo:
    """What this center exposes; every size is its epoch's, rounded down to a multiple of K. A
    dataset whose source cannot be read is listed as unavailable (the others as usual): one
    broken source does not take the center's other datasets down."""
    described = []
    for dataset in datasets.values():
        state = gate.describe(dataset.name)
        group = (
            GroupInfo(column=dataset.group_column, levels=list(dataset.levels))
            if dataset.group_column is not None
            else None
        )
        described.append(
            DatasetInfo(
                name=dataset.name,
                variables=list(dataset.variables),
                group=group,
                metadata=dict(settings.datasets[dataset.name].metadata),
                n_records=state.n,
                n_by_group=state.sizes,
                n_by_variable=state.by_variable,
                categorical={name: list(c) for name, c in dataset.categories.items()},
                epoch=state.epoch,
                paused=state.paused,
                available=state.available,
            )
        )
    return CenterInfo(
        center_id=settings.center_id,
        k=settings.k,
        neighbouring=settings.neighbouring,
        quantile_loss_enabled=settings.allow_quantile_loss,
        datasets=described,
        signing_key=gate.keys.public_key,
    )
