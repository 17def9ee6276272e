"""The center's one settings class: a TOML file plus ``FEDSTATS_CENTER_*`` environment overrides.

The file is named by ``FEDSTATS_CENTER_CONFIG`` (or passed to :func:`load_settings`). Environment
variables win over the file; nested keys use ``__``::

    FEDSTATS_CENTER_K=20
    FEDSTATS_CENTER_TOKENS='["<a long random token>"]'
    FEDSTATS_CENTER_DATASETS__COHORT__EPSILON_TOTAL=2.5

A minimal file::

    center_id = "hospital-a"
    tokens = ["<a long random token>"]

    [datasets.cohort]
    epsilon_total = 3.0
    variables = ["age", "crp"]
    source = { kind = "csv", path = "/srv/data/cohort.csv" }
    group = { column = "arm", levels = ["control", "treated"] }

Everything is validated once, at start-up; :func:`load_settings` raises :class:`ConfigError` whose
message names every bad key (``datasets.cohort.source.csv.path: ...``). Nothing that is not declared
here (datasets, variables, group columns and levels) can ever be queried. What is validated here
is the configuration: a dataset's *data* (its file there and readable, its database reachable,
its columns, grants and values) are the dataset's state, checked when it is read
(``center_agent.data``): a broken dataset is unavailable, not a bad setting of the center.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    DirectoryPath,
    Field,
    FilePath,
    SecretStr,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict
from sqlalchemy.engine import make_url

from fedstats_service.settings import ConfigError as ConfigError
from fedstats_service.settings import (
    MaxBodyBytes,
    MaxConcurrency,
    Port,
    Section,
    ServiceSettings,
    SqlUrl,
    ToolSettings,
    database_url,
    strong_tokens,
)
from shared.fields import VariableMeta
from shared.privacy import Neighbouring, ReleaseMode

CONFIG_ENV = "FEDSTATS_CENTER_CONFIG"
ENV_PREFIX = "FEDSTATS_CENTER_"


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def _identifier(value: str) -> str:
    if not _IDENT.fullmatch(value):
        raise ValueError(f"{value!r} is not a plain column name (letters, digits, _)")
    return value


def _qualified_identifier(value: str) -> str:
    if not _QUALIFIED_IDENT.fullmatch(value):
        raise ValueError(f"{value!r} is not a table name of the form name or schema.name")
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]


def _file_path(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        raise ValueError("give the data file's path")
    return value


DataPath = Annotated[Path, BeforeValidator(_file_path)]
"""A data file's path. Only its form is the configuration's: whether the file is there and
readable is the dataset's state, checked when the dataset is read (at start-up and on every
request), so a dataset whose file is missing is unavailable while the center's other datasets
are served, and serves once the file is there (``docs/deploy.md``, "Start-up checks")."""


class CsvSource(Section):
    """A CSV file with a header row; only the requested columns are parsed."""

    kind: Literal["csv"]
    path: DataPath


class ParquetSource(Section):
    """A Parquet file; only the requested columns are read."""

    kind: Literal["parquet"]
    path: DataPath


class SqlSource(Section):
    """A table (``table``) or an operator-written query (``query``) in any SQLAlchemy database.

    The rows are read once per *data version* and kept (``docs/deploy.md``, "SQL sources"):
    with ``version_query`` (the operator's SQL answering one row, e.g.
    ``SELECT max(updated_at), count(*) FROM cohort``) they are read again when its answer
    changes; without it, when ``version_ttl_s`` seconds have passed since the last read
    (``0``: on every request)."""

    kind: Literal["sql"]
    url: SqlUrl
    table: Annotated[str, AfterValidator(_qualified_identifier)] | None = None
    query: str | None = None
    version_query: str | None = Field(
        default=None, min_length=1,
        description="SQL answering one row that changes whenever the data change (e.g. "
                    "`SELECT max(updated_at), count(*) FROM t`); run on every request, the "
                    "data are read again only when its answer changes",
    )
    version_ttl_s: float = Field(
        default=300.0, ge=0, le=31_622_400,
        description="without a version_query: seconds the data read are kept before the next "
                    "request reads them again (0: read on every request)",
    )

    password_file: FilePath | None = Field(
        default=None,
        description="a file holding the database password alone (a trailing newline is "
                    "ignored), e.g. a Docker secret: /run/secrets/db_password; the `url` then "
                    "has no password")
    password: SecretStr | None = Field(
        default=None,
        description="the database password, from the environment only "
                    "(FEDSTATS_CENTER_DATASETS__<NAME>__SOURCE__PASSWORD); the `url` then has "
                    "no password")

    @model_validator(mode="after")
    def _one_password(self) -> Self:
        # One place for the secret: a password in the URL too would be the one used by mistake
        # (and the URL is the key operators paste into tickets).
        given = [name for name in ("password", "password_file") if getattr(self, name)]
        if len(given) > 1:
            raise ValueError("give the password once: `password` (environment) or "
                             "`password_file`, not both")
        if given and make_url(self.url).password is not None:
            raise ValueError(f"`url` holds a password and `{given[0]}` gives one: keep it "
                             f"in `{given[0]}` only")
        if self.password_file is not None:
            self._read_password_file()
        return self

    def _read_password_file(self) -> str:
        assert self.password_file is not None
        try:
            secret = self.password_file.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"password_file cannot be read ({type(exc).__name__}); check "
                             "that the service's user may read it") from None
        if not secret:
            raise ValueError("password_file is empty")
        return secret

    def connect_url(self) -> str:
        """``url`` with the password put in (from ``password`` or ``password_file``): what
        the source connects with. Never log it (SQLAlchemy's own URL objects hide it)."""
        if self.password is None and self.password_file is None:
            return self.url
        secret = (self.password.get_secret_value() if self.password is not None
                  else self._read_password_file())
        return make_url(self.url).set(password=secret).render_as_string(hide_password=False)

    @model_validator(mode="after")
    def _table_xor_query(self) -> Self:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of `table` or `query`")
        return self

    @field_validator("version_ttl_s")
    @classmethod
    def _finite_ttl(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be finite")
        return value


Source = Annotated[CsvSource | ParquetSource | SqlSource, Field(discriminator="kind")]


class GroupConfig(Section):
    """The one column that splits a dataset into groups, and the only levels ever answered."""

    column: Identifier
    levels: list[str] = Field(min_length=1)

    @field_validator("levels")
    @classmethod
    def _distinct(cls, levels: list[str]) -> list[str]:
        if len(set(levels)) != len(levels):
            raise ValueError("levels must be distinct")
        if any(not level for level in levels):
            raise ValueError("levels must be non-empty strings")
        return levels


def event_texts(value: bool | int | str) -> tuple[str, ...]:
    """How a declared event or censoring value reads in a column, as text (every event column
    is compared as text, ``center_agent.data.joint``): an integer as its digits (a column of
    1.0 reads as ``1``), a string as it is, a boolean as ``true``/``false`` (also ``t``/``f``,
    as PostgreSQL writes booleans as text) in any case."""
    if isinstance(value, bool):
        word = "true" if value else "false"
        return (word, word.capitalize(), word.upper(), word[0], word[0].upper())
    return (str(value),)


EventValue = Annotated[StrictBool | StrictInt | Annotated[StrictStr, Field(min_length=1)],
                       Field(union_mode="left_to_right")]
"""A declared event or censoring value as written: a boolean, an integer or a string (strict:
the string "yes" is a label, never read as the boolean true)."""


def _codes(*values: bool | int | str) -> list[bool | int | str]:
    return list(values)


class TimeToEventConfig(Section):
    """A time-to-event variable: a ``time`` column (time from the start of follow-up, in
    ``unit``; >= 0 and finite where present) and an ``event`` column (``event_values``: the
    event happened at that time; ``censored_values``: followed up to that time without it; any
    other value is a data error, an empty cell or NULL missing), read together
    (``center_agent.data.joint``). ``follow_up`` is the public range of follow-up: every DP
    life table's grid lies in it. Released only as DP life tables (``dp_life_table``)."""

    time: Identifier
    event: Identifier
    event_values: list[EventValue] = Field(default_factory=lambda: _codes(1), min_length=1)
    censored_values: list[EventValue] = Field(default_factory=lambda: _codes(0), min_length=1)
    follow_up: tuple[float, float]
    unit: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.time == self.event:
            raise ValueError(f"`time` and `event` must be two columns, both are {self.time!r}")
        start, end = self.follow_up
        if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
            raise ValueError(f"`follow_up` must be [start, end] with 0 <= start < end, both "
                             f"finite, got {list(self.follow_up)}")
        texts = {name: [t for v in getattr(self, name) for t in event_texts(v)]
                 for name in ("event_values", "censored_values")}
        for name, listed in texts.items():
            if len(set(listed)) != len(listed):
                raise ValueError(f"`{name}` lists a value twice")
        both = sorted(set(texts["event_values"]) & set(texts["censored_values"]))
        if both:
            raise ValueError(f"{both} listed both in `event_values` and in `censored_values`: "
                             "a record is an event or censored, not both")
        return self


MAX_CATEGORIES = 1000
"""The most categories a categorical variable may declare (each is a cell of every release)."""


class DatasetConfig(Section):
    source: Source
    variables: list[Identifier] = Field(min_length=1)
    group: GroupConfig | None = None
    epsilon_total: float = Field(gt=0, description="total ε this dataset may ever spend")
    epsilon_per_request: float | None = Field(
        default=None, gt=0,
        description="the most ε one request may spend (default: a quarter of epsilon_total)",
    )
    epsilon_per_period: float | None = Field(
        default=None, gt=0,
        description="the most ε all requests together may spend per `period_days` (default: "
                    "no cap besides epsilon_total)",
    )
    period_days: float = Field(default=30.0, gt=0, le=3660)
    release_mode: ReleaseMode = Field(
        default="k_anonymous",
        description="'k_anonymous': K-anonymous tables and DP releases, sizes shown rounded "
                    "down to K; 'dp': every release differentially private (exact kinds "
                    "refused before any data is read, /v1/info shows only declared sizes: "
                    "docs/privacy.md, \"DP mode\")")
    declared_n: int | None = Field(
        default=None, ge=0, le=10**12,
        description="release_mode 'dp' only: a public size of the dataset the operator "
                    "declares (shown in /v1/info instead of any count of the data)")
    declared_n_by_group: dict[str, Annotated[int, Field(ge=0, le=10**12)]] = Field(
        default_factory=dict,
        description="release_mode 'dp' only: public sizes per declared level")
    metadata: dict[str, VariableMeta] = Field(
        default_factory=dict,
        description="public metadata per variable: bounds, unit, resolution (e.g. "
                    "`metadata.los = { bounds = [0, 90], unit = \"day\", resolution = 1 }`)",
    )
    missing: Literal["complete_cases", "per_variable"] = Field(
        default="complete_cases",
        description="which records a release of a variable counts: `complete_cases`, those with "
                    "every declared variable present; `per_variable`, those with this variable "
                    "present, the missing ones a released count of their own under the K rule "
                    "(docs/privacy.md, guarantee 15)",
    )
    categorical: dict[Identifier, list[str]] = Field(
        default_factory=dict,
        description="categorical variables and their public categories, in the order adjacent "
                    "categories are merged (e.g. `categorical.smoking = [\"never\", \"former\", "
                    "\"current\"]`); a missing or undeclared label is counted in its own "
                    "missing cell, last in that order. They never leave a row out of the "
                    "population (docs/privacy.md, guarantee 15)",
    )
    time_to_event: dict[Identifier, TimeToEventConfig] = Field(
        default_factory=dict,
        description="time-to-event variables, each a time and an event column read together "
                    "(e.g. `time_to_event.readmission = { time = \"days\", event = "
                    "\"readmitted\", event_values = [1], censored_values = [0], follow_up = "
                    "[0, 90], unit = \"days\" }`); released only as DP life tables "
                    "(docs/privacy.md, guarantee 17)",
    )

    def declared_size(self, level: str | None) -> int | None:
        """The operator's public size of one level (or of every record), None if undeclared."""
        return self.declared_n if level is None else self.declared_n_by_group.get(level)

    @property
    def request_cap(self) -> float:
        """The effective per-request ε cap."""
        if self.epsilon_per_request is not None:
            return min(self.epsilon_per_request, self.epsilon_total)
        return self.epsilon_total / 4

    @field_validator("variables")
    @classmethod
    def _distinct_variables(cls, variables: list[str]) -> list[str]:
        if len(set(variables)) != len(variables):
            raise ValueError("variables must be distinct")
        return variables

    @field_validator("epsilon_total", "epsilon_per_request", "epsilon_per_period", "period_days")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be finite")
        return value

    @model_validator(mode="after")
    def _metadata_of_variables(self) -> Self:
        unknown = sorted(set(self.metadata) - set(self.variables))
        if unknown:
            raise ValueError(f"metadata names undeclared variable(s) {unknown}")
        return self

    @model_validator(mode="after")
    def _declared_sizes(self) -> Self:
        # A declared size is a public statement standing in for the data's size, which only
        # DP mode withholds; in K-anonymous mode it would contradict the rounded size shown.
        declared = self.declared_n is not None or bool(self.declared_n_by_group)
        if declared and self.release_mode != "dp":
            raise ValueError("declared_n and declared_n_by_group are shown only with "
                             "release_mode = \"dp\": set it, or remove them")
        unknown = sorted(set(self.declared_n_by_group)
                         - set(self.group.levels if self.group is not None else ()))
        if unknown:
            raise ValueError(f"declared_n_by_group names undeclared level(s) {unknown}")
        return self

    @model_validator(mode="after")
    def _group_not_a_variable(self) -> Self:
        if self.group is not None and self.group.column in self.variables:
            raise ValueError(f"group column {self.group.column!r} is also listed as a variable")
        return self

    @model_validator(mode="after")
    def _categories(self) -> Self:
        both = sorted(set(self.categorical) & set(self.variables))
        if both:
            raise ValueError(f"{both} listed both as variables and as categorical: a variable "
                             "is numeric or categorical, not both")
        if self.group is not None and self.group.column in self.categorical:
            raise ValueError(f"group column {self.group.column!r} is also declared categorical")
        for name, levels in self.categorical.items():
            if not levels:
                raise ValueError(f"categorical.{name} declares no category")
            if len(set(levels)) != len(levels) or any(not level for level in levels):
                raise ValueError(f"categorical.{name}: categories must be distinct non-empty "
                                 "strings")
            if len(levels) > MAX_CATEGORIES:
                raise ValueError(f"categorical.{name} declares {len(levels)} categories, more "
                                 f"than {MAX_CATEGORIES}")
        return self

    @model_validator(mode="after")
    def _time_to_event(self) -> Self:
        # One name space for what a request may name; the columns are the operator's: a time
        # column is released otherwise only when it is also declared a (numeric) variable, an
        # event column only when also declared a variable or categorical (guarantee 17).
        group = self.group.column if self.group is not None else None
        for name, tte in self.time_to_event.items():
            key = f"time_to_event.{name}"
            if name in self.variables or name in self.categorical:
                raise ValueError(f"{key}: {name!r} is also declared a variable or categorical; "
                                 "give the time-to-event variable a name of its own")
            if group is not None and group in (tte.time, tte.event):
                raise ValueError(f"{key}: the group column {group!r} cannot be its time or "
                                 "event column")
            if tte.time in self.categorical:
                raise ValueError(f"{key}.time: column {tte.time!r} is declared categorical; a "
                                 "time is a number")
        return self


class Settings(ServiceSettings):
    """Everything a center operator decides. Secrets (``tokens``) have no default; dev mode,
    host and the connection limits are declared with the coordinator's
    (``fedstats_service.settings.ServiceSettings``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)
    SERVICE: ClassVar[str] = "center"
    CONFIG_ENV: ClassVar[str] = CONFIG_ENV

    center_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    datasets: dict[str, DatasetConfig] = Field(min_length=1)
    k: int = Field(default=10, ge=2, description="no released count lies in 1..k-1")
    neighbouring: Neighbouring = "add_remove"
    accountant_delta: float = Field(
        default=1e-6, ge=0, lt=1e-2,
        description="the δ at which GET /v1/budget states each dataset's lifetime (ε, δ)-DP "
                    "guarantee (optimal composition of its noisy releases, shared.accounting); "
                    "0: the basic bound only")
    tokens: Annotated[list[SecretStr], strong_tokens("token")] = Field(
        min_length=1, description="bearer tokens allowed to call")
    operator_tokens: Annotated[list[SecretStr], strong_tokens("operator token")] = Field(
        default_factory=list,
        description="bearer tokens of the center's operator: they read GET /v1/audit and "
                    "nothing else (default: none, the audit endpoint refuses everyone)")
    allow_quantile_loss: bool = Field(
        default=False, description="quantile-loss values leak data; benchmark use only"
    )
    ledger_url: Annotated[str, database_url("ledger")] = "sqlite:///./center_ledger.sqlite"
    # Brent on λ needs 14 evaluations typically, 30 at most on Gamma studies (shared.quantiles);
    # every call is ε-DP and paid, the caps bound the number of them besides.
    yj_max_calls: int = Field(default=400, ge=1,
                              description="YJ moment releases per dataset, all callers")
    yj_max_calls_per_token: int = Field(default=200, ge=1,
                                        description="YJ moment releases per dataset and token")
    allow_exact_mwu: bool = Field(
        default=True,
        description="answer Mann-Whitney requests without ε (exact U); false: only noisy ones",
    )
    max_releases_per_variable: int = Field(
        default=64, ge=1, le=10_000,
        description="distinct exact releases (tables, refinements) remembered per variable",
    )
    max_limits_per_variable: int = Field(
        default=200_000, ge=100, le=10_000_000,
        description="limits those releases may hold together (bounds disclosure control's "
                    "cost)",
    )
    min_epsilon_per_release: float = Field(
        default=1e-3, ge=0, le=1,
        description="the least ε one differentially private release may ask for (below it a "
                    "release is refused with 422): noise beyond any use costs the center "
                    "work and nearly no budget",
    )
    compute_allowance: int = Field(
        default=1_000_000_000, ge=1,
        description="the work one token may make this center compute per compute_period_s: "
                    "releases computed (not answered from the store) times the records of "
                    "their dataset (its public size); past it, 429 with Retry-After",
    )
    compute_period_s: float = Field(
        default=3600.0, gt=0, le=31_622_400,
        description="the period of compute_allowance, in seconds (fixed windows)",
    )
    signing_key_file: FilePath | None = Field(
        default=None, description="Ed25519 key (fedstats center keygen); default: in the ledger"
    )
    peers: dict[str, str] = Field(
        default_factory=dict,
        description="center id -> base64 public key of the centers whose tables this one refines",
    )
    peer_keys_dir: DirectoryPath | None = Field(
        default=None, description="a directory of <center_id>.pub files (peers' public keys)"
    )
    warm_kernels: bool = Field(
        default=True,
        description="load the compiled binning and Mann-Whitney kernels as the center starts "
                    "(about a CPU second, compiled once into Numba's cache on a fresh "
                    "install), so that the first study does not wait for them at every center "
                    "of its refinement chain",
    )
    max_body_bytes: MaxBodyBytes = 1_000_000
    max_concurrency: MaxConcurrency = 128
    port: Port = 8700

    @field_validator("datasets")
    @classmethod
    def _dataset_names(cls, datasets: dict[str, DatasetConfig]) -> dict[str, DatasetConfig]:
        for name in datasets:
            if not _NAME.fullmatch(name):
                raise ValueError(
                    f"dataset name {name!r} must be lower-case letters, digits, '_' or '-'"
                )
        return datasets

    @field_validator("peers")
    @classmethod
    def _peer_keys(cls, peers: dict[str, str]) -> dict[str, str]:
        from center_agent.gate.keys import decode_public_key

        for center_id, key in peers.items():
            try:
                decode_public_key(key)
            except ValueError as exc:
                raise ValueError(f"peer {center_id!r}: {exc}") from None
        return peers

    @model_validator(mode="after")
    def _operator_tokens_apart(self) -> Self:
        # One token in both lists would both release and read the trail: the roles must stay
        # apart (docs/privacy.md, "Audit trail").
        released = {token.get_secret_value() for token in self.tokens}
        if any(token.get_secret_value() in released for token in self.operator_tokens):
            raise ValueError("operator_tokens: a token may not also be in tokens (the "
                             "operator reads the audit trail, the coordinator releases)")
        return self

    @model_validator(mode="after")
    def _dp_mode_add_remove(self) -> Self:
        # Under swap a neighbouring dataset has the same size: the size is outside the
        # guarantee, while DP mode promises that every release, its size included, is DP.
        dp = sorted(name for name, d in self.datasets.items() if d.release_mode == "dp")
        if dp and self.neighbouring != "add_remove":
            raise ValueError(f"datasets {dp} have release_mode = \"dp\", which needs "
                             "neighbouring = \"add_remove\" (under swap the size is public)")
        return self

    @property
    def bearer_tokens(self) -> list[SecretStr]:
        """The coordinator's tokens (the operator's are told apart by the center's
        authenticator, ``center_agent.api.deps.roles``)."""
        return self.tokens



class LedgerSettings(ToolSettings):
    """What ``fedstats center audit`` reads: the ledger's URL (every other key is ignored,
    tokens included: ``fedstats_service.settings.ToolSettings``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)
    SERVICE: ClassVar[str] = "center"
    CONFIG_ENV: ClassVar[str] = CONFIG_ENV

    ledger_url: Annotated[str, database_url("ledger")] = "sqlite:///./center_ledger.sqlite"


class EpochSettings(LedgerSettings):
    """What ``fedstats center epoch`` reads besides the ledger: K, the datasets (their sources
    are read: the check compares the data as they are now) and the disclosure memory's caps."""

    k: int = Field(default=10, ge=2)
    datasets: dict[str, DatasetConfig] = Field(min_length=1)
    max_releases_per_variable: int = Field(default=64, ge=1, le=10_000)
    max_limits_per_variable: int = Field(default=200_000, ge=100, le=10_000_000)


load_settings = Settings.load
"""Read and validate the settings (file from the argument or ``FEDSTATS_CENTER_CONFIG``);
raises :class:`ConfigError` naming the environment variable or the bad keys."""
