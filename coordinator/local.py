"""In-process centers: the real center app, over ``httpx.ASGITransport``, on arrays held here.

For simulations, tests and the end-to-end benchmark's baseline: the protocols run unchanged over
:class:`InProcessCenter` ports, which are :class:`coordinator.client.HttpCenter` clients of a real
``center_agent`` app (its release gate, ledger, keys and disclosure control included) whose data
are written to a temporary Parquet file and whose ledger is a temporary SQLite file. So an
in-process center answers exactly what a deployed one would, refusals and error codes included:
there is no second implementation to drift from the first.

Example::

    centers = in_process_federation({
        "a": {"cohort": LocalDataset({"age": ages_a}, groups=arm_a, levels=("ctl", "trt"))},
        "b": {"cohort": LocalDataset({"age": ages_b}, groups=arm_b, levels=("ctl", "trt"))},
    }, k=10)
    table = await federated_bin_table(list(centers.values()), dataset="cohort", variable="age")
    for center in centers.values():
        await center.aclose()

Each center trusts the others' signed tables (their public keys are its peers). Budgets are
large (``epsilon_total``) and a request may spend all of it: simulations are not privacy
deployments. Never put real data behind an in-process center.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import ArrayLike

from center_agent.core.config import Settings as CenterSettings
from center_agent.gate.keys import write_key_pair
from center_agent.main import create_app
from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.ports import CenterPort
from shared.privacy import Neighbouring

GROUP_COLUMN = "group"


@dataclass(frozen=True)
class LocalDataset:
    """Variables (aligned arrays) and, optionally, the group label of each row."""

    variables: Mapping[str, ArrayLike]
    groups: ArrayLike | None = None
    levels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        sizes = {np.asarray(v).size for v in self.variables.values()}
        if self.groups is not None:
            sizes.add(np.asarray(self.groups).size)
        if len(sizes) > 1:
            raise ValueError("every variable (and the groups) must have one value per row")
        if (self.groups is None) != (not self.levels):
            raise ValueError("give `groups` and `levels` together")

    def write(self, path: Path) -> Path:
        columns: dict[str, pa.Array] = {
            name: pa.array(np.asarray(v, dtype=np.float64)) for name, v in self.variables.items()
        }
        if self.groups is not None:
            columns[GROUP_COLUMN] = pa.array(np.asarray(self.groups).astype(str).tolist(),
                                             pa.string())
        pq.write_table(pa.table(columns), path)
        return path

    def config(self, path: Path, epsilon_total: float) -> dict[str, Any]:
        group = ({"column": GROUP_COLUMN, "levels": list(self.levels)}
                 if self.groups is not None else None)
        return {"source": {"kind": "parquet", "path": str(path)},
                "variables": list(self.variables), "group": group,
                "epsilon_total": epsilon_total, "epsilon_per_request": epsilon_total}


class InProcessCenter(HttpCenter):
    """A real center app on ``datasets``, reached through ``httpx.ASGITransport``.

    ``peers`` maps other centers' ids to their public keys (see :func:`in_process_federation`);
    ``settings`` overrides any center setting. :meth:`aclose` stops it and removes its files.
    """

    def __init__(
        self,
        center_id: str,
        datasets: Mapping[str, LocalDataset],
        *,
        k: int = 10,
        neighbouring: Neighbouring = "add_remove",
        epsilon_total: float = 1e6,
        peers: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        **settings: Any,
    ) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix=f"fedstats-{center_id}-")) if workdir is None \
            else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        key_file = self.workdir / "signing.key"
        self.signing_key = (key_file.with_name("signing.key.pub").read_text().strip()
                            if key_file.exists() else write_key_pair(key_file))
        token = secrets.token_urlsafe(24)
        try:
            center_settings = CenterSettings(
                center_id=center_id, tokens=[token], k=k, neighbouring=neighbouring,
                ledger_url=f"sqlite:///{self.workdir / 'ledger.sqlite'}",
                signing_key_file=key_file, peers=dict(peers or {}),
                datasets={name: ds.config(ds.write(self.workdir / f"{name}.parquet"),
                                          epsilon_total)
                          for name, ds in datasets.items()},
                **settings,
            )
            self.app = create_app(center_settings)
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)  # nothing may be left behind
            raise
        self.settings = center_settings
        super().__init__(
            center_id,
            CenterConfig.model_validate({"url": f"http://{center_id.replace('_', '-')}.local",
                                         "token": token}),
            timeout=httpx.Timeout(600.0),
            retry=RetryPolicy(attempts=1),
            transport=httpx.ASGITransport(app=self.app),
        )

    async def aclose(self) -> None:
        await super().aclose()
        self.app.state.services.close()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def in_process_federation(
    datasets: Mapping[str, Mapping[str, LocalDataset]],
    *,
    k: int = 10,
    neighbouring: Neighbouring = "add_remove",
    **settings: Any,
) -> dict[str, InProcessCenter]:
    """One :class:`InProcessCenter` per id, each trusting the others' signed tables."""
    keys: dict[str, tuple[Path, str]] = {}
    for center_id in datasets:
        workdir = Path(tempfile.mkdtemp(prefix=f"fedstats-{center_id}-"))
        keys[center_id] = (workdir, write_key_pair(workdir / "signing.key"))
    centers = {}
    for center_id, own in datasets.items():
        workdir, _ = keys[center_id]
        peers = {other: key for other, (_, key) in keys.items() if other != center_id}
        center = InProcessCenter(center_id, own, k=k, neighbouring=neighbouring, peers=peers,
                                 workdir=workdir, **settings)
        center._own_dir = True  # the federation made its folder: the center removes it
        centers[center_id] = center
    return centers


if TYPE_CHECKING:  # an InProcessCenter is a CenterPort (checked by mypy, not at run time)
    _port: CenterPort = InProcessCenter("", {})
