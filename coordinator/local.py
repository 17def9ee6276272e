"""``InProcessCenter``: a ``CenterPort`` over raw arrays, calling the ``shared/`` core directly.

For simulations and tests: the protocols run unchanged over in-process centers, and their results
can be compared with the core's in-process functions (``shared.federation.federated_table``).
It answers what a real center would (sizes rounded down to a multiple of K, releases from the core)
but has no ledger, no auditor and no budget: never put real data behind it.

Example::

    rng = np.random.default_rng(7)
    a = InProcessCenter("a", {"cohort": LocalDataset({"age": ages}, groups=arm,
                                                     levels=("ctl", "trt"))}, rng=rng)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from shared.binning import KAnonymityError
from shared.privacy import Neighbouring
from shared.protocol import (
    BinTableRelease,
    Budget,
    CenterInfo,
    DatasetInfo,
    DPBoxplotRelease,
    DPBoxplotRequest,
    DPQuantilesRelease,
    DPQuantilesRequest,
    ExtremesRelease,
    ExtremesRequest,
    GroupInfo,
    Health,
    MWURelease,
    MWURequest,
    RefinementRelease,
    RefinementRequest,
    TableRequest,
    ThresholdCountsRelease,
    ThresholdCountsRequest,
    TreeHistogramRelease,
    TreeHistogramRequest,
)
from shared.quantiles.wire import YJMomentsRelease, YJMomentsRequest
from shared.releases import (
    dp_boxplot_release,
    dp_quantiles_release,
    extremes_release,
    mwu_release,
    public_size,
    refinement_release,
    table_release,
    threshold_counts_release,
    tree_histogram_release,
    yj_moments_release,
)

_T = TypeVar("_T")
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LocalDataset:
    """Variables (aligned arrays) and, optionally, the group label of each row."""

    variables: Mapping[str, ArrayLike]
    groups: ArrayLike | None = None
    levels: tuple[str, ...] = ()
    _kept: dict[tuple[str, str | None], FloatArray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        sizes = {np.asarray(v).size for v in self.variables.values()}
        if self.groups is not None:
            sizes.add(np.asarray(self.groups).size)
        if len(sizes) > 1:
            raise ValueError("every variable (and the groups) must have one value per row")

    @property
    def n_rows(self) -> int:
        return max((np.asarray(v).size for v in self.variables.values()), default=0)

    def values(self, variable: str, level: str | None = None) -> FloatArray:
        """Finite values of ``variable`` (of one group level when given), sorted.

        Computed once per (variable, level) and kept sorted, as a center keeps its loaded data:
        the arrays given must not change afterwards.
        """
        kept = self._kept.get((variable, level))
        if kept is None:
            v = np.asarray(self.variables[variable], dtype=np.float64)
            keep = np.isfinite(v)
            if level is not None:
                keep &= np.asarray(self.groups) == level
            kept = self._kept[(variable, level)] = np.sort(v[keep])
            kept.flags.writeable = False
        return kept


class InProcessCenter:
    """A :class:`coordinator.ports.CenterPort` over arrays held in this process."""

    def __init__(
        self,
        center_id: str,
        datasets: Mapping[str, LocalDataset],
        *,
        rng: np.random.Generator,
        k: int = 10,
        neighbouring: Neighbouring = "add_remove",
    ) -> None:
        self._id = center_id
        self.datasets = dict(datasets)
        self.rng = rng
        self.k = k
        self.neighbouring: Neighbouring = neighbouring

    @property
    def center_id(self) -> str:
        return self._id

    async def health(self) -> Health:
        return Health(status="ok")

    async def info(self) -> CenterInfo:
        described = []
        for name, ds in self.datasets.items():
            group = GroupInfo(column="group", levels=list(ds.levels)) if ds.levels else None
            labels = np.asarray(ds.groups) if ds.groups is not None else None
            by_group = {
                level: public_size(int(np.sum(labels == level)), self.k)
                for level in ds.levels
                if labels is not None
            }
            described.append(
                DatasetInfo(
                    name=name,
                    variables=list(ds.variables),
                    group=group,
                    n_records=public_size(ds.n_rows, self.k),
                    n_by_group=by_group,
                )
            )
        return CenterInfo(
            center_id=self._id, k=self.k, neighbouring=self.neighbouring,
            quantile_loss_enabled=False, datasets=described,
        )

    async def budget(self) -> Budget:
        return Budget(datasets={})

    async def table(self, dataset: str, request: TableRequest) -> BinTableRelease:
        x, y = self._sample(dataset, request.variable, request.groups)
        groups = [x] if y is None else [x, y]
        return self._guard(lambda: table_release(groups, request, self.rng))

    async def refine(self, dataset: str, request: RefinementRequest) -> RefinementRelease:
        x, y = self._sample(dataset, request.variable, request.groups)
        groups = [x] if y is None else [x, y]
        return self._guard(lambda: refinement_release(groups, request, self.rng))

    async def mwu(self, dataset: str, request: MWURequest) -> MWURelease:
        x, y = self._sample(dataset, request.variable, request.groups)
        assert y is not None  # MWURequest always names two levels
        for level, values in zip(request.groups, (x, y), strict=True):
            if values.size < self.k:
                raise CenterFailure(self._id, "refused",
                                    f"group {level!r} holds fewer than K = {self.k} records",
                                    center_error="k_anonymity")
        return self._guard(lambda: mwu_release(x, y, request, self.rng))

    # -- DP releases, as the center agent makes them (no ledger here: nothing is accounted) ----

    async def dp_quantiles(
        self, dataset: str, request: DPQuantilesRequest
    ) -> DPQuantilesRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(lambda: dp_quantiles_release(x, request, self.neighbouring, self.rng))

    async def dp_boxplot(self, dataset: str, request: DPBoxplotRequest) -> DPBoxplotRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(
            lambda: dp_boxplot_release(x, request, self.neighbouring, self.k, self.rng)
        )

    async def dp_extremes(self, dataset: str, request: ExtremesRequest) -> ExtremesRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(lambda: extremes_release(x, request, self.neighbouring, self.rng))

    async def dp_tree_histogram(
        self, dataset: str, request: TreeHistogramRequest
    ) -> TreeHistogramRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(
            lambda: tree_histogram_release(x, request, self.neighbouring, self.rng)
        )

    async def dp_threshold_counts(
        self, dataset: str, request: ThresholdCountsRequest
    ) -> ThresholdCountsRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(
            lambda: threshold_counts_release(x, request, self.neighbouring, self.rng)
        )

    async def yj_moments(self, dataset: str, request: YJMomentsRequest) -> YJMomentsRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        return self._guard(lambda: yj_moments_release(x, request, self.neighbouring, self.rng))

    # -- helpers -----------------------------------------------------------------------------

    def _sample(
        self, dataset: str, variable: str, groups: tuple[str, str] | None
    ) -> tuple[FloatArray, FloatArray | None]:
        ds = self.datasets.get(dataset)
        if ds is None:
            raise CenterFailure(self._id, "error", f"no dataset named {dataset!r}",
                                center_error="unknown_dataset")
        if variable not in ds.variables:
            raise CenterFailure(self._id, "error", f"no variable {variable!r}",
                                center_error="unknown_variable")
        if groups is None:
            return ds.values(variable), None
        for level in groups:
            if level not in ds.levels:
                raise CenterFailure(self._id, "error", f"no group level {level!r}",
                                    center_error="unknown_variable")
        return ds.values(variable, groups[0]), ds.values(variable, groups[1])

    def _dp_values(self, dataset: str, variable: str, group: str | None) -> FloatArray:
        """One level's values (all records for None); fewer than K are refused."""
        x, _ = self._sample(dataset, variable, None)
        if group is not None:
            ds = self.datasets[dataset]
            if group not in ds.levels:
                raise CenterFailure(self._id, "error", f"no group level {group!r}",
                                    center_error="unknown_variable")
            x = ds.values(variable, group)
        if x.size < self.k:
            raise CenterFailure(self._id, "refused",
                                f"the selection holds fewer than K = {self.k} records",
                                center_error="k_anonymity_refused")
        return x

    def _guard(self, compute: Callable[[], _T]) -> _T:
        try:
            return compute()
        except KAnonymityError as exc:
            raise CenterFailure(self._id, "refused", str(exc),
                                center_error="k_anonymity") from None
        except ValueError as exc:
            raise CenterFailure(self._id, "error", str(exc)) from None


if TYPE_CHECKING:  # an InProcessCenter is a CenterPort (checked by mypy, not at run time)
    _port: CenterPort = InProcessCenter("", {}, rng=np.random.default_rng())
