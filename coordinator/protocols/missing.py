"""Each center's missing counts of numeric variables (``POST .../missing``, exact, no ε): per
declared level, the records missing the variable, each 0 or >= K (docs/privacy.md, guarantee
15). For a Table 1's "missing, n (%)" line; a center that does not release them (it counts
complete cases, refuses exact releases in DP mode, or fails the request) gives none, and the
line shows "—" there, never a guess."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort
from shared import kinds
from shared.protocol import MissingRelease, MissingRequest

Missing = dict[str, dict[str, int] | None]
"""Per center: records missing the variable per declared level, or None (not released)."""


async def _one(port: CenterPort, dataset: str, variable: str) -> dict[str, int] | None:
    try:
        release: MissingRelease = await port.release(
            kinds.MISSING, dataset, MissingRequest(variable=variable))
    except CenterFailure:
        return None
    if release.complete_cases:
        return None  # the records missing it left the population: their number is not said
    if any(0 < m < release.k for m in release.missing):
        return None  # implausible: never shown
    return dict(zip(release.levels, release.missing, strict=True))


async def missing_counts(ports: Sequence[CenterPort], *, dataset: str,
                         variables: Sequence[str]) -> dict[str, Missing]:
    """Per variable, each center's missing counts per level (module docstring)."""
    answers = await asyncio.gather(*(_one(p, dataset, v) for v in variables for p in ports))
    out: dict[str, Missing] = {v: {} for v in variables}
    for i, found in enumerate(answers):
        v, port = variables[i // len(ports)], ports[i % len(ports)]
        out[v][port.center_id] = found
    return out


def arm_missing(found: dict[str, int] | None, arm: str,
                groups: tuple[str, str] | None) -> int | None:
    """One center's missing count in ``arm`` (a level, or "all": the study's levels, or
    every level without groups)."""
    if found is None:
        return None
    if arm in found:
        return found[arm]
    levels = groups if groups is not None else tuple(found)
    return sum(found.get(level, 0) for level in levels)
