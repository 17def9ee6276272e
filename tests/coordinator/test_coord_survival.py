"""The survival protocol over ports that answer with the core's own DP life tables
(``shared.dp.life_table``; the center's release kind is tested in tests/center_agent/): what the
coordinator reads from the releases against the exact life tables of the same records
(``shared.survival``, itself checked against scipy and R's ``survival``), at the largest ε
(100: the noise's SD 0.014 records per cell); the pooled table is the centers' noisy counts
summed; a release noised less than its ε needs, or on another grid, is implausible; and the
result the analysis builds is shown (summary, report, Methods, exports, figure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from coordinator.analyses import REGISTRY
from coordinator.analyses.base import MethodsContext
from coordinator.core.errors import CenterFailure
from coordinator.models import StudySpec, SurvivalResult
from coordinator.protocols.survey import Survey
from coordinator.protocols.survival import POOLED, federated_survival
from coordinator.reporting.shown import Shown
from shared import kinds
from shared.dp.life_table import dp_life_table
from shared.protocol import DPLifeTableRelease, DPLifeTableRequest
from shared.survival import kaplan_meier, life_table_from_records, logrank

pytestmark = pytest.mark.anyio

GRID = [float(t) for t in range(0, 91, 10)]


def _records(seed: int, n: int, hazard: float, follow_up: float
             ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    event_time = rng.exponential(1 / hazard, n)
    censor = np.minimum(rng.uniform(20, 150, n), follow_up)
    times = np.maximum(np.round(np.minimum(event_time, censor), 1), 0.1)
    return times, (event_time <= censor).astype(int)


# Per center and arm: (times, events); the treated arm has the lower hazard, the centers
# different follow-up (each beyond the grid's end, as a center requires).
DATA = {c: {"ctl": _records(10 * i, n, 0.012, follow), "trt": _records(10 * i + 1, n, 0.008,
                                                                         follow)}
        for i, (c, n, follow) in enumerate((("alpha", 300, 120.0), ("beta", 200, 95.0),
                                            ("gamma", 150, 100.0)))}


@dataclass
class LifeTablePort:
    """A center answering DP life tables of its records with the core's mechanism."""

    center_id: str
    cheat: float = 1.0  # < 1: a noise smaller than ε needs, reported as such
    grid_shift: float = 0.0
    asked: list[DPLifeTableRequest] = field(default_factory=list)

    async def release(self, kind: Any, dataset: str, request: DPLifeTableRequest) -> Any:
        assert kind is kinds.DP_LIFE_TABLE and dataset == "cohort"
        self.asked.append(request)
        times, events = DATA[self.center_id][request.group or "ctl"]
        rng = np.random.default_rng(abs(hash((self.center_id, request.group))) % 2**32)
        table = dp_life_table(times, events, grid=[g + self.grid_shift for g in request.grid],
                              epsilon=request.epsilon, rng=rng)
        released = DPLifeTableRelease.of(table)
        if self.cheat != 1.0:
            released = released.model_copy(update={
                "cell_variance": released.cell_variance * self.cheat})
        return released


def _survey(ports: list[Any]) -> Survey:
    return Survey(usable=tuple(ports), sizes={}, bounds={}, excluded=(), groups=("ctl", "trt"))


def _at_grid(times: np.ndarray, events: np.ndarray) -> Any:
    """The records' exact life table on the grid: a time after its end censored there, as the
    release counts it."""
    after = times > GRID[-1]
    return life_table_from_records(np.where(after, GRID[-1], times), np.where(after, 0, events),
                                   GRID)


def _exact(center: str, arm: str) -> Any:
    return _at_grid(*DATA[center][arm])


async def test_with_little_noise_the_curves_and_tests_are_the_exact_tables() -> None:
    ports = [LifeTablePort(c) for c in DATA]
    fed = await federated_survival(_survey(ports), dataset="cohort", variable="readmission",
                                   arms=("ctl", "trt"), epsilon=100.0, grid=GRID)
    assert [len(p.asked) for p in ports] == [2, 2, 2]  # one life table per arm
    assert fed.spent == {c: pytest.approx(200.0) for c in DATA}  # ε per arm, both arms
    for curve in fed.curves:
        if curve.center == POOLED:
            records = [DATA[c][curve.arm] for c in DATA]
            exact = kaplan_meier(_at_grid(np.concatenate([r[0] for r in records]),
                                          np.concatenate([r[1] for r in records])))
        else:
            exact = kaplan_meier(_exact(curve.center, curve.arm))
        # 0.014 records of noise per cell against >= 10 at risk: S within 2e-3.
        np.testing.assert_allclose(curve.curve.survival, exact.survival, atol=2e-3)
        np.testing.assert_allclose(curve.curve.low, exact.low, atol=2e-3)
    strata = [[_exact(c, "ctl"), _exact(c, "trt")] for c in DATA]
    exact_test = logrank(strata)
    assert fed.stratified.statistic == pytest.approx(exact_test.statistic, rel=1e-2)
    assert fed.stratified.test.hazard_ratio == pytest.approx(exact_test.hazard_ratio, rel=1e-3)
    assert fed.stratified.pvalue < 0.05  # the treated arm's lower hazard, 650 per arm


async def test_a_release_noised_less_than_its_epsilon_or_on_another_grid_is_implausible() -> None:
    for bad in (LifeTablePort("beta", cheat=0.5), LifeTablePort("beta", grid_shift=5.0)):
        ports = [LifeTablePort("alpha"), bad]
        with pytest.raises(CenterFailure) as failed:
            await federated_survival(_survey(ports), dataset="cohort", variable="readmission",
                                     arms=("ctl", "trt"), epsilon=1.0, grid=GRID)
        assert failed.value.center == "beta" and failed.value.kind == "implausible"
        found = await federated_survival(_survey(ports), dataset="cohort",
                                         variable="readmission", arms=("ctl", "trt"),
                                         epsilon=1.0, grid=GRID, allow_partial=True)
        assert [e.center for e in found.excluded] == ["beta"]


async def test_the_analysis_builds_a_result_the_shown_half_reads() -> None:
    from coordinator.analyses.base import StudyRun

    spec = StudySpec.model_validate({
        "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"],
        "analyses": [{"kind": "survival", "variable": "readmission", "epsilon": 1.0,
                      "horizon": 90, "intervals": 9}]})
    asked = spec.analyses[0]
    ports = [LifeTablePort(c) for c in DATA]

    async def no_table() -> Any:
        raise AssertionError("a survival analysis reads no table")

    analysis = REGISTRY["survival"]
    assert analysis.requests(spec, asked)[0][1].epsilon == 1.0
    found = await analysis.run(StudyRun(spec=spec, centers=ports, survey=_survey(ports),
                                        min_centers=1, lower="buffer", upper="buffer",
                                        study_table=no_table,
                                        variable_table=lambda v: no_table()), asked)
    assert isinstance(found, SurvivalResult)
    assert found.grid == GRID and [c.center for c in found.curves[:2]] == [POOLED, POOLED]
    assert {t.name for t in found.tests} == {"stratified", "pooled"}
    assert found.tests[0].strata == 3 and found.tests[1].strata == 1
    view = {"id": "s", "status": "succeeded", "spec": spec.model_dump(mode="json"),
            "result": {"analyses": [found.model_dump(mode="json")], "centers": list(DATA),
                       "excluded": []}}
    (_index, shown_spec, shown_result), = Shown(view).succeeded()
    assert shown_result == found
    raw = view["result"]["analyses"][0]
    summary = "\n".join(analysis.summary_lines(raw, view, []))
    assert "RMST difference" in summary and "stratified by center" in summary
    assert any("<svg" in part for part in analysis.report_parts(raw, view))
    cited: list[str] = []
    said = analysis.methods(shown_spec, shown_result, MethodsContext(spec, 0, cited.append))
    assert "Kaplan & Meier 1958" in " ".join(said) and "kaplan_meier" in cited
    rows = {part.name: analysis.export_rows(part, 0, shown_spec, shown_result, Shown(view))
            for part in analysis.export_parts}
    assert len(rows["survival"]) == sum(len(c.times) for c in found.curves)
    assert {r["quantity"] for r in rows["survival_tests"]} >= {
        "median", "rmst_90", "rmst_difference", "stratified_test", "pooled_test"}
    assert b"<svg" in analysis.figure("survival", shown_spec, shown_result, spec, "svg")[:2000]
