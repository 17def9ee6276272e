"""Response bodies of the analyst API (the study spec and results are in ``coordinator.study``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.db import StudyStatus
from coordinator.results import StudyResult
from coordinator.study import StudySpec


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class CenterProblem(BaseModel):
    kind: str
    detail: str


class CenterStatus(BaseModel):
    """One registered center as the coordinator sees it now."""

    id: str
    url: str | None = Field(description="base URL (none for an in-process center)")
    healthy: bool
    problem: CenterProblem | None = Field(description="why health or budget failed")
    remaining_epsilon: dict[str, float] | None = Field(
        description="remaining ε per dataset (none when the budget could not be read)"
    )


class StudyCreated(BaseModel):
    id: str
    status: StudyStatus
    status_url: str


class StudySummary(BaseModel):
    id: str
    status: StudyStatus
    dataset: str
    variable: str
    created_by: str | None = Field(description="fingerprint of the analyst's token")
    created_at: str
    updated_at: str


class StudyError(BaseModel):
    """Why a study failed: the coordinator's error body (``center``/``kind`` for a center)."""

    model_config = ConfigDict(extra="allow")

    error: str
    detail: str


class Provenance(BaseModel):
    """One answer a center gave the study, as received (after validation)."""

    center: str
    call: str = Field(description="info, table, refine or mwu")
    dataset: str | None
    request: dict[str, object] | None = Field(description="the body sent (none for info)")
    response: dict[str, object]
    received_at: str


class StudyView(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings")

    id: str
    status: StudyStatus
    spec: StudySpec
    result: StudyResult | None
    error: StudyError | None
    provenance: list[Provenance] | None = Field(
        description="every answer the centers gave, in the order received; none when the "
                    "request asked ?provenance=false (cheap polling)"
    )
    releases_received: int = Field(description="how many answers the centers gave so far")
    created_by: str | None = Field(description="fingerprint of the analyst's token")
    created_at: str
    updated_at: str
