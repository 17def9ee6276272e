"""``fedstats catalog``, ``fedstats centers`` and ``fedstats study plan``: what the centers hold,
their state, and what a study would spend, read from a coordinator's analyst API
(docs/coordinator.md, "Catalog" and "Dry run") and printed as tables (or ``--json``).

Exit codes: 0 answered (``plan``: nothing would be refused); 1 the plan has refusals, or the
coordinator could not be reached or refused the call; 2 bad usage or configuration (no token,
a study file that is not a valid spec, a CA bundle that cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import httpx

from fedstats_cli.study import (
    UsageError,
    _refusal,
    connect,
    connection_problem,
)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns aligned on the widest cell, numbers to the right."""
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [bool(rows) and all(
        (isinstance(row[i], int | float) and not isinstance(row[i], bool)) or row[i] in (None, "")
        for row in rows) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.rjust(w) if num else c.ljust(w)
                               for c, w, num in zip(r, widths, numeric, strict=True)).rstrip())
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def render_catalog(catalog: dict[str, Any]) -> str:
    """Each dataset with its centers' sizes (rounded down to their K) and ε left; the centers
    that could not be asked, with why."""
    out = []
    for dataset in catalog["datasets"]:
        levels = dataset["levels"]
        out.append(f"dataset {dataset['name']}: variables {', '.join(dataset['variables'])}"
                   + (f"; group levels {', '.join(levels)}" if levels else ""))
        rows = [[e["center"], e["k"], e["n_records"],
                 *[e["n_by_group"].get(level) for level in levels],
                 e["remaining_epsilon"], e["epoch"],
                 "unavailable" if not e.get("available", True)
                 else "paused" if e["paused"] else ""]
                for e in dataset["centers"]]
        out.append(_indent(table(["center", "K", "records", *levels, "ε left", "epoch", ""],
                                 rows)))
        described = [f"{e['center']}: {v} " + ", ".join(
            part for part in (m.get("unit"), f"by {m['resolution']:g}" if m.get("resolution")
                              else None, f"in [{m['bounds'][0]:g}, {m['bounds'][1]:g}]"
                              if m.get("bounds") else None) if part)
            for e in dataset["centers"] for v, m in (e.get("metadata") or {}).items()]
        if described:
            out.append("  declared metadata: " + "; ".join(described))
    if not catalog["datasets"]:
        out.append("no dataset: no center answered")
    down = [c for c in catalog["centers"] if c["problem"] is not None]
    if down:
        out.append("centers with a problem:")
        out.extend(f"  {c['id']}: {c['problem']['kind']}: {c['problem']['detail']}"
                   for c in down)
    out.append("sizes are rounded down to each center's K")
    return "\n".join(out)


def health_cell(center: dict[str, Any]) -> str:
    """"yes" only for a center that can serve: one whose health answers but whose budget or
    info does not is "up, cannot serve" (the catalog leaves it out; the problem says why).
    An older coordinator without ``serving``: its health alone."""
    if not center["healthy"]:
        return "no"
    if center.get("serving", center["problem"] is None):
        return "yes"
    return "up, cannot serve"


def render_centers(centers: list[dict[str, Any]]) -> str:
    """Each registered center's health, remaining ε per dataset and problem."""
    rows = []
    for c in centers:
        remaining = c["remaining_epsilon"]
        left = ", ".join(f"{name} {eps:.6g}" for name, eps in remaining.items()) \
            if remaining is not None else None
        problem = f"{c['problem']['kind']}: {c['problem']['detail']}" if c["problem"] else ""
        states = c.get("datasets")
        datasets = ", ".join(f"{name} {state}" for name, state in states.items()) \
            if states is not None else None
        rows.append([c["id"], c["url"], health_cell(c), datasets, left, problem])
    return table(["center", "url", "healthy", "datasets", "ε left", "problem"], rows)


def render_plan(plan: dict[str, Any]) -> str:
    """ε per center and analysis, budgets and quota after it, and what would be refused."""
    out = [f"study plan: {plan['dataset']}.{plan['variable']} over "
           f"{', '.join(c['center'] for c in plan['centers'])} (nothing was released or spent)"]
    centers = plan["centers"]
    if centers:
        out.append("ε each analysis spends at each center (≤: at most):")
        out.append(_indent(table(["analysis", "kind", "ε"], [
            [s["analysis"], s["kind"], ("" if s["exact"] else "≤ ") + f"{s['epsilon']:.6g}"]
            for s in centers[0]["spends"]])))
        out.append(_indent(table(
            ["center", "K", "ε spent", "budget left", "after", "quota", "quota left after"],
            [[c["center"], c["k"], ("" if c["exact"] else "≤ ") + f"{c['epsilon']:.6g}",
              c["remaining_epsilon"], c["remaining_after"], c["quota"], c["quota_left_after"]]
             for c in centers])))
    for power in plan.get("power") or []:
        sizes = ", ".join(f"{c} {n}/{m}" for c, (n, m) in power["sizes"].items())
        out.append(f"power of Mann-Whitney analysis {power['analysis']} (sizes X/Y {sizes}):")
        out.append(_indent(power["detail"]))
        out.append(_indent(f"method: {power['method']}"))
    for utility in plan.get("utility") or []:
        flag = "UNINFORMATIVE: " if utility.get("uninformative") else ""
        out.append(f"{flag}what ε buys, analysis {utility['analysis']} ({utility['kind']}):")
        out.append(_indent(utility["detail"]))
    if plan["refusals"]:
        out.append("would be refused:")
        out.extend(f"  [{'blocking' if r['blocking'] else 'left out'}] {r['reason']}"
                   + (f" at {r['center']}" if r["center"] else "") + f": {r['detail']}"
                   for r in plan["refusals"])
    planned = plan.get("table")
    if planned is not None:
        reused = planned.get("reused")
        if reused is not None:
            # What the kept table is; the study that obtained it only when the caller may see
            # it (an admin, or that study's owner).
            epochs = ", ".join(f"{c} epoch {e}" for c, e in reused["centers"].items())
            source = planned.get("reused_from")
            out.append(f"federated table: a kept table reused (K {reused['k']}, {epochs}, "
                       f"obtained {reused['obtained_at']})"
                       + (f", from study {source}" if source is not None else ""))
        elif planned.get("reused_from") is not None:  # a coordinator of an earlier release
            out.append(f"federated table: reused from study {planned['reused_from']}")
        else:
            out.append("federated table: new, " + ", ".join(
                f"{c} {planned['releases'].get(c, 'new')}" for c in planned["centers"]))
        out.append(_indent(planned["detail"]))
        out.append("the study would run" if plan["would_run"] else "the study would NOT run")
    return "\n".join(out)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def fetch(client: httpx.Client, args: argparse.Namespace, spec: dict[str, Any] | None) -> Any:
    """The answer the command prints; RuntimeError when the coordinator refuses."""
    if args.command == "catalog":
        answer = client.get("/v1/catalog")
    elif args.command == "centers":
        answer = client.get("/v1/centers")
    else:
        answer = client.post("/v1/studies", params={"dry_run": "true"}, json=spec)
    if answer.status_code != 200:
        raise RuntimeError(f"the coordinator refused {_refusal(answer)}")
    return answer.json()


def command(args: argparse.Namespace, *, token: str | None, token_env: str) -> int:
    """``fedstats catalog|centers|study plan`` (see the module's docstring for exit codes)."""
    prog = "fedstats " + ("study plan" if args.command == "study" else args.command)
    try:
        client, spec = connect(args.coordinator, token, token_env=token_env,
                               ca_bundle=args.ca_bundle,
                               study_file=args.study_file if args.command == "study" else None)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    with client:
        try:
            answer = fetch(client, args, spec)
        except httpx.HTTPError as exc:
            print(f"{prog}: {connection_problem(exc, ca_bundle=args.ca_bundle)}",
                  file=sys.stderr)
            return 1
        except RuntimeError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(answer, indent=2))
    elif args.command == "catalog":
        print(render_catalog(answer))
    elif args.command == "centers":
        print(render_centers(answer))
    else:
        print(render_plan(answer))
    return 1 if args.command == "study" and answer["refusals"] else 0
