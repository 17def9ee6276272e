"""The report's flags (docs/methods.md §9.6): the released DP numbers whose stated 95 %
uncertainty — the half-widths and intervals the results already carry, nothing recomputed — is
larger than ``shared.dp_utility.UNINFORMATIVE_SHARE`` of their size (records) or of their
bounds (values), one note each, written by each analysis (``Analysis.uninformative``, with
``coordinator.reporting.notes``)."""

from __future__ import annotations

from typing import Any

from coordinator.analyses import REGISTRY
from coordinator.reporting.notes import SHOWN
from coordinator.reporting.shown import Shown

__all__ = ["SHOWN", "uninformative_notes"]


def uninformative_notes(view: dict[str, Any]) -> list[str]:
    """One note per released DP number whose stated 95 % uncertainty is above
    :data:`shared.dp_utility.UNINFORMATIVE_SHARE` of its size (records) or of its bounds
    (values), from the half-widths and intervals the result carries (no recomputation)."""
    notes: list[str | None] = []
    for index, asked, result in Shown(view).succeeded():
        notes += REGISTRY[asked.kind].uninformative(index, asked, result)
    return [n for n in notes if n is not None]
