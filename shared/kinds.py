"""The release kinds, each declared once: its name, its path under ``/v1`` and its wire models.

Both services are made from this list. The center's gate (``center_agent.gate.kinds``) gives each
kind its policy (the checks, the question's meaning, ε, disclosure control) and its route is made
from it; the coordinator's ports (``coordinator.ports``) answer every kind through one typed
``release(kind, dataset, request)``::

    from shared import kinds

    release = await port.release(kinds.TABLE, "cohort", TableRequest(variable="age", k=10))
    # a BinTableRelease, validated

Adding a release kind: its request and release models (``shared.protocol``), one entry here, its
core function (``shared.releases``) and its policy (``center_agent.gate.kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared import protocol as wire
from shared.quantiles import wire as quantile_wire

Req = TypeVar("Req", bound=wire.WireModel)
Rel = TypeVar("Rel", bound=wire.WireModel)


@dataclass(frozen=True, eq=False)
class Kind(Generic[Req, Rel]):
    """One kind of release: ``POST /v1{path}`` (``{dataset}`` filled in) with a ``request``
    body, answered with a ``release``. ``name`` keys it in a center's ledger and audit log and
    in a study's provenance."""

    name: str
    path: str
    request: type[Req]
    release: type[Rel]

    def url(self, dataset: str) -> str:
        """The path for ``dataset`` (under ``/v1``)."""
        return self.path.format(dataset=dataset)


TABLE = Kind("table", "/datasets/{dataset}/table", wire.TableRequest, wire.BinTableRelease)
REFINE = Kind("refine", "/datasets/{dataset}/table/refine", wire.RefinementRequest,
              wire.RefinementRelease)
MWU = Kind("mwu", "/datasets/{dataset}/mwu", wire.MWURequest, wire.MWURelease)
DP_MWU = Kind("dp_mwu", "/datasets/{dataset}/dp/mwu", wire.DPMWURequest, wire.DPMWURelease)
DP_QUANTILES = Kind("dp_quantiles", "/datasets/{dataset}/dp/quantiles", wire.DPQuantilesRequest,
                    wire.DPQuantilesRelease)
DP_BOXPLOT = Kind("dp_boxplot", "/datasets/{dataset}/dp/boxplot", wire.DPBoxplotRequest,
                  wire.DPBoxplotRelease)
DP_EXTREMES = Kind("dp_extremes", "/datasets/{dataset}/dp/extremes", wire.ExtremesRequest,
                   wire.ExtremesRelease)
DP_TREE_HISTOGRAM = Kind("dp_tree_histogram", "/datasets/{dataset}/dp/tree-histogram",
                         wire.TreeHistogramRequest, wire.TreeHistogramRelease)
DP_THRESHOLD_COUNTS = Kind("dp_threshold_counts", "/datasets/{dataset}/dp/threshold-counts",
                           wire.ThresholdCountsRequest, wire.ThresholdCountsRelease)
YJ_MOMENTS = Kind("yj_moments", "/datasets/{dataset}/yj-moments",
                  quantile_wire.YJMomentsRequest, quantile_wire.YJMomentsRelease)
QUANTILE_LOSS = Kind("quantile_loss", "/datasets/{dataset}/quantile-loss",
                     quantile_wire.QuantileLossRequest, quantile_wire.QuantileLossRelease)
DP_DESCRIBE = Kind("dp_describe", "/datasets/{dataset}/dp/describe", wire.DescribeRequest,
                   wire.DescribeRelease)

CATEGORICAL = Kind("categorical", "/datasets/{dataset}/categorical", wire.CategoricalRequest,
                   wire.CategoricalRelease)
DP_CATEGORICAL = Kind("dp_categorical", "/datasets/{dataset}/dp/categorical",
                      wire.DPCategoricalRequest, wire.DPCategoricalRelease)
MISSING = Kind("missing", "/datasets/{dataset}/missing", wire.MissingRequest,
               wire.MissingRelease)
DP_LIFE_TABLE = Kind("dp_life_table", "/datasets/{dataset}/dp/life-table",
                     wire.DPLifeTableRequest, wire.DPLifeTableRelease)

KINDS: tuple[Kind[Any, Any], ...] = (
    TABLE, REFINE, MWU, DP_QUANTILES, DP_BOXPLOT, DP_EXTREMES, DP_TREE_HISTOGRAM,
    DP_THRESHOLD_COUNTS, YJ_MOMENTS, QUANTILE_LOSS, DP_DESCRIBE, CATEGORICAL, DP_CATEGORICAL,
    MISSING, DP_MWU, DP_LIFE_TABLE,
)
"""Every release kind, in the order the center's routes list them."""

BY_NAME: dict[str, Kind[Any, Any]] = {kind.name: kind for kind in KINDS}

BATCH_PATH = "/datasets/{dataset}/releases"
"""Several releases of one dataset in one call (``shared.protocol.BatchRequest``)."""
