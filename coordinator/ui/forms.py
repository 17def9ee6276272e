"""The study builder's form as a study spec (the same JSON the API takes), and the figures a
study page offers to download."""

from __future__ import annotations

from typing import Any

from coordinator.analyses import REGISTRY
from coordinator.analyses.base import FormError, form_number

__all__ = ["ANALYSES", "DEFAULTS", "FIGURE_KINDS", "FormError", "figure_links",
           "spec_from_form"]

DEFAULTS: dict[str, Any] = {
    "dataset": "", "variable": "", "group_x": "", "group_y": "", "k": "10",
    "analyses": ["table", "mwu", "quantiles"], "centers": [],
    "mwu_epsilon": "", "levels": "0.25, 0.5, 0.75",
    "dp_epsilon": "0.5", "dp_lower": "", "dp_upper": "", "dp_group": "",
    "toml": "",
}
# What the builder offers: every registered analysis with a form (``coordinator.analyses``).
ANALYSES = tuple(kind for kind, a in REGISTRY.items() if a.form_label is not None)
FIGURE_KINDS = {kind: a.figure_label for kind, a in REGISTRY.items()
                if a.figure_label is not None}


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
        "dataset": str(values.get("dataset") or "").strip(),
        "variable": str(values.get("variable") or "").strip(),
        "groups": groups if all(groups) else None,
        "k": int(form_number(values, "k", "K")),
        "analyses": analyses,
    }
    if values.get("centers"):
        spec["centers"] = list(values["centers"])
    return spec


def figure_links(view: dict[str, Any]) -> list[tuple[int, str]]:
    """(index, label) of each analysis with a figure to download."""
    result = view.get("result") or {}
    return [(i, FIGURE_KINDS[a["kind"]]) for i, a in enumerate(result.get("analyses") or [])
            if a.get("kind") in FIGURE_KINDS and a.get("status") == "succeeded"]
