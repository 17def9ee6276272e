"""``docker-compose.yml`` (the one-host try-out, over ``deploy/demo/``) and the ``Dockerfile``
without a Docker engine: the compose file is parsed and checked against the settings classes
(every ``FEDSTATS_*`` variable is a settings field, ports and health checks agree with the
configured ports, every center has its own data and ledger volumes, its signing key made by its
own one-shot keys service in its ledger volume and its public key shared with the other centers
through the ``peer_keys`` volume, secrets only from ``.env``), and the image's entry commands
are run directly with the compose environment: data, signing keys, three centers, the
coordinator, then ``fedstats study run examples/study.toml`` against it (its federated table is
refined across the centers, so each trusts the others' signed tables). Where ``docker compose``
(v2) or ``docker-compose`` (1.29) is installed, each validates the file (it has no top-level
``name:``, which 1.29 rejects). The per-site files are ``tests/cli/test_cli_deploy.py``'s."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest
import yaml

from center_agent.core.config import CONFIG_ENV as CENTER_CONFIG_ENV
from center_agent.core.config import ENV_PREFIX as CENTER_PREFIX
from center_agent.core.config import Settings as CenterSettings
from coordinator.core.config import CONFIG_ENV as COORDINATOR_CONFIG_ENV
from coordinator.core.config import ENV_PREFIX as COORDINATOR_PREFIX
from coordinator.core.config import Settings as CoordinatorSettings
from fedstats_cli.procs import ProcessGroup, free_port
from tests.helpers.processes import REPO, clean_env, fedstats, wait_gone
from tests.helpers.timing import scaled

COMPOSE = REPO / "docker-compose.yml"
DEMO = REPO / "deploy" / "demo"
EXAMPLE_ENV = DEMO / "example.env"
VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::?[?-][^}]*)?\}")
CENTERS = ("hospital-a", "hospital-b", "hospital-c")
PEER_KEYS = "peer_keys"
SERVICE_USER = "fedstats"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path (bind mounts, relative to the repo) or volume name."""
    out = {}
    for spec in service.get("volumes", []):
        source, target, *_ = spec.split(":")
        out[target] = str(REPO / source) if source.startswith(".") else source
    return out


def toml_of(service: dict[str, Any], config_env: str) -> tuple[str, dict[str, Any]]:
    """The container path of the service's TOML file and the file's content (its bind mount)."""
    path = service["environment"][config_env]
    return path, tomllib.loads(Path(mounts(service)[path]).read_text())


def volume_of(service: dict[str, Any], container_file: str) -> str:
    """The named volume that holds ``container_file`` in ``service``."""
    parent = str(PurePosixPath(container_file).parent)
    return mounts(service)[parent]


def option(command: list[str], name: str) -> str:
    """The value of ``--name`` in a service's command."""
    return command[command.index(name) + 1]


def sqlite_path(url: str) -> str:
    assert url.startswith("sqlite:////"), url
    return url.removeprefix("sqlite:///")


def check_settings_names(env: dict[str, str], prefix: str, config_env: str,
                         fields: set[str]) -> None:
    for name in env:
        assert name.startswith(prefix), name
        if name == config_env:
            continue
        field = name.removeprefix(prefix).split("__")[0].lower()
        assert field in fields, f"{name}: no settings field {field!r}"


def test_services_and_their_roles(compose: dict[str, Any]) -> None:
    services = compose["services"]
    one_shot = {f"{c}-{role}" for c in CENTERS for role in ("data", "keys")}
    assert set(services) == {"coordinator", *CENTERS, *one_shot}
    for name, service in services.items():
        assert service["image"] == "fedstats:latest" and service["build"] == "."
        assert service["restart"] == ("no" if name in one_shot else "unless-stopped")
    assert services["coordinator"]["command"] == ["coordinator", "serve"]
    for center in CENTERS:
        assert services[center]["command"] == ["center", "serve"]
        assert services[f"{center}-data"]["command"][0] == "synth-data"
        assert services[f"{center}-keys"]["command"][:2] == ["center", "keygen"]
        assert "--force" not in services[f"{center}-keys"]["command"]  # kept across `up`s
        # Its own data, and every center's key: it trusts the tables its peers signed.
        done = {"condition": "service_completed_successfully"}
        assert services[center]["depends_on"] == {
            f"{center}-data": done, **{f"{c}-keys": done for c in CENTERS}}
    assert services["coordinator"]["depends_on"] == {
        c: {"condition": "service_healthy"} for c in CENTERS}


def test_centers_agree_with_the_center_settings(compose: dict[str, Any]) -> None:
    services = compose["services"]
    fields = set(CenterSettings.model_fields)
    data_volumes, ledger_volumes, ids = set(), set(), set()
    for center in CENTERS:
        service = services[center]
        env = service["environment"]
        check_settings_names(env, CENTER_PREFIX, CENTER_CONFIG_ENV, fields)
        _, config = toml_of(service, CENTER_CONFIG_ENV)
        port = config["port"]
        assert config["host"] == "0.0.0.0"
        assert service["expose"] == [str(port)]
        assert service["healthcheck"]["test"] == [
            "CMD", "fedstats", "health", f"http://127.0.0.1:{port}"]
        ids.add(env["FEDSTATS_CENTER_CENTER_ID"])
        # Its own data volume, read-only, filled by its own data service at the source's path.
        source = config["datasets"]["cohort"]["source"]["path"]
        data = volume_of(service, source)
        assert f"{data}:{PurePosixPath(source).parent}:ro" in service["volumes"]
        writer = services[f"{center}-data"]
        assert writer["command"][-1] == source and volume_of(writer, source) == data
        data_volumes.add(data)
        ledger = volume_of(service, sqlite_path(config["ledger_url"]))
        ledger_volumes.add(ledger)
        assert "_ledger" in ledger
        # Its signing key, in its ledger volume, made there by its own keys service; its public
        # key copied, named after its id, to the peers' directory every center reads.
        keys = services[f"{center}-keys"]
        key_file = config["signing_key_file"]
        assert option(keys["command"], "--out") == key_file
        assert volume_of(service, key_file) == volume_of(keys, key_file) == ledger
        assert option(keys["command"], "--id") == env["FEDSTATS_CENTER_CENTER_ID"]
        peers_dir = config["peer_keys_dir"]
        assert f"{PEER_KEYS}:{peers_dir}:ro" in service["volumes"]
        assert mounts(keys)[option(keys["command"], "--public-dir")] == PEER_KEYS
        assert set(mounts(keys).values()) == {ledger, PEER_KEYS}  # no data, no other ledger
    assert len(data_volumes) == len(ledger_volumes) == len(ids) == 3
    assert data_volumes.isdisjoint(ledger_volumes)
    assert PEER_KEYS not in data_volumes | ledger_volumes
    assert data_volumes | ledger_volumes | {PEER_KEYS} <= set(compose["volumes"])


def test_the_coordinator_agrees_with_its_settings(compose: dict[str, Any]) -> None:
    services = compose["services"]
    coordinator = services["coordinator"]
    env = coordinator["environment"]
    check_settings_names(env, COORDINATOR_PREFIX, COORDINATOR_CONFIG_ENV,
                         set(CoordinatorSettings.model_fields))
    _, config = toml_of(coordinator, COORDINATOR_CONFIG_ENV)
    assert coordinator["ports"] == [f"127.0.0.1:{config['port']}:{config['port']}"]
    assert coordinator["healthcheck"]["test"][-1] == f"http://127.0.0.1:{config['port']}"
    assert volume_of(coordinator, sqlite_path(config["store_url"])) in compose["volumes"]
    center_ids = {services[c]["environment"]["FEDSTATS_CENTER_CENTER_ID"]: c for c in CENTERS}
    assert set(config["centers"]) == set(center_ids)
    for cid, entry in config["centers"].items():
        url = httpx.URL(entry["url"])
        service = services[center_ids[cid]]
        _, center_config = toml_of(service, CENTER_CONFIG_ENV)
        assert (url.host, url.port) == (center_ids[cid], center_config["port"])
        assert "token" not in entry  # from the environment only
        # The coordinator and the center read the same variable of .env.
        token_var = VARIABLE.findall(env[f"FEDSTATS_COORDINATOR_CENTERS__{cid.upper()}__TOKEN"])
        assert token_var == VARIABLE.findall(service["environment"]["FEDSTATS_CENTER_TOKENS"])


def test_secrets_come_from_env_only_and_the_example_lists_them_empty() -> None:
    text = COMPOSE.read_text()
    used = set(VARIABLE.findall(text))
    assert used == {"ANALYST_TOKEN", "HOSPITAL_A_TOKEN", "HOSPITAL_B_TOKEN", "HOSPITAL_C_TOKEN"}
    example = dict(
        line.split("=", 1) for line in EXAMPLE_ENV.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert example == dict.fromkeys(used, "")
    # Every use is required (`:?`): compose refuses to start with a missing token.
    assert all(m.group(0).startswith(f"${{{m.group(1)}:?") for m in VARIABLE.finditer(text))
    for toml in DEMO.glob("*.toml"):
        assert "token" not in tomllib.loads(toml.read_text()), toml


def test_no_top_level_name_so_that_compose_1_29_reads_it(compose: dict[str, Any]) -> None:
    """``docker-compose`` 1.29 (Debian's) rejects a top-level ``name:``; without it both it and
    Compose v2 name the project after the folder (or ``-p``)."""
    assert set(compose) == {"services", "volumes", "x-image", "x-center", "x-data"}
    assert "`docker-compose` 1.29" in COMPOSE.read_text().split("\nx-image:")[0]


def compose_commands() -> list[tuple[str, list[str]]]:
    """The compose commands installed: v2 (``docker compose``), 1.x (``docker-compose``)."""
    found = []
    for name, argv in (("v2", ["docker", "compose"]), ("1.x", ["docker-compose"])):
        if shutil.which(argv[0]) is None:
            continue
        version = subprocess.run([*argv, "version"], capture_output=True, text=True,
                                 timeout=scaled(30))
        if version.returncode == 0:
            found.append((name, argv))
    return found


@pytest.mark.process
def test_the_installed_compose_commands_accept_it() -> None:
    commands = compose_commands()
    if not commands:
        pytest.skip("neither `docker compose` (v2) nor `docker-compose` (1.29) is installed: "
                    "the file was checked by parsing only")
    secrets_env = {v: secrets.token_urlsafe(32) for v in VARIABLE.findall(COMPOSE.read_text())}
    for name, argv in commands:
        done = subprocess.run([*argv, "-f", str(COMPOSE), "config", "-q"], cwd=REPO,
                              env={**os.environ, **secrets_env}, capture_output=True,
                              text=True, timeout=scaled(60))
        assert done.returncode == 0, f"{name}: {done.stderr}"


def test_the_dockerfile_installs_like_the_readme_and_runs_fedstats() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["fedstats"]' in dockerfile
    install = "python3 -m venv .venv && .venv/bin/pip install -q -c requirements.lock -e"
    assert install in dockerfile and install in (REPO / "README.md").read_text()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    for package in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert f"COPY {package.rstrip('*')}/ {package.rstrip('*')}/" in dockerfile
    assert pyproject["project"]["scripts"]["fedstats"] == "fedstats_cli:main"


def dockerfile_dirs() -> tuple[set[str], set[str]]:
    """The directories the image makes (``mkdir -p``) and those it gives the service user."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    made = {d for m in re.finditer(r"mkdir -p ([^&\n]+)", text) for d in m.group(1).split()}
    owned = {d for m in re.finditer(rf"chown {SERVICE_USER} ([^&\n]+)", text)
             for d in m.group(1).split()}
    return made, owned


def test_every_volume_a_service_writes_belongs_to_the_service_user(
    compose: dict[str, Any]
) -> None:
    """The image runs as the service user; a named volume starts with the owner of the image's
    directory at its mount point (root where the image has none), so every volume a service
    writes must be mounted on a directory the Dockerfile makes and gives that user."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"USER {SERVICE_USER}" in dockerfile
    made, owned = dockerfile_dirs()
    volumes = set(compose["volumes"])
    for name, service in compose["services"].items():
        for spec in service.get("volumes", []):
            source, target, *mode = spec.split(":")
            if source in volumes and mode != ["ro"]:
                assert target in made and target in owned, f"{name}: {spec}"


def _expand(value: str, secrets_env: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: secrets_env[m.group(1)], value)


@pytest.mark.process
def test_the_entry_commands_run_as_compose_runs_them(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """Each service's command with its compose environment; only what Docker would provide
    differently (volume paths, loopback ports, host names) is overridden."""
    services = compose["services"]
    secrets_env = {v: secrets.token_urlsafe(32) for v in
                   ("ANALYST_TOKEN", "HOSPITAL_A_TOKEN", "HOSPITAL_B_TOKEN", "HOSPITAL_C_TOKEN")}
    volumes = {name: tmp_path / name for name in compose["volumes"]}
    for path in volumes.values():
        path.mkdir()

    def host_path(service: dict[str, Any], container_path: str) -> str:
        """Where ``container_path`` of ``service`` lies on this machine (through its mounts)."""
        for target, source in sorted(mounts(service).items(), key=lambda m: -len(m[0])):
            if container_path == target or container_path.startswith(target + "/"):
                base = volumes[source] if source in volumes else Path(source)
                return str(base) + container_path.removeprefix(target)
        raise AssertionError(f"{container_path} is on no volume")

    def environment(service: dict[str, Any], config_env: str) -> dict[str, str]:
        env = {k: _expand(str(v), secrets_env) for k, v in service["environment"].items()}
        env[config_env] = host_path(service, env[config_env])
        return env

    def on_host(service: dict[str, Any], *options: str) -> list[str]:
        """The service's command, the values of ``options`` (container paths) on this host."""
        argv = list(service["command"])
        for name in options:
            argv[argv.index(name) + 1] = host_path(service, option(argv, name))
        return argv

    for center in CENTERS:
        writer = services[f"{center}-data"]
        argv = [*writer["command"][:-1], host_path(writer, writer["command"][-1])]
        subprocess.run([*fedstats(), *argv], env=clean_env(), check=True, timeout=scaled(60))
    # The keys services, as compose runs them (before any center), and again: every `up`
    # runs them, and an existing key is kept.
    signing_keys: dict[str, str] = {}
    for _ in range(2):
        for center in CENTERS:
            keys = services[f"{center}-keys"]
            subprocess.run([*fedstats(), *on_host(keys, "--out", "--public-dir")],
                           env=clean_env(), check=True, timeout=scaled(60), capture_output=True)
            key = Path(host_path(keys, option(keys["command"], "--out"))).read_text()
            assert signing_keys.setdefault(center, key) == key, "the key changed on a rerun"
    peers = volumes[PEER_KEYS]
    assert sorted(p.name for p in peers.iterdir()) == sorted(
        f"{services[c]['environment']['FEDSTATS_CENTER_CENTER_ID']}.pub" for c in CENTERS)

    ports: dict[str, int] = {}
    with contextlib.ExitStack() as stack:
        group = stack.enter_context(ProcessGroup())
        for center in CENTERS:
            service = services[center]
            path, config = toml_of(service, CENTER_CONFIG_ENV)
            ports[center] = free_port()
            env = environment(service, CENTER_CONFIG_ENV)
            source = config["datasets"]["cohort"]["source"]["path"]
            env |= {
                "FEDSTATS_CENTER_HOST": "127.0.0.1",
                "FEDSTATS_CENTER_PORT": str(ports[center]),
                "FEDSTATS_CENTER_DATASETS__COHORT__SOURCE__PATH": host_path(service, source),
                "FEDSTATS_CENTER_LEDGER_URL":
                    "sqlite:///" + host_path(service, sqlite_path(config["ledger_url"])),
                "FEDSTATS_CENTER_SIGNING_KEY_FILE": host_path(service, config["signing_key_file"]),
                "FEDSTATS_CENTER_PEER_KEYS_DIR": host_path(service, config["peer_keys_dir"]),
            }
            group.start(center, [*fedstats(), *service["command"]],
                        url=f"http://127.0.0.1:{ports[center]}", log=tmp_path / f"{center}.log",
                        env=clean_env(**env))
        service = services["coordinator"]
        _, config = toml_of(service, COORDINATOR_CONFIG_ENV)
        port = free_port()
        env = environment(service, COORDINATOR_CONFIG_ENV) | {
            "FEDSTATS_COORDINATOR_HOST": "127.0.0.1",
            "FEDSTATS_COORDINATOR_PORT": str(port),
            "FEDSTATS_COORDINATOR_STORE_URL":
                "sqlite:///" + host_path(service, sqlite_path(config["store_url"])),
        }
        for cid, entry in config["centers"].items():
            host = httpx.URL(entry["url"]).host
            env[f"FEDSTATS_COORDINATOR_CENTERS__{cid.upper()}__URL"] = (
                f"http://127.0.0.1:{ports[host]}")
        group.start("coordinator", [*fedstats(), *service["command"]],
                    url=f"http://127.0.0.1:{port}", log=tmp_path / "coordinator.log",
                    env=clean_env(**env))
        group.wait_healthy()
        for child in group.children:  # the containers' health check command
            assert subprocess.run([*fedstats(), "health", child.url], env=clean_env(),
                                  timeout=scaled(60)).returncode == 0
        out = tmp_path / "run"
        done = subprocess.run(
            [*fedstats(), "study", "run", str(REPO / "examples" / "study.toml"),
             "--coordinator", f"http://127.0.0.1:{port}", "--out", str(out)],
            env=clean_env(FEDSTATS_ANALYST_TOKEN=secrets_env["ANALYST_TOKEN"]),
            capture_output=True, text=True, timeout=scaled(120),
        )
        pids = [c.proc.pid for c in group.children]
    assert wait_gone(pids) == []
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads((out / "study.json").read_text())
    assert view["status"] == "succeeded"
    assert view["result"]["centers"] == ["hospital_a", "hospital_b", "hospital_c"]
    assert "<svg" in (out / "report.html").read_text()
    # The federated table was refined by the two smaller centers: each refined a statement
    # another center signed, so they trust each other through the peer_keys volume.
    calls = [(p["center"], p["call"]) for p in view["provenance"]]
    assert sum(call == "refine" for _, call in calls) == 2, calls
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log")) + done.stdout + done.stderr
    assert not any(token in logs for token in secrets_env.values())
    assert not any(key.strip() in logs for key in signing_keys.values())
