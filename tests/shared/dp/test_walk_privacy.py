"""An independent check of the one-sided walk's privacy, as DPBoxplot runs it.

The walk's proof is the project's own (``shared.dp.unbounded``, docs/privacy.md). This test does
not use it: it computes the walk's exact output law from the algorithm's definition alone —
counts by a plain loop over the records, the stopping rule integrated over the threshold's
noise by adaptive quadrature (``scipy.integrate.quad_vec``, not the Gauss-Legendre rule of
``tests.helpers.brute``) — on the grid DPBoxplot uses (β = 1.001), for the maximum and the
reflected minimum with the one-sided target n − √n/20 (each data set's own n) at the budget
DPBoxplot gives each walk (3ε/16). Then, exhaustively over every output (every grid point and
the clamp) and over every neighbour of small data sets (each record removed, a record added at
each place the grid distinguishes, each record moved there), the privacy loss
max |log P_D(v) − log P_D'(v)| must stay within the walk's ε. The implementation is tied to the
reference by drawing it (chi-square), so the bound is about the code that runs.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from shared.dp.boxplot import UNBOUNDED_BETA
from shared.dp.unbounded import one_sided_max_target, unbounded_sorted

BOUNDS = (0.0, 2.0)  # 1099 grid points at β = 1.001: every one an output
BETA = 1.001


def grid(a: float, b: float) -> np.ndarray:
    """a − 1 + β^k below b, from the definition (Durfee 2023): the walk's candidate outputs."""
    out, k = [], 0
    while a - 1.0 + BETA**k < b:
        out.append(a - 1.0 + BETA**k)
        k += 1
    return np.array(out)


@functools.cache
def _walk_law(x: tuple[float, ...], epsilon: float, reflect: bool) -> np.ndarray:
    """P(release = each grid point in turn, then the clamp) of the one-sided walk for the
    maximum (``reflect`` False) or the minimum, target n − √n/20, exponential noise of mean 2/ε
    on the threshold and on every query: stop at the first k with c_k + Z_k > t + Z_T."""
    a, b = BOUNDS
    n = len(x)
    values = [-v for v in x] if reflect else list(x)
    anchor = -b if reflect else a
    edges = grid(anchor, -a if reflect else b)
    counts = np.array([sum(1 for v in values if v < e) for e in edges], dtype=float)
    target = n - math.sqrt(n) / 20.0
    scale = 2.0 / epsilon

    def given_threshold_noise(z: float) -> np.ndarray:
        # P(c_k + Z_k <= t + z) = P(Z_k <= t + z − c_k), Z_k ~ Exp(mean 2/ε); stop at k: every
        # step before stayed below, k went above. Times the threshold noise's density at z >= 0.
        below = -np.expm1(-np.maximum(target + z - counts, 0.0) / scale)
        survive = np.concatenate(([1.0], np.cumprod(below)))
        stop = survive[:-1] * (1.0 - below)
        return np.append(stop, survive[-1]) * math.exp(-z / scale) / scale

    # The integrand bends where t + z crosses a count: split there so quadrature stays exact.
    kinks = sorted({c - target for c in counts if c - target > 0.0})
    pieces = [0.0, *kinks, kinks[-1] + 60.0 * scale if kinks else 60.0 * scale]
    law = sum(integrate.quad_vec(given_threshold_noise, lo, hi, epsabs=1e-14, epsrel=1e-11)[0]
              for lo, hi in itertools.pairwise(pieces))
    return np.asarray(law)


def walk_law(x: list[float], epsilon: float, reflect: bool) -> np.ndarray:
    return _walk_law(tuple(x), epsilon, reflect)


# Every place a record can take relative to the walks on [0, 2]: below a, on a, inside the grid
# (sparse and dense parts), on a grid point, in the top step, on b, above b.
PLACES = [-0.3, 0.0, 0.0004, 0.2, 1.0, 1.0 + 0.001 * 2.0, 1.9995, 2.0, 2.7]


def neighbours(x: list[float]) -> list[list[float]]:
    removed = [x[:i] + x[i + 1:] for i in range(len(x))]
    added = [[*x, p] for p in PLACES]
    moved = [[*x[:i], p, *x[i + 1:]] for i in range(len(x)) for p in PLACES if p != x[i]]
    return removed + added + moved


def privacy_loss(x: list[float], y: list[float], epsilon: float, reflect: bool) -> float:
    p, q = walk_law(x, epsilon, reflect), walk_law(y, epsilon, reflect)
    assert p.sum() == pytest.approx(1.0, abs=1e-9) and q.sum() == pytest.approx(1.0, abs=1e-9)
    both = (p > 1e-300) | (q > 1e-300)
    # An output possible on one data set and not the other would be an infinite loss.
    assert np.all((p > 0) == (q > 0)), "an output has probability 0 on one neighbour only"
    return float(np.max(np.abs(np.log(p[both]) - np.log(q[both]))))


DATA = [
    [0.5, 1.2, 1.2, 1.9],  # n = 4: the smallest boxplot, ties
    [0.0004, 0.2, 1.0, 1.0, 1.9995, 2.0],  # records on a, on a grid point, in the top step
]


@pytest.mark.parametrize("x", [DATA[0], pytest.param(DATA[1], marks=pytest.mark.slow)])
@pytest.mark.parametrize("reflect", [False, True])
def test_the_walks_privacy_loss_stays_within_its_epsilon(x: list[float], reflect: bool) -> None:
    epsilon_walk = 3.0 * 1.0 / 16.0  # DPBoxplot's share at ε = 1
    losses = [privacy_loss(x, y, epsilon_walk, reflect) for y in neighbours(x)]
    print(f"worst privacy loss {max(losses):.6f} <= ε = {epsilon_walk}")
    assert max(losses) <= epsilon_walk * (1 + 1e-7), max(losses)
    # Not vacuous: the bound is reached (the proof's factor e^((2u + d)·ε/2) with u + d = 1).
    assert max(losses) >= 0.99 * epsilon_walk, max(losses)


@pytest.mark.slow  # 26 more laws at another ε: about 3 s
def test_the_check_catches_a_walk_with_too_little_noise() -> None:
    # The same walk with half its noise (ε doubled inside, ε claimed): some neighbour and output
    # exceed the claimed ε, so the check would have caught a wrong scale.
    x = DATA[0]
    epsilon = 0.5
    worst = max(privacy_loss(x, y, 2.0 * epsilon, False) for y in neighbours(x))
    assert worst > 1.2 * epsilon, worst


@pytest.mark.slow  # 100,000 walks over 1099 steps: about 10 s
@pytest.mark.parametrize("reflect", [False, True])
def test_the_reference_is_the_law_of_the_code_that_runs(reflect: bool) -> None:
    assert UNBOUNDED_BETA == BETA  # the grid DPBoxplot's walks use
    x = DATA[1]
    epsilon = 3.0 / 16.0
    law = walk_law(x, epsilon, reflect)
    edges = grid(-BOUNDS[1], -BOUNDS[0]) if reflect else grid(*BOUNDS)
    outputs = np.append(-edges if reflect else edges, BOUNDS[0] if reflect else BOUNDS[1])
    rng = np.random.default_rng(20250)
    data = np.sort(np.array(x))
    draws = 100_000
    drawn = np.array([unbounded_sorted(data, one_sided_max_target(data.size), epsilon, BOUNDS,
                                       rng, BETA, reflect, noise="exponential")
                      for _ in range(draws)])
    # Each draw is one of the outputs (up to the last bit of β^k): the nearest one.
    order = np.argsort(outputs)
    at = np.clip(np.searchsorted(outputs[order], drawn), 1, outputs.size - 1)
    nearer_left = np.abs(drawn - outputs[order][at - 1]) <= np.abs(outputs[order][at] - drawn)
    which = order[np.where(nearer_left, at - 1, at)]
    assert np.allclose(outputs[which], drawn, rtol=0, atol=1e-9)
    counts = np.bincount(which, minlength=outputs.size)
    # Cells of expected size >= 20, contiguous outputs pooled.
    expected = law * draws
    observed_cells, expected_cells, obs, exp = [], [], 0.0, 0.0
    for o, e in zip(counts, expected, strict=True):
        obs, exp = obs + o, exp + e
        if exp >= 20.0:
            observed_cells.append(obs)
            expected_cells.append(exp)
            obs, exp = 0.0, 0.0
    observed_cells[-1] += obs
    expected_cells[-1] += exp
    assert len(expected_cells) >= 8
    assert stats.chisquare(observed_cells, expected_cells).pvalue > 1e-3
