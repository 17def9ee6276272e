"""Settings files for the services the CLI starts (``fedstats demo``, the end-to-end benchmark):
written as TOML, which the standard library reads but does not write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (inline tables for dicts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value))  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def write_toml(path: Path, top: dict[str, Any], tables: dict[str, dict[str, Any]],
               comments: dict[str, str] | None = None) -> Path:
    """Top-level keys, then one ``[name]`` table each; readable by its owner only (tokens).
    ``comments`` puts a comment (lines joined by newlines) above the key of the same name
    (``"table.key"`` for a key inside a table)."""
    comments = comments or {}

    def entry(where: str, key: str, value: Any) -> list[str]:
        note = comments.get(f"{where}.{key}" if where else key)
        shown = [f"# {line}".rstrip() for line in note.splitlines()] if note else []
        return [*shown, f"{key} = {toml_value(value)}"]

    lines = [line for k, v in top.items() for line in entry("", k, v)]
    for name, table in tables.items():
        lines.append(f"\n[{name}]")
        lines += [line for k, v in table.items() for line in entry(name, k, v)]
    path.touch(mode=0o600)
    path.write_text("\n".join(lines) + "\n")
    return path
