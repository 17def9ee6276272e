"""Console sign-ins: a session cookie for an analyst's account, and the CSRF token of its forms.

An analyst signs in with the token the API takes (``coordinator.accounts``: verified the same
way, so a wrong token counts as a failed attempt there). The session is a random 256-bit id in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` when the console is served over TLS); the
store keeps only its SHA-256 (``coordinator.db``, ``coordinator_session``), the analyst and the
fingerprint of the token used, for ``SESSION_HOURS`` or until the token expires, whichever is
first. A session is bound to the token that opened it (:func:`binding`: the SHA-256 of the
account's token hash at sign-in): each request reads the account again, and the session is over
once the account is revoked, its token rotated (the binding no longer matches; rotation and
revocation also delete the account's sessions) or past its expiry — at once, in every
coordinator process on the store, as the API refuses the old token. An open event stream
checks its session at every event and heartbeat and ends with it.

Every form that changes something carries the session's CSRF token (a hidden field), compared in
constant time; the sign-in form, before any session, carries a token that must equal a
short-lived cookie set with the form (double submit), so another site cannot sign a browser in
to an account of its choosing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from coordinator.accounts import Accounts
from coordinator.db import Store, utcnow
from fedstats_service.auth import Caller
from fedstats_service.errors import AuthenticationError

SESSION_COOKIE = "fedstats_session"
LOGIN_COOKIE = "fedstats_login"
SESSION_HOURS = 8
CSRF_FIELD = "csrf_token"


def digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


CONFIG_BINDING = "analyst_tokens"
"""The binding of a configured token's sessions: they end when the token leaves the settings
(its analyst is then unknown), so the token itself needs no other tie."""


def binding(token_hash: str) -> str:
    """What ties a session to an account's token: a new token (rotation) has a new hash."""
    return hashlib.sha256(token_hash.encode()).hexdigest()


def same(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two tokens (none equals nothing)."""
    return a is not None and b is not None and hmac.compare_digest(a.encode(), b.encode())


@dataclass(frozen=True)
class Session:
    """A signed-in analyst: the caller the API's routes see, and the session's CSRF token."""

    caller: Caller
    csrf: str


class Sessions:
    """Sign-in, look-up and sign-out over the coordinator's store and accounts."""

    def __init__(self, store: Store, accounts: Accounts) -> None:
        self.store = store
        self.accounts = accounts

    async def sign_in(self, token: str, path: str) -> tuple[str, Session]:
        """A new session for the analyst of ``token`` (``AuthenticationError`` otherwise): its
        cookie value and the session."""
        caller = await asyncio.to_thread(self.accounts.authenticate, token, path)
        assert caller.analyst_id is not None  # every coordinator caller is an analyst
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        until = utcnow() + timedelta(hours=SESSION_HOURS)
        tie = CONFIG_BINDING
        if caller.analyst_id not in self.accounts.config_ids:
            record = await asyncio.to_thread(self.store.get_analyst, caller.analyst_id)
            if record is None or not record.active:
                raise AuthenticationError("the bearer token is not valid for this coordinator")
            # The hash read after the token verified: a rotation in between gives a binding
            # that never matches, so the session is over at once (never the other way round).
            tie = binding(record.token_hash)
            if record.expires_at is not None:
                until = min(until, datetime.fromisoformat(record.expires_at))
        await asyncio.to_thread(self.store.add_session, digest(session_id), caller.analyst_id,
                                caller.token_id, csrf,
                                until.isoformat(timespec="microseconds"), tie)
        return session_id, Session(caller, csrf)

    async def current(self, session_id: str | None) -> Session | None:
        """The live session of this cookie, if any, with its account read now."""
        if not session_id:
            return None
        record = await asyncio.to_thread(self.store.get_session, digest(session_id))
        if record is None:
            return None
        caller = await asyncio.to_thread(self._caller, record.analyst_id, record.token_id,
                                         record.token_binding)
        return None if caller is None else Session(caller, record.csrf)

    async def sign_out(self, session_id: str | None) -> None:
        if session_id:
            await asyncio.to_thread(self.store.delete_session, digest(session_id))

    def _caller(self, analyst_id: str, token_id: str, tie: str | None) -> Caller | None:
        """The session's caller while its token is the one that opened it and still valid."""
        if analyst_id in self.accounts.config_ids:
            if tie != CONFIG_BINDING:
                return None
            return Caller(token_id=token_id, role="analyst", analyst_id=analyst_id,
                          name=self.accounts.config_ids[analyst_id])
        record = self.store.get_analyst(analyst_id)
        if (record is None or not record.active or record.expired()
                or tie is None or not same(tie, binding(record.token_hash))):
            return None
        return Caller(token_id=token_id, role=record.role, analyst_id=record.id, name=record.name)
