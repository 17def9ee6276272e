"""Every release route, made from the gate's declared kinds (``center_agent.gate.kinds``).

One route per kind, ``POST /v1/<kind.path>``, typed by the kind's request and release models (so
the OpenAPI schema documents each), doing nothing but hand the request to the gate.
"""

from typing import Any

from fastapi import APIRouter

from center_agent.api.deps import Authenticated, GateDep
from center_agent.gate.kinds import KINDS, ReleaseKind

router = APIRouter()


def _route(kind: ReleaseKind[Any, Any]) -> None:
    request_model = kind.request_model
    release_model = kind.release_model

    # Annotations are evaluated here (no `from __future__ import annotations` in this module),
    # so each endpoint carries its kind's own models.
    def endpoint(dataset: str, body: request_model, gate: GateDep,  # type: ignore[valid-type]
                 caller: Authenticated) -> Any:
        return gate.release(kind, dataset, body, caller.token_id)

    endpoint.__name__ = kind.name
    endpoint.__doc__ = (type(kind).__doc__ or kind.summary).strip()
    router.add_api_route(kind.path, endpoint, methods=["POST"], response_model=release_model,
                         summary=kind.summary, tags=[kind.tag], name=kind.name)


for _kind in KINDS:
    _route(_kind)
