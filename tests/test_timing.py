"""The suite's timing rules (``tests/helpers/timing.py``): the factor that scales every bound a
test still has, and the polling helper that fails when what it waits for is gone."""

from __future__ import annotations

import os

import pytest

from tests.helpers import timing


def test_the_factor_is_the_variable_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timing.SCALE_ENV, "3.5")
    assert timing.factor() == 3.5
    assert timing.scaled(2.0) == 7.0
    monkeypatch.setenv(timing.SCALE_ENV, "0")
    with pytest.raises(ValueError, match="positive"):
        timing.factor()


def test_the_factor_follows_the_load_per_core_and_is_at_least_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timing.SCALE_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 0.0, 0.0))
    assert timing.factor() == 6.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.0, 0.0))
    assert timing.factor() == 1.0


def test_poll_returns_the_first_truthy_answer_and_fails_when_the_waited_for_is_gone() -> None:
    answers = iter([None, 0, "ready"])
    assert timing.poll(lambda: next(answers), "x", quiet_s=60, interval_s=0) == "ready"
    with pytest.raises(AssertionError, match="gone"):
        timing.poll(lambda: None, "a study", quiet_s=60, interval_s=0, alive=lambda: False)

