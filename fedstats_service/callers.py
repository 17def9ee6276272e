"""Who called: a token's fingerprint, the constant-time check of a bearer token and the
:class:`Caller` it gives (``fedstats_service.auth`` re-exports them with the route dependency).
Apart from the web stack, so that the operator's commands and the stores import none of it."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import SecretStr

from fedstats_service.errors import AuthenticationError


def fingerprint(token: str) -> str:
    """16 hex digits of SHA-256: names a token in logs and records without revealing it."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def check_bearer(presented: str | None, allowed: Iterable[SecretStr], service: str) -> str:
    """The caller's fingerprint (:func:`fingerprint`, never the token) if ``presented``
    equals one of ``allowed``; 401 otherwise.

    Both sides are hashed to one length first, so not even a token's length shows in the timing,
    and every configured token is compared, so neither does which one matched.
    """
    if not presented:
        raise AuthenticationError()
    digest = hashlib.sha256(presented.encode()).digest()
    matched = False
    for token in allowed:
        expected = hashlib.sha256(token.get_secret_value().encode()).digest()
        matched |= hmac.compare_digest(digest, expected)
    if not matched:
        raise AuthenticationError(f"the bearer token is not valid for this {service}")
    return digest.hex()[:16]


@dataclass(frozen=True)
class Caller:
    """Who called.

    ``token_id`` is the token's fingerprint (never the token); ``role`` what the token may do
    (``"caller"`` for a service's configured tokens; the coordinator's analysts are
    ``"analyst"`` or ``"admin"``, a center's operator ``"operator"``); ``analyst_id`` and
    ``name`` identify an analyst account."""

    token_id: str
    role: str = "caller"
    analyst_id: str | None = None
    name: str | None = None


Authenticator = Callable[[str | None, str], Caller]
"""``(presented token or None, request path) -> Caller``; raises ``AuthenticationError``."""
