"""Console sign-ins: a session cookie for an analyst's account, and the CSRF token of its forms.

An analyst signs in with the token the API takes (``coordinator.accounts``: verified the same
way, so a wrong token counts as a failed attempt there). The session is a random 256-bit id in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` when the console is served over TLS); the
store keeps only its SHA-256 (``coordinator.db``, ``coordinator_session``), the analyst and the
fingerprint of the token used, for ``SESSION_HOURS``. Each request reads the account again, so a
revoked analyst is signed out at once, in every coordinator process.

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
from datetime import timedelta

from coordinator.accounts import Accounts
from coordinator.db import Store, utcnow
from fedstats_service.auth import Caller

SESSION_COOKIE = "fedstats_session"
LOGIN_COOKIE = "fedstats_login"
SESSION_HOURS = 8
CSRF_FIELD = "csrf_token"


def digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


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
        until = (utcnow() + timedelta(hours=SESSION_HOURS)).isoformat(timespec="microseconds")
        await asyncio.to_thread(self.store.add_session, digest(session_id), caller.analyst_id,
                                caller.token_id, csrf, until)
        return session_id, Session(caller, csrf)

    async def current(self, session_id: str | None) -> Session | None:
        """The live session of this cookie, if any, with its account read now."""
        if not session_id:
            return None
        record = await asyncio.to_thread(self.store.get_session, digest(session_id))
        if record is None:
            return None
        caller = await asyncio.to_thread(self._caller, record.analyst_id, record.token_id)
        return None if caller is None else Session(caller, record.csrf)

    async def sign_out(self, session_id: str | None) -> None:
        if session_id:
            await asyncio.to_thread(self.store.delete_session, digest(session_id))

    def _caller(self, analyst_id: str, token_id: str) -> Caller | None:
        if analyst_id in self.accounts.config_ids:
            return Caller(token_id=token_id, role="analyst", analyst_id=analyst_id,
                          name=self.accounts.config_ids[analyst_id])
        record = self.store.get_analyst(analyst_id)
        if record is None or not record.active:
            return None
        return Caller(token_id=token_id, role=record.role, analyst_id=record.id, name=record.name)
