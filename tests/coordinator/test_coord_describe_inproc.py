"""The describe analysis over in-process centers (fast; the HTTP end to end with real processes
is ``test_coord_describe.py``): its rows against the raw data and the received releases, pooling
exact on the releases, ε accounted as the quota and dry-run account says, implausible releases
named, the spec's own refusals, the Table 1 of the report and the client's frame."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from coordinator.core.errors import AnalysisFailed
from coordinator.models import DescribeResult, StudySpec
from coordinator.quotas import analysis_spends
from coordinator.reporting.report import fmt, render_html, summary, table_one
from coordinator.study import run_study
from fedstats_client.results import Describe
from shared.describe import pool_descriptions
from tests.helpers.coordinator import SIZES, CountingCenter, Federations, K, Tampered, make_data

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)


def spec(*analyses: dict[str, Any], groups: bool = True) -> StudySpec:
    return StudySpec.model_validate({
        "dataset": "cohort", "variable": "crp", "k": K, "analyses": list(analyses),
        **({"groups": ["ctl", "trt"]} if groups else {})})


DP = {"kind": "describe", "epsilon": 1.0, "bounds": {"crp": list(BOUNDS)}, "bins": 5}


async def test_dp_rows_are_the_releases_pooled(federation: Federations) -> None:
    ports = [CountingCenter(p) for p in federation.ports()]
    result = await run_study(spec(DP), ports, min_centers=2)
    described = result.analyses[0]
    assert isinstance(described, DescribeResult), described
    assert described.mode == "dp" and described.epsilon == 1.0
    # One release per arm per center, each paid ε: 2ε per center, as the account says.
    assert all(p.calls["dp_describe"] == 2 for p in ports)
    assert described.spent == {c: pytest.approx(2.0) for c in SIZES}
    assert [s.epsilon for s in analysis_spends(spec(DP))] == [2.0]
    rows = {(r.center, r.arm): r for r in described.rows}
    assert set(rows) == {(c, a) for c in [*SIZES, "pooled"] for a in ("ctl", "trt", "all")}
    releases = {p.center_id: [r.to_result() for r in p.answers["dp_describe"]] for p in ports}
    for cid, own in releases.items():
        # A center's own arm rows are its releases' summaries (answered in either order).
        assert {(rows[(cid, a)].n, rows[(cid, a)].mean, rows[(cid, a)].sd,
                 rows[(cid, a)].median, rows[(cid, a)].mean_interval)
                for a in ("ctl", "trt")} == {
            (d.summary().n, d.summary().mean, d.summary().sd, d.summary().median,
             d.summary().mean_interval) for d in own}
        assert all(rows[(cid, a)].minimum is None and rows[(cid, a)].clip is not None
                   for a in ("ctl", "trt"))
        overall = pool_descriptions(own).summary()
        assert rows[(cid, "all")].mean == pytest.approx(overall.mean)
        assert rows[(cid, "all")].epsilon == 2.0
    every = pool_descriptions([d for own in releases.values() for d in own]).summary()
    pooled = rows[("pooled", "all")]
    # One N per column (coordinator.protocols.table_one): the pooled n is the sum of the
    # centers' shown n (each its release's count rounded: one description per center and
    # arm), within the 6 roundings of the pooled description's own count.
    assert pooled.n == sum(rows[(c, a)].n for c in SIZES for a in ("ctl", "trt"))
    assert abs(pooled.n - every.n) <= 3 and pooled.mean == pytest.approx(every.mean)
    assert pooled.minimum is None and pooled.maximum is None
    assert pooled.counts == list(every.counts)
    assert pooled.median_interval == every.median_interval
    assert pooled.n_interval is not None and pooled.uncertainty
    names = [p.name for p in described.noise["crp"]]
    assert names == ["count", "quantiles", "sum", "sum of squares", "histogram"]


async def test_table_rows_against_the_raw_data(federation: Federations) -> None:
    data = make_data()
    ports = [CountingCenter(p) for p in federation.ports(data)]
    result = await run_study(spec({"kind": "table"}, {"kind": "describe"}), ports,
                             min_centers=2)
    described = result.analyses[1]
    assert isinstance(described, DescribeResult), described
    assert described.mode == "table" and described.spent == {c: 0.0 for c in SIZES}
    # The describe shares the study's table: one table build, then one own table per center.
    assert sum(p.calls["table"] for p in ports) == 1 + len(ports)
    for row in described.rows:
        if row.center == "pooled":
            x, y = (np.concatenate([data[c][i] for c in data]) for i in (0, 1))
        else:
            x, y = data[row.center]
        values = {"ctl": x, "trt": y, "all": np.concatenate([x, y])}[row.arm]
        width = max(np.diff(row.edges))
        assert row.n == values.size and row.epsilon == 0.0 and row.missing is None
        if row.mean is not None:  # shown only where the bins pin it (TABLE_ACCURACY)
            assert abs(row.mean - values.mean()) <= width / 2
        if row.median is not None:
            assert abs(row.median - np.median(values)) <= width
        if row.center == "pooled":  # the federated table's bins are fine: every number shown
            assert None not in (row.mean, row.sd, row.q1, row.median, row.q3), row.notes
        assert row.minimum is None and row.maximum is None
        # The bins bound the sample mean and each quartile exactly.
        lo, hi = row.mean_interval  # type: ignore[misc]
        assert lo <= values.mean() <= hi
        for q, iv in ((0.25, row.q1_interval), (0.5, row.median_interval),
                      (0.75, row.q3_interval)):
            assert iv is not None and iv[0] <= np.quantile(values, q) <= iv[1]


@pytest.mark.parametrize("variable", ["los_days", "age"])
async def test_the_demo_hospitals_table_one_prints_only_what_the_bins_pin(
        federation: Federations, variable: str) -> None:
    """The demo's three hospitals (``fedstats_cli.synth``), described per center from tables:
    a center's own table is coarsened against the federated one, often to a few bins. Every
    number the Table 1 prints is within half the data's SD of the data's own (mean, SD,
    quartiles of rank ⌈qN⌉); a number its bins cannot pin prints "not estimable" (never a
    midpoint with "(0)"), its exact bounds below it; the pooled columns print their means and
    quartiles (bins of a thousand records pin them many times over)."""
    from coordinator.reporting.rendering import NOT_ESTIMABLE
    from fedstats_cli import synth

    data = {}
    for h in synth.HOSPITALS:
        columns = synth.generate(h, np.random.default_rng(
            synth.hospital_seed(synth.DEFAULT_SEED, h.center_id)))
        values = columns[variable].astype(float)
        data[h.center_id] = tuple(values[columns["arm"] == level] for level in synth.LEVELS)
    result = await run_study(spec({"kind": "table"}, {"kind": "describe"}),
                             federation.ports(data), min_centers=2)
    described = result.analyses[1]
    assert isinstance(described, DescribeResult), described
    hidden = 0
    for row in described.rows:
        parts = [data[c] for c in data] if row.center == "pooled" else [data[row.center]]
        values = np.concatenate([p[i] for p in parts
                                 for i in {"ctl": [0], "trt": [1], "all": [0, 1]}[row.arm]])
        sd = values.std(ddof=1)
        truth = {"mean": values.mean(), "sd": sd, **{
            name: np.quantile(values, q, method="inverted_cdf")
            for name, q in (("q1", 0.25), ("median", 0.5), ("q3", 0.75))}}
        for name, value in truth.items():
            shown = getattr(row, name)
            if shown is None:
                hidden += 1
                assert getattr(row, f"{name}_interval") is not None and row.notes
            else:
                assert abs(shown - value) <= sd / 2, (row.center, row.arm, name, shown, value)
        if row.center == "pooled":  # the SD of a skewed variable may stay unpinned: tails
            assert None not in (row.mean, row.q1, row.median, row.q3), row.notes
    assert hidden  # the case: some center's own bins pin nothing
    _, lines = table_one(result.model_dump(mode="json")["analyses"][1], ["ctl", "trt"],
                         per_center=True)
    cells = [cell for line in lines for cell in line[1:]]
    assert not [c for c in cells if c.endswith("(0)")]
    assert any(NOT_ESTIMABLE in c for c in cells)


async def test_an_implausible_description_is_named(federation: Federations) -> None:
    ports = [Tampered(p, dp_describe={"epsilon": 0.1}) if p.center_id == "beta" else p
             for p in federation.ports()]
    result = await run_study(spec(DP), ports, min_centers=2)
    failed = result.analyses[0]
    assert failed.status == "failed"
    assert failed.error.model_dump()["center"] == "beta"  # type: ignore[union-attr]
    assert failed.error.model_dump()["kind"] == "implausible"  # type: ignore[union-attr]


@pytest.mark.parametrize(("tamper", "match"), [
    ({"clip": (10.0, 90.0)}, "DP range is not the one"),
    ({"center": 10.0}, "centered on its range's midpoint"),
    ({"subdivisions": None}, "no subdivisions"),
])
async def test_a_description_whose_range_does_not_follow_is_named(
        federation: Federations, tamper: dict[str, Any], match: str) -> None:
    """The sums' range must be the one the released quartiles give (post-processing the
    coordinator can redo), the sums centred on it, and the histogram subdivided."""
    ports = [Tampered(p, dp_describe=tamper) if p.center_id == "beta" else p
             for p in federation.ports()]
    failed = (await run_study(spec(DP), ports, min_centers=2)).analyses[0]
    assert failed.status == "failed"
    error = failed.error.model_dump()  # type: ignore[union-attr]
    assert error["center"] == "beta" and error["kind"] == "implausible"
    assert match in error["detail"], error


async def test_allow_partial_leaves_a_failing_center_out_of_every_row(
        federation: Federations) -> None:
    ports = [Tampered(p, dp_describe={"bounds": (0.0, 50.0)}) if p.center_id == "gamma" else p
             for p in federation.ports()]
    partial = spec(DP).model_copy(update={"allow_partial": True})
    described = (await run_study(partial, ports, min_centers=2)).analyses[0]
    assert isinstance(described, DescribeResult), described
    assert {r.center for r in described.rows} == {"alpha", "beta", "pooled"}
    assert [e.center for e in described.excluded] == ["gamma"]
    assert "gamma" not in described.spent


def test_spec_refusals() -> None:
    with pytest.raises(ValidationError, match="needs `epsilon`"):
        spec({"kind": "describe", "mode": "dp"})
    with pytest.raises(ValidationError, match="spends no ε"):
        spec({"kind": "describe", "mode": "table", "epsilon": 1.0})
    with pytest.raises(ValidationError, match="does not describe"):
        spec({"kind": "describe", "epsilon": 1.0, "bounds": {"age": [0, 1]}})
    with pytest.raises(ValidationError, match="not described"):
        spec({"kind": "describe", "variables": ["crp"], "epsilon": 1.0,
              "bounds": {"age": [0, 1]}})
    with pytest.raises(ValidationError):
        spec({"kind": "describe", "variables": ["crp", "crp"]})
    with pytest.raises(ValidationError, match="per-center"):
        spec({"kind": "describe", "per_center": False, "pooled": False})
    # ε per variable and arm: 3 variables over two arms, and without groups one arm.
    three = {**DP, "variables": ["crp", "age", "los"], "epsilon": 0.5}
    assert [s.epsilon for s in analysis_spends(spec(three))] == [3.0]
    assert [s.epsilon for s in analysis_spends(spec(three, groups=False))] == [1.5]
    assert [s.epsilon for s in analysis_spends(spec({"kind": "describe"}))] == [0.0]


async def test_pooling_other_declared_bounds_fails_clearly() -> None:
    from coordinator.protocols.describe import _pool
    from shared.describe import dp_describe

    rng = np.random.default_rng(0)
    a = dp_describe([1.0, 2.0], epsilon=1, bounds=(0, 10), neighbouring="swap", rng=rng)
    b = dp_describe([1.0, 2.0], epsilon=1, bounds=(0, 20), neighbouring="swap", rng=rng)
    with pytest.raises(AnalysisFailed, match="give `bounds`"):
        _pool("crp", [a, b])


async def test_report_and_frame(federation: Federations) -> None:
    result = await run_study(spec(DP, {"kind": "describe"}), federation.ports(), min_centers=2)
    view = {"id": "s", "status": "succeeded", "created_at": "now", "provenance": [],
            "spec": {"dataset": "cohort", "variable": "crp", "k": K, "groups": ["ctl", "trt"]},
            "result": result.model_dump(mode="json")}
    analysis = view["result"]["analyses"][1]
    header, rows = table_one(analysis, ["ctl", "trt"])
    assert header == ["variable", "ctl", "trt", "Overall"]
    pooled = {r["arm"]: r for r in analysis["rows"] if r["center"] == "pooled"}
    assert rows[0][0] == "crp"
    lines = {r[0].strip(): r[1:] for r in rows[1:]}
    every = pooled["all"]
    assert lines["mean (SD)"][2] == f"{fmt(every['mean'], 3)} ({fmt(every['sd'], 3)})"
    assert lines["median [Q1, Q3]"][2] == (f"{fmt(every['median'], 3)} [{fmt(every['q1'], 3)}, "
                                          f"{fmt(every['q3'], 3)}]")
    assert lines["missing, n (%)"] == ["—", "—", "—"]  # missing: never released
    # Table mode: n exact (no interval), the mean's, SD's and quartiles' exact bounds.
    assert lines["n"] == [str(pooled[a]["n"]) for a in ("ctl", "trt", "all")]
    assert lines["mean: exact bounds"][2] == (f"[{fmt(every['mean_interval'][0], 3)}, "
                                              f"{fmt(every['mean_interval'][1], 3)}]")
    assert lines["SD: exact bounds"][2] == (f"[{fmt(every['sd_interval'][0], 3)}, "
                                            f"{fmt(every['sd_interval'][1], 3)}]")
    assert every["sd_interval"][0] <= every["sd"] <= every["sd_interval"][1]
    assert all(lines[f"{q}: exact bounds"][2].startswith("[") for q in ("median", "Q1", "Q3"))
    # DP mode: n is a DP count, shown with its interval (whole numbers around it).
    dp = view["result"]["analyses"][0]
    dp_pooled = {r["arm"]: r for r in dp["rows"] if r["center"] == "pooled"}["all"]
    dp_lines = {r[0].strip(): r[1:] for r in table_one(dp, ["ctl", "trt"])[1][1:]}
    lo, hi = dp_pooled["n_interval"]
    assert lo < dp_pooled["n"] < hi
    assert dp_lines["n"][2] == f"{dp_pooled['n']} [{math.floor(lo)}, {math.ceil(hi)}]"
    assert all(dp_lines[f"{q}: 95 % interval"][2].startswith("[")
               for q in ("mean", "SD", "median", "Q1", "Q3"))
    text = summary(view)
    assert "Table 1 (dp):" in text and "Table 1 (table):" in text
    assert "mean (SD)" in text and "no ε spent" in text
    assert "basic bootstrap" in text and "exact bounds" in text
    page = render_html(view)
    assert page.count("Table 1: descriptive statistics") == 2
    assert "min (DP)" not in page and "sums clipped to" in page
    assert "ε = 1 per variable and arm" in page
    frame = Describe([a for a in result.analyses if isinstance(a, DescribeResult)]).to_frame()
    assert len(frame) == sum(len(a.rows) for a in result.analyses  # type: ignore[union-attr]
                             if isinstance(a, DescribeResult))
    assert set(frame["mode"]) == {"dp", "table"}
    assert list(frame.columns[:5]) == ["variable", "center", "arm", "mode", "unit"]
