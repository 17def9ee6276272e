"""Additive noise mechanisms sharing one interface (:class:`Mechanism`).

=====================  ==========================================  ==============================
mechanism              calibrated by                               guarantee
=====================  ==========================================  ==============================
:class:`Laplace`       ε, L1 sensitivity                           ε-DP (``PrivacySpent``)
:class:`Gaussian`      ρ or (ε, δ), L2 sensitivity                 ρ-zCDP / (ε, δ)-DP
:class:`FisherOptimal` ρ = bound on E[w²], support half-width a    Fisher information — NOT DP
:class:`FisherOptimalBox`  ρ = bound on E‖w‖², box half-widths     Fisher information — NOT DP
=====================  ==========================================  ==============================

All sample from a passed ``numpy.random.Generator`` and report ``variance`` (E‖w‖²) so that a
test statistic released with noise can inflate its null variance by exactly that much. The
one-dimensional ones also expose ``noise_law`` (a :class:`shared.noisy_null.NoiseLaw`), from which
a noisy statistic's exact null law, and so its p-value, is computed.
"""

from shared.mechanisms.base import Mechanism, Size
from shared.mechanisms.fisher_optimal import FisherOptimal, FisherOptimalBox, clear_cache
from shared.mechanisms.gaussian import Gaussian, analytic_gaussian_sigma
from shared.mechanisms.guarantees import FisherGuarantee, Guarantee, ZCDPSpent
from shared.mechanisms.laplace import Laplace

__all__ = [
    "FisherGuarantee",
    "FisherOptimal",
    "FisherOptimalBox",
    "Gaussian",
    "Guarantee",
    "Laplace",
    "Mechanism",
    "Size",
    "ZCDPSpent",
    "analytic_gaussian_sigma",
    "clear_cache",
]
