import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from shared.dp.joint_exp import (
    joint_exp,
    joint_exp_sample_intervals,
    joint_exp_sensitivity,
    joint_exp_tables,
    log_toeplitz_between,
    log_toeplitz_lower,
)
from shared.privacy import PrivacySpent
from tests.helpers import brute

TIED = [0.1, 0.3, 0.3, 0.3, 0.7, 1.0]


def _direct_toeplitz(h, c, t):
    return np.array(
        [
            logsumexp([-c * abs(i - j - t) + h[j] for j in range(i)]) if i else -np.inf
            for i in range(len(h))
        ]
    )


@settings(max_examples=300, deadline=None)
@given(
    h=st.lists(st.one_of(st.floats(-800, 800), st.just(-math.inf)), min_size=1, max_size=40),
    c=st.floats(1e-3, 400),
    t=st.floats(0, 45),
)
def test_toeplitz_product_is_exact_in_log_space(h, c, t):
    """Every entry, however small (e^-10^4 and below), keeps its relative precision."""
    h = np.array(h)
    got = log_toeplitz_lower(h, c, t)
    ref = _direct_toeplitz(h, c, t)
    assert np.array_equal(np.isfinite(got), np.isfinite(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12, atol=1e-9)


def _brute_forward(x, a, b, levels, eps, delta):
    """log α_j[i, k] by enumerating prefixes (i_0 <= ... <= i_j) of interval choices."""
    n = len(x)
    e = brute.edges(x, a, b)
    widths = [e[i + 1] - e[i] for i in range(n + 1)]
    qs = [0.0, *levels, 1.0]
    c = eps / (2 * delta)
    tables = []
    for j in range(len(levels)):
        acc = {}
        for conf in itertools.combinations_with_replacement(range(n + 1), j + 1):
            counts = [conf[0]] + [conf[p] - conf[p - 1] for p in range(1, j + 1)]
            lw = -c * sum(abs(cnt - (qs[p + 1] - qs[p]) * n) for p, cnt in enumerate(counts))
            for i in set(conf):
                k = conf.count(i)
                lw += -math.inf if widths[i] == 0 else k * math.log(widths[i]) - math.lgamma(k + 1)
            key = (conf[-1], conf.count(conf[-1]) - 1)
            acc.setdefault(key, []).append(lw)
        table = np.full((n + 1, j + 1), -np.inf)
        for (i, k), vals in acc.items():
            table[i, k] = logsumexp(vals)
        tables.append(table)
    return tables


@pytest.mark.parametrize(
    "x, levels, eps, neighbouring",
    [
        (TIED, (0.25, 0.5, 0.75), 1.0, "swap"),
        (TIED, (0.2, 0.5), 3.0, "add_remove"),
        # Weights down to e^-400: an FFT product on exp(log − max) keeps nothing below 1e-16.
        ([0.5] * 7, (0.1, 0.5, 0.9), 60.0, "swap"),
        ([0.0, 0.2, 0.2, 0.9, 1.0, 1.0, 1.0, 0.4], (0.0, 0.3, 1.0), 5.0, "swap"),
        # Very large ε: configurations below e^-740 of the total are pruned (probability 0).
        (TIED, (0.25, 0.5, 0.75), 900.0, "add_remove"),
        ([0.1, 0.15, 0.2, 0.4, 0.45, 0.5, 0.8, 0.9], (0.25, 0.5, 0.75), 3000.0, "swap"),
    ],
)
def test_forward_tables_match_brute_force(x, levels, eps, neighbouring):
    delta = joint_exp_sensitivity(levels, neighbouring)
    n = len(x)
    tables = joint_exp_tables(
        np.sort(x), levels, epsilon=eps, bounds=(0.0, 1.0), neighbouring=neighbouring
    )
    config_log_p = brute.normalise(
        brute.exp_mech_config_logweights(x, 0.0, 1.0, levels, eps, delta)
    )
    refs = _brute_forward(x, 0.0, 1.0, levels, eps, delta)
    for j, (part, start, ref) in enumerate(zip(tables.log_alpha, tables.starts, refs, strict=True)):
        got = np.full((n + 1, j + 1), -np.inf)
        got[start : start + part.shape[0]] = part
        kept = np.isfinite(got)
        assert not (kept & ~np.isfinite(ref)).any()
        np.testing.assert_allclose(got[kept], ref[kept], rtol=1e-12, atol=1e-9)
        # What was pruned carries (far) less than e^-740 of the probability.
        for i in np.flatnonzero(~kept.any(axis=1) & np.isfinite(ref).any(axis=1)):
            through = [lp for conf, lp in config_log_p.items() if conf[j] == i]
            assert max(through) < -740


def test_toeplitz_between_windows_matches_direct_sum():
    rng = np.random.default_rng(3)
    for _ in range(300):
        size_in, out_size = rng.integers(1, 12, size=2)
        in_lo, out_lo = rng.integers(0, 40, size=2)
        c, t = rng.uniform(0.01, 30), rng.uniform(0, 50)
        h = rng.normal(scale=50, size=size_in)
        h[rng.random(size_in) < 0.2] = -np.inf
        got = log_toeplitz_between(h, int(in_lo), int(out_lo), int(out_size), c, t)
        ref = np.array(
            [
                logsumexp(
                    [
                        -c * abs(i - ip - t) + h[ip - in_lo]
                        for ip in range(in_lo, in_lo + size_in)
                        if ip < i
                    ]
                    or [-np.inf]
                )
                for i in range(out_lo, out_lo + out_size)
            ]
        )
        assert np.array_equal(np.isfinite(got), np.isfinite(ref))
        fin = np.isfinite(ref)
        np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12, atol=1e-9)


def test_pruning_keeps_a_narrow_window_for_large_n():
    x = np.random.default_rng(0).normal(size=200_000)
    tables = joint_exp_tables(
        np.sort(x), (0.25, 0.5, 0.75), epsilon=1.0, bounds=(-50, 50), neighbouring="swap"
    )
    for part, start, q in zip(tables.log_alpha, tables.starts, (0.25, 0.5, 0.75), strict=True):
        assert part.shape[0] < 20_000
        assert start <= q * 200_000 <= start + part.shape[0]


def test_sensitivity():
    assert joint_exp_sensitivity((0.25, 0.5, 0.75), "swap") == 2.0
    assert joint_exp_sensitivity((0.25, 0.5, 0.75), "add_remove") == 1.5
    assert joint_exp_sensitivity((0.1, 0.5), "add_remove") == pytest.approx(1.8)
    assert joint_exp_sensitivity((0.5,), "add_remove") == 1.0


def _interval_frequencies(draws):
    return Counter(map(tuple, draws))


@pytest.mark.slow
@pytest.mark.parametrize(
    "x, levels, eps, neighbouring",
    [
        (TIED, (0.5,), 2.0, "swap"),
        (TIED, (0.3, 0.6), 2.0, "add_remove"),
        (TIED, (0.25, 0.5, 0.75), 3.0, "swap"),
        ([0.2, 0.2, 0.2, 0.2, 0.6, 0.6, 0.8, 0.9, 0.95, 1.0], (0.25, 0.5, 0.75), 1.0, "add_remove"),
    ],
)
def test_sampler_matches_brute_force_distribution(x, levels, eps, neighbouring):
    """2·10^5 draws of the sampler against the enumerated distribution over interval tuples.

    Sized to the question: a cell's frequency has SE √(p(1−p)/N) ≤ 1.1·10⁻³, so a sampler off
    by 1 % (absolute) in a cell is 9 SE or more away."""
    rng = np.random.default_rng(7)
    delta = joint_exp_sensitivity(levels, neighbouring)
    ref = brute.normalise(brute.exp_mech_config_logweights(x, 0.0, 1.0, levels, eps, delta))
    tables = joint_exp_tables(
        np.sort(x), levels, epsilon=eps, bounds=(0.0, 1.0), neighbouring=neighbouring
    )
    freq = _interval_frequencies(joint_exp_sample_intervals(tables, rng, size=200_000))
    assert set(freq) <= {k for k, v in ref.items() if v > -math.inf}
    keys = list(ref)
    p_value = brute.chi_square_pvalue(
        [freq.get(k, 0) for k in keys], np.exp([ref[k] for k in keys])
    )
    assert p_value > 1e-3


@pytest.mark.slow  # 3000 draws: ~2 s; a cell's frequency has SE ≤ 0.5/√3000 = 9.1·10⁻³
def test_public_function_draws_like_the_sampler():
    rng = np.random.default_rng(5)
    levels = (0.25, 0.5, 0.75)
    ref = brute.normalise(brute.exp_mech_config_logweights(TIED, 0.0, 1.0, levels, 3.0, 2.0))
    data = np.sort(TIED)
    freq = Counter()
    for _ in range(3000):
        res = joint_exp(data, levels, epsilon=3.0, bounds=(0, 1), neighbouring="swap", rng=rng)
        freq[tuple(np.searchsorted(data, res.values, side="right"))] += 1
    keys = list(ref)
    p_value = brute.chi_square_pvalue(
        [freq.get(k, 0) for k in keys], np.exp([ref[k] for k in keys])
    )
    assert p_value > 1e-3


@pytest.mark.slow
def test_all_tied_data_exact_configuration_probabilities():
    """n = 1000 equal values: the only positive-width intervals are [a, v] and [v, b].

    Every one of the 4 ordered placements of the quartiles has the same utility (−1.5·n), so the
    probabilities are the volumes w^k/k!: 1/8, 3/8, 3/8, 1/8. Each is e^-375 away from the peak of
    the kernel; a Toeplitz product by FFT on exp(log − max) returns noise for all of them.
    16,000 draws: the frequencies' SE are 2.6·10⁻³ (1/8) and 3.8·10⁻³ (3/8), against the
    noise's errors of order one.
    """
    n = 1000
    tables = joint_exp_tables(
        np.full(n, 0.5), (0.25, 0.5, 0.75), epsilon=1.0, bounds=(0, 1), neighbouring="swap"
    )
    draws = joint_exp_sample_intervals(tables, np.random.default_rng(1), size=16_000)
    freq = _interval_frequencies(draws)
    keys = [(0, 0, 0), (0, 0, n), (0, n, n), (n, n, n)]
    assert set(freq) == set(keys)
    assert brute.chi_square_pvalue([freq[k] for k in keys], [1 / 8, 3 / 8, 3 / 8, 1 / 8]) > 1e-3


@pytest.mark.parametrize("eps", [0.2, 1.0, 4.0])
@pytest.mark.parametrize("levels", [(0.25, 0.5, 0.75), (0.2, 0.9), (0.5,)])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_neighbouring_densities_within_e_eps(eps, levels, neighbouring):
    base = [0.1, 0.3, 0.3, 0.6]
    if neighbouring == "swap":
        pairs = [(base, [0.1, 0.3, 0.95, 0.6]), (base, [0.0, 0.3, 0.3, 0.6])]
    else:
        pairs = [(base, [*base, 0.9]), (base, [*base, 0.3]), (base, base[1:])]
    delta = joint_exp_sensitivity(levels, neighbouring)
    for x1, x2 in pairs:
        worst = brute.max_log_ratio_exp_mech(x1, x2, 0.0, 1.0, list(levels), eps, delta, delta)
        assert worst <= eps + 1e-9


def test_result():
    rng = np.random.default_rng(0)
    x = rng.normal(size=2000)
    res = joint_exp(
        x, [0.25, 0.5, 0.75], epsilon=1.0, bounds=(-50, 50), neighbouring="add_remove", rng=rng
    )
    assert res.spent == PrivacySpent(1.0)
    assert list(res.values) == sorted(res.values)
    np.testing.assert_allclose(res.values, np.quantile(x, [0.25, 0.5, 0.75]), atol=0.1)


@pytest.mark.parametrize(
    "q, match",
    [([0.5, 0.25], "strictly increasing"), ([0.2, 1.2], r"in \[0, 1\]"), ([], "`q`")],
)
def test_bad_levels(q, match):
    with pytest.raises(ValueError, match=match):
        joint_exp(
            [1.0, 2.0],
            q,
            epsilon=1,
            bounds=(0, 3),
            neighbouring="swap",
            rng=np.random.default_rng(0),
        )
