"""Settings: TOML file plus environment overrides, validated at start-up, errors name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from center_agent.core.config import CONFIG_ENV, ConfigError, CsvSource, load_settings
from tests.helpers.center import TOKEN
from tests.helpers.config import write_toml


def _with(config: dict[str, Any], tmp_path: Path, **changes: Any) -> Path:
    return write_toml(tmp_path / "changed.toml", {**config, **changes})


def test_file_is_read_with_defaults(config_file: Path, csv_path: Path) -> None:
    s = load_settings(config_file)
    assert s.center_id == "hospital-test"
    assert s.k == 10
    assert s.neighbouring == "add_remove"
    assert s.allow_quantile_loss is False
    assert s.dev_mode is False
    assert s.tokens[0].get_secret_value() == TOKEN
    ds = s.datasets["cohort"]
    assert ds.source.kind == "csv" and ds.source.path == csv_path
    assert ds.variables == ["x", "y"]
    assert ds.group is not None and ds.group.levels == ["a", "b"]
    assert ds.epsilon_total == 3.0
    assert s.tls is False


def test_file_named_by_the_environment(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(config_file))
    assert load_settings().center_id == "hospital-test"


def test_defaults_for_unset_keys(tmp_path: Path, base_config: dict[str, Any]) -> None:
    config = {k: v for k, v in base_config.items() if k not in ("k", "ledger_url")}
    s = load_settings(write_toml(tmp_path / "min.toml", config))
    assert s.k == 10
    assert s.ledger_url == "sqlite:///./center_ledger.sqlite"
    assert s.max_body_bytes == 1_000_000


def test_environment_overrides_the_file(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEDSTATS_CENTER_K", "25")
    monkeypatch.setenv("FEDSTATS_CENTER_NEIGHBOURING", "swap")
    monkeypatch.setenv("FEDSTATS_CENTER_DATASETS__COHORT__EPSILON_TOTAL", "1.25")
    monkeypatch.setenv("FEDSTATS_CENTER_TOKENS", '["' + "z" * 32 + '"]')
    s = load_settings(config_file)
    assert s.k == 25
    assert s.neighbouring == "swap"
    assert s.datasets["cohort"].epsilon_total == 1.25
    assert s.datasets["cohort"].variables == ["x", "y"]  # the rest of the table survives
    assert [t.get_secret_value() for t in s.tokens] == ["z" * 32]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"k": 1}, "k"),
        ({"k": "ten"}, "k"),
        ({"neighbouring": "replace"}, "neighbouring"),
        ({"tokens": []}, "tokens"),
        ({"tokens": ["changeme"]}, "tokens"),
        ({"tokens": ["short"]}, "tokens"),
        ({"ledger_url": "mysql://x@y/z"}, "ledger_url"),
        ({"ledger_url": "not a url"}, "ledger_url"),
        ({"center_id": ""}, "center_id"),
        ({"datasets": {}}, "datasets"),
        ({"max_body_bytes": 10}, "max_body_bytes"),
        ({"epsilon_totl": 3}, "epsilon_totl"),
        ({"tls_certfile": "/nonexistent/cert.pem"}, "tls_certfile"),
    ],
)
def test_bad_top_level_keys_are_named(
    tmp_path: Path, base_config: dict[str, Any], changes: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError, match=rf"(^|[ ;]){key}: "):
        load_settings(_with(base_config, tmp_path, **changes))


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"epsilon_total": 0}, "datasets.cohort.epsilon_total"),
        ({"epsilon_total": "inf"}, "datasets.cohort.epsilon_total"),
        ({"variables": []}, "datasets.cohort.variables"),
        ({"variables": ["x", "x"]}, "datasets.cohort.variables"),
        ({"variables": ["x; DROP TABLE t"]}, "datasets.cohort.variables.0"),
        # A path that is not there is the dataset's state, not a bad key (a dataset unavailable
        # at start-up: tests/center_agent/test_agent_unavailable_at_start.py); a declaration
        # without a path, or with an empty one, is a bad key.
        ({"source": {"kind": "csv"}}, "datasets.cohort.source.csv.path"),
        ({"source": {"kind": "csv", "path": " "}}, "datasets.cohort.source.csv.path"),
        ({"source": {"kind": "parquet", "path": ""}}, "datasets.cohort.source.parquet.path"),
        ({"source": {"kind": "excel", "path": "a.xlsx"}}, "datasets.cohort.source"),
        ({"source": {"kind": "sql", "url": "sqlite://"}}, "datasets.cohort.source.sql"),
        (
            {"source": {"kind": "sql", "url": "sqlite://", "table": "t; --"}},
            "datasets.cohort.source.sql.table",
        ),
        ({"group": {"column": "arm", "levels": ["a", "a"]}}, "datasets.cohort.group.levels"),
        ({"group": {"column": "x", "levels": ["a"]}}, "datasets.cohort"),
        ({"colour": "red"}, "datasets.cohort.colour"),
    ],
)
def test_bad_dataset_keys_are_named(
    tmp_path: Path, base_config: dict[str, Any], change: dict[str, Any], key: str
) -> None:
    dataset = {**base_config["datasets"]["cohort"], **change}
    path = _with(base_config, tmp_path, datasets={"cohort": dataset})
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert f"{key}: " in str(info.value)


def test_a_data_file_that_is_not_there_is_not_a_bad_key(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    """The settings load: whether the file is there is checked when the dataset is read."""
    dataset = {**base_config["datasets"]["cohort"],
               "source": {"kind": "csv", "path": str(tmp_path / "not-yet.csv")}}
    settings = load_settings(_with(base_config, tmp_path, datasets={"cohort": dataset}))
    source = settings.datasets["cohort"].source
    assert isinstance(source, CsvSource) and source.path == tmp_path / "not-yet.csv"


def test_bad_dataset_name_is_named(tmp_path: Path, base_config: dict[str, Any]) -> None:
    path = _with(base_config, tmp_path, datasets={"Bad Name": base_config["datasets"]["cohort"]})
    with pytest.raises(ConfigError, match=r"datasets: .*Bad Name"):
        load_settings(path)


def test_placeholder_token_is_accepted_only_in_dev_mode(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    path = _with(base_config, tmp_path, tokens=["changeme"], dev_mode=True)
    assert load_settings(path).dev_mode is True


def test_tls_needs_both_files(tmp_path: Path, base_config: dict[str, Any]) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not checked here")
    with pytest.raises(ConfigError, match=r"tls_certfile and tls_keyfile must be given together"):
        load_settings(_with(base_config, tmp_path, tls_certfile=str(cert)))


def test_missing_file_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match=CONFIG_ENV):
        load_settings()


def test_toml_syntax_error_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("center_id = \n")
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        load_settings(path)


def test_secrets_never_print(config_file: Path) -> None:
    s = load_settings(config_file)
    assert TOKEN not in repr(s) and TOKEN not in str(s.model_dump())


def test_tls_files_that_are_not_pem_stop_start_up_naming_the_keys(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("not a certificate")
    key.write_text("not a key")
    with pytest.raises(ConfigError, match=r"tls_certfile and tls_keyfile must be a PEM"):
        load_settings(_with(base_config, tmp_path, tls_certfile=str(cert),
                            tls_keyfile=str(key)))
