from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetsDep, SettingsDep
from center_agent.data import round_down
from shared.protocol import CenterInfo, DatasetInfo, GroupInfo

router = APIRouter(tags=["service"])


@router.get("/info")
def info(settings: SettingsDep, datasets: DatasetsDep) -> CenterInfo:
    """What this center exposes; every size is rounded down to a multiple of K."""
    k = settings.k
    described = []
    for dataset in datasets.values():
        n, by_group = dataset.sizes()
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
                n_records=round_down(n, k),
                n_by_group={level: round_down(c, k) for level, c in by_group.items()},
            )
        )
    return CenterInfo(
        center_id=settings.center_id,
        k=k,
        neighbouring=settings.neighbouring,
        quantile_loss_enabled=settings.allow_quantile_loss,
        datasets=described,
    )
