import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.binning import KAnonymityError, bin_table, cap_bins, randomized_limits
from shared.protocol import MAX_LIMITS
from shared.releases import canonical_table
from tests.helpers.kanon import bin_counts, is_k_anonymous


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# Values on a 1/1000 grid: plenty of ties, never two adjacent doubles (see the dedicated test).
values = st.integers(-3000, 3000).map(lambda i: i / 1000)
coarse = st.integers(-20, 20).map(float)


@st.composite
def group(draw, k, elements):
    n = draw(st.one_of(st.just(0), st.integers(k, 6 * k)))
    return np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=float)


@st.composite
def two_groups(draw):
    k = draw(st.integers(2, 50))
    elements = draw(st.sampled_from([values, coarse]))
    x = draw(group(k, elements))
    y = draw(group(k, elements))
    if x.size + y.size == 0:
        x = np.arange(float(k))
    return k, x, y


def check_table(table, groups, k):
    assert np.all(np.diff(table.limits) > 0), "limits must increase strictly"
    pooled = np.concatenate(groups)
    assert table.limits[0] <= pooled.min() and table.limits[-1] >= pooled.max()
    assert not np.isin(table.limits[1:-1], pooled).any(), "an interior limit is a data value"
    for g, v in enumerate(groups):
        # The released counts are the true counts of the released limits...
        np.testing.assert_array_equal(table.counts[g], bin_counts(table.limits, v))
        # ... and every one of them is 0 or >= k.
        assert is_k_anonymous(table.counts[g], k)
        assert table.counts[g].sum() == v.size


@pytest.mark.slow  # a Hypothesis property over many examples: seconds, for the CI run
@settings(max_examples=300, deadline=None)
@given(two_groups(), st.integers(0, 2**32 - 1))
def test_two_group_tables_are_k_anonymous(case, seed):
    k, x, y = case
    table = bin_table(x, y, k=k, rng=rng(seed))
    check_table(table, [x, y], k)


@pytest.mark.slow  # a Hypothesis property over many examples: seconds, for the CI run
@settings(max_examples=300, deadline=None)
@given(st.integers(2, 50), st.data(), st.integers(0, 2**32 - 1))
def test_one_group_tables_are_k_anonymous(k, data, seed):
    elements = data.draw(st.sampled_from([values, coarse]))
    n = data.draw(st.integers(k, 6 * k))
    x = np.array(data.draw(st.lists(elements, min_size=n, max_size=n)))
    table = bin_table(x, k=k, rng=rng(seed), lower="infinite", upper="infinite")
    assert table.n_groups == 1
    assert table.limits[0] == -np.inf and table.limits[-1] == np.inf
    check_table(table, [x], k)


def test_end_of_data_rule():
    # docs/methods.md §1.2: 39 values give bins of 10, 10 and 19 (the authors' code: 10 and 29).
    table = bin_table(np.arange(39.0), k=10, rng=rng())
    np.testing.assert_array_equal(table.counts, [[10, 10, 19]])
    # Fewer than 2K left: the rest is one bin; exactly 2K: two bins of K.
    np.testing.assert_array_equal(bin_table(np.arange(20.0), k=10, rng=rng()).counts, [[10, 10]])
    np.testing.assert_array_equal(bin_table(np.arange(19.0), k=10, rng=rng()).counts, [[19]])


def test_ties_stay_in_one_bin():
    x = np.r_[np.arange(5.0), np.full(12, 5.0), np.arange(6.0, 16.0)]
    table = bin_table(x, k=10, rng=rng())
    # The 10th value is a 5, and every 5 joins its bin: 17 then the 10 remaining.
    np.testing.assert_array_equal(table.counts, [[17, 10]])
    assert 5.0 < table.limits[1] < 6.0


def test_two_group_rule_takes_the_larger_candidate_when_the_smaller_splits_a_group():
    x = np.arange(25.0)  # candidate 9
    y = np.arange(30.0) + 0.5  # candidate 9.5; 9 would leave 9 y's in the first bin
    table = bin_table(x, y, k=10, rng=rng())
    np.testing.assert_array_equal(table.counts, [[10, 15], [10, 20]])
    assert 9.5 < table.limits[1] < 10.0


def test_randomized_limits_use_a_fresh_w_per_limit():
    below = np.arange(1000.0)
    c = randomized_limits(below, below + 1, rng(3))
    w = c - below
    assert np.all((w > 0) & (w < 1))
    assert len(np.unique(w)) == 1000
    # Fresh uniform w: the fractional offsets look uniform.
    from scipy import stats

    assert stats.kstest(w, "uniform").pvalue > 1e-3


def test_adjacent_doubles_fall_back_to_the_lower_value():
    a = np.array([1.0])
    v = np.nextafter(a, 2.0)
    np.testing.assert_array_equal(randomized_limits(a, v, rng()), a)


def test_extreme_limits():
    x = np.r_[np.linspace(1, 2, 10), np.linspace(5, 9, 10)]
    buffered = bin_table(x, k=10, rng=rng(), lower="buffer", upper="buffer")
    # Moved out by (1/2 + w) times the mean gap of the 10 most extreme records, w ~ U(0, 1):
    # (2 - 1)/9 below, (9 - 5)/9 above (on average the seed's buffer, never a fixed function
    # of the data).
    assert 1 - 1.5 / 9 <= buffered.limits[0] <= 1 - 0.5 / 9
    assert 9 + 0.5 * 4 / 9 <= buffered.limits[-1] <= 9 + 1.5 * 4 / 9
    natural = bin_table(x, k=10, rng=rng(), lower=0.0, upper="infinite")
    assert natural.limits[0] == 0.0 and natural.limits[-1] == np.inf
    # A natural limit is public: values beyond it are counted in the extreme bin, never refused
    # (a refusal would tell where the minimum is).
    clipped = bin_table(x, k=10, rng=rng(), lower=1.5)
    assert clipped.limits[0] == 1.5 and clipped.counts.sum() == 20
    everything = bin_table(x, k=10, rng=rng(), lower=50.0)
    assert everything.limits[0] == 50.0 and everything.limits[-1] == np.inf
    assert everything.counts.tolist() == [[20.0]]
    with pytest.raises(ValueError, match="natural limits"):
        bin_table(x, k=10, rng=rng(), lower=5.0, upper=4.0)
    with pytest.raises(ValueError, match="`upper` must be 'infinite', 'buffer' or a finite"):
        bin_table(x, k=10, rng=rng(), upper="none")


def test_a_buffer_is_never_a_data_value():
    """Extreme bins whose values are all equal: the buffer falls back to the mean gap of all the
    values (a zero gap would put a data value in the table); one distinct value: open ends."""
    x = np.r_[np.full(10, 3.0), np.linspace(4, 5, 10), np.full(10, 7.0)]
    table = bin_table(x, k=10, rng=rng())
    gap = (7.0 - 3.0) / 29
    assert 3.0 - 1.5 * gap <= table.limits[0] <= 3.0 - 0.5 * gap
    assert 7.0 + 0.5 * gap <= table.limits[-1] <= 7.0 + 1.5 * gap
    single = bin_table(np.full(12, 2.0), k=10, rng=rng())
    assert single.limits.tolist() == [-np.inf, np.inf]


def test_small_groups_are_refused():
    with pytest.raises(KAnonymityError, match="group 1 holds 3 records"):
        bin_table(np.arange(20.0), np.arange(3.0), k=10, rng=rng())
    with pytest.raises(ValueError, match="`k` must be an integer >= 2"):
        bin_table(np.arange(20.0), k=1, rng=rng())
    with pytest.raises(ValueError, match="NaN or infinite"):
        bin_table(np.r_[np.arange(20.0), np.nan], k=10, rng=rng())
    with pytest.raises(ValueError, match=r"`rng` must be a numpy\.random\.Generator"):
        bin_table(np.arange(20.0), k=10, rng=0)  # type: ignore[arg-type]


def test_same_seed_same_table():
    x = rng(5).normal(size=500)
    a = bin_table(x, k=10, rng=rng(9))
    b = bin_table(x, k=10, rng=rng(9))
    np.testing.assert_array_equal(a.limits, b.limits)


@pytest.mark.slow  # a Hypothesis property over many examples: seconds, for the CI run
@settings(max_examples=200, deadline=None)
@given(two_groups(), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_capped_tables_stay_k_anonymous_views_of_the_table(case, max_bins, seed):
    k, x, y = case
    table = bin_table(x, y, k=k, rng=rng(seed))
    capped = cap_bins(table, max_bins)
    assert capped.n_bins <= max_bins
    assert set(capped.limits.tolist()) <= set(table.limits.tolist())
    check_table(capped, [x, y], k)


def test_a_large_center_table_is_capped_at_what_a_peer_accepts():
    # 3·10^5 records at K = 2 bin into more than MAX_LIMITS bins; the stored table is capped,
    # so its statement and every refinement of it validate.
    values = np.random.default_rng(1).normal(size=300_000)
    table = canonical_table([values], 2, rng(2))
    assert bin_table(values, k=2, rng=rng(2)).n_bins > MAX_LIMITS >= table.n_bins
    check_table(table, [values], 2)
