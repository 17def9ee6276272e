"""Wire models of the YJ data and quantile-loss exchanges."""

import numpy as np
import pydantic
import pytest

from shared.quantiles import quantile_loss, yj_moments
from shared.quantiles.wire import (
    QuantileLossRelease,
    QuantileLossRequest,
    YJMomentsRelease,
    YJMomentsRequest,
)


def test_moments_round_trip_through_json():
    m = yj_moments(np.random.default_rng(1).gamma(4.0, 1.0, 50), 0.37)
    wire = YJMomentsRelease.from_result(m)
    back = YJMomentsRelease.model_validate_json(wire.model_dump_json())
    assert back.to_result() == m


def test_loss_round_trip_through_json():
    loss = quantile_loss(np.arange(30.0), 12.5, 0.25)
    wire = QuantileLossRelease.from_result(loss)
    assert QuantileLossRelease.model_validate_json(wire.model_dump_json()).to_result() == loss


def test_frozen_and_strict():
    req = YJMomentsRequest(variable="x", study="s1", lmbda=0.5)
    with pytest.raises(pydantic.ValidationError):
        req.lmbda = 1.0  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match=r"extra"):
        YJMomentsRequest(variable="x", study="s1", lmbda=0.5, colour="x")
    with pytest.raises(pydantic.ValidationError):
        YJMomentsRequest(variable="x", study="s1", lmbda=float("nan"))
    with pytest.raises(pydantic.ValidationError, match=r"public bounds"):
        YJMomentsRequest(variable="x", study="s1", lmbda=0.5, epsilon=1.0)
    with pytest.raises(pydantic.ValidationError):
        YJMomentsRelease(lmbda=0.5, n=-1, sum_log=0.0, sum_yj=0.0, sum_yj_sq=0.0)
    with pytest.raises(pydantic.ValidationError):
        QuantileLossRequest(variable="x", u=1.0, level=1.0)
    with pytest.raises(pydantic.ValidationError):
        QuantileLossRelease(u=1.0, level=0.5, n=3, loss=-1.0)
