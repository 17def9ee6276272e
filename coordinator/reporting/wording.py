"""How the Methods paragraph writes numbers and lists (``coordinator.reporting.methods_text``;
the analyses write their sentences with these)."""

from __future__ import annotations

from typing import Any


def fmt(value: Any) -> str:
    """A number as the paragraph writes it (at most 4 significant digits)."""
    return f"{float(value):.4g}"


def join(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
