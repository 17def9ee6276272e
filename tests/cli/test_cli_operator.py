"""The operators' commands read only what they use: ``fedstats center audit|epoch`` the ledger
(and for ``epoch`` the datasets), ``fedstats coordinator analyst ...|audit`` the store and the
centers' ids. They run with **no token** in the settings or the environment (the service itself
would stop: ``tokens: Field required``, ``centers.alpha.token: Field required``), and import
neither the web stack nor the statistics (what made each take 15-60 s on a busy machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from center_agent.core.config import ConfigError, Settings
from coordinator.core.config import Settings as CoordinatorSettings
from fedstats_cli import synth
from fedstats_cli.cli import main
from tests.helpers.config import write_toml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FEDSTATS_* variable at all: neither a token nor a config file in the environment."""
    for name in list(os.environ):
        if name.startswith("FEDSTATS_"):
            monkeypatch.delenv(name)


def center_toml(tmp_path: Path) -> Path:
    data = tmp_path / "a.csv"
    synth.write_hospital("hospital_a", data, synth.DEFAULT_SEED)
    return write_toml(tmp_path / "center.toml", {
        "center_id": "hospital_a",
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "tls_certfile": str(tmp_path / "absent-cert.pem"),  # not read by the commands
        "datasets": {"cohort": {
            "source": {"kind": "csv", "path": str(data)},
            "variables": [synth.VARIABLE], "epsilon_total": 1.0,
            "group": {"column": synth.GROUP_COLUMN, "levels": list(synth.LEVELS)}}},
    })


def coordinator_toml(tmp_path: Path) -> Path:
    return write_toml(tmp_path / "coordinator.toml", {
        "store_url": f"sqlite:///{tmp_path / 'store.sqlite'}",
        "centers": {"alpha": {"url": "https://alpha.test:8700"},
                    "beta": {"url": "https://beta.test:8700"}},
    })


def test_the_center_commands_run_without_any_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = center_toml(tmp_path)
    with pytest.raises(ConfigError, match="tokens"):  # the service would not start on it
        Settings.load(config)
    assert main(["center", "epoch", "--config", str(config)]) == 0
    assert capsys.readouterr().out.startswith("cohort: no epoch yet")
    assert main(["center", "audit", "--config", str(config)]) == 0
    assert main(["center", "audit", "--config", str(config), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    # The config file named by the environment, as in the container.
    os.environ["FEDSTATS_CENTER_CONFIG"] = str(config)
    try:
        assert main(["center", "epoch"]) == 0
    finally:
        del os.environ["FEDSTATS_CENTER_CONFIG"]
    assert main(["center", "epoch", "--config", str(config), "--dataset", "other"]) == 2
    assert "other" in capsys.readouterr().err


def test_center_epoch_names_an_unavailable_dataset_with_its_fix_and_reports_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dataset whose file is not there (the running center serves the others) is named with
    the start-up line; the other dataset is reported as usual; the exit code says a problem."""
    config = center_toml(tmp_path)
    settings = tomllib.loads(config.read_text())
    missing = tmp_path / "exports" / "b.csv"
    settings["datasets"]["side"] = {**settings["datasets"]["cohort"],
                                    "source": {"kind": "csv", "path": str(missing)}}
    write_toml(config, settings)
    assert main(["center", "epoch", "--config", str(config)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cohort: no epoch yet")
    assert out[1] == (f"side: unavailable: dataset 'side': its CSV file {missing} does not "
                      "exist; check `datasets.side.source.path`, or put the file there (the "
                      "dataset is served once it reads, without a restart)")


def test_a_bad_key_the_command_reads_is_still_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_toml(tmp_path / "bad.toml", {"ledger_url": "nosuchdb://x"})
    assert main(["center", "audit", "--config", str(config)]) == 2
    assert "ledger_url" in capsys.readouterr().err


def test_the_coordinator_commands_run_without_any_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = coordinator_toml(tmp_path)
    with pytest.raises(ConfigError, match="token"):
        CoordinatorSettings.load(config)

    def run(*args: str) -> int:
        return main(["coordinator", *args, "--config", str(config)])

    assert run("analyst", "add", "--name", "Ann") == 0
    token = capsys.readouterr().out.strip()
    analyst_id = token.split("_")[1]
    assert run("analyst", "quota", analyst_id, "--center", "alpha", "--dataset", "cohort",
               "--epsilon", "1.5") == 0
    assert run("analyst", "quota", analyst_id, "--center", "gamma", "--dataset", "cohort",
               "--epsilon", "1") == 2
    assert "'gamma' is not a registered center (alpha, beta)" in capsys.readouterr().err
    assert run("analyst", "list") == 0
    listed = capsys.readouterr().out
    assert analyst_id in listed and "Ann" in listed and "1.5" in listed
    assert run("analyst", "revoke", analyst_id) == 0
    assert "revoked" in capsys.readouterr().out
    assert run("audit", "--format", "json") == 0
    actions = [r["action"] for r in json.loads(capsys.readouterr().out)]
    assert {"analyst.add", "quota.set", "analyst.revoke"} <= set(actions)


HEAVY = ("fastapi", "uvicorn", "scipy", "shared.protocol", "matplotlib", "center_agent.services",
         "coordinator.services", "coordinator.main", "center_agent.main")


@pytest.mark.process
def test_the_commands_import_neither_the_services_nor_the_statistics(tmp_path: Path) -> None:
    """Each command, run in a fresh interpreter, leaves none of the heavy modules loaded: what
    they cost is what starting the service costs (``docs/deploy.md``, "Operator commands")."""
    center, coordinator = center_toml(tmp_path), coordinator_toml(tmp_path)
    commands = [["center", "audit", "--config", str(center)],
                ["center", "epoch", "--config", str(center)],
                ["coordinator", "analyst", "list", "--config", str(coordinator)],
                ["coordinator", "audit", "--config", str(coordinator)]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_")}
    for argv in commands:
        code = (f"import sys; from fedstats_cli.cli import main; code = main({argv!r}); "
                f"print(repr(sorted(m for m in {HEAVY!r} if m in sys.modules))); "
                "sys.exit(code)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 0, (argv, done.stderr)
        assert done.stdout.strip().splitlines()[-1] == "[]", (argv, done.stdout)
