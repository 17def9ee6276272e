"""Helpers of the attack, fault and load tests: a real center over a known CSV (several datasets
declared over the same file, so one process serves isolated ledgers and auditors), a real
coordinator process, and the checks every attack ends with (no count in 1..K-1, no overspend)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from center_helpers import (
    AUTH,
    TOKEN,
    K,
    dataset_config,
    free_port,
    make_table,
    running_center,
    service_log,
    write_csv,
    write_toml,
)
from cli_helpers import clean_env

from center_agent.gate.keys import write_key_pair
from fedstats_cli.procs import await_health

# Keys whose numbers are exact K-anonymous counts: each must be 0 or >= K wherever it appears.
# (DP counts, e.g. a boxplot's outliers or threshold counts, are noisy and paid for: not here.)
EXACT_COUNT_KEYS = frozenset({"counts", "totals", "n_records", "n_by_group", "n_x", "n_y"})


@dataclass
class Center:
    """A running ``python -m center_agent``: its URL, config file and process."""

    url: str
    port: int
    config: Path
    proc: subprocess.Popen[bytes]
    x: np.ndarray  # the raw values of variable x (for the attacker's oracle only)
    arm: list[str | None]


def center_config(
    tmp_path: Path, datasets: Mapping[str, float], *, port: int | None = None,
    name: str = "center", n: int = 157, seed: int = 20261129, **extra: Any,
) -> tuple[Path, int]:
    """A center TOML over ``make_table(n, seed)``'s CSV with one dataset per name (ε total as
    given)."""
    csv = tmp_path / f"{name}.csv"
    if not csv.exists():
        write_csv(make_table(n, seed), csv)
    port = port or free_port()
    # Every center made in one folder trusts the others: its public key goes to peers/.
    key = tmp_path / f"{name}.key"
    if not key.exists():
        write_key_pair(key)
    peers = tmp_path / "peers"
    peers.mkdir(exist_ok=True)
    (peers / f"{name}.pub").write_text(key.with_name(key.name + ".pub").read_text())
    config = {
        "center_id": name,
        "k": K,
        "tokens": [TOKEN],
        "port": port,
        "ledger_url": f"sqlite:///{tmp_path / f'{name}-ledger.sqlite'}",
        "signing_key_file": str(key),
        "peer_keys_dir": str(peers),
        **extra,
        "datasets": {
            ds: dataset_config({"kind": "csv", "path": str(csv)}, epsilon_total=eps)
            for ds, eps in datasets.items()
        },
    }
    return write_toml(tmp_path / f"{name}.toml", config), port


@contextlib.contextmanager
def center_process(
    tmp_path: Path, datasets: Mapping[str, float], **extra: Any
) -> Iterator[Center]:
    config, port = center_config(tmp_path, datasets, **extra)
    table = make_table()
    with running_center(config, port) as proc:
        yield Center(f"http://127.0.0.1:{port}", port, config, proc,
                     np.asarray(table["x"].to_numpy()), table["arm"].to_pylist())


@contextlib.contextmanager
def coordinator_process(config: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m coordinator`` on a loopback port; waits for /v1/health, always stopped. Its
    stderr goes to ``<config>.log``."""
    with service_log(config.with_suffix(".log")) as (log, output):
        proc = subprocess.Popen([sys.executable, "-m", "coordinator", "--config", str(config)],
                                env=clean_env(), stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_healthy(proc, port, output=output)
            yield proc
        finally:
            stop(proc)


def spawn_center(config: Path) -> subprocess.Popen[bytes]:
    """``python -m center_agent`` with its stderr appended to ``<config>.log`` (never a pipe
    nobody reads: a child logging tracebacks would fill it and block)."""
    with open(config.with_suffix(".log"), "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "center_agent", "--config", str(config)],
                                env=clean_env(), stdout=subprocess.DEVNULL, stderr=log)


def wait_healthy(proc: subprocess.Popen[bytes], port: int, timeout_s: float = 60.0,
                 output: Callable[[], str] | None = None) -> None:
    await_health(proc, f"http://127.0.0.1:{port}", timeout_s=timeout_s,
                 output=output or (lambda: proc.stderr.read().decode() if proc.stderr else ""))


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stderr:
        proc.stderr.close()


def small_counts(obj: Any, k: int = K, key: str | None = None) -> list[tuple[str, float]]:
    """Every exact count in 1..k-1 found anywhere in a JSON answer, with the key it sits under."""
    found: list[tuple[str, float]] = []
    if isinstance(obj, dict):
        for name, value in obj.items():
            found += small_counts(value, k, name if name in EXACT_COUNT_KEYS else key)
    elif isinstance(obj, list):
        for value in obj:
            found += small_counts(value, k, key)
    elif key is not None and isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if 0 < obj < k:
            found.append((key, obj))
    return found


def budget(client: httpx.Client, dataset: str) -> dict[str, float]:
    r = client.get(f"/v1/budget/{dataset}", headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    return dict(body.get("datasets", {}).get(dataset, body))
