"""The Hodges-Lehmann shift between two arms from the federated table: the spec and the result
(docs/methods.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result


class ShiftAnalysis(_AnalysisSpec):
    """The Hodges-Lehmann shift of Y against X with its Moses interval, as far as the study's
    federated table allows (docs/methods.md §12.3): read from the table, no ε (needs
    ``groups``)."""

    kind: Literal["shift"]
    min_groups = 2
    level: float = Field(default=0.95, ge=0.5, le=0.999,
                         description="the Moses interval's confidence level")


class ShiftResult(_Result):
    """The Hodges-Lehmann shift Δ of Y against X (Y ~ X + Δ) and its Moses interval, as far as
    the federated table's bins allow (``shared.hodges_lehmann.hodges_lehmann_table``;
    docs/methods.md §12.3): the estimate the records would give lies in [``estimate_low``,
    ``estimate_high``], the interval's lower end in [``low_low``, ``low_high``] and its upper
    end in [``high_low``, ``high_high``]; ``interval`` = [``low_low``, ``high_high``] contains
    the records' interval (its coverage at least theirs). Infinite where the rank falls on an
    open end bin. The printed figures are ``estimate`` (the bin midpoints' Hodges-Lehmann
    estimate) and ``binned_interval`` (the midpoints' Moses interval widened by the binning
    ``allowance`` λ: it contains the records' interval when every record lies in the central
    fraction λ of its bin, and excludes 0 exactly when the table's rank count reaches the Moses
    critical value); both absent from results made before they existed."""

    kind: Literal["shift"] = "shift"
    status: Literal["succeeded"] = "succeeded"
    estimate_low: float
    estimate_high: float
    low_low: float
    low_high: float
    high_low: float
    high_high: float
    interval: tuple[float, float]
    estimate: float | None = Field(
        default=None, description="the bin midpoints' Hodges-Lehmann estimate (the median of "
                                  "their differences); null: not estimable (an open end bin "
                                  "reaches the median)")
    binned_interval: tuple[float, float] | None = Field(
        default=None, description="the printed interval: the midpoints' Moses interval widened "
                                  "by the binning allowance (docs/methods.md §12.3)")
    allowance: float | None = Field(
        default=None, description="λ: the interval holds the records' own when each record "
                                  "lies in the central fraction λ of its bin")
    level: float
    achieved_level: float = Field(description="the records' interval's coverage for "
                                              "continuous data, 1 − 2·P(U < rank)")
    rank: int = Field(description="c: the interval is [D_(c), D_(nm+1−c)]")
    n_x: int
    n_y: int
    method: str = Field(description="how c was found: exact (U's law) or normal")
    whole_counts: bool = Field(description="false: some counts were shared out between "
                                           "limits (docs/methods.md §2.5), so the bounds hold "
                                           "for the table as shared out")
    excluded: list[ExcludedCenter] = Field(
        default_factory=list, description="the centers the federated table was built without")
