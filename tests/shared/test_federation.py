from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.binning import BinTable, KAnonymityError, bin_table
from shared.federation import apply_refinement, federated_table, refine_table
from shared.protocol import BinTableRelease, RefinementRelease
from tests.helpers.kanon import bin_counts, is_k_anonymous


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class TestSeedWorkedExample:
    """Seed 001 appendix, Table 2: K = 10, current limits 0 < 2 < 4 < 6 < 8.

    The seed gives the numbers that matter: the new center holds x counts 3 and 7 in (0, 2] and
    (2, 4], y count 4 in (0, 2]; it has >= 20 values of each group in (4, 6], splitting it into
    two sub-bins of 10 and 10; the existing (4, 6] counts 10 (x) and 14 (y) are shared 5/5 and
    7/7; the x run (0, 4] of total 3 + 7 = 10 is spread by the existing x counts 12 and 10 as
    10·12/22 and 10·10/22 (printed 5.46 and 4.54 in the seed, i.e. 5.4545 and 4.5454 truncated
    to sum to 10); the y run (0, 4] of total 14 is spread 7/7 over equal existing y counts.
    The counts the seed does not print (existing y in (0, 4], the bin (6, 8]) are our choice.
    """

    table = BinTable(
        limits=np.array([0.0, 2, 4, 6, 8]),
        counts=np.array([[12.0, 10, 10, 11], [10.0, 10, 14, 12]]),
        k=10,
    )
    x = np.r_[np.linspace(0.5, 1.5, 3), np.linspace(2.5, 3.5, 7), np.linspace(4.1, 4.9, 10),
              np.linspace(5.1, 5.9, 10)]
    y = np.r_[np.linspace(0.5, 1.5, 4), np.linspace(2.5, 3.5, 10), np.linspace(4.15, 4.95, 10),
              np.linspace(5.15, 5.95, 10)]

    def test_new_center_release(self):
        release = refine_table(self.table.limits, self.x, self.y, k=10, rng=rng())
        assert release.split_bins == [2]
        (cut,) = release.split_limits
        assert 4.95 < cut < 5.1  # between the last value of the first sub-bin and the next
        # x: the run {(0,2], (2,4]} totals 10; the two sub-bins of (4, 6] hold 10 each.
        rx, ry = release.runs
        assert rx.run_of_cell[0] == rx.run_of_cell[1]
        assert sorted(rx.totals) == [0.0, 10.0, 10.0, 10.0]
        assert ry.run_of_cell[0] == ry.run_of_cell[1]
        assert sorted(ry.totals) == [0.0, 10.0, 10.0, 14.0]
        assert release.lower is None and release.upper is None

    def test_federated_counts(self):
        release = refine_table(self.table.limits, self.x, self.y, k=10, rng=rng())
        merged = apply_refinement(self.table, release)
        added = merged.counts - np.array([[12, 10, 5, 5, 11], [10, 10, 7, 7, 12]])
        np.testing.assert_allclose(added[0], [120 / 22, 100 / 22, 10, 10, 0], rtol=1e-12)
        np.testing.assert_allclose(added[1], [7, 7, 10, 10, 0], rtol=1e-12)
        # The seed's rounded figures.
        assert added[0, 0] == pytest.approx(5.46, abs=0.006)
        assert added[0, 1] == pytest.approx(4.54, abs=0.006)
        np.testing.assert_allclose(merged.limits[[0, 1, 2, 4, 5]], [0, 2, 4, 6, 8])


values = st.integers(-2000, 2000).map(lambda i: i / 100)


@st.composite
def centers(draw):
    k = draw(st.integers(2, 50))
    n_centers = draw(st.integers(2, 4))
    out = []
    for _ in range(n_centers):
        shift = draw(st.integers(-10, 10))
        sizes = [draw(st.one_of(st.just(0), st.integers(k, 5 * k))) for _ in range(2)]
        if sum(sizes) == 0:
            sizes[0] = k
        out.append(
            tuple(
                np.array(draw(st.lists(values, min_size=n, max_size=n))) + shift for n in sizes
            )
        )
    return k, out


@pytest.mark.slow  # a Hypothesis property over many examples: seconds, for the CI run
@settings(max_examples=150, deadline=None)
@given(centers(), st.integers(0, 2**32 - 1))
def test_every_refinement_step_releases_only_k_anonymous_numbers(case, seed):
    k, data = case
    g = rng(seed)
    data.sort(key=lambda c: -(c[0].size + c[1].size))
    table = bin_table(*data[0], k=k, rng=g)
    seen = [data[0]]
    for x, y in data[1:]:
        release = refine_table(table.limits, x, y, k=k, rng=g)
        # Wire round trip: the coordinator sees exactly the JSON.
        wire = RefinementRelease.from_result(release).model_dump_json()
        release = RefinementRelease.model_validate_json(wire).to_result()
        table_after = apply_refinement(table, release)
        limits = table_after.limits
        for grp, v in enumerate((x, y)):
            runs = release.runs[grp]
            totals = np.asarray(runs.totals)
            # Every released total is 0 or >= k ...
            assert is_k_anonymous(totals, k)
            # ... and is the true count of the center's records in the run's cells.
            per_cell = bin_counts(limits, v)
            np.testing.assert_array_equal(
                np.bincount(runs.run_of_cell, weights=per_cell, minlength=totals.size), totals
            )
        seen.append((x, y))
        table = table_after
        assert np.all(np.diff(table.limits) > 0)
        for grp in range(2):
            total = sum(c[grp].size for c in seen)
            assert table.counts[grp].sum() == pytest.approx(total, abs=1e-9)
            assert np.all(table.counts[grp] >= 0)
        pooled = np.concatenate([np.concatenate(c) for c in seen])
        assert table.limits[0] <= pooled.min() and table.limits[-1] >= pooled.max()
        assert not np.isin(table.limits[1:-1], pooled).any()


def test_split_cells_are_never_absorbed_into_runs():
    # A new center with 3 x-values in bin 0 and 20 in bin 1 (which it can split): the run of the
    # 3 may not take in a split sub-cell whose count is released, so the splits are dropped.
    table = bin_table(np.r_[np.linspace(0, 1, 10), np.linspace(2, 3, 10)], k=10, rng=rng())
    x = np.r_[[0.1, 0.2, 0.3], np.linspace(2.05, 2.95, 20)]
    release = refine_table(table.limits, x, k=10, rng=rng())
    assert release.split_bins == [] and release.split_limits == []
    assert sorted(release.runs[0].totals) == [23.0]


def test_refinement_moves_extreme_limits_by_the_buffer_rule():
    table = bin_table(np.linspace(0, 1, 20), k=10, rng=rng())
    x = np.linspace(-1, 2, 12)  # beyond both ends
    release = refine_table(table.limits, x, k=10, rng=rng())
    assert release.lower is not None and release.lower < -1
    assert release.upper is not None and release.upper > 2
    merged = apply_refinement(table, release)
    assert merged.limits[0] == release.lower and merged.limits[-1] == release.upper


def test_bad_releases_are_refused():
    table = bin_table(np.linspace(0, 1, 20), np.linspace(0, 1, 20), k=10, rng=rng())
    good = refine_table(table.limits, np.linspace(0, 1, 10), np.linspace(0, 1, 10), k=10,
                        rng=rng())
    bad_total = replace(good, runs=[replace(good.runs[0], totals=[3.0]), good.runs[1]])
    with pytest.raises(ValueError, match="between 1 and k-1"):
        apply_refinement(table, bad_total)
    with pytest.raises(ValueError, match="made for k=5"):
        apply_refinement(table, replace(good, k=5))
    with pytest.raises(ValueError, match="runs do not cover"):
        apply_refinement(
            table,
            replace(good, runs=[replace(good.runs[0], run_of_cell=[]), good.runs[1]]),
        )
    with pytest.raises(ValueError, match="lie strictly inside their bins"):
        apply_refinement(table, replace(good, split_bins=[0], split_limits=[99.0]))
    with pytest.raises(ValueError, match="same length"):
        RefinementRelease(k=10, split_bins=[0], split_limits=[],
                          runs=RefinementRelease.from_result(good).runs)
    with pytest.raises(KAnonymityError):
        refine_table(table.limits, np.arange(4.0), np.arange(20.0), k=10, rng=rng())
    with pytest.raises(ValueError, match="strictly increasing"):
        refine_table([0.0, 0.0], np.arange(20.0), k=10, rng=rng())


def test_federated_table_equals_single_center_table_for_one_center():
    x, y = rng(1).normal(size=200), rng(2).normal(size=150)
    a = federated_table([(x, y)], k=10, rng=rng(3))
    b = bin_table(x, y, k=10, rng=rng(3))
    np.testing.assert_array_equal(a.limits, b.limits)
    np.testing.assert_array_equal(a.counts, b.counts)


def test_table_wire_model_round_trip():
    t = bin_table(np.arange(30.0), k=10, rng=rng(), lower="infinite", upper="infinite")
    wire = BinTableRelease.from_table(t)
    back = BinTableRelease.model_validate_json(wire.model_dump_json()).to_table()
    np.testing.assert_array_equal(back.limits, t.limits)
    with pytest.raises(ValueError, match="strictly increasing"):
        BinTableRelease(limits=[1.0, 0.0], counts=[[10.0]], k=10)
    with pytest.raises(ValueError, match="negative or non-finite"):
        BinTableRelease(limits=[0.0, 1.0], counts=[[-1.0]], k=10)
