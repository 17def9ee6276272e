"""Bearer tokens, compared so that timing tells nothing."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from pydantic import SecretStr

from fedstats_service.errors import AuthenticationError


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
