from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from center_agent.api.deps import DatasetsDep, GateDep, SettingsDep
from center_agent.core.config import DatasetConfig
from center_agent.gate import DatasetState
from shared.protocol import CenterInfo, DatasetInfo, GroupInfo, TimeToEventInfo

router = APIRouter(tags=["service"])


def sizes(config: DatasetConfig, state: DatasetState) -> dict[str, Any]:
    """The sizes shown: the epoch's rounded down to K, or in DP mode the operator's declared
    ones only (a size rounded to K is itself an exact release: docs/privacy.md, "DP mode")."""
    if config.release_mode == "dp":
        return {"n_records": config.declared_n, "n_by_group": dict(config.declared_n_by_group),
                "n_by_variable": {}}
    return {"n_records": state.n, "n_by_group": state.sizes, "n_by_variable": state.by_variable}


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
                **sizes(settings.datasets[dataset.name], state),
                categorical={name: list(c) for name, c in dataset.categories.items()},
                # Public configuration only: the follow-up range and unit (not the columns).
                time_to_event={
                    name: TimeToEventInfo(follow_up=tte.follow_up, unit=tte.unit)
                    for name, tte in settings.datasets[dataset.name].time_to_event.items()},
                epoch=state.epoch,
                paused=state.paused,
                available=state.available,
                release_mode=settings.datasets[dataset.name].release_mode,
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
