"""The federated K-anonymous bin table of the study's variable (``{"kind": "table"}``): read
from the study's one table (``coordinator.protocols.table``), no ε."""

from __future__ import annotations

from coordinator.analyses.base import Analysis, StudyRun
from coordinator.models import AnalysisResult, TableAnalysis, TableResult
from coordinator.results import table_result


class Table(Analysis[TableAnalysis]):
    kind = "table"
    spec_model = TableAnalysis
    result_model = TableResult
    form_label = "federated table"
    figure_label = "federated table"

    def needs_table(self, analysis: TableAnalysis) -> bool:
        return True

    async def run(self, study: StudyRun, analysis: TableAnalysis) -> AnalysisResult:
        return table_result(await study.study_table())
