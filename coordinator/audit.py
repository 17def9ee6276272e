"""The coordinator's audit log of analyst actions (``coordinator_audit`` in the store).

One row per action: when, which analyst (None: the operator at the command line), the fingerprint
of the token used, the action, its target (a study, an analyst) and the request id of the call
(``fedstats_service.context``), so a row can be matched with the log lines and the centers' own
audit records of the same request. Never a token, a result or a released number.

Actions (:data:`ACTIONS`): ``study.create``, ``study.read`` (a read with the provenance; polls
without it are not recorded), ``study.export`` (an export: CSV or zip), ``study.resume``,
``study.cancel``, ``study.share``, ``study.unshare``, ``analyst.add``, ``analyst.revoke``,
``quota.set``, ``quota.refused`` (a study refused by a quota), ``auth.refused`` (a
presented token that is not valid: by its fingerprint) and ``study.claimed`` (several processes
over one store: a process took over a study no live process held; its detail names both,
``coordinator.leases``).

Admins read it at ``GET /v1/audit``; the operator with ``fedstats coordinator audit``.
"""

from __future__ import annotations

import logging

from coordinator.db import Store
from fedstats_service.callers import Caller
from fedstats_service.context import current

log = logging.getLogger(__name__)

ACTIONS: tuple[str, ...] = (
    "study.create", "study.read", "study.export", "study.resume", "study.cancel", "study.share",
    "study.unshare",
    "analyst.add", "analyst.revoke", "quota.set", "quota.refused", "auth.refused",
    "study.claimed",
)


def record(
    store: Store,
    action: str,
    *,
    caller: Caller | None = None,
    analyst_id: str | None = None,
    target: str | None = None,
    detail: str | None = None,
) -> None:
    """One audit row for the request being served (synchronous: call it in a thread from async
    code). ``caller`` gives the analyst and token fingerprint; ``analyst_id`` names the analyst
    when there is no caller (a study task)."""
    store.record_audit(
        action,
        analyst_id=caller.analyst_id if caller is not None else analyst_id,
        token_id=caller.token_id if caller is not None else None,
        target=target,
        request_id=current().request_id,
        detail=detail,
    )


def refusal(store: Store, *, token_id: str, path: str, claimed: str | None) -> None:
    """An ``auth.refused`` row: the presented token's fingerprint, the path it was sent to and
    the account an ``fsa_`` token claimed to be (its id is no secret)."""
    store.record_audit("auth.refused", token_id=token_id, target=path[:200],
                       request_id=current().request_id,
                       detail=f"claimed analyst {claimed}" if claimed else None)
