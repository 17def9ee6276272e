"""The privacy vocabulary every DP function speaks: neighbouring relations and spent budget.

The privacy unit is one patient's record. Two data sets are neighbours under

* ``"add_remove"``: one holds one record more than the other (n is private);
* ``"swap"``: one record's value is replaced by another (n is treated as public).

Every DP function takes ``neighbouring`` explicitly and returns a :class:`PrivacySpent` so that a
ledger can debit exactly what was released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Neighbouring = Literal["add_remove", "swap"]
NEIGHBOURING_RELATIONS: tuple[Neighbouring, ...] = ("add_remove", "swap")


@dataclass(frozen=True)
class PrivacySpent:
    """Budget consumed by one release: pure ε-DP when ``delta == 0``, else (ε, δ)-DP."""

    epsilon: float
    delta: float = 0.0

    def __add__(self, other: PrivacySpent) -> PrivacySpent:
        """Basic sequential composition: ε and δ add up."""
        return PrivacySpent(self.epsilon + other.epsilon, self.delta + other.delta)
