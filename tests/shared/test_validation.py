import math

import numpy as np
import pytest

from shared._validation import (
    as_finite_1d,
    check_alternative,
    check_bounds,
    check_epsilon,
    check_int,
    check_neighbouring,
)
from shared.privacy import PrivacySpent


@pytest.mark.parametrize("eps", [0, -1, math.nan, math.inf, "x", None])
def test_epsilon_refused(eps):
    with pytest.raises(ValueError, match="`epsilon` must be a finite number > 0"):
        check_epsilon(eps)


def test_epsilon_accepted():
    assert check_epsilon(np.float32(0.5)) == 0.5


@pytest.mark.parametrize("bounds", [(1, 1), (2, 1), (0, math.inf), (math.nan, 1), (1,), "ab"])
def test_bounds_refused(bounds):
    with pytest.raises(ValueError, match="`bounds`"):
        check_bounds(bounds)


def test_choices():
    assert check_alternative("less") == "less"
    assert check_neighbouring("swap") == "swap"
    with pytest.raises(ValueError, match="`alternative` must be one of"):
        check_alternative("two_sided")
    with pytest.raises(ValueError, match="`neighbouring` must be one of"):
        check_neighbouring("replace")


def test_int():
    assert check_int(np.int64(3), "K", 2) == 3
    for bad in (1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="`K` must be an integer >= 2"):
            check_int(bad, "K", 2)


def test_finite_1d():
    assert as_finite_1d([1, 2], "x").dtype == np.float64
    with pytest.raises(ValueError, match="NaN or infinite"):
        as_finite_1d([1, np.nan], "x")
    with pytest.raises(ValueError, match="must not be empty"):
        as_finite_1d([], "x")
    with pytest.raises(ValueError, match="one-dimensional"):
        as_finite_1d([[1.0]], "x")
    assert as_finite_1d([], "x", allow_empty=True).size == 0


def test_sequential_composition():
    total = PrivacySpent(0.25) + PrivacySpent(0.5, 1e-6)
    assert total == PrivacySpent(0.75, 1e-6)
