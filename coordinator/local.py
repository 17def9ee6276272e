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
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from shared.binning import KAnonymityError, bin_table
from shared.dp import (
    approx_quantiles,
    joint_exp,
    private_quantile,
    unbounded_quantile,
)
from shared.dp.boxplot import dp_boxplot
from shared.dp.pooled import center_extremes, threshold_counts, tree_histogram
from shared.federation import refine_table
from shared.mechanisms import Laplace
from shared.mwu import mann_whitney
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

_T = TypeVar("_T")
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LocalDataset:
    """Variables (aligned arrays) and, optionally, the group label of each row."""

    variables: Mapping[str, ArrayLike]
    groups: ArrayLike | None = None
    levels: tuple[str, ...] = ()

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
        """Finite values of ``variable`` (of one group level when given)."""
        v = np.asarray(self.variables[variable], dtype=np.float64)
        keep = np.isfinite(v)
        if level is not None:
            keep &= np.asarray(self.groups) == level
        return v[keep]


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
                level: self._round(int(np.sum(labels == level)))
                for level in ds.levels
                if labels is not None
            }
            described.append(
                DatasetInfo(
                    name=name,
                    variables=list(ds.variables),
                    group=group,
                    n_records=self._round(ds.n_rows),
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
        return self._guard(
            lambda: BinTableRelease.from_table(
                bin_table(x, y, k=request.k, rng=self.rng, lower=request.lower,
                          upper=request.upper)
            )
        )

    async def refine(self, dataset: str, request: RefinementRequest) -> RefinementRelease:
        x, y = self._sample(dataset, request.variable, request.groups)
        return self._guard(
            lambda: refine_table(request.limits, x, y, k=request.k, rng=self.rng)
        )

    async def mwu(self, dataset: str, request: MWURequest) -> MWURelease:
        x, y = self._sample(dataset, request.variable, request.groups)
        assert y is not None  # MWURequest always names two levels
        for level, values in zip(request.groups, (x, y), strict=True):
            if values.size < self.k:
                raise CenterFailure(self._id, "refused",
                                    f"group {level!r} holds fewer than K = {self.k} records",
                                    center_error="k_anonymity")
        # The center agent's calibration: U moves by at most 2·max(n, m) when one value changes.
        noise = None
        if request.epsilon is not None:
            noise = Laplace(request.epsilon, 2.0 * max(x.size, y.size))
        result = self._guard(lambda: mann_whitney(x, y, noise=noise, rng=self.rng))
        return MWURelease.from_result(result)

    # -- DP releases, as the center agent makes them (no ledger here: nothing is accounted) ----

    async def dp_quantiles(
        self, dataset: str, request: DPQuantilesRequest
    ) -> DPQuantilesRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        eps, bounds, levels, relation = (request.epsilon, request.bounds, request.levels,
                                         self.neighbouring)

        def compute() -> list[float]:
            if request.algorithm == "joint_exp":
                return list(joint_exp(x, levels, epsilon=eps, bounds=bounds,
                                      neighbouring=relation, rng=self.rng).values)
            if request.algorithm == "approx_quantile":
                return list(approx_quantiles(x, levels, epsilon=eps, bounds=bounds,
                                             neighbouring=relation, rng=self.rng).values)
            # One level at a time, ε split evenly (sequential composition), as a center does.
            single = private_quantile if request.algorithm == "private_quantile" else (
                unbounded_quantile
            )
            return [single(x, q, epsilon=eps / len(levels), bounds=bounds,
                           neighbouring=relation, rng=self.rng).values[0] for q in levels]

        return DPQuantilesRelease(levels=levels, values=self._guard(compute),
                                  algorithm=request.algorithm, epsilon=eps,
                                  neighbouring=relation)

    async def dp_boxplot(self, dataset: str, request: DPBoxplotRequest) -> DPBoxplotRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        n_public = None
        if self.neighbouring == "add_remove":
            n_public = request.n_public or max(4, self._round(x.size))
        result = self._guard(lambda: dp_boxplot(
            x, epsilon=request.epsilon, bounds=request.bounds, neighbouring=self.neighbouring,
            rng=self.rng, n_public=n_public))
        return DPBoxplotRelease.from_result(result)

    async def dp_extremes(self, dataset: str, request: ExtremesRequest) -> ExtremesRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        e = self._guard(lambda: center_extremes(
            x, epsilon=request.epsilon, bounds=request.bounds, neighbouring=self.neighbouring,
            rng=self.rng))
        return ExtremesRelease(psi_min=e.psi_min, psi_max=e.psi_max, epsilon=e.spent.epsilon)

    async def dp_tree_histogram(
        self, dataset: str, request: TreeHistogramRequest
    ) -> TreeHistogramRelease:
        x = np.clip(self._dp_values(dataset, request.variable, request.group), *request.bounds)
        t = self._guard(lambda: tree_histogram(
            x, grid=request.grid, depth=request.depth, branching=request.branching,
            epsilon=request.epsilon, neighbouring=self.neighbouring, rng=self.rng))
        return TreeHistogramRelease(levels=[level.tolist() for level in t.levels],
                                    branching=t.branching, noise_scale=t.noise_scale,
                                    epsilon=t.spent.epsilon)

    async def dp_threshold_counts(
        self, dataset: str, request: ThresholdCountsRequest
    ) -> ThresholdCountsRelease:
        x = self._dp_values(dataset, request.variable, request.group)
        c = self._guard(lambda: threshold_counts(
            x, lower=request.lower, upper=request.upper, epsilon=request.epsilon,
            neighbouring=self.neighbouring, rng=self.rng))
        return ThresholdCountsRelease(below=c.below, above=c.above, epsilon=c.spent.epsilon)

    # -- helpers -----------------------------------------------------------------------------

    def _round(self, n: int) -> int:
        return (n // self.k) * self.k

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
