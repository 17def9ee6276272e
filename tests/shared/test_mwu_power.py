"""Power of the sum test under DP noise (``shared.mwu_power``): the noise-free normal
approximation, the level at θ = ½, the headline case (ε = 0.1, n = m = 50: power ≈ α), and a
simulation of the services' releases (slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from shared.mechanisms import Laplace
from shared.mwu import mann_whitney, sum_test
from shared.mwu_power import normal_power, sum_test_power, sum_test_power_table


def test_at_theta_one_half_the_power_is_the_level() -> None:
    for eps in (None, 1.0, 0.1):
        for alt in ("two-sided", "less", "greater"):
            got = sum_test_power([(50, 50), (20, 30)], 0.5, epsilon=eps, alpha=0.05,
                                 alternative=alt)
            assert got == pytest.approx(0.05, rel=1e-9)


def test_without_noise_it_is_the_normal_approximation() -> None:
    """Noether's (1987) formula with the Newcombe variance, written out independently."""
    for sizes, theta in (([(50, 50)], 0.6), ([(100, 80), (30, 40)], 0.58), ([(20, 20)], 0.75)):
        n = np.array([s[0] for s in sizes], float)
        m = np.array([s[1] for s in sizes], float)
        z = stats.norm.isf(0.025)
        s0 = math.sqrt(np.sum(n * m * (n + m + 1) / 3))
        half = (n + m) / 2 - 1
        q = (1 - theta) / (2 - theta) + theta / (1 + theta)
        s1 = math.sqrt(np.sum((2 * n * m) ** 2 * theta * (1 - theta) / (n * m) * (1 + half * q)))
        mu = np.sum(n * m) * (2 * theta - 1)
        want = stats.norm.sf((z * s0 - mu) / s1) + stats.norm.cdf((-z * s0 - mu) / s1)
        assert sum_test_power(sizes, theta) == pytest.approx(want, rel=1e-10)
        assert normal_power(sizes, theta) == pytest.approx(want, rel=1e-10)


def test_at_epsilon_0_1_and_50_per_arm_the_power_is_about_alpha() -> None:
    """The analyst must learn this before spending: Laplace(2·50/0.1) noise has SD 1414 against
    U's null SD 408, so even θ = 0.7 is detected 8 % of the time, and no θ reaches 80 %."""
    table = sum_test_power_table([(50, 50)], epsilon=0.1)
    assert table.power[0] < 0.06 and table.power[1] < 0.08
    assert table.theta_at_target is None
    free = sum_test_power_table([(50, 50)])
    assert free.power[0] > 0.4 and free.theta_at_target == pytest.approx(0.6595, abs=1e-3)
    # more ε, more power; more centers, more power
    assert (sum_test_power([(50, 50)], 0.65, epsilon=0.1)
            < sum_test_power([(50, 50)], 0.65, epsilon=1.0)
            < sum_test_power([(50, 50)], 0.65))
    three = sum_test_power_table([(349, 349), (238, 238), (163, 163)], epsilon=0.1)
    assert three.theta_at_target is not None and 0.55 < three.theta_at_target < 0.65


def test_bad_arguments_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="`sizes`"):
        sum_test_power([], 0.6)
    with pytest.raises(ValueError, match="`theta`"):
        sum_test_power([(10, 10)], 1.5)
    with pytest.raises(ValueError, match="`epsilon`"):
        sum_test_power([(10, 10)], 0.6, epsilon=0.0)


@pytest.mark.slow
@pytest.mark.parametrize(("epsilon", "theta"), [(1.0, 0.65), (0.3, 0.7), (None, 0.6)])
def test_the_power_matches_a_simulation_of_the_releases(epsilon: float | None,
                                                        theta: float) -> None:
    """Two centers (60, 60) and (40, 70), normal shift data with θ = Φ(δ/√2), each center's
    release as the services make it (U + Laplace(2·max(n, m)/ε)), the sum test at α = .05.
    2000 replications: SE <= 0.011; the formula must agree within 0.035 (3 SE plus the normal
    approximation of U under the alternative)."""
    sizes = [(60, 60), (40, 70)]
    rng = np.random.default_rng(20261202)
    delta = math.sqrt(2) * stats.norm.ppf(theta)
    reps, hits = 2000, 0
    for _ in range(reps):
        parts = [mann_whitney(rng.normal(0, 1, n), rng.normal(delta, 1, m),
                              noise=Laplace(epsilon, 2.0 * max(n, m)) if epsilon else None,
                              rng=rng) for n, m in sizes]
        hits += sum_test(parts).pvalue <= 0.05
    predicted = sum_test_power(sizes, theta, epsilon=epsilon)
    print(f"power ε={epsilon} θ={theta}: simulated {hits / reps:.4f}, predicted {predicted:.4f}")
    assert abs(hits / reps - predicted) <= 0.035
