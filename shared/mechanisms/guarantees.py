"""What noise promises: differential privacy (pure, approximate, zCDP) or Fisher privacy.

* :class:`~shared.privacy.PrivacySpent` — (ε, δ)-DP, pure when δ = 0 (Laplace; analytic Gaussian).
* :class:`ZCDPSpent` — ρ-zero-concentrated DP (Gaussian calibrated to ρ; Bun & Steinke 2016).
* :class:`FisherGuarantee` — the Fisher-information notion of seed 002 (Farokhi 2019): a lower bound
  on the mean squared error of any *unbiased* estimate of the released value. It is **not**
  differential privacy: it says nothing about biased estimators, priors or membership inference,
  and it does not compose into a DP budget. Never debit it from a DP ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared._validation import check_int, check_open_unit
from shared.privacy import PrivacySpent


@dataclass(frozen=True)
class ZCDPSpent:
    """ρ-zCDP (Bun & Steinke 2016, Def. 1.1); ρ adds up under composition (their Lemma 1.7)."""

    rho: float

    def __add__(self, other: ZCDPSpent) -> ZCDPSpent:
        return ZCDPSpent(self.rho + other.rho)

    def to_approx_dp(self, delta: float) -> PrivacySpent:
        """(ρ + 2√(ρ ln(1/δ)), δ)-DP for any δ in (0, 1) (Bun & Steinke 2016, Prop. 1.3)."""
        delta = check_open_unit(delta, "delta")
        return PrivacySpent(self.rho + 2.0 * math.sqrt(self.rho * math.log(1.0 / delta)), delta)


@dataclass(frozen=True)
class FisherGuarantee:
    """Fisher-information privacy of additive noise w (Farokhi 2019, eqs. 2-3) — not DP.

    ``coordinate_information`` is the diagonal of the Fisher information matrix of the noise
    density (off-diagonal terms vanish for the separable densities we release);
    ``fisher_information`` is its trace, the seed's J = E‖∇ log p(w)‖². ``second_moment`` is the
    realised Q = E‖w‖² and ``quality_bound`` the requested ρ >= Q.
    """

    fisher_information: float
    coordinate_information: tuple[float, ...]
    second_moment: float
    quality_bound: float

    @property
    def cramer_rao_bound(self) -> float:
        """Lower bound on E‖x̂ − f(x)‖² for one release: tr(I⁻¹) = Σ_j 1/J_j (= 1/J in 1-D)."""
        return self.mse_bound(1)

    def mse_bound(self, releases: int = 1) -> float:
        """Cramér–Rao after k independent releases of the same value: information adds up, so any
        unbiased estimate has E‖x̂ − f(x)‖² >= Σ_j 1/(k J_j) (1/(kJ) in one dimension)."""
        k = check_int(releases, "releases", 1)
        return math.fsum(1.0 / (k * j) for j in self.coordinate_information)


Guarantee = PrivacySpent | ZCDPSpent | FisherGuarantee
