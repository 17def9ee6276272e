"""The import graph of the packages, read from the source: no cycles, and every arrow points down.

Imports inside functions count (they still tie the modules together); those under
``if TYPE_CHECKING:`` do not. Layers, top to bottom:

* packages: ``fedstats_cli`` → ``center_agent``, ``coordinator`` → ``fedstats_service``,
  ``shared``; ``shared`` imports none of the others; ``fedstats_client`` (the analyst's client)
  imports only ``coordinator.models`` and what it imports (no server code);
* the coordinator: ``main`` → ``ui`` (the console) → ``api`` → services (``services``,
  ``runner``, ``registry``) → studies and the loops of the shown half over the registry
  (``study``, ``quotas``, ``reporting.report``, ``.methods_text``, ``.exports``, ``.figures``,
  ``.report_flags``) → ``analyses`` (one module per analysis: how it runs and how it is shown) →
  the parts an analysis draws on (``results``, ``reporting.charts``, ``.rendering``, ``.shown``,
  ``.export_parts``, ``.notes``, ``.citations``, ``.wording``) → ``protocols`` and the ports'
  implementations → ``ports``, ``db``, ``spending`` → ``models`` (a package, a module per
  analysis kind), ``core`` (``models`` a leaf the CLI imports cheaply).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "fedstats_service", "center_agent", "coordinator", "fedstats_cli",
            "fedstats_client")
PACKAGE_LAYER = {"shared": 0, "fedstats_service": 0, "center_agent": 1, "coordinator": 1,
                 "fedstats_cli": 2, "fedstats_client": 2}
COORDINATOR_LAYERS = (
    ("coordinator.models", "coordinator.core"),
    ("coordinator.db", "coordinator.ports", "coordinator.audit", "coordinator.accounts",
     "coordinator.spending", "coordinator.provenance"),
    ("coordinator.protocols", "coordinator.client", "coordinator.local", "coordinator.recording",
     "coordinator.webhooks"),
    ("coordinator.results", "coordinator.reporting.charts", "coordinator.reporting.rendering",
     "coordinator.reporting.shown", "coordinator.reporting.export_parts",
     "coordinator.reporting.notes", "coordinator.reporting.citations",
     "coordinator.reporting.wording"),
    ("coordinator.analyses",),
    ("coordinator.study", "coordinator.quotas", "coordinator.reporting.report",
     "coordinator.reporting.methods_text", "coordinator.reporting.exports",
     "coordinator.reporting.figures", "coordinator.reporting.report_flags"),
    ("coordinator.services", "coordinator.runner", "coordinator.registry", "coordinator.admin"),
    ("coordinator.api",),
    ("coordinator.ui",),
    ("coordinator.main", "coordinator.__main__"),
)


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue
        if isinstance(child, ast.Import):
            yield from (alias.name for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - child.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            # ``from package import module`` names the module; anything else names the package.
            yield from (f"{base}.{alias.name}" for alias in child.names)
        else:
            yield from _imported(child, module, is_package)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        targets = {_resolve(name) for name in _imported(tree, module, path.name == "__init__.py")}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


GRAPH = _graph()


def _layer(module: str) -> int | None:
    for rank, prefixes in enumerate(COORDINATOR_LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_no_cycles() -> None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " → ".join([*path[path.index(module):], module]))
        if module in done:
            return
        for target in sorted(GRAPH[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(GRAPH):
        visit(module, [])


def test_packages_import_only_downwards() -> None:
    upward = [(m, t) for m, targets in GRAPH.items() for t in targets
              if PACKAGE_LAYER[t.split(".")[0]] > PACKAGE_LAYER[m.split(".")[0]]]
    assert upward == []


def test_the_coordinator_imports_only_downwards() -> None:
    upward = []
    for module, targets in GRAPH.items():
        here = _layer(module)
        for target in targets:
            there = _layer(target)
            if here is not None and there is not None and there > here:
                upward.append((module, target))
    assert upward == []


# The one coordinator module that runs a center: the in-process center (``fedstats demo``,
# tests). Everywhere else the coordinator knows a center by the wire only (``shared``: its
# models and its error codes, ``shared.wire.CenterErrorCode``).
IN_PROCESS_CENTER = "coordinator.local"


def test_the_coordinator_reaches_a_center_only_over_the_wire() -> None:
    crossing = sorted((m, t) for m, targets in GRAPH.items() for t in targets
                      if m.startswith("coordinator") and m != IN_PROCESS_CENTER
                      and t.split(".")[0] == "center_agent")
    assert crossing == []


MODELS = "coordinator.models"


def _in_models(module: str) -> bool:
    return module == MODELS or module.startswith(MODELS + ".")


def test_the_api_models_are_a_leaf() -> None:
    """The models package (a module per analysis kind) imports only itself and the core's field
    types: no other coordinator module, no algorithm behind the vocabulary."""
    models = [m for m in GRAPH if _in_models(m)]
    assert len(models) > 1
    outside = {t for m in models for t in GRAPH[m] if not _in_models(t)}
    assert outside <= {"shared.fields"}


def _reachable(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        for target in GRAPH[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_client_reaches_only_the_api_models_and_the_core_behind_them() -> None:
    reached = set().union(*(_reachable(m) for m in GRAPH if m.startswith("fedstats_client")))
    outside = {m for m in reached if not m.startswith("fedstats_client")}
    assert {m for m in outside if not m.startswith("shared")} == {
        m for m in GRAPH if _in_models(m)}
    assert {m.split(".")[0] for m in outside} == {"coordinator", "shared"}


@pytest.mark.process
def test_a_center_loads_neither_the_report_nor_the_notebook_stack() -> None:
    """The libraries only the coordinator's figures and report or the analyst's client use
    (matplotlib, pandas, jinja2) are never imported by a center: each would cost its memory in
    every hospital's process (docs/benchmarks.md, "Hospital scale")."""
    import subprocess
    import sys

    code = ("import sys, center_agent.__main__, center_agent.main, center_agent.warmup; "
            "print(','.join(m for m in ('matplotlib', 'pandas', 'jinja2') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout.strip()
    assert loaded == ""
