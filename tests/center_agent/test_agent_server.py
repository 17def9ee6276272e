"""The center as operators run it: ``python -m center_agent`` under uvicorn on a loopback port,
plain and with TLS (a self-signed certificate made here)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from center_helpers import AUTH, child_env, free_port, running_center, write_toml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _self_signed(directory: Path) -> tuple[Path, Path]:
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
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


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
            assert info.status_code == 200 and info.json()["datasets"][0]["n_records"] == 140
            assert client.get("/v1/budget", headers=AUTH).json()["datasets"]["cohort"] == {
                "total_epsilon": 3.0,
                "spent_epsilon": 0.0,
                "remaining_epsilon": 3.0,
            }
            missing = client.get("/v1/budget/absent", headers=AUTH)
            assert missing.status_code == 404 and missing.json()["error"] == "unknown_dataset"
            big = client.post("/v1/info", headers=AUTH, content=b"0" * 1_000_001)
            assert big.status_code == 413 and big.json()["error"] == "request_too_large"
            assert "server" not in client.get("/v1/health").headers


def test_tls_with_a_self_signed_certificate(tmp_path: Path, base_config: dict[str, Any]) -> None:
    cert, key = _self_signed(tmp_path)
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
    done = subprocess.run(
        [sys.executable, "-m", "center_agent", "--config", str(config)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "k: Input should be greater than or equal to 2" in done.stderr
    assert "Traceback" not in done.stderr
