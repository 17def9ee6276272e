"""Table estimators: exact answers on tables built so that the answer is known; bad input."""

import numpy as np
import pytest
from scipy import stats

from shared.binning import BinTable, bin_table
from shared.federation import federated_table
from shared.quantiles import (
    YJNormal,
    extrapolation_quantiles,
    fit_yj_table,
    interpolation_quantiles,
    yj_table_quantiles,
)

LEVELS = [0.005, 0.02, 0.25, 0.5, 0.731, 0.98, 0.995]


def table(limits, counts, k=10):
    return BinTable(limits=np.asarray(limits, float), counts=np.atleast_2d(np.asarray(counts,
                                                                                      float)), k=k)


def uniform_table(bins=100, per_bin=15.0):
    """U(0, 1) data seen through equal-width bins with equal counts: F(c_j) = c_j exactly."""
    return table(np.linspace(0.0, 1.0, bins + 1), np.full(bins, per_bin))


def model_table(model, bins=200, lower=-np.inf, upper=np.inf):
    """A table whose limits are a YJ-normal's quantiles at j/B: F_j = G(c_j) exactly."""
    inner = model.ppf(np.arange(1, bins) / bins)
    return table(np.concatenate([[lower], inner, [upper]]), np.full(bins, 12.0))


def test_interpolation_exact_on_uniform():
    res = interpolation_quantiles(uniform_table(), LEVELS)
    assert res.method == "interpolation"
    assert res.levels == tuple(LEVELS)
    np.testing.assert_allclose(res.quantiles, LEVELS, rtol=1e-13, atol=1e-15)


def test_extrapolation_exact_on_uniform_including_the_extreme_bins():
    # 0.005 and 0.995 lie in the first and last bins: the extended segments are exact for U(0, 1).
    res = extrapolation_quantiles(uniform_table(), LEVELS)
    np.testing.assert_allclose(res.quantiles, LEVELS, rtol=1e-12, atol=1e-14)


def test_interpolation_uses_the_buffers_and_extrapolation_does_not():
    # Bins (0, 1], (1, 2], (2, 10] with 10, 10, 10 records: buffers 0 and 10.
    t = table([0.0, 1.0, 2.0, 10.0], [10, 10, 10])
    np.testing.assert_allclose(interpolation_quantiles(t, [1 / 6, 0.5, 5 / 6]).quantiles,
                               [0.5, 1.5, 6.0])
    # Extrapolation through (1, 1/3), (2, 2/3) only: slope 3 records-share per unit.
    np.testing.assert_allclose(extrapolation_quantiles(t, [1 / 6, 0.5, 5 / 6]).quantiles,
                               [0.5, 1.5, 2.5])


def test_empty_bins_keep_the_left_end_of_a_flat_stretch():
    # (0, 1] 10, (1, 2] 0, (2, 3] 10, (3, 4] 10: F = 0, 1/3, 1/3, 2/3, 1.
    t = table([0.0, 1.0, 2.0, 3.0, 4.0], [10, 0, 10, 10])
    np.testing.assert_allclose(interpolation_quantiles(t, [1 / 3, 0.5]).quantiles, [1.0, 2.5])
    np.testing.assert_allclose(extrapolation_quantiles(t, [1 / 3, 0.5, 2 / 3]).quantiles,
                               [1.0, 2.0, 3.0])


@pytest.mark.parametrize("lmbda", [0.0, 0.5, 1.0, 1.6])
def test_yj_table_exact_on_a_yj_normal_table(lmbda):
    model = YJNormal(lmbda=lmbda, loc=2.0, scale=1.5)
    fit = fit_yj_table(model_table(model))
    assert fit.lmbda == pytest.approx(lmbda, abs=1e-6)
    assert fit.loc == pytest.approx(2.0, rel=1e-6)
    assert fit.scale == pytest.approx(1.5, rel=1e-6)
    res = yj_table_quantiles(model_table(model), LEVELS)
    assert res.method == "yj_table"
    np.testing.assert_allclose(res.quantiles, model.ppf(LEVELS), rtol=1e-6)


def test_yj_table_normal_data_many_bins():
    """Normal data through a real K-anonymous table: λ near 1 and quantiles near the truth."""
    rng = np.random.default_rng(7)
    x = rng.normal(10.0, 2.0, 20000)
    res = yj_table_quantiles(bin_table(x, k=10, rng=rng), [0.1, 0.5, 0.9])
    np.testing.assert_allclose(res.quantiles, stats.norm.ppf([0.1, 0.5, 0.9], 10.0, 2.0),
                               atol=0.06)


def test_on_a_federated_table_estimates_increase_and_stay_in_range():
    rng = np.random.default_rng(3)
    centers = [(rng.gamma(4.0, 1.0, n), None) for n in (698, 476, 326)]
    t = federated_table(centers, k=10, rng=rng)
    q = np.linspace(0.01, 0.99, 99)
    for estimator in (yj_table_quantiles, interpolation_quantiles, extrapolation_quantiles):
        values = estimator(t, q).quantiles
        assert np.all(np.diff(values) > 0), estimator.__name__
    values = interpolation_quantiles(t, q).quantiles
    assert t.limits[0] <= values[0] and values[-1] <= t.limits[-1]


ESTIMATORS = [yj_table_quantiles, interpolation_quantiles, extrapolation_quantiles]


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 1.5, [0.2, 1.0], [], np.nan, [0.5, 0.2], "a"])
def test_levels_outside_the_open_unit_interval(estimator, q):
    with pytest.raises(ValueError, match=r"`q`"):
        estimator(uniform_table(), q)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_bad_tables(estimator):
    with pytest.raises(ValueError, match=r"`table` is empty"):
        estimator(table([0, 1, 2, 3], [0, 0, 0]), 0.5)
    with pytest.raises(ValueError, match=r"at least 2 bins, got 1"):
        estimator(table([0, 1], [20]), 0.5)
    with pytest.raises(ValueError, match=r"exactly one group"):
        estimator(BinTable(np.arange(4.0), np.full((2, 3), 10.0), 10), 0.5)
    with pytest.raises(ValueError, match=r"must be a shared\.binning\.BinTable"):
        estimator({"limits": [0, 1, 2]}, 0.5)
    with pytest.raises(ValueError, match=r"counts must be finite and >= 0"):
        estimator(table([0, 1, 2, 3], [10, -1, 10]), 0.5)
    with pytest.raises(ValueError, match=r"strictly increasing"):
        estimator(table([0, 2, 1, 3], [10, 10, 10]), 0.5)


def test_interpolation_needs_finite_buffers():
    t = table([-np.inf, 1, 2, np.inf], [10, 10, 10])
    with pytest.raises(ValueError, match=r"finite extreme limits"):
        interpolation_quantiles(t, 0.5)
    # The other two never use the extreme limits.
    assert extrapolation_quantiles(t, 0.5).quantiles[0] == pytest.approx(1.5)


def test_too_few_interior_points():
    t = table([0, 1, 2, 3], [10, 10, 10])
    with pytest.raises(ValueError, match=r"at least 3 interior limits"):
        yj_table_quantiles(t, 0.5)
    with pytest.raises(ValueError, match=r"at least 2 interior limits"):
        extrapolation_quantiles(table([0, 1, 2], [10, 10]), 0.5)
