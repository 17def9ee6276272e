"""The per-site deployment files (``deploy/center/``, ``deploy/coordinator/``) and the
certificates of ``docs/deploy.md``, without a Docker engine.

Each compose file is parsed and held to the settings classes: its ``FEDSTATS_*`` variables are
settings fields, every ``${VAR}`` is documented in its ``.env.example``, every bind mount exists
or comes from such a variable, every path its TOML template names lies on one of its mounts
(written ones on a named volume the image's user owns, the rest read-only). Each template is
then loaded with its service's ``Settings``, with the container's paths mapped to placeholder
files in a temporary folder (real PEM files, a signing key, synthetic data), and the center's is
started in process (``create_app``: its start-up checks read the data). Where the ``docker``
command has Compose v2, ``docker compose config -q`` checks each file too.

The certificate commands of ``docs/deploy.md`` are run as written with ``openssl``, and the files
they make are checked in a TLS handshake: the coordinator's client certificate is accepted by a
center requiring one, a center's own certificate is not, and each server certificate is valid
for its host name under the CA that analysts and the coordinator trust."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import ssl
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from center_agent.core.config import Settings as CenterSettings
from center_agent.gate.keys import write_key_pair
from center_agent.main import create_app
from coordinator.core.config import Settings as CoordinatorSettings
from fedstats_cli.synth import write_hospital
from fedstats_service.settings import ServiceSettings
from tests.cli.test_cli_compose import dockerfile_dirs
from tests.helpers.processes import REPO
from tests.helpers.timing import scaled
from tests.helpers.tls import make_ca

VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::([?-])([^}]*))?\}")
SERVICE_USER_UID = "10001"


@dataclass(frozen=True)
class Site:
    folder: Path
    service: str  # the long-running compose service
    template: str
    settings: type[ServiceSettings]
    prefix: str

    @property
    def compose(self) -> dict[str, Any]:
        return dict(yaml.safe_load((self.folder / "compose.yaml").read_text()))

    @property
    def env_example(self) -> Path:
        return self.folder / ".env.example"


SITES = {
    "center": Site(REPO / "deploy" / "center", "center", "center.toml", CenterSettings,
                   "FEDSTATS_CENTER_"),
    "coordinator": Site(REPO / "deploy" / "coordinator", "coordinator", "coordinator.toml",
                        CoordinatorSettings, "FEDSTATS_COORDINATOR_"),
}


@pytest.fixture(params=list(SITES))
def site(request: pytest.FixtureRequest) -> Site:
    return SITES[request.param]


def example_env(site: Site) -> dict[str, tuple[str, str]]:
    """``.env.example``: variable -> (example value, the comment block above it; variables
    listed one after another share theirs)."""
    out: dict[str, tuple[str, str]] = {}
    comment: list[str] = []
    for line in site.env_example.read_text().splitlines():
        if line.startswith("#"):
            comment.append(line.lstrip("# "))
        elif line.strip():
            name, value = line.split("=", 1)
            out[name] = (value, " ".join(comment))
        else:
            comment = []
    return out


def volumes(service: dict[str, Any]) -> list[dict[str, Any]]:
    """The service's mounts; the per-site files use the long syntax only (a missing bind source
    is then an error, not a directory Docker makes owned by root)."""
    mounts = service.get("volumes", [])
    assert all(isinstance(m, dict) for m in mounts), "use the long volume syntax"
    return list(mounts)


def mount_of(service: dict[str, Any], container_path: str) -> dict[str, Any]:
    """The mount holding ``container_path`` (the longest target that contains it)."""
    best = None
    for mount in volumes(service):
        target = mount["target"]
        if container_path == target or container_path.startswith(target + "/"):
            if best is None or len(target) > len(best["target"]):
                best = mount
    assert best is not None, f"{container_path} lies on no mount"
    return best


def path_settings(config: dict[str, Any]) -> dict[str, str]:
    """Every setting of a template that names a container path: dotted key -> path."""
    out: dict[str, str] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                walk(inner, f"{key}.{name}" if key else name)
        elif isinstance(value, str) and value.startswith("sqlite:////"):
            out[key] = value.removeprefix("sqlite:///")
        elif isinstance(value, str) and value.startswith("/"):
            out[key] = value

    walk(config, "")
    return out


def template(site: Site) -> dict[str, Any]:
    return tomllib.loads((site.folder / site.template).read_text())


# -- the files ----------------------------------------------------------------------------------


def test_each_site_says_it_needs_compose_v2_and_names_its_project(site: Site) -> None:
    text = (site.folder / "compose.yaml").read_text()
    assert "Needs Docker Compose v2 (`docker compose`" in text.split("\nname:")[0]
    assert site.compose["name"] == f"fedstats-{site.service}"
    assert "docs/deploy.md" in text


def test_every_variable_is_documented_in_the_env_example(site: Site) -> None:
    text = (site.folder / "compose.yaml").read_text()
    used = {m.group(1): (m.group(2), m.group(3)) for m in VARIABLE.finditer(text)}
    example = example_env(site)
    assert set(example) == set(used)
    for name, (mode, default) in used.items():
        value, comment = example[name]
        assert comment, f"{name} has no comment in .env.example"
        if mode == "?":  # required: a secret or a host path only the operator knows
            assert value == "", name
        else:  # optional: the example shows the default compose uses
            assert mode == "-" and value == default, name
    # Secrets only through .env: no token in a template.
    assert not any("token" in key for key in keys_of(template(site)))


def keys_of(config: dict[str, Any], prefix: str = "") -> set[str]:
    """Every dotted key of a TOML document."""
    out = set()
    for name, value in config.items():
        out.add(prefix + name)
        if isinstance(value, dict):
            out |= keys_of(value, f"{prefix}{name}.")
    return out


def test_the_environment_names_settings_fields(site: Site) -> None:
    service = site.compose["services"][site.service]
    fields = set(site.settings.model_fields)
    for name in service["environment"]:
        assert name.startswith(site.prefix), name
        if name == site.settings.CONFIG_ENV:
            continue
        field = name.removeprefix(site.prefix).split("__")[0].lower()
        assert field in fields, f"{name}: no settings field {field!r}"
    config_path = service["environment"][site.settings.CONFIG_ENV]
    bind = mount_of(service, config_path)
    assert bind["type"] == "bind" and bind["read_only"] is True
    assert bind["source"] == f"./{site.template}" and bind["target"] == config_path


def test_bind_sources_exist_or_come_from_the_env_file(site: Site) -> None:
    header = (site.folder / "compose.yaml").read_text().split("\nname:")[0]
    example = example_env(site)
    for service in site.compose["services"].values():
        for mount in volumes(service):
            if mount["type"] != "bind":
                assert mount["source"] in site.compose["volumes"]
                continue
            source = mount["source"]
            found = VARIABLE.fullmatch(source)
            if found is None:
                assert (site.folder / source).is_file(), source
            else:
                assert found.group(1) in example
                if found.group(2) == "-":  # a folder of this site the operator adds
                    assert f"{PurePosixPath(found.group(3)).name}/" in header, source


def test_ports_and_health_checks_agree_with_the_template(site: Site) -> None:
    service = site.compose["services"][site.service]
    port = template(site)["port"]
    assert template(site)["host"] == "0.0.0.0"
    (published,) = service["ports"]
    assert published.endswith(f":{port}")
    assert f"('127.0.0.1', {port})" in service["healthcheck"]["test"][-1]
    assert service["restart"] == "unless-stopped"
    assert service["read_only"] is True and service["cap_drop"] == ["ALL"]


def test_every_path_of_the_template_is_on_the_right_mount(site: Site) -> None:
    service = site.compose["services"][site.service]
    made, owned = dockerfile_dirs()
    paths = path_settings(template(site))
    assert paths, "the template names no path"
    writable = {"ledger_url", "store_url", "signing_key_file"}
    for key, path in paths.items():
        mount = mount_of(service, path)
        if key in writable:
            # A named volume on a directory of the image its user owns (so the volume is too).
            assert mount["type"] == "volume" and not mount.get("read_only"), key
            assert mount["target"] in made and mount["target"] in owned, key
        else:
            assert mount.get("read_only") is True, f"{key}: {path} must be mounted read-only"
    if site.service == "center":
        # The signing key is made by the one-shot keys service on the same volume, kept after.
        keys = site.compose["services"]["keys"]
        out = keys["command"][keys["command"].index("--out") + 1]
        assert out == paths["signing_key_file"] and "--force" not in keys["command"]
        assert mount_of(keys, out)["source"] == mount_of(service, out)["source"]
        assert service["depends_on"] == {"keys": {"condition": "service_completed_successfully"}}
        data = VARIABLE.fullmatch(mount_of(service, paths["datasets.cohort.source.path"])["source"])
        assert data is not None and data.group(1) == "DATA_DIR"


# -- the templates load and the center starts ---------------------------------------------------


@pytest.fixture
def materialized(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Each site's template with its container paths mapped into ``tmp_path`` and placeholder
    files there: real PEM certificates of one CA, a signing key, a peers' folder, a synthetic
    hospital's data. Yields site -> the rewritten TOML."""
    ca = make_ca(tmp_path / "pki")
    server = ca.issue("server", hosts=["localhost"])
    client = ca.issue("client", client=True)
    out = {}
    for name, site in SITES.items():
        service = site.compose["services"][site.service]
        root = tmp_path / name
        text = (site.folder / site.template).read_text()
        for mount in sorted(volumes(service), key=lambda m: -len(m["target"])):
            host = root / mount["target"].strip("/").replace("/", "_")
            host.mkdir(parents=True)
            text = text.replace(f'"{mount["target"]}/', f'"{host}/').replace(
                f'"sqlite:///{mount["target"]}/', f'"sqlite:///{host}/')
            text = text.replace(f'"{mount["target"]}"', f'"{host}"')
        config = tomllib.loads(text)
        leftover = {k: v for k, v in path_settings(config).items()
                    if not v.startswith(str(tmp_path))}
        assert not leftover, f"paths on no mount: {leftover}"
        for key, path in path_settings(config).items():
            target = Path(path)
            if key in ("tls_certfile", "tls_keyfile"):
                shutil.copyfile(server.cert if key == "tls_certfile" else server.key, target)
            elif key in ("tls_client_certfile", "tls_client_keyfile"):
                shutil.copyfile(client.cert if key.endswith("certfile") else client.key, target)
            elif key == "tls_client_ca" or key.endswith(".ca_bundle"):
                shutil.copyfile(ca.cert, target)
            elif key == "signing_key_file":
                write_key_pair(target)
            elif key.endswith("source.path"):
                write_hospital("hospital_a", target)
            elif key == "peer_keys_dir":
                target.mkdir(exist_ok=True)
        out[name] = root / site.template
        out[name].write_text(text)
    yield out


def compose_environment(site: Site, config_file: Path) -> dict[str, str]:
    """The service's compose environment, every ``${VAR}`` a fresh token of its own."""
    service = site.compose["services"][site.service]
    values: dict[str, str] = {}

    def expand(value: str) -> str:
        return VARIABLE.sub(lambda m: values.setdefault(m.group(1), secrets.token_urlsafe(32)),
                            value)

    env = {name: expand(str(value)) for name, value in service["environment"].items()}
    env[site.settings.CONFIG_ENV] = str(config_file)
    return env


def test_each_template_loads_with_its_settings_and_the_center_starts(
    materialized: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, site in SITES.items():
        env = compose_environment(site, materialized[name])
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            settings = site.settings.load()
            assert settings.tls and settings.tls_files is not None
            assert settings.log_format == "json"
            if isinstance(settings, CenterSettings):
                assert settings.tls_client_ca is not None  # mutual TLS
                assert len(settings.tokens) == len(settings.operator_tokens) == 1
                app = create_app(settings)  # the start-up checks read the data
                try:
                    population = app.state.services.datasets["cohort"].population()
                    assert population.levels == ("control", "treated")
                finally:
                    app.state.services.close()
            else:
                assert isinstance(settings, CoordinatorSettings)
                assert settings.client_cert is not None
                assert all(c.ca_bundle is not None and c.base_url.startswith("https://")
                           for c in settings.centers.values())
                assert settings.min_centers <= len(settings.centers)
                # Each registered center gets its token from the environment.
                for cid, center in settings.centers.items():
                    assert f"{site.prefix}CENTERS__{cid.upper()}__TOKEN" in env
                    assert len(center.token.get_secret_value()) >= 32


# -- Docker Compose, where installed ------------------------------------------------------------


def compose_v2() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True,
                          timeout=scaled(30))
    return done.returncode == 0


@pytest.mark.process
def test_docker_compose_v2_accepts_each_site(site: Site, tmp_path: Path) -> None:
    if not compose_v2():
        pytest.skip("the `docker` command has no Compose v2 plugin (`docker compose`): the "
                    "files were checked by parsing only")
    env = {name: secrets.token_urlsafe(32) if not value else value
           for name, (value, _) in example_env(site).items()}
    env |= {name: str(tmp_path) for name in env if name.endswith("_DIR")}
    done = subprocess.run(
        ["docker", "compose", "-f", str(site.folder / "compose.yaml"), "config", "-q"],
        env={**os.environ, **env}, capture_output=True, text=True,
        timeout=scaled(60))
    assert done.returncode == 0, done.stderr


# -- the certificates of docs/deploy.md ---------------------------------------------------------


def certificate_commands() -> str:
    """The ``openssl`` blocks of docs/deploy.md's "Certificates" section, in order."""
    text = (REPO / "docs" / "deploy.md").read_text()
    section = text.split("\n## Certificates\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return "\n".join(b for b in blocks if "openssl" in b and "chown" not in b)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> None:
    """A TLS handshake in memory; raises ``ssl.SSLError`` when either side refuses."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname=host)
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, end in (("client", cli), ("server", srv)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    continue  # this end waits for the other's bytes, pumped below
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server checks the client's certificate after the client finished;
            # a refusal arrives as an alert on the client's first read.
            srv.write(b"ok")
            c_in.write(s_out.read())
            assert cli.read(2) == b"ok"
            return
    raise AssertionError("the handshake did not finish")


@pytest.mark.process
def test_the_documented_certificates_work_for_mutual_tls(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + certificate_commands()],
                          cwd=tmp_path, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    files = {p.name for p in tmp_path.iterdir()}
    assert {"ca.crt", "center.crt", "center.key", "coordinator.crt", "coordinator.key",
            "client.crt", "client.key"} <= files
    ca = str(tmp_path / "ca.crt")

    def center(client_ca: bool = True) -> ssl.SSLContext:  # tls_certfile/keyfile/client_ca
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / "center.crt", tmp_path / "center.key")
        if client_ca:
            context.load_verify_locations(ca)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def caller(cert: str | None) -> ssl.SSLContext:  # ca_bundle, tls_client_certfile/keyfile
        context = ssl.create_default_context(cafile=ca)
        if cert is not None:
            context.load_cert_chain(tmp_path / f"{cert}.crt", tmp_path / f"{cert}.key")
        return context

    handshake(center(), caller("client"), "hospital-a.example.org")
    with pytest.raises(ssl.SSLError):  # no client certificate: refused
        handshake(center(), caller(None), "hospital-a.example.org")
    with pytest.raises(ssl.SSLError):  # a center's certificate is no client certificate
        handshake(center(), caller("center"), "hospital-a.example.org")
    with pytest.raises(ssl.SSLCertVerificationError):  # issued for another host name
        handshake(center(), caller("client"), "hospital-b.example.org")
    # The analysts' side: the coordinator's certificate, trusted with --ca-bundle ca.crt.
    coordinator = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    coordinator.load_cert_chain(tmp_path / "coordinator.crt", tmp_path / "coordinator.key")
    handshake(coordinator, caller(None), "coordinator.example.org")
    # And the settings take them: the coordinator checks its client pair and each ca_bundle.
    CoordinatorSettings(
        centers={"hospital_a": {"url": "https://hospital-a.example.org:8700",
                                "token": secrets.token_urlsafe(32), "ca_bundle": ca}},
        min_centers=1, tls_certfile=tmp_path / "coordinator.crt",
        tls_keyfile=tmp_path / "coordinator.key", tls_client_certfile=tmp_path / "client.crt",
        tls_client_keyfile=tmp_path / "client.key")
