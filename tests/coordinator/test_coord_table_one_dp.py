"""One consistent DP Table 1 (coordinator.protocols.table_one; docs/methods.md, "One consistent
DP Table 1"): one N per center and arm shared by every row, overall = Σ arms, pooled = Σ
centers, for any noisy releases (a property test), and on a Table 1 run over in-process DP-mode
centers and rendered as the report shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.local import in_process_federation
from coordinator.models import DescribeResult, DescribeRow, StudySpec
from coordinator.protocols.categorical import FederatedCounts, category_arms
from coordinator.protocols.describe import ALL, POOLED, FederatedDescribe
from coordinator.protocols.table_one import arm_sizes, consistent_rows
from coordinator.reporting.rendering import table_one
from coordinator.study import run_study
from shared.consistency import NoisyCounts
from tests.helpers.coordinator import K

pytestmark = pytest.mark.anyio

SMOKING = ["never", "former", "current"]


def _row(variable: str, center: str, arm: str) -> DescribeRow:
    return DescribeRow(variable=variable, center=center, arm=arm, n=0, mean=None, sd=None,
                       median=None, q1=None, q3=None, edges=[], counts=[], method="dp",
                       epsilon=1.0)


noisy = st.floats(-30.0, 300.0, allow_nan=False)


@st.composite
def tables(draw: Any) -> tuple[Any, ...]:
    """Noisy releases of one Table 1: 1-3 centers, 1 or 2 arms, 1-3 numeric variables (with
    or without a missing count), 0-2 categorical ones of 1-4 categories."""
    centers = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    arms = ("a", "b") if draw(st.booleans()) else (ALL,)
    variables = [f"v{i}" for i in range(draw(st.integers(1, 3)))]
    with_missing = {v: draw(st.booleans()) for v in variables}
    releases = {}
    for v in variables:
        for c in centers:
            for arm in arms:
                found = tuple(draw(noisy) for _ in range(2 if with_missing[v] else 1))
                releases[(v, c, arm)] = NoisyCounts(
                    tuple(("describe", v, c, arm, j) for j in range(len(found))), found,
                    draw(st.floats(0.5, 800.0)))
    described = FederatedDescribe((), dict.fromkeys(centers, 1.0), {}, {}, (),
                                  releases=releases)
    feds = []
    for i in range(draw(st.integers(0, 2))):
        categories = tuple(SMOKING[: draw(st.integers(1, 3))])
        cells = tuple((j,) for j in range(len(categories) + 1))
        counts = {c: np.array([[draw(noisy) for _ in cells] for _ in arms]) for c in centers}
        variances = {c: np.full((len(arms), len(cells)), draw(st.floats(0.5, 100.0)))
                     for c in centers}
        feds.append(FederatedCounts(f"s{i}", "dp", categories, arms, cells, counts, variances,
                                    dict.fromkeys(centers, 1.0), ()))
    return centers, arms, variables, described, feds


@given(tables())
def test_every_row_of_any_noisy_table_one_holds_its_columns_n(table: tuple[Any, ...]) -> None:
    centers, arms, variables, described, feds = table
    sizes = arm_sizes(described, feds, arms, centers)
    assert sizes is not None
    columns = [(c, a) for c in [*centers, POOLED] for a in [*arms, *([ALL] if len(arms) > 1
                                                                     else [])]]
    rows = consistent_rows([_row(v, c, a) for v in variables for c, a in columns], described,
                           sizes, {})
    shown = category_arms_all(feds, sizes.shown())
    n_of = {(s.center, s.arm): s.n for s in sizes.rows()}
    assert set(n_of) == set(columns)
    for r in rows:  # every numeric row: n + missing (where released) is its column's N
        assert r.n >= 0 and (r.missing is None or r.missing >= 0)
        assert r.n + (r.missing or 0) == n_of[(r.center, r.arm)]
    for arm in shown:  # every categorical row: categories + missing is its column's N
        assert all(cell.count >= 0 for cell in arm.cells) and arm.missing is not None
        assert arm.n + arm.missing == n_of[(arm.center, arm.arm)]
        assert arm.n == sum(cell.count for cell in arm.cells)
    by_key = {(r.variable, r.center, r.arm): r for r in rows}
    cats = {(a.variable, a.center, a.arm): a for a in shown}
    # Overall = Σ arms, pooled = Σ centers: the sizes, every numeric row's n and missing,
    # every category's count and missing.
    groups = [(c, [(c, a) for a in arms]) for c in [*centers, POOLED]] if len(arms) > 1 else []
    groups += [((POOLED, a), [(c, a) for c in centers]) for a in arms]
    for whole, parts in groups:
        key = (whole, ALL) if isinstance(whole, str) else whole
        assert n_of[key] == sum(n_of[p] for p in parts)
        for v in variables:
            assert by_key[(v, *key)].n == sum(by_key[(v, *p)].n for p in parts)
            missing = [by_key[(v, *p)].missing for p in parts]
            assert by_key[(v, *key)].missing == (
                None if None in missing else sum(m for m in missing if m is not None))
        for fed in feds:
            whole_arm = cats[(fed.variable, *key)]
            part_arms = [cats[(fed.variable, *p)] for p in parts]
            assert whole_arm.missing == sum(a.missing for a in part_arms)
            for j, cell in enumerate(whole_arm.cells):
                assert cell.count == sum(a.cells[j].count for a in part_arms)


def category_arms_all(feds: list[FederatedCounts], sizes: dict[str, list[int]]) -> list[Any]:
    return [a for fed in feds for a in category_arms(fed, per_center=True, sizes=sizes)]


def test_without_any_noisy_count_there_is_no_size() -> None:
    described = FederatedDescribe((), {"c": 0.0}, {}, {}, ())
    assert arm_sizes(described, [], (ALL,), ["c"]) is None


# -- a DP Table 1 over in-process DP-mode centers, as the report renders it -------------------

LAYOUT = {  # per center and arm: records, of them missing crp, smoking (never, former, current,
    # missing)
    "alpha": {"ctl": (300, 20, [120, 90, 60, 30]), "trt": (280, 0, [100, 100, 80, 0])},
    "beta": {"ctl": (200, 15, [80, 60, 50, 10]), "trt": (220, 30, [60, 80, 70, 10])},
    "gamma": {"ctl": (150, 0, [50, 50, 40, 10]), "trt": (160, 8, [40, 60, 60, 0])},
}


def _center(path: Path, layout: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    crp: list[float | None] = []
    age: list[float] = []
    smoking: list[str | None] = []
    arm: list[str] = []
    for level, (n, missing, smoke) in layout.items():
        values: list[float | None] = [float(v) for v in rng.normal(50, 10, n)]
        values[:missing] = [None] * missing
        crp += values
        age += [float(v) for v in rng.normal(60, 12, n)]
        labels: list[str | None] = [s for s, k in zip([*SMOKING, None], smoke, strict=True)
                                    for _ in range(k)]
        rng.shuffle(labels)
        smoking += labels
        arm += [level] * n
    pq.write_table(pa.table({"crp": pa.array(crp, pa.float64()), "age": age,
                             "smoking": smoking, "arm": arm}), path)
    return {"source": {"kind": "parquet", "path": str(path)}, "variables": ["crp", "age"],
            "categorical": {"smoking": SMOKING}, "missing": "per_variable",
            "group": {"column": "arm", "levels": ["ctl", "trt"]}, "release_mode": "dp",
            "epsilon_total": 1e6, "epsilon_per_request": 1e6}


async def test_a_rendered_dp_table_one_has_one_n_per_arm_and_overall_the_sum(
        tmp_path: Path) -> None:
    centers = in_process_federation(
        {cid: {"cohort": _center(tmp_path / f"{cid}.parquet", layout, i)}
         for i, (cid, layout) in enumerate(LAYOUT.items())}, k=K)
    try:
        spec = StudySpec.model_validate({
            "dataset": "cohort", "variable": "crp", "k": K, "groups": ["ctl", "trt"],
            "analyses": [{"kind": "describe", "epsilon": 0.5, "variables": ["crp", "age"],
                          "bounds": {"crp": [0, 100], "age": [0, 120]},
                          "categorical": ["smoking"], "per_center": True}]})
        result = await run_study(spec, list(centers.values()), min_centers=3)
    finally:
        for c in centers.values():
            await c.aclose()
    described = result.analyses[0]
    assert isinstance(described, DescribeResult), described
    header, rows = table_one(described.model_dump(mode="json"), ["ctl", "trt"],
                             per_center=True)
    assert header[1:4] == ["ctl", "trt", "Overall"]
    # The first line holds each column's N: pooled ctl, trt, Overall, then each center's.
    assert rows[0][0] == "N"
    sizes = [int(cell.split()[0]) for cell in rows[0][1:]]
    assert len(sizes) == 3 * (1 + len(LAYOUT))
    for i in range(0, len(sizes), 3):
        assert sizes[i + 2] == sizes[i] + sizes[i + 1]  # overall = Σ arms
    for j in range(3):
        assert sizes[j] == sum(sizes[3 * (k + 1) + j] for k in range(len(LAYOUT)))
    true = [sum(LAYOUT[c][a][0] for c in LAYOUT) for a in ("ctl", "trt")]
    # The centers' noise is not seeded: a pooled N's SD is about 10 (√(3 · 31), mostly the
    # categorical cells' geometric noise), so 80 is 8 SDs (the noise's tails are exponential).
    assert abs(sizes[0] - true[0]) < 80 and abs(sizes[1] - true[1]) < 80

    def numbers(label: str) -> list[list[int]]:
        """The leading count of each column on every line labelled ``label``."""
        return [[int(float(cell.split()[0])) for cell in r[1:]]
                for r in rows if r[0].strip() == label]

    n_lines, missing_lines = numbers("n"), numbers("missing, n (%)")
    assert len(n_lines) == 2 and len(missing_lines) == 3  # crp, age; and smoking's
    for n, m in zip(n_lines, missing_lines[:2], strict=True):
        assert [a + b for a, b in zip(n, m, strict=True)] == sizes  # one N per column
    categories = [numbers(f"{s}") for s in SMOKING]
    smoked = [sum(line[0][j] for line in categories) + missing_lines[2][j]
              for j in range(len(sizes))]
    assert smoked == sizes
    for line in [*n_lines, *missing_lines, *(c[0] for c in categories)]:
        for i in range(0, len(line), 3):
            assert line[i + 2] == line[i] + line[i + 1]  # overall = Σ arms, every row
