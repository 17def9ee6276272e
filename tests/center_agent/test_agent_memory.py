"""What a center computes from its kept levels without copying them (``docs/benchmarks.md``,
"The 10^8-row study"): the numbers released are pinned, as computed before the levels were kept
in one buffer, merged without a working copy and placed between without pooling."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import center_agent.data as data
from center_agent.core.config import DatasetConfig
from center_agent.data import Dataset
from center_agent.gate.gaps import GapPoints
from center_agent.gate.keys import CenterKeys
from shared import _walk, protocol
from shared.releases import canonical_table, dp_quantiles_release, mwu_release

K = 10
KEYS = CenterKeys("c", bytes(range(32)), Ed25519PrivateKey.from_private_bytes(bytes(32)), {})
PINNED = {"pooled": "1996fb364525af02", "table": "e607e7785afa9497",
          "mwu": "b97a7dc929d2ad97", "dp_quantiles": "37eab67674707166"}
"""Digests of the releases below computed by the code of 2026-12-02 (levels sorted apart, the
pooled values a stable sort of their concatenation, the placement reading them)."""


def digest(*arrays: object) -> str:
    raw = b"".join(np.asarray(a, dtype=np.float64).tobytes() for a in arrays)
    return hashlib.sha256(raw).hexdigest()[:16]


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    """30,000 rows in three levels: ties at a 0.1 grid, -0.0 among 0.0, 1 % missing."""
    rng = np.random.default_rng(20261203)
    n = 30_000
    x = np.round(rng.normal(0, 2, n), 1)
    x[rng.random(n) < 0.05] = -0.0
    x[rng.random(n) < 0.01] = np.nan
    arm = rng.choice(["a", "b", "c"], n)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": x, "arm": arm}), path)
    config = DatasetConfig.model_validate({
        "source": {"kind": "parquet", "path": str(path)}, "variables": ["x"],
        "group": {"column": "arm", "levels": ["a", "b", "c"]}, "epsilon_total": 1.0})
    made = Dataset("d", config, K)
    yield made
    made.source.close()


@pytest.mark.parametrize("compiled_from", [data.MERGE_COMPILED_FROM, 0])
def test_the_releases_are_those_pinned(dataset: Dataset, compiled_from: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Table, Mann-Whitney and DP quantiles of every record (seeded noise, fixed keys): the
    same numbers, bit for bit, whether the pooled values come from the compiled merge or the
    stable sort; and the table is binned on the kept levels in place."""
    monkeypatch.setattr(data, "MERGE_COMPILED_FROM", compiled_from)
    population = dataset.population()
    levels = [population.level("x", level) for level in population.levels]
    buf, _ = _walk.sorted_buffer(levels)
    assert all(np.shares_memory(buf, level) for level in levels)
    pooled = population.pooled("x")
    assert digest(pooled) == PINNED["pooled"]
    table = canonical_table(levels, K, GapPoints(KEYS, "x", levels, np.zeros(0), K))
    assert digest(table.limits, table.counts) == PINNED["table"]
    request = protocol.MWURequest(variable="x", groups=("a", "b"), epsilon=1.0)
    mwu = mwu_release(levels[0], levels[1], request, np.random.default_rng(1))
    assert digest([mwu.statistic, mwu.variance, mwu.noise_variance]) == PINNED["mwu"]
    asked = protocol.DPQuantilesRequest(variable="x", epsilon=1.0, bounds=(-10.0, 10.0),
                                        levels=[0.1, 0.5, 0.9])
    quantiles = dp_quantiles_release(pooled, asked, "add_remove", rng=np.random.default_rng(2),
                                     k=K)
    assert digest(quantiles.values) == PINNED["dp_quantiles"]
