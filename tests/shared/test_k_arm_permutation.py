"""Kruskal-Wallis and Jonckheere-Terpstra on a bin table against their exact permutation laws on
small tied data (n <= 10 per arm): every assignment of the table's records to arms of the same
sizes, enumerated (docs/methods.md §12).

Under H0 given the bins (records in one bin tied), S = (R_i − n_i(N + 1)/2) has mean 0 and
covariance σ²(diag(n) − n·nᵀ/N) with the tie-corrected σ², so E H = k − 1 exactly; J has the mean
and tie-corrected variance of ``shared.jonckheere.null_moments`` with the bins' totals as the tie
sizes. And on each assignment the table test is scipy's Kruskal-Wallis of the bin indices."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import stats

from shared import jonckheere, kruskal

# (arm sizes, bin of each pooled record): ties within bins, an empty-ish bin, unequal arms.
CASES = [
    ((3, 3, 3), [0, 0, 1, 1, 1, 2, 3, 3, 3]),
    ((2, 4, 3), [0, 1, 1, 1, 2, 2, 2, 2, 3]),
    ((3, 2, 2, 2), [0, 0, 0, 1, 2, 2, 3, 4, 4]),
    ((5, 5), [0, 0, 1, 1, 1, 1, 2, 3, 3, 3]),
]


def assignments(sizes: tuple[int, ...]) -> Iterator[list[int]]:
    """Every way to split records 0..N-1 into arms of ``sizes`` (the arm of each record)."""
    n = sum(sizes)

    def fill(left: list[int], arm: int) -> Iterator[list[int]]:
        if arm == len(sizes) - 1:
            yield [arm] * len(left)
            return
        for chosen in itertools.combinations(range(len(left)), sizes[arm]):
            rest = [x for i, x in enumerate(left) if i not in chosen]
            for tail in fill(rest, arm + 1):
                out = {left[i]: arm for i in chosen}
                out.update(zip(rest, tail, strict=True))
                yield [out[r] for r in left]

    yield from fill(list(range(n)), 0)


def table_of(arm_of: list[int], bins: list[int], k: int) -> np.ndarray:
    t = np.zeros((k, max(bins) + 1))
    for a, b in zip(arm_of, bins, strict=True):
        t[a, b] += 1
    return t


@pytest.mark.parametrize(("sizes", "bins"), CASES)
def test_table_tests_against_their_exact_permutation_laws(sizes: tuple[int, ...],
                                                           bins: list[int]) -> None:
    k = len(sizes)
    n = np.asarray(sizes, dtype=float)
    s_all, h_all, j_all = [], [], []
    first: kruskal.KruskalResult | None = None
    for i, arm_of in enumerate(assignments(sizes)):
        t = table_of(arm_of, bins, k)
        r = kruskal.table_test(t)
        first = first or r
        s_all.append(r.rank_sums)
        h_all.append(r.statistic)
        j_all.append(jonckheere.table_test(t).statistic)
        if i % 37 == 0:  # scipy on a spread of the assignments (it is the slow part)
            arms = [np.asarray([b for a, b in zip(arm_of, bins, strict=True) if a == g])
                    for g in range(k)]
            ref = stats.kruskal(*arms)
            assert r.statistic == pytest.approx(ref.statistic, rel=1e-12, abs=1e-12)
    assert first is not None
    count = len(h_all)
    assert count == math.prod(math.comb(sum(sizes[i:]), sizes[i]) for i in range(k))
    s = np.asarray(s_all)
    np.testing.assert_allclose(s.mean(axis=0), 0.0, atol=1e-12)
    cov = s.T @ s / count
    np.testing.assert_allclose(cov, first.covariance, rtol=1e-12, atol=1e-12)
    assert np.mean(h_all) == pytest.approx(k - 1, rel=1e-12)
    mean, var = jonckheere.null_moments(n, np.bincount(bins).astype(float))
    assert np.mean(j_all) == pytest.approx(mean, rel=1e-12)
    assert np.var(j_all) == pytest.approx(var, rel=1e-12)
