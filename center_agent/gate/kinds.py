"""The release kinds a center answers, each declared once to the gate.

A kind says, for its request model:

* ``check`` — what is refused from the request and the public settings alone (names, levels, K,
  signatures, switches), before any data is read;
* ``question`` — the request's *meaning*: what the answer depends on (levels in declared order, a
  table's closing left out of a table's meaning...), so that every wording of one question gets
  the one stored answer;
* ``require`` — what is refused from the population's public sizes (a level whose size in
  ``/v1/info`` is below K; nothing in DP mode, where every selection is answered, none
  included: ``Dataset.require``);
* ``compute`` — the answer, on the population, outside the dataset's lock (exact kinds admit it
  to the disclosure memory with ``Context.admit``, which takes the lock, coarsening it as needed);
* ``present`` — the answer to this request from the stored one (post-processing only: a table's
  view, runs or U for the groups in the order asked).

A kind's name, path and wire models are its declaration in :mod:`shared.kinds` (``wire``), the
one the coordinator's ports are made from too. Adding a release kind is that declaration, one
class here and one entry in :data:`KINDS`; the route, the ledger, the epoch, the disclosure memory
and the audit record come with it (``center_agent.gate``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from center_agent.core.errors import (
    DPModeRefusal,
    HistoryNotSafe,
    InvalidRequest,
    ReleaseDisabled,
    UntrustedTable,
)
from center_agent.data import Dataset, Population
from center_agent.gate.disclosure import Candidate, Partition
from center_agent.gate.gaps import GapPoints
from shared import kinds
from shared.binning import BinTable, ExtremeKind, check_extreme, merge_bins
from shared.category_counts import category_counts, dp_category_counts, merge_adjacent
from shared.describe import dp_describe
from shared.dp import make_grid
from shared.dp.mwu import dp_mann_whitney
from shared.federation import Refinement, merge_runs, refined_limits
from shared.kinds import Kind, Rel, Req
from shared.protocol import (
    MAX_LIMITS,
    BinTableRelease,
    CategoricalRelease,
    CategoricalRequest,
    DescribeRelease,
    DescribeRequest,
    DPBoxplotRelease,
    DPBoxplotRequest,
    DPCategoricalRelease,
    DPCategoricalRequest,
    DPLifeTableRelease,
    DPLifeTableRequest,
    DPMWURelease,
    DPMWURequest,
    DPQuantilesRelease,
    DPQuantilesRequest,
    ExtremesRelease,
    ExtremesRequest,
    LimitsStatement,
    MissingRelease,
    MissingRequest,
    MWURelease,
    MWURequest,
    RefinementRelease,
    RefinementRequest,
    TableRequest,
    ThresholdCountsRelease,
    ThresholdCountsRequest,
    TreeHistogramRelease,
    TreeHistogramRequest,
    WireModel,
)
from shared.quantiles.wire import (
    QuantileLossRelease,
    QuantileLossRequest,
    YJMomentsRelease,
    YJMomentsRequest,
)
from shared.releases import (
    canonical_table,
    dp_boxplot_release,
    dp_life_table_release,
    dp_quantiles_release,
    extremes_release,
    mwu_release,
    quantile_loss_release,
    refinement_release,
    table_view,
    threshold_counts_release,
    tree_histogram_release,
    yj_moments_release,
    yj_moments_sensitivity,
)

if TYPE_CHECKING:
    from center_agent.gate import ReleaseGate

FloatArray = NDArray[np.float64]
JSON = Any
MAX_NOISE_SCALE = 1e100
"""The largest Laplace scale a request may imply: its variance must stay a float, and any scale
near it swamps every sum a hospital holds."""


@dataclass(frozen=True)
class Question:
    """What an answer depends on: the variable, the meaning, the ε it costs."""

    variable: str
    meaning: dict[str, Any]
    epsilon: float = 0.0


@dataclass(frozen=True)
class Context:
    """What ``compute`` may use: the gate, the dataset and its population in this epoch."""

    gate: ReleaseGate
    conn: Any
    dataset: Dataset
    population: Population
    epoch: int
    request_key: str
    fingerprint: str = field(repr=False, default="")
    placed_from: dict[str, Any] = field(repr=False, default_factory=dict)
    """Per variable, the remembered numbers its placement read (``ReleaseGate.placed``)."""

    def placement(self, variable: str) -> GapPoints:
        """Where this center's limits fall between the data of ``variable``: one keyed number
        per gap of the population, the one already released there if any
        (``center_agent.gate.gaps``; never a function of the request)."""
        population = self.population
        return GapPoints(self.gate.keys, variable,
                         [population.level(variable, level) for level in population.levels],
                         self.gate.placed(self, variable), self.gate.settings.k)

    def remember(self, variable: str, numbers: Iterable[float | None]) -> None:
        """Record the numbers a release placed between data, in its transaction."""
        self.gate.remember(self, variable, [v for v in numbers if v is not None])

    def admit(self, variable: str, candidate: Candidate) -> Candidate:
        """Disclosure control of an exact release, under the dataset's lock (the gate's step
        4: ``ReleaseGate.admit``)."""
        return self.gate.admit(self, variable, candidate)


def fresh_rng() -> np.random.Generator:
    """DP noise: a generator seeded from the OS for every release (Mironov 2012: noise must not
    be predictable from earlier answers)."""
    return np.random.default_rng(secrets.randbits(128))


def canonical_levels(dataset: Dataset, levels: tuple[str, str]) -> tuple[tuple[str, str], bool]:
    """The two levels in declared order, and whether the request named them the other way."""
    order = dataset.levels
    a, b = levels
    swapped = order.index(a) > order.index(b)
    return ((b, a) if swapped else (a, b)), swapped


def declared_order(dataset: Dataset, levels: tuple[str, ...]) -> tuple[str, ...]:
    """The levels (two or a table's k arms) in declared order: the one meaning of every order
    a request may name them in (its answer is stored once, and shown in the order asked)."""
    order = dataset.levels
    return tuple(sorted(levels, key=order.index))


class ReleaseKind(Generic[Req, Rel]):
    """One kind of release (see the module docstring): the policy of its declaration
    ``wire``."""

    wire: Kind[Req, Rel]
    tag: ClassVar[str]
    summary: ClassVar[str]
    exact: ClassVar[bool] = True
    """Whether the release shows data or an exact size without DP noise: refused in DP mode."""
    dp_alternative: ClassVar[str] = "ask for a differentially private release (dp_*) instead"
    """What a DP-mode refusal of this kind names instead."""

    @property
    def name(self) -> str:
        return self.wire.name

    @property
    def path(self) -> str:
        return self.wire.path

    @property
    def request_model(self) -> type[Req]:
        return self.wire.request

    @property
    def release_model(self) -> type[Rel]:
        return self.wire.release

    def exact_release(self, dataset: Dataset, request: Req) -> bool:
        """Whether this request's answer would be exact (``exact``, unless the kind says more
        from the request and the public configuration)."""
        return self.exact

    def check_release_mode(self, dataset: Dataset, request: Req) -> None:
        """DP mode (``release_mode = "dp"``): refuse an exact release, or one without a positive
        ε, from the kind, the request and the configuration only (the gate's first check)."""
        if dataset.config.release_mode != "dp":
            return
        epsilon = getattr(request, "epsilon", None)
        if self.exact_release(dataset, request) or epsilon is None or not epsilon > 0:
            raise DPModeRefusal(dataset.name, self.name, self.dp_alternative)

    def check(self, gate: ReleaseGate, dataset: Dataset, request: Req) -> None:
        """The variable, and the level when the request names one (``group``)."""
        dataset.check_variable(self.variable(request))
        group = getattr(request, "group", None)
        if group is not None:
            dataset.check_level(group)

    def variable(self, request: Req) -> str:
        return str(request.variable)  # type: ignore[attr-defined]

    def question(self, gate: ReleaseGate, dataset: Dataset, request: Req) -> Question:
        payload = request.to_payload()
        epsilon = float(payload.get("epsilon") or 0.0)
        return Question(self.variable(request), payload, epsilon)

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: Req) -> None:
        dataset.require(population, getattr(request, "group", None), gate.settings.k,
                        self.variable(request))

    def compute(self, ctx: Context, request: Req) -> JSON:
        raise NotImplementedError

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON, request: Req) -> Rel:
        return self.release_model.model_validate(stored)

    def count_calls(self, gate: ReleaseGate, conn: Any, dataset: Dataset, caller: str) -> None:
        """Count the call against caps by number (none by default)."""


# -- exact releases: K-anonymous tables and their refinement ------------------------------------


@dataclass(frozen=True)
class TableCandidate:
    """The canonical table while it is admitted: coarsened by merging bins."""

    table: BinTable
    levels: tuple[str, ...]
    dataset: str

    @property
    def partition(self) -> Partition:
        return Partition.bins(self.table.limits[1:-1], self.levels)

    def coarsen(self, bad: Mapping[str, NDArray[np.int64]]) -> TableCandidate:
        n_inner = self.table.n_bins - 1
        if n_inner == 0:
            raise HistoryNotSafe(self.dataset)
        cells = np.unique(np.concatenate(list(bad.values())))
        keep = np.ones(n_inner, dtype=bool)
        keep[limits_to_drop(cells, n_inner)] = False
        return TableCandidate(merge_bins(self.table, keep), self.levels, self.dataset)


def limits_to_drop(cells: NDArray[np.int64], n_inner: int) -> NDArray[np.int64]:
    """Which interior limits to remove so that each run of adjacent bad cells merges: the
    limits inside a run of several (merged together first: the fewest limits lost), the limit
    right of a lone bad cell (left of the last cell)."""
    runs = np.split(cells, np.flatnonzero(np.diff(cells) > 1) + 1)
    drop: list[int] = []
    for run in runs:
        if run.size > 1:
            drop.extend(range(int(run[0]), int(run[-1])))
        else:
            drop.append(min(int(run[0]), n_inner - 1))
    return np.asarray(drop, dtype=np.int64)


def _extreme_kind(choice: object) -> ExtremeKind:
    return "natural" if isinstance(choice, float) else choice  # type: ignore[return-value]


# The requests of the exact kinds: each names a variable, its ``groups`` and a ``k``.
ExactRequest = TypeVar("ExactRequest", TableRequest, RefinementRequest)


class ExactKind(ReleaseKind[ExactRequest, Rel]):
    """A K-anonymous release of one variable (a table, a refinement): of one group, two or more
    declared levels (one row each: a study's arms) or every record, for a K no lower than the
    center's; every group asked must show at least the request's K records in ``/v1/info``."""

    tag = "tables"
    dp_alternative = ("a DP histogram of the variable is dp_tree_histogram, its description "
                      "dp_describe")

    def check(self, gate: ReleaseGate, dataset: Dataset, request: ExactRequest) -> None:
        dataset.check_variable(request.variable)
        dataset.check_levels(request.groups)
        gate.check_k(request.k)

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: ExactRequest) -> None:
        for level in request.groups or (None,):
            dataset.require(population, level, request.k, request.variable)


class TableKind(ExactKind[TableRequest, BinTableRelease]):
    """This center's K-anonymous table of one variable: one group, two or more declared levels
    (one row each, in the order asked), or all.

    Every table of a variable in an epoch is a view of one canonical table (every declared level
    binned at once, each limit the keyed number of its gap: ``gate.gaps``), so asking again in
    any wording (other extremes, another K, the levels swapped) gives the same limits: nothing
    to average, nothing to subtract. A natural ``lower``/``upper`` is a public input applied to
    the view only (bins beyond it merged into the extreme one): values beyond it are counted in
    the extreme bin, never refused, and no limit moves.
    """

    wire = kinds.TABLE
    summary = "this center's K-anonymous table of one variable"

    def check(self, gate: ReleaseGate, dataset: Dataset, request: TableRequest) -> None:
        super().check(gate, dataset, request)
        try:
            lower, upper = check_extreme(request.lower, "lower"), check_extreme(request.upper,
                                                                               "upper")
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        if isinstance(lower, float) and isinstance(upper, float) and not lower < upper:
            raise InvalidRequest("natural limits must satisfy `lower` < `upper`")

    def question(self, gate: ReleaseGate, dataset: Dataset, request: TableRequest) -> Question:
        return Question(request.variable, {"table": request.variable})

    def compute(self, ctx: Context, request: TableRequest) -> JSON:
        levels = ctx.population.levels
        arrays = [ctx.population.level(request.variable, level) for level in levels]
        k = ctx.gate.settings.k
        table = canonical_table(arrays, k, ctx.placement(request.variable))
        admitted = ctx.admit(request.variable, TableCandidate(table, levels, ctx.dataset.name))
        assert isinstance(admitted, TableCandidate)
        t = admitted.table
        ctx.remember(request.variable, t.limits.tolist())
        # Infinite limits as the strings "Infinity"/"-Infinity" (JSON has no infinity; float()
        # reads them back).
        limits = [v if np.isfinite(v) else ("Infinity" if v > 0 else "-Infinity")
                  for v in t.limits.tolist()]
        return {"levels": list(levels), "limits": limits, "counts": t.counts.tolist(), "k": k}

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON,
                request: TableRequest) -> BinTableRelease:
        levels = list(stored["levels"])
        limits = np.asarray([float(v) for v in stored["limits"]], dtype=np.float64)
        table = BinTable(limits=limits, counts=np.asarray(stored["counts"], dtype=np.float64),
                         k=int(stored["k"]))
        rows = None if request.groups is None else [levels.index(lv) for lv in request.groups]
        view = table_view(table, rows, k=request.k, lower=request.lower, upper=request.upper)
        statement = LimitsStatement(
            center_id=gate.settings.center_id, dataset=dataset.name, variable=request.variable,
            groups=request.groups, k=request.k, limits=view.limits.tolist(),
            lower=_extreme_kind(request.lower) if np.isfinite(view.limits[0]) else "infinite",
            upper=_extreme_kind(request.upper) if np.isfinite(view.limits[-1]) else "infinite",
        )
        return BinTableRelease(limits=view.limits.tolist(), counts=view.counts.tolist(),
                               k=request.k, signed=gate.keys.sign(statement))


@dataclass(frozen=True)
class RefineCandidate:
    """A refinement while it is admitted: splits dropped first, then runs merged."""

    release: Refinement
    limits: FloatArray
    levels: tuple[str, ...]
    pooled: bool
    dataset: str
    without_splits: Callable[[], Refinement]

    @property
    def partition(self) -> Partition:
        inner = refined_limits(self.limits, self.release)[1:-1]
        if self.pooled:
            runs = np.asarray(self.release.runs[0].run_of_cell, dtype=np.int64)
            return Partition(inner, {level: runs for level in self.levels}, pooled=True)
        return Partition(inner, {
            level: np.asarray(r.run_of_cell, dtype=np.int64)
            for level, r in zip(self.levels, self.release.runs, strict=True)
        })

    def coarsen(self, bad: Mapping[str, NDArray[np.int64]]) -> RefineCandidate:
        if self.release.split_bins:
            return RefineCandidate(self.without_splits(), self.limits, self.levels, self.pooled,
                                   self.dataset, self.without_splits)
        release = self.release
        by_group: dict[int, NDArray[np.int64]] = {}
        for level, cells in bad.items():  # pooled: one group, its bad cells of every level
            if level not in self.levels:  # a level this release does not count: not its atoms
                continue
            group = 0 if self.pooled else self.levels.index(level)
            by_group[group] = np.union1d(by_group.get(group, cells), cells)
        for group, cells in by_group.items():
            run_of = np.asarray(release.runs[group].run_of_cell, dtype=np.int64)
            if len(release.runs[group].totals) < 2:
                raise HistoryNotSafe(self.dataset)
            release = merge_runs(release, group, run_of[cells])
        return RefineCandidate(release, self.limits, self.levels, self.pooled, self.dataset,
                               self.without_splits)


class RefineKind(ExactKind[RefinementRequest, RefinementRelease]):
    """This center's refinement of a table whose limits a trusted center signed (Algorithms
    4-6): split limits and moved buffers placed at the population's keyed gap numbers
    (``gate.gaps``: the same in every refinement, whatever the statement), K-anonymous run
    totals, and the signed statement of the refined limits for the next center. The statement's
    natural limits are a view (splits beyond them dropped), never a clip of the data. Limits no
    trusted center signed are refused: placed around one record, they would make the runs an
    emptiness oracle."""

    wire = kinds.REFINE
    summary = "this center's refinement of a signed table"

    def check(self, gate: ReleaseGate, dataset: Dataset, request: RefinementRequest) -> None:
        super().check(gate, dataset, request)
        statement = request.table.statement
        if not gate.keys.trusts(request.table):
            raise UntrustedTable(
                f"the table to refine is not signed by a center this one trusts (its statement "
                f"names {statement.center_id!r}; settings peers, peer_keys_dir)"
            )
        same_groups = (statement.groups is None) == (request.groups is None) and (
            request.groups is None or set(statement.groups or ()) == set(request.groups)
        )
        if (statement.dataset != dataset.name or statement.variable != request.variable
                or statement.k != request.k or not same_groups):
            raise UntrustedTable(
                "the signed table is of another question: its dataset, variable, groups and k "
                "must be those of the request"
            )

    def question(self, gate: ReleaseGate, dataset: Dataset,
                 request: RefinementRequest) -> Question:
        groups = None if request.groups is None else declared_order(dataset, request.groups)
        return Question(request.variable, {"refine": request.variable, "groups": groups,
                                           "k": request.k,
                                           "table": request.table.statement.digest()})

    def compute(self, ctx: Context, request: RefinementRequest) -> JSON:
        population = ctx.population
        if request.groups is None:
            # Every level apart, refined together (one row): each set the release counts holds
            # 0 or >= K records of every level, as the disclosure control requires of a pooled
            # release, so nothing needs merging after the fact.
            arrays = [population.level(request.variable, level) for level in population.levels]
            levels, pooled = population.levels, True
            canonical_request = request
        else:
            groups = declared_order(ctx.dataset, request.groups)
            arrays = [population.level(request.variable, level) for level in groups]
            levels, pooled = groups, False
            canonical_request = request.model_copy(update={"groups": groups})
        # The split limits and moved buffers are the population's keyed gap numbers: the same
        # for every statement, view or natural limit that asks for a cut in a gap.
        place = ctx.placement(request.variable)

        def make(split: bool) -> Refinement:
            return refinement_release(arrays, canonical_request, place, split=split,
                                      level_k=ctx.gate.settings.k)

        limits = np.asarray(request.table.statement.limits, dtype=np.float64)
        first = make(True)
        if refined_limits(limits, first).size > MAX_LIMITS + 1:
            # Splits would make a table no peer accepts to refine; without them the limits are
            # a subset of the table's, which has at most MAX_LIMITS bins.
            first = make(False)
        candidate = RefineCandidate(first, limits, levels, pooled, ctx.dataset.name,
                                    lambda: make(False))
        admitted = ctx.admit(request.variable, candidate)
        assert isinstance(admitted, RefineCandidate)
        release = admitted.release
        ctx.remember(request.variable, [*release.split_limits, release.lower, release.upper])
        parent = request.table.statement
        statement = LimitsStatement(
            center_id=ctx.gate.settings.center_id, dataset=ctx.dataset.name,
            variable=request.variable, groups=canonical_request.groups, k=request.k,
            limits=refined_limits(limits, release).tolist(), lower=parent.lower,
            upper=parent.upper, parent=parent.digest(),
        )
        return RefinementRelease.from_result(release).model_copy(
            update={"signed": ctx.gate.keys.sign(statement)}).to_payload()

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON,
                request: RefinementRequest) -> RefinementRelease:
        release = RefinementRelease.model_validate(stored)
        if request.groups is not None:
            # Stored in declared order; shown one run list per level in the order asked.
            stored_order = declared_order(dataset, request.groups)
            runs = [release.runs[stored_order.index(level)] for level in request.groups]
            release = release.model_copy(update={"runs": runs})
        return release


# -- Mann-Whitney -------------------------------------------------------------------------------


def require_each_level(gate: ReleaseGate, dataset: Dataset, population: Population,
                       variable: str, levels: Iterable[str]) -> None:
    """The population's rule for a release of two levels: each level as if asked alone
    (``Dataset.require``; nothing is refused in DP mode)."""
    for level in levels:
        dataset.require(population, level, gate.settings.k, variable)


class MWUKind(ReleaseKind[MWURequest, MWURelease]):
    """U = Σ sign(Y − X) between two declared levels, its null variance and the levels' sizes
    (at n + m <= 50 without ε, U's two exact tails given the ties: docs/privacy.md guarantee 2);
    with ``epsilon``, U + Laplace(2·max(n, m)/ε) and the no-ties V (a function of n, m).

    The two levels' order is part of the wording, not of the meaning: (b, a) is answered from
    the stored answer of (a, b), with U negated and the sizes swapped."""

    wire = kinds.MWU
    tag = "mann-whitney"
    dp_alternative = ("its levels' sizes (and the noise scale 2·max(n, m)/ε) are exact even "
                      "with ε: ask for dp_mwu (its DP twin under add/remove) instead, or "
                      "dp_quantiles of each level")
    summary = "the local Mann-Whitney statistic (optionally ε-DP)"

    def check(self, gate: ReleaseGate, dataset: Dataset, request: MWURequest) -> None:
        super().check(gate, dataset, request)
        dataset.check_levels(request.groups)
        if request.epsilon is None and not gate.settings.allow_exact_mwu:
            raise ReleaseDisabled(
                "this center answers Mann-Whitney requests only with noise (give `epsilon`; "
                "setting allow_exact_mwu)"
            )

    def question(self, gate: ReleaseGate, dataset: Dataset, request: MWURequest) -> Question:
        groups, _ = canonical_levels(dataset, request.groups)
        return Question(request.variable, {"mwu": request.variable, "groups": groups,
                                           "epsilon": request.epsilon},
                        request.epsilon or 0.0)

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: MWURequest) -> None:
        require_each_level(gate, dataset, population, request.variable, request.groups)

    def compute(self, ctx: Context, request: MWURequest) -> JSON:
        groups, _ = canonical_levels(ctx.dataset, request.groups)
        x, y = (ctx.population.level(request.variable, level) for level in groups)
        canonical = request.model_copy(update={"groups": groups})
        return mwu_release(x, y, canonical, fresh_rng()).to_payload()

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON,
                request: MWURequest) -> MWURelease:
        release = MWURelease.model_validate(stored)
        if canonical_levels(dataset, request.groups)[1]:
            tails = release.exact_log_tails
            release = release.model_copy(update={
                "statistic": -release.statistic, "n_x": release.n_y, "n_y": release.n_x,
                # U ↦ −U: P(U' >= −u) = P(U <= u)
                "exact_log_tails": None if tails is None else [tails[1], tails[0]],
            })
        return release


class DPMWUKind(ReleaseKind[DPMWURequest, DPMWURelease]):
    """The ε-DP twin of :class:`MWUKind` under add/remove neighbours (``shared.dp.mwu``; DP mode
    answers it): noisy sizes n̂ (ε₁ = ``size_share``·ε), a public cap M from them, U' over at
    most M records per level (a uniform subset of a larger level) + Laplace(2M/ε₂). Nothing
    exact is shown: no size, no tie count, no noise scale but the one the released n̂ fix.
    Paid before it is computed, like every DP kind.

    The two levels' order is part of the wording, not of the meaning: (b, a) is answered from
    the stored answer of (a, b), with Ũ negated and the noisy sizes swapped (post-processing)."""

    wire = kinds.DP_MWU
    exact = False
    tag = "mann-whitney"
    summary = ("the local Mann-Whitney statistic, ε-DP under add/remove (noisy sizes, U over "
               "at most M records per level, Laplace(2M/ε₂))")

    def check(self, gate: ReleaseGate, dataset: Dataset, request: DPMWURequest) -> None:
        dataset.check_variable(request.variable)
        dataset.check_levels(request.groups)

    def question(self, gate: ReleaseGate, dataset: Dataset, request: DPMWURequest) -> Question:
        groups, _ = canonical_levels(dataset, request.groups)
        return Question(request.variable, {"dp_mwu": request.variable, "groups": groups,
                                           "epsilon": request.epsilon,
                                           "size_share": request.size_share},
                        request.epsilon)

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: DPMWURequest) -> None:
        require_each_level(gate, dataset, population, request.variable, request.groups)

    def compute(self, ctx: Context, request: DPMWURequest) -> JSON:
        groups, _ = canonical_levels(ctx.dataset, request.groups)
        x, y = (ctx.population.level(request.variable, level) for level in groups)
        result = dp_mann_whitney(x, y, epsilon=request.epsilon, rng=fresh_rng(),
                                 size_share=request.size_share)
        return DPMWURelease.from_result(result).to_payload()

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON,
                request: DPMWURequest) -> DPMWURelease:
        release = DPMWURelease.model_validate(stored)
        if canonical_levels(dataset, request.groups)[1]:
            release = release.model_copy(update={
                "statistic": -release.statistic, "n_x_hat": release.n_y_hat,
                "n_y_hat": release.n_x_hat})
        return release


# -- differentially private releases -------------------------------------------------------------


class DPKind(ReleaseKind[Req, Rel]):
    """An ε-DP release of one level (or every record): paid before it is computed; the data
    are clipped to the request's public bounds by the mechanism."""

    tag = "differential privacy"
    exact = False
    compute_release: ClassVar[Callable[..., WireModel]]
    uses_k: ClassVar[bool] = False
    """Whether ``compute_release`` takes the center's K (it releases a size rounded down to K)."""
    uses_resolution: ClassVar[bool] = False
    """Whether ``compute_release`` outputs on the grid of the variable's declared resolution."""

    def resolution(self, dataset: Dataset, request: Req) -> float | None:
        """The variable's public resolution (``[datasets.X.metadata.v]``), None if undeclared."""
        if not self.uses_resolution:
            return None
        meta = dataset.config.metadata.get(self.variable(request))
        return meta.resolution if meta is not None else None

    def check(self, gate: ReleaseGate, dataset: Dataset, request: Req) -> None:
        super().check(gate, dataset, request)
        resolution = self.resolution(dataset, request)
        if resolution is not None:
            try:  # public: the declared resolution and the request's bounds
                make_grid(request.bounds, resolution)  # type: ignore[attr-defined]
            except ValueError as exc:
                raise InvalidRequest(f"bounds: {exc}") from None

    def question(self, gate: ReleaseGate, dataset: Dataset, request: Req) -> Question:
        """A declared resolution is part of what is asked (the answer lies on its grid); the
        meaning of a question about a variable without one is unchanged."""
        question = super().question(gate, dataset, request)
        resolution = self.resolution(dataset, request)
        if resolution is None:
            return question
        return Question(question.variable, {**question.meaning, "resolution": resolution},
                        question.epsilon)

    def compute(self, ctx: Context, request: Req) -> JSON:
        x = ctx.population.selection(self.variable(request), getattr(request, "group", None))
        settings = ctx.gate.settings
        center_k: dict[str, int | None] = {"k": settings.k} if self.uses_k else {}
        if self.uses_k and ctx.dataset.config.release_mode == "dp":
            # DP mode shows no size rounded to K: the operator's declared one, or none.
            request, center_k = self.declared(ctx.dataset, request), {"k": None}
        resolution = self.resolution(ctx.dataset, request)
        on_grid = {"resolution": resolution} if resolution is not None else {}
        release = type(self).compute_release(x, request, settings.neighbouring, rng=fresh_rng(),
                                             **center_k, **on_grid)
        if self.uses_k and ctx.dataset.config.release_mode == "dp":
            release = self.with_declared_size(ctx.dataset, request, release)
        return release.to_payload()

    def declared(self, dataset: Dataset, request: Req) -> Req:
        """DP mode: the request as computed (its public size filled in from the configuration
        where the kind takes one)."""
        return request

    def with_declared_size(self, dataset: Dataset, request: Req, release: WireModel) -> WireModel:
        """DP mode: the release with the declared size where the kind shows one."""
        return release


class DPQuantilesKind(DPKind[DPQuantilesRequest, DPQuantilesRelease]):
    """``n_public`` is this center's size rounded down to K; in DP mode the declared size of the
    selection, or none."""

    wire = kinds.DP_QUANTILES
    summary = ("ε-DP quantiles by JointExp, PrivateQuantile (ε split evenly), ApproxQuantile or "
               "the unbounded walk (ε split evenly)")
    compute_release = staticmethod(dp_quantiles_release)
    uses_k = True
    uses_resolution = True

    def with_declared_size(self, dataset: Dataset, request: DPQuantilesRequest,
                           release: WireModel) -> WireModel:
        size = dataset.config.declared_size(request.group)
        return release.model_copy(update={"n_public": size})


class DPBoxplotKind(DPKind[DPBoxplotRequest, DPBoxplotRelease]):
    """Under add/remove the whisker buffer takes a public size: the request's ``n_public``, else
    this center's size rounded down to K, which DP mode does not show: there the declared size
    of the selection, and without one the request must give ``n_public``."""

    wire = kinds.DP_BOXPLOT
    summary = ("ε-DP boxplot (DPBoxplot); under add/remove the whisker buffer uses a public "
               "size: n_public, or this center's size rounded down to a multiple of K")
    compute_release = staticmethod(dp_boxplot_release)
    uses_k = True
    uses_resolution = True
    dp_alternative = ("without a declared size of the selection the whisker buffer would use "
                      "this center's size rounded down to K: give `n_public`")

    def exact_release(self, dataset: Dataset, request: DPBoxplotRequest) -> bool:
        return (request.n_public is None
                and dataset.config.declared_size(request.group) is None)

    def declared(self, dataset: Dataset, request: DPBoxplotRequest) -> DPBoxplotRequest:
        if request.n_public is not None:
            return request
        size = dataset.config.declared_size(request.group)
        assert size is not None  # refused otherwise (exact_release)
        return request.model_copy(update={"n_public": max(4, size)})


class ExtremesKind(DPKind[ExtremesRequest, ExtremesRelease]):
    wire = kinds.DP_EXTREMES
    summary = "pooled boxplot round 1: ε-DP minimum and maximum (unbounded walks, ε/2 each)"
    compute_release = staticmethod(extremes_release)


class TreeHistogramKind(DPKind[TreeHistogramRequest, TreeHistogramRelease]):
    wire = kinds.DP_TREE_HISTOGRAM
    summary = "pooled boxplot round 2: an ε-DP hierarchical histogram on the caller's grid"
    compute_release = staticmethod(tree_histogram_release)


class ThresholdCountsKind(DPKind[ThresholdCountsRequest, ThresholdCountsRelease]):
    wire = kinds.DP_THRESHOLD_COUNTS
    summary = "pooled boxplot round 3: ε-DP #{x < lower} and #{x > upper}"
    compute_release = staticmethod(threshold_counts_release)


class YJMomentsKind(DPKind[YJMomentsRequest, YJMomentsRelease]):
    """ε-DP moment sums for the YJ-data quantiles: values clipped to the public bounds, Laplace
    noise calibrated to the sums' L1 sensitivity there; counted per dataset and per token."""

    wire = kinds.YJ_MOMENTS
    tag = "federated quantiles"
    exact = True  # its n is the selection's exact size
    dp_alternative = "its n is the exact size of the selection: ask for dp_quantiles instead"
    summary = "ε-DP Yeo-Johnson moment sums at one λ"
    compute_release = staticmethod(yj_moments_release)

    def check(self, gate: ReleaseGate, dataset: Dataset, request: YJMomentsRequest) -> None:
        super().check(gate, dataset, request)
        sensitivity = yj_moments_sensitivity(request.lmbda, request.bounds,
                                             gate.settings.neighbouring)
        if not np.isfinite(sensitivity) or sensitivity <= 0:
            raise InvalidRequest(
                "`bounds` and `lmbda` give no finite sensitivity of the YJ sums: narrow the bounds"
            )
        if sensitivity / request.epsilon > MAX_NOISE_SCALE:
            raise InvalidRequest(
                "`bounds`, `lmbda` and `epsilon` give a noise scale beyond any use (and beyond "
                "floating point): narrow the bounds or raise epsilon"
            )

    def count_calls(self, gate: ReleaseGate, conn: Any, dataset: Dataset, caller: str) -> None:
        settings = gate.settings
        gate.ledger.count(conn, dataset.name, "*", self.name, settings.yj_max_calls)
        gate.ledger.count(conn, dataset.name, caller, self.name, settings.yj_max_calls_per_token)


class DescribeKind(DPKind[DescribeRequest, DescribeRelease]):
    """An ε-DP description of one variable (one level or every record) for a "Table 1"
    (``shared.describe.dp_describe``): noisy N, JointExp quartiles, noisy sums of the values
    clipped to a DP range read off them (mean, SD), a Laplace histogram tree; ε split in fixed
    shares, each part's mechanism and noise scale stated in the release. The bounds are the
    request's or, when it gives none, the variable's declared public bounds
    (``[datasets.X.metadata.v]``): a variable with neither is refused from the request and the
    configuration alone. Either wording of the same bounds is one question (one stored
    answer). In DP mode, at a center counting records per variable, the count part also
    releases the selection's records missing the variable (a Table 1's "missing, n (%)", the
    DP twin of ``missing``), at no more ε."""

    wire = kinds.DP_DESCRIBE
    summary = ("ε-DP descriptive statistics (N, mean, SD, quartiles, histogram) of one "
               "variable, bounded by the request's or the declared bounds")
    uses_resolution = True

    @staticmethod
    def bounds(dataset: Dataset, request: DescribeRequest) -> tuple[float, float]:
        if request.bounds is not None:
            return request.bounds
        meta = dataset.config.metadata.get(request.variable)
        if meta is None or meta.bounds is None:
            raise InvalidRequest(
                f"variable {request.variable!r} of dataset {dataset.name!r} declares no public "
                "bounds at this center: give `bounds`")
        return meta.bounds

    def check(self, gate: ReleaseGate, dataset: Dataset, request: DescribeRequest) -> None:
        # The variable and level (ReleaseKind's check; DPKind's needs the request's bounds).
        ReleaseKind.check(self, gate, dataset, request)
        bounds = self.bounds(dataset, request)
        resolution = self.resolution(dataset, request)
        if resolution is not None:
            try:  # public: the declared resolution and the bounds in force
                make_grid(bounds, resolution)
            except ValueError as exc:
                raise InvalidRequest(f"bounds: {exc}") from None

    def question(self, gate: ReleaseGate, dataset: Dataset,
                 request: DescribeRequest) -> Question:
        """The bounds in force (either wording), and a declared resolution (the quantiles lie
        on its grid) when there is one."""
        meaning = {**request.to_payload(), "bounds": list(self.bounds(dataset, request))}
        resolution = self.resolution(dataset, request)
        if resolution is not None:
            meaning["resolution"] = resolution
        return Question(request.variable, meaning, request.epsilon)

    def compute(self, ctx: Context, request: DescribeRequest) -> JSON:
        population = ctx.population
        x = population.selection(request.variable, request.group)
        neighbouring = ctx.gate.settings.neighbouring
        missing = None
        if ctx.dataset.dp_mode and population.level_sizes is not None:
            # DP mode (add/remove), records counted per variable: the selection's records
            # missing it, released with the count as one pair at the count's scale (disjoint
            # sets: L1 sensitivity 1 under add/remove, so no more ε; shared.describe
            # .dp_describe), the DP twin of the exact `missing` it refuses. Complete cases:
            # none. K-anonymous mode releases the exact counts instead (MissingKind).
            records = (population.n if request.group is None
                       else population.sizes[request.group])
            missing = records - int(x.size)
        result = dp_describe(x, epsilon=request.epsilon, bounds=self.bounds(ctx.dataset, request),
                             bins=request.bins, neighbouring=neighbouring, rng=fresh_rng(),
                             resolution=self.resolution(ctx.dataset, request), missing=missing)
        return DescribeRelease.from_result(result).to_payload()


class QuantileLossKind(ReleaseKind[QuantileLossRequest, QuantileLossRelease]):
    """Σ ρ_level(x − u), the seed's benchmark. It leaks the data (piecewise linear in u with a
    kink at every value), so it is refused unless the operator switches it on."""

    wire = kinds.QUANTILE_LOSS
    tag = "federated quantiles"
    dp_alternative = "quantile-loss values show the data: ask for dp_quantiles instead"
    summary = "quantile-loss values (refused unless allow_quantile_loss)"

    def check(self, gate: ReleaseGate, dataset: Dataset, request: QuantileLossRequest) -> None:
        if not gate.settings.allow_quantile_loss:
            raise ReleaseDisabled(
                "quantile-loss values leak data and are disabled at this center "
                "(setting allow_quantile_loss)"
            )
        super().check(gate, dataset, request)

    def compute(self, ctx: Context, request: QuantileLossRequest) -> JSON:
        x = ctx.population.selection(request.variable, request.group)
        return quantile_loss_release(x, request).to_payload()


# -- categorical variables ------------------------------------------------------------------


def category_limits(n_categories: int) -> FloatArray:
    """The public limits that cut a categorical variable's codes (0..C-1 the categories, C the
    missing cell) into one cell each: j + ½ between codes j and j + 1. Never placed between
    data: codes are public, so guarantee 13 has nothing to cover."""
    return np.arange(-0.5, n_categories + 1.0, 1.0)


class CategoricalKind(ReleaseKind[CategoricalRequest, CategoricalRelease]):
    """This center's K-anonymous counts of one categorical variable per category (and the
    missing cell) and group: one group, two declared levels, or all pooled.

    One canonical table per variable and epoch (every declared level, every category and the
    missing cell), admitted by disclosure control like a numeric table: its cells are the bins
    of the codes between the public limits of :func:`category_limits`, so a cell of 1..K-1
    records (with the levels' sizes and every earlier release of the variable) is merged with
    its neighbours in the declared order (``TableCandidate.coarsen``: a run of such cells
    together, a lone one with the next). Every wording (levels, their order, a study's K above
    the center's: cells merged again by the same rule, ``shared.category_counts.merge_adjacent``)
    is a view of it: sums of its cells (docs/privacy.md, guarantee 15)."""

    dp_alternative = "ask for dp_categorical (ε-DP counts per category) instead"
    wire = kinds.CATEGORICAL
    tag = "categorical"
    summary = "this center's K-anonymous counts of a categorical variable per category and group"

    def variable(self, request: CategoricalRequest) -> str:
        return request.variable

    def check(self, gate: ReleaseGate, dataset: Dataset, request: CategoricalRequest) -> None:
        dataset.check_categorical(request.variable)
        dataset.check_levels(request.groups)
        gate.check_k(request.k)

    def question(self, gate: ReleaseGate, dataset: Dataset,
                 request: CategoricalRequest) -> Question:
        return Question(request.variable, {"categorical": request.variable})

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: CategoricalRequest) -> None:
        for level in request.groups or (None,):
            dataset.require(population, level, request.k)

    def compute(self, ctx: Context, request: CategoricalRequest) -> JSON:
        categories = ctx.dataset.check_categorical(request.variable)
        levels = ctx.population.levels
        counts = category_counts([ctx.population.level(request.variable, level)
                                  for level in levels], len(categories))
        k = ctx.gate.settings.k
        table = BinTable(limits=category_limits(len(categories)),
                         counts=counts.astype(np.float64), k=k)
        admitted = ctx.admit(request.variable, TableCandidate(table, levels, ctx.dataset.name))
        assert isinstance(admitted, TableCandidate)
        # Each released cell: the codes between two kept limits.
        kept = admitted.table.limits
        cells = [[code for code in range(len(categories) + 1) if lo < code < hi]
                 for lo, hi in zip(kept[:-1].tolist(), kept[1:].tolist(), strict=True)]
        return {"levels": list(levels), "cells": cells,
                "counts": admitted.table.counts.astype(np.int64).tolist(), "k": k}

    def present(self, gate: ReleaseGate, dataset: Dataset, stored: JSON,
                request: CategoricalRequest) -> CategoricalRelease:
        categories = dataset.check_categorical(request.variable)
        levels = list(stored["levels"])
        counts = np.asarray(stored["counts"], dtype=np.int64)
        rows = (counts[[levels.index(lv) for lv in request.groups]] if request.groups is not None
                else counts.sum(axis=0, keepdims=True))
        cells = tuple(tuple(int(c) for c in cell) for cell in stored["cells"])
        view = merge_adjacent(rows, max(request.k, int(stored["k"])), cells)
        missing_code = len(categories)
        alone = view.cells[-1] == (missing_code,)
        return CategoricalRelease(
            categories=list(categories),
            cells=[[categories[c] if c < missing_code else None for c in cell]
                   for cell in view.cells],
            counts=view.counts.tolist(),
            missing=view.counts[:, -1].tolist() if alone else None,
            k=request.k,
        )


class DPCategoricalKind(ReleaseKind[DPCategoricalRequest, DPCategoricalRelease]):
    """ε-DP counts of one categorical variable per category and the missing cell, in one
    declared level or every record: two-sided geometric noise, Δ = 1 (add/remove) or 2
    (swap), paid before it is computed (``shared.category_counts.dp_category_counts``)."""

    wire = kinds.DP_CATEGORICAL
    exact = False  # noisy cells, public categories: nothing exact (DP mode answers it)
    tag = "differential privacy"
    summary = "ε-DP counts of a categorical variable per category (two-sided geometric noise)"

    def check(self, gate: ReleaseGate, dataset: Dataset, request: DPCategoricalRequest) -> None:
        dataset.check_categorical(request.variable)
        if request.group is not None:
            dataset.check_level(request.group)

    def compute(self, ctx: Context, request: DPCategoricalRequest) -> JSON:
        categories = ctx.dataset.check_categorical(request.variable)
        codes = ctx.population.selection(request.variable, request.group)
        neighbouring = ctx.gate.settings.neighbouring
        noisy = dp_category_counts(codes, len(categories), epsilon=request.epsilon,
                                   neighbouring=neighbouring, rng=fresh_rng())
        counts = noisy.counts.tolist()
        return DPCategoricalRelease(
            categories=list(categories), counts=counts[:-1], missing=counts[-1],
            epsilon=request.epsilon, neighbouring=neighbouring, alpha=noisy.alpha,
            sensitivity=noisy.sensitivity, variance=noisy.variance, halfwidth=noisy.halfwidth,
        ).to_payload()


class MissingKind(ReleaseKind[MissingRequest, MissingRelease]):
    """Per declared level: its records, those with the numeric variable present and those
    missing it, exact. Each is 0 or >= K by the population's rule (``center_agent.data.missing``)
    and each is already determined by releases the disclosure memory counts as made (a level's
    size, a variable's present total: Mann-Whitney's n, a table's total), so this adds no atom:
    it says them in one place, for a Table 1 (docs/privacy.md, guarantee 15)."""

    dp_alternative = ("missing counts are exact: the DP twins (dp_categorical's missing cell, "
                      "dp_describe's count) count with noise instead")
    wire = kinds.MISSING
    tag = "tables"
    summary = "records per level with a numeric variable present and missing (exact, 0 or >= K)"

    def question(self, gate: ReleaseGate, dataset: Dataset, request: MissingRequest) -> Question:
        return Question(request.variable, {"missing": request.variable})

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: MissingRequest) -> None:
        """Nothing: a level left out shows 0, as ``/v1/info`` does."""

    def compute(self, ctx: Context, request: MissingRequest) -> JSON:
        population = ctx.population
        levels = list(ctx.dataset.levels) or list(population.levels)
        sizes = population.sizes
        n = [sizes.get(level, 0) for level in levels]
        present = [population.size(request.variable, level) if level in population.levels
                   else 0 for level in levels]
        return MissingRelease(
            levels=levels, n=n, present=present,
            missing=[a - b for a, b in zip(n, present, strict=True)],
            complete_cases=ctx.dataset.config.missing == "complete_cases",
            k=ctx.gate.settings.k,
        ).to_payload()


# -- time-to-event variables ----------------------------------------------------------------


class DPLifeTableKind(ReleaseKind[DPLifeTableRequest, DPLifeTableRelease]):
    """One arm's ε-DP life table of a declared time-to-event variable (one declared level, or
    every record): the events and censorings per interval of the request's public grid, each
    plus Laplace noise of scale Δ₁/ε, Δ₁ = 1 under add/remove and 2 under swap (the center's
    neighbouring relation; Laplace, δ = 0, as every DP release of a center), paid before it is
    computed (``shared.dp.life_table``, docs/privacy.md guarantee 17). The grid lies in the
    declared follow-up range (public), a time after its end censored in the last interval.
    Nothing exact is shown: no size, no count; every selection is answered, none included."""

    wire = kinds.DP_LIFE_TABLE
    exact = False
    tag = "differential privacy"
    summary = ("ε-DP life table of a time-to-event variable: noisy events and censorings per "
               "interval of a public grid inside the declared follow-up (Laplace)")

    def check(self, gate: ReleaseGate, dataset: Dataset, request: DPLifeTableRequest) -> None:
        start, end = dataset.check_time_to_event(request.variable)
        if request.group is not None:
            dataset.check_level(request.group)
        if request.grid[0] < start or request.grid[-1] > end:
            raise InvalidRequest(
                f"`grid` must lie inside the follow-up range [{start:g}, {end:g}] that "
                f"time-to-event variable {request.variable!r} of dataset {dataset.name!r} "
                f"declares; got [{request.grid[0]:g}, {request.grid[-1]:g}]")

    def question(self, gate: ReleaseGate, dataset: Dataset,
                 request: DPLifeTableRequest) -> Question:
        return Question(request.variable, {
            "dp_life_table": request.variable, "group": request.group,
            "epsilon": request.epsilon, "grid": [float(c) for c in request.grid]},
            request.epsilon)

    def require(self, gate: ReleaseGate, dataset: Dataset, population: Population,
                request: DPLifeTableRequest) -> None:
        """The level's public size only, as every DP kind (nothing in DP mode): the records
        holding the variable are counted by noisy cells only, never refused by their number."""
        dataset.require(population, request.group, gate.settings.k)

    def compute(self, ctx: Context, request: DPLifeTableRequest) -> JSON:
        rows = ctx.population.joint_selection(request.variable, request.group)
        return dp_life_table_release(rows[:, 0], rows[:, 1], request,
                                     ctx.gate.settings.neighbouring, fresh_rng()).to_payload()


KINDS: tuple[ReleaseKind[Any, Any], ...] = (
    TableKind(),
    RefineKind(),
    MWUKind(),
    DPQuantilesKind(),
    DPBoxplotKind(),
    ExtremesKind(),
    TreeHistogramKind(),
    ThresholdCountsKind(),
    YJMomentsKind(),
    QuantileLossKind(),
    DescribeKind(),
    CategoricalKind(),
    DPCategoricalKind(),
    MissingKind(),
    DPMWUKind(),
    DPLifeTableKind(),
)
"""Every release a center makes; the routes are made from this list (``api/routes/releases``)."""
