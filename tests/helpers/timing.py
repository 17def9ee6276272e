"""How long a test may wait, on a machine that may be busy.

A test never asserts that something happens within a fixed wall-clock time that a loaded
machine can miss. It waits for an event instead (a service answers ``/v1/health``, a process
exits, a study ends), failing at once when what it waits for can no longer happen (the process
exited). Where a bound is still needed — a hang guard, a read timeout a fault must exceed, a
throughput figure — it is written for a quiet machine and passed through :func:`scaled`:

* ``FEDSTATS_TEST_TIMEOUT_SCALE`` (a positive number), when set, multiplies every such bound;
* otherwise the factor is the 1-minute load average per core at the moment the bound is taken,
  at least 1: a suite run on a quiet 2-core machine waits as written, one run under load (the
  developers' load check, ``tests/stress/run.sh``, or a shared CI host) waits in proportion.

``tests/conftest.py`` leaves ``FEDSTATS_TEST_*`` variables in place (it clears every other
``FEDSTATS_*`` setting of the developer's shell); the services' children never see them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

SCALE_ENV = "FEDSTATS_TEST_TIMEOUT_SCALE"
T = TypeVar("T")


def factor() -> float:
    """The factor :func:`scaled` multiplies by now (see the module's docstring)."""
    value = os.environ.get(SCALE_ENV, "").strip()
    if value:
        scale = float(value)
        if not scale > 0:
            raise ValueError(f"{SCALE_ENV} must be a positive number, not {value!r}")
        return scale
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def scaled(seconds: float) -> float:
    """``seconds`` (a bound that holds on a quiet machine) times :func:`factor`."""
    return seconds * factor()


def poll(condition: Callable[[], T], what: str, *, quiet_s: float, interval_s: float = 0.05,
         alive: Callable[[], bool] | None = None) -> T:
    """``condition()``'s first truthy value, asked every ``interval_s``. Fails when ``alive``
    (if given) turns false first (what we wait for can no longer happen), or, as a hang guard
    only, after ``scaled(quiet_s)``: ``quiet_s`` is how long it takes at most on a quiet
    machine, with room."""
    limit = scaled(quiet_s)
    deadline = time.monotonic() + limit
    while True:
        got = condition()
        if got:
            return got
        if alive is not None and not alive():
            raise AssertionError(f"{what}: what it waited for is gone")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {limit:.0f} s ({quiet_s:g} s on a quiet "
                                 f"machine, times {SCALE_ENV} or the load per core)")
        time.sleep(interval_s)
