"""Yeo-Johnson transform: agreement with scipy.stats.yeojohnson, inverse round trip, YJ-normal."""

import numpy as np
import pytest
from scipy import stats

from shared.quantiles import YJNormal, inverse_yeojohnson, yeojohnson

RNG = np.random.default_rng(20260701)
X = np.concatenate([
    RNG.normal(0, 3, 400),
    RNG.gamma(2.0, 5.0, 300),
    -RNG.gamma(2.0, 5.0, 300),
    [0.0, 1e-300, -1e-300, 1e-12, -1e-12, 250.0, -250.0],
])
LAMBDAS = [-1.5, -1e-3, 0.0, 1e-17, 0.25, 0.5, 1.0, 1.5, 2.0 - 1e-17, 2.0, 2.5]


@pytest.mark.parametrize("lmbda", LAMBDAS)
def test_matches_scipy(lmbda):
    np.testing.assert_allclose(yeojohnson(X, lmbda), stats.yeojohnson(X, lmbda), rtol=1e-14,
                               atol=0)


@pytest.mark.parametrize("lmbda", [0.0, 1e-9, 0.3, 1.0, 1.7, 2.0 - 1e-9, 2.0])
def test_round_trip(lmbda):
    np.testing.assert_allclose(inverse_yeojohnson(yeojohnson(X, lmbda), lmbda), X, rtol=1e-12,
                               atol=1e-12)
    y = np.linspace(-20, 20, 401)
    np.testing.assert_allclose(yeojohnson(inverse_yeojohnson(y, lmbda), lmbda), y, rtol=1e-12,
                               atol=1e-12)


def test_identity_at_one_and_infinities():
    np.testing.assert_allclose(yeojohnson(X, 1.0), X, rtol=4 * np.finfo(float).eps, atol=0)
    np.testing.assert_array_equal(yeojohnson([-np.inf, np.inf], 0.5), [-np.inf, np.inf])
    np.testing.assert_array_equal(inverse_yeojohnson([-np.inf, np.inf], 0.5), [-np.inf, np.inf])


def test_inverse_beyond_the_bounded_branch_is_infinite():
    # λ = −1: YJ(x) = 1 − 1/(x + 1) < 1 for x >= 0, so y = 1 has no preimage.
    assert inverse_yeojohnson([1.0, 2.0], -1.0).tolist() == [np.inf, np.inf]
    # λ = 3: YJ(x) = −(1 − (1 − x)^−1) > −1 for x < 0.
    assert inverse_yeojohnson([-1.0], 3.0).tolist() == [-np.inf]


def test_yj_normal_quantiles_and_cdf():
    model = YJNormal(lmbda=0.4, loc=1.5, scale=0.7)
    q = np.array([0.001, 0.02, 0.5, 0.98, 0.999])
    expected = inverse_yeojohnson(1.5 + 0.7 * stats.norm.ppf(q), 0.4)
    np.testing.assert_allclose(model.ppf(q), expected, rtol=1e-14)
    np.testing.assert_allclose(model.cdf(model.ppf(q)), q, rtol=1e-12)


@pytest.mark.parametrize("bad", [np.nan, np.inf, "a", None])
def test_bad_lambda(bad):
    with pytest.raises(ValueError, match=r"`lmbda` must be a finite number"):
        yeojohnson([1.0], bad)
    with pytest.raises(ValueError, match=r"`lmbda` must be a finite number"):
        inverse_yeojohnson([1.0], bad)


def test_nan_input_refused():
    with pytest.raises(ValueError, match=r"`x` contains NaN"):
        yeojohnson([1.0, np.nan], 0.5)
    with pytest.raises(ValueError, match=r"`y` contains NaN"):
        inverse_yeojohnson([np.nan], 0.5)


@pytest.mark.parametrize(("field", "value"), [("scale", 0.0), ("scale", -1.0), ("loc", np.inf),
                                              ("lmbda", np.nan)])
def test_yj_normal_refuses_bad_parameters(field, value):
    params = {"lmbda": 0.5, "loc": 0.0, "scale": 1.0, field: value}
    with pytest.raises(ValueError, match=rf"`{field}`"):
        YJNormal(**params)
