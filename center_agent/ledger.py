"""The privacy ledger: every DP release is debited before it leaves, in the same transaction.

Usage (a DP endpoint)::

    key = request_key(dataset, variable, "dp_quantiles", {"q": [0.5], "bounds": [0, 100]}, eps)
    payload = ledger.release(dataset, key, eps, lambda: run_the_mechanism())

:meth:`Ledger.release` opens one transaction holding the dataset's lock (see ``center_agent.db``):

1. if ``key`` was answered before, the stored payload is returned and nothing is spent (averaging
   repeated answers gains nothing);
2. if ``spent + epsilon > total`` it raises :class:`BudgetExceeded` (HTTP 403, remaining budget);
3. it debits, runs ``compute()``, stores the payload and commits.

A crash anywhere before the commit rolls everything back: nothing was released, nothing is spent.
After the commit the spend is on disk (SQLite WAL with ``synchronous=FULL``, or PostgreSQL) before
the payload is returned to the caller, so a killed process never loses a recorded spend.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select, update

from center_agent.core.errors import BudgetExceeded, CallCapExceeded, UnknownDataset
from center_agent.db import (
    Store,
    UnknownLedgerDataset,
    budgets,
    call_counts,
    releases,
    spend_units,
    units_to_epsilon,
)

JSONPayload = Any  # a JSON-serializable value (dict, list, str, int, float, bool, None)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, no NaN: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


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


class Ledger:
    """Debit-before-release accounting of ε per dataset, with a cache of past answers."""

    def __init__(self, store: Store) -> None:
        self.store = store

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
        when the dataset cannot afford ``epsilon``; ``compute`` is then never called.
        """
        eps = _check_epsilon(epsilon)
        units = spend_units(eps)
        try:
            with self.store.locked(dataset) as (conn, total, spent):
                cached = conn.execute(
                    select(releases.c.payload, releases.c.dataset).where(
                        releases.c.request_key == request_key
                    )
                ).first()
                if cached is not None:
                    if cached.dataset != dataset:
                        raise ValueError("request key reused across datasets")
                    return json.loads(cached.payload)
                if spent + units > total:
                    raise BudgetExceeded(dataset, eps, units_to_epsilon(total - spent))
                conn.execute(
                    update(budgets)
                    .where(budgets.c.dataset == dataset)
                    .values(spent_units=budgets.c.spent_units + units)
                )
                stored = canonical_json(compute())
                conn.execute(
                    releases.insert().values(
                        request_key=request_key,
                        dataset=dataset,
                        epsilon_units=units,
                        payload=stored,
                    )
                )
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None
        return json.loads(stored)

    def count_call(self, dataset: str, scope: str, kind: str, cap: int) -> int:
        """Count one more ``kind`` call in ``scope`` (e.g. a study); refuse past ``cap``.

        For releases that are limited by number rather than by ε (``yj_max_calls_per_study``).
        Returns the number of calls including this one; raises :class:`CallCapExceeded` (and
        counts nothing) when ``cap`` calls were already made.
        """
        if cap < 1:
            raise ValueError(f"`cap` must be an integer >= 1, got {cap!r}")
        key = (
            (call_counts.c.dataset == dataset)
            & (call_counts.c.scope == scope)
            & (call_counts.c.kind == kind)
        )
        try:
            with self.store.locked(dataset) as (conn, _total, _spent):
                calls = conn.execute(select(call_counts.c.calls).where(key)).scalar()
                if calls is None:
                    row = {"dataset": dataset, "scope": scope, "kind": kind, "calls": 1}
                    conn.execute(call_counts.insert().values(**row))
                    return 1
                if calls >= cap:
                    raise CallCapExceeded(
                        f"dataset {dataset!r}: the {cap} {kind} calls allowed for {scope!r} "
                        "are used up",
                        extra={"cap": cap},
                    )
                conn.execute(update(call_counts).where(key).values(calls=calls + 1))
                return int(calls) + 1
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

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
