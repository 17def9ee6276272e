"""Helpers shared by the center agent tests: tokens, a small dataset in every source format,
TOML writing, and a real ``python -m center_agent`` process on a loopback port."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from center_agent.gate.keys import CenterKeys
from fedstats_cli.procs import await_health
from shared.protocol import LimitsStatement

TOKEN = "tok-" + "a1b2c3d4e5f6a7b8c9d0"
OTHER_TOKEN = "tok-" + "ffeeddccbbaa99887766"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
K = 10
PG_USERS = ("postgres", "root")
REPO = Path(__file__).resolve().parents[2]


# A peer center whose tables the test center trusts (settings `peers`): its key is made once
# per test session, never stored.
PEER_ID = "hospital-peer"
_PEER_KEY = Ed25519PrivateKey.generate()
PEER = CenterKeys(PEER_ID, secrets.token_bytes(32), _PEER_KEY, {})
PEER_PUBLIC_KEY = PEER.public_key


def peer_table(limits: Sequence[float], *, variable: str = "x",
               groups: Sequence[str] | None = ("a", "b"), k: int = K, dataset: str = "cohort",
               lower: str = "buffer", upper: str = "buffer",
               signer: CenterKeys = PEER) -> dict[str, Any]:
    """A table statement signed by the peer (or ``signer``), as a refine request carries it."""
    statement = LimitsStatement(
        center_id=signer.center_id, dataset=dataset, variable=variable,
        groups=tuple(groups) if groups is not None else None, k=k,
        limits=[float(v) for v in limits], lower=lower, upper=upper,  # type: ignore[arg-type]
    )
    signed: dict[str, Any] = signer.sign(statement).to_payload()
    return signed


def make_table(n: int = 157, seed: int = 20261129) -> pa.Table:
    """Rows with a numeric x, a numeric y with holes, and a group with undeclared/missing labels."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(50, 10, n), 3)
    y = np.round(rng.exponential(2.0, n), 3)
    y_list: list[float | None] = [float(v) for v in y]
    for i in range(0, n, 13):
        y_list[i] = None  # missing
    y_list[5] = float("inf")  # non-finite
    arm = rng.choice(np.array(["a", "b"]), n).tolist()
    arm[3] = "c"  # present but undeclared
    arm[4] = None  # missing label
    arm[7] = None
    return pa.table(
        {
            "x": pa.array(x, pa.float64()),
            "y": pa.array(y_list, pa.float64()),
            "arm": pa.array(arm, pa.string()),
            "notes": pa.array([f"free text {i}, with comma" for i in range(n)], pa.string()),
        }
    )


def write_csv(table: pa.Table, path: Path) -> Path:
    pa_csv.write_csv(table, path)
    return path


def write_parquet(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def write_sql(table: pa.Table, url: str, name: str) -> None:
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    types = {pa.float64(): sa.Float(), pa.string(): sa.Text()}
    sa_table = sa.Table(
        name, meta, *(sa.Column(f.name, types[f.type]) for f in table.schema)
    )
    with engine.begin() as conn:
        sa_table.drop(conn, checkfirst=True)
        sa_table.create(conn)
        conn.execute(sa_table.insert(), table.to_pylist())
    engine.dispose()


def dataset_config(source: dict[str, Any], epsilon_total: float = 3.0) -> dict[str, Any]:
    return {
        "source": source,
        "variables": ["x", "y"],
        "group": {"column": "arm", "levels": ["a", "b"]},
        "epsilon_total": epsilon_total,
    }


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, Path)):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def write_toml(path: Path, config: dict[str, Any]) -> Path:
    """A TOML file: top-level scalars, then one [datasets.NAME] table per dataset."""
    lines = []
    for key, value in config.items():
        if key != "datasets":
            lines.append(f"{key} = {toml_value(value)}")
    for name, ds in config.get("datasets", {}).items():
        lines.append(f"\n[datasets.{toml_value(name)}]")
        for key, value in ds.items():
            lines.append(f"{key} = {toml_value(value)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_CENTER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@contextlib.contextmanager
def service_log(path: Path) -> Iterator[tuple[IO[bytes], Callable[[], str]]]:
    """A file for a child service's stderr, and a reader of its tail.

    Never ``stderr=subprocess.PIPE`` for a long-lived child nobody reads: a child that logs
    (say tracebacks) fills the pipe and blocks, and the test waits for it for ever.
    """
    with open(path, "ab") as handle:
        yield handle, lambda: path.read_text(errors="replace")[-20_000:]


@contextlib.contextmanager
def running_center(
    config_file: Path, port: int, *, scheme: str = "http", verify: Any = True
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m center_agent`` on a loopback port; waits for /v1/health, always stopped.
    Its stderr goes to ``<config>.log``."""
    with service_log(config_file.with_suffix(".log")) as (log, output):
        proc = subprocess.Popen(
            [sys.executable, "-m", "center_agent", "--config", str(config_file)],
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            await_health(proc, f"{scheme}://127.0.0.1:{port}", timeout_s=30, verify=verify,
                         output=output)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
