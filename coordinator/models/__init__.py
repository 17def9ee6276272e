"""The analyst API's models: the study spec an analyst sends and the names it is written in,
the result a study stores, and the bodies the routes answer with; a module per analysis kind
(``coordinator/models/<kind>.py``: its spec and result models, beside its analysis in
``coordinator/analyses/<kind>.py``), re-exported here, so ``from coordinator.models import X``
names any of them.

* what they share: ``_base`` (the base models, :data:`MAX_GROUPS`, :class:`ExcludedCenter`);
* each analysis: ``table``, ``mwu``, ``dp_mwu``, ``dp_boxplot``, ``quantiles``, ``dp_quantiles``,
  ``categorical``, ``describe``, ``shift``, ``kruskal``, ``survival``;
* the study: ``study`` — :class:`StudySpec` with the analyses' union :data:`Analysis` (how a
  study runs is :mod:`coordinator.study`), and :class:`StudyResult`, one entry per analysis
  (built from the protocols' outputs by :mod:`coordinator.results`): its result, or
  :class:`FailedAnalysis` (why it gave none), and each center's part (:class:`StudyCenter`);
* the answers: ``answers`` — :class:`StudyView` (status, spec, result, error and provenance of a
  study), :class:`StudySummary`, :class:`StudyCreated`, :class:`CenterStatus`, :class:`Health`;
* accounts: ``accounts`` — :class:`Share`, :class:`AnalystView`, :class:`Quota`,
  :class:`AuditEntry` and the bodies that make them (docs/coordinator.md, "Analyst accounts");
* discovery and the dry run: ``plan`` — :class:`Catalog`, :class:`StudyPlan`.

A leaf: the package imports no other coordinator module, only pydantic and the core's field
types (``tests/test_layers.py``), so the protocols and the store take their names from here and
``fedstats study run`` and the clients validate a study file without loading the protocols.
Adding an analysis adds its module here and one name in each union of ``study``
(``AnalysisKind``, ``Analysis``, ``AnalysisResult``, ``AnalysisOutcome``).
"""

from __future__ import annotations

from coordinator.models._base import (
    MAX_GROUPS,
    DescribeMode,
    ExcludedCenter,
    VariableName,
)
from coordinator.models.accounts import (
    AnalystCreated,
    AnalystId,
    AnalystRole,
    AnalystView,
    AuditEntry,
    NewAnalyst,
    Quota,
    QuotaRequest,
    RotateAnalyst,
    Share,
    ShareRequest,
)
from coordinator.models.answers import (
    CenterProblem,
    CenterRecord,
    CenterStatus,
    DatasetState,
    Health,
    Provenance,
    Reproducibility,
    StudyCreated,
    StudySummary,
    StudyView,
    dataset_state,
)
from coordinator.models.categorical import (
    CategoricalAnalysis,
    CategoricalResult,
    CategoricalTest,
    CategoryArm,
    CategoryCell,
)
from coordinator.models.describe import (
    ArmSize,
    DescribeAnalysis,
    DescribeResult,
    DescribeRow,
    NoisePart,
)
from coordinator.models.dp_boxplot import (
    Box,
    DPBoxplotAnalysis,
    DPBoxplotResult,
    LevelValue,
    PooledBoxResult,
)
from coordinator.models.dp_mwu import (
    DP_MWU_TESTS,
    DPMWUAnalysis,
    DPMWUCenter,
    DPMWUResult,
    DPMWUTest,
)
from coordinator.models.dp_quantiles import (
    DPQuantilesAnalysis,
    DPQuantilesResult,
)
from coordinator.models.kruskal import (
    KRUSKAL_TESTS,
    KruskalAnalysis,
    KruskalArms,
    KruskalCenter,
    KruskalResult,
    KruskalTest,
    KruskalTestResult,
    TrendAlternative,
    TrendResult,
)
from coordinator.models.mwu import (
    MWU_TESTS,
    Effect,
    Heterogeneity,
    MWUAnalysis,
    MWUResult,
    MWUTest,
    TestPart,
    TestResult,
)
from coordinator.models.plan import (
    Catalog,
    CatalogCenter,
    CatalogDataset,
    CatalogEntry,
    CatalogTimeToEvent,
    CenterPlan,
    KeptTableView,
    PlannedError,
    PlannedPower,
    PlannedSpend,
    PlannedTable,
    PlannedUtility,
    PlanRefusal,
    PlanRefusalReason,
    StudyPlan,
)
from coordinator.models.quantiles import (
    ESTIMATOR_NAMES,
    TABLE_ESTIMATORS,
    EstimateResult,
    Estimator,
    QuantilesAnalysis,
    QuantilesResult,
)
from coordinator.models.shift import (
    ShiftAnalysis,
    ShiftResult,
)
from coordinator.models.study import (
    STUDY_STATUSES,
    Analysis,
    AnalysisKind,
    AnalysisOutcome,
    AnalysisResult,
    CenterGuarantee,
    FailedAnalysis,
    PrimaryTest,
    Software,
    StudyCenter,
    StudyError,
    StudyResult,
    StudySpec,
    StudyStatus,
)
from coordinator.models.survival import (
    MAX_INTERVALS,
    RMSTDifferenceResult,
    SurvivalAnalysis,
    SurvivalCensoring,
    SurvivalCurve,
    SurvivalResult,
    SurvivalTest,
    SurvivalWeights,
)
from coordinator.models.table import (
    REUSED_FROM_SEEN_BY,
    ReusedTable,
    TableAnalysis,
    TableResult,
)

__all__ = [
    "DP_MWU_TESTS",
    "ESTIMATOR_NAMES",
    "KRUSKAL_TESTS",
    "MAX_GROUPS",
    "MAX_INTERVALS",
    "MWU_TESTS",
    "REUSED_FROM_SEEN_BY",
    "STUDY_STATUSES",
    "TABLE_ESTIMATORS",
    "Analysis",
    "AnalysisKind",
    "AnalysisOutcome",
    "AnalysisResult",
    "AnalystCreated",
    "AnalystId",
    "AnalystRole",
    "AnalystView",
    "ArmSize",
    "AuditEntry",
    "Box",
    "Catalog",
    "CatalogCenter",
    "CatalogDataset",
    "CatalogEntry",
    "CatalogTimeToEvent",
    "CategoricalAnalysis",
    "CategoricalResult",
    "CategoricalTest",
    "CategoryArm",
    "CategoryCell",
    "CenterGuarantee",
    "CenterPlan",
    "CenterProblem",
    "CenterRecord",
    "CenterStatus",
    "DPBoxplotAnalysis",
    "DPBoxplotResult",
    "DPMWUAnalysis",
    "DPMWUCenter",
    "DPMWUResult",
    "DPMWUTest",
    "DPQuantilesAnalysis",
    "DPQuantilesResult",
    "DatasetState",
    "DescribeAnalysis",
    "DescribeMode",
    "DescribeResult",
    "DescribeRow",
    "Effect",
    "EstimateResult",
    "Estimator",
    "ExcludedCenter",
    "FailedAnalysis",
    "Health",
    "Heterogeneity",
    "KeptTableView",
    "KruskalAnalysis",
    "KruskalArms",
    "KruskalCenter",
    "KruskalResult",
    "KruskalTest",
    "KruskalTestResult",
    "LevelValue",
    "MWUAnalysis",
    "MWUResult",
    "MWUTest",
    "NewAnalyst",
    "NoisePart",
    "PlanRefusal",
    "PlanRefusalReason",
    "PlannedError",
    "PlannedPower",
    "PlannedSpend",
    "PlannedTable",
    "PlannedUtility",
    "PooledBoxResult",
    "PrimaryTest",
    "Provenance",
    "QuantilesAnalysis",
    "QuantilesResult",
    "Quota",
    "QuotaRequest",
    "RMSTDifferenceResult",
    "Reproducibility",
    "ReusedTable",
    "RotateAnalyst",
    "Share",
    "ShareRequest",
    "ShiftAnalysis",
    "ShiftResult",
    "Software",
    "StudyCenter",
    "StudyCreated",
    "StudyError",
    "StudyPlan",
    "StudyResult",
    "StudySpec",
    "StudyStatus",
    "StudySummary",
    "StudyView",
    "SurvivalAnalysis",
    "SurvivalCensoring",
    "SurvivalCurve",
    "SurvivalResult",
    "SurvivalTest",
    "SurvivalWeights",
    "TableAnalysis",
    "TableResult",
    "TestPart",
    "TestResult",
    "TrendAlternative",
    "TrendResult",
    "VariableName",
    "dataset_state",
]
