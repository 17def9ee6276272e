"""Bearer tokens, compared so that timing tells nothing, and the route dependency that checks them.

A service decides who a token belongs to with an :data:`Authenticator`: a function of the
presented token and the request path giving the :class:`Caller`, or raising
:class:`AuthenticationError`. The default, :func:`static_tokens`, accepts the settings'
``bearer_tokens``; the coordinator's looks analysts up in its store, the center's gives its audit
endpoint to operator tokens only. ``fedstats_service.middleware.BearerGate`` runs it before a body
is read and leaves the caller in the request's scope, where :func:`bearer_auth`'s dependency
finds it.

No ``from __future__ import annotations`` here: FastAPI reads the parameters of the dependency
:func:`bearer_auth` builds, and a string annotation could not name its closure's variables.
"""

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from fedstats_service.errors import AuthenticationError
from fedstats_service.settings import ServiceSettings


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


def static_tokens(settings: ServiceSettings) -> Authenticator:
    """The settings' ``bearer_tokens``, each a :class:`Caller` with the default role."""

    def authenticate(token: str | None, path: str) -> Caller:
        return Caller(check_bearer(token, settings.bearer_tokens, settings.SERVICE))

    return authenticate


def bearer_auth(
    settings: Callable[..., ServiceSettings], *, description: str
) -> Callable[..., Caller]:
    """A dependency giving the :class:`Caller` of the request; 401 when its token is not valid.

    A service mounts it on every protected router, so a new route inherits it. It takes the
    caller ``fedstats_service.middleware.BearerGate`` found before the body was read; an app
    assembled without the gate gets the same check here (the app's ``state.authenticate``, else
    :func:`static_tokens`), so a route stays protected either way. ``settings`` is the
    dependency that gives the settings; ``description`` the bearer scheme's text in the OpenAPI
    schema.
    """
    scheme = HTTPBearer(auto_error=False, description=description)

    def authenticate(
        request: Request,
        current: Annotated[ServiceSettings, Depends(settings)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(scheme)],
    ) -> Caller:
        """401 unless the bearer token is valid for this path."""
        found = request.scope.get("state", {}).get("caller")
        if isinstance(found, Caller):
            return found
        presented = credentials.credentials if credentials is not None else None
        check: Authenticator = getattr(request.app.state, "authenticate", None) or static_tokens(
            current)
        return check(presented, request.url.path)

    return authenticate
