"""A survival study through the coordinator's API over in-process centers (the real center app:
the synthetic hospitals' time to readmission, each with its own follow-up): the dry run names
the ε; the curves on one-day intervals (every record's time a limit, so the "end" reading is
the Kaplan-Meier estimator of the records, docs/methods.md §13) match scipy's ``ecdf`` of the
right-censored raw data within the noise at the largest ε; the log-rank test of the pooled
tables agrees with scipy's ``logrank`` on the pooled records; each
center spent ε per arm; a horizon past a center's follow-up fails the study naming it; and the
whole shown half renders it. ``python -m tests.coordinator.test_coord_survival_api`` writes the
stored study of the golden test (``golden/survival.json``)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coordinator.local import in_process_federation
from coordinator.reporting import exports, methods_text
from coordinator.reporting.report import render_html, summary
from fedstats_cli import demo, synth
from tests.coordinator.test_coord_catalog import serving
from tests.helpers.coordinator import CountingCenter

pytestmark = pytest.mark.anyio

HORIZON = 60


# The test coordinator's center ids, for the synthetic hospitals a, b and c.
IDS = dict(zip((h.center_id for h in synth.HOSPITALS), ("alpha", "beta", "gamma"), strict=True))


def _federation(root: Path) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    data = {}
    configs = {}
    for h in synth.HOSPITALS:
        rng = np.random.default_rng(synth.hospital_seed(synth.DEFAULT_SEED, h.center_id))
        columns = synth.generate(h, rng)
        data[IDS[h.center_id]] = columns
        csv = synth.write_csv(columns, root / f"{h.center_id}.csv")
        # The demo's declaration, with a budget for the largest ε.
        configs[IDS[h.center_id]] = {"cohort": {**demo.center_dataset(h, csv, dp=False),
                                           "epsilon_total": 1000.0,
                                           "epsilon_per_request": 100.0}}
    ports = in_process_federation(configs, k=10)
    return {cid: CountingCenter(port) for cid, port in ports.items()}, data


def _spec(**survival: Any) -> dict[str, Any]:
    return {"dataset": "cohort", "variable": synth.VARIABLE, "groups": list(synth.LEVELS),
            "k": 10, "analyses": [{"kind": "survival", "variable": synth.READMISSION,
                                   "epsilon": 100.0, "horizon": HORIZON,
                                   "intervals": HORIZON, "censoring": "end", **survival}]}


def _records(columns: dict[str, np.ndarray], arm: str) -> tuple[np.ndarray, np.ndarray]:
    """One arm's times and events, administratively censored at the horizon."""
    at = columns[synth.GROUP_COLUMN] == arm
    time = columns[synth.READMISSION_TIME][at].astype(float)
    event = columns[synth.READMISSION_EVENT][at].astype(int)
    after = time > HORIZON
    return np.where(after, HORIZON, time), np.where(after, 0, event)


async def test_a_survival_study_matches_lifelines_and_is_shown(tmp_path: Path) -> None:
    from scipy import stats

    def km(time: np.ndarray, event: np.ndarray, at: list[float]) -> np.ndarray:
        censored = stats.CensoredData.right_censored(time, event == 0)
        return np.asarray(stats.ecdf(censored).sf.evaluate(np.asarray(at)))

    centers, data = _federation(tmp_path)
    try:
        async with serving(tmp_path, centers) as coord:
            dry = await coord.post(_spec(), dry_run="true")
            assert dry.status_code == 200, dry.text
            planned = {c["center"]: c["epsilon"] for c in dry.json()["centers"]}
            assert planned == dict.fromkeys(data, pytest.approx(200.0))  # ε per arm, two arms
            view = await coord.run(_spec())
            assert view["status"] == "succeeded", view
            found = view["result"]["analyses"][0]
            assert await coord.spent() == dict.fromkeys(data, pytest.approx(200.0))
            # A horizon past hospital b's 60 days of follow-up: refused at submission, naming
            # the center and what it declares, before any ε is spent.
            late = await coord.post(_spec(horizon=75, intervals=15))
            assert late.status_code == 422, late.text
            assert late.json()["error"] == "unknown_name"
            assert "'readmission to 75' is not declared" in late.text
            assert "beta" in late.text and "readmission to 60" in late.text
            assert await coord.spent() == dict.fromkeys(data, pytest.approx(200.0))
    finally:
        for c in centers.values():
            await c.port.aclose()
    curves = {(c["center"], c["arm"]): c for c in found["curves"]}
    for arm in synth.LEVELS:
        pooled = [_records(data[c], arm) for c in data]
        ours = curves[("pooled", arm)]
        reference = km(np.concatenate([p[0] for p in pooled]),
                       np.concatenate([p[1] for p in pooled]), ours["times"])
        # Noise SD 0.014 records per cell at ε = 100 against >= 100 at risk: S within 1e-3.
        np.testing.assert_allclose(ours["survival"], reference, atol=1e-3)
        for center, columns in data.items():
            own = curves[(center, arm)]
            np.testing.assert_allclose(own["survival"],
                                       km(*_records(columns, arm), own["times"]), atol=2e-3)
    # The pooled (unstratified) log-rank test against scipy's on the pooled records.
    arms = [[np.concatenate([_records(data[c], arm)[i] for c in data]) for i in (0, 1)]
            for arm in synth.LEVELS]
    reference_test = stats.logrank(*(stats.CensoredData.right_censored(t, e == 0)
                                     for t, e in arms))
    pooled_test = next(t for t in found["tests"] if t["name"] == "pooled")
    assert pooled_test["statistic"] == pytest.approx(reference_test.statistic**2, rel=1e-2)
    assert pooled_test["hazard_ratio"] < 1  # treatment lowers the hazard (synth: HR 0.7)
    # The shown half.
    text = summary(view)
    assert "Time to event readmission" in text and "RMST difference" in text
    page = render_html(view)
    assert "Kaplan-Meier" in page and "<svg" in page
    assert "Kaplan & Meier 1958" in methods_text.methods_paragraph(view)
    assert "survival.csv" in exports.csv_files(view)


async def _stored_study(root: Path) -> dict[str, Any]:
    centers, _data = _federation(root)
    try:
        async with serving(root, centers) as coord:
            return dict(await coord.run(_spec(epsilon=1.0, intervals=12, censoring="actuarial")))
    finally:
        for c in centers.values():
            await c.port.aclose()


if __name__ == "__main__":
    out = Path(__file__).parent / "golden" / "survival.json"
    stored = asyncio.run(_stored_study(Path(tempfile.mkdtemp(prefix="fedstats-golden-"))))
    assert stored["status"] == "succeeded", stored
    out.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)
