"""``fedstats demo --dp`` run as a user runs it (a subprocess): three DP-mode centers answer the
DP twin of the study to the end; the summary shows the DP Mann-Whitney tests and each center's
lifetime guarantee; no center made an exact release (read from the centers' own ledgers, not
only the coordinator's record); and what the study says each center spent is what each ledger
paid."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from center_agent.gate.kinds import KINDS
from fedstats_cli import synth
from fedstats_cli.demo import dp_demo_spec
from tests.helpers.processes import clean_env, fedstats, wait_gone
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

DP_KINDS = {k.name for k in KINDS if not k.exact}
UNITS = 1e9  # center_agent.db.spend_units: ε in integer units


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str],
                                                             float]:
    workdir = tmp_path_factory.mktemp("demo_dp") / "work"
    started = time.monotonic()
    done = subprocess.run([*fedstats(), "demo", "--dp", "--workdir", str(workdir)],
                          cwd=workdir.parent, env=clean_env(), capture_output=True, text=True,
                          timeout=scaled(180))
    return workdir, done, time.monotonic() - started


def audit(workdir: Path, center: str) -> list[tuple[str, str, int, str | None]]:
    """(kind, outcome, ε units, study id) of every request the center's audit trail holds."""
    with sqlite3.connect(workdir / "ledgers" / f"{center}.sqlite") as conn:
        return [tuple(row) for row in conn.execute(
            "SELECT kind, outcome, epsilon_units, study_id FROM fedstats_audit")]


def test_the_dp_demo_succeeds_and_shows_the_dp_tests_and_the_guarantees(demo: Any) -> None:
    workdir, done, seconds = demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert seconds < scaled(90)
    assert "succeeded" in done.stdout and "every process stopped" in done.stdout
    view = json.loads((workdir / "study.json").read_text())
    result = view["result"]
    kinds = [a["kind"] for a in result["analyses"]]
    assert kinds == [a["kind"] for a in dp_demo_spec()["analyses"]]
    (dp_mwu,) = [a for a in result["analyses"] if a["kind"] == "dp_mwu"]
    assert set(dp_mwu["tests"]) == {"sum", "weighted", "fisher"}
    summary = (workdir / "summary.txt").read_text()
    report = (workdir / "report.html").read_text()
    assert "DP Mann-Whitney tests" in summary and "DP Mann-Whitney" in report
    for name in ("sum", "weighted", "fisher"):
        assert f"{dp_mwu['tests'][name]['pvalue']:.4g}" in summary, name
    # One guarantee per center, in DP mode, in the summary, the report and on the console.
    guarantees = result["guarantees"]
    assert [g["center"] for g in guarantees] == [h.center_id for h in synth.HOSPITALS]
    for g in guarantees:
        assert g["release_mode"] == "dp"
        assert "every release of the dataset is differentially private" in g["line"]
        assert g["line"] in summary and g["line"] in done.stdout
        assert f"center {g['center']}" in report
    # A DP Table 1 with smoking, and each center's DP boxes of both arms.
    (table_one,) = [a for a in result["analyses"] if a["kind"] == "describe"]
    assert table_one["mode"] == "dp"
    assert "Table 1 (dp)" in summary and "smoking" in summary
    for box in (a for a in result["analyses"] if a["kind"] == "dp_boxplot"):
        assert set(box["per_center"]) == {h.center_id for h in synth.HOSPITALS}
        assert box["pooled"] is not None


def test_the_centers_run_in_dp_mode_with_declared_public_sizes(demo: Any) -> None:
    workdir, done, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    for h in synth.HOSPITALS:
        text = (workdir / "config" / f"{h.center_id}.toml").read_text()
        declared = tomllib.loads(text)["datasets"][synth.DATASET]
        assert declared["release_mode"] == "dp"
        assert declared["declared_n_by_group"] == {"control": h.n_control,
                                                   "treated": h.n_treated}
        assert "never\n# counted from the data" in text  # the TOML says what a declared size is


def test_no_exact_release_was_made_and_the_ledgers_paid_what_the_study_says(demo: Any) -> None:
    workdir, done, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads((workdir / "study.json").read_text())
    releases = json.loads((workdir / "releases.json").read_text())
    # The coordinator's record: apart from /v1/info (declared sizes only, in DP mode), every
    # release received is of a DP kind, with its ε.
    assert {r["call"] for r in releases} - {"info"} <= DP_KINDS
    for r in releases:
        if r["call"] != "info":
            assert r["epsilon"] is not None and r["epsilon"] > 0, r
    for g in view["result"]["guarantees"]:
        center = g["center"]
        rows = audit(workdir, center)
        released = [row for row in rows if row[1] == "released"]
        # The center's own trail: it released DP kinds only, each paid, all for this study.
        assert released and {row[0] for row in released} <= DP_KINDS, rows
        assert all(row[2] > 0 and row[3] == view["id"] for row in released), rows
        # Nor was an exact kind asked in vain: the coordinator knows the center's mode (the
        # Table 1's exact missing counts are not asked of a DP-mode center).
        assert {row[0] for row in rows} <= DP_KINDS, rows
        paid = sum(row[2] for row in released) / UNITS
        # What the study received from the center, and its accountant's pure-ε sum.
        received = sum(r["epsilon"] for r in releases
                       if r["center"] == center and r["call"] != "info")
        assert received == pytest.approx(paid, abs=1e-6)
        assert g["epsilon_pure"] == pytest.approx(paid, abs=1e-6)
        assert g["releases"] == len(released)
        with sqlite3.connect(workdir / "ledgers" / f"{center}.sqlite") as conn:
            (spent,) = conn.execute("SELECT spent_units FROM fedstats_budget WHERE dataset = ?",
                                    (synth.DATASET,)).fetchone()
        assert spent / UNITS == pytest.approx(paid, abs=1e-6)
    pids = [p["pid"] for p in json.loads((workdir / "processes.json").read_text()).values()]
    assert wait_gone(pids) == []
