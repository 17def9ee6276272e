"""``fedstats demo --dp --keep`` run as a user runs it (a subprocess): three DP-mode centers
answer the DP twin of the study to the end, and its console is usable while they are kept up;
the summary shows the DP Mann-Whitney tests and each center's lifetime guarantee; no center made
an exact release (read from the centers' own ledgers, not only the coordinator's record); and
what the study says each center spent is what each ledger paid."""

from __future__ import annotations

import html
import json
import re
import signal
import sqlite3
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from center_agent.gate.kinds import KINDS
from fedstats_cli import synth
from fedstats_cli.demo import dp_demo_spec
from tests.helpers.processes import clean_env, fedstats, wait_gone
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

DP_KINDS = {k.name for k in KINDS if not k.exact}
UNITS = 1e9  # center_agent.db.spend_units: ε in integer units


@dataclass
class Run:
    workdir: Path
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from the start to the console's line (the study done)
    console: dict[str, str]  # what the console showed while the services were kept up


def console_pages(url: str, token: str) -> dict[str, str]:
    """The study page and the builder, as the demo's analyst sees them once signed in."""
    with httpx.Client(trust_env=False) as client:
        form = client.get(url + "/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert form.status_code == 200 and csrf
        signed = client.post(url + "/login", data={"csrf_token": csrf.group(1), "token": token})
        assert signed.status_code == 303
        studies = client.get(url + "/studies").text
        found = re.search(r"/ui/studies/([0-9a-f]{32})", studies)
        assert found, studies
        return {"studies": studies, "study": client.get(url + f"/studies/{found.group(1)}").text,
                "new": client.get(url + "/studies/new").text}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One ``fedstats demo --dp --keep``: the console is read while its services are up, then
    Ctrl-C (SIGINT) stops it."""
    base = tmp_path_factory.mktemp("demo_dp")
    workdir = base / "work"
    out, err = base / "out.txt", base / "err.txt"
    started = time.monotonic()
    with open(out, "wb") as out_file, open(err, "wb") as err_file:
        proc = subprocess.Popen([*fedstats(), "demo", "--dp", "--keep", "--workdir",
                                 str(workdir)], cwd=base, env=clean_env(), stdout=out_file,
                                stderr=err_file)

    def output() -> str:
        return out.read_text() + err.read_text()

    try:
        deadline = time.monotonic() + scaled(180)  # a guard against a hung demo, scaled
        while "Console: " not in output():
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, output()
            time.sleep(0.2)
        seconds = time.monotonic() - started
        time.sleep(0.2)
        found = re.search(r"Console: (http://\S+/ui) \(sign in with the analyst token in "
                          r"(\S+)\)", output())
        assert found, output()
        pages = console_pages(found.group(1), Path(found.group(2)).read_text().strip())
        assert proc.poll() is None  # still serving
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Run(workdir, proc.returncode, out.read_text(), err.read_text(), seconds, pages)


def audit(workdir: Path, center: str) -> list[tuple[str, str, int, str | None]]:
    """(kind, outcome, ε units, study id) of every request the center's audit trail holds."""
    with sqlite3.connect(workdir / "ledgers" / f"{center}.sqlite") as conn:
        return [tuple(row) for row in conn.execute(
            "SELECT kind, outcome, epsilon_units, study_id FROM fedstats_audit")]


def test_the_dp_demo_succeeds_and_shows_the_dp_tests_and_the_guarantees(demo: Run) -> None:
    workdir, done = demo.workdir, demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert demo.seconds < scaled(90)
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
        assert html.escape(g["line"]) in demo.console["study"]  # the console's study page
    # A DP Table 1 with smoking, and each center's DP boxes of both arms.
    (table_one,) = [a for a in result["analyses"] if a["kind"] == "describe"]
    assert table_one["mode"] == "dp"
    assert "Table 1 (dp)" in summary and "smoking" in summary
    for box in (a for a in result["analyses"] if a["kind"] == "dp_boxplot"):
        assert set(box["per_center"]) == {h.center_id for h in synth.HOSPITALS}
        assert box["pooled"] is not None


def test_the_console_was_usable_and_offers_dp_mwus_tests_as_primary(demo: Run) -> None:
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo analyst" in demo.console["studies"] and "succeeded" in demo.console["studies"]
    assert "DP Mann-Whitney" in demo.console["study"]
    for test in ("sum", "weighted", "fisher"):
        assert f'value="dp_mwu:{test}"' in demo.console["new"], test


def test_the_centers_run_in_dp_mode_with_declared_public_sizes(demo: Run) -> None:
    workdir, done = demo.workdir, demo
    assert done.returncode == 0, done.stdout + done.stderr
    for h in synth.HOSPITALS:
        text = (workdir / "config" / f"{h.center_id}.toml").read_text()
        declared = tomllib.loads(text)["datasets"][synth.DATASET]
        assert declared["release_mode"] == "dp"
        assert declared["declared_n_by_group"] == {"control": h.n_control,
                                                   "treated": h.n_treated}
        assert "never\n# counted from the data" in text  # the TOML says what a declared size is


def test_no_exact_release_was_made_and_the_ledgers_paid_what_the_study_says(demo: Run) -> None:
    workdir, done = demo.workdir, demo
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
