"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Release routes are made from the gate's kinds (``api/routes/releases.py``); each only hands its
request to :class:`center_agent.gate.ReleaseGate`, which is the one place data leave through.
Two roles call a center (:func:`roles`, the center's authenticator): the coordinator
(``tokens``) asks for releases and ``/v1/info``, ``/v1/budget``; the center's operator
(``operator_tokens``) reads ``/v1/audit`` and nothing else. Every router except health is mounted
with the dependency of its role (:data:`coordinator_only`, :data:`operator_only`;
``center_agent.api.router``), which takes the caller from :func:`authenticate` (built by
``fedstats_service.auth.bearer_auth``): the bearer check already ran in the middleware before the
body was read (``fedstats_service.middleware.BearerGate``), and runs here again for an app
assembled without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends

from center_agent.accountant import Accountant
from center_agent.core.config import Settings
from center_agent.core.errors import Forbidden
from center_agent.data import Dataset, Datasets
from center_agent.gate import ReleaseGate
from center_agent.ledger import Ledger
from fedstats_service.app import services_part
from fedstats_service.auth import Authenticator, Caller, bearer_auth, check_bearer
from fedstats_service.errors import AuthenticationError

# The parts of the center's ``Services`` (center_agent.services), built once per app.
get_settings = services_part("settings")
SettingsDep = Annotated[Settings, Depends(get_settings)]
DatasetsDep = Annotated[Datasets, Depends(services_part("datasets"))]
LedgerDep = Annotated[Ledger, Depends(services_part("ledger"))]
GateDep = Annotated[ReleaseGate, Depends(services_part("gate"))]
AccountantDep = Annotated[Accountant, Depends(services_part("accountant"))]


def get_dataset(dataset: str, datasets: DatasetsDep) -> Dataset:
    """The dataset named in the path (``{dataset}``); 404 ``unknown_dataset`` otherwise."""
    return datasets[dataset]


DatasetDep = Annotated[Dataset, Depends(get_dataset)]


COORDINATOR = "coordinator"
OPERATOR = "operator"
AUDIT_PATH = "/v1/audit"


def roles(settings: Settings) -> Authenticator:
    """The center's authenticator: a token of ``tokens`` is the coordinator, one of
    ``operator_tokens`` the operator (the settings keep the two lists apart); 401 otherwise.
    Which routes a role may use is decided by the routers' dependencies, not here."""

    def authenticate(token: str | None, path: str) -> Caller:
        for role, tokens in ((COORDINATOR, settings.tokens),
                             (OPERATOR, settings.operator_tokens)):
            try:
                return Caller(check_bearer(token, tokens, settings.SERVICE), role=role)
            except AuthenticationError:
                continue
        if path == AUDIT_PATH and not settings.operator_tokens:
            raise AuthenticationError("the audit trail is read with an operator token, and "
                                      "this center has none: set operator_tokens")
        if not token:
            raise AuthenticationError()
        raise AuthenticationError(f"the bearer token is not valid for this {settings.SERVICE}")

    return authenticate


authenticate = bearer_auth(get_settings, description="one of the center's configured tokens "
                           "(tokens: the coordinator; operator_tokens: the audit trail)")
Authenticated = Annotated[Caller, Depends(authenticate)]


def require_role(role: str, refusal: str) -> Callable[[Caller], Caller]:
    """A dependency passing callers of ``role`` and answering 403 ``refusal`` to the others."""

    def check(caller: Authenticated) -> Caller:
        if caller.role != role:
            raise Forbidden(refusal)
        return caller

    check.__name__ = f"require_{role}"
    return check


coordinator_only = require_role(
    COORDINATOR, "an operator token reads the audit trail (GET /v1/audit) only; releases and "
                 "the center's description take one of the coordinator's tokens (tokens)")
operator_only = require_role(
    OPERATOR, "the audit trail is read with an operator token (setting operator_tokens), not "
              "with the coordinator's")
