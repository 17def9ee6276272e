"""Real processes, as operators and users run them: ``python -m center_agent`` and ``python -m
coordinator`` under uvicorn on loopback ports (started with a clean environment, their stderr
appended to a log file next to their configuration, waited for on ``/v1/health`` for as long as
they live, always stopped), the ``fedstats`` command, and checks that processes are gone. No
wait here fails because the machine is slow (``tests/helpers/timing.py``).

Every test using these is marked ``process`` (``tests/conftest.py`` fails one that is not)."""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from fedstats_cli import procs
from tests.helpers.timing import scaled

REPO = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any ``FEDSTATS_*`` setting (a child reads its own file only),
    the repository importable, and ``extra``."""
    path = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return procs.child_env({"PYTHONPATH": path, **extra})


def fedstats() -> list[str]:
    """The installed console script next to this Python, else ``python -m fedstats_cli``."""
    script = Path(sys.executable).parent / "fedstats"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fedstats_cli"]


def run_module(module: str, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` to its end, its output captured as text (``timeout_s``, a
    hang guard for a quiet machine, is :func:`~tests.helpers.timing.scaled`)."""
    return subprocess.run([sys.executable, "-m", module, *args], env=clean_env(),
                          capture_output=True, text=True, timeout=scaled(timeout_s))


def log_file(config: Path) -> Path:
    """Where a service started with ``config`` appends its stderr."""
    return config.with_suffix(".log")


def log_tail(config: Path) -> str:
    """The end of a service's stderr (shown when it does not come up)."""
    return log_file(config).read_text(errors="replace")[-20_000:]


def spawn(module: str, config: Path) -> subprocess.Popen[bytes]:
    """``python -m <module> --config <config>``, its stderr appended to :func:`log_file`: never
    ``stderr=subprocess.PIPE`` for a long-lived child nobody reads (a child that logs, say
    tracebacks, fills the pipe and blocks, and the test waits for it for ever)."""
    with open(log_file(config), "ab") as log:
        return subprocess.Popen([sys.executable, "-m", module, "--config", str(config)],
                                env=clean_env(), stdout=subprocess.DEVNULL, stderr=log)


def wait_healthy(proc: subprocess.Popen[bytes], port: int, config: Path, *,
                 scheme: str = "http", verify: ssl.SSLContext | bool = True) -> None:
    """Wait until the process answers ``/v1/health`` (it may start in parallel with others),
    however long its imports take on a busy machine; raise with its log when it exits first
    (a service that cannot start, say on a taken port, exits)."""
    procs.await_health(proc, f"{scheme}://127.0.0.1:{port}", timeout_s=None, verify=verify,
                       output=lambda: log_tail(config))


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s; a process already gone is only reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()  # SIGKILLed: it exits, however busy the machine
    if proc.stderr:
        proc.stderr.close()


@contextlib.contextmanager
def running(module: str, config: Path, port: int, *, scheme: str = "http",
            verify: ssl.SSLContext | bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """:func:`spawn`, :func:`wait_healthy`, and :func:`stop` however the block ends."""
    proc = spawn(module, config)
    try:
        wait_healthy(proc, port, config, scheme=scheme, verify=verify)
        yield proc
    finally:
        stop(proc)


def running_center(config: Path, port: int, *, scheme: str = "http",
                   verify: ssl.SSLContext | bool = True,
                   ) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """``python -m center_agent`` on a loopback port (:func:`running`)."""
    return running("center_agent", config, port, scheme=scheme, verify=verify)


def running_coordinator(
    config: Path, port: int
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """``python -m coordinator`` on a loopback port (:func:`running`)."""
    return running("coordinator", config, port)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie awaiting its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    """The PIDs still running after ``timeout_s`` (:func:`~tests.helpers.timing.scaled`;
    orphans are reaped by init a moment later)."""
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)
