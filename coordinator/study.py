"""How a study runs over the centers: the analyst's spec (``coordinator.models.StudySpec``) in,
its result (``coordinator.models.StudyResult``, built by :mod:`coordinator.results`) out.

A spec names one dataset and variable, optionally two group levels (X, Y), the anonymity
threshold K and a list of analyses. Each analysis is a model with a ``kind``; today::

    {"kind": "table", "lower": "buffer", "upper": "buffer"}
    {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"], "alternative": "two-sided",
     "epsilon": 0.5}      # optional: noisy local U, ε spent by each center
    {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 300], "group": "treated",
     "per_center": true, "pooled": true}
    {"kind": "quantiles", "levels": [0.25, 0.5, 0.75],
     "estimators": ["yj_table", "interpolation", "extrapolation", "yj_shaped"]}
    {"kind": "dp_quantiles", "epsilon": 0.5, "bounds": [0, 300], "levels": [0.5],
     "algorithm": "joint_exp", "group": "treated"}
    {"kind": "describe", "variables": ["crp", "age"], "epsilon": 1.0,
     "bounds": {"crp": [0, 300]}}   # "Table 1"; without epsilon: from the K-anonymous tables

The ε is per DP analysis, not per study (each center spends it once per box or quantile set).
``quantiles`` are read from the study's federated table and spend nothing.

:func:`run_study` surveys the centers once (sizes, declared names), then runs the analyses
concurrently; its result is a list with one entry per analysis, in the spec's order. A study
builds one federated table: the table, quantiles and MWU table-test analyses share it.

Each analysis ends on its own: one that fails (a center failing it, too few centers left, numbers
that admit no answer) is recorded as failed with its error, and the others keep their results
(docs/coordinator.md, "Statuses and partial results"). The study's status follows from the
entries (:mod:`coordinator.runner`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from pydantic import ValidationError

from coordinator.analyses import StudyRun, analysis_of
from coordinator.core.errors import AnalysisFailed, CenterFailure, ServiceError
from coordinator.models import (
    Analysis,
    AnalysisOutcome,
    AnalysisResult,
    FailedAnalysis,
    StudyResult,
    StudySpec,
)
from coordinator.ports import CenterPort
from coordinator.protocols import federated_bin_table, survey_centers
from coordinator.protocols.parallel import all_or_first_failure
from coordinator.protocols.table import FederatedTable
from coordinator.results import center_status, excluded_center, failed_analysis
from coordinator.tables import TableKey, TableMemory
from fedstats_service.errors import describe_errors
from shared.wire import CenterErrorCode

log = logging.getLogger(__name__)


def kept_analyses(spec: StudySpec, previous: StudyResult | None) -> dict[int, AnalysisOutcome]:
    """The analyses of an earlier run of this study that succeeded, by index (a resumed study
    keeps them as they are and runs only the others)."""
    if previous is None or len(previous.analyses) != len(spec.analyses):
        return {}
    return {i: a for i, (a, asked) in enumerate(zip(previous.analyses, spec.analyses,
                                                    strict=True))
            if not isinstance(a, FailedAnalysis) and a.kind == asked.kind}


def as_service_error(exc: ValidationError, index: int) -> ServiceError:
    """A request the wire models refuse although the spec allowed it: a gap between the two,
    reported as the analysis failing (and logged to be fixed), never a trace."""
    log.warning("analysis %d: a request failed validation: %s", index, exc)
    problems = describe_errors(exc.errors(include_url=False, include_input=False))
    return AnalysisFailed(f"a request to the centers would be invalid: {problems}")


async def run_study(
    spec: StudySpec,
    centers: Sequence[CenterPort],
    *,
    min_centers: int,
    previous: StudyResult | None = None,
    tables: TableMemory | None = None,
    study_id: str | None = None,
) -> StudyResult:
    """Run every analysis of ``spec`` over ``centers`` (already the selected ones); with
    ``previous`` (an earlier run of this study), only those that did not succeed there.

    The analyses run concurrently: the federated table is built center after center, and the
    other analyses' parallel rounds use the centers meanwhile. An analysis that fails with a
    :class:`ServiceError` is recorded as failed and the others go on; the survey failing fails
    every analysis that runs. Any other exception (a bug) cancels the rest and propagates.

    With ``tables`` (the coordinator's kept tables) and the ``study_id``, the study's table is
    read from there when an earlier study obtained the same one (same centers and data
    versions; ``coordinator.tables``), and a table it builds is kept for later studies.
    """
    ids = [c.center_id for c in centers]
    kept = kept_analyses(spec, previous)
    try:
        survey = await survey_centers(
            centers, dataset=spec.dataset, variable=spec.variable, groups=spec.groups,
            k=spec.k, min_centers=min_centers, allow_partial=spec.allow_partial
        )
    except ServiceError as exc:
        failed = [kept.get(i) or failed_analysis(a.kind, exc)
                  for i, a in enumerate(spec.analyses)]
        return StudyResult(analyses=failed, centers=ids, excluded=[],
                           center_status=center_status(ids, failed))
    lower, upper = spec.table_closing
    own_tables = any(analysis_of(a).needs_center_tables(a) for a in spec.analyses)
    table_task: asyncio.Future[FederatedTable] | None = None

    async def obtain_table(variable: str = spec.variable) -> FederatedTable:
        key = TableKey.of(dataset=spec.dataset, variable=variable, groups=spec.groups,
                          k=spec.k, lower=lower, upper=upper, epochs=survey.epochs)
        if tables is not None:
            kept = await tables.find(key)
            if kept is None:  # another study of this process may be building it right now
                kept = await tables.after_builds(key)
            if kept is not None:
                log.info("study %s reuses the table of %r obtained by study %s", study_id,
                         variable, kept.reused_from)
                return kept
        with tables.building(key) if tables is not None else contextlib.nullcontext():
            return await build_table(key, variable)

    async def build_table(key: TableKey, variable: str) -> FederatedTable:
        try:
            built = await federated_bin_table(
                centers, dataset=spec.dataset, variable=variable, groups=spec.groups,
                k=spec.k, lower=lower, upper=upper,
                min_centers=min_centers, allow_partial=spec.allow_partial, survey=survey,
                own_tables=variable == spec.variable and own_tables,
            )
        except CenterFailure as failure:
            if failure.center_error != CenterErrorCode.RELEASE_LIMIT_REACHED:
                raise
            # What is still possible: say where to look, not just that the center refused.
            raise CenterFailure(
                failure.center, failure.kind, f"{failure.reason}; the tables of "
                f"{variable!r} the coordinator kept can still be reused: a dry run "
                "(POST /v1/studies?dry_run=true, fedstats study plan) lists them",
                center_error=failure.center_error) from None
        if tables is not None and study_id is not None:
            await tables.keep(key, built, study_id)
        return built

    def study_table() -> asyncio.Future[FederatedTable]:
        """The study's one federated table, obtained once for every analysis that needs it."""
        nonlocal table_task
        if table_task is None:
            table_task = asyncio.ensure_future(obtain_table())
        return table_task

    other_tables: dict[str, asyncio.Future[FederatedTable]] = {}

    def variable_table(variable: str) -> asyncio.Future[FederatedTable]:
        """The federated table of ``variable`` (a describe's), obtained once per study; the
        study's variable shares the study's table."""
        if variable == spec.variable:
            return study_table()
        if variable not in other_tables:
            other_tables[variable] = asyncio.ensure_future(obtain_table(variable))
        return other_tables[variable]

    study = StudyRun(spec=spec, centers=centers, survey=survey, min_centers=min_centers,
                     lower=lower, upper=upper, study_table=study_table,
                     variable_table=variable_table)

    async def run(analysis: Analysis) -> AnalysisResult:
        return await analysis_of(analysis).run(study, analysis)

    async def outcome(index: int, analysis: Analysis) -> AnalysisOutcome:
        if index in kept:
            return kept[index]
        try:
            return await run(analysis)
        except ValidationError as exc:
            return failed_analysis(analysis.kind, as_service_error(exc, index))
        except ServiceError as exc:
            return failed_analysis(analysis.kind, exc)

    try:
        # Failures are outcomes, so only a bug ends this early (and cancels the rest).
        analyses = await all_or_first_failure(
            [outcome(i, a) for i, a in enumerate(spec.analyses)])
    finally:
        for task in [*([table_task] if table_task is not None else []),
                     *other_tables.values()]:
            task.cancel()  # no-op when it is done
            with contextlib.suppress(BaseException):
                await task  # retrieved: its failure, if any, is its analyses' outcome
    surveyed_out = [excluded_center(f) for f in survey.excluded]
    return StudyResult(
        analyses=analyses,
        centers=ids,
        excluded=surveyed_out,
        center_status=center_status(ids, analyses, surveyed_out),
    )
