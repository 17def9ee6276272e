"""TLS everywhere, over real processes: a private CA; two ``python -m center_agent`` serving HTTPS
with mutual TLS (``tls_client_ca``: a caller without a certificate that CA signed cannot
connect); a ``python -m coordinator`` serving HTTPS and presenting its client certificate to
them; the ``fedstats`` command trusting the CA through ``--ca-bundle`` or ``SSL_CERT_FILE``, and
failing with a clear message without either. A coordinator without a client certificate gets
each center named, unreachable because the TLS handshake failed. ``fedstats study resume``
finishes a study a coordinator left ``failed_resumable``.

The first tests need no process: the TLS options the services serve with, and the coordinator's
client certificate settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn.config
from pydantic import SecretStr

from coordinator.accounts import config_analyst
from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, ConfigError, RetryPolicy, Settings
from coordinator.core.errors import CenterFailure
from coordinator.db import Store
from coordinator.models import StudySpec
from fedstats_cli.procs import free_port
from fedstats_service import tls
from fedstats_service.auth import fingerprint
from fedstats_service.serving import tls_options
from tests.helpers.center import TOKEN as CENTER_TOKEN
from tests.helpers.center import center_config
from tests.helpers.config import write_toml
from tests.helpers.coordinator import ANALYST_TOKEN
from tests.helpers.processes import clean_env, fedstats, running, spawn, stop, wait_healthy
from tests.helpers.timing import scaled
from tests.helpers.tls import CA, CertPair, make_ca

CENTERS = {"alpha": (260, 1), "beta": (190, 2)}  # id -> (rows, seed)
HOSTS = ("localhost", "127.0.0.1")
STUDY = {
    "dataset": "cohort", "variable": "x", "groups": ["a", "b"], "k": 10,
    "analyses": [{"kind": "table"}, {"kind": "mwu", "tests": ["sum", "table"]}],
}


# -- without processes ---------------------------------------------------------------------------


def test_the_served_tls_context_requires_tls_1_2_and_a_client_certificate(tmp_path: Path) -> None:
    """The context uvicorn builds from ``tls_options`` (as ``uvicorn.Config.load`` does)."""
    ca = make_ca(tmp_path)
    server = ca.issue("server", HOSTS)
    assert tls_options(None, None) == {}
    with pytest.raises(ValueError, match="needs a certificate"):
        tls_options(None, None, ca.cert)

    def built(options: dict[str, Any]) -> ssl.SSLContext:
        return uvicorn.config.create_ssl_context(
            options["ssl_certfile"], options["ssl_keyfile"], None, options["ssl_version"],
            options.get("ssl_cert_reqs", ssl.CERT_NONE), options.get("ssl_ca_certs"), None)

    plain = built(tls_options(server.cert, server.key))
    mutual = built(tls_options(server.cert, server.key, ca.cert))
    for context in (plain, mutual):
        assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert plain.verify_mode == ssl.CERT_NONE
    assert mutual.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in mutual.get_ca_certs()] == [
        ((("commonName", "fedstats test CA"),),)]


def coordinator_settings(tmp_path: Path, **extra: Any) -> Settings:
    settings: dict[str, Any] = {
        "analyst_tokens": [SecretStr(ANALYST_TOKEN)], "min_centers": 1,
        "store_url": f"sqlite:///{tmp_path / 'store.sqlite'}",
        "centers": {"alpha": {"url": "https://127.0.0.1:1", "token": CENTER_TOKEN}},
    }
    return Settings.load(None, **(settings | extra))


def test_the_coordinator_client_certificate_settings(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    client = ca.issue("coordinator", client=True)
    other = ca.issue("other", client=True)
    settings = coordinator_settings(tmp_path, tls_client_certfile=str(client.cert),
                                    tls_client_keyfile=str(client.key))
    assert settings.client_cert == (client.cert, client.key)
    assert coordinator_settings(tmp_path).client_cert is None
    with pytest.raises(ConfigError, match="tls_client_certfile and tls_client_keyfile must be "
                                          "given together"):
        coordinator_settings(tmp_path, tls_client_certfile=str(client.cert))
    with pytest.raises(ConfigError, match="not a PEM certificate and its private key"):
        coordinator_settings(tmp_path, tls_client_certfile=str(client.cert),
                             tls_client_keyfile=str(other.key))
    with pytest.raises(ConfigError, match="tls_client_keyfile"):
        coordinator_settings(tmp_path, tls_client_certfile=str(client.cert),
                             tls_client_keyfile=str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigError, match=r"centers\.alpha\.ca_bundle: .*not a PEM file"):
        coordinator_settings(tmp_path, centers={"alpha": {
            "url": "https://127.0.0.1:1", "token": CENTER_TOKEN, "ca_bundle": str(client.key)}})


def test_trust_follows_the_bundle_then_ssl_cert_file(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ca, other = make_ca(tmp_path / "ca"), make_ca(tmp_path / "other")

    def trusted(context: ssl.SSLContext) -> list[Any]:
        return [c["subject"] for c in context.get_ca_certs()]

    monkeypatch.setenv("SSL_CERT_FILE", str(other.cert))
    assert trusted(tls.client_context()) == trusted(other.client_context())
    assert trusted(tls.client_context(ca.cert)) == trusted(ca.client_context())
    assert tls.client_context().minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(tls.TrustError, match="not a readable PEM file of CA certificates"):
        tls.client_context(tmp_path / "missing.pem")


# -- the federation over HTTPS -------------------------------------------------------------------


@dataclass
class Federation:
    workdir: Path
    ca: CA
    client_cert: CertPair  # the coordinator's, signed by ca
    centers: dict[str, int]  # id -> HTTPS port
    url: str  # the coordinator's
    interrupted: str  # a study the coordinator found running at start: failed_resumable

    def coordinator_toml(self, name: str, *, client_cert: bool) -> tuple[Path, int]:
        """A coordinator over these centers (each trusted through ``ca_bundle``), serving
        HTTPS with its own certificate and presenting ``client_cert`` when asked."""
        port = free_port()
        server = self.ca.issue(f"{name}-server", HOSTS)
        client = ({"tls_client_certfile": self.client_cert.cert,
                   "tls_client_keyfile": self.client_cert.key} if client_cert else {})
        path = write_toml(self.workdir / f"{name}.toml", {
            "analyst_tokens": [ANALYST_TOKEN], "port": port, "min_centers": 2,
            "store_url": f"sqlite:///{self.workdir / f'{name}.sqlite'}",
            "connect_timeout_s": scaled(5.0), "read_timeout_s": scaled(60.0),
            "retry": {"attempts": 2, "backoff_initial_s": 0.1, "backoff_max_s": 0.2},
            "tls_certfile": server.cert, "tls_keyfile": server.key, **client,
            "centers": {cid: {"url": f"https://127.0.0.1:{p}", "token": CENTER_TOKEN,
                              "ca_bundle": self.ca.cert} for cid, p in self.centers.items()},
        })
        return path, port


def seed_interrupted_study(store_url: str) -> str:
    """The analyst's study recorded as running, as a coordinator that died mid-study leaves it;
    the next coordinator to start on this store marks it ``failed_resumable``."""
    store = Store(store_url)
    try:
        study_id = uuid.uuid4().hex
        store.create_study(study_id, StudySpec.model_validate(STUDY).model_dump_json(),
                           created_by=fingerprint(ANALYST_TOKEN),
                           analyst_id=config_analyst(ANALYST_TOKEN))
        assert store.set_status(study_id, "running")
    finally:
        store.close()
    return study_id


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    workdir = tmp_path_factory.mktemp("tls")
    ca = make_ca(workdir / "pki")
    configs: dict[str, tuple[Path, int]] = {}
    for cid, (n, seed) in CENTERS.items():
        cert, key = ca.issue(cid, HOSTS)
        configs[cid] = center_config(workdir, {"cohort": 10.0}, name=cid, n=n, seed=seed,
                                     tls_certfile=str(cert), tls_keyfile=str(key),
                                     tls_client_ca=str(ca.cert))
    fed = Federation(workdir, ca, ca.issue("coordinator-client", client=True),
                     {cid: port for cid, (_, port) in configs.items()}, "", "")
    config, port = fed.coordinator_toml("coordinator", client_cert=True)
    fed.interrupted = seed_interrupted_study(f"sqlite:///{workdir / 'coordinator.sqlite'}")
    fed.url = f"https://127.0.0.1:{port}"
    # Health of a mutual-TLS center needs the client certificate too.
    as_client = ca.client_context(fed.client_cert)
    with contextlib.ExitStack() as stack:
        procs = {cid: spawn("center_agent", path) for cid, (path, _) in configs.items()}
        for proc in procs.values():
            stack.callback(stop, proc)
        for cid, proc in procs.items():  # all started at once: imports take seconds
            wait_healthy(proc, configs[cid][1], configs[cid][0], scheme="https",
                         verify=as_client)
        stack.enter_context(running("coordinator", config, port, scheme="https",
                                    verify=ca.client_context()))
        yield fed


def cli(*args: str, env: dict[str, str] | None = None,
        timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    """``fedstats <args>`` with the analyst's token in the environment and no trust variable
    of this machine's (only what ``env`` adds)."""
    base = {k: v for k, v in clean_env().items() if k not in tls.TRUST_ENV}
    return subprocess.run([*fedstats(), *args], capture_output=True, text=True,
                          timeout=timeout_s,
                          env={**base, "FEDSTATS_ANALYST_TOKEN": ANALYST_TOKEN, **(env or {})})


def study_file(directory: Path) -> Path:
    path = directory / "study.toml"
    write_toml(path, STUDY)
    return path


def written(out: Path) -> dict[str, Any]:
    view: dict[str, Any] = json.loads((out / "study.json").read_text())
    assert (out / "report.html").is_file()
    return view


def assert_no_secret(text: str) -> None:
    assert ANALYST_TOKEN not in text and CENTER_TOKEN not in text
    assert "Traceback" not in text


@pytest.mark.process
def test_study_run_trusting_the_ca_with_ca_bundle(federation: Federation,
                                                  tmp_path: Path) -> None:
    done = cli("study", "run", str(study_file(tmp_path)), "--coordinator", federation.url,
               "--ca-bundle", str(federation.ca.cert), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    view = written(tmp_path / "out")
    assert view["status"] == "succeeded"
    # Both centers answered the coordinator over mutual TLS.
    assert {p["center"] for p in view["provenance"]} == set(CENTERS)
    assert_no_secret(done.stdout + done.stderr)


@pytest.mark.process
def test_study_run_trusting_the_ca_with_ssl_cert_file(federation: Federation,
                                                      tmp_path: Path) -> None:
    done = cli("study", "run", str(study_file(tmp_path)), "--coordinator", federation.url,
               "--out", str(tmp_path / "out"), env={"SSL_CERT_FILE": str(federation.ca.cert)})
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "out")["status"] == "succeeded"


@pytest.mark.process
def test_study_run_without_trust_fails_saying_why(federation: Federation,
                                                  tmp_path: Path) -> None:
    # SSL_CERT_DIR at an empty folder: no system CA signed the test CA anyway, but this keeps
    # the check independent of this machine's trust store.
    empty = tmp_path / "no-cas"
    empty.mkdir()
    done = cli("study", "run", str(study_file(tmp_path)), "--coordinator", federation.url,
               "--out", str(tmp_path / "out"), env={"SSL_CERT_DIR": str(empty)})
    assert done.returncode == 1
    assert "fedstats study run: TLS handshake failed: certificate verify failed" in done.stderr
    assert "--ca-bundle FILE" in done.stderr
    assert not (tmp_path / "out").exists()
    assert_no_secret(done.stdout + done.stderr)
    # A CA that did not sign it: the same, naming the bundle given.
    other = make_ca(tmp_path / "other")
    done = cli("study", "status", "0" * 32, "--coordinator", federation.url,
               "--ca-bundle", str(other.cert))
    assert done.returncode == 1
    assert "certificate verify failed" in done.stderr and str(other.cert) in done.stderr
    # A bundle that is no PEM file is a usage error naming it.
    done = cli("study", "status", "0" * 32, "--coordinator", federation.url,
               "--ca-bundle", str(study_file(tmp_path)))
    assert done.returncode == 2
    assert "--ca-bundle" in done.stderr and "not a readable PEM file" in done.stderr


@pytest.mark.process
def test_health_over_https_and_mutual_tls(federation: Federation) -> None:
    ca = str(federation.ca.cert)
    assert cli("health", federation.url, "--ca-bundle", ca).returncode == 0
    untrusted = cli("health", federation.url)
    assert untrusted.returncode == 1
    assert "certificate verify failed" in untrusted.stderr
    center = f"https://127.0.0.1:{federation.centers['alpha']}"
    cert, key = federation.client_cert
    assert cli("health", center, "--ca-bundle", ca, "--client-cert", str(cert),
               "--client-key", str(key)).returncode == 0
    refused = cli("health", center, "--ca-bundle", ca)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"fedstats health: {tls.NO_CLIENT_CERT}"


@pytest.mark.process
def test_study_resume_finishes_a_failed_resumable_study(federation: Federation,
                                                        tmp_path: Path) -> None:
    study_id, ca = federation.interrupted, str(federation.ca.cert)
    status = cli("study", "status", study_id, "--coordinator", federation.url, "--ca-bundle", ca)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"study {study_id}: failed_resumable")
    done = cli("study", "resume", study_id, "--coordinator", federation.url, "--ca-bundle", ca,
               "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert f"study {study_id} resumed" in done.stderr
    view = written(tmp_path / "out")
    assert view["id"] == study_id and view["status"] == "succeeded"
    assert [a["kind"] for a in view["result"]["analyses"]] == ["table", "mwu"]
    again = cli("study", "resume", study_id, "--coordinator", federation.url, "--ca-bundle", ca)
    assert again.returncode == 1
    assert "did not resume" in again.stderr and "(409): conflict:" in again.stderr
    assert "is succeeded" in again.stderr and "can be resumed" in again.stderr
    unknown = cli("study", "status", "f" * 32, "--coordinator", federation.url, "--ca-bundle", ca)
    assert unknown.returncode == 1 and "(404)" in unknown.stderr


@pytest.mark.process
def test_a_coordinator_without_a_client_certificate_names_each_center(
        federation: Federation, tmp_path: Path) -> None:
    config, port = federation.coordinator_toml("no-client-cert", client_cert=False)
    url = f"https://127.0.0.1:{port}"
    ca = str(federation.ca.cert)
    with running("coordinator", config, port, scheme="https",
                 verify=federation.ca.client_context()):
        with httpx.Client(base_url=url, verify=federation.ca.client_context(), timeout=60,
                          headers={"Authorization": f"Bearer {ANALYST_TOKEN}"}) as client:
            statuses = client.get("/v1/centers").raise_for_status().json()
        assert {s["id"] for s in statuses} == set(CENTERS)
        for status in statuses:
            assert not status["healthy"]
            assert status["problem"]["kind"] == "unreachable"
            assert tls.NO_CLIENT_CERT in status["problem"]["detail"]
        done = cli("study", "run", str(study_file(tmp_path)), "--coordinator", url,
                   "--ca-bundle", ca, "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    view = written(tmp_path / "out")
    assert view["status"] == "failed" and not view.get("result")
    text = json.dumps(view["error"])
    assert "TLS handshake failed" in text and "client certificate" in text
    assert any(f"center '{cid}' (unreachable)" in text for cid in CENTERS), text
    assert_no_secret(done.stdout + done.stderr + json.dumps(view))


@pytest.mark.process
def test_the_coordinators_client_to_a_mutual_tls_center(federation: Federation,
                                                        tmp_path: Path) -> None:
    """``HttpCenter`` against a running center: the right client certificate is let in; none,
    or one another CA signed, is refused in the handshake, and the failure says which."""
    url = f"https://127.0.0.1:{federation.centers['beta']}"
    stranger = make_ca(tmp_path / "stranger").issue("coordinator", client=True)

    async def info(client_cert: CertPair | None) -> Any:
        center = HttpCenter("beta", CenterConfig(url=url, token=CENTER_TOKEN,
                                                 ca_bundle=federation.ca.cert),
                            timeout=httpx.Timeout(10, connect=5), retry=RetryPolicy(attempts=1),
                            client_cert=client_cert)
        try:
            return await center.info()
        finally:
            await center.aclose()

    assert asyncio.run(info(federation.client_cert)).center_id == "beta"
    # Nothing listening: a connection refused, not blamed on TLS.
    url = f"https://127.0.0.1:{free_port()}"
    with pytest.raises(CenterFailure) as caught:
        asyncio.run(info(federation.client_cert))
    assert caught.value.kind == "unreachable" and "TLS" not in caught.value.detail
    assert "GET /v1/info: cannot connect" in caught.value.detail
    url = f"https://127.0.0.1:{federation.centers['beta']}"
    for client_cert, said in ((None, tls.NO_CLIENT_CERT), (stranger, tls.CLIENT_CERT_REFUSED)):
        with pytest.raises(CenterFailure) as caught:
            asyncio.run(info(client_cert))
        assert caught.value.kind == "unreachable"
        assert caught.value.detail == f"center 'beta' (unreachable): GET /v1/info: cannot " \
                                      f"connect ({said})"

