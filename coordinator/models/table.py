"""The federated K-anonymous table: its spec, the table a study reuses and its result
(docs/coordinator.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coordinator.models._base import ExcludedCenter, _AnalysisSpec, _Result
from shared.fields import Extreme, FiniteExtreme


class TableAnalysis(_AnalysisSpec):
    """The federated K-anonymous bin table of the variable (one group, or X and Y)."""

    kind: Literal["table"]
    lower: FiniteExtreme = "buffer"
    upper: FiniteExtreme = "buffer"


class ReusedTable(_Result):
    """A kept table a study read instead of asking the centers (``coordinator.tables``;
    docs/coordinator.md, "Reused tables"), told by what it is — never by the study, nor the
    analyst, that obtained it: its dataset, variable, groups (in the kept order), K, closing,
    the centers that built it with the data version (epoch) each was at, and when the
    coordinator obtained it."""

    dataset: str
    variable: str
    groups: list[str] | None
    k: int
    lower: Extreme
    upper: Extreme
    centers: dict[str, int] = Field(description="each center that built it -> its epoch then")
    obtained_at: str = Field(description="when the coordinator obtained the table (UTC)")


REUSED_FROM_SEEN_BY = ("shown only to an admin and to the analyst who owns that study; null "
                       "for anyone else (`reused` says what the table is)")


class TableResult(_Result):
    kind: Literal["table"] = "table"
    status: Literal["succeeded"] = "succeeded"
    k: int
    limits: list[float]
    counts: list[list[float]]
    totals: list[float]
    order: list[str] = Field(description="the builder first, then each refining center")
    center_totals: dict[str, list[float]] = Field(description="per-group totals each released")
    excluded: list[ExcludedCenter]
    reused: ReusedTable | None = Field(
        default=None, description="the kept table this one was read from, when it was reused "
        "instead of asked of the centers again")
    reused_from: str | None = Field(
        default=None, description="the study that obtained this table, when it was reused: "
        + REUSED_FROM_SEEN_BY)
