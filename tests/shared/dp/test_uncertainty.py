"""The 95 % intervals DP releases carry (``shared.dp.uncertainty``): closed forms against scipy,
the characteristic-function inversion against exact cases and Monte Carlo, and the quantile rank
error's coverage by simulation on evenly spread data (where the docstring says it holds)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from shared.dp.joint_exp import joint_exp_sorted
from shared.dp.private_quantile import private_quantile_sorted
from shared.dp.unbounded import unbounded_quantile
from shared.dp.uncertainty import (
    laplace_bridge_halfwidth,
    laplace_difference_halfwidth,
    laplace_halfwidth,
    laplace_sum_halfwidth,
    rank_halfwidth,
)


@pytest.mark.parametrize("scale", [0.5, 16.0, 1e4])
@pytest.mark.parametrize("level", [0.5, 0.95, 0.999])
def test_laplace_halfwidth_is_scipys_two_sided_quantile(scale: float, level: float) -> None:
    expected = stats.laplace.ppf(0.5 + level / 2.0, scale=scale)
    assert laplace_halfwidth(scale, level) == pytest.approx(expected, rel=1e-12)


def test_difference_solves_its_closed_form_tail() -> None:
    b = 3.0
    t = laplace_difference_halfwidth(b)
    assert (1.0 + t / (2.0 * b)) * math.exp(-t / b) == pytest.approx(0.05, abs=1e-12)


@pytest.mark.parametrize("scale", [0.1, 2.0, 40.0])
def test_sum_inversion_matches_the_closed_forms(scale: float) -> None:
    # One Laplace: b ln 20; two of one scale: their sum has the law of their difference.
    assert laplace_sum_halfwidth([scale]) == pytest.approx(laplace_halfwidth(scale), rel=1e-12)
    assert laplace_sum_halfwidth([scale, scale]) == pytest.approx(
        laplace_difference_halfwidth(scale), rel=1e-6)


@pytest.mark.parametrize("scales", [[2e6, 2e6], [3e5, 7e5, 2e6], [1.0, 1e6], [1e-300, 1e-300]])
def test_sum_inversion_is_scale_invariant_at_any_epsilon(scales: list[float]) -> None:
    # Pooled outlier counts at ε ~ 1e-5 have scales ~ 1e6: the inversion once warned (and a
    # study failed) there. t(c·b) = c·t(b) exactly, so the answer is the unit-scale one, rescaled.
    top = max(scales)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = laplace_sum_halfwidth(scales)
    unit = laplace_sum_halfwidth([b / top for b in scales if b / top > 1e-12])
    assert t == pytest.approx(top * unit, rel=1e-9)
    if len(set(scales)) == 1:  # the closed form of two equal scales, at this scale
        assert t == pytest.approx(laplace_difference_halfwidth(top), rel=1e-6)


def test_sum_inversion_matches_monte_carlo_for_unequal_scales() -> None:
    scales = [1.0, 4.0, 0.5, 10.0]
    t = laplace_sum_halfwidth(scales)
    rng = np.random.default_rng(20261130)
    reps = 1_000_000
    total = sum(rng.laplace(scale=b, size=reps) for b in scales)
    inside = float(np.mean(np.abs(total) <= t))
    # Binomial standard error at 0.95 with 1e6 draws is 2.2e-4: allow 5 of them.
    assert inside == pytest.approx(0.95, abs=1.1e-3)


def _rank_errors(values: np.ndarray, n: int, levels: tuple[float, ...]) -> np.ndarray:
    # Data 0.5, 1.5, ..., n − 0.5: the rank of an output v is v itself, up to ½.
    return np.abs(values - np.asarray(levels) * n)


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_private_quantile_rank_halfwidth_covers_on_even_data(epsilon: float) -> None:
    n, q = 400, 0.5
    data = np.arange(n, dtype=np.float64) + 0.5
    out = private_quantile_sorted(data, q, epsilon, (0.0, float(n)), "swap",
                                  np.random.default_rng(7), size=4000)
    h = rank_halfwidth("private_quantile", [q], epsilon, "swap")
    assert h is not None
    covered = float(np.mean(_rank_errors(out, n, (q,)) <= h))
    # 4000 draws: standard error 0.0035; the rank error is continuous here (uniform within a gap).
    assert covered == pytest.approx(0.95, abs=0.015)


@pytest.mark.slow  # 1500 draws of the joint exponential mechanism: ~2 s
def test_joint_exp_rank_halfwidth_covers_each_level_on_even_data() -> None:
    n, levels, epsilon = 1000, (0.25, 0.5, 0.75), 1.0
    data = np.arange(n, dtype=np.float64) + 0.5
    rng = np.random.default_rng(11)
    out = np.array([joint_exp_sorted(data, levels, epsilon, (0.0, float(n)), "add_remove", rng)
                    for _ in range(1500)])
    h = rank_halfwidth("joint_exp", list(levels), epsilon, "add_remove")
    assert h is not None
    covered = np.mean(_rank_errors(out, n, levels) <= h, axis=0)
    # The half-width is the middle level's (the widest point of the Laplace bridge); the
    # ordering constraint only narrows it. 1500 draws: standard error 0.0056.
    assert covered[1] == pytest.approx(0.95, abs=0.02), covered
    assert np.all(covered >= 0.93), covered


def test_bridge_matches_monte_carlo() -> None:
    # Four Laplace(1) steps conditioned (by rejection) on summing to about 0.
    rng = np.random.default_rng(3)
    steps = rng.laplace(size=(4_000_000, 4))
    walk = np.cumsum(steps[np.abs(steps.sum(axis=1)) < 0.02], axis=1)
    for j in (1, 2, 3):
        t = laplace_bridge_halfwidth(1.0, 4, j)
        # About 25,000 bridges: standard error 0.0014.
        assert float(np.mean(np.abs(walk[:, j - 1]) <= t)) == pytest.approx(0.95, abs=0.007)
    # Two steps: d_1 | d_1 + d_2 = 0 is Laplace(scale/2).
    assert laplace_bridge_halfwidth(2.0, 2, 1) == pytest.approx(laplace_halfwidth(1.0), rel=1e-8)


def test_approx_quantile_has_no_single_scale() -> None:
    assert rank_halfwidth("approx_quantile", [0.5], 1.0, "swap") is None


def test_unbounded_rank_halfwidth_covers_where_the_grid_is_fine() -> None:
    # Values near 1000-3000 on the β = 1.001 grid: steps of 1-3 values, below the 16-rank
    # half-width at ε = 0.5 (at large ε the grid dominates, as the module docstring says).
    n, epsilon = 2000, 0.5
    data = np.arange(n, dtype=np.float64) + 1000.5
    rng = np.random.default_rng(5)
    out = np.array([unbounded_quantile(data, 0.5, epsilon=epsilon, bounds=(0.0, 1e6),
                                       neighbouring="add_remove", rng=rng).values[0]
                    for _ in range(1500)])
    h = rank_halfwidth("unbounded", [0.5], epsilon, "add_remove")
    assert h is not None
    errors = np.abs(np.searchsorted(data, out) - 0.5 * n)
    assert float(np.mean(errors <= h)) == pytest.approx(0.95, abs=0.02)
