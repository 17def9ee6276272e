"""A study's view rendered for people: a plain-text summary and a self-contained HTML report.

Both are drawn from the coordinator's answer only (``GET /v1/studies/{id}``): the study's header,
its centers and failed analyses here, and each analysis's part by its registered analysis
(``coordinator.analyses``: ``summary_lines``, ``report_parts``) with the helpers of
:mod:`coordinator.reporting.rendering`. Analysis kinds no registered analysis draws are still
shown, as
their numbers; any result holding a seven-number summary (``q1``, ``median``, ``q3``, whiskers)
is drawn as a table. Figures are inline SVG, so the report reads offline.

Which centers a study used is shown as the result says (docs/coordinator.md, "Statuses and
partial results"): each center included or excluded with why, each analysis's left-out centers,
and each analysis that failed with its error; a center left out is never listed as included.
"""

from __future__ import annotations

import html
import json
from typing import Any

from coordinator.analyses import REGISTRY
from coordinator.guarantees import guarantee_lines, guarantee_parts
from coordinator.reporting import methods_text
from coordinator.reporting.rendering import (
    CSS,
    _table,
    analyses_of,
    boxes,
    bracket_rows,
    center_rows,
    centers_line,
    error_text,
    failed_analyses,
    fmt,
    generic_report_parts,
    generic_summary_lines,
    primary_test,
    quantiles_heading,
    rank_error_note,
    succeeded,
    table_one,
)
from coordinator.reporting.report_flags import uninformative_notes

# Names the report's readers (the CLI, the console, tests) took from here before the helpers
# moved to ``coordinator.reporting.rendering``.
__all__ = ["boxes", "bracket_rows", "fmt", "quantiles_heading", "rank_error_note",
           "render_html", "report_sections", "summary", "table_one"]


def _ranked(rank: str) -> list[str]:
    """The kinds drawn before the others (``summary_rank`` or ``report_rank``), in order."""
    ranked = [(getattr(a, rank), kind) for kind, a in REGISTRY.items()
              if getattr(a, rank) is not None]
    return [kind for _r, kind in sorted(ranked)]


def _groups_line(spec: dict[str, Any]) -> str:
    groups = spec.get("groups")
    if not groups:
        return ""
    if len(groups) == 2:
        return f", {groups[0]} (X) vs {groups[1]} (Y)"
    return ", " + " vs ".join(groups)


def summary(view: dict[str, Any], notes: list[str] | None = None) -> str:
    notes = [*(notes or []), *uninformative_notes(view)]
    spec = view["spec"]
    lines = [
        f"Study {view['id']}: {view['status']}"
        + (f" — {spec['title']}" if spec.get("title") else ""),
        f"  {spec['dataset']}.{spec['variable']}" + _groups_line(spec) + f", K = {spec['k']}",
    ]
    result = view.get("result")
    error = view.get("error")
    if result is None:
        lines.append(f"  error: {error_text(error or {})}")
    else:
        lines.append(f"  {centers_line(result)}; "
                     f"{len(view.get('provenance') or [])} releases received")
        for center, status, note in center_rows(result):
            if note:
                lines.append(f"    {center} {status}: {note}")
        lines += [f"  {line}" for line in guarantee_lines(result)]
        for index, kind, failure in failed_analyses(view):
            lines.append(f"  analysis {index} ({kind}) failed: {error_text(failure)}")
        if error and view["status"] not in ("succeeded", "partially_failed"):
            # e.g. a resumed study interrupted again: the results it keeps, and why it stopped
            lines.append(f"  error: {error_text(error)}")
        first = _ranked("summary_rank")
        for kind in first:
            for analysis in analyses_of(view, kind):
                lines += REGISTRY[kind].summary_lines(analysis, view, lines)
        for analysis in (result.get("analyses") or []):
            if analysis.get("kind") in first or not succeeded(analysis):
                continue
            drawn = REGISTRY.get(str(analysis.get("kind")))
            lines += (drawn.summary_lines(analysis, view, lines) if drawn is not None
                      else generic_summary_lines(analysis))
    for note in notes or []:
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def render_html(view: dict[str, Any], notes: list[str] | None = None,
                title: str = "fedstats study report") -> str:
    """The self-contained HTML report: :func:`report_sections` in a page of its own."""
    esc = html.escape
    title = view["spec"].get("title") or title
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1>" + report_sections(view, notes) + "</body></html>\n")


def report_sections(view: dict[str, Any], notes: list[str] | None = None, *,
                    console: bool = False) -> str:
    """The report's sections (HTML): the same in the file ``fedstats study run`` writes and
    in the console's study page (``console``: the study's header line is the page's own)."""
    notes = [*(notes or []), *uninformative_notes(view)]
    spec = view["spec"]
    groups = list(spec.get("groups") or ["all records"])
    esc = html.escape
    parts = [] if console else [f"<p class='meta'>study <code>{esc(view['id'])}</code> · status "
             f"<b>{esc(view['status'])}</b> · dataset <code>{esc(spec['dataset'])}</code> · "
             f"variable <code>{esc(spec['variable'])}</code> · groups "
             f"{esc(' vs '.join(groups))} · K = {spec['k']} · created "
             f"{esc(view['created_at'])}</p>"]
    parts += heading_parts(view)
    for note in notes or []:
        parts.append(f"<p class='note'>{esc(note)}</p>")
    result = view.get("result")
    error = view.get("error")
    if result is None:
        parts.append(f"<h2>Failed</h2><pre>{esc(json.dumps(error or {}, indent=2))}</pre>")
    else:
        line = centers_line(result)
        parts.append(f"<p>{esc(line[0].upper() + line[1:])}. Every number below "
                     "was computed by the coordinator from the centers' releases. No center "
                     "sent a raw value; every exact count a center released is 0 or at least "
                     "K; the only other counts are differentially private (noisy, paid for "
                     "from the center's ε budget).</p>")
        parts.append(_table(["center", "status", "why / left out of"],
                            [list(row) for row in center_rows(result)]))
        parts += guarantee_parts(result)
        failed = failed_analyses(view)
        if failed:
            parts.append("<h2>Failed analyses</h2><p>These analyses gave no result; the "
                         "others below are complete.</p>")
            parts.append(_table(["analysis", "kind", "error", "center", "failure", "detail"],
                                [[str(i), kind, str(e.get("error")), str(e.get("center") or ""),
                                  str(e.get("kind") or ""), str(e.get("detail"))]
                                 for i, kind, e in failed]))
        if error and view["status"] not in ("succeeded", "partially_failed"):
            parts.append(f"<h2>Stopped</h2><pre>{esc(json.dumps(error, indent=2))}</pre>")
        first = _ranked("report_rank")
        for kind in first:
            for analysis in analyses_of(view, kind):
                parts += REGISTRY[kind].report_parts(analysis, view)
        for analysis in result.get("analyses") or []:
            if analysis.get("kind") in first or not succeeded(analysis):
                continue
            drawn = REGISTRY.get(str(analysis.get("kind")))
            parts += (drawn.report_parts(analysis, view) if drawn is not None
                      else generic_report_parts(analysis))
    calls: dict[tuple[str, str], int] = {}
    for p in view.get("provenance", []):
        calls[(p["center"], p["call"])] = calls.get((p["center"], p["call"]), 0) + 1
    # Plumbing, folded away: the calls each center answered (the provenance in full is in the
    # study's JSON).
    parts.append("<details><summary>Releases received (the centers' answers, by call)"
                 "</summary>")
    parts.append(_table(["center", "call", "answers"],
                        [[c, k, n] for (c, k), n in sorted(calls.items())]))
    parts.append("</details>")
    parts += record_parts(view)
    return "\n".join(parts)


# -- title, primary test, reproducibility record and Methods ------------------------------------


def heading_parts(view: dict[str, Any]) -> list[str]:
    """The study's description and its primary test, under its title."""
    esc = html.escape
    spec = view["spec"]
    parts = []
    if spec.get("description"):
        parts.append(f"<p class='description'>{esc(spec['description'])}</p>")
    primary = primary_test(view)
    if primary is not None:
        parts.append(f"<p class='primary'>Primary test (pre-specified): the "
                     f"<b>{esc(primary[1])}</b> test of analysis {primary[0]}, at α = "
                     f"{fmt(primary[2])}; every other test is secondary.</p>")
    return parts


def reproducibility_rows(view: dict[str, Any]) -> list[list[str]]:
    """The reproducibility record as (field, value) rows."""
    record = view.get("reproducibility")
    if not record:
        return []
    software = record.get("software") or {}
    rows = [["software", f"{software['name']} {software['version']}" if software
             else str(record.get("software_note") or "not recorded")]]
    if software:
        rows.append(["commit", software.get("commit") or str(software.get("commit_note"))])
    rows.append(["spec SHA-256", str(record["spec_sha256"])])
    rows.append(["K", str(record["k"])])
    for c in record.get("centers") or []:
        rows.append([f"center {c['center']}" + ("" if c.get("included", True)
                                                 else " (excluded)"),
                     f"K {c.get('k')}, {c.get('neighbouring')}, data epoch {c.get('epoch')} "
                     f"(no fingerprint published), ε spent {fmt(c.get('epsilon') or 0)}"
                     + (f", {', '.join(c['mechanisms'])}" if c.get("mechanisms") else "")])
    for i, algorithm in enumerate(record.get("algorithms") or []):
        rows.append([f"analysis {i}", str(algorithm)])
    rows.append(["random seeds", str(record.get("seeds"))])
    return rows


def record_parts(view: dict[str, Any]) -> list[str]:
    """The Methods paragraph to paste and the reproducibility record, when the view has one."""
    esc = html.escape
    if view.get("result") is None:
        return []
    text, _, references = methods_text.methods_paragraph(view).partition("\n\nReferences\n")
    parts = ["<h2>Methods</h2>", f"<p class='methods'>{esc(text)}</p>"]
    if references:
        parts.append("<ul class='references'>" + "".join(
            f"<li>{esc(r)}</li>" for r in references.splitlines()) + "</ul>")
    rows = reproducibility_rows(view)
    if rows:
        parts.append("<h2>Reproducibility record</h2>")
        parts.append("<div class='scroll'><table class='record'>" + "".join(
            f"<tr><th scope='row'>{esc(field)}</th><td class='wrap'>{esc(value)}</td></tr>"
            for field, value in rows) + "</table></div>")
    return parts
