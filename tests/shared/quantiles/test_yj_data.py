"""YJ data: the federated λ is the pooled maximum likelihood λ; the cap; noise; the centre half."""

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from shared.mechanisms import Laplace
from shared.quantiles import (
    EvaluationCapError,
    YJMoments,
    fit_yj_data,
    in_process_query,
    profile_loglik,
    yeojohnson,
    yj_data_quantiles,
    yj_moments,
)
from shared.simulate import CENTER_SIZES


def split(x, sizes):
    return np.split(x, np.cumsum(sizes)[:-1])


def data_sets():
    rng = np.random.default_rng(20260702)
    yield "gamma4", rng.gamma(4.0, 1.0, 1500)
    yield "gamma10-scaled", rng.gamma(10.0, 3.0, 1500)
    yield "normal-negative", rng.normal(-1.0, 2.0, 1500)
    yield "lognormal", rng.lognormal(0.5, 0.8, 1500)
    yield "left-skewed", -rng.gamma(2.0, 2.0, 1500) + 3.0


@pytest.mark.parametrize(("name", "x"), list(data_sets()))
@pytest.mark.parametrize("n_centers", [3, 5, 10])
def test_federated_lambda_is_the_pooled_ml_lambda(name, x, n_centers):
    centers = split(x, CENTER_SIZES[n_centers])
    fit = fit_yj_data(in_process_query(centers), bracket=(-2.0, 2.0))
    expected = stats.yeojohnson_normmax(x, brack=(-2.0, 2.0))
    assert fit.lmbda == pytest.approx(expected, abs=1e-6), name
    y = yeojohnson(x, fit.lmbda)
    assert fit.loc == pytest.approx(y.mean(), rel=1e-9, abs=1e-12)
    assert fit.scale == pytest.approx(y.std(), rel=1e-9)


def test_other_bracket_matches_too():
    x = np.random.default_rng(5).gamma(2.0, 2.0, 800)
    fit = fit_yj_data(in_process_query(split(x, [400, 250, 150])), bracket=(0.0, 1.0))
    assert fit.lmbda == pytest.approx(stats.yeojohnson_normmax(x, brack=(0.0, 1.0)), abs=1e-6)


def test_profile_loglik_is_scipys():
    x = np.random.default_rng(6).gamma(3.0, 1.0, 500) - 1.0
    for lmbda in (-1.0, 0.0, 0.4, 1.0, 2.0):
        m = yj_moments(x, lmbda)
        ours = profile_loglik(m.n, m.sum_log, m.sum_yj, m.sum_yj_sq, lmbda)
        assert ours == pytest.approx(float(stats.yeojohnson_llf(lmbda, x)), rel=1e-10)


def test_center_half_releases_the_four_sums():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    m = yj_moments(x, 0.3)
    y = stats.yeojohnson(x, 0.3)
    assert m.n == 5 and m.lmbda == 0.3
    assert m.sum_log == pytest.approx(np.sum(np.sign(x) * np.log(np.abs(x) + 1)), rel=1e-15)
    assert m.sum_yj == pytest.approx(y.sum(), rel=1e-14)
    assert m.sum_yj_sq == pytest.approx((y**2).sum(), rel=1e-14)


def test_quantiles_from_the_fit():
    x = np.random.default_rng(8).gamma(4.0, 1.0, 1500)
    res = yj_data_quantiles(in_process_query(split(x, [698, 476, 326])), [0.02, 0.5, 0.98])
    assert res.method == "yj_data"
    fit = res.fit
    expected = stats.yeojohnson(np.array([0.0]), fit.lmbda)  # sanity: transform defined
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(res.quantiles, fit.ppf([0.02, 0.5, 0.98]), rtol=1e-15)
    # The fitted model is close to the data: sample quantiles within a few percent.
    np.testing.assert_allclose(res.quantiles, np.quantile(x, [0.02, 0.5, 0.98]), rtol=0.06)


def test_each_lambda_asked_once_and_counted():
    x = np.random.default_rng(9).gamma(4.0, 1.0, 1500)
    asked = []
    inner = in_process_query(split(x, [698, 476, 326]))

    def query(lmbda):
        asked.append(lmbda)
        return inner(lmbda)

    fit = fit_yj_data(query)
    assert len(asked) == len(set(asked)) == fit.evaluations
    assert fit.evaluations <= 40


def test_cap_on_lambda_evaluations():
    x = np.random.default_rng(10).gamma(4.0, 1.0, 600)
    asked = []
    inner = in_process_query([x])

    def query(lmbda):
        asked.append(lmbda)
        return inner(lmbda)

    with pytest.raises(EvaluationCapError, match=r"more than max_evaluations=5 λ evaluations"):
        fit_yj_data(query, max_evaluations=5)
    assert len(asked) == 5  # the sixth λ was never asked


def test_noise_from_a_mechanism():
    x = np.random.default_rng(11).gamma(4.0, 1.0, 1500)
    exact = yj_moments(x, 0.5)
    noisy = yj_moments(x, 0.5, mechanism=Laplace(epsilon=1.0, sensitivity=1.0),
                       rng=np.random.default_rng(1))
    assert noisy.n == exact.n
    diffs = np.array([noisy.sum_log - exact.sum_log, noisy.sum_yj - exact.sum_yj,
                      noisy.sum_yj_sq - exact.sum_yj_sq])
    assert np.all(diffs != 0) and np.all(np.abs(diffs) < 30)
    # Small noise on the sums of 1500 values barely moves λ (with a tolerance above the noise).
    clean = fit_yj_data(in_process_query([x]))
    fit = fit_yj_data(in_process_query([x], mechanism=Laplace(epsilon=1.0, sensitivity=1e-3),
                                       rng=np.random.default_rng(2)), tol=3e-4)
    assert fit.lmbda == pytest.approx(clean.lmbda, abs=3e-3)
    assert fit.evaluations <= 40


def test_noise_needs_a_generator_and_a_fitting_dimension():
    x = np.ones(20)
    with pytest.raises(TypeError, match=r"`rng` must be a numpy\.random\.Generator"):
        yj_moments(x, 0.5, mechanism=Laplace(epsilon=1.0, sensitivity=1.0))

    class TwoDimensional:
        dim = 2
        variance = 1.0
        guarantee = None

        def sample(self, rng, size):
            return np.zeros((*np.atleast_1d(size), 2))

    with pytest.raises(ValueError, match=r"1- or 3-dimensional"):
        yj_moments(x, 0.5, mechanism=TwoDimensional(), rng=np.random.default_rng(0))


def test_bad_answers_and_arguments():
    x = np.random.default_rng(12).gamma(4.0, 1.0, 100)
    good = in_process_query([x])
    with pytest.raises(ValueError, match=r"answered for λ=0\.25"):
        fit_yj_data(lambda lmbda: [replace(good(lmbda)[0], lmbda=0.25)])
    with pytest.raises(ValueError, match=r"returned no centers"):
        fit_yj_data(lambda lmbda: [])
    with pytest.raises(ValueError, match=r"must return YJMoments"):
        fit_yj_data(lambda lmbda: [(1, 2, 3)])
    with pytest.raises(ValueError, match=r"at least 2 values"):
        fit_yj_data(in_process_query([[1.0]]))
    with pytest.raises(ValueError, match=r"`bracket` must be two distinct finite numbers"):
        fit_yj_data(good, bracket=(1.0, 1.0))
    with pytest.raises(ValueError, match=r"`bracket` must be a pair"):
        fit_yj_data(good, bracket=(1.0,))
    with pytest.raises(ValueError, match=r"`max_evaluations` must be an integer >= 3"):
        fit_yj_data(good, max_evaluations=2)
    with pytest.raises(ValueError, match=r"`tol` must be a number in \(0, 1\)"):
        fit_yj_data(good, tol=0.0)
    with pytest.raises(ValueError, match=r"`q`"):
        yj_data_quantiles(good, [0.5, 1.0])
    with pytest.raises(ValueError, match=r"`x` must not be empty"):
        yj_moments([], 0.5)
    with pytest.raises(ValueError, match=r"`x` contains NaN"):
        yj_moments([1.0, math.nan], 0.5)
    with pytest.raises(ValueError, match=r"`lmbda` must be a finite number"):
        yj_moments([1.0, 2.0], math.inf)


def test_constant_data_has_no_finite_likelihood():
    # σ̂² = 0 at every λ: ℓ = −inf everywhere, as scipy.
    m = yj_moments(np.full(30, 2.0), 0.5)
    assert profile_loglik(m.n, m.sum_log, m.sum_yj, m.sum_yj_sq, 0.5) == -math.inf
    assert isinstance(m, YJMoments)


def test_few_evaluations_when_lambda_is_near_zero():
    """Data that are exactly YJ-normal with λ = 0 (x = e^z − 1): Brent's relative tolerance
    would ask for ~1e-11 in λ; run on λ + 3 it stops at ~5e-8 and keeps well under the cap."""
    rng = np.random.default_rng(13)
    counts = []
    for _ in range(30):
        x = np.expm1(rng.normal(1.0, 0.4, 1500))
        fit = fit_yj_data(in_process_query(split(x, [698, 476, 326])))
        assert fit.lmbda == pytest.approx(stats.yeojohnson_normmax(x, brack=(-2.0, 2.0)),
                                          abs=1e-6)
        counts.append(fit.evaluations)
    assert max(counts) <= 30, counts
