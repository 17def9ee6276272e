"""In-process centers: the real center app, over ``httpx.ASGITransport``, in this process.

For simulations, tests and the end-to-end benchmark's baseline: the protocols run unchanged over
:class:`InProcessCenter` ports, which are :class:`coordinator.client.HttpCenter` clients of a real
``center_agent`` app (its datasets, release gate, ledger, keys and disclosure control included)
whose ledger and keys are temporary files. Its datasets are declared exactly as a center's
settings declare them (``center_agent.core.config.DatasetConfig``: a source, the variables, the
group column and its levels, the budget) and read by the center's own
``center_agent.data.Dataset``. So an in-process center answers exactly what a deployed one would,
refusals and error codes included: there is no second implementation to drift from the first.

Example::

    cohort = {"source": {"kind": "parquet", "path": "a.parquet"}, "variables": ["age"],
              "group": {"column": "arm", "levels": ["ctl", "trt"]}, "epsilon_total": 10.0}
    centers = in_process_federation({"a": {"cohort": cohort}, "b": {"cohort": ...}}, k=10)
    table = await federated_bin_table(list(centers.values()), dataset="cohort", variable="age")
    for center in centers.values():
        await center.aclose()

Each center trusts the others' signed tables (their public keys are its peers). Budgets are the
declarations': simulations that need large ones declare them. Never put real data behind an
in-process center.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from center_agent.core.config import DatasetConfig
from center_agent.core.config import Settings as CenterSettings
from center_agent.gate.keys import write_key_pair
from center_agent.main import create_app
from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.ports import CenterPort
from shared.privacy import Neighbouring

Declaration = DatasetConfig | Mapping[str, Any]
"""A dataset as a center's settings declare it (``[datasets.<name>]`` of its TOML file)."""


class InProcessCenter(HttpCenter):
    """A real center app serving ``datasets``, reached through ``httpx.ASGITransport``.

    ``peers`` maps other centers' ids to their public keys (see :func:`in_process_federation`);
    ``settings`` overrides any center setting. :meth:`aclose` stops it and removes the files it
    made (its ledger and keys; the datasets' sources are the caller's).
    """

    def __init__(
        self,
        center_id: str,
        datasets: Mapping[str, Declaration],
        *,
        k: int = 10,
        neighbouring: Neighbouring = "add_remove",
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
                signing_key_file=key_file, peers=dict(peers or {}), datasets=dict(datasets),
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
    datasets: Mapping[str, Mapping[str, Declaration]],
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
