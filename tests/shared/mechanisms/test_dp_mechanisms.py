"""Laplace and Gaussian mechanisms: calibration, samplers, guarantees, refusals."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from shared.mechanisms import (
    FisherOptimal,
    FisherOptimalBox,
    Gaussian,
    Laplace,
    Mechanism,
    ZCDPSpent,
    analytic_gaussian_sigma,
)
from shared.privacy import PrivacySpent

N_DRAWS = 100_000


def hockey_stick_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """δ(ε) = ∫ (p − e^ε q)_+ for p = N(0, σ²), q = N(Δ, σ²), by quadrature (independent of the
    closed form in Balle & Wang 2018). p > e^ε q exactly left of x0 = Δ/2 − εσ²/Δ."""
    x0 = sensitivity / 2 - epsilon * sigma**2 / sensitivity
    p = stats.norm(0.0, sigma).pdf
    q = stats.norm(sensitivity, sigma).pdf
    val, _ = integrate.quad(
        lambda x: p(x) - math.exp(epsilon) * q(x),
        x0 - 60 * sigma,
        x0,
        epsabs=0,
        epsrel=1e-11,
        limit=200,
    )
    return val


# --- Laplace ------------------------------------------------------------------------------------


def test_laplace_calibration_and_guarantee():
    mech = Laplace(epsilon=0.5, sensitivity=2.0)
    assert mech.scale == 4.0
    assert mech.variance == 32.0
    assert mech.fisher_information == 1 / 16
    assert mech.guarantee == PrivacySpent(0.5, 0.0)
    assert mech.dim == 1


def test_laplace_sampler_matches_scipy():
    mech = Laplace(epsilon=1.3, sensitivity=0.7)
    draws = mech.sample(np.random.default_rng(20261129), N_DRAWS)
    assert draws.shape == (N_DRAWS,)
    assert stats.kstest(draws, stats.laplace(scale=0.7 / 1.3).cdf).pvalue > 0.01
    assert np.mean(draws**2) == pytest.approx(mech.variance, rel=0.02)


def test_sampling_is_reproducible_from_the_passed_generator_only():
    mech = Laplace(1.0, 1.0)
    a = mech.sample(np.random.default_rng(7), (3, 4))
    b = mech.sample(np.random.default_rng(7), (3, 4))
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("epsilon", [0, -1, math.nan, math.inf, "x", None])
def test_laplace_refuses_bad_epsilon(epsilon):
    with pytest.raises(ValueError, match="`epsilon` must be a finite number > 0"):
        Laplace(epsilon, 1.0)


@pytest.mark.parametrize("sensitivity", [0, -2.0, math.nan, math.inf])
def test_laplace_refuses_bad_sensitivity(sensitivity):
    with pytest.raises(ValueError, match="`sensitivity` must be a finite number > 0"):
        Laplace(1.0, sensitivity)


# --- Gaussian -----------------------------------------------------------------------------------


def test_gaussian_zcdp_calibration():
    # Bun & Steinke 2016, Prop. 1.6: N(0, σ²) at sensitivity Δ is Δ²/(2σ²)-zCDP
    mech = Gaussian(2.0, rho=0.5)
    assert mech.sigma == pytest.approx(2.0, rel=1e-15)
    assert mech.variance == pytest.approx(4.0, rel=1e-15)
    assert mech.guarantee == ZCDPSpent(0.5)
    # Prop. 1.3: ρ-zCDP => (ρ + 2√(ρ ln(1/δ)), δ)-DP
    spent = mech.guarantee.to_approx_dp(1e-6)
    assert spent == PrivacySpent(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), 1e-6)
    assert ZCDPSpent(0.25) + ZCDPSpent(0.5) == ZCDPSpent(0.75)


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"),
    [(1.0, 1e-5, 1.0), (0.1, 1e-6, 3.0), (5.0, 1e-3, 0.5), (0.5, 0.05, 1.0)],
)
def test_analytic_gaussian_is_exactly_calibrated(epsilon, delta, sensitivity):
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    # the hockey-stick divergence equals δ at σ, and exceeds it for any smaller σ
    assert hockey_stick_delta(sigma, epsilon, sensitivity) == pytest.approx(delta, rel=1e-7)
    assert hockey_stick_delta(sigma * (1 - 1e-4), epsilon, sensitivity) > delta
    if epsilon < 1:
        # the classical calibration (Dwork & Roth 2014, Thm. A.1) is valid there and never tighter
        assert sigma < sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def test_analytic_gaussian_regression_value():
    # pinned from this implementation once the quadrature check above passed at (1, 1e-5, 1); the
    # classical calibration would give 4.8448
    assert analytic_gaussian_sigma(1.0, 1e-5, 1.0) == pytest.approx(3.73063, abs=1e-5)


def test_gaussian_approx_dp_guarantee_and_sampler():
    mech = Gaussian(1.5, epsilon=1.0, delta=1e-6)
    assert mech.guarantee == PrivacySpent(1.0, 1e-6)
    assert mech.sigma == analytic_gaussian_sigma(1.0, 1e-6, 1.5)
    draws = mech.sample(np.random.default_rng(11), N_DRAWS)
    assert stats.kstest(draws, stats.norm(scale=mech.sigma).cdf).pvalue > 0.01
    assert mech.variance == mech.sigma**2
    assert np.mean(draws**2) == pytest.approx(mech.variance, rel=0.02)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "give `rho`"),
        ({"epsilon": 1.0}, "give `rho`"),
        ({"rho": 0.5, "epsilon": 1.0, "delta": 1e-6}, "not both"),
        ({"rho": 0.0}, "`rho` must be a finite number > 0"),
        ({"rho": math.nan}, "`rho` must be a finite number > 0"),
        ({"epsilon": 0.0, "delta": 1e-6}, "`epsilon` must be a finite number > 0"),
        ({"epsilon": 1.0, "delta": 0.0}, r"`delta` must be a number in \(0, 1\)"),
        ({"epsilon": 1.0, "delta": 1.0}, r"`delta` must be a number in \(0, 1\)"),
        ({"epsilon": 1.0, "delta": math.nan}, r"`delta` must be a number in \(0, 1\)"),
    ],
)
def test_gaussian_refuses_bad_calibration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Gaussian(1.0, **kwargs)


def test_gaussian_refuses_bad_sensitivity():
    with pytest.raises(ValueError, match="`sensitivity` must be a finite number > 0"):
        Gaussian(-1.0, rho=1.0)


def test_zcdp_conversion_refuses_bad_delta():
    with pytest.raises(ValueError, match=r"`delta` must be a number in \(0, 1\)"):
        ZCDPSpent(0.5).to_approx_dp(0.0)


# --- the shared interface -----------------------------------------------------------------------

MECHANISMS = [
    Laplace(1.0, 1.0),
    Gaussian(1.0, rho=0.5),
    Gaussian(1.0, epsilon=1.0, delta=1e-6),
    FisherOptimal(0.1, 1.0),
    FisherOptimal(0.1),
    FisherOptimalBox(0.1, (1.0, 2.0)),
]


@pytest.mark.parametrize("mech", MECHANISMS, ids=lambda m: type(m).__name__)
def test_every_mechanism_implements_the_interface(mech):
    assert isinstance(mech, Mechanism)
    draws = mech.sample(np.random.default_rng(3), (5, 2))
    expected = (5, 2) if mech.dim == 1 else (5, 2, mech.dim)
    assert draws.shape == expected
    assert draws.dtype == np.float64
    assert mech.variance > 0


@pytest.mark.parametrize("mech", MECHANISMS, ids=lambda m: type(m).__name__)
def test_every_mechanism_refuses_the_global_numpy_state(mech):
    with pytest.raises(TypeError, match=r"`rng` must be a numpy\.random\.Generator"):
        mech.sample(np.random.RandomState(0), 3)
    with pytest.raises(ValueError, match="`size`"):
        mech.sample(np.random.default_rng(0), -1)
