"""Response bodies of the service endpoints (health, info, budget).

Center-internal until ``shared/protocol.py`` defines them; the release endpoints take their
request and response models from ``shared/protocol.py`` only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class GroupInfo(BaseModel):
    column: str
    levels: list[str]


class DatasetInfo(BaseModel):
    name: str
    variables: list[str]
    group: GroupInfo | None
    n_records: int = Field(description="row count rounded down to a multiple of k")
    n_by_group: dict[str, int] = Field(
        description="row count per declared level, each rounded down to a multiple of k"
    )


class CenterInfo(BaseModel):
    center_id: str
    k: int
    neighbouring: Literal["add_remove", "swap"]
    quantile_loss_enabled: bool
    datasets: list[DatasetInfo]


class DatasetBudget(BaseModel):
    total_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float


class Budget(BaseModel):
    datasets: dict[str, DatasetBudget]
