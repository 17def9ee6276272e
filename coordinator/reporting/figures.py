"""A study's figures, by name, each drawn by its analysis (``Analysis.figure_names``,
``Analysis.figure``, with ``coordinator.reporting.charts``): the API's figure route, the
console and the HTML report all take them from here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from coordinator.analyses import REGISTRY
from coordinator.core.errors import Conflict, NotFound
from coordinator.db import StudyRecord
from coordinator.models import AnalysisResult, FailedAnalysis, StudyResult, StudySpec
from coordinator.reporting.charts import MEDIA_TYPES, FigureFormat

FIGURE_LABELS: dict[str, str] = {name: label for analysis in REGISTRY.values()
                                 for name, label in analysis.figure_labels.items()}
if TYPE_CHECKING:
    FigureName = str
else:
    FigureName = Literal[tuple(FIGURE_LABELS)]  # the API's query parameter: one of the names

__all__ = ["FIGURE_LABELS", "MEDIA_TYPES", "FigureFormat", "FigureName", "analysis_figure",
           "figure_names", "result_figure_names"]


def result_figure_names(found: AnalysisResult) -> list[str]:
    """The figures of a succeeded analysis' result, the default first."""
    return REGISTRY[found.kind].figure_names(found)


def figure_names(analysis: dict[str, Any]) -> list[str]:
    """The figures of an analysis of a study's view (its result as JSON), the default first;
    none for a failed one, or one this version does not read (``coordinator.reporting.shown``)."""
    drawn = REGISTRY.get(str(analysis.get("kind")))
    if analysis.get("status", "succeeded") != "succeeded" or drawn is None:
        return []
    try:
        found = drawn.result_model.model_validate(analysis)
    except ValidationError:
        return []
    return drawn.figure_names(found)


def analysis_figure(record: StudyRecord, index: int, fmt: FigureFormat,
                    name: FigureName | None = None) -> bytes:
    """Figure ``name`` (default: the analysis's first) of analysis ``index`` of a finished
    study; 409 before the study has a result or when the analysis failed, 404 for an analysis
    without that figure."""
    study_id = record.id
    if record.status not in ("succeeded", "partially_failed") or record.result is None:
        raise Conflict(f"study {study_id!r} is {record.status}; figures need a result")
    analyses = StudyResult.model_validate_json(record.result).analyses
    if index >= len(analyses):
        raise NotFound(f"study {study_id!r} has no analysis {index}")
    found = analyses[index]
    if isinstance(found, FailedAnalysis):
        raise Conflict(f"analysis {index} of study {study_id!r} failed: {found.error.detail}")
    spec = StudySpec.model_validate_json(record.spec)
    analysis = REGISTRY[found.kind]
    names = analysis.figure_names(found)
    if not names or (name is not None and name not in names):
        said = f"no {name} figure" if name is not None else "no figure"
        raise NotFound(f"analysis {index} of study {study_id!r} has {said}"
                       + (f" (it has: {', '.join(names)})" if names else ""))
    return analysis.figure(name or names[0], spec.analyses[index], found, spec, fmt)
