import math

import numpy as np
import pytest

from shared.dp.unbounded import unbounded_quantile, unbounded_sorted
from shared.privacy import PrivacySpent
from tests.shared.dp import brute

BETA = 2.0
BOUNDS = (0.0, 30.0)  # releases l + β^k − 1: 0, 1, 3, 7, 15, then 30 (clamped)
RELEASES = [0.0, 1.0, 3.0, 7.0, 15.0, 30.0]


def _cumulative_counts(x, anchor, beta, n_buckets):
    """c_k = #{x < l − 1 + β^k}: the values in buckets ⌊log_β(x − l + 1)⌋ < k (Durfee)."""
    buckets = [
        -1 if v < anchor else math.floor(math.log(v - anchor + 1) / math.log(beta)) for v in x
    ]
    return [sum(1 for bk in buckets if bk < k) for k in range(n_buckets)]


def _stop_probs(x, q, eps):
    counts = _cumulative_counts(x, BOUNDS[0], BETA, 5)
    return brute.above_threshold_stop_probs(counts, q * len(x), 2.0 / eps, 5)


X = [0.5, 2.2, 2.2, 2.6, 5.5, 5.5, 9.0, 20.0]  # ties, empty buckets, one value in the top bucket


@pytest.mark.slow
@pytest.mark.parametrize("q, eps", [(0.5, 1.0), (1.0, 2.0), (0.25, 4.0)])
def test_stopping_bucket_matches_integrated_distribution(q, eps):
    rng = np.random.default_rng(99)
    probs = _stop_probs(X, q, eps)
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    data = np.sort(X)
    draws = 200_000
    values = [
        unbounded_sorted(data, q * data.size, eps, BOUNDS, rng, BETA, False) for _ in range(draws)
    ]
    counts = [sum(1 for v in values if v == r) for r in RELEASES]
    assert sum(counts) == draws
    assert brute.chi_square_pvalue(counts, probs) > 1e-3


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_neighbouring_stop_probabilities_within_e_eps(eps, q, neighbouring):
    if neighbouring == "swap":
        others = [[*X[:-1], 0.1], [8.0, *X[1:]], [*X[:3], 25.0, *X[4:]]]
    else:
        others = [[*X, 0.2], [*X, 29.0], [*X, 2.2], X[1:], X[:-1]]
    p1 = _stop_probs(X, q, eps)
    for other in others:
        p2 = _stop_probs(other, q, eps)
        assert np.max(np.abs(np.log(p1) - np.log(p2))) <= eps + 1e-6


def test_reflection_is_the_walk_on_the_negated_data():
    x = np.sort(np.random.default_rng(0).normal(size=300))
    for seed in range(20):
        down = unbounded_sorted(
            x, 0.9 * 300 + 1, 1.0, (-5.0, 5.0), np.random.default_rng(seed), 1.01, True
        )
        up = unbounded_sorted(
            np.sort(-x), 0.9 * 300 + 1, 1.0, (-5.0, 5.0), np.random.default_rng(seed), 1.01, False
        )
        assert down == pytest.approx(-up, abs=1e-12)


def test_minimum_and_maximum_are_found_with_large_epsilon():
    rng = np.random.default_rng(4)
    x = rng.uniform(2.0, 9.0, size=5000)
    hi = unbounded_quantile(x, 1.0, epsilon=50, bounds=(-50, 50), neighbouring="swap", rng=rng)
    lo = unbounded_quantile(
        x, 1 / x.size, epsilon=50, bounds=(-50, 50), neighbouring="swap", rng=rng, reflect=True
    )
    # The grid step is (β − 1)·(distance to the anchor) ≈ 0.06 here.
    assert hi.values[0] == pytest.approx(x.max(), abs=0.15)
    assert lo.values[0] == pytest.approx(x.min(), abs=0.15)
    assert hi.spent == PrivacySpent(50.0)
    assert lo.method == "unbounded_reflected"


def test_release_is_clamped_to_bounds():
    rng = np.random.default_rng(1)
    for _ in range(200):
        v = unbounded_quantile(
            [1e6], 1.0, epsilon=0.1, bounds=(0, 10), neighbouring="swap", rng=rng, beta=1.5
        ).values[0]
        assert 0 <= v <= 10


@pytest.mark.parametrize("beta", [1.0, 0.5, math.inf, "x"])
def test_bad_beta(beta):
    with pytest.raises(ValueError, match="`beta`"):
        unbounded_quantile(
            [1.0],
            0.5,
            epsilon=1,
            bounds=(0, 2),
            neighbouring="swap",
            rng=np.random.default_rng(0),
            beta=beta,
        )
