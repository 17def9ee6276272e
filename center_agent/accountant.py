"""One accountant per dataset: the lifetime (ε, δ) guarantee of everything it released with
noise, composed from the ledger's payments (``shared.accounting``).

The ledger stays the rule (debit before release, the budget's total on the basic sum of ε);
the accountant states what those payments add up to under optimal composition. It reads only
the ledger (ε's chosen by callers, never data), and keeps the last answer per dataset for the
same payments, since composing is a few convolutions and ``GET /v1/budget`` may be polled.
"""

from __future__ import annotations

import threading

from center_agent.db import units_to_epsilon
from center_agent.ledger import Ledger
from shared.accounting import PrivacyGuarantee, compose_pure


class Accountant:
    def __init__(self, ledger: Ledger, delta: float) -> None:
        self.ledger = ledger
        self.delta = delta
        self._last: dict[str, tuple[tuple[tuple[int, int], ...], PrivacyGuarantee]] = {}
        self._lock = threading.Lock()

    def guarantee(self, dataset: str) -> PrivacyGuarantee:
        """The dataset's guarantee over every release paid to date."""
        paid = tuple(sorted(self.ledger.paid(dataset).items()))
        with self._lock:
            last = self._last.get(dataset)
        if last is not None and last[0] == paid:
            return last[1]
        result = compose_pure({units_to_epsilon(units): n for units, n in paid},
                              delta=self.delta)
        with self._lock:
            self._last[dataset] = (paid, result)
        return result
