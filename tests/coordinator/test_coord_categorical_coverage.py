"""Coverage of the DP n (%) interval as a categorical row shows it (the pooled arm of
``coordinator.protocols.categorical.category_arms``; docs/methods.md §12.7, the table there):
3 centers × 60 records, ε = 0.3 per cell (two-sided geometric noise at every center), the
share of interest 0.03-0.5. The interval must cover the category's probability (sampling and
noise together) in 93-97 % of tables. Slow suite: seeded, about 3 s each on one core.

Reproduce the table of docs/methods.md §12.7:
``PYTHONPATH=. python -m pytest -q -m slow tests/coordinator/test_coord_categorical_coverage.py``
(each case prints its coverage with ``-s``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coordinator.protocols.categorical import FederatedCounts, category_arms

pytestmark = pytest.mark.slow

REPS = 20_000
"""Tables per case: the Monte Carlo SE of a coverage near 0.95 is √(0.95·0.05/20000) ≈ 0.0015,
so a true 0.95 lands in [0.93, 0.97] with probability 1 − 1e-8 (13 SE each side)."""


def coverage(share: float, *, centers: int = 3, n: int = 60, epsilon: float = 0.3,
             categories: int = 3, seed: int) -> float:
    """The pooled row's interval for category 0 over ``REPS`` tables: ``share`` for it, the
    rest split evenly over the other categories; every record has a category (the missing
    cell empty, as released: noisy)."""
    rng = np.random.default_rng(seed)
    probs = np.array([share] + [(1 - share) / (categories - 1)] * (categories - 1) + [0.0])
    alpha = math.exp(-epsilon)
    variance = 2 * alpha / (1 - alpha) ** 2
    names = tuple(f"c{i}" for i in range(categories))
    cells = tuple((j,) for j in range(categories + 1))
    hits = 0
    for _ in range(REPS):
        true = rng.multinomial(n, probs, size=centers)
        noise = (rng.geometric(1 - alpha, true.shape) - rng.geometric(1 - alpha, true.shape))
        counts = {f"h{c}": (true[c] + noise[c]).astype(float)[None, :] for c in range(centers)}
        fed = FederatedCounts("x", "dp", names, ("all",), cells, counts,
                              {c: np.full((1, len(cells)), variance) for c in counts},
                              dict.fromkeys(counts, epsilon), ())
        (pooled,) = category_arms(fed, per_center=False)
        cell = pooled.cells[0]
        hits += (cell.low is not None and cell.high is not None
                 and cell.low <= 100 * share <= cell.high)
    return hits / REPS


@pytest.mark.parametrize(("share", "seed"), [(0.03, 1), (0.1, 2), (0.3, 3), (0.5, 4)])
def test_the_dp_share_interval_covers_rare_and_common_categories(share: float,
                                                                 seed: int) -> None:
    got = coverage(share, seed=20261207 + seed)
    print(f"share {share}: coverage {got:.4f} ({REPS} tables)")
    assert 0.93 <= got <= 0.97


@pytest.mark.parametrize("share", [0.03, 0.5])
def test_it_covers_with_more_categories_and_less_noise(share: float) -> None:
    """5 categories, ε = 1 per cell: the noise no longer dominates the sampling error."""
    got = coverage(share, epsilon=1.0, categories=5, seed=20261208)
    print(f"share {share}, ε = 1, 5 categories: coverage {got:.4f} ({REPS} tables)")
    assert 0.93 <= got <= 0.97
