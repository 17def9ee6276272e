"""Tables of k arms and the Kruskal-Wallis analysis over in-process centers (real center apps
through ``httpx.ASGITransport``; docs/methods.md §12, docs/privacy.md "Tables of k arms").

Checked: the k-row federated table against its independent fold of the releases and the raw
data (totals, no count in 1..K-1); its rows in any order the study names the arms (the kept
table reused); each center's k-row table a view of the same canonical table as its two-level
ones; and a ``kruskal`` study through the analyst API whose numbers are ``shared.kruskal``'s and
``shared.jonckheere``'s on the tables it shows, and each center's test scipy's on the raw data
coarsened to that center's bins."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from numpy.typing import NDArray
from scipy import stats

from coordinator.local import in_process_federation
from coordinator.protocols.table import federated_bin_table
from coordinator.reporting import exports
from coordinator.reporting.rendering import fmt
from coordinator.reporting.report import render_html, summary
from shared import jonckheere, kinds, kruskal
from shared.protocol import TableRequest
from tests.coordinator.test_coord_catalog import Coordinator, serving
from tests.helpers.coordinator import CountingCenter, Federations, fold_received

pytestmark = pytest.mark.anyio

K = 10
ARMS = ("low", "mid", "high")
# Per center and arm: sizes distinct after rounding to K (the build order is then fixed).
SIZES = {"alpha": (90, 80, 70), "beta": (60, 50, 60), "gamma": (40, 30, 30)}
SPEC: dict[str, Any] = {"dataset": "cohort", "variable": "crp", "groups": list(ARMS), "k": K}

Data = dict[str, dict[str, NDArray[np.float64]]]


def make_data(seed: int = 28) -> Data:
    """Per center and arm, values on a grid of 0.5 (ties) that rise with the arm."""
    rng = np.random.default_rng(seed)
    return {cid: {arm: np.round(rng.normal(50 + 4 * i, 10, n) * 2) / 2
                  for i, (arm, n) in enumerate(zip(ARMS, sizes, strict=True))}
            for cid, sizes in SIZES.items()}


def three_arm_federation(federation: Federations, data: Data) -> dict[str, CountingCenter]:
    declared = {}
    for cid, arms in data.items():
        path = federation.data / f"{cid}-arms.parquet"
        values = np.concatenate([arms[a] for a in ARMS])
        labels = [a for a in ARMS for _ in range(arms[a].size)]
        pq.write_table(pa.table({"crp": pa.array(values, pa.float64()),
                                 "arm": pa.array(labels, pa.string())}), path)
        declared[cid] = {"cohort": {
            "source": {"kind": "parquet", "path": str(path)}, "variables": ["crp"],
            # Declared in another order than the study names them.
            "group": {"column": "arm", "levels": ["mid", "high", "low"]},
            "epsilon_total": 10.0}}
    centers = in_process_federation(declared, k=K)
    for c in centers.values():
        federation.adopt(c)
    return {cid: CountingCenter(port) for cid, port in centers.items()}


def coarse(limits: list[Any], values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Each value's bin (a, b] of ``limits`` (the first bin also holds its lower limit)."""
    lim = np.asarray([float(v) for v in limits])
    return np.clip(np.searchsorted(lim[1:-1], values, side="left"), 0, lim.size - 2)


async def test_a_k_row_federated_table_is_the_fold_of_its_releases(
        federation: Federations) -> None:
    data = make_data()
    centers = three_arm_federation(federation, data)
    fed = await federated_bin_table(list(centers.values()), dataset="cohort", variable="crp",
                                    groups=ARMS, k=K)
    assert fed.order == ("alpha", "beta", "gamma")
    assert fed.table.counts.shape[0] == 3
    # The coordinator's own fold of what the centers sent is the same table.
    folded, order = fold_received(centers.values())
    assert order == fed.order
    np.testing.assert_allclose(folded.counts, fed.table.counts)
    # Each arm's total is the sum of the centers' (whole, K-anonymous) totals of that arm.
    for i, arm in enumerate(ARMS):
        assert fed.table.totals[i] == pytest.approx(sum(d[arm].size for d in data.values()))
        for cid in centers:
            assert fed.center_totals[cid][i] == data[cid][arm].size
    # Each refinement shows its runs in the order asked (declared: mid, high, low).
    for c in list(centers.values())[1:]:
        refinement = c.answers[kinds.REFINE.name][0]
        assert len(refinement.runs) == 3
        for i, arm in enumerate(ARMS):
            assert sum(refinement.runs[i].totals) == data[c.center_id][arm].size


async def test_a_center_table_of_k_arms_is_a_view_of_its_canonical_table(
        federation: Federations) -> None:
    data = make_data()
    port = three_arm_federation(federation, data)["alpha"].port
    three = await port.release(kinds.TABLE, "cohort",
                               TableRequest(variable="crp", groups=ARMS, k=K))
    for a in range(3):
        for b in range(3):
            if a == b:
                continue
            pair = await port.release(kinds.TABLE, "cohort", TableRequest(
                variable="crp", groups=(ARMS[a], ARMS[b]), k=K))
            # The same limits, and the pair's rows are the k-row view's rows of those arms.
            assert pair.limits == three.limits
            assert pair.counts == [three.counts[a], three.counts[b]]
    # Every row is the arm's raw data binned, each count 0 or >= K.
    for i, arm in enumerate(ARMS):
        cells = np.bincount(coarse(three.limits, data["alpha"][arm]),
                            minlength=len(three.limits) - 1)
        assert three.counts[i] == cells.tolist()
        assert all(c == 0 or c >= K for c in three.counts[i])
    # The same level twice, or a level not declared: refused before any data is read.
    for groups in (("low", "low", "mid"), ("low", "mid", "nope")):
        with pytest.raises(Exception, match="level"):
            await port.release(kinds.TABLE, "cohort",
                               TableRequest(variable="crp", groups=groups, k=K))


def _check_kruskal(result: dict[str, Any], data: Data, *, ordered: bool) -> None:
    table = result["table"]
    counts = np.asarray(table["counts"])
    ours = kruskal.table_test(counts)
    tests = result["tests"]
    assert set(tests) == {"table", "sum", "weighted"}
    assert tests["table"]["statistic"] == pytest.approx(ours.statistic, rel=1e-12)
    assert tests["table"]["pvalue"] == pytest.approx(ours.pvalue, rel=1e-9)
    assert tests["table"]["df"] == 2
    assert result["arms"]["mean_ranks"] == pytest.approx(list(ours.mean_ranks), rel=1e-12)
    assert result["arms"]["sizes"] == pytest.approx(
        [sum(d[a].size for d in data.values()) for a in ARMS], rel=1e-12)
    assert [c["center"] for c in result["centers"]] == ["alpha", "beta", "gamma"]
    for c in result["centers"]:
        assert c["sizes"] == [data[c["center"]][a].size for a in ARMS]
        assert c["df"] == 2 and 0 <= c["pvalue"] <= 1

    if ordered:
        trend = result["trend"]
        j = jonckheere.table_test(counts, alternative=result["alternative"])
        assert trend["table"]["statistic"] == pytest.approx(j.statistic, rel=1e-12)
        assert trend["table"]["pvalue"] == pytest.approx(j.pvalue, rel=1e-9)
        assert set(trend) == {"table", "sum"}
    else:
        assert result["trend"] == {} and result["alternative"] is None


async def test_a_kruskal_study_through_the_api(tmp_path: Path, federation: Federations) -> None:
    data = make_data()
    centers = three_arm_federation(federation, data)
    spec = {**SPEC, "analyses": [{"kind": "kruskal", "ordered": True}, {"kind": "kruskal"}]}
    async with serving(tmp_path, centers) as coord:
        # The dry run: nothing refused for three arms; a caveat (not blocking) for two.
        dry = await coord.post(spec, dry_run="true")
        assert dry.status_code == 200, dry.text
        assert dry.json()["refusals"] == [] and dry.json()["would_run"]
        two = await coord.post({**spec, "groups": ["low", "high"]}, dry_run="true")
        notes = [r for r in two.json()["refusals"] if r["reason"] == "analysis_note"]
        assert notes and not any(r["blocking"] for r in notes)
        assert all("Mann-Whitney" in r["detail"] for r in notes)
        view = await coord.run(spec)
        assert view["status"] == "succeeded", view
        first, second = view["result"]["analyses"]
        _check_kruskal(first, data, ordered=True)
        _check_kruskal(second, data, ordered=False)
        # The two analyses read the study's one table: the builder's table, and each refiner's
        # own table then its refinement; nothing else was asked of the centers.
        assert first["table"] == second["table"]
        assert {c: (p.calls["table"], p.calls["refine"]) for c, p in centers.items()} == {
            "alpha": (1, 0), "beta": (1, 1), "gamma": (1, 1)}
        await _check_centers_against_scipy(coord, first, data)
        # Its CSV part (and the workbook's sheet): every test, the centers' and the trend's.
        rows = list(csv.DictReader(io.StringIO(exports.part_csv(view, "kruskal"))))
        assert [r["test"] for r in rows if r["analysis"] == "0"] == [
            *first["tests"], *(f"center:{c['center']}" for c in first["centers"]),
            *(f"trend:{t}" for t in first["trend"])]
        assert float(rows[0]["pvalue"]) == first["tests"][rows[0]["test"]]["pvalue"]
        trend = {r["test"]: r["null"] for r in rows if r["test"].startswith("trend:")
                 and r["analysis"] == "0"}
        assert trend == {f"trend:{t}": first["trend"][t]["null"] for t in first["trend"]}
        # Nothing spent.
        assert all(v == 0 for v in (await coord.spent()).values())
        # The text summary and the HTML report show it.
        text = summary(view)
        assert "Kruskal-Wallis across 3 arms (low, mid, high)" in text
        assert "Jonckheere-Terpstra (increasing" in text
        laws = {"exact": "J's exact permutation law", "normal": "N(0, 1)"}
        for t in first["trend"].values():
            assert f"p = {fmt(t['pvalue'])} ({laws[t['null']]})" in text
        page = render_html(view)
        assert "<h2>Kruskal-Wallis across 3 arms</h2>" in page
        assert "Jonckheere-Terpstra (increasing: low &lt; mid &lt; high)" in page


async def _check_centers_against_scipy(coord: Coordinator, result: dict[str, Any],
                                       data: Data) -> None:
    """Each center's test is scipy's on its raw data coarsened to its own table's limits; the
    stratified tests are ``shared.kruskal``'s and ``shared.jonckheere``'s over those tables."""
    own, tables = [], []
    for c in result["centers"]:
        raw = data[c["center"]]
        assert len(c["limits"]) - 1 == c["bins"] >= 2, c
        cells = [coarse(c["limits"], raw[a]) for a in ARMS]
        ref = stats.kruskal(*cells)
        assert c["statistic"] == pytest.approx(ref.statistic, rel=1e-9)
        assert c["pvalue"] == pytest.approx(ref.pvalue, rel=1e-7)
        counts = np.array([np.bincount(x, minlength=c["bins"]) for x in cells], dtype=float)
        # Every count of the center's own table is 0 or >= K.
        assert not np.any((counts > 0) & (counts < K))
        tables.append(counts)
        own.append(kruskal.table_test(counts))
    assert result["tests"]["sum"]["statistic"] == pytest.approx(
        kruskal.sum_test(own).statistic, rel=1e-9)
    assert result["tests"]["weighted"]["statistic"] == pytest.approx(
        kruskal.weighted_test(own).statistic, rel=1e-9)
    j = jonckheere.sum_test([jonckheere.table_test(t) for t in tables])
    assert result["trend"]["sum"]["statistic"] == pytest.approx(j.statistic, rel=1e-12)
    assert result["trend"]["sum"]["pvalue"] == pytest.approx(j.pvalue, rel=1e-9)
    assert result["trend"]["sum"]["null"] == j.null


async def test_a_kept_k_arm_table_reads_back_in_the_order_asked(
        tmp_path: Path, federation: Federations) -> None:
    data = make_data()
    centers = three_arm_federation(federation, data)
    async with serving(tmp_path, centers) as coord:
        first = await coord.run({**SPEC, "analyses": [{"kind": "kruskal"}]})
        assert first["status"] == "succeeded", first
        asked = sum(c.calls["table"] + c.calls["refine"] for c in centers.values())
        reordered = ["high", "low", "mid"]
        again = await coord.run({**SPEC, "groups": reordered,
                                 "analyses": [{"kind": "kruskal"}]})
        assert again["status"] == "succeeded", again
        t1, t2 = first["result"]["analyses"][0], again["result"]["analyses"][0]
        assert t2["table"]["reused"] is not None
        # The federated table was read, not asked (only each center's own table, stored).
        assert sum(c.calls["refine"] for c in centers.values()) == sum(
            1 for _ in list(centers)[1:])
        assert asked > 0
        rows = {g: r for g, r in zip(ARMS, t1["table"]["counts"], strict=True)}
        assert t2["table"]["counts"] == [rows[g] for g in reordered]
        assert t2["tests"]["table"]["statistic"] == pytest.approx(
            t1["tests"]["table"]["statistic"], rel=1e-12)


async def test_a_kruskal_spec_is_checked_at_submission(
        tmp_path: Path, federation: Federations) -> None:
    centers = three_arm_federation(federation, make_data())
    async with serving(tmp_path, centers) as coord:
        cases: Mapping[str, dict[str, Any]] = {
            "groups": {**SPEC, "groups": None, "analyses": [{"kind": "kruskal"}]},
            "max": {**SPEC, "analyses": [{"kind": "kruskal"}, {"kind": "mwu"}]},
            "alternative": {**SPEC, "analyses": [{"kind": "kruskal", "alternative": "up"}]},
        }
        for name, spec in cases.items():
            r = await coord.post(spec)
            assert r.status_code == 422, (name, r.text)
        r = await coord.post({**SPEC, "groups": ["low", "mid", "nope"],
                              "analyses": [{"kind": "kruskal"}]})
        assert r.status_code == 422 and "nope" in r.text, r.text
