"""Fault injection: real center processes killed or slowed mid-study, and crafted answers; the
helpers of the center, coordinator, CLI and adversarial tests are importable from here."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for folder in ("center_agent", "coordinator", "cli", "adversarial"):
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))
