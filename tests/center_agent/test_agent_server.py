"""The center as operators run it: ``python -m center_agent`` under uvicorn on a loopback port,
plain and with TLS (a self-signed certificate, ``tests.helpers.tls``)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from fedstats_cli.procs import free_port
from tests.helpers.center import AUTH
from tests.helpers.config import write_toml
from tests.helpers.processes import run_module, running_center
from tests.helpers.tls import self_signed

pytestmark = pytest.mark.process


def test_real_uvicorn_process(tmp_path: Path, base_config: dict[str, Any]) -> None:
    port = free_port()
    config = write_toml(tmp_path / "center.toml", {**base_config, "port": port})
    base = f"http://127.0.0.1:{port}"
    with running_center(config, port):
        with httpx.Client(base_url=base, timeout=10) as client:
            assert client.get("/v1/health").json() == {"status": "ok"}
            assert client.get("/v1/info").status_code == 401
            bad = client.get("/v1/info", headers={"Authorization": "Bearer not-a-valid-token"})
            assert bad.status_code == 401 and bad.json()["error"] == "unauthenticated"
            info = client.get("/v1/info", headers=AUTH)
            # 134 records of make_table (each level leaving out K rows), shown as 130.
            assert info.status_code == 200 and info.json()["datasets"][0]["n_records"] == 130
            cohort = client.get("/v1/budget", headers=AUTH).json()["datasets"]["cohort"]
            assert cohort.pop("guarantee")["releases"] == 0  # the accountant: nothing yet
            assert cohort == {
                "total_epsilon": 3.0,
                "spent_epsilon": 0.0,
                "remaining_epsilon": 3.0,
                "exact_releases": {},
            }
            missing = client.get("/v1/budget/absent", headers=AUTH)
            assert missing.status_code == 404 and missing.json()["error"] == "unknown_dataset"
            big = client.post("/v1/info", headers=AUTH, content=b"0" * 1_000_001)
            assert big.status_code == 413 and big.json()["error"] == "request_too_large"
            assert "server" not in client.get("/v1/health").headers


def test_tls_with_a_self_signed_certificate(tmp_path: Path, base_config: dict[str, Any]) -> None:
    cert, key = self_signed(tmp_path)
    port = free_port()
    config = write_toml(
        tmp_path / "center.toml",
        {**base_config, "port": port, "tls_certfile": str(cert), "tls_keyfile": str(key)},
    )
    trusted = ssl.create_default_context(cafile=str(cert))
    with running_center(config, port, scheme="https", verify=trusted):
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=trusted) as client:
            assert client.get("/v1/health").status_code == 200
            assert client.get("/v1/info", headers=AUTH).status_code == 200
        with pytest.raises(httpx.ConnectError):  # the system CAs do not know this certificate
            httpx.get(f"https://127.0.0.1:{port}/v1/health", timeout=5)
        with pytest.raises(httpx.TransportError):  # no plain HTTP on a TLS port
            httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5)


def test_a_bad_configuration_stops_start_up_naming_the_key(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    config = write_toml(tmp_path / "center.toml", {**base_config, "k": 1})
    done = run_module("center_agent", "--config", str(config))
    assert done.returncode == 2
    assert "k: Input should be greater than or equal to 2" in done.stderr
    assert "Traceback" not in done.stderr
