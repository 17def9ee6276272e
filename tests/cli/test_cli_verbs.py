"""``fedstats study get|list|cancel`` and ``run --idempotency-key`` against real services: three
``python -m center_agent`` and a ``python -m coordinator`` on loopback ports, the third center
behind a proxy that passes its health and info but holds every release (so a study asking it
stays running until it is cancelled).
What a script reads: the ``--json`` output and the exit codes of README.md, "Exit codes" (0
success, 1 a study that did not succeed or a call refused, 2 usage or configuration)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.center import center_config
from tests.helpers.config import write_toml
from tests.helpers.coordinator import ANALYST_TOKEN, AUTH, coordinator_config
from tests.helpers.processes import clean_env, fedstats, running, spawn, stop, wait_healthy
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

STUDY = {
    "dataset": "cohort", "variable": "x", "groups": ["a", "b"], "k": 10,
    "centers": ["alpha", "beta"],
    "analyses": [{"kind": "table"}, {"kind": "mwu", "tests": ["sum", "table"]}],
}


@dataclass
class Federation:
    url: str
    workdir: Path


@contextlib.contextmanager
def holding_releases(target: str) -> Iterator[str]:
    """A proxy to the center at ``target`` that relays GETs (health, info, budget) and holds
    every POST (a release) until the block ends; yields its URL."""
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = httpx.get(target + self.path, timeout=30, headers={
                k: v for k, v in self.headers.items() if k.lower() != "host"})
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("content-type", "text/plain"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def do_POST(self) -> None:
            released.wait(300)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        released.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    workdir = tmp_path_factory.mktemp("verbs")
    centers = {cid: center_config(workdir, {"cohort": 10.0}, name=cid, n=n, seed=seed)
               for cid, n, seed in (("alpha", 260, 1), ("beta", 190, 2), ("gamma", 150, 3))}
    urls = {cid: f"http://127.0.0.1:{port}" for cid, (_, port) in centers.items()}
    with contextlib.ExitStack() as stack:
        urls["gamma"] = stack.enter_context(holding_releases(urls["gamma"]))
        config, port = coordinator_config(
            workdir / "coordinator.toml", urls, min_centers=2, read_timeout_s=scaled(120.0),
            retry={"attempts": 1, "backoff_initial_s": 0.0, "backoff_max_s": 0.0})
        procs = {cid: spawn("center_agent", path) for cid, (path, _) in centers.items()}
        for proc in procs.values():
            stack.callback(stop, proc)
        for cid, proc in procs.items():  # started together: imports take seconds
            wait_healthy(proc, centers[cid][1], centers[cid][0])
        stack.enter_context(running("coordinator", config, port))
        yield Federation(f"http://127.0.0.1:{port}", workdir)


def cli(federation: Federation, *args: str, token: str | None = ANALYST_TOKEN,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(**({"FEDSTATS_ANALYST_TOKEN": token} if token else {}))
    done = subprocess.run([*fedstats(), *args, "--coordinator", federation.url],
                          capture_output=True, text=True, timeout=scaled(180), env=env, cwd=cwd)
    assert ANALYST_TOKEN not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def study_file(directory: Path, name: str = "study.toml", **change: Any) -> Path:
    return write_toml(directory / name, {**STUDY, **change})


def test_run_with_a_key_twice_makes_one_study(federation: Federation, tmp_path: Path) -> None:
    study = study_file(tmp_path)
    first = cli(federation, "study", "run", str(study), "--idempotency-key", "2026-01-31",
                "--out", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr
    study_id = json.loads((tmp_path / "first" / "study.json").read_text())["id"]
    assert f"study {study_id} created" in first.stderr
    again = cli(federation, "study", "run", str(study), "--idempotency-key", "2026-01-31",
                "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert f"study {study_id} already created with this idempotency key" in again.stderr
    assert json.loads((tmp_path / "again" / "study.json").read_text())["id"] == study_id
    listed = as_json(cli(federation, "study", "list", "--json"))
    assert [s["id"] for s in listed].count(study_id) == 1
    # The same key with another study file: refused, exit 1, nothing created.
    other = cli(federation, "study", "run", str(study_file(tmp_path, "k11.toml", k=11)),
                "--idempotency-key", "2026-01-31", "--out", str(tmp_path / "other"))
    assert other.returncode == 1
    assert "(409): idempotency_conflict" in other.stderr and study_id in other.stderr
    assert len(as_json(cli(federation, "study", "list", "--json"))) == len(listed)


def test_get_list_and_cancel_a_finished_study(federation: Federation, tmp_path: Path) -> None:
    run = cli(federation, "study", "run", str(study_file(tmp_path, title="Verbs, titled")),
              "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr
    study_id = json.loads((tmp_path / "run" / "study.json").read_text())["id"]

    got = cli(federation, "study", "get", study_id, "--json")
    assert got.returncode == 0, got.stderr
    view = as_json(got)
    assert view["id"] == study_id and view["status"] == "succeeded"
    assert view["provenance"] and view["result"]["analyses"][1]["kind"] == "mwu"
    written = cli(federation, "study", "get", study_id, "--out", str(tmp_path / "got"))
    assert written.returncode == 0, written.stderr
    assert json.loads((tmp_path / "got" / "study.json").read_text()) == view
    assert (tmp_path / "got" / "report.html").read_text().count(study_id) >= 1
    # --csv DIR: the tables as tidy CSV, as the coordinator's export gives them, and the
    # Methods paragraph.
    tables = cli(federation, "study", "get", study_id, "--out", str(tmp_path / "got2"),
                 "--csv", str(tmp_path / "csv"), "--xlsx", str(tmp_path / "book.xlsx"))
    assert tables.returncode == 0, tables.stderr
    served = httpx.get(f"{federation.url}/v1/studies/{study_id}/export.xlsx", headers=AUTH,
                       timeout=scaled(30))
    assert served.status_code == 200
    assert (tmp_path / "book.xlsx").read_bytes() == served.content  # the same workbook
    exported_files = {p.name for p in (tmp_path / "csv").iterdir()}
    assert {"tests.csv", "effects.csv", "table.csv", "centers.csv", "methods.txt",
            "reproducibility.json", "spec.json"} <= exported_files
    tests_csv = (tmp_path / "csv" / "tests.csv").read_text()
    exported = httpx.get(f"{federation.url}/v1/studies/{study_id}/export.csv",
                         params={"part": "tests"}, headers=AUTH, timeout=scaled(30))
    assert exported.status_code == 200 and exported.text == tests_csv
    cells = list(csv.reader(io.StringIO(tests_csv)))
    assert [r[2] for r in cells[1:]] == ["sum", "table"]
    assert float(cells[1][cells[0].index("pvalue")]) == view["result"]["analyses"][1]["tests"][
        "sum"]["pvalue"]
    methods = (tmp_path / "csv" / "methods.txt").read_text()
    assert "the sum test" in methods and "No primary test was pre-specified" in methods
    record = json.loads((tmp_path / "csv" / "reproducibility.json").read_text())
    assert record == view["reproducibility"] and record["software"]["name"] == "fedstats"
    # Without --out: study-<id> in the working directory, as run does.
    cli(federation, "study", "get", study_id, cwd=tmp_path)
    assert (tmp_path / f"study-{study_id}" / "report.html").is_file()

    listed = cli(federation, "study", "list", "--status", "succeeded", "--limit", "1000")
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "DATASET.VARIABLE", "OWNER", "CREATED", "TITLE"]
    assert any(r.split()[:3] == [study_id, "succeeded", "cohort.x"]
               and r.endswith("Verbs, titled") for r in rows)
    assert as_json(cli(federation, "study", "list", "--json", "--limit", "1"))[0].keys() >= {
        "id", "status", "dataset", "variable", "created_by", "created_at"}

    ended = cli(federation, "study", "cancel", study_id, "--json")
    assert ended.returncode == 1 and ended.stdout == ""
    assert "(409): conflict" in ended.stderr and "succeeded" in ended.stderr


def test_cancel_a_running_study(federation: Federation) -> None:
    # gamma's releases are held: the study stays running until cancelled.
    created = httpx.post(f"{federation.url}/v1/studies", headers=AUTH, timeout=30,
                         json={**STUDY, "centers": ["beta", "gamma"]})
    assert created.status_code == 202, created.text
    study_id = created.json()["id"]
    deadline = time.monotonic() + scaled(30)
    while cli(federation, "study", "status", study_id).stdout.split()[2] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    cancelled = cli(federation, "study", "cancel", study_id, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    view = as_json(cancelled)
    assert view["status"] == "cancelled" and view["error"]["error"] == "cancelled"
    human = cli(federation, "study", "status", study_id)
    assert human.stdout.startswith(f"study {study_id}: cancelled (")
    listed = as_json(cli(federation, "study", "list", "--status", "cancelled", "--json"))
    assert [s["id"] for s in listed] == [study_id]
    # A cancelled study did not succeed: get exits 1 (and still writes what there is).
    assert cli(federation, "study", "get", study_id, "--json").returncode == 1


def test_exit_codes_of_refusals_and_usage(federation: Federation) -> None:
    missing = cli(federation, "study", "get", "0" * 32)
    assert missing.returncode == 1 and "(404): study_not_found" in missing.stderr
    assert cli(federation, "study", "cancel", "0" * 32).returncode == 1
    bad_status = cli(federation, "study", "list", "--status", "finished")
    assert bad_status.returncode == 1 and "query.status" in bad_status.stderr
    no_token = cli(federation, "study", "list", token=None)
    assert no_token.returncode == 2 and "FEDSTATS_ANALYST_TOKEN" in no_token.stderr
    wrong = cli(federation, "study", "list", token="wrong-" + "x" * 20)
    assert wrong.returncode == 1 and "(401)" in wrong.stderr
    usage = cli(federation, "study", "list", "--limit", "many")
    assert usage.returncode == 2 and "--limit" in usage.stderr
