"""Every release route, made from the gate's declared kinds (``center_agent.gate.kinds``).

One route per kind, ``POST /v1/<kind.path>``, typed by the kind's request and release models (so
the OpenAPI schema documents each), doing nothing but hand the request to the gate; and one for
several releases of a dataset in one call (``POST /v1/datasets/{dataset}/releases``).
"""

from typing import Any

from fastapi import APIRouter

from center_agent.api.batch import answer_batch
from center_agent.api.deps import Authenticated, GateDep
from center_agent.gate.kinds import KINDS, ReleaseKind
from shared.kinds import BATCH_PATH
from shared.protocol import BatchRelease, BatchRequest

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


_BY_NAME = {kind.name: kind for kind in KINDS}


@router.post(BATCH_PATH, response_model=BatchRelease, tags=["releases"],
             summary="several releases of one dataset in one call")
def releases(dataset: str, body: BatchRequest, gate: GateDep,
             caller: Authenticated) -> BatchRelease:
    """A study's releases to this center in one round: each item is answered as its own
    ``POST`` would be (same checks, ε accounting, audit record and stored answer), in order; an
    item's refusal or failure is its answer's error and leaves the others as they are."""
    return answer_batch(gate, dataset, body, _BY_NAME, caller.token_id)
