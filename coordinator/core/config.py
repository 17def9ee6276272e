"""The coordinator's one settings class: a TOML file plus ``FEDSTATS_COORDINATOR_*`` overrides.

The file is named by ``FEDSTATS_COORDINATOR_CONFIG`` (or passed to :func:`load_settings`).
Environment variables win over the file; nested keys use ``__``::

    FEDSTATS_COORDINATOR_MIN_CENTERS=3
    FEDSTATS_COORDINATOR_ANALYST_TOKENS='["<a long random token>"]'
    FEDSTATS_COORDINATOR_CENTERS__HOSPITAL_A__TOKEN='<the token hospital_a gave us>'
    FEDSTATS_COORDINATOR_RETRY__ATTEMPTS=5

A minimal file::

    analyst_tokens = ["<a long random token>"]   # optional: analyst accounts are recommended
    min_centers = 2
    tls_certfile = "/etc/fedstats/coordinator.pem"     # optional: serve HTTPS (with tls_keyfile)
    tls_client_certfile = "/etc/fedstats/client.pem"   # optional: mutual TLS to the centers
    tls_client_keyfile = "/etc/fedstats/client-key.pem"

    [centers.hospital_a]
    url = "https://hospital-a.example.org:8700"
    token = "<the token hospital_a gave us>"
    ca_bundle = "/etc/fedstats/hospital-a-ca.pem"   # optional: a private CA

    [centers.hospital_b]
    url = "http://127.0.0.1:8701"
    token = "<...>"

Completion webhooks are off unless ``webhook_allowed_prefixes`` is set (with
``webhook_secret``): a study's ``webhook_url`` must lie below one of them (parsed, not as a string:
``coordinator.core.urls``), so the coordinator can call only the receivers its operator chose
(``coordinator.webhooks``)::

    webhook_allowed_prefixes = ["https://hooks.example.org/fedstats/"]
    webhook_secret = "<a long random secret, shared with the receiver>"

Everything is validated once, at start-up; :func:`load_settings` raises :class:`ConfigError`
whose message names every bad key (``centers.hospital_a.url: ...``). Secrets (analyst tokens,
center tokens) are never echoed, not even in those messages; center tokens have no default, and
``analyst_tokens`` may be left out (analyst accounts live in the store: ``coordinator.accounts``).
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Annotated, ClassVar, Self

from pydantic import (
    AnyHttpUrl,
    Field,
    FilePath,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict

from coordinator.core import urls
from fedstats_service.settings import ConfigError as ConfigError
from fedstats_service.settings import (
    MaxBodyBytes,
    MaxConcurrency,
    Port,
    Section,
    ServiceSettings,
    ToolSettings,
    check_tokens,
    database_url,
    strong_tokens,
)

CONFIG_ENV = "FEDSTATS_COORDINATOR_CONFIG"
ENV_PREFIX = "FEDSTATS_COORDINATOR_"


_CENTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_prefix(prefix: str) -> str:
    """A webhook URL prefix: parsed as a study's webhook_url is (``coordinator.core.urls``),
    without query, its path ending in ``/``; kept as written."""
    urls.check_prefix(prefix)
    return prefix


class CenterConfig(Section):
    """One center the coordinator may call: where it is and the token it gave us."""

    url: AnyHttpUrl = Field(description="base URL, without /v1")
    token: SecretStr = Field(description="bearer token this center accepts from us")
    ca_bundle: FilePath | None = Field(
        default=None, description="PEM file of the CA that signed the center's certificate "
        "(default: the system's trust store, or SSL_CERT_FILE / SSL_CERT_DIR when set)"
    )

    @field_validator("ca_bundle")
    @classmethod
    def _readable_bundle(cls, path: FilePath | None) -> FilePath | None:
        if path is not None:
            try:
                ssl.create_default_context(cafile=str(path))
            except ssl.SSLError:
                raise ValueError("not a PEM file of CA certificates") from None
        return path

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")


class RetryPolicy(Section):
    """Retries of idempotent calls (GETs; a POST when its connection failed before an answer).

    Attempt ``i`` (from 1) waits ``min(backoff_max_s, backoff_initial_s * 2**(i-1))`` before the
    next one.
    """

    attempts: int = Field(default=3, ge=1, le=10, description="tries in all, the first included")
    backoff_initial_s: float = Field(default=0.2, ge=0, le=60)
    backoff_max_s: float = Field(default=5.0, ge=0, le=600)

    def delay(self, attempt: int) -> float:
        return float(min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1)))


class Settings(ServiceSettings):
    """Everything a coordinator operator decides. Secrets have no default; dev mode, host and
    the connection limits are declared with the center's
    (``fedstats_service.settings.ServiceSettings``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)
    SERVICE: ClassVar[str] = "coordinator"
    CONFIG_ENV: ClassVar[str] = CONFIG_ENV

    analyst_tokens: Annotated[list[SecretStr], strong_tokens("analyst token")] = Field(
        default_factory=list,
        description="bearer tokens of analysts, each its own analyst (config-<fingerprint>); "
                    "kept for migration: accounts (fedstats coordinator analyst add) are "
                    "recommended")
    centers: dict[str, CenterConfig] = Field(min_length=1, description="the registry, by id")
    min_centers: int = Field(default=2, ge=1, description="fewest centers a study may use")
    connect_timeout_s: float = Field(default=5.0, gt=0, le=300)
    read_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    retry: RetryPolicy = RetryPolicy()
    store_url: Annotated[str, database_url("store")] = "sqlite:///./coordinator.sqlite"
    max_body_bytes: MaxBodyBytes = Field(default=100_000, description="analysts' requests")
    max_concurrency: MaxConcurrency = 256
    max_running_studies: int = Field(
        default=16, ge=1, le=10_000, description="studies running at once; more are refused (503)"
    )
    max_response_bytes: int = Field(
        default=50_000_000, ge=1024, description="longest answer read from a center"
    )
    batch_releases: bool = Field(
        default=True, description="send a study's concurrent releases to a center in one request "
        "(POST /v1/datasets/{dataset}/releases); a center without that route is asked one by one")
    port: Port = 8800
    shared_store: bool = Field(
        default=False, description="several coordinator processes (or hosts) run over this "
        "store (PostgreSQL only): each study is leased by the process running it, and another "
        "process runs it on when that one dies (docs/deploy.md)")
    study_lease_s: float = Field(
        default=30.0, gt=0, le=3600, description="with shared_store: how long a study stays "
        "with a process that stopped renewing it (died) before another process takes it over")
    tls_client_certfile: FilePath | None = Field(
        default=None, description="mutual TLS: the PEM certificate (chain) the coordinator "
        "presents to centers that require one (their tls_client_ca signed it)")
    tls_client_keyfile: FilePath | None = Field(default=None, description="its PEM private key")

    webhook_allowed_prefixes: list[str] = Field(
        default_factory=list, max_length=100,
        description="URL prefixes a study's webhook_url must lie below (the same scheme, host "
                    "and port, a path below the prefix's, which ends in /); none: webhooks "
                    "are off")
    webhook_secret: SecretStr | None = Field(
        default=None, description="HMAC-SHA256 key the webhook bodies are signed with "
                                  "(X-Fedstats-Signature); the receivers hold it too")
    webhook_attempts: int = Field(default=5, ge=1, le=10,
                                  description="deliveries tried per notice, the first included")
    webhook_backoff_s: float = Field(default=1.0, ge=0, le=300,
                                     description="wait before the 2nd try; doubles each time")
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=120,
                                     description="connect and read timeout of one delivery")

    @field_validator("webhook_allowed_prefixes")
    @classmethod
    def _webhook_prefixes(cls, prefixes: list[str]) -> list[str]:
        return [check_prefix(p) for p in prefixes]

    @model_validator(mode="after")
    def _webhook_secret(self) -> Self:
        if self.webhook_allowed_prefixes and self.webhook_secret is None:
            raise ValueError("webhook_allowed_prefixes needs webhook_secret (the receivers "
                             "check each notice's signature with it)")
        if self.webhook_secret is not None:
            check_tokens([self.webhook_secret], dev_mode=self.dev_mode, what="webhook_secret")
        return self

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
            check_tokens([center.token], dev_mode=dev_mode,
                         what=f"the token of center {center_id!r}")
        return centers

    @model_validator(mode="after")
    def _enough_centers(self) -> Self:
        if self.min_centers > len(self.centers):
            raise ValueError(
                f"min_centers = {self.min_centers} but only {len(self.centers)} centers are "
                "registered"
            )
        return self

    @model_validator(mode="after")
    def _shared_store(self) -> Self:
        if self.shared_store and not self.store_url.startswith("postgresql"):
            raise ValueError("shared_store needs a PostgreSQL store_url (postgresql+psycopg://"
                             "...): SQLite serves one coordinator process")
        return self

    @model_validator(mode="after")
    def _client_certificate(self) -> Self:
        cert, key = self.tls_client_certfile, self.tls_client_keyfile
        if (cert is None) != (key is None):
            raise ValueError("tls_client_certfile and tls_client_keyfile must be given together")
        if cert is not None and key is not None:
            try:  # a bad pair must stop start-up naming the keys, not the first study
                ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(str(cert), str(key))
            except ssl.SSLError:
                raise ValueError("tls_client_certfile and tls_client_keyfile are not a PEM "
                                 "certificate and its private key") from None
        return self

    @property
    def client_cert(self) -> tuple[Path, Path] | None:
        """(certificate, key) presented to centers (mutual TLS), or none."""
        if self.tls_client_certfile is None or self.tls_client_keyfile is None:
            return None
        return self.tls_client_certfile, self.tls_client_keyfile

    @property
    def bearer_tokens(self) -> list[SecretStr]:
        return self.analyst_tokens


class StoreSettings(ToolSettings):
    """What the operator's commands on the store read (``fedstats coordinator analyst ...``,
    ``... audit``): the store's URL, the registered centers' ids (a quota names one) and the
    ``analyst_tokens`` if any (their analysts are listed; the tokens' strength is not checked
    here); every other key is ignored, the centers' tokens included
    (``fedstats_service.settings.ToolSettings``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)
    SERVICE: ClassVar[str] = "coordinator"
    CONFIG_ENV: ClassVar[str] = CONFIG_ENV

    store_url: Annotated[str, database_url("store")] = "sqlite:///./coordinator.sqlite"
    centers: dict[str, dict[str, object]] = Field(default_factory=dict)
    analyst_tokens: list[SecretStr] = Field(default_factory=list)


load_settings = Settings.load
"""Read and validate the settings (file from the argument or ``FEDSTATS_COORDINATOR_CONFIG``);
raises :class:`ConfigError` naming the environment variable or the bad keys."""
