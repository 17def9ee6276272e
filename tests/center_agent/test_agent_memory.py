"""What a center computes from its kept levels without copying them (``docs/benchmarks.md``,
"The 10^8-row study"): the numbers released are those of the plain computation — the levels read
from the file and sorted apart, the pooled values a stable sort of their concatenation, the
limits placed by reading that pooled array — bit for bit, in the same run. Comparing within one
run keeps the check exact whatever numpy's version draws or sorts (a digest pinned once would
hold only on the versions that made it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from numpy.typing import NDArray

import center_agent.data as data
from center_agent.core.config import DatasetConfig
from center_agent.data import Dataset
from center_agent.gate.gaps import GapPoints
from center_agent.gate.keys import CenterKeys
from shared import _walk, protocol
from shared.releases import canonical_table, dp_quantiles_release, mwu_release

K = 10
KEYS = CenterKeys("c", bytes(range(32)), Ed25519PrivateKey.from_private_bytes(bytes(32)), {})
LEVELS = ["a", "b", "c"]


def bits(*arrays: object) -> bytes:
    """The float64 bytes of ``arrays``: equal bytes are equal numbers, -0.0 and NaN included."""
    return b"".join(np.asarray(a, dtype=np.float64).tobytes() for a in arrays)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """30,000 rows in three levels: ties at a 0.1 grid, -0.0 among 0.0, 1 % missing."""
    rng = np.random.default_rng(20261203)
    n = 30_000
    x = np.round(rng.normal(0, 2, n), 1)
    x[rng.random(n) < 0.05] = -0.0
    x[rng.random(n) < 0.01] = np.nan
    arm = rng.choice(LEVELS, n)
    out = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": x, "arm": arm}), out)
    return out


@pytest.fixture
def dataset(path: Path) -> Dataset:
    config = DatasetConfig.model_validate({
        "source": {"kind": "parquet", "path": str(path)}, "variables": ["x"],
        "group": {"column": "arm", "levels": LEVELS}, "epsilon_total": 1.0})
    made = Dataset("d", config, K)
    yield made
    made.source.close()


def plain_levels(path: Path) -> list[NDArray[np.float64]]:
    """Each level's present values read straight from the file, sorted on their own."""
    table = pq.read_table(path)
    x = table.column("x").to_numpy()
    arm = table.column("arm").to_numpy(zero_copy_only=False)
    return [np.sort(x[(arm == level) & ~np.isnan(x)], kind="stable") for level in LEVELS]


@pytest.mark.parametrize("compiled_from", [data.MERGE_COMPILED_FROM, 0])
def test_the_releases_are_those_of_the_plain_computation(
        dataset: Dataset, path: Path, compiled_from: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Table, Mann-Whitney and DP quantiles of every record (seeded noise, fixed keys): the
    same numbers, bit for bit, as from levels sorted apart and pooled by a stable sort, whether
    the center pools with the compiled merge or the stable sort; and the table is binned on the
    kept levels in place."""
    monkeypatch.setattr(data, "MERGE_COMPILED_FROM", compiled_from)
    population = dataset.population()
    levels = [population.level("x", level) for level in population.levels]
    buf, _ = _walk.sorted_buffer(levels)
    assert all(np.shares_memory(buf, level) for level in levels)
    plain = plain_levels(path)
    # The same values in each level; 0.0 and -0.0 are equal, so a sort may order them either
    # way (numpy's own sorts do, by version), and no release depends on that order.
    assert all(np.array_equal(v, w) for v, w in zip(levels, plain, strict=True))
    plain_pooled = np.sort(np.concatenate(plain), kind="stable")
    pooled = population.pooled("x")
    assert bits(pooled) == bits(np.sort(np.concatenate(levels), kind="stable"))

    table = canonical_table(levels, K, GapPoints(KEYS, "x", levels, np.zeros(0), K))
    # The placement reading one pooled array: the numbers the levels' placement must give.
    plain_table = canonical_table(plain, K, GapPoints(KEYS, "x", [plain_pooled], np.zeros(0), K))
    assert table.limits.size > 2
    assert bits(table.limits, table.counts) == bits(plain_table.limits, plain_table.counts)

    request = protocol.MWURequest(variable="x", groups=("a", "b"), epsilon=1.0)
    mwu = mwu_release(levels[0], levels[1], request, np.random.default_rng(1))
    plain_mwu = mwu_release(plain[0], plain[1], request, np.random.default_rng(1))
    assert bits(mwu.statistic, mwu.variance, mwu.noise_variance) == bits(
        plain_mwu.statistic, plain_mwu.variance, plain_mwu.noise_variance)

    asked = protocol.DPQuantilesRequest(variable="x", epsilon=1.0, bounds=(-10.0, 10.0),
                                        levels=[0.1, 0.5, 0.9])
    quantiles = dp_quantiles_release(pooled, asked, "add_remove", rng=np.random.default_rng(2),
                                     k=K)
    plain_quantiles = dp_quantiles_release(plain_pooled, asked, "add_remove",
                                           rng=np.random.default_rng(2), k=K)
    assert bits(quantiles.values) == bits(plain_quantiles.values)
