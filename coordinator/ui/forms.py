"""The study builder's form as a study spec (the same JSON the API takes), and the figures and
tables a study page offers to download."""

from __future__ import annotations

from typing import Any

from coordinator.analyses import REGISTRY
from coordinator.analyses.base import FormError, form_number
from coordinator.figures import figure_names

__all__ = ["ANALYSES", "DEFAULTS", "EXPORT_KINDS", "FIGURE_LABELS", "FormError", "export_links",
           "figure_links", "spec_from_form"]

DEFAULTS: dict[str, Any] = {
    "dataset": "", "variable": "", "group_x": "", "group_y": "", "k": "10",
    "analyses": ["table", "mwu", "quantiles"], "centers": [],
    "mwu_epsilon": "", "levels": "0.25, 0.5, 0.75",
    "dp_epsilon": "0.5", "dp_lower": "", "dp_upper": "", "dp_group": "",
    "toml": "", "title": "", "description": "", "primary": "", "alpha": "0.05",
}
PRIMARY_TESTS = ("sum", "weighted", "fisher", "table")
# What the builder offers: every registered analysis with a form (``coordinator.analyses``).
ANALYSES = tuple(kind for kind, a in REGISTRY.items() if a.form_label is not None)
FIGURE_LABELS = {"table": "federated table", "effects": "effect sizes",
                 "boxplots": "DP boxplots", "quantiles": "quantiles"}


def spec_from_form(values: dict[str, Any]) -> dict[str, Any]:
    """The spec the form describes; the spec model validates it (the same rules as the API)."""
    groups = [str(values.get(g) or "").strip() for g in ("group_x", "group_y")]
    chosen = [a for a in values.get("analyses") or [] if a in ANALYSES]
    if not chosen:
        raise FormError("analyses: choose at least one")
    common: dict[str, Any] = {"group": str(values.get("dp_group") or "").strip() or None}
    if any(REGISTRY[a].form_dp for a in chosen):
        common["bounds"] = [form_number(values, "dp_lower", "DP lower bound"),
                            form_number(values, "dp_upper", "DP upper bound")]
        common["epsilon"] = form_number(values, "dp_epsilon", "DP ε")
    analyses = [REGISTRY[kind].from_form(values, common) for kind in chosen]
    spec: dict[str, Any] = {
        **{key: str(values.get(key) or "").strip() for key in ("title", "description")
           if str(values.get(key) or "").strip()},
        "dataset": str(values.get("dataset") or "").strip(),
        "variable": str(values.get("variable") or "").strip(),
        "groups": groups if all(groups) else None,
        "k": int(form_number(values, "k", "K")),
        "analyses": analyses,
    }
    if values.get("centers"):
        spec["centers"] = list(values["centers"])
    primary = str(values.get("primary") or "").strip()
    if primary:
        if primary not in PRIMARY_TESTS or "mwu" not in chosen:
            raise FormError("primary test: choose one of the Mann-Whitney tests, and the "
                            "Mann-Whitney analysis")
        spec["primary"] = {"analysis": chosen.index("mwu"), "test": primary,
                           "alpha": form_number(values, "alpha", "α of the primary test")}
    return spec


def figure_links(view: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, figure name, label) of each figure of each analysis
    (``coordinator.figures.figure_names``)."""
    result = view.get("result") or {}
    return [(i, name, FIGURE_LABELS[name])
            for i, a in enumerate(result.get("analyses") or []) for name in figure_names(a)]


EXPORT_KINDS = {"describe": [("table1", "Table 1"), ("table1_formatted", "Table 1 as shown")],
                "mwu": [("tests", "Tests"), ("effects", "Effect sizes")],
                "dp_boxplot": [("boxplots", "Boxplots")],
                "dp_quantiles": [("dp_quantiles", "DP quantiles")],
                "quantiles": [("quantiles", "Quantiles")], "table": [("table", "Table bins")]}


def export_links(view: dict[str, Any]) -> list[tuple[str, str]]:
    """(part, label) of each CSV table the study has (``coordinator.exports``)."""
    kinds = {a.get("kind") for a in (view.get("result") or {}).get("analyses") or []
             if a.get("status") == "succeeded"}
    return [link for kind, links in EXPORT_KINDS.items() if kind in kinds for link in links]
