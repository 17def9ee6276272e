"""Fisher-optimal noise (seed 002): golden values (docs/methods.md §7.4-§7.5), invariants,
sampler, refusals."""

import doctest
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from scipy.linalg import eigh_tridiagonal

import shared.mechanisms.fisher_optimal as fisher_module
from shared.mechanisms import FisherOptimal, FisherOptimalBox

R_MAX = 1 / 3 - 2 / math.pi**2  # second moment of the raised cosine on [−1, 1]
N_DRAWS = 100_000

# --- golden values (docs/methods.md §7.4-§7.5) --------------------------------------------------


@pytest.mark.parametrize("a", [0.3, 1.0, 4.7])
@pytest.mark.parametrize("slack", [1.0, 1.5, 100.0])
def test_raised_cosine_when_the_constraint_is_inactive(a, slack):
    noise = FisherOptimal(rho=slack * a**2 * R_MAX, half_width=a)
    assert noise.kind == "raised_cosine"
    assert noise.multiplier == 0.0
    assert noise.fisher_information == pytest.approx(math.pi**2 / a**2, rel=1e-12)
    assert noise.variance == pytest.approx(a**2 * (1 / 3 - 2 / math.pi**2), rel=1e-12)
    # p(w) = cos²(πw/(2a))/a is scipy's cosine law with scale a/π (docs/methods.md §7.4)
    w = np.linspace(-1.2 * a, 1.2 * a, 301)
    law = stats.cosine(scale=a / math.pi)
    np.testing.assert_allclose(noise.pdf(w), law.pdf(w), rtol=0, atol=1e-12 / a)
    np.testing.assert_allclose(noise.cdf(w), law.cdf(w), rtol=0, atol=1e-12)


# ψ ∝ (1 − w²/a²)·exp(−w²/(4a²)) solves −4ψ'' + w²ψ/a⁴ = (10/a²)ψ with ψ(±a) = 0
# (docs/methods.md §7.5)
EXACT_RHO = 0.130100991256
EXACT_J = 9.869899008744


def _exact_psi(w):
    return (1 - w**2) * np.exp(-(w**2) / 4)


def test_exact_case_second_moment_by_quadrature():
    num, _ = integrate.quad(lambda w: w**2 * _exact_psi(w) ** 2, -1, 1, epsabs=0, epsrel=1e-13)
    den, _ = integrate.quad(lambda w: _exact_psi(w) ** 2, -1, 1, epsabs=0, epsrel=1e-13)
    assert num / den == pytest.approx(EXACT_RHO, abs=1e-12)


@pytest.mark.parametrize("a", [1.0, 0.25, 3.0])
def test_exact_case(a):
    noise = FisherOptimal(rho=EXACT_RHO * a**2, half_width=a)
    assert noise.kind == "ground_state"
    assert noise.fisher_information * a**2 == pytest.approx(EXACT_J, abs=1e-9)
    # J = E_0 − λρ with E_0 = 10/a², λ = 1/a⁴ (ρ is given to 12 digits, so λ to ~1e-9)
    assert noise.multiplier * a**4 == pytest.approx(1.0, abs=1e-8)
    # the tabulated density is the closed-form ground state
    w = np.linspace(-a, a, 401)
    exact = _exact_psi(w / a) ** 2
    exact /= integrate.quad(lambda v: _exact_psi(v) ** 2, -1, 1)[0] * a
    np.testing.assert_allclose(noise.pdf(w), exact, rtol=0, atol=1e-6 / a)


# a = 1: (ρ, λ, J*) from docs/methods.md §7.5, printed to the digits shown
REFERENCE = [(0.05, 397.896, 20.01236), (0.10, 66.2107, 10.79963), (0.12, 19.4453, 9.970936)]


@pytest.mark.parametrize(("rho", "lam", "fisher"), REFERENCE)
def test_reference_table(rho, lam, fisher):
    noise = FisherOptimal(rho=rho, half_width=1.0)
    assert noise.fisher_information == pytest.approx(fisher, abs=1e-5)
    assert noise.multiplier == pytest.approx(lam, rel=2e-6)
    assert noise.variance == pytest.approx(rho, rel=1e-12)
    # the envelope theorem, independent of how J was computed: dJ*/dρ = −λ
    h = 1e-5 * rho
    slope = (
        FisherOptimal(rho + h, 1.0).fisher_information
        - FisherOptimal(rho - h, 1.0).fisher_information
    ) / (2 * h)
    assert slope == pytest.approx(-noise.multiplier, rel=1e-5)


def test_unbounded_support_is_gaussian():
    noise = FisherOptimal(rho=2.5)
    assert noise.kind == "gaussian"
    assert noise.support == (-math.inf, math.inf)
    assert noise.fisher_information * noise.rho == 1.0
    assert noise.variance == 2.5
    w = np.linspace(-6, 6, 101)
    np.testing.assert_allclose(noise.pdf(w), stats.norm(scale=math.sqrt(2.5)).pdf(w), rtol=1e-12)


def test_gaussian_limit_of_bounded_support():
    # J·ρ → 1 as the walls recede (ρ/a² → 0), from above and monotonically
    ratios = [0.12, 0.1, 0.05, 0.03, 0.02, 0.011, 0.005, 1e-4]
    products = [FisherOptimal(r * 9.0, 3.0).fisher_information * r * 9.0 for r in ratios]
    assert all(p1 > p2 for p1, p2 in itertools.pairwise(products[:5]))
    assert products[2] == pytest.approx(20.01236 * 0.05, abs=1e-6)
    assert abs(products[4] - 1) < 1e-6
    assert products[-2:] == [pytest.approx(1.0, abs=1e-12)] * 2
    assert FisherOptimal(0.005 * 9.0, 3.0).kind == "harmonic"


# --- invariants (hypothesis) --------------------------------------------------------------------

# J·Q = 1 and E[w²] = ρ hold with equality at the limits; the solver is good to ~4e-11 relative
TOL = 1e-9
half_widths = st.floats(1e-3, 1e3)
moment_ratios = st.floats(1e-4, 0.2)  # ρ/a²: harmonic, ground state and raised-cosine regimes


@settings(max_examples=40, deadline=None)
@given(a=half_widths, r=moment_ratios)
def test_privacy_principle_and_scaling_law(a, r):
    noise = FisherOptimal(r * a**2, a)
    q = noise.variance
    assert q <= noise.rho * (1 + TOL)
    assert noise.fisher_information * q >= 1 - TOL
    unit = FisherOptimal(r, 1.0)
    assert noise.fisher_information * a**2 == pytest.approx(unit.fisher_information, rel=1e-12)
    assert noise.multiplier * a**4 == pytest.approx(unit.multiplier, rel=1e-12)
    assert noise.guarantee.cramer_rao_bound == pytest.approx(1 / noise.fisher_information)
    assert noise.guarantee.mse_bound(7) == pytest.approx(1 / (7 * noise.fisher_information))


def _direct_fd(lam, a, intervals):
    """Ground state of −4ψ'' + λw²ψ on [−a, a] solved directly (no rescaling): (E_0, <w²>)."""
    h = 2 * a / intervals
    w = np.linspace(-a, a, intervals + 1)[1:-1]
    energy, vec = eigh_tridiagonal(
        8 / h**2 + lam * w**2, np.full(w.size - 1, -4 / h**2), select="i", select_range=(0, 0)
    )
    v = vec[:, 0]
    return energy[0], float(w**2 @ v**2 / (v @ v))


@settings(max_examples=15, deadline=None)
@given(a=half_widths, r=st.floats(0.012, 0.13))
def test_solution_against_a_direct_solve_on_the_real_support(a, r):
    # independent of the unit-box rescaling: the reported λ, put into the real-scale equation,
    # must give back E[w²] = ρ and J = E_0 − λρ (Richardson on 2000/4000 intervals, ~1e-8)
    noise = FisherOptimal(r * a**2, a)
    lam = noise.multiplier
    (e1, s1), (e2, s2) = _direct_fd(lam, a, 2000), _direct_fd(lam, a, 4000)
    energy, moment = (4 * e2 - e1) / 3, (4 * s2 - s1) / 3
    assert moment == pytest.approx(noise.rho, rel=1e-6)
    assert energy - lam * noise.rho == pytest.approx(noise.fisher_information, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    widths=st.lists(st.floats(0.1, 10.0), min_size=1, max_size=4),
    r=st.floats(1e-3, 0.2),
)
def test_box_privacy_principle(widths, r):
    rho = r * sum(a * a for a in widths)
    noise = FisherOptimalBox(rho, widths)
    m = len(widths)
    assert noise.dim == m
    assert noise.variance <= rho * (1 + TOL)
    assert noise.fisher_information * noise.variance >= m**2 * (1 - TOL)
    # Cramér–Rao for the vector: tr(I⁻¹) >= m²/tr(I)
    assert noise.guarantee.cramer_rao_bound >= m**2 / noise.fisher_information * (1 - TOL)
    if noise.multiplier > 0:
        assert noise.variance == pytest.approx(rho, rel=1e-10)


def test_box_coordinates_share_one_multiplier():
    noise = FisherOptimalBox(0.1, (0.5, 1.0, 2.0))
    # one λ squeezes the narrow coordinate hardest; the widest one's walls are > 10 sd out
    assert noise.kind == ("ground_state", "ground_state", "harmonic")
    for j in range(3):
        marginal = noise.marginal(j)  # solved afresh in one dimension
        assert marginal.multiplier == pytest.approx(noise.multiplier, rel=1e-8)
        assert marginal.fisher_information == pytest.approx(
            noise.coordinate_information[j], rel=1e-9
        )


def test_cube_is_m_copies_of_the_one_dimensional_optimum():
    cube = FisherOptimalBox(0.3, (1.0, 1.0, 1.0))
    line = FisherOptimal(0.1, 1.0)
    assert cube.fisher_information == pytest.approx(3 * line.fisher_information, rel=1e-10)
    assert cube.multiplier == pytest.approx(line.multiplier, rel=1e-10)
    assert FisherOptimalBox(10.0, (1.0, 2.0)).kind == ("raised_cosine", "raised_cosine")


# --- sampler ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("r", "kind"),
    [(0.004, "harmonic"), (0.05, "ground_state"), (0.1, "ground_state"), (0.13, "ground_state")],
)
def test_sampler_matches_the_solved_cdf(r, kind):
    a = 2.0
    noise = FisherOptimal(r * a**2, a)
    assert noise.kind == kind
    draws = noise.sample(np.random.default_rng(int(r * 1e4)), N_DRAWS)
    assert np.abs(draws).max() <= a
    assert stats.kstest(draws, noise.cdf).pvalue > 0.01
    assert np.mean(draws**2) == pytest.approx(noise.rho, rel=0.01)


def test_sampler_against_closed_forms():
    rng = np.random.default_rng(5)
    cosine = FisherOptimal(1.0, 1.5)
    assert (
        stats.kstest(cosine.sample(rng, N_DRAWS), stats.cosine(scale=1.5 / math.pi).cdf).pvalue
        > 0.01
    )
    harmonic = FisherOptimal(1e-3, 1.0)  # walls 31 standard deviations out
    assert (
        stats.kstest(harmonic.sample(rng, N_DRAWS), stats.norm(scale=math.sqrt(1e-3)).cdf).pvalue
        > 0.01
    )
    gauss = FisherOptimal(0.7)
    assert (
        stats.kstest(gauss.sample(rng, N_DRAWS), stats.norm(scale=math.sqrt(0.7)).cdf).pvalue > 0.01
    )


def test_cdf_and_ppf_are_inverse():
    noise = FisherOptimal(0.08, 1.0)
    q = np.linspace(0.001, 0.999, 999)
    np.testing.assert_allclose(noise.cdf(noise.ppf(q)), q, atol=1e-9)
    # the table integrates the density
    w = np.linspace(-1, 1, 4001)
    total = integrate.trapezoid(noise.pdf(w), w)
    assert total == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("r", [0.004, 0.1, 0.13069, 1.0])
def test_guide_table_inversion_equals_interpolation(r):
    inverse = FisherOptimal(r, 1.0)._state.ppf
    rng = np.random.default_rng(1)
    q = np.concatenate(
        [rng.random(20_000), inverse.probs, np.nextafter(inverse.probs, 2), [0.0, 1.0, 5e-324]]
    )
    np.testing.assert_array_equal(inverse(q), np.interp(q, inverse.probs, inverse.nodes))


def test_box_sampler():
    noise = FisherOptimalBox(0.5, (1.0, 2.0))
    draws = noise.sample(np.random.default_rng(9), N_DRAWS)
    assert draws.shape == (N_DRAWS, 2)
    assert np.all(np.abs(draws) <= np.array([1.0, 2.0]))
    assert np.mean(np.sum(draws**2, axis=1)) == pytest.approx(0.5, rel=0.01)
    for j in range(2):
        marginal = noise.marginal(j)
        assert stats.kstest(draws[:, j], marginal.cdf).pvalue > 0.01
    # coordinates are independent
    assert abs(np.corrcoef(draws[:, 0] ** 2, draws[:, 1] ** 2)[0, 1]) < 0.02
    w = np.array([[0.1, -0.5], [2.0, 0.0]])
    np.testing.assert_allclose(
        noise.pdf(w), noise.marginal(0).pdf(w[:, 0]) * noise.marginal(1).pdf(w[:, 1]), rtol=1e-9
    )


# --- cache --------------------------------------------------------------------------------------


def test_solutions_are_cached_by_rho_over_a_squared():
    fisher_module.clear_cache()
    first, second = FisherOptimal(0.1, 1.0), FisherOptimal(0.4, 2.0)
    assert first._state is second._state
    with pytest.raises(ValueError, match="read-only"):
        first._state.cdf[0] = 1.0


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0, -0.1, math.nan, math.inf, "x", None])
def test_refuses_bad_rho(rho):
    with pytest.raises(ValueError, match="`rho` must be a finite number > 0"):
        FisherOptimal(rho, 1.0)
    with pytest.raises(ValueError, match="`rho` must be a finite number > 0"):
        FisherOptimalBox(rho, (1.0,))


@pytest.mark.parametrize("a", [0, -1.0, math.nan, math.inf, "wide"])
def test_refuses_bad_half_width(a):
    with pytest.raises(ValueError, match=r"`half_width` must be a finite number > 0.*None"):
        FisherOptimal(0.1, a)
    with pytest.raises(ValueError, match=r"`half_widths\[1\]` must be a finite number > 0"):
        FisherOptimalBox(0.1, (1.0, a))


def test_refuses_bad_box():
    with pytest.raises(ValueError, match="at least one"):
        FisherOptimalBox(0.1, ())
    with pytest.raises(ValueError, match="`half_widths` must be a sequence"):
        FisherOptimalBox(0.1, 1.0)
    with pytest.raises(ValueError, match="last axis of length 2"):
        FisherOptimalBox(0.1, (1.0, 1.0)).pdf([0.0, 0.0, 0.0])


def test_guarantee_refuses_bad_release_count():
    with pytest.raises(ValueError, match="`releases` must be an integer >= 1"):
        FisherOptimal(0.1, 1.0).guarantee.mse_bound(0)


def test_docstring_examples():
    assert doctest.testmod(fisher_module).failed == 0
