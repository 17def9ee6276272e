"""Gaussian mechanism for a release with L2 sensitivity Δ, calibrated to ρ-zCDP or to (ε, δ)-DP.

See also docs/methods.md §7.2.

* ρ-zCDP: σ = Δ/√(2ρ) (Bun & Steinke 2016, Prop. 1.6: N(0, σ²) gives Δ²/(2σ²)-zCDP).
* (ε, δ)-DP: the *analytic* Gaussian mechanism (Balle & Wang 2018, Theorem 8): N(0, σ²) is
  (ε, δ)-DP if and only if

      Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) <= δ,

  and we take the smallest such σ (root-found on log σ, evaluated in log space). It is exact for
  every ε > 0, unlike the classical σ = Δ√(2 ln(1.25/δ))/ε, which is only proven for ε < 1 (Dwork &
  Roth 2014, Thm. A.1) and is always larger.

The sensitivity must be computed under the caller's neighbouring relation (:mod:`shared.privacy`).
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import log_ndtr

from shared._validation import check_epsilon, check_generator, check_open_unit, check_positive
from shared.mechanisms.base import Size, as_shape
from shared.mechanisms.guarantees import ZCDPSpent
from shared.noisy_null import NoiseLaw
from shared.privacy import PrivacySpent


def analytic_gaussian_log_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """log δ(σ) of N(0, σ²) noise at ε (Balle & Wang 2018, Theorem 8), stable for tiny δ."""
    t = sigma / sensitivity
    log_a = float(log_ndtr(0.5 / t - epsilon * t))
    log_b = float(log_ndtr(-0.5 / t - epsilon * t))
    x = epsilon + log_b - log_a  # log of e^ε Φ(B)/Φ(A), always < 0
    # log(1 − e^x): expm1 keeps precision when x is close to 0, log1p when it is very negative
    return log_a + (math.log(-math.expm1(x)) if x > -math.log(2.0) else math.log1p(-math.exp(x)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ with N(0, σ²) (ε, δ)-DP at L2 sensitivity Δ (Balle & Wang 2018, Theorem 8)."""
    epsilon = check_epsilon(epsilon)
    delta = check_open_unit(delta, "delta")
    sensitivity = check_positive(sensitivity, "sensitivity")
    target = math.log(delta)

    def excess(log_t: float) -> float:
        return analytic_gaussian_log_delta(math.exp(log_t), epsilon, 1.0) - target

    # δ(σ) falls from 1 (σ → 0) to 0 (σ → ∞); start from the classical scale and widen.
    lo = hi = math.log(math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
    while excess(lo) <= 0.0:
        lo -= 2.0
    while excess(hi) > 0.0:
        hi += 2.0
    return sensitivity * math.exp(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15))


@dataclass(frozen=True)
class Gaussian:
    """N(0, σ²) noise for a scalar release with L2 sensitivity Δ.

    Give exactly one calibration: ``rho`` (ρ-zCDP, σ = Δ/√(2ρ)) or ``epsilon`` and ``delta``
    (analytic Gaussian, (ε, δ)-DP)::

        Gaussian(1.0, rho=0.5)
        Gaussian(1.0, epsilon=1.0, delta=1e-6)
    """

    sensitivity: float
    _: KW_ONLY
    rho: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        sensitivity = check_positive(self.sensitivity, "sensitivity")
        object.__setattr__(self, "sensitivity", sensitivity)
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("give either `rho` (zCDP) or `epsilon` and `delta`, not both")
            rho = check_positive(self.rho, "rho")
            object.__setattr__(self, "rho", rho)
            object.__setattr__(self, "sigma", sensitivity / math.sqrt(2.0 * rho))
        elif self.epsilon is not None and self.delta is not None:
            epsilon = check_epsilon(self.epsilon)
            delta = check_open_unit(self.delta, "delta")
            object.__setattr__(self, "epsilon", epsilon)
            object.__setattr__(self, "delta", delta)
            object.__setattr__(self, "sigma", analytic_gaussian_sigma(epsilon, delta, sensitivity))
        else:
            raise ValueError("give `rho` (zCDP) or both `epsilon` and `delta` ((ε, δ)-DP)")

    @property
    def dim(self) -> int:
        return 1

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def noise_law(self) -> NoiseLaw:
        """N(0, σ²), for exact null laws of noisy statistics (:mod:`shared.noisy_null`)."""
        return NoiseLaw.gaussian(self.sigma)

    @property
    def fisher_information(self) -> float:
        """1/σ²; for comparisons with Fisher-optimal noise."""
        return 1.0 / self.sigma**2

    @property
    def guarantee(self) -> ZCDPSpent | PrivacySpent:
        if self.rho is not None:
            return ZCDPSpent(self.rho)
        assert self.epsilon is not None and self.delta is not None
        return PrivacySpent(self.epsilon, self.delta)

    def sample(self, rng: np.random.Generator, size: Size) -> NDArray[np.float64]:
        return check_generator(rng).normal(0.0, self.sigma, as_shape(size))
