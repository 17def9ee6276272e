"""Discovery and the dry run: the catalog, and the plan a dry run answers with
(docs/coordinator.md, "Catalog" and "Dry run")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from coordinator.models.answers import CenterProblem
from coordinator.models.study import AnalysisKind
from coordinator.models.table import REUSED_FROM_SEEN_BY, ReusedTable
from shared.fields import Extreme, VariableMeta


class CatalogTimeToEvent(BaseModel):
    """A time-to-event variable as a center declares it (``shared.protocol.TimeToEventInfo``):
    its public follow-up range and unit."""

    follow_up: tuple[float, float]
    unit: str | None = None


class CatalogEntry(BaseModel):
    """One center's declaration of a dataset: its names, its sizes rounded down to the center's
    K (never finer) and the ε its budget has left."""

    center: str
    k: int = Field(description="the center's K: it releases no count in 1..K-1")
    variables: list[str]
    group_column: str | None
    levels: list[str]
    n_records: int | None = Field(
        description="records, rounded down to a multiple of the center's K (release_mode "
                    "'dp': the declared size, or none)")
    n_by_group: dict[str, int] = Field(
        description="records per level, each rounded down to K (release_mode 'dp': the "
                    "declared sizes as declared, none for a level without one)")
    release_mode: Literal["k_anonymous", "dp"] = Field(
        default="k_anonymous", description="'dp': every release of the dataset at this center "
        "is differentially private (exact analyses are refused)")
    epoch: int
    paused: bool = Field(description="the data changed; releases wait for the operator (never "
                         "in DP mode: its releases come from the data as they are)")
    available: bool = Field(default=True, description="false: the center cannot read this "
                            "dataset's source now (its other datasets are not affected)")
    remaining_epsilon: float | None = Field(
        description="ε left in the center's budget for the dataset (none: budget unreadable)")
    metadata: dict[str, VariableMeta] = Field(
        default_factory=dict, description="public metadata the center declares per variable: "
        "bounds, unit, resolution")
    categorical: dict[str, list[str]] = Field(
        default_factory=dict, description="categorical variables and their public categories, "
        "as the center declares them (not among `variables`, which are numeric)")
    time_to_event: dict[str, CatalogTimeToEvent] = Field(
        default_factory=dict, description="time-to-event variables and their public follow-up "
        "ranges, as the center declares them (released only as DP life tables)")


class CatalogDataset(BaseModel):
    """A dataset as the centers that declare it publish it."""

    name: str
    variables: list[str] = Field(description="declared by at least one center (each center's "
                                             "own list is in `centers`)")
    levels: list[str] = Field(description="group levels declared by at least one center")
    categorical: list[str] = Field(default_factory=list,
                                   description="categorical variables declared by at least one "
                                               "center")
    time_to_event: list[str] = Field(default_factory=list,
                                     description="time-to-event variables declared by at least "
                                                 "one center")
    centers: list[CatalogEntry]


class CatalogCenter(BaseModel):
    """A registered center and, when it could not be asked, why."""

    id: str
    url: str | None = Field(description="base URL (none for an in-process center)")
    k: int | None = Field(description="the center's K (none when its info could not be read)")
    problem: CenterProblem | None = Field(
        description="why its info (then none of its datasets is listed) or budget failed")


class Catalog(BaseModel):
    """What every registered center holds (``GET /v1/catalog``)."""

    datasets: list[CatalogDataset]
    centers: list[CatalogCenter]


PlanRefusalReason = Literal[
    "unknown_name", "center_k", "dataset_paused", "dataset_unavailable", "budget_exceeded",
    "quota_exceeded",
    "center_unavailable", "too_few_centers", "release_limit_reached", "estimator_not_offered",
    "analysis_note",
    "dp_mode_exact",
]


class PlanRefusal(BaseModel):
    """Something that would be refused if the spec were submitted."""

    reason: PlanRefusalReason
    center: str | None = Field(description="the center concerned (none: the whole study)")
    detail: str
    blocking: bool = Field(description="true: the study would be refused or fail; false: "
                                       "the center would be left out (allow_partial)")


class PlannedSpend(BaseModel):
    """The ε one analysis would make one center spend."""

    analysis: int = Field(description="index in the spec")
    kind: AnalysisKind
    epsilon: float
    exact: bool = Field(description="false: at most this (yj_data: Brent may stop early)")


class CenterPlan(BaseModel):
    """One selected center in a dry run."""

    center: str
    k: int | None
    spends: list[PlannedSpend]
    epsilon: float = Field(description="ε the study would spend there, in all")
    exact: bool = Field(description="false: `epsilon` is an upper bound")
    remaining_epsilon: float | None = Field(
        description="the center's budget left for the dataset now (none: unreadable)")
    remaining_after: float | None
    quota: float | None = Field(description="the analyst's ε quota there (none: no limit)")
    quota_spent: float
    quota_left_after: float | None


class KeptTableView(BaseModel):
    """A federated table the coordinator kept (``coordinator.tables``): what it was asked for,
    the centers that built it with their data versions (epochs), when it was obtained and, for
    an admin or the analyst who owns it, the study that obtained it. ``current``: every one of
    its centers is still at that epoch (a study asking the same table of the same centers would
    reuse it)."""

    groups: list[str] | None
    k: int
    lower: Extreme
    upper: Extreme
    centers: dict[str, int]
    study_id: str | None = Field(description="the study that obtained it: "
                                 + REUSED_FROM_SEEN_BY)
    created_at: str
    current: bool


class PlannedTable(BaseModel):
    """How the study would get its federated table: ``reused`` a kept table (nothing asked
    of the centers), or new from ``centers`` in the order they would build it (each releases
    one table or refinement, ``releases`` says which are new). ``detail`` says
    which and what follows; ``kept`` lists the tables of the variable kept so far, the ones a
    study could reuse (same groups, K, closing, centers and current data versions)."""

    reused: ReusedTable | None = Field(
        default=None, description="the kept table the study would read (none: a new table)")
    reused_from: str | None = Field(
        description="the study that obtained the kept table the study would read: "
        + REUSED_FROM_SEEN_BY)
    centers: list[str]
    releases: dict[str, Literal["stored", "new", "refused"]] = Field(
        default_factory=dict, description="per center of a new table: `stored` (it asked the "
        "same before: the center answers from its stored answer, nothing new is released), "
        "`new` (a new release, coarsened against its earlier ones) or `refused`")
    detail: str
    kept: list[KeptTableView]


class PlannedPower(BaseModel):
    """The power a Mann-Whitney analysis would have (``shared.mwu_power``; docs/methods.md
    §3.9): the sum test at level ``alpha``, ε ``epsilon`` (none: no noise), the centers' sizes
    as their info shows them (rounded down to their K), at a common probabilistic index θ.
    ``power[i]`` is at ``thetas[i]``; ``theta_at_target`` the θ with ``target`` power (none:
    no θ below 0.999 reaches it). For ``alternative = "greater"`` the θ's are P(X > Y)."""

    analysis: int
    test: Literal["sum"] = "sum"
    epsilon: float | None
    alpha: float
    alternative: str
    sizes: dict[str, tuple[int, int]]
    thetas: list[float]
    power: list[float]
    target: float
    theta_at_target: float | None
    method: str
    detail: str


class PlannedError(BaseModel):
    """One part's 95 % error at one center (or ``pooled``), before anything is spent
    (``shared.dp_utility``): in records (a rank error, a count) or in the variable's values,
    ``share`` of the size or of the bounds' width; ``uninformative`` past the threshold."""

    center: str
    arm: str | None = None
    variable: str | None = None
    part: str
    n: int
    error: float
    unit: Literal["records", "value"]
    share: float
    uninformative: bool


class PlannedUtility(BaseModel):
    """What a DP analysis' ε buys (docs/methods.md §9.6): each part's 95 % error at the sizes
    the taking-part centers show and the asked ε; ``uninformative`` when any part's error is
    above ``threshold`` of the size (records) or of the bounds (values)."""

    analysis: int
    kind: str
    epsilon: float
    threshold: float
    errors: list[PlannedError]
    uninformative: bool
    detail: str


class StudyPlan(BaseModel):
    """What a study would do, without doing it (``POST /v1/studies?dry_run=true``): nothing is
    created, released or spent."""

    dataset: str
    variable: str
    centers: list[CenterPlan]
    refusals: list[PlanRefusal]
    would_run: bool = Field(description="no blocking refusal")
    table: PlannedTable | None = Field(
        default=None, description="the federated table the study needs (none: it needs none)")
    power: list[PlannedPower] = Field(
        default_factory=list, description="per Mann-Whitney analysis, the sum test's power "
        "at the study's ε and the centers' sizes (none when no center's sizes are known)")
    utility: list[PlannedUtility] = Field(
        default_factory=list, description="per DP analysis, the 95 % error its ε buys at the "
        "centers' sizes, and whether that leaves it uninformative (docs/methods.md §9.6)")
