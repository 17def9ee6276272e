"""Categorical variables and missing values on the coordinator, over in-process centers (fast;
the HTTP end to end with real processes is ``test_coord_categorical_e2e.py``): the categorical
analysis's counts against the raw data (cells merged where a center merged them), its tests
against scipy and an independent CMH computation, the ε accounted as the quota and the dry run
account it, Table 1's categorical n (%) rows and missing n per variable and arm, and the
statistics of the noisy counts (a seeded simulation of the noise's first-order correction and
of the DP share interval's coverage)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from scipy import stats

from coordinator.local import in_process_federation
from coordinator.models import CategoricalResult, DescribeResult, StudySpec
from coordinator.protocols.categorical import FederatedCounts, association_tests
from coordinator.quotas import analysis_spends
from coordinator.reporting import exports
from coordinator.reporting.report import render_html, summary
from coordinator.study import run_study
from shared.categorical import (
    cmh_noise_inflation,
    noisy_share_interval,
    pearson_chi2,
    pearson_noise_inflation,
    wilson_interval,
)
from shared.category_counts import common_cells, regroup
from tests.helpers.coordinator import CountingCenter, K

pytestmark = pytest.mark.anyio

SMOKING = ["never", "former", "current"]
STAGE = ["I", "II", "III"]
# Per center and arm: smoking counts (never, former, current, missing label), stage counts
# (I, II, III, missing label), and the records missing crp (0 or >= K: nobody leaves a level).
LAYOUT: dict[str, dict[str, dict[str, Any]]] = {
    "alpha": {"ctl": {"smoking": [40, 30, 20, 10], "stage": [50, 30, 20, 0], "crp_missing": 12},
              "trt": {"smoking": [30, 30, 40, 0], "stage": [40, 40, 20, 0], "crp_missing": 0}},
    "beta": {"ctl": {"smoking": [35, 25, 20, 0], "stage": [40, 20, 20, 0], "crp_missing": 10},
             "trt": {"smoking": [20, 30, 30, 10], "stage": [40, 20, 30, 0], "crp_missing": 20}},
    # gamma: stage II holds 4 records in ctl, so gamma merges II with III in every level.
    "gamma": {"ctl": {"smoking": [25, 15, 20, 0], "stage": [36, 4, 20, 0], "crp_missing": 0},
              "trt": {"smoking": [15, 25, 20, 0], "stage": [30, 15, 15, 0], "crp_missing": 0}},
}


def labels(counts: list[int], categories: list[str], rng: np.random.Generator
           ) -> list[str | None]:
    out: list[str | None] = []
    for c, n in zip([*categories, None], counts, strict=True):
        out += [c] * n
    rng.shuffle(out)  # type: ignore[arg-type]
    return out


def write_center(path: Path, layout: dict[str, dict[str, Any]], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    crp: list[float | None] = []
    smoking: list[str | None] = []
    stage: list[str | None] = []
    arm: list[str] = []
    for level, spec in layout.items():
        n = sum(spec["smoking"])
        assert n == sum(spec["stage"])
        values: list[float | None] = [float(round(v, 4)) for v in rng.normal(50, 10, n)]
        for i in range(spec["crp_missing"]):
            values[i] = None
        crp += values
        smoking += labels(spec["smoking"], SMOKING, rng)
        stage += labels(spec["stage"], STAGE, rng)
        arm += [level] * n
    pq.write_table(pa.table({"crp": pa.array(crp, pa.float64()), "smoking": smoking,
                             "stage": stage, "arm": arm}), path)
    return {"source": {"kind": "parquet", "path": str(path)}, "variables": ["crp"],
            "categorical": {"smoking": SMOKING, "stage": STAGE}, "missing": "per_variable",
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "epsilon_total": 1e6, "epsilon_per_request": 1e6}


@pytest.fixture
async def ports(tmp_path: Path) -> Any:
    centers = in_process_federation(
        {cid: {"cohort": write_center(tmp_path / f"{cid}.parquet", layout, i)}
         for i, (cid, layout) in enumerate(LAYOUT.items())}, k=K)
    try:
        yield [CountingCenter(c) for c in centers.values()]
    finally:
        for c in centers.values():
            await c.aclose()


def spec(*analyses: dict[str, Any]) -> StudySpec:
    return StudySpec.model_validate({"dataset": "cohort", "variable": "crp", "k": K,
                                     "groups": ["ctl", "trt"], "analyses": list(analyses)})


def truth(variable: str) -> np.ndarray:
    """centers × arms × (categories, missing) from the layout."""
    return np.array([[LAYOUT[c][a][variable] for a in ("ctl", "trt")] for c in LAYOUT],
                    dtype=float)


# -- the statistics, against independent references -----------------------------------------


def cmh_by_hand(tables: np.ndarray) -> float:
    """The generalized CMH Q from the hypergeometric covariances written entry by entry
    (Landis, Heyman & Koch 1978, eq. 2.4): Cov(n_ij, n_i'j') = n_i+(δ_ii' n − n_i'+)
    n_+j(δ_jj' n − n_+j')/(n²(n − 1)), over i < r, j < c."""
    r, c = tables.shape[1:]
    cells = [(i, j) for i in range(r - 1) for j in range(c - 1)]
    dev = np.zeros(len(cells))
    cov = np.zeros((len(cells), len(cells)))
    for t in tables:
        n = t.sum()
        rows, cols = t.sum(axis=1), t.sum(axis=0)
        for a, (i, j) in enumerate(cells):
            dev[a] += t[i, j] - rows[i] * cols[j] / n
            for b, (i2, j2) in enumerate(cells):
                cov[a, b] += (rows[i] * ((i == i2) * n - rows[i2]) * cols[j]
                              * ((j == j2) * n - cols[j2])) / (n * n * (n - 1))
    return float(dev @ np.linalg.inv(cov) @ dev)


def mh_by_hand(tables: np.ndarray) -> float:
    """M² with continuity correction, from its formula (Mantel & Haenszel 1959)."""
    a = tables[:, 0, 0]
    n = tables.sum(axis=(1, 2))
    r1, c1 = tables[:, 0].sum(axis=1), tables[:, :, 0].sum(axis=1)
    mean = r1 * c1 / n
    var = r1 * (n - r1) * c1 * (n - c1) / (n * n * (n - 1))
    return float((abs(a.sum() - mean.sum()) - 0.5) ** 2 / var.sum())


def federated(counts: np.ndarray, categories: list[str], cells: Any = None,
              variances: np.ndarray | None = None) -> FederatedCounts:
    cells = cells or tuple((j,) for j in range(len(categories) + 1))
    names = [f"c{i}" for i in range(counts.shape[0])]
    return FederatedCounts(
        "v", "table" if variances is None else "dp", tuple(categories), ("ctl", "trt"),
        tuple(cells), dict(zip(names, counts.astype(float), strict=True)),
        None if variances is None else dict(zip(names, variances, strict=True)),
        dict.fromkeys(names, 0.0), ())


def test_tests_on_an_r_by_c_table_match_scipy_and_the_formula() -> None:
    rng = np.random.default_rng(5)
    counts = rng.integers(5, 60, size=(3, 2, 4)).astype(float)
    counts[:, :, -1] = rng.integers(0, 20, size=(3, 2))  # the missing cell: not a category
    tests, notes = association_tests(federated(counts, ["a", "b", "c"]))
    by = {t.name: t for t in tests}
    assert set(by) == {"chi2", "cmh"} and notes == []
    pooled = counts.sum(axis=0)[:, :3]
    ref = stats.chi2_contingency(pooled, correction=False)
    assert by["chi2"].statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert by["chi2"].pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert by["chi2"].df == ref.dof == 2
    q = cmh_by_hand(counts[:, :, :3])
    assert by["cmh"].statistic == pytest.approx(q, rel=1e-10)
    assert by["cmh"].pvalue == pytest.approx(stats.chi2.sf(q, 2), rel=1e-9)


def test_a_small_2x2_table_adds_fisher_and_the_mh_odds_ratio() -> None:
    counts = np.array([[[1, 5, 0], [4, 2, 0]], [[1, 3, 0], [3, 2, 0]]], dtype=float)
    tests, _ = association_tests(federated(counts, ["yes", "no"]))
    by = {t.name: t for t in tests}
    pooled = counts.sum(axis=0)[:, :2]
    assert pearson_chi2(pooled).expected.min() < 5
    fisher = stats.fisher_exact(pooled.astype(int))
    assert by["fisher"].pvalue == pytest.approx(fisher.pvalue, rel=1e-12)
    assert by["fisher"].odds_ratio == pytest.approx(fisher.statistic)
    assert by["cmh"].statistic == pytest.approx(mh_by_hand(counts[:, :, :2]), rel=1e-12)
    a, b, c, d = (counts[:, i, j] for i, j in ((0, 0), (0, 1), (1, 0), (1, 1)))
    n = counts.sum(axis=(1, 2))
    assert by["cmh"].odds_ratio == pytest.approx(float((a * d / n).sum() / (b * c / n).sum()))
    assert by["cmh"].low < by["cmh"].odds_ratio < by["cmh"].high  # type: ignore[operator]


def test_no_groups_or_one_category_gives_no_test_and_says_why() -> None:
    fed = federated(np.array([[[10, 0, 0], [20, 0, 0]]], dtype=float), ["a", "b"])
    tests, notes = association_tests(fed)
    assert tests == [] and "fewer than two categories" in notes[0]


def test_common_cells_are_the_finest_every_center_adds_up_in() -> None:
    a = ((0,), (1, 2), (3,))
    b = ((0, 1), (2,), (3,))
    assert common_cells([a, b], 4) == ((0, 1, 2), (3,))
    assert common_cells([a], 4) == a
    assert regroup([[1, 2, 3]], a, ((0, 1, 2), (3,))).tolist() == [[3, 3]]
    with pytest.raises(ValueError, match="straddles"):
        regroup([[1, 2]], ((0, 1), (2, 3)), ((0,), (1, 2, 3)))


@pytest.mark.parametrize("seed", range(30))
def test_pooling_merged_releases_keeps_every_count_zero_or_k(seed: int) -> None:
    """Random centers' tables merged by the centers' rule (``merge_adjacent``), pooled in their
    common cells: each center's regrouped counts are sums of its released counts (0 or >= K),
    its totals are kept, and no common cell splits a released one."""
    from shared.category_counts import merge_adjacent

    rng = np.random.default_rng(seed)
    k, n_cells = int(rng.integers(2, 12)), int(rng.integers(2, 7))
    released = [merge_adjacent(rng.choice([0, 1, k - 1, k, 3 * k], size=(2, n_cells)), k)
                for _ in range(int(rng.integers(1, 5)))]
    cells = common_cells([r.cells for r in released], n_cells)
    for r in released:
        pooled = regroup(r.counts, r.cells, cells)
        assert np.array_equal(pooled.sum(axis=1), r.counts.sum(axis=1))
        if len(r.cells) > 1:
            assert np.all((pooled == 0) | (pooled >= k))
        assert all(any(set(own) <= set(c) for c in cells) for own in r.cells)


def test_without_noise_the_dp_share_interval_is_wilson() -> None:
    counts = np.array([7.0, 16.0, 0.0])
    for j in range(3):
        assert noisy_share_interval(counts, np.zeros(3), j) == pytest.approx(
            wilson_interval(counts[j], counts.sum()), abs=1e-12)
    # Noise widens it.
    lo, hi = noisy_share_interval(counts, np.full(3, 8.0), 0)
    wlo, whi = wilson_interval(7, 23)
    assert lo < wlo and hi > whi


def test_the_noise_correction_keeps_the_null_law_and_the_share_interval_covers() -> None:
    """Seeded (deterministic): under independence, noisy tables (two-sided geometric noise of
    ε = 0.3 per cell, variance ≈ 21.7, on 3 centers of about 60 records per arm) give a raw
    Pearson X² far too large, the corrected one about χ²_2; the DP share interval covers the
    arm's population share in about 95 % of tables."""
    rng = np.random.default_rng(20261202)
    alpha = math.exp(-0.3)
    var = 2 * alpha / (1 - alpha) ** 2
    probs = np.array([0.5, 0.3, 0.2])
    raw, corrected, cmh, covered, runs = [], [], [], 0, 2000
    for _ in range(runs):
        true = np.stack([[rng.multinomial(60, probs) for _ in range(2)] for _ in range(3)])
        noise = (rng.geometric(1 - alpha, true.shape) - rng.geometric(1 - alpha, true.shape))
        released = (true + noise).astype(float)
        noisy = np.maximum(released, 0)
        pooled = noisy.sum(axis=0)
        x2 = pearson_chi2(pooled).statistic
        raw.append(x2)
        corrected.append(x2 / pearson_noise_inflation(pooled, np.full((2, 3), 3 * var)))
        from shared.categorical import generalized_cmh
        cmh.append(generalized_cmh(noisy).statistic
                   / cmh_noise_inflation(noisy, np.full(noisy.shape, var)))
        # The share interval reads the unclamped noisy counts (clamping biases a share up).
        lo, hi = noisy_share_interval(released.sum(axis=0)[0], np.full(3, 3 * var), 0)
        covered += lo <= probs[0] <= hi
    raw_rate = np.mean(np.array(raw) > stats.chi2.ppf(0.95, 2))
    rate = np.mean(np.array(corrected) > stats.chi2.ppf(0.95, 2))
    cmh_rate = np.mean(np.array(cmh) > stats.chi2.ppf(0.95, 2))
    assert raw_rate > 0.10  # the noise alone makes X² reject too often
    assert 0.03 <= rate <= 0.07 and 0.03 <= cmh_rate <= 0.07
    assert np.mean(corrected) == pytest.approx(2.0, rel=0.1)
    assert 0.93 <= covered / runs <= 0.97  # MC SE ≈ 0.005 at 2,000 tables


# -- the analysis over in-process centers ----------------------------------------------------


async def test_table_counts_are_the_raw_counts_and_the_tests_scipy_s(ports: Any) -> None:
    asked = spec({"kind": "categorical", "variable": "smoking"})
    result = await run_study(asked, ports, min_centers=2)
    found = result.analyses[0]
    assert isinstance(found, CategoricalResult), found
    assert found.mode == "table" and found.spent == dict.fromkeys(LAYOUT, 0.0)
    assert all(p.calls["categorical"] == 1 for p in ports)
    true = truth("smoking")
    arms = {(a.center, a.arm): a for a in found.arms}
    for i, c in enumerate(LAYOUT):
        for g, arm in enumerate(("ctl", "trt")):
            row = arms[(c, arm)]
            assert [x.count for x in row.cells] == true[i, g, :3].tolist()
            assert row.missing == true[i, g, 3] and row.n == true[i, g, :3].sum()
    pooled = true.sum(axis=0)
    for g, arm in enumerate(("ctl", "trt")):
        row = arms[("pooled", arm)]
        assert [x.count for x in row.cells] == pooled[g, :3].tolist()
        for j, cell in enumerate(row.cells):
            low, high = wilson_interval(pooled[g, j], pooled[g, :3].sum())
            assert cell.percent == pytest.approx(100 * pooled[g, j] / pooled[g, :3].sum())
            assert (cell.low, cell.high) == pytest.approx((100 * low, 100 * high))
    assert arms[("pooled", "all")].missing == pooled[:, 3].sum()
    by = {t.name: t for t in found.tests}
    ref = stats.chi2_contingency(pooled[:, :3], correction=False)
    assert by["chi2"].statistic == pytest.approx(ref.statistic)
    assert by["cmh"].statistic == pytest.approx(cmh_by_hand(true[:, :, :3]))
    # The client's tidy frames: one row per center, arm and category; the tests.
    from fedstats_client.results import Results

    frame = Results(result, ("ctl", "trt")).categorical.to_frame()
    assert len(frame) == 4 * 3 * 3  # (3 centers + pooled) × 3 arms × 3 categories
    never = frame[(frame.center == "pooled") & (frame.arm == "ctl")
                  & (frame.category == "never")].iloc[0]
    assert never["count"] == pooled[0, 0] and never["missing"] == pooled[0, 3]
    assert set(Results(result).categorical.tests().test) == {"chi2", "cmh"}
    # The CSV parts hold the same cells and tests.
    view = {"spec": asked.model_dump(mode="json"), "result": result.model_dump(mode="json")}
    cells = list(csv.DictReader(io.StringIO(exports.part_csv(view, "categorical"))))
    assert len(cells) == len(frame)
    assert sum(float(r["count"]) for r in cells if r["center"] == "pooled"
               and r["arm"] in ("ctl", "trt")) == pooled[:, :3].sum()
    tests_csv = list(csv.DictReader(io.StringIO(exports.part_csv(view, "categorical_tests"))))
    assert {r["test"]: float(r["statistic"]) for r in tests_csv} == pytest.approx(
        {t.name: t.statistic for t in found.tests})
    # Every released count (a center's arms, their sum, the pooled sums) is 0 or >= K.
    for row in found.arms:
        for value in [*(x.count for x in row.cells), row.missing or 0, row.n]:
            assert value == 0 or value >= K


async def test_cells_a_center_merged_are_merged_in_the_pooled_table(ports: Any) -> None:
    result = await run_study(spec({"kind": "categorical", "variable": "stage",
                                   "per_center": False}), ports, min_centers=2)
    found = result.analyses[0]
    assert isinstance(found, CategoricalResult), found
    pooled = {a.arm: a for a in found.arms}
    assert set(pooled) == {"ctl", "trt", "all"} and {a.center for a in found.arms} == {"pooled"}
    assert [c.label for c in pooled["ctl"].cells] == ["I", "II or III"]
    true = truth("stage").sum(axis=0)
    assert [c.count for c in pooled["ctl"].cells] == [true[0, 0], true[0, 1] + true[0, 2]]
    assert pooled["ctl"].missing == 0
    assert any("II or III" in n for n in found.notes)
    # A 2×2 table after the merge: the MH test and its odds ratio.
    assert {t.name for t in found.tests} >= {"chi2", "cmh"}
    assert next(t for t in found.tests if t.name == "cmh").odds_ratio is not None


async def test_dp_counts_are_paid_per_arm_and_lie_near_the_truth(ports: Any) -> None:
    """ε = 2 per arm: a two-sided geometric draw beyond ± 9 has probability 2α¹⁰/(1 + α) =
    1.8e-9 (α = e⁻²); over 24 center counts, and ± 27 for the 8 pooled sums of three, the
    assertions fail with probability < 1e-7."""
    asked = spec({"kind": "categorical", "variable": "smoking", "epsilon": 2.0})
    assert [s.epsilon for s in analysis_spends(asked)] == [4.0]
    result = await run_study(asked, ports, min_centers=2)
    found = result.analyses[0]
    assert isinstance(found, CategoricalResult), found
    assert found.spent == {c: pytest.approx(4.0) for c in LAYOUT}
    assert all(p.calls["dp_categorical"] == 2 for p in ports)
    true = truth("smoking")
    arms = {(a.center, a.arm): a for a in found.arms}
    for i, c in enumerate(LAYOUT):
        for g, arm in enumerate(("ctl", "trt")):
            row = arms[(c, arm)]
            assert all(abs(x.count - t) <= 9 for x, t in zip(row.cells, true[i, g, :3],
                                                             strict=True))
            assert abs(row.missing - true[i, g, 3]) <= 9  # type: ignore[operator]
    for g, arm in enumerate(("ctl", "trt")):
        row = arms[("pooled", arm)]
        assert all(abs(x.count - t) <= 27 for x, t in zip(row.cells, true.sum(axis=0)[g, :3],
                                                          strict=True))
        assert all(x.count_interval is not None and x.low is not None for x in row.cells)
    assert {t.name for t in found.tests} == {"chi2", "cmh"}
    assert all("inflation" in t.method for t in found.tests)


async def test_table_one_shows_categorical_rows_and_missing_counts(ports: Any) -> None:
    asked = spec({"kind": "describe", "categorical": ["smoking", "stage"]})
    result = await run_study(asked, ports, min_centers=2)
    found = result.analyses[0]
    assert isinstance(found, DescribeResult), found
    rows = {(r.center, r.arm): r for r in found.rows}
    for c in LAYOUT:
        for arm in ("ctl", "trt"):
            assert rows[(c, arm)].missing == LAYOUT[c][arm]["crp_missing"]
        assert rows[(c, "all")].missing == sum(LAYOUT[c][a]["crp_missing"]
                                               for a in ("ctl", "trt"))
    assert rows[("pooled", "ctl")].missing == 22 and rows[("pooled", "trt")].missing == 20
    assert rows[("pooled", "all")].missing == 42
    # crp's n counts the present values: n + missing is the arm's size.
    assert rows[("pooled", "ctl")].n + 22 == sum(sum(LAYOUT[c]["ctl"]["smoking"])
                                                 for c in LAYOUT)
    cats = {(a.variable, a.center, a.arm): a for a in found.categorical}
    assert cats[("smoking", "pooled", "ctl")].missing == 10
    assert [c.label for c in cats[("stage", "pooled", "all")].cells] == ["I", "II or III"]
    view = {"id": "s", "status": "succeeded", "created_at": "now", "provenance": [],
            "spec": asked.model_dump(mode="json"), "result": result.model_dump(mode="json")}
    page = render_html(view)
    assert "smoking, n (%)" in page and "II or III" in page
    text = summary(view)
    line = next(x for x in text.splitlines() if x.strip().startswith("missing, n (%)"))
    # crp's missing line: pooled ctl 22 of 240 records, trt 20 of 250, overall 42 of 490.
    assert "22 (9.2 %)" in line and "20 (8.0 %)" in line and "42 (8.6 %)" in line
    never = next(x for x in text.splitlines() if x.strip().startswith("never"))
    assert "100 (43.5 %)" in never  # pooled ctl: 40 + 35 + 25 of 230 with a category


async def test_a_dp_describe_pays_for_its_categorical_variables(ports: Any) -> None:
    asked = spec({"kind": "describe", "epsilon": 1.0, "bounds": {"crp": [0, 100]},
                  "categorical": ["smoking"]},
                 {"kind": "categorical", "variable": "smoking", "epsilon": 1.0})
    # 2 arms × (crp's description + smoking's counts) = 4; the categorical analysis asks the
    # same counts, answered once.
    assert [s.epsilon for s in analysis_spends(asked)] == [4.0, 0.0]
    result = await run_study(asked, ports, min_centers=2)
    described, categorical = result.analyses
    assert isinstance(described, DescribeResult), described
    assert isinstance(categorical, CategoricalResult), categorical
    assert described.spent == {c: pytest.approx(4.0) for c in LAYOUT}
    for port in ports:  # the categorical analysis's counts were the describe's: paid once
        budget = await port.budget()
        assert budget.datasets["cohort"].spent_epsilon == pytest.approx(4.0)
    # The exact missing counts stay exact in a DP describe (no ε; 0 or >= K).
    assert {r.missing for r in described.rows if r.center == "alpha" and r.arm == "ctl"} == {12}
    # The Methods paragraph says how the categorical analysis was made, and cites it.
    from coordinator.reporting.methods_text import methods_sentences
    view = {"id": "s", "status": "succeeded", "created_at": "now", "provenance": [],
            "spec": asked.model_dump(mode="json"), "result": result.model_dump(mode="json")}
    said, cited = methods_sentences(view)
    assert any("categorical variable smoking" in x and "ε-DP counts" in x for x in said)
    assert {"wilson", "mantel"} <= set(cited)


def test_the_spec_refuses_what_it_cannot_run() -> None:
    with pytest.raises(ValidationError, match="needs `epsilon`"):
        spec({"kind": "categorical", "variable": "smoking", "mode": "dp"})
    with pytest.raises(ValidationError, match="spends no ε"):
        spec({"kind": "categorical", "variable": "smoking", "mode": "table", "epsilon": 1.0})
    with pytest.raises(ValidationError, match="both in `variables`"):
        spec({"kind": "describe", "variables": ["crp"], "categorical": ["crp"]})



def test_the_client_builds_the_example_study_file() -> None:
    from fedstats_cli.study import load_spec
    from fedstats_client.spec import SpecError, Study

    built = (Study("cohort", "crp", groups=["ctl", "trt"], k=10)
             .describe(["crp"], categorical=["smoking"])
             .categorical("smoking")
             .categorical("smoking", epsilon=0.5))
    example = Path(__file__).resolve().parents[2] / "examples" / "categorical.toml"
    assert built.spec() == StudySpec.model_validate(load_spec(example))
    with pytest.raises(SpecError, match="needs `epsilon`"):
        Study("cohort", "crp").categorical("smoking", mode="dp").spec()
