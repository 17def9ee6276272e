"""The center under test: tokens, a peer center that signs tables, a small dataset (numeric x,
y with holes, a group with undeclared and missing labels) in every source format, and a real
``python -m center_agent`` over it on a loopback port (several datasets may be declared, each over
its own copy of the file, so one process serves isolated ledgers and auditors: a center refuses
two datasets over one file)."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from center_agent.gate.keys import CenterKeys, write_key_pair
from fedstats_cli.procs import free_port
from shared.protocol import LimitsStatement
from tests.helpers.config import write_toml
from tests.helpers.processes import running_center

TOKEN = "tok-" + "a1b2c3d4e5f6a7b8c9d0"
OTHER_TOKEN = "tok-" + "ffeeddccbbaa99887766"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
K = 10


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
    """Rows with a numeric x, a numeric y with holes (0 or >= K in each level), and a group
    with undeclared/missing labels."""
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
    # Each level leaves out 0 or >= K rows by itself: a level leaving out 1..K-1 would leave out
    # K - e more, of keyed rank under the center's random secret, and the tests built on this
    # table count records by hand (the keyed choice has its own tests: test_agent_leave_out).
    for level in ("a", "b"):
        rows = [i for i in range(n) if arm[i] == level]
        holes = [i for i in rows if y_list[i] is None or not np.isfinite(y_list[i])]
        # The level's last complete rows: tests that edit a row near the top keep it complete.
        complete = [i for i in rows if i not in holes][::-1]
        more = complete[:K - len(holes) if 0 < len(holes) < K else 0]
        for i in more:
            y_list[i] = None
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
    name: str = "center", n: int = 157, seed: int = 20261129,
    declared: Mapping[str, Mapping[str, Any]] | None = None, **extra: Any,
) -> tuple[Path, int]:
    """A center TOML over ``make_table(n, seed)``'s CSV (``<name>.csv``, kept when it exists)
    with one dataset per name (ε total as given): the first over that file, each other over a
    copy of it (``<name>-<dataset>.csv``); ``declared`` replaces keys of a dataset's
    declaration (its variables, its group)."""
    csv = tmp_path / f"{name}.csv"
    if not csv.exists():
        write_csv(make_table(n, seed), csv)
    sources = {}
    for i, ds in enumerate(datasets):
        sources[ds] = csv if i == 0 else tmp_path / f"{name}-{ds}.csv"
        if not sources[ds].exists():
            shutil.copyfile(csv, sources[ds])
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
        # A test's center binning a few hundred records needs no head start; the test of the
        # warm-up and the load test (long-running centers) turn it on.
        "warm_kernels": False,
        **extra,
        "datasets": {
            ds: {**dataset_config({"kind": "csv", "path": str(sources[ds])}, epsilon_total=eps),
                 **(declared or {}).get(ds, {})}
            for ds, eps in datasets.items()
        },
    }
    return write_toml(tmp_path / f"{name}.toml", config), port


@contextlib.contextmanager
def center_process(
    tmp_path: Path, datasets: Mapping[str, float], **extra: Any
) -> Iterator[Center]:
    """:func:`center_config`'s center, running (:func:`~tests.helpers.processes.running`)."""
    config, port = center_config(tmp_path, datasets, **extra)
    table = make_table()
    with running_center(config, port) as proc:
        yield Center(f"http://127.0.0.1:{port}", port, config, proc,
                     np.asarray(table["x"].to_numpy()), table["arm"].to_pylist())
