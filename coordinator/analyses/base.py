"""What an analysis is to the coordinator: one class per kind (``coordinator/analyses/<kind>.py``,
the twin of a center's release kinds, ``center_agent.gate.kinds``), and the registry the rest of
the coordinator loops over (:mod:`coordinator.analyses`).

An :class:`Analysis` declares, for its kind:

* its models: the spec part (``spec_model``, in ``coordinator.models``: the API's leaf the CLI
  and the client validate a study file with) and its result (``result_model``);
* what it asks of each center: :meth:`Analysis.requests`, the DP requests it sends and the ε
  each spends (the one account the quota check and the dry run read: ``coordinator.quotas``),
  :meth:`Analysis.needs_table` (whether it reads the study's federated table) and
  :meth:`Analysis.needs_center_tables` (each center's own table of it),
  :meth:`Analysis.level_names` and :meth:`Analysis.lacking` (the names the catalog checks the
  centers declare: ``coordinator.catalog``), and the dry run's notes on it
  (:meth:`Analysis.plan_notes`, :meth:`Analysis.power`);
* how it runs: :meth:`Analysis.run`, given a :class:`StudyRun` (the survey, the study's table);
* how it is shown: :meth:`Analysis.summary_lines` (the text summary) and
  :meth:`Analysis.report_parts` (its section of the HTML report, figures included);
* how it is written up (the shown half: ``coordinator.reporting``, each a loop over the registry
  reading typed results, validated once at ``coordinator.reporting.shown``):
  :meth:`Analysis.methods` (its Methods sentences) with :attr:`Analysis.references` (the works
  they cite), :attr:`Analysis.export_parts` and :meth:`Analysis.export_rows` (its CSV/XLSX
  tables), :meth:`Analysis.figure_names` and :meth:`Analysis.figure` (its figures, labelled by
  :attr:`Analysis.figure_labels`), :meth:`Analysis.algorithm` (what computed it, in the
  reproducibility record), :meth:`Analysis.uninformative` (the report's notes on its DP numbers)
  and :meth:`Analysis.planned_errors` (the dry run's predicted DP errors);
* how it is asked in the console's builder: a form generated from ``spec_model``'s JSON schema
  (``coordinator.ui.schema_form``), labelled :attr:`Analysis.form_label`, with
  :attr:`Analysis.form_widgets` and :meth:`Analysis.from_form` for what the schema cannot say.

How many group levels an analysis compares is its spec model's (``min_groups`` and
``max_groups``, in ``coordinator.models``): a spec with fewer or more levels than it handles is
refused with a 422 naming the analysis.

Whether it is exact as asked (:meth:`Analysis.exact`: it reads a release a center makes without
DP noise) and the DP analysis to ask instead (:attr:`Analysis.dp_alternative`) are its own too:
a center releasing the study's dataset in DP mode refuses exact releases, so the dry run and
the submission refuse such a study there, naming the alternative (``coordinator.plan``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from coordinator.models import AnalysisResult, PlannedError, PlannedPower, StudySpec
from coordinator.ports import CenterPort
from coordinator.protocols.survey import Survey
from coordinator.protocols.table import FederatedTable
from coordinator.reporting.charts import FigureFormat
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import generic_report_parts, generic_summary_lines
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt
from shared.dp_utility import PartError
from shared.fields import Extreme
from shared.protocol import CenterInfo, DatasetInfo


@dataclass(frozen=True)
class Spend:
    """The ε one analysis makes each center it asks spend; ``exact`` False: at most this."""

    epsilon: float
    exact: bool = True


# One request (or round) an analysis sends every center: a key that is the same for the same
# request in another analysis of the spec (the center answers it once), and the ε it spends.
Request = tuple[tuple[object, ...], Spend]


@dataclass(frozen=True)
class StudyRun:
    """What an analysis runs with: the spec, the selected centers, the survey's answer, and the
    study's federated tables (each obtained once per study, shared by every analysis)."""

    spec: StudySpec
    centers: Sequence[CenterPort]
    survey: Survey
    min_centers: int
    lower: Extreme
    upper: Extreme
    study_table: Callable[[], Awaitable[FederatedTable]]
    variable_table: Callable[[str], Awaitable[FederatedTable]]

    @property
    def groups(self) -> tuple[str, ...] | tuple[None]:
        """The arms: the spec's levels, or every record (``None``)."""
        return tuple(self.spec.groups) if self.spec.groups is not None else (None,)


@dataclass(frozen=True)
class MethodsContext:
    """What an analysis' Methods sentences read besides its own spec part and result: the study's
    spec, the analysis' index in it, and ``cite`` (a reference key the sentences cite, from the
    analysis' :attr:`Analysis.references`)."""

    spec: StudySpec
    index: int
    cite: Callable[[str], None]

    def is_primary(self) -> bool:
        """Whether the spec's pre-specified primary test is one of this analysis'."""
        return self.spec.primary is not None and self.spec.primary.analysis == self.index

    def primary_sentence(self) -> list[str]:
        """The sentence naming the spec's primary test, when it is one of this analysis'."""
        primary = self.spec.primary
        if primary is None or primary.analysis != self.index:
            return []
        return [f"The pre-specified primary test was the {primary.test} test at "
                f"α = {fmt(primary.alpha)}; the other tests are secondary and reported without "
                "adjustment for multiplicity."]


# The pooled box's (or estimate's) "center" in the dry run's predictions.
POOLED = "pooled"

# Per center that would take part: its declaration of the study's dataset, and its info.
Found = Mapping[str, tuple[DatasetInfo, CenterInfo]]


def declared_size(found: DatasetInfo, group: str | None) -> int:
    """The records a center declares for ``group`` (or in all), for the dry run's predictions."""
    # A DP-mode dataset without a declared size shows none: planned as an empty selection.
    return (found.n_records or 0) if group is None else found.n_by_group.get(group, 0)


def planned(center: str, err: PartError, *, arm: str | None = None,
            variable: str | None = None) -> PlannedError:
    """One predicted DP error as the dry run shows it."""
    return PlannedError(center=center, arm=arm, variable=variable, part=err.part, n=err.n,
                        error=err.error, unit=err.unit, share=err.share,
                        uninformative=err.uninformative)


S = TypeVar("S", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


class Analysis(Generic[S, R]):
    """One kind of analysis (subclass per kind; :data:`coordinator.analyses.REGISTRY` holds one
    instance each). The defaults are those of an analysis that spends nothing, reads no table
    and names no level of its own."""

    kind: ClassVar[str]
    spec_model: ClassVar[type[BaseModel]]
    result_model: ClassVar[type[BaseModel]]
    # The console builder's label of the analysis (none: its spec model's docstring's first
    # sentence, else its kind; ``coordinator.ui.schema_form.label_of``).
    form_label: ClassVar[str | None] = None
    # Whether the builder offers it (every analysis does unless it opts out).
    form_offered: ClassVar[bool] = True
    # Fields of the spec model that name what the catalog lists, by widget ("level",
    # "variable", "variables"; "categorical" and "categoricals" for its categorical variables),
    # besides those known by their name (group, variable, variables).
    form_widgets: ClassVar[Mapping[str, str]] = {}

    # -- what it asks of each center -------------------------------------------------------------

    def requests(self, spec: StudySpec, analysis: S) -> list[Request]:
        """The DP requests (or rounds) ``analysis`` sends every center and the ε each spends
        (none: it spends nothing)."""
        return []

    def needs_table(self, analysis: S) -> bool:
        """Whether it reads the study's federated table."""
        return False

    def needs_center_tables(self, analysis: S) -> bool:
        """Whether it reads each center's own table of the study's groups too (asked with the
        study's table, each just before the center's refinement:
        ``coordinator.protocols.table.federated_bin_table``'s ``own_tables``)."""
        return False

    def level_names(self, analysis: S, index: int) -> list[tuple[str, str]]:
        """The group levels it names besides the spec's ``groups``, each with its field."""
        return []

    def lacking(self, spec: StudySpec, analysis: S, index: int,
                found: DatasetInfo) -> list[tuple[str, str, str]]:
        """(what, name, field) of each name it needs that a center's declaration ``found``
        lacks, besides the spec's dataset, variable and levels."""
        return []

    # The reason the dry run gives its notes under (``PlanRefusalReason``; never blocking).
    note_reason: ClassVar[str] = "analysis_note"

    def plan_notes(self, spec: StudySpec, analysis: S, index: int,
                   size_of: Callable[[str | None], int]) -> list[str]:
        """Not blocking, what the dry run says of it (``size_of(level)``: the records the
        taking-part centers declare for a level, or every record for ``None``)."""
        return []

    def power(self, spec: StudySpec, analysis: S, index: int,
              sizes: Mapping[str, tuple[int, int]]) -> PlannedPower | None:
        """The power the dry run shows for it at the centers' (X, Y) ``sizes``, if any."""
        return None

    # -- DP mode (a center's ``release_mode = "dp"``: docs/privacy.md, "DP mode") -------------

    # What to ask instead where a center releases the dataset in DP mode and this analysis, as
    # asked, is exact (the refusal names it).
    dp_alternative: ClassVar[str] = (
        "a differentially private analysis (dp_quantiles, dp_boxplot, or describe with "
        "mode \"dp\")")

    def exact(self, spec: StudySpec, analysis: S) -> bool:
        """Whether, as asked, it reads a release a center makes without DP noise (a K-anonymous
        table, an exact statistic or size), which a center in DP mode refuses. By default: it
        reads the study's federated table, or it spends no ε (nothing it asks is paid for, so
        nothing it asks is noisy)."""
        return self.needs_table(analysis) or not self.requests(spec, analysis)

    # -- how it runs -----------------------------------------------------------------------------

    async def run(self, study: StudyRun, analysis: S) -> AnalysisResult:
        raise NotImplementedError

    # -- how it is shown (``coordinator.reporting.report``: ``view`` is the study's JSON) ----

    # Kinds drawn before the others, by rank, all results of the kind together (none: in the
    # spec's order after those): in the text summary, and in the HTML report.
    summary_rank: ClassVar[int | None] = None
    report_rank: ClassVar[int | None] = None

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        """Its lines of the text summary (``shown``: the summary's lines so far)."""
        return generic_summary_lines(result)

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        """Its section of the HTML report (heading, tables, figures)."""
        return generic_report_parts(result)

    # -- how it is written up (``coordinator.reporting``; typed: ``coordinator.reporting.shown``) --

    # What computed it, as the reproducibility record names it (none: its kind).
    algorithm_name: ClassVar[str | None] = None

    def algorithm(self, asked: S) -> str:
        """What computed ``asked``, named as the Methods cite it (the reproducibility record)."""
        return self.algorithm_name or self.kind

    # The works its Methods sentences cite, by key (``coordinator.reporting.citations``).
    references: ClassVar[Mapping[str, str]] = {}

    def methods(self, asked: S, result: R, context: MethodsContext) -> list[str]:
        """Its sentences of the study's Methods paragraph (citing by ``context.cite``)."""
        return []

    # The exported tables it fills (``coordinator.reporting.exports``; several analyses may
    # fill one part, each with its rows).
    export_parts: ClassVar[tuple[ExportPart, ...]] = ()

    def export_rows(self, part: ExportPart, index: int, asked: S, result: R,
                    study: Shown) -> list[Row]:
        """Its rows of ``part`` (one of :attr:`export_parts`)."""
        return []

    def export_rank(self, part: ExportPart) -> int:
        """Where its rows of ``part`` go among other kinds' (ascending; then in the spec's
        order)."""
        return 0

    # Its figures' names, each with the console's label of its download link.
    figure_labels: ClassVar[Mapping[str, str]] = {}

    def figure_names(self, result: R) -> list[str]:
        """The figures ``result`` has (of :attr:`figure_labels`), the default first."""
        return []

    def figure(self, name: str, asked: S, result: R, spec: StudySpec,
               fmt: FigureFormat) -> bytes:
        """Figure ``name`` (one of :meth:`figure_names`), drawn with
        ``coordinator.reporting.charts``."""
        raise NotImplementedError(f"{self.kind} has no figure {name!r}")

    def uninformative(self, index: int, asked: S, result: R) -> list[str | None]:
        """The report's notes on its released DP numbers whose stated 95 % uncertainty is
        above ``shared.dp_utility.UNINFORMATIVE_SHARE`` (``coordinator.reporting.notes``)."""
        return []

    def planned_errors(self, spec: StudySpec, asked: S,
                       found: Found) -> tuple[float, list[PlannedError]] | None:
        """The dry run's predicted 95 % errors of its DP numbers at the ε asked, over the
        centers that would take part (``found``), and that ε; none: it releases none."""
        return None

    # -- how it is asked in the console ----------------------------------------------------------

    def from_form(self, part: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
        """The spec part from the builder: ``part``, read off the fields generated from the
        spec model's schema; an analysis whose form the schema cannot express amends it from
        the posted ``values`` here."""
        return part


class FormError(ValueError):
    """A field of the console's builder that cannot be read (the message names it; ``field``
    is its HTML name, for the page to mark it)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
