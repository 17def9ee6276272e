"""``fedstats demo`` run as a user runs it (a subprocess): its report agrees with the core, no
center ever released a count in 1..K−1, the centers refine each other's signed tables (their
signing keys stay in the demo's config folder, never printed), and every process it started is
gone afterwards — also when it is interrupted (SIGINT as from Ctrl-C, SIGTERM) while its services
start."""

from __future__ import annotations

import html
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedstats_cli import synth
from fedstats_cli.demo import K, demo_spec
from shared.binning import BinTable
from shared.mwu import fisher_test, mann_whitney, sum_test, table_test, weighted_test
from tests.helpers.processes import clean_env, fedstats, wait_gone
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

# Calls whose answers are K-anonymous, and where their counts are.
K_ANONYMOUS_CALLS = ("info", "table", "refine", "mwu", "yj_moments")


def released_counts(call: str, response: dict[str, Any]) -> list[float]:
    """Every count (size, bin count, run total, group size) in one non-DP center answer."""
    if call == "info":
        return [n for ds in response["datasets"]
                for n in (ds["n_records"], *ds["n_by_group"].values())]
    if call == "table":
        return [c for row in response["counts"] for c in row]
    if call == "refine":
        return [t for runs in response["runs"] for t in runs["totals"]]
    if call == "mwu":
        return [response["n_x"], response["n_y"]]
    if call == "yj_moments":
        return [response["n"]]
    raise AssertionError(call)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str],
                                                             float]:
    workdir = tmp_path_factory.mktemp("demo") / "work"
    started = time.monotonic()
    done = subprocess.run([*fedstats(), "demo", "--workdir", str(workdir)],
                          cwd=workdir.parent, env=clean_env(), capture_output=True, text=True,
                          timeout=scaled(180))
    return workdir, done, time.monotonic() - started


def test_demo_succeeds_within_a_minute_and_writes_its_report(demo: Any) -> None:
    workdir, done, seconds = demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert seconds < scaled(60)
    assert "succeeded" in done.stdout and "every process stopped" in done.stdout
    html = (workdir / "report.html").read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html
    assert "Mann-Whitney tests" in html and "Federated K-anonymous table" in html
    # Self-contained: nothing is fetched when the report is opened.
    assert "src=\"http" not in html and "href=\"http" not in html


def test_the_mwu_pvalues_are_the_cores_on_the_same_data(demo: Any) -> None:
    workdir, done, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads((workdir / "study.json").read_text())
    result = view["result"]
    data = {cid: synth.read_groups(workdir / "data" / f"{cid}.csv") for cid in result["centers"]}
    local = [mann_whitney(*data[cid]) for cid in result["centers"]]
    (mwu,) = [a for a in result["analyses"] if a["kind"] == "mwu"]
    for name, test in (("sum", sum_test), ("weighted", weighted_test), ("fisher", fisher_test)):
        assert mwu["tests"][name]["pvalue"] == pytest.approx(test(local).pvalue, rel=1e-9), name
    released = mwu["table"]
    table = BinTable(limits=np.asarray([float(v) for v in released["limits"]]),
                     counts=np.asarray(released["counts"], dtype=float), k=released["k"])
    assert mwu["tests"]["table"]["pvalue"] == pytest.approx(table_test(table).pvalue, rel=1e-9)
    # The federated table holds every record of every center, per arm.
    totals = [sum(len(data[cid][g]) for cid in data) for g in (0, 1)]
    assert released["totals"] == pytest.approx(totals)
    # The summary printed shows these p-values.
    assert f"{mwu['tests']['sum']['pvalue']:.4g}" in done.stdout


def test_every_analysis_asked_is_in_the_report_and_the_rest_is_named(demo: Any) -> None:
    """The demo degrades to what the coordinator can do, and says so; it never fakes a result."""
    workdir, done, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    spec, notes = demo_spec()
    view = json.loads((workdir / "study.json").read_text())
    kinds = [a["kind"] for a in view["result"]["analyses"]]
    assert kinds == [a["kind"] for a in spec["analyses"]]
    report = (workdir / "report.html").read_text()
    for note in notes:
        assert note in done.stdout and html.escape(note) in report
    data = {cid: synth.read_groups(workdir / "data" / f"{cid}.csv")
            for cid in view["result"]["centers"]}
    # The federated quantiles are read from the federated table: no YJ data (their ε-DP
    # moment sums would need a budget the demo does not spend), no YJ-moment release.
    (quantiles,) = [a for a in spec["analyses"] if a["kind"] == "quantiles"]
    assert "yj_data" not in quantiles["estimators"]
    releases = json.loads((workdir / "releases.json").read_text())
    assert "yj_moments" not in {r["call"] for r in releases}
    for analysis in view["result"]["analyses"]:
        if analysis["kind"] == "quantiles":
            # Estimated from the federated table only, close to the pooled data's quantiles.
            for g, level in enumerate(synth.LEVELS):
                pooled = np.concatenate([data[cid][g] for cid in data])
                got = analysis["estimates"]["interpolation"][level]["quantiles"]
                want = np.quantile(pooled, analysis["levels"])
                np.testing.assert_allclose(got, want, rtol=0.1)
        if analysis["kind"] == "dp_quantiles":
            assert set(analysis["per_center"]) == set(data)
            lo, hi = synth.BOUNDS
            for values in analysis["per_center"].values():
                assert values == sorted(values) and lo <= values[0] and values[-1] <= hi
        if analysis["kind"] == "dp_boxplot":
            boxes = [*analysis["per_center"].values(), analysis["pooled"]]
            assert set(analysis["per_center"]) == set(data)
            for box in boxes:
                five = [box[k] for k in ("lower_whisker", "q1", "median", "q3",
                                         "upper_whisker")]
                lo, hi = synth.BOUNDS
                assert lo <= five[0] and five[-1] <= hi
                assert five == sorted(five)


def test_no_center_released_a_count_below_k(demo: Any) -> None:
    workdir, done, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    releases = json.loads((workdir / "releases.json").read_text())
    calls = {r["call"] for r in releases}
    # Two centers refined the table: each refined a statement a peer signed (they trust each
    # other's keys).
    assert {"info", "table", "refine", "mwu"} <= calls
    assert sum(r["call"] == "refine" for r in releases) == len(synth.HOSPITALS) - 1
    for r in releases:
        if r["call"] in K_ANONYMOUS_CALLS:
            counts = released_counts(r["call"], r["response"])
            assert counts, r
            small = [c for c in counts if 0 < c < K]
            assert not small, (r["center"], r["call"], small)
        else:
            # Anything else must be a DP release, paid for (its counts are noisy, not K-anon).
            assert "epsilon" in r["response"], r


def test_every_process_is_gone_and_no_secret_was_printed(demo: Any) -> None:
    workdir, done, _ = demo
    pids = [p["pid"] for p in json.loads((workdir / "processes.json").read_text()).values()]
    assert len(pids) == 4
    assert wait_gone(pids) == []
    # the demo analyst's account token, kept for the console (mode 0600), never printed
    token_file = workdir / "config" / "analyst.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    analyst_token = token_file.read_text().strip()
    assert "analyst_tokens" not in (workdir / "config" / "coordinator.toml").read_text()
    assert len(analyst_token) >= 32
    assert analyst_token not in done.stdout + done.stderr
    assert analyst_token not in (workdir / "report.html").read_text()
    # Each center's signing key: in the config folder, readable by its owner only, and in no
    # output, log, report or release.
    shown = done.stdout + done.stderr + "".join(
        p.read_text() for p in [*(workdir / "logs").glob("*.log"), workdir / "report.html",
                                workdir / "releases.json", workdir / "study.json"])
    for h in synth.HOSPITALS:
        key = workdir / "config" / f"{h.center_id}.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        assert key.read_text().strip() not in shown, key


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_demo_stops_every_process_it_started(
    tmp_path: Path, sig: signal.Signals
) -> None:
    workdir = tmp_path / "work"
    # Its output to files, not pipes: nothing reads a pipe while the demo starts.
    with open(tmp_path / "out.txt", "wb") as out_file, open(tmp_path / "err.txt", "wb") as err_file:
        proc = subprocess.Popen([*fedstats(), "demo", "--workdir", str(workdir)], cwd=tmp_path,
                                env=clean_env(), stdout=out_file, stderr=err_file)

    def output() -> str:
        return (tmp_path / "out.txt").read_text() + (tmp_path / "err.txt").read_text()

    try:
        listing = workdir / "processes.json"
        deadline = time.monotonic() + scaled(60)
        while not listing.exists():
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, "the demo started no process within 60 s"
            time.sleep(0.05)
        time.sleep(0.5)  # the services are importing: the hardest moment to stop them
        proc.send_signal(sig)
        proc.wait(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), output()
    assert "Traceback" not in (tmp_path / "err.txt").read_text()
    pids = [p["pid"] for p in json.loads(listing.read_text()).values()]
    assert wait_gone(pids) == []


def test_the_demo_keeps_its_services_and_console_up_with_keep(tmp_path: Path) -> None:
    """``--keep``: the console's address and the token file are printed, the console signs the
    demo's analyst in (shown by its account's name), a center killed is named with how to
    restart it while the other services keep answering, and Ctrl-C then stops every process
    (exit 0: the study succeeded)."""
    import re

    import httpx

    workdir = tmp_path / "work"
    with open(tmp_path / "out.txt", "wb") as out_file, open(tmp_path / "err.txt", "wb") as err_file:
        proc = subprocess.Popen([*fedstats(), "demo", "--workdir", str(workdir), "--keep"],
                                cwd=tmp_path, env=clean_env(), stdout=out_file, stderr=err_file)

    def output() -> str:
        return (tmp_path / "out.txt").read_text() + (tmp_path / "err.txt").read_text()

    try:
        deadline = time.monotonic() + scaled(180)
        while "Console: " not in output():
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, output()
            time.sleep(0.2)
        time.sleep(0.2)
        found = re.search(r"Console: (http://\S+/ui) \(sign in with the analyst token in (\S+)\)",
                          output())
        assert found, output()
        url, token_file = found.group(1), Path(found.group(2))
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token not in output()
        with httpx.Client() as client:
            form = client.get(url + "/login")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
            assert form.status_code == 200 and csrf
            signed = client.post(url + "/login", data={"csrf_token": csrf.group(1),
                                                       "token": token})
            assert signed.status_code == 303 and signed.headers["location"] == "/ui/studies"
            studies = client.get(url + "/studies")
            assert "succeeded" in studies.text
            # the demo's analyst is a named account, not "analyst_tokens #0"
            assert "demo analyst" in studies.text and "analyst_tokens #" not in studies.text
        assert proc.poll() is None  # still serving
        # One center crashes: the demo names it with the line that restarts it, the other
        # services keep answering (an outage can be rehearsed).
        services = json.loads((workdir / "processes.json").read_text())
        victim = "hospital_b"
        os.kill(services[victim]["pid"], signal.SIGKILL)
        while f"{victim} stopped" not in output():  # the event: the demo's own line
            assert proc.poll() is None, output()
            time.sleep(0.2)
        while "fedstats_cli center serve --config" not in output():
            assert proc.poll() is None, output()
            time.sleep(0.1)
        told = output()
        assert f"{victim}.toml" in told and "keep running" in told, told
        with httpx.Client(trust_env=False) as client:
            for name, service in services.items():
                if name != victim:
                    assert client.get(service["url"] + "/v1/health").status_code == 200, name
        assert proc.poll() is None  # still serving the others
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output()
    assert "every process stopped" in output()
    pids = [p["pid"] for p in json.loads((workdir / "processes.json").read_text()).values()]
    assert wait_gone(pids) == []
