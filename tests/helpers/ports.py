"""Ports for the services the tests start, never the same for two workers of one run.

``fedstats_cli.procs.free_ports`` binds port 0 and releases it: the kernel picks uniformly among
its ephemeral ports (about 14,000 of one parity on Linux), and between the choice and the
service's own bind (a Python start, seconds on a busy machine) the other worker can be handed
the same port, and one of the two services fails to start. Here each xdist worker takes ports
from its own residue class, in order, below the ephemeral range (which the kernel never hands
out for port 0 or an outgoing connection), each checked free by binding it; a run never offers
one port twice. ``tests/conftest.py`` puts :func:`free_ports` in place of the CLI's."""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

LOWEST = 10_000
"""The first port offered (above the registered services a machine commonly runs)."""


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default (and the IANA range starts higher, at 49152)


def _worker() -> tuple[int, int]:
    """(this worker's index, the number of workers): 0 of 1 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return int(name.removeprefix("gw") or 0), max(1, count)


def _candidates() -> Iterator[int]:
    """This worker's ports below the ephemeral range, from a random start (other runs on the
    same machine start elsewhere), once round."""
    index, workers = _worker()
    high = _ephemeral_low()
    own = range(LOWEST + (index - LOWEST) % workers, high, workers)
    if len(own) == 0:
        return iter(())
    start = secrets.randbelow(len(own))
    return itertools.chain(own[start:], own[:start])


_offered = _candidates()


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now, none offered before in this run and
    none another worker can be offered (each held until all are chosen)."""
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        for port in _offered:
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use by something else: the next one
                continue
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free ports left below {_ephemeral_low()} for this worker")
