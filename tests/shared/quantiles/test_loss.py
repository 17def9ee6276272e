"""Quantile-loss benchmark: the centre's loss and the coordinator's minimizer."""

import numpy as np
import pytest

from shared.quantiles import (
    QuantileLoss,
    in_process_loss_query,
    quantile_loss,
    quantile_loss_quantiles,
)


def brute_loss(x, u, tau):
    return sum((xi - u) * (tau - (xi < u)) for xi in x)


def test_center_loss_is_the_check_loss():
    x = np.array([-3.0, -1.0, 0.5, 2.0, 2.0, 7.0])
    for u in (-5.0, 0.0, 2.0, 10.0):
        for tau in (0.02, 0.5, 0.98):
            res = quantile_loss(x, u, tau)
            assert res == QuantileLoss(u=u, level=tau, n=6, loss=pytest.approx(brute_loss(x, u,
                                                                                          tau)))


def test_minimizer_is_the_order_statistic():
    # n = 101 values: for q with n·q not an integer the loss has a unique minimizer,
    # x_(ceil(n·q)) (1-based).
    rng = np.random.default_rng(31)
    x = rng.gamma(4.0, 1.0, 101)
    centers = [x[:50], x[50:80], x[80:]]
    levels = [0.02, 0.25, 0.5, 0.75, 0.98]
    res = quantile_loss_quantiles(in_process_loss_query(centers), levels,
                                  bounds=(x.min() - 1.0, x.max() + 1.0))
    assert res.method == "quantile_loss"
    expected = np.sort(x)[np.ceil(101 * np.array(levels)).astype(int) - 1]
    np.testing.assert_allclose(res.quantiles, expected, atol=1e-6)


def test_bad_arguments():
    query = in_process_loss_query([np.arange(20.0)])
    with pytest.raises(ValueError, match=r"`bounds` must be finite with a < b"):
        quantile_loss_quantiles(query, 0.5, bounds=(3.0, 1.0))
    with pytest.raises(ValueError, match=r"`q`"):
        quantile_loss_quantiles(query, 1.0, bounds=(0.0, 20.0))
    with pytest.raises(ValueError, match=r"`level` must be a number in \(0, 1\)"):
        quantile_loss(np.arange(3.0), 1.0, 0.0)
    with pytest.raises(ValueError, match=r"`u` must be a finite number"):
        quantile_loss(np.arange(3.0), np.inf, 0.5)
    with pytest.raises(ValueError, match=r"returned no centers"):
        quantile_loss_quantiles(lambda u, tau: [], 0.5, bounds=(0.0, 1.0))


def test_cap_on_calls():
    query = in_process_loss_query([np.random.default_rng(1).normal(size=200)])
    with pytest.raises(RuntimeError, match=r"max_evaluations=5"):
        quantile_loss_quantiles(query, 0.5, bounds=(-5.0, 5.0), max_evaluations=5)
