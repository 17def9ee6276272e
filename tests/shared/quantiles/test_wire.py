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
    ok = {"variable": "x", "lmbda": 0.5, "epsilon": 1.0, "bounds": (0.0, 10.0)}
    req = YJMomentsRequest(**ok)
    with pytest.raises(pydantic.ValidationError):
        req.lmbda = 1.0  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match=r"extra"):
        YJMomentsRequest(**ok, colour="x")
    with pytest.raises(pydantic.ValidationError, match=r"extra"):
        YJMomentsRequest(**ok, study="s1")  # no caller-chosen label scopes anything
    with pytest.raises(pydantic.ValidationError):
        YJMomentsRequest(**{**ok, "lmbda": float("nan")})
    for missing in ("epsilon", "bounds"):  # un-noised sums are never asked for
        with pytest.raises(pydantic.ValidationError, match=missing):
            YJMomentsRequest(**{k: v for k, v in ok.items() if k != missing})
    with pytest.raises(pydantic.ValidationError, match=r"lower < upper"):
        YJMomentsRequest(**{**ok, "bounds": (5.0, 5.0)})
    with pytest.raises(pydantic.ValidationError):
        YJMomentsRelease(lmbda=0.5, n=-1, sum_log=0.0, sum_yj=0.0, sum_yj_sq=0.0)
    with pytest.raises(pydantic.ValidationError):
        QuantileLossRequest(variable="x", u=1.0, level=1.0)
    with pytest.raises(pydantic.ValidationError):
        QuantileLossRelease(u=1.0, level=0.5, n=3, loss=-1.0)
