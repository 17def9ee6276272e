"""The null laws of noisy statistics (shared.noisy_null) against independent references.

References (tests/helpers/noisy_reference.py) are adaptive quadratures of positive integrands,
never the code under test; the Gaussian case against scipy's normal. Tolerances: the issue asks
for 1e-6 absolute where p runs from 1e-4 to 0.5; the laws do far better, and the tests hold them
to what they do (relative error in the far tails too), so that a regression shows.
"""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from shared.mechanisms import FisherOptimal, Gaussian, Laplace
from shared.noisy_null import NoiseLaw, NoisyNormal, _Inversion, noise_law_of
from tests.helpers import noisy_reference as ref

# Upper-tail probabilities the tests visit: the range 1e-4..0.5 and the far tails.
TAILS = np.array([0.5, 0.3, 0.1, 0.05, 0.01, 1e-3, 1e-4, 1e-6, 1e-9, 1e-12])


def points(law: NoisyNormal, tails: np.ndarray = TAILS) -> np.ndarray:
    """t with P(T > t) near each tail (the law's own isf; the reference then judges P there)."""
    return law.isf(tails)


def check(law: NoisyNormal, reference, *, abs_tol: float, rel_tol: float,
          tails: np.ndarray = TAILS) -> float:
    ts = points(law, tails)
    got = law.sf(ts)
    want = np.array([reference(float(t)) for t in ts])
    np.testing.assert_allclose(got, want, rtol=rel_tol, atol=0)
    assert np.max(np.abs(got - want)) <= abs_tol
    return float(np.max(np.abs(got / want - 1)))


# -- one Laplace noise: the closed form and the inversion --------------------------------------


@pytest.mark.parametrize(("sigma", "b"), [(1.0, 0.05), (1.0, 1.0), (1.0, 7.0), (1.0, 70.0),
                                          (30.0, 2.0), (0.0, 3.0)])
def test_normal_laplace_closed_form_against_quadrature(sigma, b):
    law = NoisyNormal(sigma**2, (NoiseLaw.laplace(b),))
    if sigma == 0.0:  # the Laplace law itself
        reference = stats.laplace(scale=b).sf
    else:
        def reference(t):
            return ref.normal_laplace_sf(t, sigma, b)
    check(law, reference, abs_tol=1e-14, rel_tol=1e-11)


@pytest.mark.parametrize(("sigma", "b"), [(1.0, 0.05), (1.0, 1.0), (1.0, 7.0), (1.0, 70.0)])
def test_inversion_equals_the_normal_laplace_closed_form(sigma, b):
    noise = (NoiseLaw.laplace(b),)
    closed = NoisyNormal(sigma**2, noise)
    inverted = NoisyNormal(sigma**2, noise, method="inversion")
    ts = np.concatenate([points(closed), points(closed, np.array([1e-20, 1e-40]))])
    np.testing.assert_allclose(inverted.sf(ts), closed.sf(ts), rtol=1e-11, atol=0)
    np.testing.assert_allclose(inverted.logsf(-ts), closed.logsf(-ts), rtol=0, atol=1e-14)


@pytest.mark.parametrize("sigmas", [(0.5,), (1.0, 3.0, 0.2)])
def test_gaussian_noise_gives_the_normal_exactly(sigmas):
    noises = tuple(NoiseLaw.gaussian(s) for s in sigmas)
    total = 2.0 + sum(s * s for s in sigmas)
    ts = np.array([0.0, 0.1, 1.0, 2.5, 4.0, 8.0, 20.0]) * math.sqrt(total)
    want = stats.norm.sf(ts / math.sqrt(total))
    closed = NoisyNormal(2.0, noises)
    np.testing.assert_allclose(closed.sf(ts), want, rtol=1e-14, atol=0)
    # the inversion with nothing but a normal factor: the contour integral of e^{σ²z²/2}
    inverted = NoisyNormal(2.0, noises, method="inversion")
    np.testing.assert_allclose(inverted.sf(ts), want, rtol=1e-11, atol=0)


# -- sums: Laplace noises, the raised cosine, the constrained Fisher-optimal density -------------


@pytest.mark.parametrize(
    ("sigma", "scales"),
    [
        (1.0, (0.3, 1.1)),
        (1.0, (2.0, 5.0, 9.0)),
        # noise-dominated: σ²/V = 100 spread over five centers' noises (the issue's regime)
        (1.0, (2.3, 3.1, 4.0, 5.2, 6.6)),
        (40.0, (1.0, 3.0)),
        (0.0, (1.0, 2.5)),  # no normal part: a sum of two Laplace laws
    ],
)
def test_laplace_sums_against_partial_fractions(sigma, scales):
    law = NoisyNormal(sigma**2, tuple(NoiseLaw.laplace(b) for b in scales))
    if sigma == 0.0:
        # two Laplace laws, no normal: the partial fractions of a sum of Laplace laws; without a
        # normal factor the inversion is slow (power-law decay), so fewer, nearer tails
        b1, b2 = scales

        def reference(t):
            a1, a2 = b1**2 / (b1**2 - b2**2), b2**2 / (b2**2 - b1**2)
            return a1 * 0.5 * math.exp(-t / b1) + a2 * 0.5 * math.exp(-t / b2)
        check(law, reference, abs_tol=1e-13, rel_tol=1e-9, tails=np.array([0.3, 0.01, 1e-4]))
        return

    def reference(t):
        return ref.laplace_sum_sf(t, sigma, scales)
    check(law, reference, abs_tol=1e-13, rel_tol=1e-9)


def test_equal_laplace_scales_against_monte_carlo():
    # equal scales (two centers of one size at one ε) have no partial fractions: 4·10⁶ draws
    law = NoisyNormal(1.0, (NoiseLaw.laplace(2.0), NoiseLaw.laplace(2.0)))
    g = np.random.default_rng(11)
    n = 4_000_000
    draws = g.normal(size=n) + g.laplace(0, 2.0, n) + g.laplace(0, 2.0, n)
    ts = np.array([0.5, 2.0, 5.0, 9.0, 14.0])
    p = law.sf(ts)
    empirical = (draws[:, None] > ts).mean(axis=0)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(empirical - p) <= 4.5 * se), (empirical, p)


@pytest.mark.parametrize(("sigma", "a"), [(1.0, 0.5), (1.0, 3.0), (1.0, 30.0), (0.0, 2.0)])
def test_raised_cosine_against_quadrature(sigma, a):
    law = NoisyNormal(sigma**2, (NoiseLaw.raised_cosine(a),))
    if sigma == 0.0:
        reference = stats.cosine(scale=a / math.pi).sf  # scipy's raised cosine
        tails = np.array([0.5, 0.3, 0.1, 0.05, 0.01, 1e-3, 1e-4, 1e-6])
        ts = law.isf(tails)
        np.testing.assert_allclose(law.sf(ts), reference(ts), rtol=1e-9, atol=1e-17)
        return

    def reference(t):
        return ref.bounded_sf(t, sigma, ref.raised_cosine_pdf(a), a)
    check(law, reference, abs_tol=1e-13, rel_tol=1e-9)


def test_raised_cosines_and_laplace_against_nested_quadrature():
    a1, a2, b = 2.0, 5.0, 1.5
    law = NoisyNormal(1.0, (NoiseLaw.raised_cosine(a1), NoiseLaw.raised_cosine(a2),
                            NoiseLaw.laplace(b)))
    # the raised cosine of a2 with the normal and the other two noises inside: nested quadrature
    pdf2 = ref.raised_cosine_pdf(a2)

    def inner(x: float) -> float:
        return ref.bounded_sf(x, 1.0, ref.raised_cosine_pdf(a1), a1, laplace=(b,))

    def reference(t):
        from scipy import integrate
        return integrate.quad(lambda w: pdf2(w) * inner(t - w), -a2, a2,
                              epsabs=0, epsrel=1e-11)[0]

    ts = points(law, np.array([0.3, 0.05, 1e-3, 1e-5]))
    got = law.sf(ts)
    want = np.array([reference(float(t)) for t in ts])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=0)


def ground_state(rho_over_a2: float, a: float) -> FisherOptimal:
    mech = FisherOptimal(rho_over_a2 * a * a, a)
    assert mech.kind == "ground_state"
    return mech


@pytest.mark.parametrize(("r", "a", "laplace"), [(0.111, 3.0, ()), (0.05, 10.0, ()),
                                                 (0.12, 2.0, (1.5,))])
def test_constrained_fisher_optimal_against_cellwise_quadrature(r, a, laplace):
    mech = ground_state(r, a)
    law = NoisyNormal(1.0, (mech.noise_law, *(NoiseLaw.laplace(b) for b in laplace)))
    nodes = np.linspace(-a, a, 2049)  # the sampling table's grid: ψ² is a polynomial per cell
    tails = np.array([0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-6]) if laplace else TAILS

    def reference(t):
        return ref.table_sf(t, 1.0, nodes, mech.pdf, laplace)

    ts = points(law, tails)
    got = law.sf(ts)
    want = np.array([reference(float(t)) for t in ts])
    # Gauss-Legendre on the whole support against cell-by-cell: the density's kinks at the
    # table's nodes (ψ is linear between them) cost ~1e-7 relative
    np.testing.assert_allclose(got, want, rtol=5e-7, atol=0)
    assert np.max(np.abs(got - want)) <= 1e-7


# -- each mechanism's law is the law its sampler draws from --------------------------------------


@pytest.mark.parametrize(
    ("mech", "tol", "tail_tol"),
    [
        (FisherOptimal(1.0, 1.0), 1e-12, 1e-12),  # raised cosine: the sampler's CDF is exact
        # ground state: the sampler's CDF is linear between the table's 2049 nodes, the law's
        # density is the smooth ψ²; they part by the interpolation error, largest for narrow states
        (FisherOptimal(0.111, 1.0), 3e-7, 2e-7),
        (FisherOptimal(0.05, 1.0), 6e-7, 3e-7),
        (FisherOptimal(0.0101, 1.0), 3e-6, 1.5e-6),
        # harmonic regime: the law is N(0, E w²), the table a ground state 10 sd wide
        (FisherOptimal(0.005, 1.0), 3e-6, 1.5e-6),
    ],
)
def test_fisher_optimal_laws_match_their_sampling_tables(mech, tol, tail_tol):
    law = NoisyNormal(0.0, (mech.noise_law,)) if mech.kind != "harmonic" else None
    sd = math.sqrt(mech.variance)
    w = np.linspace(0.0, min(mech.support[1], 6.0 * sd), 2001)
    table = 1.0 - mech.cdf(w)
    if law is None:  # Gaussian: the law is the normal of the mechanism's variance
        assert mech.noise_law == NoiseLaw.gaussian(sd)
        got = stats.norm.sf(w / sd)
    else:
        got = law.sf(w)
    err = np.abs(got - table)
    assert err.max() <= tol
    assert err[w >= 2 * sd].max() <= tail_tol
    assert mech.noise_law.variance == mech.variance


@pytest.mark.slow  # Kolmogorov-Smirnov on 4 × 2·10⁵ draws: ~4 s
def test_dp_mechanisms_expose_their_laws_with_samplers_scale():
    lap, gau = Laplace(0.5, 10.0), Gaussian(4.0, rho=0.1)
    assert lap.noise_law == NoiseLaw.laplace(20.0) and lap.noise_law.variance == lap.variance
    assert gau.noise_law == NoiseLaw.gaussian(gau.sigma)
    assert gau.noise_law.variance == pytest.approx(gau.variance, rel=1e-15)
    assert FisherOptimal(0.3).noise_law == NoiseLaw.gaussian(math.sqrt(0.3))
    # the sampler draws from the law: a Kolmogorov-Smirnov check on 2·10⁵ draws
    for mech in (lap, gau, FisherOptimal(0.111, 1.0), FisherOptimal(1.0, 1.0)):
        draws = mech.sample(np.random.default_rng(5), 200_000)
        law = NoisyNormal(0.0, (mech.noise_law,))
        assert stats.kstest(draws, law.cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="does not expose its law"):
        noise_law_of(object())


# -- the laws themselves ---------------------------------------------------------------------------


def test_noise_laws_variances_and_characteristic_functions():
    a, b = 2.0, 1.5
    rc = NoiseLaw.raised_cosine(a)
    assert rc.variance == pytest.approx(stats.cosine(scale=a / math.pi).var(), rel=1e-14)
    assert NoiseLaw.laplace(b).variance == stats.laplace(scale=b).var()
    s = np.array([0.0, 0.3, math.pi / a, (math.pi + 1e-5) / a, 2.0, 7.5])
    from scipy import integrate

    def cf(pdf, lo, hi, v):
        return integrate.quad(lambda w: pdf(w) * math.cos(v * w), lo, hi, epsabs=1e-15,
                              limit=400)[0]

    np.testing.assert_allclose(rc.cf(s), [cf(ref.raised_cosine_pdf(a), -a, a, v) for v in s],
                               atol=1e-12)
    lap = stats.laplace(scale=b).pdf
    np.testing.assert_allclose(
        NoiseLaw.laplace(b).cf(s),
        [2 * cf(lap, 0, np.inf, v) if v == 0 else 1 / (1 + (b * v) ** 2) for v in s], atol=1e-12)
    mech = ground_state(0.111, 1.0)
    law = mech.noise_law
    assert law.kind == "pdf" and law.scale == 1.0
    np.testing.assert_allclose(
        law.cf(s), [ref.table_cf(v, np.linspace(-1, 1, 2049), mech.pdf) for v in s], atol=1e-8)
    # scaling: c·w
    assert NoiseLaw.laplace(b).scaled(2.0) == NoiseLaw.laplace(3.0)
    scaled = law.scaled(3.0)
    assert scaled.scale == 3.0 and scaled.variance == pytest.approx(9 * law.variance)
    np.testing.assert_allclose(scaled.cf(s / 3.0), law.cf(s), atol=1e-12)
    np.testing.assert_allclose(law.scaled(2.0).scaled(1.5).cf(s), scaled.cf(s), atol=1e-15)


def test_tails_symmetry_and_p_value_conventions():
    law = NoisyNormal(4.0, (NoiseLaw.laplace(3.0), NoiseLaw.raised_cosine(2.0)))
    t = np.array([-30.0, -4.0, -0.5, 0.0, 0.5, 4.0, 30.0])
    np.testing.assert_allclose(law.sf(t) + law.cdf(t), 1.0, atol=1e-15)
    np.testing.assert_allclose(law.sf(-t), law.cdf(t), rtol=1e-15)
    np.testing.assert_allclose(np.exp(law.logsf(t)), law.sf(t), rtol=1e-13)
    np.testing.assert_allclose(np.exp(law.logcdf(t)), law.cdf(t), rtol=1e-13)
    assert law.sf(0.0) == pytest.approx(0.5, abs=1e-15)
    np.testing.assert_allclose(law.pvalue(t, "less"), law.sf(t))
    np.testing.assert_allclose(law.pvalue(t, "greater"), law.cdf(t))
    np.testing.assert_allclose(law.pvalue(t, "two-sided"),
                               np.minimum(1, 2 * np.minimum(law.sf(t), law.cdf(t))), rtol=1e-14)
    assert law.sf(np.inf) == 0 and law.sf(-np.inf) == 1 and np.isnan(law.sf(np.nan))
    q = np.array([1e-9, 0.001, 0.3, 0.5, 0.9])
    np.testing.assert_allclose(law.sf(law.isf(q)), q, rtol=1e-11)
    assert law.variance == pytest.approx(4 + 18 + NoiseLaw.raised_cosine(2.0).variance)
    # the sf is continuous where the route changes (closed form / inversion)
    single = NoisyNormal(4.0, (NoiseLaw.laplace(3.0),))
    assert single.sf(2.0) == pytest.approx(
        NoisyNormal(4.0, (NoiseLaw.laplace(3.0),), method="inversion").sf(2.0), rel=1e-12)


def test_bounded_law_is_zero_beyond_its_reach():
    law = NoisyNormal(0.0, (NoiseLaw.raised_cosine(1.0), NoiseLaw.raised_cosine(2.0)))
    assert law.sf(3.0) == 0.0 and law.sf(-3.0) == 1.0
    assert 0 < law.sf(2.9) < 1e-6


def test_bad_input():
    with pytest.raises(ValueError, match="`kind` must be one of"):
        NoiseLaw("cauchy", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`b` must be a finite number > 0"):
        NoiseLaw.laplace(-1.0)
    with pytest.raises(ValueError, match="`c` must be a finite number > 0"):
        NoiseLaw.laplace(1.0).scaled(0.0)
    with pytest.raises(ValueError, match="`pdf` must be given"):
        NoiseLaw("pdf", 1.0)
    with pytest.raises(ValueError, match="symmetric"):
        NoiseLaw.from_pdf(lambda w: np.where(np.abs(w) < 1, 0.5 + 0.25 * w, 0.0), 1.0)
    with pytest.raises(ValueError, match="integrate to 1"):
        NoiseLaw.from_pdf(lambda w: np.where(np.abs(w) < 1, 1.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="`normal_variance` must be a finite number >= 0"):
        NoisyNormal(-1.0)
    with pytest.raises(ValueError, match="point mass"):
        NoisyNormal(0.0)
    with pytest.raises(ValueError, match="`noises` must be a sequence of NoiseLaw"):
        NoisyNormal(1.0, (Laplace(1.0, 1.0),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`method` must be one of"):
        NoisyNormal(1.0, method="fft")  # type: ignore[arg-type]
    law = NoisyNormal(1.0, (NoiseLaw.laplace(1.0),))
    with pytest.raises(ValueError, match="`alternative` must be one of"):
        law.pvalue(1.0, "bigger")
    with pytest.raises(ValueError, match="`q` must lie in"):
        law.isf(1.0)
    # two table densities and nothing else: too little smoothing to invert
    pdf = ground_state(0.111, 1.0).noise_law
    with pytest.raises(ValueError, match="too little smoothing"):
        NoisyNormal(0.0, (pdf, pdf.scaled(2.0))).sf(0.5)


# -- the inversion's set-up: the vectorized loops against the plain ones ---------------------------


@dataclass(frozen=True)
class _PlainInversion(_Inversion):
    """The inversion with its set-up as first written: the saddle point by 64 bisections, the
    range grown by one factor 1.25 per evaluation of the bound, the 24 strip half-widths of the
    step one at a time. The reference for the faster set-up (Newton's method, the range and the
    half-widths evaluated in blocks), which must give the same tails."""

    def saddle(self, x):
        lo, hi = self.bracket(x)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            above = self.cumulants(mid, 1) >= x
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid)
        return 0.5 * (lo + hi)

    def _range(self, theta, tol, start):
        s = start.copy()
        done = np.zeros(s.shape, dtype=bool)
        for _ in range(400):
            here = self.bound(theta, s)
            done |= (here * s <= tol) & (self.bound(theta, 2.0 * s) <= 0.25 * here)
            if done.all():
                return s
            s = np.where(done, s, 1.25 * s)
        raise AssertionError("no range")

    def _step(self, theta, x, k0, s_max, tol):
        d_max = 0.9 * np.minimum(theta, self.theta_sup - theta)
        best = np.zeros_like(theta)
        for k in range(24):
            d = d_max * 2.0 ** (-k / 2)
            grow = np.maximum(
                self.cumulants(theta - d, 0) + d * x, self.cumulants(theta + d, 0) - d * x
            ) - k0
            spread = 2.0 * np.arcsinh(s_max / (theta - d))
            h = 2.0 * math.pi * d / (np.maximum(grow, 0.0) + np.log(2.0 * spread / tol))
            best = np.maximum(best, h)
        return best


@pytest.mark.parametrize("noises", [
    # the stratified probabilistic index of three DP centers (shared.effects): U's normal part
    # and three Laplace noises of scale 2·max(n, m)/ε, ε = 0.1 and 1
    pytest.param((4e9, (6980.0, 4760.0, 3260.0), (), ()), id="3 Laplace, noise dominant"),
    pytest.param((4e9, (698.0, 476.0, 326.0), (), ()), id="3 Laplace, normal dominant"),
    pytest.param((0.0, (1.0, 2.5), (), ()), id="2 Laplace, no normal part"),
    pytest.param((1.0, (1.5,), (2.0, 5.0), ()), id="raised cosines and Laplace"),
    pytest.param((0.0, (), (2.0, 3.0), ()), id="raised cosines only (bounded)"),
    pytest.param((1.0, (), (), ((0.12, 2.0),)), id="Fisher-optimal ground state"),
])
def test_the_inversions_set_up_gives_the_tails_of_the_plain_loops(noises):
    """log P(T > x) from x = 0.01 to 12 standard deviations (to near the reach of a bounded law):
    the same to 1e-12 (absolute in log P: relative in P), the saddle points to 1e-12 relative.
    Measured: within 1.5e-14 and 2e-15 (the Newton and bisection roots part in the last bits)."""
    sigma2, laplace, cosine, states = noises
    pdfs = tuple(ground_state(r, a).noise_law for r, a in states)
    fast = _Inversion(sigma2, laplace, cosine, pdfs)
    plain = _PlainInversion(sigma2, laplace, cosine, pdfs)
    sd = math.sqrt(float(fast.cumulants(np.zeros(1), 2)[0]))
    x = sd * np.array([0.01, 0.3, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0])
    if fast.bounded:
        x = x[x < 0.95 * fast.reach]
    np.testing.assert_allclose(fast.saddle(x), plain.saddle(x), rtol=1e-12, atol=0)
    got, want = fast.log_tail(x), plain.log_tail(x)
    assert np.isfinite(want).all()
    assert np.abs(got - want).max() <= 1e-12, (got, want)
