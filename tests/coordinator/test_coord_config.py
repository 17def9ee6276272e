"""Settings: TOML plus environment overrides, errors that name the key, secrets never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.core.config import ConfigError, load_settings
from tests.helpers.coordinator import ANALYST_TOKEN, CENTER_TOKENS

TOML = f"""
analyst_tokens = ["{ANALYST_TOKEN}"]
min_centers = 2
store_url = "sqlite:///./x.sqlite"

[retry]
attempts = 4

[centers.alpha]
url = "http://127.0.0.1:8701/"
token = "{CENTER_TOKENS["alpha"]}"

[centers.beta]
url = "https://beta.example.org"
token = "{CENTER_TOKENS["beta"]}"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "coordinator.toml"
    path.write_text(text)
    return path


def test_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDSTATS_COORDINATOR_CONFIG", str(write(tmp_path, TOML)))
    monkeypatch.setenv("FEDSTATS_COORDINATOR_MIN_CENTERS", "1")
    monkeypatch.setenv("FEDSTATS_COORDINATOR_RETRY__BACKOFF_MAX_S", "1.5")
    monkeypatch.setenv("FEDSTATS_COORDINATOR_CENTERS__BETA__TOKEN", "b" * 32)
    settings = load_settings()
    assert settings.min_centers == 1
    assert settings.retry.attempts == 4 and settings.retry.backoff_max_s == 1.5
    assert settings.retry.delay(1) == 0.2 and settings.retry.delay(10) == 1.5
    assert settings.centers["alpha"].base_url == "http://127.0.0.1:8701"
    assert settings.centers["beta"].token.get_secret_value() == "b" * 32
    assert settings.centers["alpha"].token.get_secret_value() == CENTER_TOKENS["alpha"]
    assert settings.read_timeout_s == 120.0 and settings.connect_timeout_s == 5.0
    assert CENTER_TOKENS["alpha"] not in repr(settings)


def test_missing_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="FEDSTATS_COORDINATOR_CONFIG"):
        load_settings(tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("min_centers = 2", "min_centers = 0"), "min_centers"),
        (("min_centers = 2", "min_centers = 3"), "min_centers = 3 but only 2"),
        (("attempts = 4", "attempts = 0"), "retry.attempts"),
        (('url = "https://beta.example.org"', 'url = "ftp://beta"'), "centers.beta.url"),
        (('store_url = "sqlite:///./x.sqlite"', 'store_url = "mysql://h/db"'), "store_url"),
        (('store_url = "sqlite:///./x.sqlite"', 'store_url = "::"'), "store_url"),
        (("[centers.beta]", "[centers.beta]\nsurprise = 1"), "centers.beta.surprise"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, change: tuple[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(write(tmp_path, TOML.replace(*change)))


def test_placeholder_secrets_refused_outside_dev_mode(tmp_path: Path) -> None:
    weak_center = TOML.replace(CENTER_TOKENS["beta"], "changeme")
    with pytest.raises(ConfigError, match=r"centers: .*'beta'") as caught:
        load_settings(write(tmp_path, weak_center))
    assert "changeme" not in str(caught.value)
    weak_analyst = TOML.replace(ANALYST_TOKEN, "tiny-tok")
    with pytest.raises(ConfigError, match="analyst_tokens") as caught:
        load_settings(write(tmp_path, weak_analyst))
    assert "tiny-tok" not in str(caught.value)
    dev = load_settings(write(tmp_path, "dev_mode = true\n" + weak_analyst))
    assert dev.dev_mode


def test_a_bad_secret_is_never_echoed(tmp_path: Path) -> None:
    # A token of the wrong type: the error names the key, not the value.
    bad = TOML.replace(f'token = "{CENTER_TOKENS["alpha"]}"', "token = 12345678901234567890")
    with pytest.raises(ConfigError, match=r"centers\.alpha\.token") as caught:
        load_settings(write(tmp_path, bad))
    assert "12345678901234567890" not in str(caught.value)
