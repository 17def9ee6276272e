"""The privacy vocabulary: neighbouring relations and spent budget (DP), the K-anonymity rule.

The privacy unit is one patient's record. Two data sets are neighbours under

* ``"add_remove"``: one holds one record more than the other (n is private);
* ``"swap"``: one record's value is replaced by another (n is treated as public).

Every DP function takes ``neighbouring`` explicitly and returns a :class:`PrivacySpent` so that a
ledger can debit exactly what was released. Exact releases instead keep every count they show,
alone or combined, out of 1..K-1 (:func:`isolating`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Neighbouring = Literal["add_remove", "swap"]
NEIGHBOURING_RELATIONS: tuple[Neighbouring, ...] = ("add_remove", "swap")

# Here, not in shared.protocol, so a center's configuration (read by the operator's light
# commands) does not load the wire models and the statistics behind them.
ReleaseMode = Literal["k_anonymous", "dp"]
"""How a center releases a dataset (its operator's choice): ``"k_anonymous"``, K-anonymous tables
and DP releases with sizes rounded down to K; ``"dp"``, every release differentially private
(docs/privacy.md, "DP mode")."""


def isolating(counts: ArrayLike, k: int) -> NDArray[np.bool_]:
    """Which ``counts`` lie in 1..K-1: a set of that many records is one no K-anonymous release,
    nor any combination of releases, may show (K-anonymity as seed 001 uses it: a count is 0 or
    at least K)."""
    c = np.asarray(counts)
    return np.asarray((c > 0) & (c < k), dtype=bool)


def public_size(n: int, k: int) -> int:
    """A size as a center may show it: rounded down to a multiple of K (n mod K never leaves)."""
    return (n // k) * k


@dataclass(frozen=True)
class PrivacySpent:
    """Budget consumed by one release: pure ε-DP when ``delta == 0``, else (ε, δ)-DP."""

    epsilon: float
    delta: float = 0.0

    def __add__(self, other: PrivacySpent) -> PrivacySpent:
        """Basic sequential composition: ε and δ add up."""
        return PrivacySpent(self.epsilon + other.epsilon, self.delta + other.delta)
