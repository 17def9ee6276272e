"""The exact privacy of the DP mechanisms a center runs, on small neighbouring data sets.

For each mechanism the output law is written down from its definition (Laplace densities,
the exponential mechanism's piecewise-constant densities), independently of the code, and tied
to the code that runs: the Laplace releases replay the implementation's noise from a seeded
generator at the definition's scale, the exponential mechanisms compare the implementation's
interval weights and sampler scale with the definition's. Then over every neighbour of small
data sets under add/remove (each record removed, a record added at each place that matters),
the empty data set and its one-record neighbours included (DP mode answers on any number of
records, none included: docs/privacy.md, "DP mode"), and over the whole output space (a fine
grid, or every cell of the piecewise-constant density), the privacy loss
max |log p_D(y) − log p_D'(y)| must stay within ε (1e-9 for rounding). A negative control
runs the same check with the noise scale of 2ε and asserts the loss exceeds ε, so the check
would catch a mechanism whose ε scaling were doubled.

The unbounded walk (the extremes and DPBoxplot's step 1) has its own check by quadrature in
``tests/shared/dp/test_walk_privacy.py``, not repeated here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from shared.dp.joint_exp import joint_exp_tables
from shared.dp.pooled import threshold_counts, tree_counts, tree_histogram
from shared.dp.private_quantile import private_quantile_log_weights
from shared.mechanisms.laplace import Laplace

BOUNDS = (0.0, 10.0)
TOL = 1e-9
DATASETS = [(), (2.0,), (1.0, 4.0, 4.0), (0.5, 3.0, 6.0, 9.5), (1.0, 2.0, 3.0, 5.0, 8.0)]
# The empty data set first: with its neighbours (one record anywhere) and every one-record data
# set's (the empty one among them) n = 0 vs n = 1 is checked for every mechanism below.
# Places a record can be added: on, between and beyond the data and the thresholds below.
ADDED = (0.0, 0.7, 2.0, 3.5, 4.0, 5.0, 6.5, 9.9, 10.0)


def neighbours(x: tuple[float, ...]) -> list[tuple[float, ...]]:
    """Add/remove: each record removed (down to the empty data set), a record added at each
    place."""
    out = [x[:i] + x[i + 1:] for i in range(len(x))]
    out += [tuple(sorted((*x, v))) for v in ADDED]
    return out


def pairs() -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    return [(x, y) for x in DATASETS for y in neighbours(x)]


def test_the_neighbours_include_the_empty_data_set() -> None:
    """n = 0 against n = 1 both ways: the empty data set with a record added at each place,
    and a one-record data set with its record removed."""
    assert {((), (v,)) for v in ADDED} <= set(pairs())
    assert ((2.0,), ()) in pairs()


# -- Laplace releases: log p_D(y) − log p_D'(y) = Σ_i (|y_i − c'_i| − |y_i − c_i|) / b -------


def laplace_loss(c: np.ndarray, c_other: np.ndarray, scale: float) -> float:
    """The largest |log-ratio| of two product Laplace laws centred at ``c`` and ``c_other``,
    over a fine grid of each coordinate (the log-ratio is a sum of one term per coordinate, so
    the maximum over the product space is the sum of the coordinate maxima)."""
    total = 0.0
    for a, b in zip(c, c_other, strict=True):
        y = np.linspace(min(a, b) - 20 * scale, max(a, b) + 20 * scale, 4001)
        log_p = -np.abs(y - a) / scale
        log_q = -np.abs(y - b) / scale
        total += float(np.max(np.abs(log_p - log_q)))
    return total


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
def test_laplace_sum_of_clipped_values(noise: str) -> None:
    eps, lo, hi = 0.5, -2.0, 3.0
    mechanism = Laplace(eps, max(abs(lo), abs(hi)))  # one record moves a clipped sum by this
    assert mechanism.scale == pytest.approx(max(abs(lo), abs(hi)) / eps)
    rng, replay = np.random.default_rng(1), np.random.default_rng(1)
    assert np.array_equal(mechanism.sample(rng, 5), replay.laplace(0.0, 3.0 / eps, 5))
    scale = mechanism.scale if noise == "as_implemented" else mechanism.scale / 2
    worst = 0.0
    for x in [(), (-5.0, 1.0), (0.5, 2.5, 2.5)]:
        for v in (-5.0, -2.0, 0.0, 1.0, 3.0, 7.0):
            s, s_other = np.clip(x, lo, hi).sum(), np.clip((*x, v), lo, hi).sum()
            worst = max(worst, laplace_loss(np.array([s]), np.array([s_other]), scale))
    check(worst, eps, noise)


def check(worst: float, eps: float, noise: str) -> None:
    if noise == "as_implemented":
        assert worst <= eps + TOL
        assert worst >= eps - 1e-6  # attained: the data sets reach the sensitivity
    else:
        assert worst > 1.5 * eps  # the check sees a doubled ε


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
def test_threshold_counts(noise: str) -> None:
    eps, lower, upper = 0.8, 3.0, 6.0
    # The pair's L1 sensitivity under add/remove is 1 (the counted sets are disjoint).
    definition_scale = 1.0 / eps
    x = np.array(DATASETS[3])
    release = threshold_counts(x, lower=lower, upper=upper, epsilon=eps,
                               neighbouring="add_remove", rng=np.random.default_rng(5))
    assert release.scale == definition_scale
    replay = np.random.default_rng(5).laplace(0.0, definition_scale, 2)
    assert release.below_noisy - np.sum(x < lower) == pytest.approx(replay[0], abs=1e-12)
    assert release.above_noisy - np.sum(x > upper) == pytest.approx(replay[1], abs=1e-12)
    scale = definition_scale if noise == "as_implemented" else definition_scale / 2
    worst = 0.0
    for d, d_other in pairs():
        below_above = [np.array([sum(v < lower for v in s), sum(v > upper for v in s)],
                                dtype=float) for s in (d, d_other)]
        worst = max(worst, laplace_loss(below_above[0], below_above[1], scale))
    # The two counted sets are disjoint: an added or removed record moves one count by 1, so
    # the loss attained is exactly ε at the scale 1/ε (no room to spare: half the noise the
    # counts had at ε/2 each); the doubled ε is seen.
    if noise == "as_implemented":
        assert eps - 1e-6 <= worst <= eps + TOL
    else:
        assert worst >= 2 * eps - 1e-6


def test_threshold_counts_under_swap() -> None:
    """Under swap a record moved from below ``lower`` to above ``upper`` moves both counts: the
    scale is 2/ε, and the loss over every swap neighbour is ε (at 1/ε it would be 2ε)."""
    eps, lower, upper = 0.8, 3.0, 6.0
    x = np.array(DATASETS[3])
    release = threshold_counts(x, lower=lower, upper=upper, epsilon=eps, neighbouring="swap",
                               rng=np.random.default_rng(5))
    assert release.scale == 2.0 / eps
    replay = np.random.default_rng(5).laplace(0.0, 2.0 / eps, 2)
    assert release.below_noisy - np.sum(x < lower) == pytest.approx(replay[0], abs=1e-12)
    for scale, loss in ((2.0 / eps, eps), (1.0 / eps, 2 * eps)):
        worst = 0.0
        for d in DATASETS:
            for i in range(len(d)):
                for v in ADDED:
                    other = tuple(sorted((*d[:i], *d[i + 1:], v)))
                    c = [np.array([sum(u < lower for u in s), sum(u > upper for u in s)],
                                  dtype=float) for s in (d, other)]
                    worst = max(worst, laplace_loss(c[0], c[1], scale))
        assert loss - 1e-6 <= worst <= loss + TOL


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
@pytest.mark.parametrize(("depth", "branching"), [(1, 2), (2, 2), (1, 3)])
def test_tree_histogram(noise: str, depth: int, branching: int) -> None:
    eps, grid = 1.0, BOUNDS
    definition_scale = (depth + 1) / eps  # a record is in one node per level
    edges = np.linspace(*grid, branching**depth + 1)
    x = np.array(DATASETS[4])
    release = tree_histogram(x, grid=grid, depth=depth, branching=branching, epsilon=eps,
                             neighbouring="add_remove", rng=np.random.default_rng(9))
    exact = tree_counts(x, edges, depth, branching)
    replay = np.random.default_rng(9)
    for noisy, counts in zip(release.levels, exact, strict=True):
        assert np.allclose(noisy - counts, replay.laplace(0.0, definition_scale, counts.size),
                           atol=1e-12)
    scale = definition_scale if noise == "as_implemented" else definition_scale / 2
    worst = 0.0
    for d, d_other in pairs():
        nodes = [np.concatenate(tree_counts(np.array(s), edges, depth, branching))
                 for s in (d, d_other)]
        worst = max(worst, laplace_loss(nodes[0], nodes[1], scale))
    check(worst, eps, noise)


# -- exponential mechanisms: piecewise-constant densities on the cells of both data sets ------


def cells(*datasets: tuple[float, ...]) -> np.ndarray:
    """The edges of the cells on which every density below is constant: the bounds and every
    value of either data set."""
    inner = sorted({v for d in datasets for v in d if BOUNDS[0] < v < BOUNDS[1]})
    return np.array([BOUNDS[0], *inner, BOUNDS[1]])


def quantile_log_density(x: tuple[float, ...], q: float, c: float, edges: np.ndarray
                         ) -> np.ndarray:
    """log density of Smith's exponential mechanism at each cell's midpoint, from the
    definition: ∝ exp(−c·|#{x < u} − q·n|) on [a, b], normalised over [a, b]."""
    mids = (edges[:-1] + edges[1:]) / 2
    n = len(x)
    rank = np.array([sum(v < u for v in x) for u in mids], dtype=float)
    log_w = -c * np.abs(rank - q * n)
    widths = np.diff(edges)
    return log_w - np.log(np.sum(widths * np.exp(log_w)))


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
@pytest.mark.parametrize("q", [0.5, 0.25, 0.9])
def test_private_quantile(noise: str, q: float) -> None:
    eps = 1.0
    delta = max(q, 1 - q)  # one record added moves |rank − q·n| by at most max(q, 1 − q)
    c = eps / (2 * delta)
    for x in DATASETS:  # the implementation's interval weights are the definition's
        data = np.array(x)
        log_w = private_quantile_log_weights(data, q, epsilon=eps, bounds=BOUNDS,
                                             neighbouring="add_remove")
        ranks = np.arange(len(x) + 1)
        widths = np.diff(np.concatenate(([BOUNDS[0]], data, [BOUNDS[1]])))
        expected = np.log(np.maximum(widths, 1e-300)) - c * np.abs(ranks - q * len(x))
        keep = widths > 0
        assert np.allclose(log_w[keep], expected[keep], atol=1e-9)
    scale = c if noise == "as_implemented" else 2 * c
    worst = 0.0
    for d, d_other in pairs():
        edges = cells(d, d_other)
        loss = quantile_log_density(d, q, scale, edges) - quantile_log_density(d_other, q,
                                                                               scale, edges)
        worst = max(worst, float(np.max(np.abs(loss))))
    if noise == "as_implemented":
        assert worst <= eps + TOL
    else:
        assert worst > eps


def joint_exp_log_density(x: tuple[float, ...], levels: tuple[float, ...], c: float,
                          edges: np.ndarray) -> np.ndarray:
    """log density of JointExp (Gillenwater et al. 2021) for two levels at each pair of cells
    (i <= j; u1 <= u2), from the definition: ∝ exp(−c·Σ_p |#{u_{p−1} <= x < u_p} − (q_p −
    q_{p−1})·n|), normalised over {a <= u1 <= u2 <= b} (a pair in one cell has area w²/2)."""
    mids = (edges[:-1] + edges[1:]) / 2
    n = len(x)
    rank = np.array([sum(v < u for v in x) for u in mids], dtype=float)
    q1, q2 = levels
    targets = np.array([q1, q2 - q1, 1 - q2]) * n
    widths = np.diff(edges)
    m = mids.size
    log_w = np.full((m, m), -np.inf)
    area = np.zeros((m, m))
    for i, j in itertools.product(range(m), repeat=2):
        if i <= j:
            counts = np.array([rank[i], rank[j] - rank[i], n - rank[j]])
            log_w[i, j] = -c * np.abs(counts - targets).sum()
            area[i, j] = widths[i] * widths[j] if i < j else widths[i] ** 2 / 2
    z = np.sum(area * np.exp(log_w))
    return log_w - math.log(z)


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
@pytest.mark.parametrize("levels", [(0.25, 0.75), (0.5, 0.9)])
def test_joint_exp(noise: str, levels: tuple[float, float]) -> None:
    eps = 1.0
    # One record added changes one count by 1 and every target by its level gap: at most
    # 2(1 − smallest gap) in total.
    gaps = np.diff([0.0, *levels, 1.0])
    c = eps / (2 * 2 * (1 - gaps.min()))
    tables = joint_exp_tables(np.array(DATASETS[4]), levels, epsilon=eps, bounds=BOUNDS,
                              neighbouring="add_remove")
    assert tables.scale == pytest.approx(c)  # the sampler's c is the definition's
    scale = c if noise == "as_implemented" else 2 * c
    worst = 0.0
    for d, d_other in pairs():
        edges = cells(d, d_other)
        p, p_other = (joint_exp_log_density(s, levels, scale, edges) for s in (d, d_other))
        finite = np.isfinite(p)
        worst = max(worst, float(np.max(np.abs(p[finite] - p_other[finite]))))
    if noise == "as_implemented":
        assert worst <= eps + TOL
    else:
        assert worst > eps


# -- DP describe: JointExp, then Laplace parts given the range read off its output -------------


def describe_stats(s: tuple[float, ...], clip: tuple[float, float], center: float) -> np.ndarray:
    """The count, Σy and Σy² of DP describe from the definition: y the value clipped to the
    bounds, then to the range read off the quartiles, minus the range's midpoint."""
    y = np.clip(np.clip(s, *BOUNDS), *clip) - center
    return np.array([len(s), y.sum(), (y * y).sum()])


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
def test_dp_describe(noise: str) -> None:
    """Adaptive composition: given the quartiles released (and so the clipping range), the
    count, the two sums and the histogram tree are independent Laplace releases at the scales
    the release states (the code draws at those scales). Their loss over every neighbour, from
    the definitions (a record moves the count by 1, Σy by its clipped centred value y, Σy² by
    y², one node per level of the tree by 1), plus the JointExp part's ε (checked exactly in
    :func:`test_joint_exp` for the sensitivity stated here) stays within ε."""
    from shared.describe import DEPTH, QUANTILE_LEVELS, dp_describe

    eps = 1.0
    worst = 0.0
    for x in DATASETS:
        result = dp_describe(np.array(x), epsilon=eps, bounds=BOUNDS, bins=4,
                             neighbouring="add_remove", rng=np.random.default_rng(3))
        parts = {part.name: part for part in result.parts}
        assert math.fsum(part.epsilon for part in parts.values()) == pytest.approx(eps)
        gaps = np.diff([0.0, *QUANTILE_LEVELS, 1.0])
        assert parts["quantiles"].sensitivity == pytest.approx(2 * (1 - gaps.min()))
        assert result.clip is not None
        lo, hi = result.clip
        center = (lo + hi) / 2
        scales: dict[str, float] = {}
        for name in ("count", "sum", "sum of squares", "histogram"):
            scale = parts[name].scale
            assert scale is not None
            scales[name] = scale
        for part in parts.values():
            if part.scale is not None:  # b = sensitivity/ε of the part
                assert part.scale == pytest.approx(part.sensitivity / part.epsilon)
        if noise == "twice_epsilon":
            scales = {name: b / 2 for name, b in scales.items()}
        for d_other in neighbours(x):
            a, b = (describe_stats(s, (lo, hi), center) for s in (x, d_other))
            loss = math.fsum(laplace_loss(a[i:i + 1], b[i:i + 1], scales[name])
                             for i, name in enumerate(("count", "sum", "sum of squares")))
            nodes = np.ones(DEPTH + 1)  # the added or removed record's node on each level
            loss += laplace_loss(np.zeros(DEPTH + 1), nodes, scales["histogram"])
            worst = max(worst, loss + parts["quantiles"].epsilon)
    if noise == "as_implemented":
        assert worst <= eps + TOL
    else:
        assert worst > eps


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
def test_dp_describe_count_and_missing_pair(noise: str) -> None:
    """DP describe's count part with the missing count: one Laplace mechanism on the pair
    (present, missing) of the selection's records, two disjoint sets. Tied to the code (the
    two draws replayed from the seed at the part's scale, 1/ε_n under add/remove); then over
    every add/remove neighbour — a record added or removed is either present or missing, the
    empty selection included — the loss is ε_n, attained, and 2ε_n at half the scale."""
    from shared.describe import dp_describe

    eps = 1.0
    x, missing = np.array(DATASETS[3]), 2
    result = dp_describe(x, epsilon=eps, bounds=BOUNDS, bins=4, neighbouring="add_remove",
                         rng=np.random.default_rng(11), missing=missing)
    part = next(p for p in result.parts if p.name == "count")
    assert part.sensitivity == 1.0 and part.scale == pytest.approx(1.0 / part.epsilon)
    replay = np.random.default_rng(11).laplace(0.0, part.scale, 2)
    assert result.count - x.size == pytest.approx(replay[0], abs=1e-12)
    assert result.missing is not None
    assert result.missing - missing == pytest.approx(replay[1], abs=1e-12)
    swap = dp_describe(x, epsilon=eps, bounds=BOUNDS, bins=4, neighbouring="swap",
                       rng=np.random.default_rng(11), missing=missing)
    assert next(p for p in swap.parts if p.name == "count").scale == pytest.approx(
        2.0 / part.epsilon)  # under swap a record moved from one set to the other moves both
    scale = part.scale if noise == "as_implemented" else part.scale / 2
    worst = 0.0
    for n in range(4):
        for m in range(3):
            for other in ((n + 1, m), (n, m + 1), (n - 1, m), (n, m - 1)):
                if min(other) < 0:
                    continue
                worst = max(worst, laplace_loss(np.array([n, m], float),
                                                np.array(other, float), scale))
    if noise == "as_implemented":
        assert part.epsilon - 1e-6 <= worst <= part.epsilon + TOL
    else:
        assert worst >= 2 * part.epsilon - 1e-6
