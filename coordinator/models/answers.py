"""What the study routes answer: a study's view with its provenance and reproducibility record, its
summary, the centers' status."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.models.study import Software, StudyError, StudyResult, StudySpec, StudyStatus


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class CenterProblem(BaseModel):
    kind: str
    detail: str


DatasetState = Literal["ok", "paused", "unavailable"]


def dataset_state(*, paused: bool, available: bool) -> DatasetState:
    """A dataset's state from its ``/v1/info`` entry."""
    return "unavailable" if not available else "paused" if paused else "ok"


class CenterStatus(BaseModel):
    """One registered center as the coordinator sees it now."""

    id: str
    url: str | None = Field(description="base URL (none for an in-process center)")
    healthy: bool = Field(description="its /v1/health answers")
    serving: bool = Field(
        default=False, description="healthy and its budget and info answer too: it can take "
        "part in a study (a healthy center whose info fails is left out, as the catalog says)")
    problem: CenterProblem | None = Field(description="why health or budget failed")
    remaining_epsilon: dict[str, float] | None = Field(
        description="remaining ε per dataset (none when the budget could not be read)"
    )
    datasets: dict[str, DatasetState] | None = Field(
        default=None, description="each dataset's state as the center's /v1/info shows it: "
        "ok, paused (its data changed; releases wait for its operator; never in DP mode) or "
        "unavailable (its source cannot be read now); none when the info could not be read")


class StudyCreated(BaseModel):
    id: str
    status: StudyStatus
    status_url: str


class StudySummary(BaseModel):
    id: str
    status: StudyStatus
    title: str | None = None
    dataset: str
    variable: str
    created_by: str | None = Field(description="the id of the analyst who owns the study")
    created_at: str
    updated_at: str


class Provenance(BaseModel):
    """One answer a center gave the study. An admin gets the answer as received (after
    validation); an analyst what it needs to trust the result, without the raw numbers
    (``coordinator.provenance``)."""

    center: str
    call: str = Field(description="info or the release kind (table, refine, mwu, dp_...)")
    dataset: str | None
    request: dict[str, object] | None = Field(
        description="the body sent (none for info); for an analyst its public parameters")
    epsilon: float | None = Field(
        default=None, description="ε the center spent on it (0 for a K-anonymous release)")
    mechanism: str | None = Field(
        default=None, description="how the answer was noised (laplace, gaussian, the DP "
                                  "algorithm), where it was")
    noise_scale: float | None = Field(default=None, description="the noise's scale, if stated")
    response: dict[str, object] | None = Field(
        default=None, description="the answer as received: admins only")
    received_at: str


class CenterRecord(BaseModel):
    """One center's part in a study, as it published it: its K, neighbouring relation and the
    data version (epoch) of the dataset its releases came from, the ε it spent and the
    mechanisms its answers name."""

    center: str
    included: bool = Field(description="the result holds its releases (false: left out)")
    k: int | None = Field(description="the center's own K (none: its info was not recorded)")
    neighbouring: str | None
    epoch: int | None = Field(description="the dataset's data version its releases come from")
    data_fingerprint: str | None = Field(
        default=None, description="none: the centers publish no fingerprint of their data, "
                                  "only the epoch (a new epoch whenever the data change)")
    epsilon: float = Field(description="ε the center spent on this study's releases")
    mechanisms: list[str] = Field(description="how its answers were noised, as they state it")


class Reproducibility(BaseModel):
    """What is needed to redo a study or cite it (docs/coordinator.md, "Exports and the
    reproducibility record"): the software, the spec as submitted and its SHA-256, the centers'
    data versions and ε, K, the algorithms, and which random seeds are public (none)."""

    software: Software | None
    software_note: str | None = None
    spec_sha256: str = Field(description="SHA-256 of the spec as stored (canonical JSON)")
    k: int
    centers: list[CenterRecord]
    algorithms: list[str] = Field(description="per analysis of the spec, what computed it")
    seeds: str = Field(description="which random seeds are public")


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
    created_by: str | None = Field(description="the id of the analyst who owns the study")
    created_at: str
    updated_at: str
    reproducibility: Reproducibility | None = Field(
        default=None, description="the study's reproducibility record (with the provenance "
                                  "only; docs/coordinator.md, \"Exports\")")
