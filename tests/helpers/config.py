"""The TOML files the services read, written the way the CLI writes them
(:mod:`fedstats_cli.settings_files`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedstats_cli.settings_files import toml_value
from fedstats_cli.settings_files import write_toml as write_tables

__all__ = ["toml_value", "write_toml"]


def _is_section(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(v, dict) for v in value.values())


def write_toml(path: Path, config: dict[str, Any]) -> Path:
    """``config`` as a TOML file: a key whose value maps names to mappings (``datasets``,
    ``centers``) becomes one ``[key."name"]`` table per name, after every other key (a mapping
    among them an inline table)."""
    top = {key: value for key, value in config.items() if not _is_section(value)}
    tables = {f"{key}.{toml_value(name)}": table
              for key, value in config.items() if _is_section(value)
              for name, table in value.items()}
    return write_tables(path, top, tables)
