"""Helpers shared by the coordinator tests: tokens, settings, in-process centers with known data,
a counting wrapper around a port, and a mock center answering from a handler."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from coordinator.core.config import RetryPolicy, Settings
from coordinator.local import InProcessCenter, LocalDataset
from shared.protocol import (
    BinTableRelease,
    Budget,
    CenterInfo,
    Health,
    MWURelease,
    MWURequest,
    RefinementRelease,
    RefinementRequest,
    TableRequest,
)

ANALYST_TOKEN = "analyst-" + "0123456789abcdef"
CENTER_TOKENS = {
    "alpha": "center-alpha-" + "s3cr3t-0000000001",
    "beta": "center-beta-" + "s3cr3t-0000000002",
    "gamma": "center-gamma-" + "s3cr3t-0000000003",
}
AUTH = {"Authorization": f"Bearer {ANALYST_TOKEN}"}
K = 10
SIZES = {"alpha": 260, "beta": 190, "gamma": 120}  # distinct after rounding to multiples of K
PG_USERS = ("postgres", "root")

Arrays = tuple[NDArray[np.float64], NDArray[np.float64]]


def make_data(seed: int = 20261129, shift: float = 0.3) -> dict[str, Arrays]:
    """Per center: X and Y samples (continuous, so every value is distinct)."""
    rng = np.random.default_rng(seed)
    return {
        cid: (np.round(rng.normal(50, 10, n), 6), np.round(rng.normal(50 + 10 * shift, 10, n), 6))
        for cid, n in SIZES.items()
    }


def local_dataset(x: NDArray[np.float64], y: NDArray[np.float64]) -> LocalDataset:
    labels = np.array(["ctl"] * x.size + ["trt"] * y.size)
    return LocalDataset({"crp": np.concatenate([x, y])}, groups=labels, levels=("ctl", "trt"))


def in_process_centers(
    data: Mapping[str, Arrays], rng: np.random.Generator, k: int = K
) -> dict[str, InProcessCenter]:
    return {
        cid: InProcessCenter(cid, {"cohort": local_dataset(x, y)}, rng=rng, k=k)
        for cid, (x, y) in data.items()
    }


def settings_for(
    store_url: str, centers: Sequence[str] = tuple(SIZES), **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "analyst_tokens": [ANALYST_TOKEN],
        "centers": {
            cid: {"url": f"http://{cid}.test:8700", "token": CENTER_TOKENS[cid]}
            for cid in centers
        },
        "min_centers": 2,
        "store_url": store_url,
        "connect_timeout_s": 1.0,
        "read_timeout_s": 2.0,
        "retry": RetryPolicy(attempts=3, backoff_initial_s=0.0, backoff_max_s=0.0),
    }
    values.update(overrides)
    return Settings(**values)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'coordinator.sqlite'}"


class CountingCenter:
    """Wraps a port and counts the calls it forwards; ``gate`` (if set) is awaited first."""

    def __init__(self, port: Any) -> None:
        self.port = port
        self.calls: Counter[str] = Counter()
        self.gate: Any = None

    @property
    def center_id(self) -> str:
        return str(self.port.center_id)

    async def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if self.gate is not None:
            await self.gate.wait()

    async def health(self) -> Health:
        await self._enter("health")
        return await self.port.health()

    async def info(self) -> CenterInfo:
        await self._enter("info")
        return await self.port.info()

    async def budget(self) -> Budget:
        await self._enter("budget")
        return await self.port.budget()

    async def table(self, dataset: str, request: TableRequest) -> BinTableRelease:
        await self._enter("table")
        return await self.port.table(dataset, request)

    async def refine(self, dataset: str, request: RefinementRequest) -> RefinementRelease:
        await self._enter("refine")
        return await self.port.refine(dataset, request)

    async def mwu(self, dataset: str, request: MWURequest) -> MWURelease:
        await self._enter("mwu")
        return await self.port.mwu(dataset, request)

    async def dp_quantiles(self, dataset: str, request: Any) -> Any:
        await self._enter("dp_quantiles")
        return await self.port.dp_quantiles(dataset, request)

    async def dp_boxplot(self, dataset: str, request: Any) -> Any:
        await self._enter("dp_boxplot")
        return await self.port.dp_boxplot(dataset, request)

    async def dp_extremes(self, dataset: str, request: Any) -> Any:
        await self._enter("dp_extremes")
        return await self.port.dp_extremes(dataset, request)

    async def dp_tree_histogram(self, dataset: str, request: Any) -> Any:
        await self._enter("dp_tree_histogram")
        return await self.port.dp_tree_histogram(dataset, request)

    async def dp_threshold_counts(self, dataset: str, request: Any) -> Any:
        await self._enter("dp_threshold_counts")
        return await self.port.dp_threshold_counts(dataset, request)


def center_info_json(center_id: str, n_ctl: int = 100, n_trt: int = 100) -> dict[str, Any]:
    """What a real center answers on /v1/info for the ``cohort`` dataset."""
    return {
        "center_id": center_id,
        "k": K,
        "neighbouring": "add_remove",
        "quantile_loss_enabled": False,
        "datasets": [{
            "name": "cohort",
            "variables": ["crp"],
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "n_records": n_ctl + n_trt,
            "n_by_group": {"ctl": n_ctl, "trt": n_trt},
        }],
    }


Handler = Callable[[httpx.Request], httpx.Response]


def json_response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(),
                          headers={"Content-Type": "application/json"})
