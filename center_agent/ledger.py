"""The privacy ledger: every DP release is debited before it leaves, in the same transaction.

Usage (a DP endpoint)::

    key = request_key(dataset, variable, "dp_quantiles", {"q": [0.5], "bounds": [0, 100]}, eps)
    payload = ledger.release(dataset, key, eps, lambda: run_the_mechanism())

:meth:`Ledger.release` opens one transaction holding the dataset's lock (see ``center_agent.db``):

1. if ``key`` was answered before, the stored payload is returned and nothing is spent (averaging
   repeated answers gains nothing);
2. if ``epsilon`` is above the dataset's per-request cap, or would pass its cap per period, it
   raises :class:`EpsilonCapExceeded`; if ``spent + epsilon > total``, :class:`BudgetExceeded`
   (HTTP 403, remaining budget);
3. it debits, runs ``compute()``, stores the payload and commits.

A crash anywhere before the commit rolls everything back: nothing was released, nothing is spent.
After the commit the spend is on disk (SQLite WAL, the commit returning once a log fsync shared
with concurrent commits has covered it, ``fedstats_service.walsync``; or PostgreSQL) before the
payload is returned to the caller, so neither a killed process nor a power cut loses a recorded
spend.

The release gate (``center_agent.gate``) does not compute inside the lock: it debits and
**reserves** the key (:meth:`Ledger.reserve`) in one short transaction, computes outside it,
and stores the answer in place of the reservation (:meth:`Ledger.settle`) in another. A
reservation is paid: the per-period cap counts it, a retry of the same key is computed under it
(never debited twice), and only a refusal decided without the data drops it with its units
(:meth:`Ledger.cancel`). The token's work per period is charged in the same first transaction
(:meth:`Ledger.charge_compute`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from center_agent.core.errors import (
    BudgetExceeded,
    CallCapExceeded,
    ComputeAllowanceExceeded,
    EpsilonCapExceeded,
    UnknownDataset,
)
from center_agent.db import (
    Store,
    UnknownLedgerDataset,
    budgets,
    call_counts,
    compute_use,
    releases,
    reservations,
    spend_units,
    total_units,
    units_to_epsilon,
    utcnow,
)
from shared.wire import canonical_json

JSONPayload = Any  # a JSON-serializable value (dict, list, str, int, float, bool, None)


def request_key(
    dataset: str,
    variable: str | None,
    algorithm: str,
    parameters: Mapping[str, Any],
    epsilon: float,
) -> str:
    """SHA-256 of the canonical JSON of everything that determines a release."""
    doc = {
        "dataset": dataset,
        "variable": variable,
        "algorithm": algorithm,
        "parameters": dict(parameters),
        "epsilon": float(epsilon),
    }
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def _check_epsilon(epsilon: float) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"`epsilon` must be a finite number >= 0, got {epsilon!r}") from None
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"`epsilon` must be a finite number >= 0, got {epsilon!r}")
    return eps


@dataclass(frozen=True)
class Caps:
    """A dataset's caps on ε besides its total: per request, and per period (None: none)."""

    per_request: float | None = None
    per_period: float | None = None
    period: timedelta = timedelta(days=30)


class Ledger:
    """Debit-before-release accounting of ε per dataset, with a cache of past answers.

    :meth:`release` is the whole rule in one call; the release gate (``center_agent.gate``) runs
    the same steps (:meth:`cached`, :meth:`debit`, :meth:`store`) inside its own transaction,
    which also holds the disclosure control and the audit record.
    """

    def __init__(self, store: Store, caps: Mapping[str, Caps] | None = None) -> None:
        self.store = store
        self.caps = dict(caps or {})

    def release(
        self,
        dataset: str,
        request_key: str,
        epsilon: float,
        compute: Callable[[], JSONPayload],
    ) -> JSONPayload:
        """The stored answer for ``request_key``, or a fresh one paid for with ``epsilon``.

        ``epsilon == 0`` is allowed for releases that are safe without noise (their answer is
        still stored, so a repeat returns the identical payload). Raises :class:`BudgetExceeded`
        (or :class:`EpsilonCapExceeded`) when the dataset cannot afford ``epsilon``; ``compute``
        is then never called.
        """
        eps = _check_epsilon(epsilon)
        try:
            with self.store.locked(dataset) as (conn, total, spent):
                cached = self.cached(conn, dataset, request_key)
                if cached is not None:
                    return cached
                units = self.debit(conn, dataset, eps, total, spent)
                payload = compute()
                return self.keep(conn, dataset, request_key, units, payload)
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

    @classmethod
    def cached(cls, conn: Connection, dataset: str, request_key: str) -> JSONPayload | None:
        """The stored answer for ``request_key`` (``None``: never answered)."""
        text = cls.cached_text(conn, dataset, request_key)
        return None if text is None else json.loads(text)

    @staticmethod
    def cached_text(conn: Connection, dataset: str, request_key: str) -> str | None:
        """The stored answer for ``request_key`` as stored (canonical JSON; ``None``: never
        answered): the gate decodes it after letting the lock go."""
        row = conn.execute(
            select(releases.c.payload, releases.c.dataset).where(
                releases.c.request_key == request_key
            )
        ).first()
        if row is None:
            return None
        if row.dataset != dataset:
            raise ValueError("request key reused across datasets")
        return str(row.payload)

    def debit(self, conn: Connection, dataset: str, epsilon: float, total: int,
              spent: int) -> int:
        """Check the caps and the remaining budget, then debit ``epsilon`` (in the caller's
        locked transaction); returns the units debited. Every decision here is made from the
        request and the ledger (what was spent), never from the data."""
        units = spend_units(epsilon)
        if units == 0:
            return 0
        caps = self.caps.get(dataset, Caps())
        if caps.per_request is not None and units > spend_units(caps.per_request):
            raise EpsilonCapExceeded(
                f"dataset {dataset!r}: one request may spend at most epsilon "
                f"{caps.per_request:g} (setting epsilon_per_request); {epsilon:g} was asked",
                extra={"epsilon_per_request": caps.per_request},
            )
        if caps.per_period is not None:
            since = utcnow() - caps.period
            recent = sum(int(conn.execute(
                select(func.coalesce(func.sum(table.c.epsilon_units), 0)).where(
                    table.c.dataset == dataset, table.c.created_at >= since
                )
            ).scalar() or 0) for table in (releases, reservations))  # paid, stored or not
            if recent + units > total_units(caps.per_period):
                days = caps.period.total_seconds() / 86400
                raise EpsilonCapExceeded(
                    f"dataset {dataset!r}: at most epsilon {caps.per_period:g} may be spent per "
                    f"{days:g} days (setting epsilon_per_period); that would be exceeded",
                    extra={"epsilon_per_period": caps.per_period},
                )
        if spent + units > total:
            raise BudgetExceeded(dataset, epsilon, units_to_epsilon(total - spent))
        conn.execute(
            update(budgets)
            .where(budgets.c.dataset == dataset)
            .values(spent_units=budgets.c.spent_units + units)
        )
        return units

    @staticmethod
    def keep(conn: Connection, dataset: str, request_key: str, units: int,
             payload: JSONPayload, created_at: Any = None) -> JSONPayload:
        """Store an answer under its key (in the caller's transaction); returns it as stored.
        ``created_at`` is when it was paid (default: now)."""
        stored = canonical_json(payload)
        conn.execute(
            releases.insert().values(
                request_key=request_key,
                dataset=dataset,
                epsilon_units=units,
                payload=stored,
                created_at=created_at or utcnow(),
            )
        )
        return json.loads(stored)

    # -- reservations: paid before computed, computed outside the lock -----------------------

    @staticmethod
    def reserve(conn: Connection, dataset: str, request_key: str, units: int) -> None:
        """Record that ``request_key`` is paid (``units``, already debited) and being computed
        (in the caller's locked transaction, committed before the computation starts)."""
        conn.execute(reservations.insert().values(
            request_key=request_key, dataset=dataset, epsilon_units=units, created_at=utcnow()))

    @staticmethod
    def reserved(conn: Connection, dataset: str, request_key: str) -> int | None:
        """The units paid for ``request_key`` while it has no stored answer (``None``: no
        reservation)."""
        row = conn.execute(
            select(reservations.c.epsilon_units, reservations.c.dataset)
            .where(reservations.c.request_key == request_key)
        ).first()
        if row is None:
            return None
        if row.dataset != dataset:
            raise ValueError("request key reused across datasets")
        return int(row.epsilon_units)

    def settle(self, conn: Connection, dataset: str, request_key: str,
               payload: JSONPayload) -> JSONPayload:
        """Store the answer of a reservation under its key, with the units and the time it
        was paid, and drop the reservation; returns the answer as stored."""
        row = conn.execute(
            select(reservations.c.epsilon_units, reservations.c.created_at)
            .where(reservations.c.request_key == request_key)
        ).first()
        units, paid_at = (0, None) if row is None else (int(row.epsilon_units), row.created_at)
        conn.execute(delete(reservations).where(reservations.c.request_key == request_key))
        return self.keep(conn, dataset, request_key, units, payload, created_at=paid_at)

    @staticmethod
    def cancel(conn: Connection, dataset: str, request_key: str) -> int:
        """Drop a reservation and give its units back to the budget (a computation refused by
        a decision made without the data: nothing was released); returns the units."""
        units = conn.execute(
            select(reservations.c.epsilon_units).where(reservations.c.request_key == request_key)
        ).scalar()
        if units is None:
            return 0
        conn.execute(delete(reservations).where(reservations.c.request_key == request_key))
        if units:
            conn.execute(update(budgets).where(budgets.c.dataset == dataset)
                         .values(spent_units=budgets.c.spent_units - int(units)))
        return int(units)

    # -- the compute allowance -----------------------------------------------------------------

    @staticmethod
    def charge_compute(conn: Connection, caller: str, units: int, allowance: int,
                       period_s: float, now: float) -> None:
        """Charge ``units`` of work (records x releases) to ``caller``'s allowance for the
        fixed window of ``period_s`` seconds holding ``now`` (Unix seconds), in the caller's
        transaction; :class:`ComputeAllowanceExceeded` (nothing charged) past ``allowance``.

        Kept in the ledger: the allowance outlives a restart as the budget does (a restart is
        no way to more work), and every process serving the ledger counts against the one
        allowance."""
        window = int(now // period_s)
        key = (compute_use.c.caller == caller) & (compute_use.c.window == window)
        used = conn.execute(select(compute_use.c.units).where(key)).scalar()
        if int(used or 0) + units > allowance:
            retry = max(1, math.ceil((window + 1) * period_s - now))
            raise ComputeAllowanceExceeded(allowance, period_s, retry)
        if used is not None:
            conn.execute(update(compute_use).where(key).values(units=compute_use.c.units + units))
            return
        # Earlier windows of this caller are of no use any more.
        conn.execute(delete(compute_use).where((compute_use.c.caller == caller)
                                               & (compute_use.c.window < window)))
        try:
            with conn.begin_nested():
                conn.execute(compute_use.insert().values(caller=caller, window=window,
                                                         units=units))
        except IntegrityError:  # another dataset's transaction made the row first (PostgreSQL)
            conn.execute(update(compute_use).where(key).values(units=compute_use.c.units + units))

    def count_call(self, dataset: str, scope: str, kind: str, cap: int) -> int:
        """Count one more ``kind`` call in ``scope``; refuse past ``cap`` (own transaction)."""
        try:
            with self.store.locked(dataset) as (conn, _total, _spent):
                return self.count(conn, dataset, scope, kind, cap)
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

    @staticmethod
    def count(conn: Connection, dataset: str, scope: str, kind: str, cap: int) -> int:
        """Count one more ``kind`` call in ``scope`` (a dataset, or a caller of it), in the
        caller's transaction; refuse past ``cap``.

        For releases that are limited by number besides ε (YJ moments). Returns the number of
        calls including this one; raises :class:`CallCapExceeded` (and counts nothing) when
        ``cap`` calls were already made.
        """
        if cap < 1:
            raise ValueError(f"`cap` must be an integer >= 1, got {cap!r}")
        key = (
            (call_counts.c.dataset == dataset)
            & (call_counts.c.scope == scope)
            & (call_counts.c.kind == kind)
        )
        calls = conn.execute(select(call_counts.c.calls).where(key)).scalar()
        if calls is not None and calls >= cap:
            raise CallCapExceeded(
                f"dataset {dataset!r}: the {cap} {kind} releases allowed "
                f"{'per caller' if scope != '*' else 'in all'} are used up",
                extra={"cap": cap},
            )
        if calls is None:
            conn.execute(call_counts.insert().values(dataset=dataset, scope=scope, kind=kind,
                                                     calls=1))
            return 1
        conn.execute(update(call_counts).where(key).values(calls=calls + 1))
        return int(calls) + 1

    def paid(self, dataset: str) -> dict[int, int]:
        """The units of every noisy release paid from ``dataset`` (stored or still being
        computed), as units → number of releases; what was spent without such a record
        (a ledger older than the records) is one more release of the rest, so the sum is the
        spend. What the lifetime guarantee composes (``center_agent.accountant``)."""
        paid: dict[int, int] = {}
        with self.store.engine.connect() as conn:
            for table in (releases, reservations):
                for units, n in conn.execute(
                    select(table.c.epsilon_units, func.count()).where(
                        table.c.dataset == dataset, table.c.epsilon_units > 0
                    ).group_by(table.c.epsilon_units)
                ):
                    paid[int(units)] = paid.get(int(units), 0) + int(n)
            spent = conn.execute(select(budgets.c.spent_units).where(
                budgets.c.dataset == dataset)).scalar()
        if spent is None:
            raise UnknownDataset(dataset)
        rest = int(spent) - sum(units * n for units, n in paid.items())
        if rest > 0:
            paid[rest] = paid.get(rest, 0) + 1
        return paid

    def remaining(self, dataset: str) -> float:
        """ε the dataset can still spend."""
        total, spent = self._row(dataset)
        return units_to_epsilon(total - spent)

    def spent(self, dataset: str) -> float:
        return units_to_epsilon(self._row(dataset)[1])

    def total(self, dataset: str) -> float:
        return units_to_epsilon(self._row(dataset)[0])

    def _row(self, dataset: str) -> tuple[int, int]:
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(budgets.c.total_units, budgets.c.spent_units).where(
                    budgets.c.dataset == dataset
                )
            ).first()
        if row is None:
            raise UnknownDataset(dataset)
        return int(row.total_units), int(row.spent_units)
