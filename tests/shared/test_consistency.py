"""shared.consistency: the one size of an arm and its releases made to add up to it, against
independent references (scipy's constrained minimiser, exact enumeration, closed forms)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize

from shared.consistency import (
    Linear,
    NoisyCounts,
    adjusted,
    combined_total,
    projected,
    shown_total,
    simplex_projection,
)


def _reference_projection(y: np.ndarray, total: float) -> np.ndarray:
    """argmin ||x − y||² s.t. x >= 0, Σx = total, by scipy's trust-region constrained
    minimiser (an interior-point method, nothing shared with the sort of Duchi et al.)."""
    found = optimize.minimize(
        lambda x: float(((x - y) ** 2).sum()), np.full(y.size, total / y.size),
        jac=lambda x: 2 * (x - y), hess=lambda x: 2 * np.eye(y.size), method="trust-constr",
        bounds=optimize.Bounds(0, np.inf),
        constraints=[optimize.LinearConstraint(np.ones((1, y.size)), total, total)],
        options={"gtol": 1e-12, "xtol": 1e-12, "maxiter": 5000})
    return found.x


def test_the_projection_is_the_constrained_least_squares_point() -> None:
    rng = np.random.default_rng(20261207)
    for _ in range(60):
        y = rng.normal(5, 8, size=int(rng.integers(1, 7)))
        total = float(rng.integers(0, 40))
        assert simplex_projection(y, total) == pytest.approx(
            _reference_projection(y, total), abs=1e-4)


def test_the_integers_are_the_nearest_to_the_projection_that_add_up() -> None:
    """Enumeration: among every nonnegative integer vector with the total, the rounded
    projection is one nearest the (continuous) projection in the L∞ sense (each within 1)
    and nearest in L2 among those (largest remainders minimise Σ(x − p)² for a fixed total)."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        size, total = int(rng.integers(1, 5)), int(rng.integers(0, 9))
        y = rng.normal(2, 4, size=size)
        p = simplex_projection(y, total)
        got = projected(y, total)
        assert got.sum() == total and np.all(got >= 0) and np.all(np.abs(got - p) < 1)
        best = min(float(((np.array(x) - p) ** 2).sum())
                   for x in itertools.product(range(total + 1), repeat=size)
                   if sum(x) == total)
        assert float(((got - p) ** 2).sum()) == pytest.approx(best, abs=1e-9)


def test_the_combined_total_is_inverse_variance_weighted() -> None:
    a = NoisyCounts(("a0", "a1"), (90.0, 12.0), 8.0)  # total 102, var 16
    b = NoisyCounts(("b0", "b1", "b2"), (50.0, 40.0, 20.0), 16.0)  # total 110, var 48
    n = combined_total([a, b])
    assert n.value == pytest.approx((102 / 16 + 110 / 48) / (1 / 16 + 1 / 48))
    variances = {"a0": 8.0, "a1": 8.0, "b0": 16.0, "b1": 16.0, "b2": 16.0}
    assert n.variance(variances) == pytest.approx(1 / (1 / 16 + 1 / 48))
    assert shown_total(n) == round(n.value)
    assert shown_total(combined_total([NoisyCounts(("z",), (-3.0,), 2.0)])) == 0
    with pytest.raises(ValueError, match="named twice"):
        combined_total([a, a])
    with pytest.raises(ValueError, match="variance"):
        NoisyCounts(("x",), (1.0,), 0.0)


def test_an_adjusted_count_is_the_hyperplane_projection_with_its_exact_noise() -> None:
    part = NoisyCounts(("n", "m"), (95.0, 3.0), 2.0)
    total = Linear(104.0, {"other": 1.0})
    m = adjusted(part, total, 1)
    assert m.value == pytest.approx(3.0 + (104 - 98) / 2)
    # m = (N + Y_m − Y_n)/2: coefficients 1/2 on N's draw, 1/2 on Y_m, −1/2 on Y_n.
    assert dict(m.coefficients) == pytest.approx({"other": 0.5, "m": 0.5, "n": -0.5})


def test_the_halfwidth_of_one_laplace_draw_is_its_closed_form() -> None:
    # Laplace(b): P(|Z| > t) = e^{−t/b}, so t = b·ln 20 at 95 %; variance 2b².
    b = 3.0
    assert Linear(0.0, {"z": 2.0}).halfwidth({"z": 2 * b * b}) == pytest.approx(
        2 * b * math.log(20), rel=1e-6)
    assert Linear(5.0).halfwidth({}) == 0.0


def test_bad_input_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="total"):
        projected([1.0, 2.0], -1)
    with pytest.raises(ValueError, match="total"):
        projected([1.0, 2.0], 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        projected([1.0, math.nan], 2)


@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=8), st.integers(0, 10_000))
def test_projected_counts_are_nonnegative_and_add_up(y: list[float], total: int) -> None:
    got = projected(y, total)
    assert got.sum() == total and np.all(got >= 0)
