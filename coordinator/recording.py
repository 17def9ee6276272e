"""``RecordedCenter``: a ``CenterPort`` that records every answer a study receives.

Each release (and the center's info) is stored with its request under a key (SHA-256 of the call
and its request body, :func:`release_key`); the same call in the same study is answered from the
store, so a study that runs again after a restart never asks a center twice for what it already
received, and its provenance lists exactly what each center released. A release's call is its
kind's name (``shared.kinds``). Health and budget are not part of a study and pass through.

With the study owner's ``analyst_id``, a release that spends ε is first counted against the
analyst's quota at that center and dataset (``coordinator.quotas``): over the quota, the study
fails with ``quota_exceeded`` and the center is not asked. A recorded answer costs nothing again.
Both writes are group-committed with the round's other writes (``coordinator.commits``). With
the ``owner`` process (several processes over one store), each write first checks that it still
holds the study (``coordinator.db.Store.check_lease_in``): one that lost it asks nothing more.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

from pydantic import BaseModel

from coordinator import audit, commits, feed, spending
from coordinator.db import QuotaRecord, Store
from coordinator.ports import CenterPort
from shared.kinds import Kind, Rel, Req
from shared.protocol import Budget, CenterInfo, Health

M = TypeVar("M", bound=BaseModel)
# A center's info as asked at a study's submission: its answer, or its answer to come (None if
# that question failed).
Declared = CenterInfo | asyncio.Future[CenterInfo | None]


def release_key(call: str, dataset: str, request: BaseModel | None) -> tuple[str, str]:
    """The key a call is stored under in a study, and the JSON it is the SHA-256 of.

    The JSON's bytes are those the store has always keyed by (the request as the client sends
    it, ``model_dump_json``), so a study resumed after an upgrade finds what it received."""
    body = request.model_dump_json() if request is not None else "null"
    head = f'{{"call":{json.dumps(call)},"dataset":{json.dumps(dataset)}'
    described = f'{head},"request":{body}}}'
    return hashlib.sha256(described.encode()).hexdigest(), described


class RecordedCenter:
    """Wraps ``port`` for one study of ``store``, owned by ``analyst_id`` (whose quota its
    releases spend; None: no quota applies).

    ``declared`` is the center's info as it answered moments before, at the study's submission
    (its names were checked against it), or the answer to that question still to come (a
    center slower than the submission waits): the study's first :meth:`info` records and
    returns it instead of asking the center again; only when that question failed is the
    center asked anew."""

    def __init__(self, port: CenterPort, store: Store, study_id: str,
                 analyst_id: str | None = None, *, declared: Declared | None = None,
                 owner: str | None = None) -> None:
        self.port = port
        self.owner = owner
        self.store = store
        self.study_id = study_id
        self.analyst_id = analyst_id
        self.declared = declared

    @property
    def center_id(self) -> str:
        return self.port.center_id

    async def health(self) -> Health:
        return await self.port.health()

    async def budget(self) -> Budget:
        return await self.port.budget()

    async def info(self) -> CenterInfo:
        declared = self.declared

        async def ask() -> CenterInfo:
            answer = await declared if isinstance(declared, asyncio.Future) else declared
            return answer if answer is not None else await self.port.info()

        return await self._recorded("info", "", None, CenterInfo, ask)

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        return await self._recorded(kind.name, dataset, request, kind.release,
                                    lambda: self.port.release(kind, dataset, request))

    async def _recorded(
        self,
        call: str,
        dataset: str,
        request: BaseModel | None,
        model: type[M],
        ask: Callable[[], Awaitable[M]],
    ) -> M:
        key, described = release_key(call, dataset, request)
        epsilon = spending.request_epsilon(request)
        charged = self.analyst_id is not None and epsilon > 0
        # The look-up, the reservation and the record go through the store's group commit: a
        # round's writes, every center's, commit together, each durably before its caller goes
        # on (coordinator.commits); the reservation is on disk before the center is asked.
        writes = commits.for_store(self.store)
        found, refused = await writes.find_or_reserve(
            self.study_id, self.center_id, key,
            (self.analyst_id, dataset, epsilon) if charged and self.analyst_id else None,
            held_by=self.owner)
        if found is not None:
            return model.model_validate_json(found)
        if refused is not None:
            await self._refused(refused, epsilon)
        try:
            answer = await ask()
        except Exception as failure:
            if charged and spending.refund_after(failure):
                assert self.analyst_id is not None
                await writes.refund(self.analyst_id, self.center_id, dataset, epsilon)
            raise
        await writes.record_release(self.study_id, self.center_id, call, key, described,
                                    answer.model_dump_json(), held_by=self.owner)
        feed.for_store(self.store).changed(self.study_id)  # its event streams send progress
        return answer

    async def _refused(self, refused: QuotaRecord, epsilon: float) -> NoReturn:
        """Refuse (403 ``quota_exceeded``, audited) a reservation that did not fit: nothing was
        counted and the center is not asked."""
        failure = spending.exceeded(refused, epsilon)
        await asyncio.to_thread(audit.record, self.store, "quota.refused",
                                analyst_id=self.analyst_id, target=self.study_id,
                                detail=failure.detail)
        raise failure
