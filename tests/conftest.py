"""Fixtures every test folder shares: the anyio backend, no ``FEDSTATS_*`` setting of the
developer's shell, a throw-away PostgreSQL schema; the ``process`` marker enforced: a test
that starts a process (``subprocess``, ``multiprocessing``) without the marker fails, so that
``pytest -m "not process"`` never starts one; and Hypothesis made deterministic and free of its
per-example deadline (a wall-clock limit a loaded machine misses). Helpers are in
``tests/helpers/``; the rules for tests run in parallel (pytest-xdist) are in
``tests/README.md``."""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import signal
import subprocess
import uuid
from collections.abc import Generator, Iterator
from typing import Any

import hypothesis
import pytest
import sqlalchemy as sa

import fedstats_cli.procs
from tests.helpers import collection, ports, postgres, timing

# Hypothesis: the same examples on every run and every machine (derandomize: a property that
# fails, fails for everyone, and a run that passed passes again), no example database left in
# the working tree, and no per-example deadline (200 ms by default: load misses it). A test may
# still ask for more or fewer examples with @settings.
hypothesis.settings.register_profile("fedstats", derandomize=True, database=None,
                                     deadline=None, print_blob=True)
hypothesis.settings.load_profile("fedstats")

# The services the tests start listen on ports no other worker of the run is offered
# (tests/helpers/ports.py): with the kernel's random choice, two workers' services could be
# handed one port (docs/assurance.md, "Assertions on random output"). ``free_port`` calls
# ``free_ports`` by its module's name, so both follow.
fedstats_cli.procs.free_ports = ports.free_ports


# A suite started in the background by a non-interactive shell (``cmd &``, as scripts and some
# CI runners do) inherits SIGINT ignored, and so would every process a test starts: the tests
# that press Ctrl-C on the demo would send a signal nobody hears. With a handler here, children
# start with the default again (a handler, unlike "ignored", is reset by exec).
with contextlib.suppress(ValueError):  # not the main thread: nothing to restore there
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config: pytest.Config) -> str:
    return (f"timing: bounds scaled by {timing.factor():.2f} ({timing.SCALE_ENV} or the load "
            f"per core, at least 1; tests/helpers/timing.py)")



@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Count what was collected before ``-m``/``-k`` deselect (tests/helpers/collection.py)."""
    collection.count(config, items)

# -- each marker's share of the run's time ----------------------------------------------------
# CI must stay under its time limit while the suite grows: the summary says what each marker
# costs (seconds of setup, call and teardown summed over tests, so with two workers the sum is
# about twice the wall time), so the next test to shrink or mark is found from the CI log.

_MARKER_GROUPS = ("slow and process", "slow", "process", "neither")
_group_seconds: dict[str, float] = dict.fromkeys(_MARKER_GROUPS, 0.0)
_group_tests: dict[str, set[str]] = {group: set() for group in _MARKER_GROUPS}


def _marker_group(keywords: Any) -> str:
    slow, process = "slow" in keywords, "process" in keywords
    return ("slow and process" if slow and process else "slow" if slow
            else "process" if process else "neither")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = _marker_group(report.keywords)
    _group_seconds[group] += report.duration
    _group_tests[group].add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    total = sum(_group_seconds.values())
    if not total:
        return
    terminalreporter.section("time per marker (test seconds, all workers)")
    for group in _MARKER_GROUPS:
        seconds = _group_seconds[group]
        terminalreporter.write_line(
            f"{group:>16}: {len(_group_tests[group]):5d} tests {seconds:8.1f} s "
            f"({100 * seconds / total:4.1f} %)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_fedstats_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FEDSTATS_* variable of the developer's shell leaks into a test (but the suite's own
    ``FEDSTATS_TEST_*`` settings, ``tests/helpers/timing.py``)."""
    for name in list(os.environ):
        if name.startswith("FEDSTATS_") and not name.startswith("FEDSTATS_TEST_"):
            monkeypatch.delenv(name)


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_base_url() -> str:
    url = postgres.base_url()
    if url is None:
        pytest.skip(postgres.UNREACHABLE)
    return url


@pytest.fixture
def pg_url(pg_base_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped (with everything in it) afterwards."""
    schema = f"fedstats_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_base_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{pg_base_url}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


# -- the process marker -------------------------------------------------------------------------

_running: list[pytest.Item] = []  # the test whose setup, call or teardown runs now
_unmarked: dict[str, list[str]] = {}  # test id -> the processes it started without the marker


def _started(what: str) -> None:
    """Called as a process starts: remembered (and refused) when the test is not marked."""
    if _running and _running[-1].get_closest_marker("process") is None:
        item = _running[-1]
        _unmarked.setdefault(item.nodeid, []).append(what)
        raise RuntimeError(f"{item.nodeid} starts a process ({what}) but is not marked "
                           "'process' (pytest.mark.process)")


@pytest.fixture(scope="session", autouse=True)
def _processes_are_marked() -> Iterator[None]:
    """Every ``subprocess.Popen`` and ``multiprocessing`` start passes :func:`_started`."""
    # matplotlib builds its font cache on its first import on a machine (running fc-list):
    # built here, before starts are watched, so that a fresh machine's first test that draws
    # a figure is not refused for a process of matplotlib's own.
    with contextlib.suppress(ImportError):
        import matplotlib.font_manager  # noqa: F401
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        _started(repr(args))
        popen_init(self, args, *rest, **kwargs)

    def start(self: multiprocessing.process.BaseProcess) -> None:
        _started(f"multiprocessing {self.name}")
        process_start(self)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        multiprocessing.process.BaseProcess.start = process_start  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[
        None, object, object]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
        None, pytest.TestReport, pytest.TestReport]:
    """A test that started a process without the marker fails, even if it caught the error."""
    report = yield
    started = _unmarked.pop(item.nodeid, None)
    if started and not report.failed:
        report.outcome = "failed"
        if hasattr(report, "wasxfail"):
            del report.wasxfail
        report.longrepr = (f"{item.nodeid} starts processes but is not marked 'process': "
                           + "; ".join(started))
    return report


@pytest.fixture(autouse=True)
def names_wait_for_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process coordinators (every suite's): the submission's names check waits for the
    centers' info as long as the machine's load needs (``tests/helpers/timing.py``). A center
    slower than the product's 3 s is skipped by the check, by design, and a test asserting the
    check's refusal would then see the study accepted. A test of the slow path sets its own."""
    from coordinator import runner

    monkeypatch.setattr(runner, "NAMES_WAIT_S", timing.scaled(10 * runner.NAMES_WAIT_S))
