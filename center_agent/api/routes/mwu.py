"""The local Mann-Whitney release, optionally with Laplace noise paid for from the budget."""

from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import DatasetDep, LedgerDep, RngDep, SettingsDep
from center_agent.core.errors import KAnonymityRefusal, core_errors
from center_agent.ledger import JSONPayload, request_key
from shared.protocol import MWURelease, MWURequest
from shared.releases import mwu_release

router = APIRouter(tags=["mann-whitney"])


@router.post("/datasets/{dataset}/mwu")
def local_mwu(
    dataset: DatasetDep,
    body: MWURequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> MWURelease:
    """U = Σ sign(Y − X) between two declared levels, its null variance and the group sizes.

    Only whole declared groups can be compared, so two releases never cover overlapping
    subsets. Each group must hold at least K records. With ``epsilon``, Laplace noise of scale
    2·max(n, m)/ε is added (U's sensitivity when one record's value changes; the group sizes
    and V are released as they are, i.e. treated as public).
    """
    x, y = dataset.groups(body.variable, body.groups).arrays
    for level, values in zip(body.groups, (x, y), strict=True):
        if values.size < settings.k:
            raise KAnonymityRefusal(
                f"group {level!r} holds fewer than K = {settings.k} usable records"
            )
    epsilon = body.epsilon or 0.0

    def compute() -> JSONPayload:
        with core_errors():
            return mwu_release(x, y, body, rng).to_payload()

    key = request_key(dataset.name, body.variable, "mwu", body.to_payload(), epsilon)
    return MWURelease.model_validate(ledger.release(dataset.name, key, epsilon, compute))
