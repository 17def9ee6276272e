"""The lifetime privacy guarantee a study's result states, per center: read from each included
center after the study, put in one sentence here, and shown from the result by the text
summary, the HTML report and the console's study page (:func:`guarantee_lines`,
:func:`guarantee_parts`; ``coordinator.reporting.report``).

A center's accountant (``center_agent.accountant``, ``shared.accounting``) composes every ε its
ledger paid for the dataset, this study's and every earlier one's, and ``GET /v1/budget`` states
the result with its one-line sentence (``LifetimeGuarantee.line``). The sentence here is that
line and what it covers: in DP mode (``release_mode = "dp"``) every release of the dataset; in
the K-anonymous mode only the noisy ones (the exact tables and statistics are protected by
disclosure control, docs/privacy.md, not by DP). Nothing here reads data: the budget and the
info are answers about requests.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Sequence
from typing import Any

from coordinator.core.errors import CenterFailure
from coordinator.models import CenterGuarantee, StudyResult
from coordinator.ports import CenterPort
from shared.protocol import LifetimeGuarantee

HEADING = "Privacy guarantee (each center's accountant, after this study)"

COVERS = {
    "dp": "DP mode: every release of the dataset is differentially private",
    "k_anonymous": ("K-anonymous mode: its exact releases (tables, sizes, statistics) are "
                    "protected by disclosure control, not by DP"),
}


def guarantee_line(center: str, mode: str | None, guarantee: LifetimeGuarantee) -> str:
    """The one sentence a result shows: the center's own line, and what it covers."""
    covers = COVERS.get(mode or "")
    return guarantee.line + (f"; {covers}" if covers else "")


async def _one(port: CenterPort, dataset: str) -> CenterGuarantee:
    center = port.center_id
    try:
        # The study's recorded info (a RecordedCenter answers it from its record, asking
        # nothing); the budget is asked now, after every release of the study was paid.
        info, budget = await asyncio.gather(port.info(), port.budget())
    except CenterFailure as failure:
        return CenterGuarantee(center=center, release_mode=None, line=(
            f"center {center}: its lifetime guarantee could not be read after the study "
            f"({failure.kind}: {failure.reason})"))
    found = next((d for d in info.datasets if d.name == dataset), None)
    mode = found.release_mode if found is not None else None
    entry = budget.datasets.get(dataset)
    guarantee = entry.guarantee if entry is not None else None
    if guarantee is None:
        return CenterGuarantee(center=center, release_mode=mode, line=(
            f"center {center}: states no lifetime guarantee of {dataset!r} (a center older "
            "than its accountant)"))
    return CenterGuarantee(
        center=center, release_mode=mode, epsilon=guarantee.epsilon, delta=guarantee.delta,
        epsilon_pure=guarantee.epsilon_pure, releases=guarantee.releases,
        method=guarantee.method, line=guarantee_line(center, mode, guarantee))


async def collect(ports: Sequence[CenterPort], dataset: str,
                  result: StudyResult) -> list[CenterGuarantee]:
    """The guarantee of each center ``result`` includes, in the order of ``ports`` (asked in
    parallel; a center that cannot answer gets a line saying so, the study is not failed)."""
    included = {s.center for s in result.center_status if s.status == "included"}
    return list(await asyncio.gather(
        *(_one(p, dataset) for p in ports if p.center_id in included)))


def guarantee_lines(result: dict[str, Any]) -> list[str]:
    """The text summary's lines: each center's sentence, then the accountants' method(s)."""
    guarantees = result.get("guarantees") or []
    if not guarantees:
        return []
    lines = [f"{HEADING}:"]
    lines += [f"  {g['line']}" for g in guarantees]
    methods = sorted({g["method"] for g in guarantees if g.get("method")})
    lines += [f"  composed by: {m}" for m in methods]
    return lines


def guarantee_parts(result: dict[str, Any]) -> list[str]:
    """The HTML report's section (the console's study page shows the same)."""
    guarantees = result.get("guarantees") or []
    if not guarantees:
        return []
    esc = html.escape
    parts = [f"<h2>{esc(HEADING)}</h2>", "<ul class='guarantees'>"]
    parts += [f"<li>{esc(g['line'])}</li>" for g in guarantees]
    parts.append("</ul>")
    methods = sorted({g["method"] for g in guarantees if g.get("method")})
    parts += [f"<p class='note'>Composed by {esc(m)}.</p>" for m in methods]
    return parts
