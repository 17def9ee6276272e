"""Wire models: the only shapes that cross between a center and the coordinator.

Both services and the in-process simulations speak these pydantic v2 models. They are frozen,
refuse unknown fields, and carry infinite limits as the strings ``"Infinity"``/``"-Infinity"``
so that the JSON stays standard. :class:`WireModel` is their one base: one serialization
(:meth:`WireModel.to_payload`, :func:`canonical_json`) for what a center stores, signs and keys
requests by. Their field types (ε, bounds, levels, extremes) are :mod:`shared.fields`'.

The models sit on top of the core: a release converts from the pure result of the algorithm that
made it (``from_result``) and back (``to_result``); nothing in the core imports this module. The
release kinds that pair a request with its release are declared in :mod:`shared.kinds`.
"""

from __future__ import annotations

import hashlib
import math
from itertools import pairwise
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    FiniteFloat,
    NonNegativeInt,
    model_validator,
)

from shared._validation import RELEASE_RTOL as RELEASE_RTOL  # re-exported: checks of releases
from shared.binning import BinTable, Extreme, ExtremeKind
from shared.describe import DescribePart, DPDescription
from shared.dp.boxplot import BoxplotResult
from shared.dp.life_table import DPLifeTable, project_release
from shared.dp.mwu import SIZE_SHARE as DP_MWU_SIZE_SHARE
from shared.dp.mwu import DPMannWhitney
from shared.dp.pooled import Extremes, ThresholdCounts, TreeHistogram
from shared.dp.uncertainty import laplace_halfwidth
from shared.federation import Refinement, Runs
from shared.fields import (
    MIN_EPSILON,
    Bounds,
    DPQuantileAlgorithm,
    Epsilon,
    Levels,
    canonical_method,
    check_leaves,
    epsilon_field,
)
from shared.fields import VariableMeta as VariableMeta  # re-exported: part of DatasetInfo
from shared.mwu import Alternative, MannWhitneyResult, released_result
from shared.noisy_null import NoiseLaw
from shared.privacy import Neighbouring, PrivacySpent, ReleaseMode
from shared.wire import WireModel as WireModel  # re-exported: the base of every wire model
from shared.wire import canonical_json as canonical_json  # re-exported

MAX_TABLE_GROUPS = 32
"""The most declared levels one table (or refinement) counts, one row each (a study's arms)."""

TableGroups = Annotated[tuple[str, ...], Field(min_length=2, max_length=MAX_TABLE_GROUPS)]
"""The declared levels a table counts, one row each in the order given: two (X, Y) or more
(a study's arms); a two-level table's JSON is the pair it always was."""


class BinTableRelease(WireModel):
    """A K-anonymous bin table: ``limits`` c_0 < ... < c_B and per-group ``counts``."""

    limits: list[float] = Field(min_length=2)
    counts: list[list[float]] = Field(min_length=1, max_length=MAX_TABLE_GROUPS)
    k: int = Field(ge=2)
    signed: SignedLimits | None = Field(
        default=None, description="the center's signed statement of these limits (to refine)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> BinTableRelease:
        _check_limits(self.limits)
        for g, row in enumerate(self.counts):
            if len(row) != len(self.limits) - 1:
                raise ValueError(
                    f"group {g} has {len(row)} counts for {len(self.limits) - 1} bins"
                )
            if not all(math.isfinite(c) and c >= 0 for c in row):
                raise ValueError(f"group {g} has a negative or non-finite count")
        return self

    @classmethod
    def from_table(cls, table: BinTable) -> BinTableRelease:
        return cls(limits=table.limits.tolist(), counts=table.counts.tolist(), k=table.k)

    def to_table(self) -> BinTable:
        return BinTable(
            limits=np.asarray(self.limits, dtype=np.float64),
            counts=np.asarray(self.counts, dtype=np.float64),
            k=self.k,
        )


class ErrorBody(WireModel):
    """Every refusal or failure either service answers with: a stable code and a message.

    ``error`` codes of privacy refusals (the service working as designed) are distinct from
    failures, so a coordinator can tell "refused" from "broken". Extra fields (for example
    ``remaining_epsilon``) may follow; they are ignored here.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    error: str
    detail: str


MAX_BATCH = 64
"""The most releases one batch request may carry (``POST /v1/datasets/{dataset}/releases``)."""


class BatchItem(WireModel):
    """One release in a batch: the kind's name (``shared.kinds``) and its request body."""

    kind: str = Field(min_length=1, max_length=64)
    request: dict[str, Any]


class BatchRequest(WireModel):
    """Several releases of one dataset in one call: a study's releases to one center in one
    round. The center answers them in order, in one transaction, each exactly as its own call
    would be answered (same checks, accounting, audit record and stored answer)."""

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class BatchAnswer(WireModel):
    """One item's answer: the HTTP status its own call would have had, with the release
    (2xx) or the error body (4xx/5xx)."""

    status: int = Field(ge=100, le=599)
    release: dict[str, Any] | None = None
    error: ErrorBody | None = None

    @model_validator(mode="after")
    def _one_of(self) -> BatchAnswer:
        if (self.release is None) == (self.error is None):
            raise ValueError("an answer carries either a release or an error")
        if (self.release is not None) != (200 <= self.status < 300):
            raise ValueError("a release comes with a 2xx status, an error with any other")
        return self


class BatchRelease(WireModel):
    """The answers to a :class:`BatchRequest`, one per item, in its order."""

    answers: list[BatchAnswer]


class Health(WireModel):
    status: Literal["ok"] = "ok"


class GroupInfo(WireModel):
    column: str
    levels: list[str]


class TimeToEventInfo(WireModel):
    """A declared time-to-event variable as a center shows it: the public ``follow_up`` range
    (from the start of follow-up, in ``unit``), which every DP life table's grid lies in; a time
    after its end is censored there (administratively)."""

    follow_up: tuple[FiniteFloat, FiniteFloat]
    unit: str | None = None

    @model_validator(mode="after")
    def _range(self) -> TimeToEventInfo:
        if not 0 <= self.follow_up[0] < self.follow_up[1]:
            raise ValueError("`follow_up` must be (start, end) with 0 <= start < end")
        return self


class DatasetInfo(WireModel):
    name: str
    variables: list[str]
    group: GroupInfo | None
    metadata: dict[str, VariableMeta] = Field(
        default_factory=dict, description="public metadata of the variables that declare it")
    n_records: int | None = Field(
        ge=0, description="row count rounded down to a multiple of k; in release_mode 'dp' the "
                          "operator's declared size, or none")
    n_by_group: dict[str, NonNegativeInt] = Field(
        description="row count per declared level, each rounded down to a multiple of k; in "
                    "release_mode 'dp' the declared sizes of the levels that declare one"
    )
    categorical: dict[str, list[str]] = Field(
        default_factory=dict,
        description="categorical variables and their public categories, in the declared order "
                    "cells are merged in (the missing cell last)")
    time_to_event: dict[str, TimeToEventInfo] = Field(
        default_factory=dict,
        description="time-to-event variables (a time and an event indicator read together) and "
                    "their public follow-up ranges; released only as DP life tables "
                    "(``dp_life_table``)")
    n_by_variable: dict[str, dict[str, NonNegativeInt]] = Field(
        default_factory=dict,
        description="per variable and level, the records whose value is present, each rounded "
                    "down to a multiple of k; given only by a center whose releases count each "
                    "variable's present records (missing = \"per_variable\"): the rest of a "
                    "level's records miss the variable")
    release_mode: ReleaseMode = Field(
        default="k_anonymous",
        description="'dp': every release of the dataset is differentially private (exact kinds "
                    "refused with 403 dp_mode_refuses_exact; sizes are declarations)")
    epoch: int = Field(default=1, ge=1, description="the data version releases come from (in "
                       "DP mode the operator's: it moves only when the operator rolls)")
    paused: bool = Field(
        default=False,
        description="the data changed and releases wait for the operator's new epoch (never in "
                    "DP mode, whose releases come from the data as they are)",
    )
    available: bool = Field(
        default=True,
        description="false: the dataset's source cannot be read now (its releases answer 503 "
                    "data_source_error until its operator fixes it; the center's other datasets "
                    "are not affected); the sizes are then those of its current epoch",
    )


class CenterInfo(WireModel):
    """What a center exposes (``GET /v1/info``); sizes are rounded so no small count leaks."""

    center_id: str
    k: int = Field(ge=2)
    neighbouring: Neighbouring
    quantile_loss_enabled: bool
    datasets: list[DatasetInfo]
    signing_key: str | None = Field(
        default=None, description="base64 Ed25519 public key the center signs its tables with"
    )


class ExactReleaseUse(WireModel):
    """How much of a variable's disclosure memory its exact releases (tables, refinements) use:
    past either cap the center refuses a new one (``release_limit_reached``). Counts of releases
    already made, never of records."""

    releases: NonNegativeInt
    max_releases: NonNegativeInt
    limits: NonNegativeInt
    max_limits: NonNegativeInt


class LifetimeGuarantee(WireModel):
    """Every noisy release of a dataset to date, composed (``shared.accounting``): the dataset
    is ``(epsilon, delta)``-DP and ``(epsilon_pure, 0)``-DP for each patient."""

    epsilon: float
    delta: float
    epsilon_pure: float
    releases: int
    method: str
    line: str = Field(description="the guarantee in one sentence, for results and reports")


class DatasetBudget(WireModel):
    total_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float
    exact_releases: dict[str, ExactReleaseUse] = Field(
        default_factory=dict, description="per variable with exact releases: their number and "
        "limits against the center's caps")
    guarantee: LifetimeGuarantee | None = Field(
        default=None, description="the lifetime guarantee of everything released with noise "
        "(absent from centers older than the accountant)")


class Budget(WireModel):
    """Remaining privacy budget per dataset (``GET /v1/budget``)."""

    datasets: dict[str, DatasetBudget]


MAX_LIMITS = 100_000
"""The most bins a table sent to a center may have (a refinement's work and memory grow with
them; a hospital's table of 10^6 records at K = 10 has fewer)."""


def _check_limits(limits: list[float]) -> None:
    lim = np.asarray(limits)
    if np.isnan(lim).any() or not np.all(lim[1:] > lim[:-1]):
        raise ValueError("limits must be strictly increasing numbers")
    if not np.isfinite(lim[1:-1]).all():
        raise ValueError("interior limits must be finite")


class LimitsStatement(WireModel):
    """What a center states, and signs, about a table it released: these are the limits of a
    K-anonymous table of (dataset, variable, groups, k) after its own release.

    A table's builder states its table's limits; a center that refines a table states the
    refined limits and names the statement it refined (``parent``, its SHA-256). ``lower`` and
    ``upper`` say how each extreme limit was made, so the next center treats values beyond it
    as the table did (a buffer moves out, a natural limit counts them in the extreme bin).
    """

    center_id: str = Field(min_length=1, max_length=64)
    dataset: str = Field(min_length=1, max_length=128)
    variable: str = Field(min_length=1, max_length=128)
    groups: TableGroups | None = None
    k: int = Field(ge=2)
    limits: list[float] = Field(min_length=2, max_length=MAX_LIMITS + 1)
    lower: ExtremeKind
    upper: ExtremeKind
    parent: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _limits(self) -> LimitsStatement:
        _check_limits(self.limits)
        return self

    def signing_bytes(self) -> bytes:
        """The exact bytes a center signs and a peer verifies."""
        return canonical_json(self.to_payload()).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.signing_bytes()).hexdigest()


class SignedLimits(WireModel):
    """A :class:`LimitsStatement` with its center's Ed25519 signature (base64, 64 bytes).

    A center refines only limits one of its configured peers (or itself) signed: limits made up
    by a caller could be placed around single records and turn a refinement into an oracle.
    """

    statement: LimitsStatement
    signature: str = Field(min_length=80, max_length=100)


class TableRequest(WireModel):
    """Ask a center for its own K-anonymous table of ``variable``.

    ``groups`` names the declared levels of the dataset's group column, one row each in that
    order: two (X and Y) or more (a study's arms, at most :data:`MAX_TABLE_GROUPS`); None asks
    for a one-group table of every record.
    """

    variable: str = Field(min_length=1)
    groups: TableGroups | None = None
    k: int = Field(ge=2)
    lower: Extreme = "buffer"
    upper: Extreme = "buffer"


class RefinementRequest(WireModel):
    """Ask a new center to refine a table: the signed statement of its limits, never its counts.

    ``table`` must be signed by one of the center's peers (or by itself) for this dataset,
    ``variable``, ``groups`` and ``k``. ``groups`` as in :class:`TableRequest`: one run list
    per level, in the order given.
    """

    variable: str = Field(min_length=1)
    groups: TableGroups | None = None
    k: int = Field(ge=2)
    table: SignedLimits

    @property
    def limits(self) -> list[float]:
        return self.table.statement.limits


class GroupRuns(WireModel):
    """The new center's records of one group, as K-anonymous run totals.

    ``run_of_cell[i]`` names the run that refined cell ``i`` belongs to; ``totals[r]`` is the
    number of the center's records in run ``r`` (0 or >= K). Runs need not be contiguous.
    """

    run_of_cell: list[int]
    totals: list[float]


class RefinementRelease(WireModel):
    """The new center's half of Algorithms 4-6: splits, run totals and moved extreme limits.

    ``split_limits[i]`` is a new (randomized) interior limit inside existing bin
    ``split_bins[i]``; both lists are in increasing order. Refined cells are the existing bins
    cut at those limits, numbered left to right.
    """

    k: int = Field(ge=2)
    split_bins: list[int] = Field(default_factory=list)
    split_limits: list[float] = Field(default_factory=list)
    runs: list[GroupRuns] = Field(min_length=1, max_length=MAX_TABLE_GROUPS)
    lower: float | None = None
    upper: float | None = None
    signed: SignedLimits | None = Field(
        default=None, description="the center's signed statement of the refined limits"
    )

    @model_validator(mode="after")
    def _paired(self) -> RefinementRelease:
        if len(self.split_bins) != len(self.split_limits):
            raise ValueError("split_bins and split_limits must have the same length")
        return self

    @classmethod
    def from_result(cls, refinement: Refinement) -> RefinementRelease:
        return cls(
            k=refinement.k, split_bins=refinement.split_bins,
            split_limits=refinement.split_limits,
            runs=[GroupRuns(run_of_cell=r.run_of_cell, totals=r.totals) for r in refinement.runs],
            lower=refinement.lower, upper=refinement.upper,
        )

    def to_result(self) -> Refinement:
        """The release as the core folds it (``shared.federation.apply_refinement``)."""
        return Refinement(
            k=self.k, split_bins=list(self.split_bins), split_limits=list(self.split_limits),
            runs=[Runs(run_of_cell=list(r.run_of_cell), totals=list(r.totals))
                  for r in self.runs],
            lower=self.lower, upper=self.upper,
        )


class MWURequest(WireModel):
    """Ask a center for its local Mann-Whitney statistic of ``variable`` between two levels.

    With ``epsilon`` the center adds Laplace noise calibrated to U's sensitivity under ``swap``
    (group sizes treated as public) and debits ε from the dataset's budget.
    """

    variable: str = Field(min_length=1)
    groups: tuple[str, str]
    epsilon: Epsilon | None = None


class MWUNoise(WireModel):
    """The law of the noise a center added to U: ``laplace`` of scale b (variance 2b²) or
    ``gaussian`` of standard deviation σ (variance σ²)."""

    kind: Literal["laplace", "gaussian"]
    scale: float = Field(gt=0, allow_inf_nan=False)

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2 if self.kind == "laplace" else self.scale**2

    def to_law(self) -> NoiseLaw:
        if self.kind == "laplace":
            return NoiseLaw.laplace(self.scale)
        return NoiseLaw.gaussian(self.scale)

    @classmethod
    def from_law(cls, law: NoiseLaw) -> MWUNoise:
        if law.kind not in ("laplace", "gaussian"):
            raise ValueError(f"only Laplace or Gaussian noise travels on the wire, not {law.kind}")
        return cls(kind=law.kind, scale=law.scale)


class MWURelease(WireModel):
    """A center's local MWU release: U (+ noise), its null variance V, σ² of the noise and the
    noise's law, sizes.

    ``noise`` and ``noise_variance`` must agree (:meth:`noise_law`): the coordinator names a
    center whose release breaks that ``implausible`` (a well-formed answer with numbers that
    cannot be right), so parsing does not refuse it. A payload without the ``noise`` key and
    with σ² > 0 predates the field; every noisy MWU release the protocol asks for is Laplace
    (:class:`MWURequest`), so it is read as Laplace of variance σ².

    ``exact_log_tails``: a small center's release without noise (n + m <= 50) carries
    (log P(U >= U_obs), log P(U <= U_obs)) under U's exact permutation law given its ties
    (``shared.mwu``; docs/methods.md §3.1, docs/privacy.md guarantee 2): with ties the released
    numbers do not determine that law. Checked by the coordinator
    (``shared.mwu.check_exact_tails``); absent from older releases (the normal law is used).
    """

    statistic: float = Field(allow_inf_nan=False)
    variance: float = Field(ge=0, allow_inf_nan=False)
    noise_variance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    n_x: int = Field(ge=0)
    n_y: int = Field(ge=0)
    noise: MWUNoise | None = None
    exact_log_tails: list[FiniteFloat] | None = Field(default=None, min_length=2, max_length=2)

    @model_validator(mode="before")
    @classmethod
    def _legacy_noise(cls, data: Any) -> Any:
        if isinstance(data, dict) and "noise" not in data:
            sigma2 = data.get("noise_variance", 0.0)
            if isinstance(sigma2, int | float) and math.isfinite(sigma2) and sigma2 > 0:
                return {**data, "noise": {"kind": "laplace", "scale": math.sqrt(sigma2 / 2.0)}}
        return data

    @classmethod
    def from_result(cls, result: MannWhitneyResult) -> MWURelease:
        tails = result.release_tails()
        return cls._from_fields(
            result, noise=None if result.noise is None else MWUNoise.from_law(result.noise),
            exact_log_tails=None if tails is None else list(tails))

    def noise_law(self) -> NoiseLaw | None:
        """The law of the release's noise (None without noise); ``ValueError`` when it disagrees
        with ``noise_variance`` (beyond RELEASE_RTOL)."""
        if self.noise is None:
            if self.noise_variance > 0:
                raise ValueError("noise_variance > 0 but the release states no noise law")
            return None
        if not math.isclose(self.noise.variance, self.noise_variance, rel_tol=RELEASE_RTOL):
            raise ValueError(
                f"noise_variance {self.noise_variance:g} is not the variance of the stated "
                f"{self.noise.kind} noise ({self.noise.variance:g})"
            )
        return self.noise.to_law()

    def to_result(self, alternative: Alternative = "two-sided") -> MannWhitneyResult:
        """The release as the federated tests take it (Z and p recomputed from the numbers, the
        p-value from the exact law of N(0, V) + noise); ``ValueError`` as :meth:`noise_law`."""
        return released_result(
            self.statistic, self.variance, self.n_x, self.n_y, self.noise_law(), alternative,
            exact_log_tails=self.exact_log_tails,
        )


# -- the differentially private twin of the Mann-Whitney release ---------------------------------


class DPMWURequest(WireModel):
    """Ask a center for its ε-DP Mann-Whitney release of ``variable`` between two levels under
    add/remove neighbours (``shared.dp.mwu``; DP mode answers it): ``size_share`` of ε noises
    the two sizes, the rest U' over at most M records per level."""

    variable: str = Field(min_length=1)
    groups: tuple[str, str]
    # Each part of the split must be a release's ε on its own (>= MIN_EPSILON).
    epsilon: Annotated[float, epsilon_field(100 * MIN_EPSILON)]
    size_share: float = Field(default=DP_MWU_SIZE_SHARE, ge=0.01, le=0.99, allow_inf_nan=False,
                              description="the share of ε spent on the two noisy sizes")


class DPMWURelease(WireModel):
    """A center's ε-DP Mann-Whitney release (``shared.dp.mwu.DPMannWhitney``): ``statistic``
    Ũ = U' + Laplace(2M/ε₂), the noisy sizes ``n_x_hat``, ``n_y_hat`` (Laplace(1/ε₁), unrounded,
    possibly negative), the public cap ``cap`` = M, the split ``size_epsilon`` (ε₁) +
    ``u_epsilon`` (ε₂) = ``epsilon``, the cap's ``margin`` and the noise law on Ũ (``noise``).

    Parsing does not check that the numbers agree (M from n̂ and the margin, the noise's scale
    2M/ε₂): the coordinator names a center whose release breaks them ``implausible``
    (``coordinator.protocols.dp_mwu``), as for :class:`MWURelease`."""

    statistic: float = Field(allow_inf_nan=False)
    n_x_hat: float = Field(allow_inf_nan=False)
    n_y_hat: float = Field(allow_inf_nan=False)
    cap: int = Field(ge=1)
    epsilon: float = Field(gt=0, allow_inf_nan=False)
    size_epsilon: float = Field(gt=0, allow_inf_nan=False)
    u_epsilon: float = Field(gt=0, allow_inf_nan=False)
    margin: float = Field(ge=0, allow_inf_nan=False)
    neighbouring: Literal["add_remove"] = "add_remove"
    noise: MWUNoise

    @classmethod
    def from_result(cls, result: DPMannWhitney) -> DPMWURelease:
        return cls._from_fields(result, epsilon=result.epsilon,
                                noise=MWUNoise.from_law(result.noise))

    def to_dp_result(self) -> DPMannWhitney:
        """The core's release (its noise law recomputed from M and ε₂, not read)."""
        return self._to_fields(DPMannWhitney)

    def to_result(self, alternative: Alternative = "two-sided") -> MannWhitneyResult:
        """As the federated tests take it (``DPMannWhitney.to_result``): Ũ, the kept sizes'
        estimates, V̂ and the Laplace law stated in ``noise``."""
        return self.to_dp_result().to_result(alternative)


# -- differentially private releases --------------------------------------------------------------


class DPRequest(WireModel):
    """What every DP release names: the variable, one declared level or all records (None), the
    ε to spend and the public bounds the data are clipped to."""

    variable: str = Field(min_length=1)
    group: str | None = None
    epsilon: Epsilon
    bounds: Bounds


class DPQuantilesRequest(DPRequest):
    levels: Levels
    algorithm: DPQuantileAlgorithm = "joint_exp"


class DPQuantilesRelease(WireModel):
    """One value per level, finite and non-decreasing (every algorithm's output is sorted).

    ``rank_halfwidth``: the 95 % rank error of each value, in records, where the data are
    locally evenly spread (``shared.dp.uncertainty``; None for ApproxQuantile); ``n_public``: the
    selection's size as the center shows it (rounded down to its K)."""

    levels: list[FiniteFloat]
    values: list[FiniteFloat]
    algorithm: str
    epsilon: FiniteFloat
    neighbouring: Neighbouring
    rank_halfwidth: FiniteFloat | None = Field(default=None, ge=0)
    n_public: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _ordered(self) -> DPQuantilesRelease:
        if len(self.values) != len(self.levels):
            raise ValueError("one value per level is required")
        if any(b < a for a, b in pairwise(self.values)):
            raise ValueError("quantile values must be non-decreasing")
        return self


class DPBoxplotRequest(DPRequest):
    """``n_public``: the public size for the whisker buffer under add/remove (default: the
    center's size rounded down to a multiple of K, as ``/v1/info`` already releases it)."""

    n_public: int | None = Field(default=None, ge=4, le=10**12)


class BudgetPart(WireModel):
    name: str
    epsilon: float


class DPBoxplotRelease(WireModel):
    """The seven-number summary (o_ℓ, ℓ, Q1, median, Q3, u, o_u), n, branches and the budget."""

    lower_outliers: NonNegativeInt
    lower_whisker: FiniteFloat
    q1: FiniteFloat
    median: FiniteFloat
    q3: FiniteFloat
    upper_whisker: FiniteFloat
    upper_outliers: NonNegativeInt
    n: NonNegativeInt
    lower_branch: Literal["extreme", "fence"]
    upper_branch: Literal["extreme", "fence"]
    epsilon: FiniteFloat
    budget: list[BudgetPart]
    # The deprecated names of the two DPBoxplot versions still read (shared.fields).
    method: Annotated[str, BeforeValidator(canonical_method)]
    outlier_scale: FiniteFloat | None = Field(
        default=None, gt=0, description="the Laplace scale of each outlier count's noise")
    outlier_halfwidth: FiniteFloat | None = Field(
        default=None, ge=0, description="each outlier count is within ± this of the true count "
                                        "with probability 95 %")

    @model_validator(mode="after")
    def _ordered(self) -> DPBoxplotRelease:
        five = (self.lower_whisker, self.q1, self.median, self.q3, self.upper_whisker)
        if any(b < a for a, b in pairwise(five)):
            raise ValueError("a box must satisfy lower whisker <= Q1 <= median <= Q3 <= upper")
        return self

    def within(self, bounds: tuple[float, float]) -> bool:
        """Whether every point of the box lies inside the public bounds it was clipped to."""
        a, b = bounds
        return a <= self.lower_whisker and self.upper_whisker <= b

    @classmethod
    def from_result(cls, result: BoxplotResult) -> DPBoxplotRelease:
        # Each outlier count's Laplace scale, as the mechanism states it (8/ε under add/remove,
        # 16/ε under swap: shared.dp.boxplot, step 5). A release stored before states 16/ε, or
        # nothing; it is read as stored.
        scale = result.outlier_scale
        return cls._from_fields(
            result,
            epsilon=result.spent.epsilon,
            budget=[BudgetPart(name=n, epsilon=p.epsilon) for n, p in result.budget],
            outlier_scale=scale,
            outlier_halfwidth=laplace_halfwidth(scale) if scale is not None else None,
        )


class ExtremesRequest(DPRequest):
    """Round 1 of the pooled boxplot (docs/methods.md §6.2): the DP minimum and maximum."""


class ExtremesRelease(WireModel):
    psi_min: FiniteFloat
    psi_max: FiniteFloat
    epsilon: FiniteFloat

    @classmethod
    def from_result(cls, extremes: Extremes) -> ExtremesRelease:
        return cls(psi_min=extremes.psi_min, psi_max=extremes.psi_max,
                   epsilon=extremes.spent.epsilon)


class TreeHistogramRequest(DPRequest):
    """Round 2: a hierarchical histogram on the public grid of ``branching**depth`` leaves."""

    grid: Bounds
    depth: int = Field(ge=1, le=16)
    branching: int = Field(ge=2, le=16)

    @model_validator(mode="after")
    def _leaves(self) -> TreeHistogramRequest:
        check_leaves(self.branching, self.depth)
        return self


class TreeHistogramRelease(WireModel):
    levels: list[list[FiniteFloat]]
    branching: int = Field(ge=2)
    noise_scale: FiniteFloat = Field(ge=0)
    epsilon: FiniteFloat

    @classmethod
    def from_result(cls, tree: TreeHistogram) -> TreeHistogramRelease:
        return cls(levels=[level.tolist() for level in tree.levels], branching=tree.branching,
                   noise_scale=tree.noise_scale, epsilon=tree.spent.epsilon)

    def to_result(self) -> TreeHistogram:
        return TreeHistogram(tuple(np.asarray(level, dtype=np.float64) for level in self.levels),
                             self.branching, self.noise_scale, PrivacySpent(self.epsilon))


class ThresholdCountsRequest(DPRequest):
    """Round 3: noisy counts strictly below ``lower`` and strictly above ``upper``."""

    lower: float = Field(allow_inf_nan=False)
    upper: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> ThresholdCountsRequest:
        if self.lower > self.upper:
            raise ValueError(f"`lower` must be <= `upper`, got {self.lower!r} > {self.upper!r}")
        return self


class ThresholdCountsRelease(WireModel):
    """Noisy counts below and above, rounded and floored at 0, and (``*_noisy``) as drawn, for
    the coordinator to sum before it floors (a release made before them has none: the
    coordinator then sums the floored counts); ``scale`` is each count's Laplace scale,
    ``halfwidth`` the 95 % half-width of its noise."""

    below: NonNegativeInt
    above: NonNegativeInt
    epsilon: FiniteFloat
    scale: FiniteFloat | None = Field(default=None, gt=0)
    halfwidth: FiniteFloat | None = Field(default=None, ge=0)
    below_noisy: FiniteFloat | None = None
    above_noisy: FiniteFloat | None = None

    @model_validator(mode="after")
    def _floored(self) -> ThresholdCountsRelease:
        for noisy, shown in ((self.below_noisy, self.below), (self.above_noisy, self.above)):
            if noisy is not None and max(0, round(noisy)) != shown:
                raise ValueError("a count must be its noisy count rounded and floored at 0")
        return self

    @classmethod
    def from_result(cls, counts: ThresholdCounts) -> ThresholdCountsRelease:
        return cls(below=counts.below, above=counts.above, epsilon=counts.spent.epsilon,
                   scale=counts.scale, halfwidth=laplace_halfwidth(counts.scale),
                   below_noisy=counts.below_noisy, above_noisy=counts.above_noisy)

    def to_pair(self) -> tuple[float, float]:
        """(below, above) for the coordinator to sum: the noisy counts, or the floored ones
        from a center that releases none."""
        below = self.below_noisy if self.below_noisy is not None else float(self.below)
        above = self.above_noisy if self.above_noisy is not None else float(self.above)
        return below, above


class DescribeRequest(WireModel):
    """Ask a center for an ε-DP description of ``variable`` (one declared level or every
    record): noisy N, JointExp quartiles, sums on a DP range (mean, SD), a Laplace histogram
    of ``bins`` equal-width bins split twice more (``shared.describe.dp_describe``).
    ``bounds`` None: the center's declared public bounds of the variable
    (``[datasets.X.metadata.v]``); it refuses when it declares none."""

    variable: str = Field(min_length=1)
    group: str | None = None
    # Its smallest part (the count) spends ε/20, and every part needs ε >= MIN_EPSILON.
    epsilon: Annotated[float, epsilon_field(20 * MIN_EPSILON)]
    bounds: Bounds | None = None
    bins: int = Field(default=10, ge=1, le=200)


class DescribePartRelease(WireModel):
    """One part of a description's ε split: its ε, mechanism, sensitivity and Laplace scale."""

    name: str
    epsilon: FiniteFloat
    mechanism: str
    sensitivity: FiniteFloat
    scale: FiniteFloat | None = None


class DescribeRelease(WireModel):
    """An ε-DP description as released: the noisy count, the noisy sums of the values clipped to
    the DP range ``clip`` about ``center`` (its midpoint), JointExp values at ``levels``, the
    noisy histogram on ``edges`` and its ``subdivisions``, the ε split (``parts``), and the
    bounds the values were clipped to (the request's or the center's declared ones)."""

    bounds: tuple[FiniteFloat, FiniteFloat]
    center: FiniteFloat
    count: FiniteFloat
    sum: FiniteFloat
    sum_squares: FiniteFloat
    levels: list[FiniteFloat]
    quantiles: list[FiniteFloat]
    edges: list[FiniteFloat] = Field(min_length=2)
    histogram: list[FiniteFloat]
    parts: list[DescribePartRelease] = Field(min_length=1)
    epsilon: FiniteFloat
    neighbouring: Neighbouring
    resolution: FiniteFloat | None = Field(
        default=None, gt=0, description="the declared resolution the quantiles lie on")
    clip: tuple[FiniteFloat, FiniteFloat] | None = Field(
        default=None, description="the DP range the sums were clipped to (``center`` its "
                                  "midpoint); none: the bounds (a release made before it)")
    subdivisions: list[list[FiniteFloat]] | None = Field(
        default=None, description="the histogram's bins split in 4, then 4 again: noisy "
                                  "counts of each level (none: a release made before them)")
    missing: FiniteFloat | None = Field(
        default=None, description="the noisy count of the selection's records missing the "
                                  "variable, released with the count as one pair (the count "
                                  "part's scale); none: not released (complete cases, a "
                                  "relation or release without it)")

    @model_validator(mode="after")
    def _consistent(self) -> DescribeRelease:
        if len(self.histogram) != len(self.edges) - 1:
            raise ValueError("a histogram needs one count per bin")
        if self.subdivisions is not None and [len(s) for s in self.subdivisions] != [
                len(self.histogram) * 4**k for k in range(1, len(self.subdivisions) + 1)]:
            raise ValueError("each subdivision splits every node of the level above in 4")
        if len(self.quantiles) != len(self.levels):
            raise ValueError("one quantile per level is required")
        if any(b < a for a, b in pairwise(self.quantiles)):
            raise ValueError("quantile values must be non-decreasing")
        return self

    @classmethod
    def from_result(cls, result: DPDescription) -> DescribeRelease:
        return cls(
            bounds=result.bounds, center=result.center, count=result.count, sum=result.sum,
            sum_squares=result.sum_squares, levels=list(result.levels),
            quantiles=list(result.quantiles or ()), edges=list(result.edges),
            histogram=list(result.histogram),
            parts=[DescribePartRelease(name=p.name, epsilon=p.epsilon, mechanism=p.mechanism,
                                       sensitivity=p.sensitivity, scale=p.scale)
                   for p in result.parts],
            epsilon=result.spent.epsilon, neighbouring=result.neighbouring,
            resolution=result.resolution, clip=result.clip,
            subdivisions=(None if result.subdivisions is None
                          else [list(level) for level in result.subdivisions]),
            missing=result.missing,
        )

    def to_result(self) -> DPDescription:
        return DPDescription(
            bounds=(self.bounds[0], self.bounds[1]), center=self.center, count=self.count,
            sum=self.sum, sum_squares=self.sum_squares, levels=tuple(self.levels),
            quantiles=tuple(self.quantiles), edges=tuple(self.edges),
            histogram=tuple(self.histogram),
            parts=tuple(DescribePart(p.name, p.epsilon, p.mechanism, p.sensitivity, p.scale)
                        for p in self.parts),
            neighbouring=self.neighbouring, spent=PrivacySpent(self.epsilon),
            resolution=self.resolution,
            clip=None if self.clip is None else (self.clip[0], self.clip[1]),
            subdivisions=(None if self.subdivisions is None
                          else tuple(tuple(level) for level in self.subdivisions)),
            missing=self.missing,
        )


# -- categorical variables ------------------------------------------------------------------------


class CategoricalRequest(WireModel):
    """Ask a center for its K-anonymous counts of the categorical ``variable`` per category and
    group: ``groups`` two declared levels (X, Y, in that order) or None (every record pooled)."""

    variable: str = Field(min_length=1)
    groups: tuple[str, str] | None = None
    k: int = Field(ge=2)


class CategoricalRelease(WireModel):
    """Counts per released cell and group (one row per level asked, or one pooled row): every
    count 0 or >= ``k``. ``categories`` are the variable's public categories in declared order;
    ``cells[j]`` the categories merged into column ``j`` (``null`` standing for the missing
    cell: a missing or undeclared label), adjacent in that order with the missing cell last.
    ``missing``: each row's missing count when the missing cell is released alone, else None
    (merged with the last categories)."""

    categories: list[str] = Field(min_length=1)
    cells: list[list[str | None]] = Field(min_length=1)
    counts: list[list[NonNegativeInt]] = Field(min_length=1, max_length=2)
    missing: list[NonNegativeInt] | None = None
    k: int = Field(ge=2)

    @model_validator(mode="after")
    def _consistent(self) -> CategoricalRelease:
        if any(len(row) != len(self.cells) for row in self.counts):
            raise ValueError("one count per cell in every row")
        named = [c for cell in self.cells for c in cell]
        if named != [*self.categories, None]:
            raise ValueError("cells must cover the categories, then the missing cell, in order")
        if any(0 < c < self.k for row in self.counts for c in row):
            raise ValueError("every count must be 0 or at least k")
        if self.missing is not None and len(self.missing) != len(self.counts):
            raise ValueError("one missing count per row")
        return self


class DPCategoricalRequest(WireModel):
    """Ask a center for ε-DP counts of the categorical ``variable`` in one declared level (or
    every record) per category and the missing cell."""

    variable: str = Field(min_length=1)
    group: str | None = None
    epsilon: Epsilon


class DPCategoricalRelease(WireModel):
    """Noisy counts per category in declared order (``counts``) and of the missing cell
    (``missing``): each the true count plus two-sided geometric noise of parameter ``alpha`` =
    exp(-ε/``sensitivity``) (variance ``variance``, 95 % half-width ``halfwidth``), ε-DP under
    ``neighbouring``. Unrounded integers, possibly negative (clamp at 0 when reading)."""

    categories: list[str] = Field(min_length=1)
    counts: list[int]
    missing: int
    epsilon: FiniteFloat
    neighbouring: Neighbouring
    mechanism: Literal["two_sided_geometric"] = "two_sided_geometric"
    alpha: float = Field(ge=0, lt=1)
    sensitivity: int = Field(ge=1)
    variance: FiniteFloat
    halfwidth: NonNegativeInt

    @model_validator(mode="after")
    def _consistent(self) -> DPCategoricalRelease:
        if len(self.counts) != len(self.categories):
            raise ValueError("one count per category")
        return self


class MissingRequest(WireModel):
    """Ask a center how many records of each declared level hold the numeric ``variable`` and
    how many miss it (exact: each 0 or >= K, docs/privacy.md, guarantee 15)."""

    variable: str = Field(min_length=1)


class MissingRelease(WireModel):
    """Per declared level (in declared order; a level left out of the population shows 0s):
    its records ``n``, those with the variable ``present`` and those ``missing`` it, exact,
    each 0 or >= ``k``. With complete cases (``missing = "complete_cases"``) no record of the
    population misses a variable: ``missing`` is 0 and ``complete_cases`` true."""

    levels: list[str] = Field(min_length=1)
    n: list[NonNegativeInt]
    present: list[NonNegativeInt]
    missing: list[NonNegativeInt]
    complete_cases: bool
    k: int = Field(ge=2)

    @model_validator(mode="after")
    def _consistent(self) -> MissingRelease:
        if not len(self.levels) == len(self.n) == len(self.present) == len(self.missing):
            raise ValueError("one count per level")
        if any(n != p + m for n, p, m in zip(self.n, self.present, self.missing, strict=True)):
            raise ValueError("a level's records are those present plus those missing")
        return self


MAX_LIFE_TABLE_LIMITS = 201
"""The most limits a DP life table's grid may have (200 intervals)."""


class DPLifeTableRequest(WireModel):
    """Ask a center for an ε-DP life table of the time-to-event ``variable`` in one declared
    level (or every record): the events and censorings per interval of the public ``grid``
    (strictly increasing limits inside the variable's declared follow-up range; a time after
    the last limit counts as censored in the last interval), each noised
    (``shared.dp.life_table``, docs/methods.md §13.1)."""

    variable: str = Field(min_length=1)
    group: str | None = None
    epsilon: Epsilon
    grid: list[FiniteFloat] = Field(min_length=2, max_length=MAX_LIFE_TABLE_LIMITS)

    @model_validator(mode="after")
    def _increasing(self) -> DPLifeTableRequest:
        if any(b <= a for a, b in pairwise(self.grid)):
            raise ValueError("`grid` must increase strictly")
        if self.grid[0] < 0:
            raise ValueError("`grid` starts at 0 or later (times since the start of follow-up)")
        return self


class DPLifeTableRelease(WireModel):
    """One arm's DP life table as released: the noisy events and censorings per interval of
    ``grid`` (unrounded, possibly negative: the reader projects them, ``to_life_table``), and how
    they were noised: ``mechanism``, its ``sensitivity`` (L1 for Laplace, L2 for Gaussian) and
    noise ``scale``, each cell's noise variance ``cell_variance``, (``epsilon``, ``delta``) under
    ``neighbouring``."""

    grid: list[FiniteFloat] = Field(min_length=2, max_length=MAX_LIFE_TABLE_LIMITS)
    noisy_events: list[FiniteFloat]
    noisy_censored: list[FiniteFloat]
    mechanism: Literal["laplace", "gaussian"]
    epsilon: FiniteFloat
    delta: FiniteFloat = Field(default=0.0, ge=0, lt=1)
    neighbouring: Neighbouring
    sensitivity: FiniteFloat = Field(gt=0)
    scale: FiniteFloat = Field(gt=0)
    cell_variance: FiniteFloat = Field(gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> DPLifeTableRelease:
        if any(b <= a for a, b in pairwise(self.grid)):
            raise ValueError("`grid` must increase strictly")
        if not len(self.noisy_events) == len(self.noisy_censored) == len(self.grid) - 1:
            raise ValueError("one noisy count of events and of censorings per interval")
        return self

    def to_life_table(self) -> DPLifeTable:
        """The release as :class:`shared.dp.life_table.DPLifeTable`: its counts projected onto
        counts >= 0 (post-processing)."""
        events, censored = project_release(self.noisy_events, self.noisy_censored)
        return DPLifeTable(
            limits=np.asarray(self.grid, dtype=np.float64),
            noisy_events=np.asarray(self.noisy_events, dtype=np.float64),
            noisy_censored=np.asarray(self.noisy_censored, dtype=np.float64),
            events=events, censored=censored, mechanism=self.mechanism,
            neighbouring=self.neighbouring, sensitivity=self.sensitivity, scale=self.scale,
            cell_variance=self.cell_variance, spent=PrivacySpent(self.epsilon, self.delta))

    @classmethod
    def of(cls, table: DPLifeTable) -> DPLifeTableRelease:
        """The wire form of a center's :func:`shared.dp.life_table.dp_life_table`."""
        return cls(grid=table.limits.tolist(), noisy_events=table.noisy_events.tolist(),
                   noisy_censored=table.noisy_censored.tolist(),
                   mechanism=table.mechanism,
                   epsilon=table.spent.epsilon, delta=table.spent.delta,
                   neighbouring=table.neighbouring,
                   sensitivity=table.sensitivity, scale=table.scale,
                   cell_variance=table.cell_variance)
