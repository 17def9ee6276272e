"""The seed's testing simulation (design: docs/methods.md §3.8): level under H0, power against
pooling.

2000 replications per setting with a fixed seed: the Monte-Carlo standard error of a rejection
rate near 0.05 is 0.0049, so [0.035, 0.065] is about ±3 SE. Power differences are paired (same
data for every method), so their error is much smaller than that of each rate.
"""

import numpy as np
import pytest

from shared.simulate import CENTER_SIZES, simulate_mwu

REPLICATIONS = 2000


def rejection_rates(n_centers: int, delta: float, sigma_beta: float,
                    seed: int) -> dict[str, float]:
    """Each method's rejection rate at 0.05 over REPLICATIONS simulated studies (printed)."""
    sim = simulate_mwu(CENTER_SIZES[n_centers], delta=delta, sigma_alpha=0.1,
                       sigma_beta=sigma_beta, replications=REPLICATIONS,
                       rng=np.random.default_rng(seed))
    rates = sim.rejection_rate(0.05)
    print(f"delta={delta:g}, {n_centers} centers: {rates}")
    return dict(rates)


@pytest.mark.slow
@pytest.mark.parametrize("n_centers", [3, 5, 10])
def test_level_under_h0(n_centers):
    rates = rejection_rates(n_centers, delta=0.0, sigma_beta=0.0, seed=100 + n_centers)
    for method in ("pooled", "sum", "weighted", "table"):
        assert 0.035 <= rates[method] <= 0.065, (method, rates)


@pytest.mark.slow
@pytest.mark.parametrize("n_centers", [3, 5, 10])
def test_power_close_to_pooled(n_centers):
    rates = rejection_rates(n_centers, delta=0.1, sigma_beta=0.05, seed=200 + n_centers)
    assert rates["pooled"] > 0.5  # the setting has real power to compare
    for method in ("weighted", "table"):
        assert abs(rates[method] - rates["pooled"]) <= 0.03, (method, rates)
