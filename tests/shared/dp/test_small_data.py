"""Every DP mechanism a DP-mode center runs, on no record and on a few (docs/privacy.md, "DP
mode"): each is defined there and returns what its definition says — checked against the
law the definition gives on empty data (seeded draws, so each check is deterministic; the
KS thresholds 1e-3 would fail a correct sampler with probability 1e-3 per fresh seed, never
on these fixed ones) — and DPBoxplot's outlier counts are ε/8-DP as one pair (the exact
privacy loss over every add/remove and swap neighbour of small data sets, the empty one
included)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shared.describe import dp_describe
from shared.dp import dp_boxplot
from shared.dp.approx_quantile import approx_quantiles
from shared.dp.boxplot import _finish, outlier_scale
from shared.dp.joint_exp import joint_exp
from shared.dp.pooled import center_extremes, threshold_counts, tree_histogram
from shared.dp.private_quantile import private_quantile
from shared.dp.unbounded import unbounded_quantile
from shared.privacy import PrivacySpent
from tests.shared.test_dp_exact_privacy import ADDED, DATASETS, laplace_loss, neighbours

BOUNDS = (0.0, 10.0)
EMPTY = np.empty(0)
DRAWS = 2000


def test_private_quantile_on_no_record_is_uniform_on_the_bounds() -> None:
    """n = 0: one interval, [a, b], every weight exp(−c·|0 − q·0|) = 1: uniform."""
    rng = np.random.default_rng(1)
    draws = [private_quantile(EMPTY, 0.3, epsilon=1.0, bounds=BOUNDS,
                              neighbouring="add_remove", rng=rng).values[0]
             for _ in range(DRAWS)]
    assert stats.kstest(draws, stats.uniform(0.0, 10.0).cdf).pvalue > 1e-3
    on_grid = {private_quantile(EMPTY, 0.5, epsilon=1.0, bounds=BOUNDS, neighbouring="add_remove",
                                rng=rng, resolution=1.0).values[0] for _ in range(400)}
    assert on_grid == {float(v) for v in range(11)}  # every grid point, none else


def test_joint_exp_on_no_record_is_uniform_on_ordered_tuples() -> None:
    """n = 0: every count and target is 0, the utility is 0 everywhere: uniform on
    {a <= u1 <= u2 <= u3 <= b}, whose j-th coordinate is (b − a)·Beta(j, 4 − j)."""
    rng = np.random.default_rng(2)
    draws = np.array([joint_exp(EMPTY, (0.25, 0.5, 0.75), epsilon=1.0, bounds=BOUNDS,
                                neighbouring="add_remove", rng=rng).values
                      for _ in range(DRAWS)])
    assert (np.diff(draws, axis=1) >= 0).all()
    for j in range(3):
        law = stats.beta(j + 1, 3 - j, scale=10.0)
        assert stats.kstest(draws[:, j], law.cdf).pvalue > 1e-3


@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("resolution", [None, 0.5])
def test_every_quantile_algorithm_answers_a_few_records(n: int, resolution: float | None
                                                        ) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(-3.0, 13.0, n)  # some beyond the bounds: clipped
    levels = (0.1, 0.5, 0.9)
    for _ in range(20):
        out = [joint_exp(x, levels, epsilon=0.5, bounds=BOUNDS, neighbouring="add_remove",
                         rng=rng, resolution=resolution).values,
               approx_quantiles(x, levels, epsilon=0.5, bounds=BOUNDS,
                                neighbouring="add_remove", rng=rng).values,
               tuple(private_quantile(x, q, epsilon=0.5, bounds=BOUNDS,
                                      neighbouring="add_remove", rng=rng,
                                      resolution=resolution).values[0] for q in levels),
               tuple(unbounded_quantile(x, q, epsilon=0.5, bounds=BOUNDS,
                                        neighbouring="add_remove", rng=rng).values[0]
                     for q in levels)]
        for values in out:
            assert all(BOUNDS[0] <= v <= BOUNDS[1] for v in values)
        assert list(out[0]) == sorted(out[0]) and list(out[1]) == sorted(out[1])


def test_the_walks_on_no_record_stop_on_their_noise() -> None:
    """n = 0: every count is 0 and the targets are t(0) = 0 (one-sided: 0 − √0/20); the walks
    still stop (the noise alone), within the bounds. The minimum's walk starts at b and the
    maximum's at a, so on no record they tend to cross (ψ_min > ψ_max): the pooled protocol's
    min and max over centers take no harm from it (an empty center's ψ's are the identities
    of min and max far more often than not)."""
    rng = np.random.default_rng(3)
    pairs = np.array([(e.psi_min, e.psi_max) for e in (
        center_extremes(EMPTY, epsilon=1.0, bounds=BOUNDS, neighbouring="add_remove", rng=rng)
        for _ in range(200))])
    assert ((pairs >= 0.0) & (pairs <= 10.0)).all()
    assert np.mean(pairs[:, 0] > pairs[:, 1]) > 0.5


def test_counts_on_no_record_are_their_noise() -> None:
    rng = np.random.default_rng(4)
    below = [threshold_counts(EMPTY, lower=3.0, upper=7.0, epsilon=1.0,
                              neighbouring="add_remove", rng=rng).below_noisy
             for _ in range(DRAWS)]
    assert stats.kstest(below, stats.laplace(0.0, 1.0).cdf).pvalue > 1e-3
    tree = tree_histogram(EMPTY, grid=BOUNDS, depth=2, branching=2, epsilon=1.0,
                          neighbouring="add_remove", rng=rng)
    assert [len(level) for level in tree.levels] == [1, 2, 4]


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_dp_boxplot_answers_a_few_records_under_add_remove(n: int) -> None:
    """Under add/remove any size is answered (the whisker buffer takes the public size): a
    box in order, within the bounds, outlier counts >= 0; on no record its quartiles are
    JointExp's uniform ordered triple."""
    rng = np.random.default_rng(10 + n)
    x = rng.uniform(0.0, 10.0, n)
    for resolution in (None, 1.0):
        for _ in range(20):
            box = dp_boxplot(x, epsilon=1.0, bounds=BOUNDS, neighbouring="add_remove", rng=rng,
                             n_public=8, resolution=resolution)
            five = (box.lower_whisker, box.q1, box.median, box.q3, box.upper_whisker)
            assert list(five) == sorted(five) and 0.0 <= five[0] and five[-1] <= 10.0
            assert box.lower_outliers >= 0 and box.upper_outliers >= 0
            assert box.outlier_scale == 8.0


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_dp_describe_answers_a_few_records(n: int) -> None:
    """The count, quartiles, sums and forest are defined on any n; the summary says what it
    cannot estimate (the mean below a noisy count of 1, the SD below 2) rather than fail."""
    rng = np.random.default_rng(20 + n)
    x = rng.uniform(0.0, 10.0, n)
    for resolution in (None, 1.0):
        for _ in range(20):
            d = dp_describe(x, epsilon=1.0, bounds=BOUNDS, bins=4, neighbouring="add_remove",
                            rng=rng, resolution=resolution)
            s = d.summary()
            assert s.n >= 0 and len(s.counts) == 4
            if s.mean is None:
                assert any("mean not estimable" in note for note in s.notes)
            else:
                assert 0.0 <= s.mean <= 10.0


# -- DPBoxplot's outlier counts: one pair, ε/8, at its sensitivity ----------------------------


def outlier_counts(s: tuple[float, ...], lower: float, upper: float) -> np.ndarray:
    """#{x < ℓ} and #{x > u}, from the definition."""
    return np.array([sum(v < lower for v in s), sum(v > upper for v in s)], dtype=float)


def test_the_outlier_counts_draw_at_the_stated_scale() -> None:
    """Given the whiskers (released), the counts are the two true counts plus Laplace at
    ``outlier_scale(ε/8)`` each, in that order: replayed from the same seed."""
    data = np.array([0.5, 1.0, 4.0, 6.0, 9.0, 9.5])
    for relation, scale in (("add_remove", 8.0), ("swap", 16.0)):
        result = _finish(data, 1.0, np.array([3.0, 5.0, 7.0]), 9.0, 8, BOUNDS, 1.0,
                         np.random.default_rng(7), [], "m", relation)
        assert result.outlier_scale == scale == outlier_scale(1.0 / 8.0, relation)
        assert dict(result.budget) == {"outlier counts (pair)": PrivacySpent(1.0 / 8.0)}
        z = np.random.default_rng(7).laplace(0.0, scale, 2)
        exact = outlier_counts(tuple(data), result.lower_whisker, result.upper_whisker)
        assert result.lower_outliers == max(0, round(exact[0] + z[0]))
        assert result.upper_outliers == max(0, round(exact[1] + z[1]))


@pytest.mark.parametrize("noise", ["as_implemented", "twice_epsilon"])
def test_the_outlier_pair_is_eps_over_8_dp_under_add_remove(noise: str) -> None:
    """The two counted sets are disjoint (ℓ <= u): an added or removed record moves one count
    by 1, so the pair's L1 sensitivity is 1 and Laplace(8/ε) on each is ε/8-DP, attained; at
    the scale of 2·(ε/8) the loss doubles. Every neighbour of small data sets, the empty one
    included, for whiskers at, between and beyond the values."""
    eps_pair = 1.0 / 8.0
    scale = outlier_scale(eps_pair, "add_remove")
    if noise == "twice_epsilon":
        scale /= 2
    worst = 0.0
    for lower, upper in ((3.0, 6.0), (4.0, 4.0), (0.0, 10.0), (2.0, 9.9)):
        for d in DATASETS:
            for other in neighbours(d):
                worst = max(worst, laplace_loss(outlier_counts(d, lower, upper),
                                                outlier_counts(other, lower, upper), scale))
    if noise == "as_implemented":
        assert eps_pair - 1e-6 <= worst <= eps_pair + 1e-9
    else:
        assert worst >= 2 * eps_pair - 1e-6


def test_the_outlier_pair_under_swap_needs_twice_the_scale() -> None:
    """Under swap a record moved from below ℓ to above u moves both counts: Δ = 2, the scale
    16/ε keeps the pair ε/8-DP, and at 8/ε it would be ε/4."""
    eps_pair = 1.0 / 8.0
    lower, upper = 3.0, 6.0
    for scale, loss in ((outlier_scale(eps_pair, "swap"), eps_pair),
                        (outlier_scale(eps_pair, "add_remove"), 2 * eps_pair)):
        worst = 0.0
        for d in DATASETS:
            for i in range(len(d)):
                for v in ADDED:
                    other = tuple(sorted((*d[:i], *d[i + 1:], v)))
                    worst = max(worst, laplace_loss(outlier_counts(d, lower, upper),
                                                    outlier_counts(other, lower, upper), scale))
        assert loss - 1e-6 <= worst <= loss + 1e-9
