"""Wire models the coordinator parses that ``shared/protocol.py`` does not define yet (at HEAD).

Our copies of what a center answers on ``/v1/health``, ``/v1/info`` and ``/v1/budget``
(``center_agent/api/schemas.py`` on the center side). They are to move to ``shared/protocol.py``
(the lead owns it); until then they ignore unknown fields, so a center that adds a field does not
break us, and they check only what the coordinator relies on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Received(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Health(_Received):
    status: Literal["ok"]


class GroupInfo(_Received):
    column: str
    levels: list[str]


class DatasetInfo(_Received):
    name: str
    variables: list[str]
    group: GroupInfo | None
    n_records: int = Field(ge=0, description="row count rounded down to a multiple of k")
    n_by_group: dict[str, int] = Field(
        description="row count per declared level, each rounded down to a multiple of k"
    )


class CenterInfo(_Received):
    """``GET /v1/info`` (``center_agent/api/schemas.py: CenterInfo`` on the center side)."""

    center_id: str
    k: int = Field(ge=2)
    neighbouring: Literal["add_remove", "swap"]
    datasets: list[DatasetInfo]

    def dataset(self, name: str) -> DatasetInfo | None:
        return next((d for d in self.datasets if d.name == name), None)


class DatasetBudget(_Received):
    total_epsilon: float = Field(ge=0)
    spent_epsilon: float = Field(ge=0)
    remaining_epsilon: float = Field(ge=0)


class Budget(_Received):
    """``GET /v1/budget``."""

    datasets: dict[str, DatasetBudget]
