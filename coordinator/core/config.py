"""The coordinator's one settings class: a TOML file plus ``FEDSTATS_COORDINATOR_*`` overrides.

The file is named by ``FEDSTATS_COORDINATOR_CONFIG`` (or passed to :func:`load_settings`).
Environment variables win over the file; nested keys use ``__``::

    FEDSTATS_COORDINATOR_MIN_CENTERS=3
    FEDSTATS_COORDINATOR_ANALYST_TOKENS='["<a long random token>"]'
    FEDSTATS_COORDINATOR_CENTERS__HOSPITAL_A__TOKEN='<the token hospital_a gave us>'
    FEDSTATS_COORDINATOR_RETRY__ATTEMPTS=5

A minimal file::

    analyst_tokens = ["<a long random token>"]
    min_centers = 2

    [centers.hospital_a]
    url = "https://hospital-a.example.org:8700"
    token = "<the token hospital_a gave us>"
    ca_bundle = "/etc/fedstats/hospital-a-ca.pem"   # optional: a private CA

    [centers.hospital_b]
    url = "http://127.0.0.1:8701"
    token = "<...>"

Everything is validated once, at start-up; :func:`load_settings` raises :class:`ConfigError`
whose message names every bad key (``centers.hospital_a.url: ...``). Secrets (analyst tokens,
center tokens) have no default and are never echoed, not even in those messages.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

log = logging.getLogger(__name__)

CONFIG_ENV = "FEDSTATS_COORDINATOR_CONFIG"
ENV_PREFIX = "FEDSTATS_COORDINATOR_"

#: Values an operator forgot to replace; refused as tokens outside dev mode.
PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "changethis", "change-me", "change_me", "secret", "token", "password", "test",
     "example", "default", "admin", "todo", "xxx", "dev"}
)
MIN_TOKEN_LENGTH = 16

_CENTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """The configuration is unusable; the message names the bad key(s)."""


def _weak(secret: SecretStr) -> bool:
    value = secret.get_secret_value()
    return value.strip().lower() in PLACEHOLDER_SECRETS or len(value) < MIN_TOKEN_LENGTH


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CenterConfig(_Model):
    """One center the coordinator may call: where it is and the token it gave us."""

    url: AnyHttpUrl = Field(description="base URL, without /v1")
    token: SecretStr = Field(description="bearer token this center accepts from us")
    ca_bundle: FilePath | None = Field(
        default=None, description="PEM file of the CA that signed the center's certificate"
    )

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")


class RetryPolicy(_Model):
    """Retries of idempotent calls (GETs; a POST only when the connection was never made).

    Attempt ``i`` (from 1) waits ``min(backoff_max_s, backoff_initial_s * 2**(i-1))`` before the
    next one.
    """

    attempts: int = Field(default=3, ge=1, le=10, description="tries in all, the first included")
    backoff_initial_s: float = Field(default=0.2, ge=0, le=60)
    backoff_max_s: float = Field(default=5.0, ge=0, le=600)

    def delay(self, attempt: int) -> float:
        return float(min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1)))


# Which TOML file the next Settings() reads; load_settings() sets it.
_config_file: ContextVar[Path | None] = ContextVar("fedstats_coordinator_config", default=None)


class Settings(BaseSettings):
    """Everything a coordinator operator decides. Secrets have no default."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    # dev_mode comes before the tokens: their checks read it.
    dev_mode: bool = Field(default=False, description="accept placeholder tokens; serve /docs")
    analyst_tokens: list[SecretStr] = Field(min_length=1, description="bearer tokens of analysts")
    centers: dict[str, CenterConfig] = Field(min_length=1, description="the registry, by id")
    min_centers: int = Field(default=2, ge=1, description="fewest centers a study may use")
    connect_timeout_s: float = Field(default=5.0, gt=0, le=300)
    read_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    retry: RetryPolicy = RetryPolicy()
    store_url: str = "sqlite:///./coordinator.sqlite"
    max_body_bytes: int = Field(default=100_000, ge=1024, description="analysts' requests")
    max_running_studies: int = Field(
        default=16, ge=1, le=10_000, description="studies running at once; more are refused (503)"
    )
    max_response_bytes: int = Field(
        default=50_000_000, ge=1024, description="longest answer read from a center"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8800, ge=0, le=65535)

    @field_validator("centers")
    @classmethod
    def _center_registry(
        cls, centers: dict[str, CenterConfig], info: ValidationInfo
    ) -> dict[str, CenterConfig]:
        dev_mode = bool(info.data.get("dev_mode", False))
        for center_id, center in centers.items():
            if not _CENTER_ID.fullmatch(center_id) or len(center_id) > 64:
                raise ValueError(
                    f"center id {center_id!r} must be letters, digits, '.', '_' or '-' "
                    "(at most 64)"
                )
            if _weak(center.token) and not dev_mode:
                raise ValueError(
                    f"the token of center {center_id!r} is a placeholder or shorter than "
                    f"{MIN_TOKEN_LENGTH} characters (dev_mode = true accepts it for local tests)"
                )
        return centers

    @field_validator("analyst_tokens")
    @classmethod
    def _no_placeholder_tokens(
        cls, tokens: list[SecretStr], info: ValidationInfo
    ) -> list[SecretStr]:
        dev_mode = bool(info.data.get("dev_mode", False))
        for i, token in enumerate(tokens):
            if _weak(token) and not dev_mode:
                raise ValueError(
                    f"analyst token #{i} is a placeholder or shorter than {MIN_TOKEN_LENGTH} "
                    "characters; use a long random token (dev_mode = true accepts it for local "
                    "tests only)"
                )
            if _weak(token):
                log.warning("analyst token #%d is weak; accepted only because dev_mode is on", i)
        return tokens

    @field_validator("store_url")
    @classmethod
    def _store_backend(cls, url: str) -> str:
        try:
            backend = make_url(url).get_backend_name()
        except ArgumentError as exc:
            raise ValueError(f"not a SQLAlchemy database URL: {exc}") from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"the store runs on sqlite or postgresql, not {backend!r}")
        return url

    @model_validator(mode="after")
    def _enough_centers(self) -> Self:
        if self.min_centers > len(self.centers):
            raise ValueError(
                f"min_centers = {self.min_centers} but only {len(self.centers)} centers are "
                "registered"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: explicit arguments, then the environment, then the TOML file."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def format_validation_error(exc: ValidationError) -> str:
    """One line per error, each naming the dotted key; the offending input is never shown."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        key = ".".join(str(part) for part in err["loc"]) or "(top level)"
        lines.append(f"{key}: {err['msg']}")
    return "; ".join(lines)


@contextmanager
def _reading(path: Path | None) -> Iterator[None]:
    token = _config_file.set(path)
    try:
        yield
    finally:
        _config_file.reset(token)


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Read and validate the settings (file from the argument or ``FEDSTATS_COORDINATOR_CONFIG``).

    Raises :class:`ConfigError` naming the environment variable or the bad keys.
    """
    if config_file is None:
        config_file = os.environ.get(CONFIG_ENV) or None
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise ConfigError(f"{CONFIG_ENV}: configuration file {str(path)!r} does not exist")
    try:
        with _reading(path):
            return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid coordinator configuration: {format_validation_error(exc)}"
        ) from None
    except ValueError as exc:  # TOML syntax errors and the like
        raise ConfigError(
            f"invalid coordinator configuration file {str(path)!r}: {exc}"
        ) from None
