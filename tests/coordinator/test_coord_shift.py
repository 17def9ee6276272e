"""The shift analysis and the MWU result's heterogeneity in-process: the spec, the result built
from a federated table (bounds holding the raw data's Hodges-Lehmann estimate and Moses interval
where the counts are whole), Q and I² with the edges where they are not computed, the text
summary, the report, the Methods paragraph and the client. Over real centers:
tests/coordinator/test_coord_e2e.py (ASGI) and tests/coordinator/test_coord_server.py
(processes)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from coordinator.analyses import REGISTRY
from coordinator.main import create_app
from coordinator.models import MWUResult, ShiftResult, StudySpec
from coordinator.protocols.table import FederatedTable
from coordinator.reporting import exports
from coordinator.reporting.methods_text import methods_sentences
from coordinator.results import heterogeneity, mwu_test_result, shift_result
from fedstats_client.results import Shift
from fedstats_client.spec import SpecError, Study
from shared.binning import bin_table
from shared.heterogeneity import index_heterogeneity
from shared.hodges_lehmann import hodges_lehmann, hodges_lehmann_table
from shared.mwu import mann_whitney, released_result, sum_test
from shared.noisy_null import NoiseLaw
from tests.helpers.coordinator import AUTH, Federations, settings_for, sqlite_url

BASE: dict[str, Any] = {"dataset": "cohort", "variable": "crp", "k": 10}


def one_center_table(x: np.ndarray, y: np.ndarray, seed: int = 1, **closing: Any
                     ) -> FederatedTable:
    """A center's own K-anonymous table (whole counts), as the study's table."""
    table = bin_table(x, y, k=10, rng=np.random.default_rng(seed), **closing)
    return FederatedTable(table=table, order=("alpha",),
                          center_totals={"alpha": tuple(table.totals)}, excluded=())


def test_the_spec_takes_a_shift_with_two_groups_only() -> None:
    spec = StudySpec.model_validate({**BASE, "groups": ["ctl", "trt"],
                                     "analyses": [{"kind": "shift"}]})
    assert spec.analyses[0].level == 0.95  # type: ignore[union-attr]
    assert REGISTRY["shift"].needs_table(spec.analyses[0])
    assert REGISTRY["shift"].requests(spec, spec.analyses[0]) == []  # spends nothing
    with pytest.raises(ValidationError, match="a shift analysis needs `groups`"):
        StudySpec.model_validate({**BASE, "analyses": [{"kind": "shift"}]})
    for level in (0.3, 1.0):
        with pytest.raises(ValidationError, match="level"):
            StudySpec.model_validate({**BASE, "groups": ["ctl", "trt"],
                                      "analyses": [{"kind": "shift", "level": level}]})
    with pytest.raises(ValidationError, match="extra"):
        StudySpec.model_validate({**BASE, "groups": ["ctl", "trt"],
                                  "analyses": [{"kind": "shift", "epsilon": 1.0}]})


@pytest.mark.parametrize("n", [10, 60])
def test_a_whole_count_table_bounds_the_raw_shift(n: int) -> None:
    """n = 10 per arm (exact rank) and 60 (normal rank), values rounded to 0.5 (ties): the
    result is ``hodges_lehmann_table`` of the table, and holds the records' estimate and
    interval (computed by brute force over the pairwise differences)."""
    g = np.random.default_rng(n)
    x, y = np.round(2 * g.normal(size=n)) / 2, np.round(2 * g.lognormal(size=n)) / 2
    result = shift_result(one_center_table(x, y), 0.95)
    assert result.whole_counts and result.excluded == []
    bounds = hodges_lehmann_table(one_center_table(x, y).table)
    assert result.interval == bounds.interval and result.rank == bounds.rank
    d = np.sort(np.subtract.outer(y, x).ravel())
    raw = hodges_lehmann(x, y)
    assert raw.estimate == np.median(d)
    assert result.estimate_low <= raw.estimate <= result.estimate_high
    assert result.low_low <= d[raw.rank - 1] <= result.low_high
    assert result.high_low <= d[d.size - raw.rank] <= result.high_high
    assert result.method == ("exact" if n == 10 else "normal")


def test_open_end_bins_give_infinite_bounds_that_survive_json() -> None:
    g = np.random.default_rng(5)
    x, y = g.normal(size=20), g.normal(5.0, size=20)  # ranks reach the open end bins
    result = shift_result(one_center_table(x, y, lower="infinite", upper="infinite"), 0.95)
    assert result.interval[1] == np.inf or result.interval[0] == -np.inf
    text = result.model_dump_json()
    assert "Infinity" in text
    again = ShiftResult.model_validate(json.loads(text))
    assert again == result


def test_heterogeneity_and_where_it_is_not_computed() -> None:
    g = np.random.default_rng(3)
    local = [mann_whitney(g.normal(size=n), g.normal(shift, size=n))
             for n, shift in ((30, 0.1), (40, 0.9), (25, 0.4))]
    found, note = heterogeneity(["a", "b", "c"], local)
    assert note is None and found is not None
    reference = index_heterogeneity(local)
    assert found.statistic == reference.statistic and found.df == 2
    assert found.i_squared_interval == reference.i_squared_interval
    # θ̂ = 1 at one center (one arm entirely above the other): its variance is taken at the
    # pooled θ < 1, so it has a weight; at every center: θ̄ = 1, variance 0, not computed.
    separated = mann_whitney(np.arange(10.0), np.arange(10.0) + 100)
    found, note = heterogeneity(["a", "b"], [local[0], separated])
    assert found is not None and note is None and found.estimates[1] == 1.0
    found, note = heterogeneity(["a", "b"], [separated, separated])
    assert found is None and note is not None and "at a, b one arm lies entirely above" in note
    # The same center released with noise has the noise's variance: computed.
    noisy = released_result(separated.statistic, separated.variance, 10, 10,
                            NoiseLaw.laplace(4.0))
    found, note = heterogeneity(["a", "b"], [local[0], noisy])
    assert found is not None and note is None and found.estimates[1] == 1.0
    assert heterogeneity(["a"], local[:1])[0] is None
    assert "one center" in str(heterogeneity(["a"], local[:1])[1])
    assert heterogeneity([], []) == (None, None)  # the table test alone


def mwu_with_heterogeneity() -> dict[str, Any]:
    g = np.random.default_rng(4)
    local = [mann_whitney(g.normal(size=30), g.normal(s, size=30)) for s in (0.0, 1.0)]
    found, _ = heterogeneity(["alpha", "beta"], local)
    tests = {"sum": mwu_test_result(sum_test(local), ["alpha", "beta"])}
    return MWUResult(alternative="two-sided", tests=tests, table=None, excluded=[],
                     heterogeneity=found).model_dump(mode="json")


def view_of(*analyses: dict[str, Any]) -> dict[str, Any]:
    kinds = [{"kind": a["kind"]} for a in analyses]
    return {"id": "s1", "status": "succeeded",
            "spec": {**BASE, "groups": ["ctl", "trt"], "analyses": kinds},
            "result": {"analyses": list(analyses)}}


def test_summary_report_and_methods_show_them() -> None:
    g = np.random.default_rng(8)
    shift = shift_result(one_center_table(g.normal(size=40), g.normal(1.0, size=40)), 0.9)
    shown = shift.model_dump(mode="json")
    mwu = mwu_with_heterogeneity()
    view = view_of(mwu, shown)
    text = "\n".join(REGISTRY["shift"].summary_lines(shown, view, []))
    assert "90 % Moses interval" in text and "estimate Δ̂" in text
    assert f"[{shift.interval[0]:.4g}, {shift.interval[1]:.4g}]" in text
    # The printed figures come first: the midpoints' estimate and the widened interval.
    assert shift.estimate is not None and shift.binned_interval is not None
    low, high = shift.binned_interval
    assert f"estimate Δ̂ (bin midpoints)     {shift.estimate:.4g}" in text
    assert f"90 % interval (λ = 0.5)         [{low:.4g}, {high:.4g}]" in text
    assert text.index("(bin midpoints)") < text.index("(outer ends)")
    assert shift.interval[0] <= low <= shift.estimate <= high <= shift.interval[1]
    html = "".join(REGISTRY["shift"].report_parts(shown, view))
    assert "<h2>Hodges-Lehmann shift (90 % Moses interval)</h2>" in html
    assert f"[{low:.4g}, {high:.4g}]" in html and "binning allowance" in html
    (row,) = exports.part_rows(view, "shift")
    assert (row["estimate"], row["interval_low"], row["interval_high"], row["allowance"]) == (
        shift.estimate, low, high, 0.5)
    h = mwu["heterogeneity"]
    lines = "\n".join(REGISTRY["mwu"].summary_lines(mwu, view, []))
    assert f"Cochran's Q = {h['statistic']:.4g} on 1 df" in lines
    report = "".join(REGISTRY["mwu"].report_parts(mwu, view))
    assert "Heterogeneity between centers" in report
    said, cited = methods_sentences(view)
    assert any("Hodges & Lehmann's (1963)" in s and "90 % interval" in s
               and "binning allowance of 0.5" in s for s in said)
    assert any("Cochran's (1954) Q" in s for s in said)
    assert {"hodges", "moses", "cochran", "higgins"} <= set(cited)
    # A result with no heterogeneity says why, in both.
    flat = {**mwu, "heterogeneity": None, "heterogeneity_note": "not computed: at b ..."}
    assert "Between centers: not computed" in "\n".join(
        REGISTRY["mwu"].summary_lines(flat, view, []))
    assert "not computed" in "".join(REGISTRY["mwu"].report_parts(flat, view))


def test_the_client_builds_and_reads_a_shift() -> None:
    spec = Study("cohort", "crp", groups=["ctl", "trt"]).table().shift(level=0.9).spec()
    assert spec.analyses[1].kind == "shift" and spec.analyses[1].level == 0.9  # type: ignore
    assert Study("cohort", "crp", groups=["ctl", "trt"]).shift().to_dict()["analyses"] == [
        {"kind": "shift"}]
    with pytest.raises(SpecError, match="shift analysis needs `groups`"):
        Study("cohort", "crp").shift().spec()
    g = np.random.default_rng(9)
    result = shift_result(one_center_table(g.normal(size=30), g.normal(size=30)), 0.95)
    frame = Shift(result).to_frame()
    assert list(frame.index) == ["estimate", "low end", "high end", "interval",
                                 "binned estimate", "binned interval"]
    assert tuple(frame.loc["interval"]) == result.interval
    assert tuple(frame.loc["binned interval"]) == result.binned_interval
    assert Shift(result).estimate == result.estimate and "bins allow" in repr(Shift(result))
    # A result stored before the printed figures existed still reads, and shows its bounds.
    old = ShiftResult.model_validate(result.model_dump(
        mode="json", exclude={"estimate", "binned_interval", "allowance"}))
    assert old.binned_interval is None and old.estimate is None
    assert list(Shift(old).to_frame().index) == ["estimate", "low end", "high end", "interval"]
    shown = old.model_dump(mode="json")
    text = "\n".join(REGISTRY["shift"].summary_lines(shown, view_of(shown), []))
    assert "interval (outer ends)" in text and "λ =" not in text
    (row,) = exports.part_rows(view_of(shown), "shift")
    assert row["interval_low"] is None and row["estimate"] is None


@pytest.mark.anyio
async def test_the_dry_run_and_the_api_take_a_shift(tmp_path: Path,
                                                    federation: Federations) -> None:
    """The dry run plans the table and no ε for a shift; a spec without groups is a 422 naming
    the key; the study runs over in-process centers and its result validates."""
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=federation())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    spec = {**BASE, "groups": ["ctl", "trt"], "analyses": [{"kind": "shift", "level": 0.9}]}
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            plan = await client.post("/v1/studies", params={"dry_run": "true"}, json=spec,
                                     headers=AUTH)
            no_groups = await client.post("/v1/studies", headers=AUTH, json={
                **BASE, "analyses": [{"kind": "shift"}]})
            created = await client.post("/v1/studies", json=spec, headers=AUTH)
            assert created.status_code == 202, created.text
            await app.state.services.runner.wait(created.json()["id"])
            view = (await client.get(created.json()["status_url"], headers=AUTH)).json()
        finally:
            await app.state.services.aclose()
    assert plan.status_code == 200, plan.text
    assert all(c["epsilon"] == 0 for c in plan.json()["centers"])
    assert no_groups.status_code == 422 and "shift analysis needs `groups`" in no_groups.text
    assert view["status"] == "succeeded", view
    shift = ShiftResult.model_validate(view["result"]["analyses"][0])
    (row,) = csv.DictReader(io.StringIO(exports.part_csv(view, "shift")))
    assert float(row["estimate_low"]) == shift.estimate_low and row["level"] == "0.9"
    assert shift.level == 0.9 and shift.n_x > 0 and shift.n_y > 0
    assert shift.estimate_low <= shift.estimate_high
    assert shift.interval[0] <= shift.low_high and shift.high_low <= shift.interval[1]
