"""Wire models the coordinator parses that ``shared/protocol.py`` does not define yet.

Copies, on our side, of what the center answers on ``/v1/health``, ``/v1/info``, ``/v1/budget``
and ``/v1/datasets/{dataset}/mwu``. They are to move to ``shared/protocol.py`` (the lead owns it);
until then they ignore unknown fields, so a center that adds a field does not break us, and they
check only what the coordinator relies on.
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


class MWURequest(BaseModel):
    """``POST /v1/datasets/{dataset}/mwu``: the local test of level X against level Y."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    variable: str = Field(min_length=1)
    groups: tuple[str, str]


class MWURelease(_Received):
    """A center's local Mann-Whitney release: U (possibly noised), its null variance, sizes.

    Duck-types as the ``shared.mwu`` local result for the federated tests (they read
    ``statistic``, ``variance``, ``n_x``, ``n_y`` and ``noise_variance``).
    """

    statistic: float = Field(allow_inf_nan=False)
    variance: float = Field(ge=0, allow_inf_nan=False)
    n_x: int = Field(ge=0)
    n_y: int = Field(ge=0)
    noise_variance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
