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

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from fedstats_service.callers import Authenticator as Authenticator
from fedstats_service.callers import Caller as Caller
from fedstats_service.callers import check_bearer as check_bearer
from fedstats_service.callers import fingerprint as fingerprint
from fedstats_service.errors import AuthenticationError as AuthenticationError
from fedstats_service.settings import ServiceSettings


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
