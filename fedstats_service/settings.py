"""A service's settings: one TOML file (named by an environment variable) under environment
overrides, validated once, with errors that name the dotted key.

:class:`ServiceSettings` is the base of both services' ``Settings``: what serving takes (host,
port, the connection limits, dev mode), where the settings come from (:meth:`~ServiceSettings.load`)
and which bearer tokens a caller must present. :class:`Section` is the base of a settings table.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    ValidationInfo,
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

from fedstats_service.errors import describe_errors
from fedstats_service.timeouts import BODY_TIMEOUT_S, HEADER_TIMEOUT_S

log = logging.getLogger(__name__)

#: Values an operator forgot to replace; refused as tokens outside dev mode.
PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "changethis", "change-me", "change_me", "secret", "token", "password", "test",
     "example", "default", "admin", "todo", "xxx", "dev"}
)
MIN_TOKEN_LENGTH = 16

_S = TypeVar("_S", bound=BaseSettings)

# The connection limits both services take (``fedstats_service.serving``), with their bounds.
Port = Annotated[int, Field(ge=0, le=65535)]
MaxBodyBytes = Annotated[int, Field(ge=1024, description="the longest request body read")]
MaxConcurrency = Annotated[int, Field(ge=1, description="connections and requests served at once")]
HeaderTimeout = Annotated[float, Field(gt=0, le=600,
                                       description="time a client has to send a request's head")]
BodyTimeout = Annotated[float, Field(gt=0, le=3600,
                                     description="time a client has to send a request's body")]

# Which TOML file the next settings object reads; load_settings() sets it.
_config_file: ContextVar[Path | None] = ContextVar("fedstats_config_file", default=None)


class ConfigError(ValueError):
    """The configuration is unusable; the message names the bad key(s)."""


def check_tokens(tokens: list[SecretStr], *, dev_mode: bool, what: str) -> list[SecretStr]:
    """Refuse placeholder or short tokens outside dev mode (warn inside it); ``what`` names
    them in the message."""
    for i, token in enumerate(tokens):
        value = token.get_secret_value()
        weak = value.strip().lower() in PLACEHOLDER_SECRETS or len(value) < MIN_TOKEN_LENGTH
        if weak and not dev_mode:
            raise ValueError(
                f"{what} #{i} is a placeholder or shorter than {MIN_TOKEN_LENGTH} characters; "
                "use a long random token (dev_mode = true accepts it for local tests only)"
            )
        if weak:
            log.warning("%s #%d is weak; accepted only because dev_mode is on", what, i)
    return tokens


def strong_tokens(what: str) -> AfterValidator:
    """The validator of a settings field of bearer tokens: :func:`check_tokens`, in the dev mode
    the settings declare (``dev_mode`` is validated first)."""

    def check(tokens: list[SecretStr], info: ValidationInfo) -> list[SecretStr]:
        return check_tokens(tokens, dev_mode=bool(info.data.get("dev_mode", False)), what=what)

    return AfterValidator(check)


def check_sql_url(url: str) -> str:
    """A URL SQLAlchemy can parse (any database)."""
    try:
        make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"not a SQLAlchemy database URL: {exc}") from None
    return url


SqlUrl = Annotated[str, AfterValidator(check_sql_url)]


def check_database_url(url: str, what: str) -> str:
    """A SQLAlchemy URL of SQLite or PostgreSQL, the databases a service keeps its own records
    in (``what`` names that database in the message)."""
    backend = make_url(check_sql_url(url)).get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"the {what} runs on sqlite or postgresql, not {backend!r}")
    return url


def database_url(what: str) -> AfterValidator:
    """The validator of a settings field naming a service's own database
    (:func:`check_database_url`)."""
    return AfterValidator(lambda url: check_database_url(url, what))


def sources(
    settings_cls: type[BaseSettings],
    init_settings: PydanticBaseSettingsSource,
    env_settings: PydanticBaseSettingsSource,
) -> tuple[PydanticBaseSettingsSource, ...]:
    """Precedence: explicit arguments, then the environment, then the TOML file being loaded."""
    chosen: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
    path = _config_file.get()
    if path is not None:
        chosen.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
    return tuple(chosen)


def format_validation_error(exc: ValidationError) -> str:
    """One part per error, each naming the dotted key; the offending input is never shown."""
    return describe_errors(exc.errors(include_url=False, include_input=False),
                           empty="(top level)")


@contextmanager
def _reading(path: Path | None) -> Iterator[None]:
    token = _config_file.set(path)
    try:
        yield
    finally:
        _config_file.reset(token)


def load_settings(
    settings_cls: type[_S],
    *,
    config_env: str,
    service: str,
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> _S:
    """Read and validate ``settings_cls`` (file from the argument or ``config_env``).

    Raises :class:`ConfigError` naming the environment variable or the bad keys.
    """
    if config_file is None:
        config_file = os.environ.get(config_env) or None
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise ConfigError(f"{config_env}: configuration file {str(path)!r} does not exist")
    try:
        with _reading(path):
            return settings_cls(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(
            f"invalid {service} configuration: {format_validation_error(exc)}"
        ) from None
    except ValueError as exc:  # TOML syntax errors and the like
        raise ConfigError(f"invalid {service} configuration file {str(path)!r}: {exc}") from None


class Section(BaseModel):
    """A table of a settings file: frozen, and a key it does not declare is an error (a typo
    must not silently fall back to a default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ServiceSettings(BaseSettings):
    """What every service's settings hold. A subclass names its service and its file's
    environment variable (``SERVICE``, ``CONFIG_ENV``), sets ``env_prefix`` in its
    ``model_config``, gives ``port``, ``max_body_bytes`` and ``max_concurrency`` their defaults
    and says which tokens callers present (:attr:`bearer_tokens`)."""

    model_config = SettingsConfigDict(env_nested_delimiter="__", extra="forbid", frozen=True)

    SERVICE: ClassVar[str]
    CONFIG_ENV: ClassVar[str]

    # dev_mode comes first: the token checks of every service read it.
    dev_mode: bool = Field(default=False, description="accept placeholder tokens; serve /docs")
    host: str = "127.0.0.1"
    port: Port
    max_body_bytes: MaxBodyBytes
    max_concurrency: MaxConcurrency
    header_timeout_s: HeaderTimeout = HEADER_TIMEOUT_S
    body_timeout_s: BodyTimeout = BODY_TIMEOUT_S
    log_format: Literal["text", "json"] = Field(
        default="text", description="text: one timestamped line per event; json: one object")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    tls_certfile: FilePath | None = Field(
        default=None, description="PEM certificate (chain) to serve HTTPS with")
    tls_keyfile: FilePath | None = Field(default=None, description="its PEM private key")
    tls_client_ca: FilePath | None = Field(
        default=None,
        description="mutual TLS: PEM file of the CA(s) a client certificate must be signed by; "
                    "a caller without one cannot connect (needs tls_certfile)")

    @model_validator(mode="after")
    def _tls_pair(self) -> Self:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ValueError("tls_certfile and tls_keyfile must be given together")
        if self.tls_client_ca is not None and self.tls_certfile is None:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_certfile and tls_keyfile")
        # Loaded once here, so a file that is not PEM, or a key that is not the certificate's,
        # stops start-up naming the keys instead of failing inside uvicorn with a traceback.
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if self.tls_certfile is not None and self.tls_keyfile is not None:
            try:
                context.load_cert_chain(self.tls_certfile, self.tls_keyfile)
            except (ssl.SSLError, OSError) as exc:
                raise ValueError(
                    "tls_certfile and tls_keyfile must be a PEM certificate (chain) and its "
                    f"private key, unencrypted ({exc.__class__.__name__}: "
                    f"{getattr(exc, 'reason', None) or exc})") from None
        if self.tls_client_ca is not None:
            try:
                context.load_verify_locations(cafile=self.tls_client_ca)
            except (ssl.SSLError, OSError) as exc:
                raise ValueError("tls_client_ca must be a PEM file of CA certificates "
                                 f"({exc.__class__.__name__})") from None
        return self

    @property
    def bearer_tokens(self) -> list[SecretStr]:
        """The tokens a caller may present (checked by ``fedstats_service.auth``)."""
        raise NotImplementedError

    @property
    def tls(self) -> bool:
        """Whether the service serves HTTPS itself."""
        return self.tls_certfile is not None

    @property
    def tls_files(self) -> tuple[Path, Path] | None:
        """(certificate, key) to serve HTTPS with; none: plain HTTP (TLS in front, or loopback)."""
        if self.tls_certfile is None or self.tls_keyfile is None:
            return None
        return self.tls_certfile, self.tls_keyfile

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
        return sources(settings_cls, init_settings, env_settings)

    @classmethod
    def load(cls, config_file: str | Path | None = None, **overrides: Any) -> Self:
        """Read and validate the settings (file from the argument or ``CONFIG_ENV``).

        Raises :class:`ConfigError` naming the environment variable or the bad keys.
        """
        return load_settings(cls, config_env=cls.CONFIG_ENV, service=cls.SERVICE,
                             config_file=config_file, overrides=overrides)


class ToolSettings(BaseSettings):
    """The few keys of a service's settings an operator's command reads (the store's or the
    ledger's URL, ...), from the same file and environment as the service's, **every other key
    ignored and nothing else validated**: a command on the store needs no token, certificate or
    service setting, and starts without importing the service (``docs/deploy.md``, "Operator
    commands"). A subclass declares its keys, ``SERVICE``, ``CONFIG_ENV`` and ``env_prefix``."""

    model_config = SettingsConfigDict(env_nested_delimiter="__", extra="ignore", frozen=True)

    SERVICE: ClassVar[str]
    CONFIG_ENV: ClassVar[str]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The service's precedence: explicit arguments, the environment, the TOML file."""
        return sources(settings_cls, init_settings, env_settings)

    @classmethod
    def load(cls, config_file: str | Path | None = None, **overrides: Any) -> Self:
        """Read and validate the command's keys (:func:`load_settings`)."""
        return load_settings(cls, config_env=cls.CONFIG_ENV, service=cls.SERVICE,
                             config_file=config_file, overrides=overrides)
