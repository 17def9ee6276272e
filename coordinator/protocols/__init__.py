"""The federated protocols, each an async function over a list of ``CenterPort``s.

* :func:`survey_centers` — sizes first: every center's ``/v1/info`` in parallel, checked against
  the study (dataset, variable, group levels);
* :func:`federated_bin_table` — the largest center builds the table, the others refine it one by
  one (seed 001 Algorithms 4-6), one or two groups;
* :func:`federated_mwu` — the sum, weighted and Fisher tests from local releases fetched in
  parallel, the table test from the federated table;
* :func:`federated_dp_mwu` — the DP twin of the sum, weighted and Fisher tests from each
  center's ε-DP release under add/remove (DP mode answers it);
* :func:`federated_dp_boxplot` — each center's DP boxplot and the pooled DP box
  (docs/methods.md §6);
* :func:`center_dp_quantiles` — each center's DP quantiles, relayed and checked.

The table-based quantile estimators run on a federated table: ``coordinator.protocols.quantiles``.

The arithmetic is ``shared/``'s (``apply_refinement``, ``sum_test``, ...); the protocols only
decide who is asked what, in which order, and check every answer before using it. A center that
fails raises :class:`coordinator.core.errors.CenterFailure`; with ``allow_partial`` it is left out
and recorded instead, as long as ``min_centers`` remain.
"""

from coordinator.protocols.boxplot import FederatedBoxplot, PooledBox, federated_dp_boxplot
from coordinator.protocols.dp_mwu import FederatedDPMWU, federated_dp_mwu
from coordinator.protocols.dp_quantiles import CenterDPQuantiles, center_dp_quantiles
from coordinator.protocols.mwu import FederatedMWU, federated_mwu
from coordinator.protocols.survey import Survey, survey_centers
from coordinator.protocols.table import FederatedTable, federated_bin_table

__all__ = [
    "CenterDPQuantiles",
    "FederatedBoxplot",
    "FederatedDPMWU",
    "FederatedMWU",
    "FederatedTable",
    "PooledBox",
    "Survey",
    "center_dp_quantiles",
    "federated_bin_table",
    "federated_dp_boxplot",
    "federated_dp_mwu",
    "federated_mwu",
    "survey_centers",
]
