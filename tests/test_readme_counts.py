"""The README's figures of the suite's size are true: the quick loop's and the full test
command's test counts are within 10 % of what this run collected (tests/helpers/collection.py),
so the times stated beside them are of the suite as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.collection import COUNTS

README = Path(__file__).resolve().parents[1] / "README.md"
STATED = {"quick": r"the quick loop runs ([\d,]+) tests",
          "all": r"the full test command runs ([\d,]+) tests"}


@pytest.mark.parametrize("part", sorted(STATED))
def test_the_readme_states_the_suites_size_within_ten_percent(part: str) -> None:
    if not COUNTS:
        pytest.skip("this run collected part of tests/ only; the README counts the whole suite")
    found = re.findall(STATED[part], " ".join(README.read_text().split()))
    assert len(found) == 1, f"the README states {STATED[part]!r} once"
    stated = int(found[0].replace(",", ""))
    assert abs(stated - COUNTS[part]) <= 0.10 * COUNTS[part], (
        f"README: {stated} tests for {part!r}; collected now: {COUNTS[part]}")
