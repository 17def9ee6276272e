"""Child service processes on loopback ports: start, wait for health, always stop.

Each child runs in its own session (its own process group), so a Ctrl-C at the terminal reaches
only the parent, which then stops every child it started: SIGTERM to the child's group, SIGKILL
to the group after a grace period. :class:`ProcessGroup` is a context manager; its ``__exit__``
runs on a normal exit, on an exception and on ``KeyboardInterrupt``; :func:`terminate_on_sigterm`
turns a SIGTERM of the parent into the same path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

import httpx

GRACE_S = 10.0


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (each held until all are chosen, so
    none is chosen twice; another process could take one before we bind it)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (see :func:`free_ports`)."""
    return free_ports(1)[0]


class Terminated(Exception):
    """The parent received SIGTERM; raised so that every ``finally`` runs."""


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"signal {signum}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM) must not cut the stopping short; stopping is bounded."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    except ValueError:  # not the main thread: signals cannot reach this code anyway
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path


class ProcessGroup:
    """The services one command started; all stopped on exit, whatever the exit."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    def start(
        self, name: str, argv: Sequence[str], *, url: str, log: Path, env: dict[str, str]
    ) -> Child:
        """Start ``argv`` in a new session, its output appended to ``log``."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(argv), env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        child = Child(name=name, proc=proc, url=url, log=log)
        self.children.append(child)
        return child

    def wait_healthy(self, timeout_s: float | None = 60.0) -> None:
        """Wait until every child answers ``GET /v1/health``; raise naming one that died, or
        at ``timeout_s`` (None: no deadline; a child that cannot start exits)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = list(self.children)
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while pending:
                for child in list(pending):
                    if child.proc.poll() is not None:
                        tail = child.log.read_text(errors="replace")[-2000:]
                        raise RuntimeError(
                            f"{child.name} exited with code {child.proc.returncode}:\n{tail}"
                        )
                    with contextlib.suppress(httpx.TransportError):
                        if client.get(f"{child.url}/v1/health").status_code == 200:
                            pending.remove(child)
                if pending and deadline is not None and time.monotonic() > deadline:
                    names = ", ".join(c.name for c in pending)
                    raise RuntimeError(f"not healthy within {timeout_s:.0f} s: {names}")
                if pending:
                    time.sleep(0.1)

    def stop_all(self) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after the grace."""
        with signals_ignored():
            self._stop_all()

    def _stop_all(self) -> None:
        alive = [c for c in self.children if c.proc.poll() is None]
        for child in alive:
            _signal_group(child.proc, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for child in alive:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child.proc, signal.SIGKILL)
                child.proc.wait(timeout=GRACE_S)
        for child in self.children:  # a child's own children, if any outlived it
            _signal_group(child.proc, signal.SIGKILL)


def await_health(
    proc: subprocess.Popen[bytes],
    url: str,
    *,
    timeout_s: float | None = 60.0,
    output: Callable[[], str] = lambda: "",
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Poll ``GET {url}/v1/health`` until it answers 200 (a refused connection only means "not
    up yet"); raise RuntimeError when ``proc`` exits first, with ``output()``, or at the
    deadline (``timeout_s``; None: no deadline, the process exiting is the only failure, for a
    caller that must not fail because the machine is slow). ``verify``: how an ``https`` URL's
    certificate is checked (httpx's meaning)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0, trust_env=False, verify=verify) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}: {output()}")
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{url}/v1/health").status_code == 200:
                    return
            if deadline is not None and time.monotonic() > deadline:
                raise RuntimeError(f"{proc.args!r} did not become healthy within {timeout_s} s")
            time.sleep(0.1)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without any ``FEDSTATS_*`` setting (a child reads its own file only)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env
