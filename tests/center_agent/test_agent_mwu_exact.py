"""A small center's Mann-Whitney release with ties (n + m <= 50, no ε) carries U's two exact
tails given its ties, computed by the center (docs/methods.md §3.1, docs/privacy.md guarantee
2); the levels the other way round get the same stored answer with U and the tails swapped."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pytest
from fastapi import FastAPI

from shared.mwu import EXACT_MAX_N, exact_null, mann_whitney
from shared.protocol import MWURelease
from tests.helpers.center import AUTH, make_table, write_csv

pytestmark = pytest.mark.anyio
MWU = "/v1/datasets/cohort/mwu"


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    """46 rows (about 20 records in each of the two levels), x rounded to steps of 5: heavy
    ties. y has no holes here: a level missing 1..K-1 values would leave out K of its rows
    (the rows a level leaves out number 0 or >= K), too many for a level this small."""
    table = make_table(n=46, seed=5)
    x = np.round(np.asarray(table.column("x")) / 5.0) * 5.0
    table = table.set_column(0, "x", pa.array(x, pa.float64()))
    table = table.set_column(1, "y", pa.array(np.arange(46.0) + 0.5, pa.float64()))
    return write_csv(table, tmp_path / "cohort.csv")


async def test_a_small_tied_release_carries_the_exact_tails(client: httpx.AsyncClient,
                                                            app: FastAPI) -> None:
    population = app.state.services.datasets["cohort"].population()
    x, y = population.level("x", "a"), population.level("x", "b")
    assert x.size + y.size <= EXACT_MAX_N and np.unique(np.r_[x, y]).size < x.size + y.size
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"]}, headers=AUTH)
    assert r.status_code == 200, r.text
    release = MWURelease.model_validate_json(r.content)
    core = mann_whitney(x, y)
    _, counts = np.unique(np.r_[x, y], return_counts=True)
    law = exact_null(x.size, y.size, counts)
    assert release.exact_log_tails == pytest.approx(list(law.log_tails(core.statistic)),
                                                    rel=1e-12)
    assert release.to_result("less").pvalue == pytest.approx(
        law.pvalue(core.statistic, "less"), rel=1e-12)
    swapped = MWURelease.model_validate_json((await client.post(
        MWU, json={"variable": "x", "groups": ["b", "a"]}, headers=AUTH)).content)
    assert swapped.statistic == -release.statistic
    assert release.exact_log_tails is not None
    assert swapped.exact_log_tails == release.exact_log_tails[::-1]
    assert swapped.to_result("greater").pvalue == pytest.approx(
        release.to_result("less").pvalue, rel=1e-12)
    assert swapped.to_result().null == "exact"
