"""Helpers of the CLI tests: the ``fedstats`` command as a user runs it, and process checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def fedstats() -> list[str]:
    """The installed console script next to this Python, else ``python -m fedstats_cli``."""
    script = Path(sys.executable).parent / "fedstats"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fedstats_cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any FEDSTATS_* setting, the repository importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie awaiting its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    """The PIDs still running after ``timeout_s`` (orphans are reaped by init a moment later)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)
