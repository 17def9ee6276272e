"""The coordinator as operators run it: ``python -m coordinator`` under uvicorn, talking to real
``python -m center_agent`` processes on loopback ports; killed with SIGKILL mid-study and
restarted, its record of the study stays consistent."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from coordinator_helpers import ANALYST_TOKEN, AUTH, CENTER_TOKENS, K, make_data
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.core.errors import CenterFailure
from fedstats_cli.procs import await_health
from shared.mwu import mann_whitney, sum_test

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def write_toml(path: Path, top: dict[str, Any], tables: dict[str, dict[str, Any]]) -> Path:
    lines = [f"{k} = {toml(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {toml(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def log_file(config: Path) -> Path:
    """Where a service started with ``config`` writes its stderr."""
    return config.with_suffix(".log")


def spawn(stack: contextlib.ExitStack, module: str, config: Path) -> subprocess.Popen[bytes]:
    """``python -m <module> --config <config>``, stopped when ``stack`` closes; its stderr is
    appended to :func:`log_file` (never a pipe nobody reads: a child that logs a lot would fill
    it and block)."""
    with open(log_file(config), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--config", str(config)],
            env=child_env(), stdout=subprocess.DEVNULL, stderr=log,
        )
    stack.callback(stop, proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stderr:
        proc.stderr.close()


def log_tail(config: Path) -> str:
    """The end of a service's stderr (shown when it does not come up)."""
    return log_file(config).read_text(errors="replace")[-20_000:]


def healthy(proc: subprocess.Popen[bytes], port: int, config: Path) -> None:
    """Wait until the process answers /v1/health (it may start in parallel with others)."""
    await_health(proc, f"http://127.0.0.1:{port}", output=lambda: log_tail(config))


def test_a_bad_configuration_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    config = write_toml(tmp_path / "coordinator.toml",
                        {"analyst_tokens": [ANALYST_TOKEN], "min_centers": 0},
                        {"centers.alpha": {"url": "http://127.0.0.1:1",
                                           "token": CENTER_TOKENS["alpha"]}})
    done = subprocess.run([sys.executable, "-m", "coordinator", "--config", str(config)],
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "min_centers: Input should be greater than or equal to 1" in done.stderr
    assert "Traceback" not in done.stderr and CENTER_TOKENS["alpha"] not in done.stderr


def test_real_processes_and_a_sigkill_mid_study(tmp_path: Path) -> None:
    data = make_data()
    ports = {"alpha": free_port(), "beta": free_port()}
    center_configs = {}
    for cid in ports:
        x, y = data[cid]
        csv = tmp_path / f"{cid}.csv"
        csv.write_text("crp,arm\n" + "\n".join(
            [f"{float(v)!r},ctl" for v in x] + [f"{float(v)!r},trt" for v in y]) + "\n")
        center_configs[cid] = write_toml(
            tmp_path / f"{cid}.toml",
            {"center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]], "port": ports[cid],
             "ledger_url": f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}"},
            {"datasets.cohort": {"source": {"kind": "csv", "path": str(csv)},
                                 "variables": ["crp"],
                                 "group": {"column": "arm", "levels": ["ctl", "trt"]},
                                 "epsilon_total": 3.0}},
        )
    # gamma accepts connections (the kernel's backlog) and never answers.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    gamma_port = silent.getsockname()[1]
    port = free_port()
    config = write_toml(
        tmp_path / "coordinator.toml",
        {"analyst_tokens": [ANALYST_TOKEN], "min_centers": 2, "port": port,
         "store_url": f"sqlite:///{tmp_path / 'coordinator.sqlite'}", "read_timeout_s": 60.0},
        {f"centers.{cid}": {"url": f"http://127.0.0.1:{p}", "token": CENTER_TOKENS[cid]}
         for cid, p in [*ports.items(), ("gamma", gamma_port)]},
    )
    base = f"http://127.0.0.1:{port}"
    spec = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
            "analyses": [{"kind": "mwu", "tests": ["sum"]}]}
    with contextlib.ExitStack() as stack:
        stack.callback(silent.close)
        # All three start at once (imports take seconds); none needs another to start.
        centers = [(spawn(stack, "center_agent", center_configs[c]), ports[c], center_configs[c])
                   for c in ports]
        coordinator = spawn(stack, "coordinator", config)
        for proc, p, c in [*centers, (coordinator, port, config)]:
            healthy(proc, p, c)
        client = stack.enter_context(httpx.Client(base_url=base, headers=AUTH, timeout=10))
        done = client.post("/v1/studies", json={**spec, "centers": ["alpha", "beta"]})
        assert done.status_code == 202
        view = poll(client, done.json()["status_url"], until="succeeded")
        expected = sum_test([mann_whitney(*data[c]) for c in ("alpha", "beta")])
        got = view["result"]["analyses"][0]["tests"]["sum"]["pvalue"]
        assert got == pytest.approx(expected.pvalue, rel=1e-12)

        stuck = client.post("/v1/studies", json=spec).json()
        poll(client, stuck["status_url"], until="running")
        wait_for(lambda: len(client.get(stuck["status_url"]).json()["provenance"]) == 2)
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait(timeout=10)

        restarted = spawn(stack, "coordinator", config)
        healthy(restarted, port, config)
        view = client.get(stuck["status_url"]).json()
        assert view["status"] == "failed_resumable"
        assert sorted(p["center"] for p in view["provenance"]) == ["alpha", "beta"]
        assert client.get(done.json()["status_url"]).json()["status"] == "succeeded"
        text = client.get("/v1/studies").text + client.get(stuck["status_url"]).text
        assert not any(token in text for token in CENTER_TOKENS.values())


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def poll(client: httpx.Client, url: str, *, until: str) -> dict[str, Any]:
    view: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal view
        view = client.get(url).json()
        assert view["status"] in ("pending", "running", until), view
        return bool(view["status"] == until)

    wait_for(reached)
    return view



def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedstats test center")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_center_behind_tls_with_its_ca_bundle(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    x, y = make_data()["gamma"]
    csv = tmp_path / "gamma.csv"
    csv.write_text("crp,arm\n" + "\n".join(
        [f"{float(v)!r},ctl" for v in x] + [f"{float(v)!r},trt" for v in y]) + "\n")
    port = free_port()
    config = write_toml(
        tmp_path / "gamma.toml",
        {"center_id": "gamma", "k": K, "tokens": [CENTER_TOKENS["gamma"]], "port": port,
         "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
         "tls_certfile": str(cert), "tls_keyfile": str(key)},
        {"datasets.cohort": {"source": {"kind": "csv", "path": str(csv)}, "variables": ["crp"],
                             "group": {"column": "arm", "levels": ["ctl", "trt"]},
                             "epsilon_total": 3.0}},
    )
    url = f"https://127.0.0.1:{port}"

    async def ask(ca_bundle: Path | None) -> Any:
        center = HttpCenter(
            "gamma", CenterConfig(url=url, token=CENTER_TOKENS["gamma"], ca_bundle=ca_bundle),
            timeout=httpx.Timeout(10, connect=5),
            retry=RetryPolicy(attempts=1),
        )
        try:
            return await center.info()
        finally:
            await center.aclose()

    trusted = ssl.create_default_context(cafile=str(cert))
    with contextlib.ExitStack() as stack:
        proc = spawn(stack, "center_agent", config)
        # health over TLS, trusting the certificate
        await_health(proc, url, verify=trusted, output=lambda: log_tail(config))
        info = asyncio.run(ask(cert))
        assert info.center_id == "gamma"
        with pytest.raises(CenterFailure) as caught:  # the system CAs do not know it
            asyncio.run(ask(None))
        assert caught.value.kind == "unreachable" and "CERTIFICATE" in caught.value.detail.upper()
