"""Grid-aware DP quantiles (a variable's public resolution r; docs/methods.md §5.10): the outputs
are points of the grid of r within the bounds. PrivateQuantile: the exponential mechanism over
grid points, ties at a point counted half (the mid-rank C = #{x below} + ½·#{x at}). JointExp:
the values jittered by independent U(−r/2, r/2), JointExp, each output moved to the nearest
grid point.

The references here are written from those definitions only: the grid enumerated from its
description (the multiples of r strictly inside the bounds, and the bounds), every candidate
scored by counting the data directly and normalised by brute force (PrivateQuantile), the jitter
integrated numerically over JointExp's enumerated configurations (JointExp).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from shared.dp import dp_boxplot, joint_exp, private_quantile
from shared.dp._common import MAX_GRID_POINTS, make_grid, snap_to_grid
from shared.dp.joint_exp import joint_exp_sensitivity, joint_exp_sorted
from shared.dp.private_quantile import (
    private_quantile_log_weights,
    private_quantile_sensitivity,
    private_quantile_sorted,
)
from tests.helpers import brute

# Values recorded at 0.1 with ties, one value off the grid (0.25) and one on the upper bound.
TIED = [0.1, 0.3, 0.3, 0.3, 0.25, 0.6, 0.6]
BOUNDS = (0.0, 0.6)
R = 0.1
CHI2_P = 1e-3  # a correct sampler fails a test at this level once in a thousand runs


def ref_grid(a: float, b: float, r: float) -> list[float]:
    """The grid by its definition: a, the multiples of r strictly inside (a, b), b."""
    inside = [round(j * r, 12) for j in range(math.floor(a / r) - 1, math.ceil(b / r) + 2)]
    return [a, *sorted(v for v in inside if a + 1e-9 < v < b - 1e-9), b]


def mid_rank(x, g: float, a: float, b: float, tol: float = 1e-6 * R) -> float:
    """#{x below g} + ½·#{x at g}, the data clipped to [a, b] first; "at" is within the grid's
    stated tolerance, r·10⁻⁶."""
    clipped = [min(max(v, a), b) for v in x]
    at = sum(1 for v in clipped if abs(v - g) <= tol)
    below = sum(1 for v in clipped if v < g - tol)
    return below + at / 2


def ref_pq_log_probs(x, q, eps, bounds, r, neighbouring) -> dict[float, float]:
    """PrivateQuantile on the grid: P(g) ∝ exp(−ε·|C(g) − q·n| / (2Δ))."""
    a, b = bounds
    n = len(x)
    delta = 1.0 if neighbouring == "swap" else max(q, 1 - q)
    logw = {g: -eps / (2 * delta) * abs(mid_rank(x, g, a, b) - q * n) for g in ref_grid(a, b, r)}
    return brute.normalise(logw)


def key(values) -> tuple:
    return tuple(round(float(v), 9) for v in values)


# -- the grid -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bounds, r", [((0.0, 0.6), 0.1), ((0.05, 4.97), 0.1), ((-3, 17.5), 1.0),
                                       ((0.0, 1.0), 0.25), ((-20.0, 40.0), 7.5),
                                       ((0.0, 0.001), 1.0), ((1e6, 1e6 + 3), 0.01)])
def test_grid_is_the_multiples_clipped_into_the_bounds(bounds, r):
    grid = make_grid(bounds, r)
    points = grid.points(np.arange(grid.size))
    ref = ref_grid(*bounds, r)
    np.testing.assert_allclose(points, ref, rtol=0, atol=1e-9 * max(1.0, abs(bounds[1])))
    assert np.all(np.diff(points) > 0)
    # Every grid point's rank is its index, from either side.
    np.testing.assert_array_equal(grid.ranks(points), np.arange(grid.size))
    np.testing.assert_array_equal(grid.hi_ranks(points), np.arange(grid.size))


@settings(max_examples=300, deadline=None)
@given(j=st.integers(-10**6, 10**6), digits=st.integers(0, 3))
def test_values_recorded_at_the_resolution_are_grid_points(j, digits):
    """round(v, d) — how a value recorded at 10^-d is stored — is a grid point exactly."""
    r = 10.0**-digits
    v = round(j * r, digits)
    grid = make_grid((-1e4, 1e4), r)
    clipped = min(max(v, -1e4), 1e4)
    assert grid.points(grid.ranks([v]))[0] == clipped
    assert grid.nearest([v])[0] == clipped


@settings(max_examples=200, deadline=None)
@given(
    x=st.lists(st.one_of(st.integers(-5, 45).map(lambda k: k / 10),
                         st.floats(-0.5, 4.5, allow_nan=False)), min_size=1, max_size=25),
    a=st.sampled_from([0.0, 0.05, -0.3]),
    b=st.sampled_from([4.0, 3.97]),
)
def test_lattice_positions_are_twice_the_mid_ranks(x, a, b):
    grid = make_grid((a, b), R)
    lattice = grid.lattice(np.sort(x))
    assert lattice.sizes.sum() == grid.size
    position = np.repeat(np.arange(lattice.sizes.size), lattice.sizes)
    first = np.repeat(lattice.starts, lattice.sizes)
    offset = np.arange(grid.size) - np.repeat(np.cumsum(lattice.sizes) - lattice.sizes,
                                              lattice.sizes)
    np.testing.assert_array_equal(first + offset, np.arange(grid.size))  # consecutive points
    ref = [2 * mid_rank(x, g, a, b) for g in ref_grid(a, b, R)]
    np.testing.assert_array_equal(position, ref)


@pytest.mark.parametrize("r", [0.0, -1.0, math.nan, math.inf, "0.1", True])
def test_bad_resolution(r):
    with pytest.raises(ValueError, match="resolution"):
        joint_exp([1.0, 2.0], [0.5], epsilon=1, bounds=(0, 3), neighbouring="swap",
                  rng=np.random.default_rng(0), resolution=r)


def test_resolution_too_fine_for_the_bounds_is_refused():
    with pytest.raises(ValueError, match="too fine"):
        make_grid((0.0, 1e6), 1e6 / MAX_GRID_POINTS / 2)
    with pytest.raises(ValueError, match="too fine"):
        private_quantile([1.0], 0.5, epsilon=1, bounds=(-1e15, 1e15), neighbouring="swap",
                         rng=np.random.default_rng(0), resolution=0.1)


# -- PrivateQuantile ----------------------------------------------------------------------------


@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.8, 1.0])
def test_private_quantile_log_probabilities_match_brute_force(q, neighbouring):
    eps = 3.0
    ref = ref_pq_log_probs(TIED, q, eps, BOUNDS, R, neighbouring)
    data = np.sort(TIED)
    log_w = private_quantile_log_weights(data, q, epsilon=eps, bounds=BOUNDS,
                                         neighbouring=neighbouring, resolution=R)
    lattice = make_grid(BOUNDS, R).lattice(data)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty positions drop out
        per_point = np.repeat(log_w - np.log(lattice.sizes), lattice.sizes)
    got = per_point - logsumexp(per_point)
    np.testing.assert_allclose(got, list(ref.values()), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "x, q, eps, neighbouring",
    [(TIED, 0.5, 2.0, "swap"), (TIED, 0.25, 1.0, "add_remove"),
     ([0.5] * 4 + [0.9], 0.75, 4.0, "swap"), ([0.21, 0.3, 0.3, 0.9], 0.5, 6.0, "add_remove")],
)
def test_private_quantile_sampler_matches_brute_force(x, q, eps, neighbouring):
    """2·10^5 draws of the sampler (the public function's path after validation and sorting)
    against the enumerated distribution over grid points (Pearson χ², p > 10^-3)."""
    bounds = (0.0, 1.0)
    ref = ref_pq_log_probs(x, q, eps, bounds, R, neighbouring)
    draws = private_quantile_sorted(np.sort(x), q, eps, bounds, neighbouring,
                                    np.random.default_rng(20261201), size=200_000, resolution=R)
    freq = Counter(key(draws))
    assert set(freq) <= set(key(ref))
    expected = np.exp(list(ref.values()))
    observed = [freq.get(k, 0) for k in key(ref)]
    assert brute.chi_square_pvalue(observed, expected) > CHI2_P


def _neighbours(base, neighbouring):
    if neighbouring == "swap":
        return [(base, [*base[:-1], 0.9]), (base, [0.0, *base[1:]]), (base, [*base[:-1], 0.3]),
                (base, [*base[:-1], 0.35])]
    return [(base, [*base, 0.9]), (base, [*base, 0.3]), (base, base[1:]), (base, [*base, 0.35]),
            (base, [*base, 1.0]), (base, [*base, 0.0])]


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("q", [0.1, 0.5, 0.75])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_private_quantile_neighbours_within_e_eps_at_every_grid_point(eps, q, neighbouring):
    """The implementation's exact probabilities (its log weights, uniform within a position)."""
    base = [0.1, 0.3, 0.3, 0.3, 0.6, 0.7]
    bounds = (0.0, 1.0)
    grid = make_grid(bounds, R)

    def log_probs(x):
        data = np.sort(x)
        log_w = private_quantile_log_weights(data, q, epsilon=eps, bounds=bounds,
                                             neighbouring=neighbouring, resolution=R)
        sizes = grid.lattice(data).sizes
        with np.errstate(divide="ignore", invalid="ignore"):
            per_point = np.repeat(log_w - np.log(sizes), sizes)
        return per_point - logsumexp(per_point)

    for x1, x2 in _neighbours(base, neighbouring):
        p1, p2 = log_probs(x1), log_probs(x2)
        assert p1.size == p2.size == grid.size
        assert np.max(np.abs(p1 - p2)) <= eps + 1e-9
        # and the reference agrees with the implementation on both
        np.testing.assert_allclose(p1, list(ref_pq_log_probs(x1, q, eps, bounds, R,
                                                             neighbouring).values()), atol=1e-12)


# -- JointExp: jitter, continuous JointExp, nearest grid point -----------------------------------


def _nearest_cells(a: float, b: float, r: float) -> tuple[list[float], np.ndarray]:
    """The grid and the boundaries of its nearest-point cells (midpoints; ±inf outside)."""
    grid = ref_grid(a, b, r)
    mids = [(g0 + g1) / 2 for g0, g1 in itertools.pairwise(grid)]
    return grid, np.array([-np.inf, *mids, np.inf])


def ref_jittered_je(x, levels, eps, bounds, r, neighbouring, k=240) -> dict[tuple, float]:
    """P(output tuple) of grid-aware JointExp, from its definition: the clipped values jittered
    by independent U(−r/2, r/2), JointExp (the enumerated configurations of
    ``brute.exp_mech_config_logweights``' formula: interval tuples, weights
    exp(ε·u/(2Δ))·Π |I|^k/k!, outputs uniform and ordered inside) on bounds
    [a − r/2, b + r/2], each output rounded to the nearest grid point. The jitter is integrated
    by the midpoint rule on k^n points (the integrand is continuous and piecewise smooth: error
    O(k^-2), about 1e-5 here)."""
    a, b = bounds
    n, m = len(x), len(levels)
    half = r / 2
    u = (np.arange(k) + 0.5) / k * r - half
    jit = np.stack(np.meshgrid(*([u] * n), indexing="ij"), axis=-1).reshape(-1, n)
    xs = np.sort(np.clip(np.array(x, dtype=float), a, b)[None, :] + jit, axis=1)
    edges = np.column_stack([np.full(len(xs), a - half), xs, np.full(len(xs), b + half)])
    grid, cuts = _nearest_cells(a, b, r)
    # p_in[:, i, g]: the share of interval i that rounds to grid point g
    lo = np.maximum(edges[:, :-1, None], cuts[None, None, :-1])
    hi = np.minimum(edges[:, 1:, None], cuts[None, None, 1:])
    width = edges[:, 1:] - edges[:, :-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_in = np.clip(hi - lo, 0, None) / width[:, :, None]
    qs = [0.0, *levels, 1.0]
    delta = joint_exp_sensitivity(tuple(levels), neighbouring)
    out = {t: np.zeros(len(xs)) for t in itertools.combinations_with_replacement(grid, m)}
    total = np.zeros(len(xs))
    for conf in itertools.combinations_with_replacement(range(n + 1), m):
        counts = [conf[0]] + [conf[j] - conf[j - 1] for j in range(1, m)] + [n - conf[-1]]
        score = -sum(abs(c - (qs[p + 1] - qs[p]) * n) for p, c in enumerate(counts))
        weight = np.full(len(xs), math.exp(eps / (2 * delta) * score))
        for i in set(conf):
            kk = conf.count(i)
            weight = weight * width[:, i] ** kk / math.factorial(kk)
        total += weight
        # k outputs in one interval: k i.i.d. uniforms, sorted; their rounded values are the
        # sorted i.i.d. roundings, a multinomial over the grid.
        for gidx in itertools.product(range(len(grid)), repeat=m):
            if list(gidx) != sorted(gidx):
                continue
            prob = weight.copy()
            for i in set(conf):
                slots = [gidx[j] for j in range(m) if conf[j] == i]
                ways = math.factorial(len(slots)) / math.prod(
                    math.factorial(slots.count(g)) for g in set(slots))
                prob = prob * ways * np.prod([p_in[:, i, g] for g in slots], axis=0)
            out[tuple(grid[g] for g in gidx)] += np.nan_to_num(prob)
    return {t: float(np.mean(v / total)) for t, v in out.items()}


def _je_draws(x, levels, eps, neighbouring, bounds, size, seed):
    data = np.sort(x)
    rng = np.random.default_rng(seed)
    return Counter(key(joint_exp_sorted(data, levels, eps, bounds, neighbouring, rng,
                                        resolution=R)) for _ in range(size))


def test_jitter_reference_is_a_distribution_and_recovers_the_tied_value():
    ref = ref_jittered_je([0.2, 0.2], (0.5,), 40.0, (0.0, 0.4), R, "swap")
    assert sum(ref.values()) == pytest.approx(1.0, abs=1e-9)
    assert ref[(0.2,)] > 0.9  # a large ε: the median of two values at 0.2 is 0.2


@pytest.mark.slow  # ~15 s each: every draw runs JointExp on freshly jittered data
@pytest.mark.parametrize(
    "x, levels, eps, neighbouring",
    [
        ([0.1, 0.1], (0.5,), 2.0, "swap"),
        ([0.1, 0.3], (0.3, 0.7), 3.0, "add_remove"),
        ([0.2, 0.2], (0.25, 0.75), 8.0, "swap"),
    ],
)
def test_joint_exp_on_a_grid_draws_its_distribution(x, levels, eps, neighbouring):
    """6000 draws of the public path against the distribution over grid tuples integrated from
    the definition (Pearson χ², cells of expectation < 5 pooled, p > 10^-3; a cell's frequency
    has SE ≤ 0.5/√6000 = 6.5·10⁻³)."""
    bounds = (0.0, 0.4)
    ref = ref_jittered_je(x, levels, eps, bounds, R, neighbouring)
    freq = _je_draws(x, levels, eps, neighbouring, bounds, 6000, 17)
    assert set(freq) <= {key(t) for t, p in ref.items() if p > 0}
    observed = [freq.get(key(t), 0) for t in ref]
    assert brute.chi_square_pvalue(observed, list(ref.values())) > CHI2_P


def test_joint_exp_on_a_grid_small_sampler_check():
    """The fast version of the check above (one case, 1500 draws)."""
    ref = ref_jittered_je([0.1, 0.3], (0.5,), 2.0, (0.0, 0.4), R, "swap")
    freq = _je_draws([0.1, 0.3], (0.5,), 2.0, "swap", (0.0, 0.4), 1500, 3)
    observed = [freq.get(key(t), 0) for t in ref]
    assert brute.chi_square_pvalue(observed, list(ref.values())) > CHI2_P


@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("levels", [(0.5,), (0.25, 0.75)])
def test_joint_exp_on_a_grid_neighbours_within_e_eps_swap(eps, levels):
    """Exact (integrated) distributions of swap neighbours: within e^ε at every grid tuple."""
    bounds = (0.0, 0.4)
    for x1, x2 in [([0.1, 0.3], [0.1, 0.1]), ([0.2, 0.2], [0.2, 0.4]), ([0.0, 0.3], [0.4, 0.3])]:
        p1 = ref_jittered_je(x1, levels, eps, bounds, R, "swap", k=160)
        p2 = ref_jittered_je(x2, levels, eps, bounds, R, "swap", k=160)
        worst = max(abs(math.log(p1[t]) - math.log(p2[t])) for t in p1)
        assert worst <= eps + 1e-3  # the quadrature's error, relative, is far below 1e-3


@pytest.mark.slow  # ~5 s: three-dimensional jitter integrals
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_joint_exp_on_a_grid_neighbours_within_e_eps_add_remove(eps):
    bounds = (0.0, 0.4)
    for x1, x2 in [([0.1, 0.3], [0.1, 0.3, 0.3]), ([0.2, 0.2], [0.2, 0.2, 0.0])]:
        p1 = ref_jittered_je(x1, (0.5,), eps, bounds, R, "add_remove", k=60)
        p2 = ref_jittered_je(x2, (0.5,), eps, bounds, R, "add_remove", k=60)
        worst = max(abs(math.log(p1[t]) - math.log(p2[t])) for t in p1)
        assert worst <= eps + 1e-2  # midpoint rule on 60³ points


def test_sensitivities_are_the_continuous_ones():
    assert joint_exp_sensitivity((0.25, 0.5, 0.75), "add_remove") == 1.5
    assert private_quantile_sensitivity(0.25, "add_remove") == 0.75


# -- outputs on the grid, inside the bounds -----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    x=st.lists(st.floats(-10, 60, allow_nan=False), min_size=4, max_size=60),
    r=st.sampled_from([0.1, 0.5, 1.0, 3.0, 0.25]),
    a=st.sampled_from([0.0, -2.05, 1.0]),
    b=st.sampled_from([30.0, 47.3]),
    rounded=st.booleans(),
    eps=st.sampled_from([0.1, 1.0, 50.0]),
    seed=st.integers(0, 2**32),
)
def test_outputs_are_grid_points_inside_the_bounds(x, r, a, b, rounded, eps, seed):
    if rounded:
        x = [round(v / r) * r for v in x]
    grid = make_grid((a, b), r)
    rng = np.random.default_rng(seed)
    common = {"epsilon": eps, "bounds": (a, b), "neighbouring": "add_remove", "rng": rng,
              "resolution": r}
    values = [*joint_exp(x, [0.05, 0.5, 0.95], **common).values,
              *private_quantile(x, 0.3, **common).values]
    box = dp_boxplot(x, n_public=len(x), **common)
    values += [box.lower_whisker, box.q1, box.median, box.q3, box.upper_whisker]
    v = np.array(values)
    assert np.all((a <= v) & (v <= b))
    np.testing.assert_array_equal(grid.points(grid.ranks(v)), v)
    assert box.lower_whisker <= box.q1 <= box.median <= box.q3 <= box.upper_whisker
    np.testing.assert_array_equal(snap_to_grid(v + 0.3 * r, bounds=(a, b), resolution=r),
                                  grid.nearest(v + 0.3 * r))


def test_resolution_none_is_the_continuous_mechanism():
    """resolution=None draws exactly what the call without it draws (same generator state)."""
    x = np.round(np.random.default_rng(0).lognormal(1, 0.6, 500), 1)
    kw = {"epsilon": 1.0, "bounds": (0, 60), "neighbouring": "add_remove"}
    a = joint_exp(x, [0.25, 0.5], rng=np.random.default_rng(4), **kw)
    b = joint_exp(x, [0.25, 0.5], rng=np.random.default_rng(4), resolution=None, **kw)
    assert a == b
    # continuous outputs land inside the gaps between the recorded values
    grid = make_grid((0, 60), 0.1)
    assert not np.array_equal(grid.nearest(a.values), a.values)


def test_grid_estimates_on_rounded_data_are_the_sample_quantiles():
    """n = 20 000 values recorded at 0.1 (runs of hundreds of ties): at ε = 1 the grid-aware
    JointExp returns the sample quartiles themselves (the rank error, a few records, stays far
    inside a run), the continuous one lands inside the gaps next to them."""
    rng = np.random.default_rng(19)
    x = np.round(rng.lognormal(1.2, 0.5, 20_000), 1)
    levels = [0.25, 0.5, 0.75]
    truth = np.quantile(x, levels, method="inverted_cdf")
    grid_err, cont_err = [], []
    for _ in range(20):
        kw = {"epsilon": 1.0, "bounds": (0.0, 90.0), "neighbouring": "add_remove", "rng": rng}
        grid_err.append(np.abs(np.array(joint_exp(x, levels, resolution=0.1, **kw).values)
                               - truth))
        cont_err.append(np.abs(np.array(joint_exp(x, levels, **kw).values) - truth))
    assert np.mean(grid_err) < 0.2 * np.mean(cont_err)
    assert np.mean(np.array(grid_err) < 1e-9) > 0.8


def test_off_grid_count_counts_values_off_the_resolution():
    # Recorded decimals (2.3 stored as 2.2999999999999998) are on their grid; a value a tenth
    # of a step off is not; missing values are not counted; large values keep their tolerance.
    from shared.dp._common import off_grid_count

    on = np.round(np.random.default_rng(1).normal(120, 15, 10_000), 1)
    assert off_grid_count(on, 0.1) == 0
    assert off_grid_count(np.append(on, [np.nan, np.inf]), 0.1) == 0
    assert off_grid_count(np.append(on, [120.35, 7.01]), 0.1) == 2
    assert off_grid_count([0.0, 1.5, -2.5, 7.5e9], 0.5) == 0
    assert off_grid_count([1.0, 2.0, 3.5], 1.0) == 1
    assert off_grid_count([0.25, 0.75, 0.3], 0.25) == 1
    assert off_grid_count([3.0 * 0.3, 0.3 * 7], 0.3) == 0  # not of the form 1/N
    with pytest.raises(ValueError, match="resolution"):
        off_grid_count([1.0], 0.0)
