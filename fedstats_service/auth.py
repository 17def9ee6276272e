"""Bearer tokens, compared so that timing tells nothing, and the route dependency that checks them.

No ``from __future__ import annotations`` here: FastAPI reads the parameters of the dependency
:func:`bearer_auth` builds, and a string annotation could not name its closure's variables.
"""

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from fedstats_service.errors import AuthenticationError
from fedstats_service.settings import ServiceSettings


def check_bearer(presented: str | None, allowed: Iterable[SecretStr], service: str) -> str:
    """The caller's fingerprint (16 hex digits of SHA-256, never the token) if ``presented``
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
    """Who called: a short fingerprint of the token (never the token itself)."""

    token_id: str


def bearer_auth(
    settings: Callable[..., ServiceSettings], *, description: str
) -> Callable[..., Caller]:
    """A dependency giving the :class:`Caller` whose bearer token is one of the service's
    ``bearer_tokens`` (``settings`` is the dependency that gives the settings); 401 otherwise.

    A service mounts it on every protected router, so a new route inherits it. It checks again
    what ``fedstats_service.middleware.BearerGate`` checked before the body was read: a route
    stays protected even if the app is assembled without the gate. ``description`` is the
    bearer scheme's text in the OpenAPI schema.
    """
    scheme = HTTPBearer(auto_error=False, description=description)

    def authenticate(
        current: Annotated[ServiceSettings, Depends(settings)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(scheme)],
    ) -> Caller:
        """401 unless the bearer token equals one of the configured tokens (constant time)."""
        presented = credentials.credentials if credentials is not None else None
        return Caller(check_bearer(presented, current.bearer_tokens, current.SERVICE))

    return authenticate
