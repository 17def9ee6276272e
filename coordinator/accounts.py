"""Analyst accounts: who may call the coordinator, as what, and the authenticator that says so.

An account is a row of the store (``coordinator_analyst``, :mod:`coordinator.db`): an id, a name,
a role (``analyst``, or ``admin``: sees every study and the audit log, manages accounts) and the
argon2 hash of its token. A token is ``fsa_<analyst id>_<secret>``: it is shown once, when the
account is made (``fedstats coordinator analyst add``), and stored only hashed, so it is looked up
by its id and checked against that one hash.

argon2id is slow on purpose; its cost is OWASP's minimum (:func:`token_hasher`: 19 MiB, two
passes, about 50 ms here), enough for a secret of 256 random bits, which no offline guessing
reaches, and it bounds the time a verification holds the server (the bearer gate runs before
the request's body, in the event loop). A token that verified is remembered in memory for
:data:`CACHE_TTL_S` seconds, by the SHA-256 of the token; the account's row is read on every
request all the same, so a revoked account is refused at once, by every coordinator process on
the store. Failed verifications of one account are limited (:data:`MAX_FAILURES` a minute): a
caller cannot guess at a token, nor keep the server hashing.

A token may **expire** (``expires_at``, set when the account is made or its token rotated; none:
never): an expired token that verifies is refused with 401 saying so and what to do (a token
that does not verify learns nothing of the account). **Rotation** (``fedstats coordinator analyst
rotate``, ``POST /v1/analysts/{id}/rotate``) gives the account a new token, shown once, and
optionally a new expiry: the old token is refused from the next request on, in every process (a
remembered verification is of one token hash; a rotated account's hash differs).

The migration path: the settings' ``analyst_tokens`` still work. Each configured token is its own
analyst, ``config-<fingerprint>`` (``fedstats_service.auth.fingerprint``), role ``analyst``; the
studies made with it before accounts existed stay its own (``coordinator.db``). See
docs/coordinator.md, "Analyst accounts".
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, get_args

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from pydantic import SecretStr

from coordinator import audit
from coordinator.core.errors import AnalystNotFound
from coordinator.db import AnalystRecord, QuotaRecord, Store
from fedstats_service.callers import Caller, check_bearer, fingerprint
from fedstats_service.db import utcnow
from fedstats_service.errors import AuthenticationError

log = logging.getLogger(__name__)

Role = Literal["analyst", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
TOKEN_PREFIX = "fsa_"
CONFIG_PREFIX = "config-"
CACHE_TTL_S = 60.0
MAX_CACHED = 10_000
MAX_FAILURES = 20  # failed verifications of one account per FAILURE_WINDOW_S
FAILURE_WINDOW_S = 60.0
MAX_REFUSALS_AUDITED = 120  # auth.refused rows per FAILURE_WINDOW_S; more are only counted
MAX_NAME = 200
_ACCOUNT_ID = re.compile(r"^[0-9a-f]{1,32}$")


def token_hasher() -> PasswordHasher:
    """argon2id at OWASP's minimum cost (m = 19 MiB, t = 2, p = 1); a hash keeps its own
    parameters, so hashes made at another cost still verify."""
    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def new_token(analyst_id: str) -> str:
    return f"{TOKEN_PREFIX}{analyst_id}_{secrets.token_urlsafe(32)}"


def analyst_of(token: str) -> str | None:
    """The analyst id an account token names (None if it is not one)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    analyst_id, sep, secret = token[len(TOKEN_PREFIX):].partition("_")
    return analyst_id if sep and secret and _ACCOUNT_ID.fullmatch(analyst_id) else None


def config_analyst(token: str) -> str:
    """The analyst id of a token configured in ``analyst_tokens``."""
    return f"{CONFIG_PREFIX}{fingerprint(token)}"


MAX_EXPIRY_DAYS = 36_600.0


def expiry(days: float | None) -> str | None:
    """The expiry time ``days`` from now (ISO 8601 UTC, as the store writes times), or None."""
    if days is None:
        return None
    if not (math.isfinite(days) and 0 < days <= MAX_EXPIRY_DAYS):
        raise ValueError(f"an expiry is a number of days in (0, {MAX_EXPIRY_DAYS:g}]")
    return (utcnow() + timedelta(days=days)).isoformat(timespec="microseconds")


def check_name(name: str) -> str:
    """An account's name: 1 to 200 printable characters (it is printed and logged)."""
    name = name.strip()
    if not 0 < len(name) <= MAX_NAME or not name.isprintable():
        raise ValueError(f"a name is 1 to {MAX_NAME} printable characters")
    return name


class Expired(Exception):
    """An account's real token, past its expiry (:meth:`Accounts.authenticate` says so)."""

    def __init__(self, record: AnalystRecord) -> None:
        super().__init__(record.id)
        self.record = record


@dataclass(frozen=True)
class NewAccount:
    """A new account and its token (shown once: only its hash is kept)."""

    analyst: AnalystRecord
    token: str


class Accounts:
    """The accounts of ``store`` and the configured ``analyst_tokens``; :meth:`authenticate` is
    the coordinator's ``fedstats_service.auth.Authenticator``."""

    def __init__(
        self,
        store: Store,
        config_tokens: Sequence[SecretStr] = (),
        *,
        cache_ttl_s: float = CACHE_TTL_S,
        hasher: PasswordHasher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.config_tokens = list(config_tokens)
        self.config_ids = {config_analyst(t.get_secret_value()): f"analyst_tokens #{i}"
                           for i, t in enumerate(self.config_tokens)}
        self.cache_ttl_s = cache_ttl_s
        self.hasher = hasher or token_hasher()
        self.clock = clock
        self._lock = threading.Lock()
        # SHA-256 of token -> (account id, its token hash then, until)
        self._verified: dict[str, tuple[str, str, float]] = {}
        self._failures: dict[str, list[float]] = {}
        self._refusals: list[float] = []

    # -- managing accounts --------------------------------------------------------------------

    def add(self, name: str, role: str = "analyst", *, by: Caller | None = None,
            expires_in_days: float | None = None) -> NewAccount:
        """A new account; its token is in the answer and nowhere else. With
        ``expires_in_days`` its token stops working that many days from now."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {list(ROLES)}, not {role!r}")
        name = check_name(name)
        expires_at = expiry(expires_in_days)
        analyst_id = secrets.token_hex(6)
        token = new_token(analyst_id)
        record = self.store.add_analyst(analyst_id, name, role, self.hasher.hash(token),
                                        expires_at)
        audit.record(self.store, "analyst.add", caller=by, target=analyst_id,
                     detail=f"role={role}" + (f" expires={expires_at}" if expires_at else ""))
        return NewAccount(record, token)

    def rotate(self, analyst_id: str, *, by: Caller | None = None,
               expires_in_days: float | None = None) -> NewAccount:
        """A new token for an active account (shown once), expiring ``expires_in_days`` from
        now (None: never); the old token is refused from the next request on."""
        expires_at = expiry(expires_in_days)
        token = new_token(analyst_id)
        record = self.store.rotate_analyst(analyst_id, self.hasher.hash(token), expires_at)
        if record is None:
            raise AnalystNotFound(analyst_id)
        with self._lock:
            self._verified = {k: v for k, v in self._verified.items() if v[0] != analyst_id}
        audit.record(self.store, "analyst.rotate", caller=by, target=analyst_id,
                     detail=f"expires={expires_at}" if expires_at else None)
        return NewAccount(record, token)

    def list(self) -> list[AnalystRecord]:
        return self.store.list_analysts()

    def revoke(self, analyst_id: str, *, by: Caller | None = None) -> AnalystRecord:
        """Revoke an account: its token is refused from the next request on."""
        record = self.store.revoke_analyst(analyst_id)
        if record is None:
            raise AnalystNotFound(analyst_id)
        with self._lock:
            self._verified = {k: v for k, v in self._verified.items() if v[0] != analyst_id}
        audit.record(self.store, "analyst.revoke", caller=by, target=analyst_id)
        return record

    def set_quota(self, analyst_id: str, center: str, dataset: str, epsilon: float | None, *,
                  by: Caller | None = None) -> QuotaRecord:
        """Set the analyst's ε quota at (center, dataset); None removes it (no limit). What the
        analyst spent there stays counted. The center is not checked here: callers check it
        against the registry."""
        if not self.known(analyst_id):
            raise AnalystNotFound(analyst_id)
        if epsilon is not None and not (math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError("a quota is a finite ε >= 0")
        quota = self.store.set_quota(analyst_id, center, dataset, epsilon)
        audit.record(self.store, "quota.set", caller=by, target=analyst_id,
                     detail=f"{center}/{dataset}: "
                            + ("no limit" if epsilon is None else f"epsilon={epsilon:g}"))
        return quota

    def known(self, analyst_id: str) -> bool:
        """An active account, or the analyst of a configured token."""
        if analyst_id in self.config_ids:
            return True
        record = self.store.get_analyst(analyst_id)
        return record is not None and record.active

    def count_active(self) -> int:
        return sum(1 for a in self.store.list_analysts() if a.active)

    # -- authentication -----------------------------------------------------------------------

    def authenticate(self, token: str | None, path: str) -> Caller:
        """The caller a bearer token belongs to; 401 otherwise (recorded as ``auth.refused`` by
        the token's fingerprint). The bearer gate binds the caller's analyst id to the request's
        context, so every log line of the request names it."""
        if not token:
            raise AuthenticationError()
        try:
            caller = self._account(token) if analyst_of(token) else self._configured(token)
        except Expired as expired:
            self._refused(token, path)
            raise AuthenticationError(
                f"the token of analyst {expired.record.id} expired at "
                f"{(expired.record.expires_at or '')[:19]} UTC; ask the coordinator's operator "
                "for a new one (fedstats coordinator analyst rotate)") from None
        if caller is None:
            self._refused(token, path)
            raise AuthenticationError("the bearer token is not valid for this coordinator")
        return caller

    def _configured(self, token: str) -> Caller | None:
        if not self.config_tokens:
            return None
        try:
            token_id = check_bearer(token, self.config_tokens, "coordinator")
        except AuthenticationError:
            return None
        analyst_id = f"{CONFIG_PREFIX}{token_id}"
        return Caller(token_id=token_id, role="analyst", analyst_id=analyst_id,
                      name=self.config_ids.get(analyst_id))

    def _account(self, token: str) -> Caller | None:
        analyst_id = analyst_of(token)
        assert analyst_id is not None
        # Read on every request, cached or not: a revocation counts at once, in every process.
        record = self.store.get_analyst(analyst_id)
        if record is None or not record.active:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        with self._lock:
            hit = self._verified.get(key)
        # A remembered verification is of this account's current hash only: a rotated token
        # is checked (and refused) again at once.
        if hit is None or hit[:2] != (analyst_id, record.token_hash) or hit[2] <= now:
            if not self._may_verify(analyst_id, now):
                return None
            if not self._verify(record.token_hash, token):
                self._failed(analyst_id, now)
                return None
            self._remember(key, analyst_id, record.token_hash, now)
        # Told only to a caller holding the account's real token: nothing leaks to a guesser.
        if record.expired():
            raise Expired(record)
        return Caller(token_id=fingerprint(token), role=record.role, analyst_id=record.id,
                      name=record.name)

    def _verify(self, token_hash: str, token: str) -> bool:
        try:
            return bool(self.hasher.verify(token_hash, token))
        except (VerificationError, InvalidHashError):
            return False

    def _remember(self, key: str, analyst_id: str, token_hash: str, now: float) -> None:
        with self._lock:
            if len(self._verified) >= MAX_CACHED:
                self._verified = {k: v for k, v in self._verified.items() if v[2] > now}
                if len(self._verified) >= MAX_CACHED:
                    self._verified.clear()
            self._verified[key] = (analyst_id, token_hash, now + self.cache_ttl_s)

    def _may_verify(self, analyst_id: str, now: float) -> bool:
        with self._lock:
            recent = [t for t in self._failures.get(analyst_id, []) if t > now - FAILURE_WINDOW_S]
            self._failures[analyst_id] = recent
            return len(recent) < MAX_FAILURES

    def _failed(self, analyst_id: str, now: float) -> None:
        with self._lock:
            self._failures.setdefault(analyst_id, []).append(now)

    def _refused(self, token: str, path: str) -> None:
        """An ``auth.refused`` row, unless a flood of them has filled this minute's share."""
        now = self.clock()
        with self._lock:
            self._refusals = [t for t in self._refusals if t > now - FAILURE_WINDOW_S]
            if len(self._refusals) >= MAX_REFUSALS_AUDITED:
                log.warning("a refused token (%s) was not audited: more than %d refusals in %g s",
                            fingerprint(token), MAX_REFUSALS_AUDITED, FAILURE_WINDOW_S)
                return
            self._refusals.append(now)
        audit.refusal(self.store, token_id=fingerprint(token), path=path,
                      claimed=analyst_of(token))
