"""The coordinator's analyses, one module each (``coordinator/analyses/<kind>.py``, an
:class:`~coordinator.analyses.base.Analysis`), and :data:`REGISTRY`, the one list the rest of the
coordinator loops over: the study's run (``coordinator.study``), the ε each analysis spends
(``coordinator.quotas``, read by the quota check and the dry run), the names the catalog checks
(``coordinator.catalog``), the dry run's notes, power and errors (``coordinator.plan``,
``coordinator.utility``), the console's builder (``coordinator.ui.forms``) and everything shown
of a study (``coordinator.reporting``: the report, the Methods text, the exports, the figures,
the report's flags; the reproducibility record's algorithms, :func:`algorithms`).

Adding an analysis: its module here (and its entry below), its spec and result models in
``coordinator.models`` (the API's leaf), and the center's release kinds it asks for, if new
(``center_agent/gate/kinds.py``): README, "How imports flow";
``tests/coordinator/test_coord_registry_contract.py`` says what is missing.
"""

from __future__ import annotations

from typing import Any

from coordinator.analyses.base import Analysis, FormError, Request, Spend, StudyRun
from coordinator.analyses.categorical import Categorical
from coordinator.analyses.describe import Describe
from coordinator.analyses.dp_boxplot import DPBoxplot
from coordinator.analyses.dp_mwu import DPMWU
from coordinator.analyses.dp_quantiles import DPQuantiles
from coordinator.analyses.kruskal import Kruskal
from coordinator.analyses.mwu import MWU
from coordinator.analyses.quantiles import Quantiles
from coordinator.analyses.shift import Shift
from coordinator.analyses.survival import Survival
from coordinator.analyses.table import Table
from coordinator.models import Analysis as AnalysisSpec
from coordinator.models import StudySpec

# In the order the console's builder offers them.
REGISTRY: dict[str, Analysis[Any, Any]] = {
    a.kind: a for a in (Table(), MWU(), Quantiles(), DPBoxplot(), DPQuantiles(), Describe(),
                        Shift(), Categorical(), Kruskal(), DPMWU(), Survival())
}


def analysis_of(part: AnalysisSpec) -> Analysis[Any, Any]:
    """The registered analysis of a spec's part (by its ``kind``)."""
    return REGISTRY[part.kind]


def algorithms(spec: StudySpec) -> list[str]:
    """What computes each analysis of ``spec``, named as the Methods cite it (the
    reproducibility record's ``algorithms``)."""
    return [REGISTRY[part.kind].algorithm(part) for part in spec.analyses]


__all__ = ["REGISTRY", "Analysis", "FormError", "Request", "Spend", "StudyRun", "algorithms",
           "analysis_of"]
