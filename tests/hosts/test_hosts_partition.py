"""A federation across hosts: each center, the coordinator and the analyst on a network host of
its own (Linux network namespaces on one bridge, ``tests/helpers/netns.py``), each service with a
TLS certificate for its own hostname from one private CA, mutual TLS between the coordinator and
the centers, and the analyst using the real ``fedstats`` command with ``--ca-bundle``.

The partition test cuts one hospital's link in the middle of a study, checks that the study
stops with that hospital named, heals the link, resumes the study with ``fedstats study resume``
and checks, from each center's own ledger, that nothing was released twice or paid twice.

Skipped, with the reason, where network namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from center_agent.gate.keys import write_key_pair
from fedstats_cli import synth
from fedstats_cli.settings_files import write_toml
from tests.helpers import netns
from tests.helpers.processes import clean_env, fedstats
from tests.helpers.timing import scaled
from tests.helpers.tls import make_ca

pytestmark = [pytest.mark.process, pytest.mark.slow]

DOMAIN = "fedstats.test"
CENTER_PORT = 8700
COORDINATOR_PORT = 8800
EPSILON_TOTAL = 20.0
STARTUP_S = 90.0


@dataclass
class Site:
    host: netns.Host
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    ledger: Path | None = None

    @property
    def url(self) -> str:
        port = COORDINATOR_PORT if self.ledger is None else CENTER_PORT
        return f"https://{self.host.hostname}:{port}"


@dataclass
class Federation:
    network: netns.Network
    centers: dict[str, Site]
    coordinator: Site
    analyst: netns.Host
    ca_bundle: Path
    analyst_token: str
    workdir: Path

    def fedstats(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """The ``fedstats`` command, run on the analyst's host."""
        env = clean_env(FEDSTATS_ANALYST_TOKEN=self.analyst_token)
        return subprocess.run(self.analyst.command([*fedstats(), *args]), env=env,
                              capture_output=True, text=True, timeout=scaled(timeout_s))


def _start(site: Site) -> None:
    role = "center" if site.ledger is not None else "coordinator"
    with open(site.log, "ab") as log:
        site.proc = subprocess.Popen(
            site.host.command([sys.executable, "-m", "fedstats_cli", role, "serve", "--config",
                               str(site.config)]),
            env=clean_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)


def _wait_started(site: Site) -> None:
    """Until the service logs that it serves (a health check from outside its host could not
    reach it, and a center with mutual TLS answers no client without a certificate)."""
    deadline = time.monotonic() + scaled(STARTUP_S)
    while time.monotonic() < deadline:
        assert site.proc is not None
        if site.proc.poll() is not None:
            raise AssertionError(f"{site.host.name} exited:\n{site.log.read_text()[-5000:]}")
        if "Application startup complete" in site.log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{site.host.name} did not start:\n{site.log.read_text()[-5000:]}")


def _stop(site: Site) -> None:
    if site.proc is None or site.proc.poll() is not None:
        return
    os.killpg(site.proc.pid, signal.SIGTERM)
    try:
        site.proc.wait(timeout=scaled(15))
    except subprocess.TimeoutExpired:
        os.killpg(site.proc.pid, signal.SIGKILL)
        site.proc.wait(timeout=scaled(15))


@pytest.fixture
def federation(tmp_path: Path) -> Iterator[Federation]:
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"no network namespaces here: {why}")
    ca = make_ca(tmp_path / "ca")
    with netns.Network("fs", "10.231.17.0/24") as network:
        coordinator_host = network.add_host("coordinator", f"coordinator.{DOMAIN}")
        center_hosts = {h.center_id: network.add_host(
            h.center_id.replace("_", "-"), f"{h.center_id.replace('_', '-')}.{DOMAIN}")
            for h in synth.HOSPITALS}
        analyst = network.add_host("analyst", f"analyst.{DOMAIN}")

        keys = {cid: write_key_pair(tmp_path / f"{cid}.key") for cid in center_hosts}
        centers: dict[str, Site] = {}
        center_tokens = {cid: secrets.token_urlsafe(32) for cid in center_hosts}
        for cid, host in center_hosts.items():
            cert, key = ca.issue(host.hostname, hosts=[host.hostname])
            csv = synth.write_hospital(cid, tmp_path / "data" / f"{cid}.csv")
            ledger = tmp_path / f"{cid}-ledger.sqlite"
            config = write_toml(
                tmp_path / f"{cid}.toml",
                {"center_id": cid, "k": 10, "tokens": [center_tokens[cid]],
                 "host": host.address, "port": CENTER_PORT,
                 "ledger_url": f"sqlite:///{ledger}",
                 "signing_key_file": str(tmp_path / f"{cid}.key"),
                 "peers": {other: k for other, k in keys.items() if other != cid},
                 "tls_certfile": str(cert), "tls_keyfile": str(key),
                 "tls_client_ca": str(ca.cert)},
                {f"datasets.{synth.DATASET}": {
                    "source": {"kind": "csv", "path": str(csv)},
                    "variables": [synth.VARIABLE],
                    "group": {"column": synth.GROUP_COLUMN, "levels": list(synth.LEVELS)},
                    "epsilon_total": EPSILON_TOTAL}},
            )
            centers[cid] = Site(host, config, tmp_path / f"{cid}.log", ledger=ledger)

        cert, key = ca.issue(coordinator_host.hostname, hosts=[coordinator_host.hostname])
        client_cert, client_key = ca.issue("fedstats coordinator", hosts=[], client=True)
        analyst_token = secrets.token_urlsafe(32)
        coordinator_config = write_toml(
            tmp_path / "coordinator.toml",
            {"analyst_tokens": [analyst_token], "min_centers": 2,
             "host": coordinator_host.address, "port": COORDINATOR_PORT,
             "store_url": f"sqlite:///{tmp_path / 'coordinator.sqlite'}",
             "tls_certfile": str(cert), "tls_keyfile": str(key),
             "tls_client_certfile": str(client_cert), "tls_client_keyfile": str(client_key),
             # A cut link shows as a timeout: short ones keep the test short (scaled: a
             # loaded machine must not look like a cut link).
             "connect_timeout_s": scaled(2.0), "read_timeout_s": scaled(4.0),
             "retry": {"attempts": 2, "backoff_initial_s": 0.1, "backoff_max_s": 0.5}},
            {f"centers.{cid}": {"url": site.url, "token": center_tokens[cid],
                                "ca_bundle": str(ca.cert)}
             for cid, site in centers.items()},
        )
        coordinator = Site(coordinator_host, coordinator_config, tmp_path / "coordinator.log")
        sites = [*centers.values(), coordinator]
        try:
            for site in sites:
                _start(site)
            for site in sites:
                _wait_started(site)
            yield Federation(network, centers, coordinator, analyst, ca.cert, analyst_token,
                             tmp_path)
        finally:
            for site in sites:
                _stop(site)


def _study_file(path: Path) -> Path:
    """Every analysis kind that asks each center: exact tables and MWU sizes, ε-DP quantiles and
    boxplots (paid from the budgets, so a release paid twice would show)."""
    bounds = list(synth.BOUNDS)
    spec: dict[str, Any] = {
        "dataset": synth.DATASET, "variable": synth.VARIABLE, "groups": list(synth.LEVELS),
        "k": 10,
        "analyses": [
            {"kind": "table", "lower": 0.0, "upper": "buffer"},
            {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"]},
            {"kind": "dp_quantiles", "group": "treated", "levels": [0.25, 0.5, 0.75],
             "epsilon": 0.5, "bounds": bounds},
            {"kind": "dp_quantiles", "group": "control", "levels": [0.25, 0.5, 0.75],
             "epsilon": 0.5, "bounds": bounds},
            {"kind": "dp_boxplot", "group": "treated", "epsilon": 0.5, "bounds": bounds,
             "per_center": True, "pooled": True},
            {"kind": "dp_boxplot", "group": "control", "epsilon": 0.5, "bounds": bounds,
             "per_center": True, "pooled": True},
        ],
    }
    return write_toml(path, spec, {})


def _released(ledger: Path) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM fedstats_release").fetchone()[0])


def _ledger_facts(ledger: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        stored = db.execute("SELECT request_key, epsilon_units FROM fedstats_release").fetchall()
        spent = db.execute("SELECT spent_units FROM fedstats_budget").fetchone()[0]
        audit = [dict(r) for r in db.execute("SELECT * FROM fedstats_audit").fetchall()]
    return {"stored": {r["request_key"]: r["epsilon_units"] for r in stored},
            "n_stored": len(stored), "spent_units": spent, "audit": audit}


def test_a_study_across_hosts_survives_a_cut_link_and_resumes_paying_nothing_twice(
    federation: Federation,
) -> None:
    fed = federation
    study = _study_file(fed.workdir / "study.toml")
    coordinator = fed.coordinator.url

    # Anyone outside the namespaces cannot reach the federation at all.
    outside = subprocess.run([*fedstats(), "health", coordinator, "--timeout", "1"],
                             env=clean_env(), capture_output=True, text=True, timeout=scaled(60))
    assert outside.returncode == 1

    # Without the private CA the analyst's command refuses the coordinator's certificate.
    untrusted = fed.fedstats("study", "run", str(study), "--coordinator", coordinator,
                             "--out", str(fed.workdir / "untrusted"), "--timeout", str(scaled(60)))
    assert untrusted.returncode != 0
    assert "certificate" in (untrusted.stderr + untrusted.stdout).lower()

    # hospital_b answers slowly (a narrow link), so the study is still asking it when cut.
    victim = fed.centers["hospital_b"]
    victim.host.shape("400kbit")
    out = fed.workdir / "run"
    env = clean_env(FEDSTATS_ANALYST_TOKEN=fed.analyst_token)
    # Its output goes to files: a pipe nobody reads while the test polls could fill and block it.
    said_out, said_err = fed.workdir / "run.out", fed.workdir / "run.err"
    with open(said_out, "wb") as out_file, open(said_err, "wb") as err_file:
        run = subprocess.Popen(
            fed.analyst.command([*fedstats(), "study", "run", str(study), "--coordinator",
                                 coordinator, "--ca-bundle", str(fed.ca_bundle), "--out",
                                 str(out), "--timeout", str(scaled(240))]),
            env=env, stdout=out_file, stderr=err_file)
    assert victim.ledger is not None
    deadline = time.monotonic() + scaled(120)
    while _released(victim.ledger) < 1:
        assert run.poll() is None, (said_out.read_text(), said_err.read_text())
        assert time.monotonic() < deadline, "hospital_b released nothing"
        time.sleep(0.02)
    victim.host.cut()
    run.wait(timeout=scaled(300))
    stdout, stderr = said_out.read_text(), said_err.read_text()
    assert run.returncode == 1, (stdout, stderr)
    first = json.loads((out / "study.json").read_text())
    assert first["status"] != "succeeded"
    said = json.dumps(first.get("error")) + json.dumps(first.get("result")) + stdout + stderr
    assert "hospital_b" in said, said
    assert "hospital_a" not in json.dumps(first.get("error") or {})

    victim.host.heal()
    resumed_out = fed.workdir / "resumed"
    resumed = fed.fedstats("study", "resume", first["id"], "--coordinator", coordinator,
                           "--ca-bundle", str(fed.ca_bundle), "--out", str(resumed_out),
                           "--timeout", str(scaled(240)))
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr,
                                     fed.coordinator.log.read_text()[-5000:])
    final = json.loads((resumed_out / "study.json").read_text())
    assert final["status"] == "succeeded"
    assert final["id"] == first["id"]

    for cid, site in fed.centers.items():
        assert site.ledger is not None
        facts = _ledger_facts(site.ledger)
        released = [a for a in facts["audit"] if a["outcome"] == "released"]
        keys = [a["request_key"] for a in released]
        # Released once each, and every release stored is one the audit saw released.
        assert len(keys) == len(set(keys)), cid
        assert set(keys) == set(facts["stored"]), cid
        # Paid once: the budget's spend is the sum of the stored releases' ε.
        assert facts["spent_units"] == sum(facts["stored"].values()), cid
        # Every release names the study and the analyst it was for.
        assert {a.get("study_id") for a in released} == {first["id"]}, cid
        assert all(a.get("analyst_id") for a in released), cid
