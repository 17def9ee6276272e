"""The "Methods" paragraph of a study, generated from its spec, result and reproducibility
record (``GET /v1/studies/{id}``), for an analyst to paste into a paper: the tests named, their
sidedness and α, the effect size and its interval method, K and ε per center, the DP algorithms
with their citations, the software and the centers' data versions.

Only what the study did is said; every sentence comes from a field of the view (nothing is
assumed about an analysis the spec did not ask). References are listed after the paragraph, as
docs/methods.md §11 gives them.
"""

from __future__ import annotations

from typing import Any

from coordinator.analyses.base import MethodsContext
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt, join


def succeeded(analysis: dict[str, Any]) -> bool:
    return analysis.get("status", "succeeded") != "failed"


def included_centers(result: dict[str, Any]) -> list[str]:
    """The centers whose releases the result holds (``center_status``; a result stored before
    it: the centers asked less those left out at the survey)."""
    status = result.get("center_status")
    if status:
        return [s["center"] for s in status if s["status"] == "included"]
    out = {e["center"] for e in result.get("excluded") or []}
    return [c for c in result.get("centers") or [] if c not in out]

def references() -> dict[str, str]:
    """Every work a registered analysis cites, by key."""
    from coordinator.analyses import REGISTRY

    found: dict[str, str] = {}
    for analysis in REGISTRY.values():
        found.update(analysis.references)
    return found


def methods_sentences(view: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the paragraph's sentences, the keys of the references they cite)."""
    from coordinator.analyses import REGISTRY

    study = Shown(view)
    spec = study.spec
    record = view.get("reproducibility") or {}
    cited: list[str] = []

    def cite(key: str) -> None:
        if key not in cited:
            cited.append(key)

    centers = [c for c in record.get("centers") or [] if c.get("included", True)]
    result_of = view.get("result")
    included = included_centers(result_of) if result_of else [c["center"] for c in centers]
    said: list[str] = []
    groups = spec.groups
    what = f"the variable {spec.variable} of dataset {spec.dataset}"
    if groups and len(groups) == 2:
        what += f", comparing group {groups[1]} (Y) with group {groups[0]} (X)"
    elif groups:
        what += f", comparing its {len(groups)} groups {', '.join(groups)}"
    said.append(
        f"We analysed {what} across {len(included)} centers ({', '.join(included)}) without "
        "moving any record: each center released only K-anonymous counts "
        f"(K = {spec.k}; no released count between 1 and K − 1) and differentially private "
        "(DP) summaries, with one patient's record as the privacy unit.")
    neighbouring = sorted({c["neighbouring"] for c in centers if c.get("neighbouring")})
    if neighbouring:
        said.append("The centers' neighbouring relation was "
                    + join([n.replace("_", "/") for n in neighbouring]) + ".")
    for index, asked, result in study.succeeded():
        said += REGISTRY[asked.kind].methods(asked, result, MethodsContext(spec, index, cite))
    total = {c["center"]: c.get("epsilon", 0.0) for c in centers}
    if any(total.values()):
        said.append("In all, the study spent " + ", ".join(
            f"ε = {fmt(e)} at {c}" for c, e in total.items()) + " (sequential composition).")
    epochs = [f"{c['center']} epoch {c['epoch']}" for c in centers if c.get("epoch")]
    software = record.get("software") or {}
    if software:
        commit = (f"commit {software['commit'][:12]}" if software.get("commit")
                  else "commit unknown")
        said.append(f"Computed with {software.get('name')} {software.get('version')} "
                    f"({commit})" + (f" on the centers' data versions {', '.join(epochs)}"
                                     if epochs else "")
                    + f"; study {view.get('id')}, spec SHA-256 "
                    f"{str(record.get('spec_sha256', ''))[:16]}….")
    return said, cited


def methods_paragraph(view: dict[str, Any]) -> str:
    """The paragraph, then its references."""
    said, cited = methods_sentences(view)
    text = " ".join(said)
    if cited:
        works = references()
        text += "\n\nReferences\n" + "\n".join(works[k] for k in cited)
    return text
