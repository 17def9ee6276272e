import math

import numpy as np
import pytest

from shared.dp.private_quantile import (
    private_quantile,
    private_quantile_log_weights,
    private_quantile_sorted,
)
from shared.privacy import PrivacySpent
from tests.helpers import brute

# Ties (0.3 three times) and a point on the upper bound give zero-width intervals.
TIED = [0.1, 0.3, 0.3, 0.3, 0.7, 1.0]


def _pq_as_joint_utility_delta(q, neighbouring):
    # Smith's utility −|i − qn| is half of the two-piece JointExp utility with m = 1, so the
    # brute-force helper (JointExp form) reproduces it with Δ doubled.
    return 2.0 * (1.0 if neighbouring == "swap" else max(q, 1 - q))


@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.8, 1.0])
def test_log_weights_match_brute_force(q, neighbouring):
    eps = 7.0
    ref = brute.normalise(
        brute.exp_mech_config_logweights(
            TIED, 0.0, 1.0, [q], eps, _pq_as_joint_utility_delta(q, neighbouring)
        )
    )
    log_w = private_quantile_log_weights(
        np.sort(TIED), q, epsilon=eps, bounds=(0.0, 1.0), neighbouring=neighbouring
    )
    log_p = log_w - np.logaddexp.reduce(log_w)
    for (i,), lp in ref.items():
        if lp == -math.inf:
            assert log_p[i] == -math.inf
        else:
            assert log_p[i] == pytest.approx(lp, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    "x, q, eps, neighbouring",
    [
        (TIED, 0.5, 2.0, "swap"),
        (TIED, 0.25, 1.0, "add_remove"),
        ([0.5] * 4 + [0.9], 0.75, 4.0, "swap"),
    ],
)
def test_sampler_matches_brute_force_distribution(x, q, eps, neighbouring):
    """2·10^5 end-to-end draws, mapped to their interval, against the enumerated distribution
    (an interval's frequency has SE √(p(1−p)/N) ≤ 1.1·10⁻³)."""
    rng = np.random.default_rng(20240601)
    ref = brute.normalise(
        brute.exp_mech_config_logweights(
            x, 0.0, 1.0, [q], eps, _pq_as_joint_utility_delta(q, neighbouring)
        )
    )
    data = np.sort(x)
    draws = 200_000
    # The public function is private_quantile_sorted with size=1 after validation and sorting.
    values = private_quantile_sorted(data, q, eps, (0.0, 1.0), neighbouring, rng, size=draws)
    counts = np.bincount(np.searchsorted(data, values, side="right"), minlength=len(x) + 1)
    expected = np.exp([ref[(i,)] for i in range(len(x) + 1)])
    assert counts[expected == 0].sum() == 0
    assert brute.chi_square_pvalue(counts, expected) > 1e-3


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("q", [0.25, 0.5, 0.75, 0.9])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_neighbouring_densities_within_e_eps(eps, q, neighbouring):
    base = [0.1, 0.3, 0.3, 0.55, 0.7]
    if neighbouring == "swap":
        pairs = [(base, [0.1, 0.3, 0.9, 0.55, 0.7]), (base, [0.0, 0.3, 0.3, 0.55, 0.7])]
    else:
        pairs = [(base, [*base, 0.95]), (base, [*base, 0.3]), (base, base[1:])]
    for x1, x2 in pairs:
        d1 = _pq_as_joint_utility_delta(q, neighbouring)
        worst = brute.max_log_ratio_exp_mech(x1, x2, 0.0, 1.0, [q], eps, d1, d1)
        assert worst <= eps + 1e-9


def test_public_function_draws_like_the_sampler():
    rng = np.random.default_rng(11)
    data = np.sort(TIED)
    ref = brute.normalise(brute.exp_mech_config_logweights(TIED, 0.0, 1.0, [0.5], 2.0, 2.0))
    counts = np.zeros(len(TIED) + 1)
    for _ in range(4000):
        v = private_quantile(data, 0.5, epsilon=2.0, bounds=(0, 1), neighbouring="swap", rng=rng)
        counts[np.searchsorted(data, v.values[0], side="right")] += 1
    expected = np.exp([ref[(i,)] for i in range(len(TIED) + 1)])
    assert brute.chi_square_pvalue(counts, expected) > 1e-3


def test_result_and_bounds():
    rng = np.random.default_rng(3)
    res = private_quantile(
        [5.0, -7.0, 2.0], 0.5, epsilon=0.5, bounds=(-1, 1), neighbouring="swap", rng=rng
    )
    assert res.spent == PrivacySpent(0.5)
    assert res.levels == (0.5,)
    assert -1 <= res.values[0] <= 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"epsilon": 0}, "`epsilon`"),
        ({"bounds": (1, 0)}, "`bounds`"),
        ({"neighbouring": "replace"}, "`neighbouring`"),
        ({"q": 1.5}, "`q`"),
        ({"q": [0.2, 0.5]}, "`q` must be a single level"),
        ({"x": [1.0, math.nan]}, "`x` contains NaN"),
    ],
)
def test_bad_input(kwargs, match):
    args = {
        "x": [0.2, 0.4],
        "q": 0.5,
        "epsilon": 1.0,
        "bounds": (0, 1),
        "neighbouring": "swap",
        "rng": np.random.default_rng(0),
    }
    args.update(kwargs)
    x, q = args.pop("x"), args.pop("q")
    with pytest.raises(ValueError, match=match):
        private_quantile(x, q, **args)


def test_rng_must_be_a_generator():
    with pytest.raises(TypeError, match="`rng`"):
        private_quantile([1.0], 0.5, epsilon=1, bounds=(0, 2), neighbouring="swap", rng=None)
