"""YJ data: the federated λ is the pooled maximum likelihood λ; the cap; noise; the centre half."""

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from shared.fields import DP_MAX_EVALUATIONS
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
from shared.quantiles.wire import YJMomentsRequest
from shared.quantiles.yj_data import (
    DP_TOL,
    YJ_DATA_MAX_NOISE_RATIO,
    yj_data_noise_ratio,
)
from shared.releases import yj_moments_release
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


def test_a_quantile_beyond_the_transforms_reach_is_refused_not_returned():
    # λ̂ ≈ −0.57 on log-normal(0, 2.5) data: YJ(·; λ̂) maps [0, ∞) onto [0, 1.76), and the
    # fitted normal's 0.99-quantile lies beyond it. Formerly returned as inf.
    x = np.random.default_rng(1).lognormal(0.0, 2.5, 2000)
    assert np.isfinite(yj_data_quantiles(in_process_query([x]), [0.5, 0.9]).quantiles).all()
    with pytest.raises(ValueError, match=r"0\.99-quantile at inf.*no finite estimate"):
        yj_data_quantiles(in_process_query([x]), [0.5, 0.99])


def _service_query(centers, epsilon, bounds, rng):
    """The moment query as the services run it: each center clips to the bounds and noises the
    sums at ε / DP_MAX_EVALUATIONS with the add/remove sensitivity at the λ asked."""
    per_call = epsilon / DP_MAX_EVALUATIONS

    def query(lmbda):
        request = YJMomentsRequest(variable="v", group=None, lmbda=lmbda, epsilon=per_call,
                                   bounds=bounds)
        return [yj_moments_release(x, request, "add_remove", rng).to_result() for x in centers]

    return query


@pytest.mark.slow  # 40 noisy fits of up to 24 evaluations each: about 2 s
def test_the_dp_fit_as_the_services_run_it_stays_in_its_bracket_and_finite():
    # Gamma(2, 3) over three centers of the seed's sizes (N = 1500), bounds [0, 30], at the
    # smallest ε the coordinator offers it with (ε = 30). The unbounded search followed the
    # noise out of the bracket: at ε = 10, 16 of 30 fits ended in scipy's BracketError.
    # Bounded, with one S_log, every fit ends inside (−2, 2) with finite quantiles inside the
    # bounds, near the truth (quartiles 2.9, 5.0, 8.1; SD 4.2).
    rng = np.random.default_rng(0)
    bounds, epsilon = (0.0, 30.0), 30.0
    assert yj_data_noise_ratio(epsilon, bounds, 1500, DP_MAX_EVALUATIONS) < (
        YJ_DATA_MAX_NOISE_RATIO)
    errors = []
    for _ in range(40):
        centers = [rng.gamma(2.0, 3.0, size=s) for s in (698, 476, 326)]
        result = yj_data_quantiles(_service_query(centers, epsilon, bounds, rng),
                                   [0.25, 0.5, 0.75], max_evaluations=DP_MAX_EVALUATIONS,
                                   tol=DP_TOL, bounded=True)
        assert -2.0 <= result.fit.lmbda <= 2.0
        assert np.isfinite(result.quantiles).all()
        assert np.all((bounds[0] <= result.quantiles) & (result.quantiles <= bounds[1]))
        errors.append(np.abs(result.quantiles
                             - np.quantile(np.concatenate(centers), [0.25, 0.5, 0.75])))
    assert np.median(np.array(errors), axis=0).max() < 1.0


def test_the_noise_ratio_decides_from_public_numbers_only():
    # At λ = 1 on [0, 30]: Δ = log 31 + 30 + 900; noise SD of S_2/N is √2·Δ·24/(ε·N), over the
    # widest variance 30²/4.
    delta = math.log(31.0) + 30.0 + 900.0
    expected = math.sqrt(2.0) * delta * 24.0 / (1.0 * 1500) / 225.0
    assert yj_data_noise_ratio(1.0, (0.0, 30.0), 1500, 24) == pytest.approx(expected, rel=1e-12)
    assert yj_data_noise_ratio(1.0, (0.0, 30.0), 1500, 24) > YJ_DATA_MAX_NOISE_RATIO
    assert yj_data_noise_ratio(30.0, (0.0, 30.0), 1500, 24) < YJ_DATA_MAX_NOISE_RATIO
    assert yj_data_noise_ratio(10.0, (0.0, 30.0), 1500, 24) > YJ_DATA_MAX_NOISE_RATIO
    assert yj_data_noise_ratio(1.0, (0.0, 30.0), 0, 24) == math.inf
