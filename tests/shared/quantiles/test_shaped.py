"""Our YJ-shaped estimator: exact at the limits, exact on YJ-normal tables, sane on real ones."""

import numpy as np
import pytest

from shared.binning import BinTable
from shared.federation import federated_table
from shared.quantiles import YJNormal, fit_yj_grouped, yj_shaped_quantiles

LEVELS = [0.001, 0.02, 0.25, 0.5, 0.75, 0.98, 0.999]


def model_table(model, bins=60, lower=-np.inf, upper=np.inf, per_bin=25.0):
    inner = model.ppf(np.arange(1, bins) / bins)
    return BinTable(limits=np.concatenate([[lower], inner, [upper]]),
                    counts=np.full((1, bins), per_bin), k=10)


@pytest.mark.parametrize("lmbda", [0.0, 0.3, 1.0, 1.8])
def test_exact_on_a_yj_normal_table(lmbda):
    """F_j = G(c_j) exactly: the grouped ML fit is G, and every level (also in the open extreme
    bins, here 1/60 wide) comes out as G⁻¹(q)."""
    model = YJNormal(lmbda=lmbda, loc=1.0, scale=0.8)
    t = model_table(model)
    fit = fit_yj_grouped(t)
    assert fit.lmbda == pytest.approx(lmbda, abs=2e-3)
    res = yj_shaped_quantiles(t, LEVELS)
    assert res.method == "yj_shaped"
    np.testing.assert_allclose(res.quantiles, model.ppf(LEVELS), rtol=1e-6, atol=1e-9)


def test_exact_with_the_true_model_given():
    model = YJNormal(lmbda=0.6, loc=0.0, scale=2.0)
    res = yj_shaped_quantiles(model_table(model), LEVELS, fit=model)
    np.testing.assert_allclose(res.quantiles, model.ppf(LEVELS), rtol=1e-12, atol=1e-12)


def test_cumulative_shares_kept_at_every_limit_whatever_the_model():
    rng = np.random.default_rng(41)
    centers = [(rng.gamma(4.0, 1.0, n), None) for n in (492, 368, 276, 208, 156)]
    t = federated_table(centers, k=10, rng=rng)
    shares = np.cumsum(t.counts[0]) / t.counts.sum()
    inner = shares[:-1]
    pick = inner[(inner > 0) & (inner < 1)][::5]
    wrong = YJNormal(lmbda=1.9, loc=-3.0, scale=10.0)  # a bad shape does not move the limits
    for fit in (None, wrong):
        res = yj_shaped_quantiles(t, pick, fit=fit)
        expected = t.limits[1:-1][np.searchsorted(inner, pick)]
        np.testing.assert_allclose(res.quantiles, expected, rtol=1e-12)


def test_uniform_bins_give_linear_interpolation_with_a_flat_model():
    # A YJ-normal with a huge scale is flat over [0, 1]: inside-bin shape ≈ uniform.
    t = BinTable(limits=np.linspace(0.0, 1.0, 21), counts=np.full((1, 20), 10.0), k=10)
    flat = YJNormal(lmbda=1.0, loc=0.5, scale=1e6)
    res = yj_shaped_quantiles(t, [0.013, 0.5, 0.777, 0.99], fit=flat)
    np.testing.assert_allclose(res.quantiles, [0.013, 0.5, 0.777, 0.99], atol=1e-9)


def test_increasing_and_inside_the_table_on_federated_tables():
    rng = np.random.default_rng(42)
    for sizes in ((698, 476, 326), (307, 250, 208, 172, 143, 118, 98, 81, 67, 56)):
        centers = [(rng.gamma(4.0, 1.0, n), None) for n in sizes]
        t = federated_table(centers, k=10, rng=rng)
        q = np.linspace(0.001, 0.999, 999)
        values = yj_shaped_quantiles(t, q).quantiles
        assert np.all(np.diff(values) > 0)
        assert t.limits[0] <= values[0] and values[-1] <= t.limits[-1]


def test_bad_input():
    t = model_table(YJNormal(lmbda=1.0, loc=0.0, scale=1.0))
    with pytest.raises(ValueError, match=r"`fit` must be a YJNormal or None"):
        yj_shaped_quantiles(t, 0.5, fit=(1.0, 0.0, 1.0))
    with pytest.raises(ValueError, match=r"`q`"):
        yj_shaped_quantiles(t, [0.0, 0.5])
    with pytest.raises(ValueError, match=r"at least 2 bins"):
        yj_shaped_quantiles(BinTable(np.array([0.0, 1.0]), np.array([[30.0]]), 10), 0.5)
    with pytest.raises(ValueError, match=r"`table` is empty"):
        yj_shaped_quantiles(BinTable(np.arange(5.0), np.zeros((1, 4)), 10), 0.5)
