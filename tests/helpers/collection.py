"""What this run collected, counted by ``tests/conftest.py`` before any deselection: the whole
suite and the quick loop's part of it (neither ``slow`` nor ``process``), when the run collected
the whole of ``tests/`` (:data:`COUNTS` is empty otherwise). ``tests/test_readme_counts.py``
holds the README's figures against it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
COUNTS: dict[str, int] = {}


def count(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    whole = bool(config.args) and all(
        Path(config.rootpath, arg).resolve() == TESTS for arg in config.args)
    COUNTS.clear()
    if whole:
        COUNTS["all"] = len(items)
        COUNTS["quick"] = sum(1 for item in items if item.get_closest_marker("slow") is None
                              and item.get_closest_marker("process") is None)
