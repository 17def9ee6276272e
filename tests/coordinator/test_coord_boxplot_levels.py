"""Any level from the pooled tree, on the coordinator's side: the extra levels cost the centers
nothing (they are asked exactly the same releases with or without them, and their ledgers agree),
the levels are the core's reading of the trees received, and they reach the result, the API, the
HTML report and the client's frame."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from coordinator.models import DPBoxplotAnalysis, DPBoxplotResult, PooledBoxResult, StudyView
from coordinator.protocols import federated_dp_boxplot
from coordinator.reporting.report import render_html, summary
from coordinator.results import dp_boxplot_result
from fedstats_client.results import StudyRecord
from fedstats_client.spec import SpecError, Study
from shared.dp.pooled import (
    EXTRA_LEVELS,
    TreeHistogram,
    consistent_leaves,
    grid_edges,
    pooled_range,
    sum_trees,
    tree_quantiles,
)
from shared.privacy import PrivacySpent
from tests.coordinator.test_coord_api import SPEC, Running, counting_centers, serving
from tests.helpers.coordinator import (
    AUTH,
    CountingCenter,
    Federations,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)
MANY = (0.01, 0.05, 0.1, 0.2, 0.8, 0.9, 0.95, 0.99)


class Recorder(CountingCenter):
    """Keeps every release request it forwards, as JSON, in order: ``asked``."""

    def __init__(self, port: Any) -> None:
        super().__init__(port)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        self.asked.append((kind.name, request.model_dump(mode="json")))
        return await super().release(kind, dataset, request)


class Replayer(Recorder):
    """Answers each release with what ``recorded`` was answered for the same call (the n-th of
    its kind), so a second run sees the first run's noise; the survey goes to the real center."""

    def __init__(self, port: Any, recorded: Recorder) -> None:
        super().__init__(port)
        self.recorded = recorded
        self.seen: Counter[str] = Counter()

    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        self.asked.append((kind.name, request.model_dump(mode="json")))
        answer = self.recorded.answers[kind.name][self.seen[kind.name]]
        self.seen[kind.name] += 1
        return answer


async def spent(center: Any) -> float:
    return float((await center.budget()).datasets["cohort"].spent_epsilon)


async def test_the_centers_are_asked_the_same_releases_with_or_without_levels(
    federation: Federations,
) -> None:
    first = [Recorder(p) for p in federation.ports()]
    plain = await federated_dp_boxplot(first, dataset="cohort", variable="crp", group="trt",
                                       epsilon=1.0, bounds=BOUNDS, levels=())
    # The second run sees the same noisy answers and asks for eight more levels: if any level
    # entered a request (the grid, the thresholds, the ε), the requests would differ.
    second = [Replayer(p, r) for p, r in zip(federation.ports(), first, strict=True)]
    more = await federated_dp_boxplot(second, dataset="cohort", variable="crp", group="trt",
                                      epsilon=1.0, bounds=BOUNDS, levels=MANY)
    for a, b in zip(first, second, strict=True):
        assert b.asked == a.asked
        assert [kind for kind, _ in a.asked] == [
            "dp_boxplot", "dp_extremes", "dp_tree_histogram", "dp_threshold_counts"]
    assert plain.spent == more.spent == pytest.approx({"alpha": 2.0, "beta": 2.0, "gamma": 2.0})
    assert plain.pooled is not None and more.pooled is not None
    assert more.pooled.box == plain.pooled.box and more.pooled.grid == plain.pooled.grid
    assert plain.pooled.levels == () and [q for q, _ in more.pooled.levels] == list(MANY)


async def test_the_levels_are_the_core_reading_of_the_trees_received(
    federation: Federations,
) -> None:
    centers = [CountingCenter(p) for p in federation.ports()]
    fed = await federated_dp_boxplot(centers, dataset="cohort", variable="crp", group=None,
                                     epsilon=0.5, bounds=BOUNDS, per_center=False, levels=MANY)
    pairs = [(c.answers["dp_extremes"][0].psi_min, c.answers["dp_extremes"][0].psi_max)
             for c in centers]
    grid = pooled_range(pairs, BOUNDS)
    trees = [TreeHistogram(tuple(np.asarray(level) for level in t.levels), t.branching,
                           t.noise_scale, PrivacySpent(t.epsilon))
             for t in (c.answers["dp_tree_histogram"][0] for c in centers)]
    leaves = consistent_leaves(sum_trees(trees))
    expected = tree_quantiles(leaves, grid_edges(*grid, leaves.size), MANY)
    assert fed.pooled is not None and fed.pooled.levels == expected.pairs()
    # Every center spent ε once, its ledger agreeing, whatever the number of levels read.
    assert fed.spent == pytest.approx({"alpha": 0.5, "beta": 0.5, "gamma": 0.5})
    assert [await spent(c) for c in centers] == pytest.approx([0.5] * 3)
    assert all(c.calls["dp_tree_histogram"] == 1 for c in centers)
    values = [v for _, v in fed.pooled.levels]
    assert values == sorted(values)
    box = fed.pooled.box
    assert values[1] <= box.q1 and box.q3 <= values[-2]  # 0.05 ≤ Q1 ≤ Q3 ≤ 0.95

    shown = dp_boxplot_result(fed, None)
    assert shown.pooled is not None
    assert [(lv.level, lv.value) for lv in shown.pooled.levels] == list(fed.pooled.levels)
    again = DPBoxplotResult.model_validate_json(shown.model_dump_json())
    assert again == shown


async def test_per_center_boxes_only_read_no_levels(federation: Federations) -> None:
    fed = await federated_dp_boxplot(federation.ports(), dataset="cohort", variable="crp",
                                     group="ctl", epsilon=1.0, bounds=BOUNDS, pooled=False)
    assert fed.pooled is None and dp_boxplot_result(fed, "ctl").pooled is None


async def test_bad_levels_are_refused_before_any_release(federation: Federations) -> None:
    centers = [CountingCenter(p) for p in federation.ports()]
    with pytest.raises(ValueError, match="strictly increasing"):
        await federated_dp_boxplot(centers, dataset="cohort", variable="crp", group=None,
                                   epsilon=1.0, bounds=BOUNDS, levels=(0.95, 0.05))
    assert all(sum(c.calls.values()) == 0 for c in centers)


def test_the_spec_defaults_to_the_core_levels_and_checks_them() -> None:
    spec = DPBoxplotAnalysis.model_validate(
        {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 60]})
    assert spec.levels == list(EXTRA_LEVELS)
    assert DPBoxplotAnalysis.model_validate(
        {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 60], "levels": [0.1]}).levels == [0.1]
    for bad in ([0.95, 0.05], [0.0, 0.5], [1.0], [], [0.5, 0.5], [i / 66 for i in range(1, 66)]):
        with pytest.raises(ValidationError):
            DPBoxplotAnalysis.model_validate(
                {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 60], "levels": bad})


def test_a_result_stored_before_levels_still_reads() -> None:
    stored = {"lower_outliers": 1, "lower_whisker": 0.5, "q1": 2.0, "median": 3.0, "q3": 4.0,
              "upper_whisker": 9.0, "upper_outliers": 2, "n": 100, "lower_branch": "psi",
              "upper_branch": "fence", "epsilon": 1.0, "method": "pooled_dp_boxplot",
              "grid": [0.0, 10.0], "centers": ["alpha"]}
    assert PooledBoxResult.model_validate(stored).levels == []


@pytest.fixture
async def running(tmp_path: Path, federation: Federations) -> AsyncIterator[Running]:
    async with serving(settings_for(sqlite_url(tmp_path)),
                       centers=counting_centers(federation)) as r:
        yield r


async def test_a_study_returns_the_levels_and_shows_them(running: Running) -> None:
    spec = {**SPEC, "analyses": [{"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0, 100],
                                  "group": "trt", "levels": [0.1, 0.9]}]}
    view = await running.run(spec)
    assert view["status"] == "succeeded", view
    boxes = view["result"]["analyses"][0]
    pooled = boxes["pooled"]
    assert [lv["level"] for lv in pooled["levels"]] == [0.1, 0.9]
    low, high = (lv["value"] for lv in pooled["levels"])
    assert low <= pooled["q1"] <= pooled["q3"] <= high
    assert boxes["spent"] == {"alpha": 1.0, "beta": 1.0, "gamma": 1.0}  # as without levels

    # The report shows them under the pooled box; the client's frame has a column per level.
    html = render_html(view)
    assert "q0.1" in html and "q0.9" in html and "no further ε" in html
    assert "pooled · trt: q0.1=" in summary(view)
    record = StudyRecord(StudyView.model_validate(view))
    assert record.result is not None
    frame = record.result.boxplots.to_frame()
    assert frame.loc[("trt", "pooled"), "q0.1"] == pytest.approx(low)
    assert frame.loc[("trt", "pooled"), "q0.9"] == pytest.approx(high)
    assert np.isnan(frame.loc[("trt", "alpha"), "q0.1"])  # a center's own box reads none

    refused = await running.client.post(
        "/v1/studies", headers=AUTH,
        json={**SPEC, "analyses": [{"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0, 100],
                                    "levels": [0.9, 0.1]}]})
    assert refused.status_code == 422 and "strictly increasing" in refused.text


def test_the_client_spec_builder_passes_levels() -> None:
    built = Study("cohort", "crp").dp_boxplot(epsilon=1.0, bounds=BOUNDS, levels=[0.1, 0.9])
    assert built.spec().analyses[0].levels == [0.1, 0.9]  # type: ignore[union-attr]
    default = Study("cohort", "crp").dp_boxplot(epsilon=1.0, bounds=BOUNDS).spec()
    assert default.analyses[0].levels == list(EXTRA_LEVELS)  # type: ignore[union-attr]
    with pytest.raises(SpecError, match=r"dp_boxplot\.levels"):
        Study("cohort", "crp").dp_boxplot(epsilon=1.0, bounds=BOUNDS, levels=[0.9, 0.1]).spec()
