import math

import numpy as np
import pytest

from shared.dp.unbounded import (
    geometric_edges,
    one_sided_max_target,
    unbounded_quantile,
    unbounded_sorted,
)
from shared.privacy import PrivacySpent
from tests.helpers import brute

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


def _stop_probs_at(x, threshold, eps, noise, scale=None):
    """Exact P(release = RELEASES[k]) of the walk with count target ``threshold`` and ``noise``
    at scale 2/ε (or ``scale``) on the threshold and on every query."""
    counts = _cumulative_counts(x, BOUNDS[0], BETA, 5)
    return brute.above_threshold_stop_probs(
        counts, threshold, 2.0 / eps if scale is None else scale, 5, noise
    )


def _max_target(n):
    """The one-sided walk's count target for a maximum: the (1 − 1/(20√n))-quantile's n − √n/20
    (jairoadiazr/DPBoxplot, ``pboxplots.py``: ``extreme_quantile = 1/np.sqrt(n)/c``, c = 20)."""
    return n - math.sqrt(n) / 20


X = [0.5, 2.2, 2.2, 2.6, 5.5, 5.5, 9.0, 20.0]  # ties, empty buckets, one value in the top bucket


@pytest.mark.slow
@pytest.mark.parametrize("q, eps", [(0.5, 1.0), (1.0, 2.0), (0.25, 4.0)])
def test_stopping_bucket_matches_integrated_distribution(q, eps):
    # 200,000 draws: a bucket's frequency has SE √(p(1−p)/N) ≤ 1.1·10⁻³ (χ², p > 10⁻³).
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


def test_grid_of_the_brute_force_tests():
    np.testing.assert_array_equal(geometric_edges(*BOUNDS, BETA), RELEASES[:-1])


def test_exponential_reference_against_closed_form():
    # Stop at k = 0 iff c_0 − t + E_0 > E_T, and E_0 − E_T ~ Laplace(s): the reference's first
    # cell must be 1/2·e^(g/s) for g = c_0 − t <= 0 and 1 − 1/2·e^(−g/s) for g > 0.
    s = 1.7
    for c0, t in [(0.0, 3.0), (5.0, 3.0), (3.0, 3.0), (2.5, 2.0)]:
        p = brute.above_threshold_stop_probs([c0, 10.0], t, s, 2, "exponential")
        g = c0 - t
        exact = 0.5 * math.exp(g / s) if g <= 0 else 1 - 0.5 * math.exp(-g / s)
        assert p[0] == pytest.approx(exact, abs=1e-12)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_one_sided_max_target():
    # Step 1 of the module's proof: between add/remove neighbours the target moves by
    # τ = t(n + 1) − t(n) ∈ [0.95, 1), so c_k − t(n) moves within an interval of length 1.
    n = np.arange(0, 2_000_001)
    t = np.array([one_sided_max_target(int(k)) for k in (0, 1, 8, 10**5)])
    np.testing.assert_allclose(t, [0.0, 0.95, 8 - math.sqrt(8) / 20, 10**5 - math.sqrt(10**5) / 20])
    tau = np.diff(n - np.sqrt(n) / 20)
    assert tau.min() == pytest.approx(0.95) and tau.min() >= 0.95 - 1e-12 and tau.max() < 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "target, eps", [("max", 1.0), ("max", 0.3), (0.5, 1.0), (0.25, 4.0)]
)
def test_one_sided_stopping_bucket_matches_integrated_distribution(target, eps):
    """The one-sided walk (exponential noise, mean 2/ε, on the threshold and every query) against
    its exact output distribution: 200,000 draws (a bucket's frequency has SE ≤ 1.1·10⁻³),
    chi-square."""
    rng = np.random.default_rng(2024)
    n = len(X)
    threshold = _max_target(n) if target == "max" else target * n
    probs = _stop_probs_at(X, threshold, eps, "exponential")
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    data = np.sort(X)
    draws = 200_000
    values = [
        unbounded_sorted(data, threshold, eps, BOUNDS, rng, BETA, False, noise="exponential")
        for _ in range(draws)
    ]
    counts = [sum(1 for v in values if v == r) for r in RELEASES]
    assert sum(counts) == draws
    assert brute.chi_square_pvalue(counts, probs) > 1e-3
    # The Laplace walk's distribution differs enough to be told apart by the same draws.
    laplace = _stop_probs_at(X, threshold, eps, "laplace")
    assert brute.chi_square_pvalue(counts, laplace) < 1e-6


# Every place a value can take relative to the grid 0, 1, 3, 7, 15 (bounds (0, 30)): below the
# anchor, inside each bucket, in the top bucket, above b. The walk sees only these positions.
POSITIONS = [-0.5, 0.5, 2.0, 5.0, 10.0, 20.0, 40.0]


def _neighbours(x, relation):
    if relation == "add_remove":
        return [[*x, p] for p in POSITIONS] + [x[:i] + x[i + 1 :] for i in range(len(x))]
    return [[*x[:i], p, *x[i + 1 :]] for i in range(len(x)) for p in POSITIONS if p != x[i]]


def _worst_log_ratio(target, eps, noise, relation, scale=None):
    def threshold(x):
        return _max_target(len(x)) if target == "max" else target * len(x)

    log_p = np.log(_stop_probs_at(X, threshold(X), eps, noise, scale))
    return max(
        float(np.max(np.abs(log_p - np.log(_stop_probs_at(y, threshold(y), eps, noise, scale)))))
        for y in _neighbours(X, relation)
    )


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("target", ["max", 0.25, 0.5, 1.0])
@pytest.mark.parametrize("noise", ["exponential", "laplace"])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_every_neighbour_within_e_eps(eps, target, noise, neighbouring):
    """Both walks, every output, every neighbour of X (each position added, each value removed,
    each value moved to each position): the probabilities differ by at most e^ε. The target n −
    √n/20 of the one-sided walk uses each data set's own n (private under add/remove)."""
    assert _worst_log_ratio(target, eps, noise, neighbouring) <= eps + 1e-6


def test_the_e_eps_check_catches_too_little_noise():
    # The same check on the one-sided walk with half its noise (scale 1/ε) must fail somewhere.
    worst = max(
        _worst_log_ratio(0.5, 0.3, "exponential", relation, scale=1 / 0.3)
        for relation in ("swap", "add_remove")
    )
    assert worst > 1.2 * 0.3


def test_one_sided_walk_stops_soon_past_the_maximum():
    """Why DPBoxplot's default is the one-sided walk: on uniform data the Laplace walk with
    target n overshoots the maximum with a heavy tail, the one-sided walk with n − √n/20 rarely."""
    rng = np.random.default_rng(5)
    n, eps = 100_000, 3 / 16  # DPBoxplot's budget for one walk at ε = 1
    x = np.sort(rng.uniform(-math.sqrt(3), math.sqrt(3), n))
    bounds = (-50.0, 50.0)
    seed = [unbounded_sorted(x, n, eps, bounds, rng, 1.001, False) for _ in range(400)]
    one_sided = [
        unbounded_sorted(x, _max_target(n), eps, bounds, rng, 1.001, False, noise="exponential")
        for _ in range(400)
    ]
    over_seed = np.quantile(np.array(seed) - x.max(), 0.9)
    over_one_sided = np.quantile(np.array(one_sided) - x.max(), 0.9)
    assert over_one_sided < over_seed / 3
    # The lowered target costs little: the release sits above all but a few of the top values.
    assert np.median(np.array(one_sided) >= x[-20]) == 1


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


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_reflection_is_the_walk_on_the_negated_data(noise):
    x = np.sort(np.random.default_rng(0).normal(size=300))
    for seed in range(20):
        down = unbounded_sorted(
            x, 0.9 * 300 + 1, 1.0, (-5.0, 5.0), np.random.default_rng(seed), 1.01, True,
            noise=noise,
        )
        up = unbounded_sorted(
            np.sort(-x), 0.9 * 300 + 1, 1.0, (-5.0, 5.0), np.random.default_rng(seed), 1.01, False,
            noise=noise,
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
    # The one-sided walk at the authors' level 1 − 1/(20√n), whose target is n − √n/20.
    level = 1 - 1 / (20 * math.sqrt(x.size))
    for _ in range(20):
        one = unbounded_quantile(
            x, level, epsilon=50, bounds=(-50, 50), neighbouring="swap", rng=rng,
            noise="exponential",
        )
        assert x[-5] - 0.15 <= one.values[0] <= x.max() + 0.15
    assert one.method == "unbounded_one_sided"


def test_noise_kind_is_validated():
    with pytest.raises(ValueError, match="`noise` must be one of"):
        unbounded_quantile(
            [1.0], 0.5, epsilon=1, bounds=(0, 2), neighbouring="swap",
            rng=np.random.default_rng(0), noise="gaussian",
        )


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
