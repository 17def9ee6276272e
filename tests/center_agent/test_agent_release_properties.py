"""Property test at the endpoint: whatever the data (ties, small groups, skew) and whatever limits
a coordinator sends, no answer of the table and refinement endpoints holds a count in 1..K-1,
and every released count is the true count of the center's records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
from center_helpers import AUTH, TOKEN, write_toml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from center_agent.core.config import load_settings
from center_agent.main import create_app
from shared.federation import refined_limits
from shared.protocol import BinTableRelease, RefinementRelease, RefinementRequest


def counts_in(limits: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.bincount(np.searchsorted(limits[1:-1], values, side="left"),
                       minlength=limits.size - 1)


@st.composite
def cohorts(draw: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    k = draw(st.integers(2, 12))
    sizes = [draw(st.one_of(st.just(0), st.integers(k, 6 * k))) for _ in range(2)]
    if sum(sizes) == 0:
        sizes[0] = k
    grid = draw(st.sampled_from([1.0, 0.5, 0.01]))
    values = [np.array(draw(st.lists(st.integers(-40, 40), min_size=n, max_size=n))) * grid
              for n in sizes]
    cuts = np.array(sorted(set(draw(st.lists(st.integers(-45, 45), min_size=1, max_size=12)))))
    limits = np.r_[-np.inf, cuts * grid + grid / 3, np.inf]
    return k, values[0], values[1], limits


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cohorts())
def test_table_and_refinement_answers_are_k_anonymous(tmp_path_factory: Any, case: Any) -> None:
    k, a, b, limits = case
    tmp: Path = tmp_path_factory.mktemp("prop")
    rows = [f"{float(v)!r},a" for v in a] + [f"{float(v)!r},b" for v in b]
    (tmp / "d.csv").write_text("x,arm\n" + "\n".join(rows) + "\n")
    config = {
        "center_id": "prop", "k": k, "tokens": [TOKEN],
        "ledger_url": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "datasets": {"d": {"source": {"kind": "csv", "path": str(tmp / "d.csv")},
                           "variables": ["x"], "group": {"column": "arm", "levels": ["a", "b"]},
                           "epsilon_total": 1.0}},
    }
    app = create_app(load_settings(write_toml(tmp / "c.toml", config)))
    try:

        async def run() -> None:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as c:
                body = {"variable": "x", "groups": ["a", "b"], "k": k}
                # Infinite limits travel as "Infinity" strings (standard JSON has no inf).
                request = RefinementRequest(variable="x", groups=("a", "b"), k=k,
                                            limits=limits.tolist())
                r = await c.post("/v1/datasets/d/table/refine", content=request.model_dump_json(),
                                 headers={**AUTH, "content-type": "application/json"})
                assert r.status_code in (200, 403, 409), r.text
                if r.status_code == 200:
                    release = RefinementRelease.model_validate_json(r.content)
                    cells = refined_limits(limits, release)
                    for g, v in enumerate((a, b)):
                        totals = np.asarray(release.runs[g].totals)
                        assert np.all((totals == 0) | (totals >= k)), totals
                        per_cell = counts_in(cells, v)
                        np.testing.assert_array_equal(
                            np.bincount(release.runs[g].run_of_cell, weights=per_cell,
                                        minlength=totals.size), totals)
                r = await c.post("/v1/datasets/d/table", headers=AUTH, json=body)
                assert r.status_code in (200, 403, 409), r.text
                if r.status_code == 200:
                    table = BinTableRelease.model_validate_json(r.content)
                    for g, v in enumerate((a, b)):
                        counts = np.asarray(table.counts[g])
                        assert np.all((counts == 0) | (counts >= k)), counts
                        np.testing.assert_array_equal(counts,
                                                      counts_in(np.asarray(table.limits), v))
                else:
                    assert r.json()["error"] in ("differencing_refused", "k_anonymity_refused")

        anyio.run(run)
    finally:
        app.state.services.close()

