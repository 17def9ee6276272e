"""A variable missing on some records (``missing = "per_variable"``) at K-anonymous centers:
every table of it totals the records that hold it, fewer than the level's declared size. The
coordinator checks each release against the variable's own floors (``Survey.floors``), for the
federated table and for each center's own table alike (a Kruskal-Wallis analysis asks both), so
a plausible release is never taken for an implausible one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.local import in_process_federation
from coordinator.models import FailedAnalysis, KruskalResult, MWUResult, StudySpec
from coordinator.study import run_study
from tests.helpers.coordinator import K

pytestmark = pytest.mark.anyio

# Per center and arm: records, of them missing crp (0 or >= K: the center's K rule keeps all).
LAYOUT = {"alpha": {"ctl": (120, 20), "trt": (110, 0)},
          "beta": {"ctl": (90, 0), "trt": (100, 15)}}


def _center(path: Path, layout: dict[str, tuple[int, int]], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    crp: list[float | None] = []
    arm: list[str] = []
    for level, (n, missing) in layout.items():
        values: list[float | None] = [float(v) for v in rng.normal(50, 10, n)]
        values[:missing] = [None] * missing
        crp += values
        arm += [level] * n
    pq.write_table(pa.table({"crp": pa.array(crp, pa.float64()), "arm": arm}), path)
    return {"source": {"kind": "parquet", "path": str(path)}, "variables": ["crp"],
            "missing": "per_variable", "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "epsilon_total": 5.0, "epsilon_per_request": 1.0}


async def test_tables_of_a_variable_missing_on_some_records_are_plausible(
        tmp_path: Path) -> None:
    centers = in_process_federation(
        {cid: {"cohort": _center(tmp_path / f"{cid}.parquet", layout, i)}
         for i, (cid, layout) in enumerate(LAYOUT.items())}, k=K)
    try:
        spec = StudySpec.model_validate({
            "dataset": "cohort", "variable": "crp", "k": K, "groups": ["ctl", "trt"],
            "analyses": [{"kind": "mwu"}, {"kind": "kruskal"}]})
        result = await run_study(spec, list(centers.values()), min_centers=2)
    finally:
        for c in centers.values():
            await c.aclose()
    failed = [a for a in result.analyses if isinstance(a, FailedAnalysis)]
    assert failed == [] and result.excluded == []
    mwu, kruskal = result.analyses
    assert isinstance(mwu, MWUResult) and isinstance(kruskal, KruskalResult)
    held = [sum(LAYOUT[c][arm][0] - LAYOUT[c][arm][1] for c in LAYOUT) for arm in ("ctl", "trt")]
    assert kruskal.arms.sizes == held  # the records holding crp, per arm
    assert [sum(c.sizes) for c in kruskal.centers] == [
        sum(n - m for n, m in LAYOUT[c].values()) for c in LAYOUT]
