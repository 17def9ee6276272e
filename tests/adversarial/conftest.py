"""Attacks run as real clients against real ``python -m center_agent`` / ``python -m coordinator``
processes; the helpers of the center, coordinator and CLI tests are importable from here."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for folder in ("center_agent", "coordinator", "cli", "adversarial"):
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))
