import math

import numpy as np
import pytest

from shared.dp.approx_quantile import approx_quantiles, approx_quantiles_sorted
from shared.privacy import PrivacySpent
from tests.helpers import brute


def test_result_is_sorted_accurate_and_accounted():
    rng = np.random.default_rng(0)
    x = rng.normal(size=20_000)
    levels = (0.1, 0.25, 0.5, 0.75, 0.9)
    res = approx_quantiles(
        x, levels, epsilon=2.0, bounds=(-50, 50), neighbouring="add_remove", rng=rng
    )
    assert res.spent == PrivacySpent(2.0)
    assert list(res.values) == sorted(res.values)
    np.testing.assert_allclose(res.values, np.quantile(x, levels), atol=0.05)


class _Recorder:
    """Wraps PrivateQuantile to record each call's budget, relation and bounds."""

    def __init__(self, monkeypatch):
        import shared.dp.approx_quantile as mod

        self.calls = []
        real = mod.private_quantile_sorted

        def spy(data, q, eps, bounds, relation, rng, size=1):
            self.calls.append((eps, relation, bounds, data.size))
            return real(data, q, eps, bounds, relation, rng, size)

        monkeypatch.setattr(mod, "private_quantile_sorted", spy)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("neighbouring", ["add_remove", "swap"])
def test_each_depth_costs_at_most_eps_per_call_budget(monkeypatch, m, neighbouring):
    rec = _Recorder(monkeypatch)
    eps = 1.0
    levels = tuple((np.arange(m) + 1) / (m + 1))
    approx_quantiles_sorted(
        np.linspace(0, 1, 101), levels, eps, (0.0, 1.0), neighbouring, np.random.default_rng(m)
    )
    per_call = eps / (math.ceil(math.log2(m)) + 1)
    assert len(rec.calls) == m
    top = rec.calls[0]
    assert top[:2] == (per_call, neighbouring)
    for e, relation, _, _ in rec.calls[1:]:
        assert relation == "add_remove"
        assert e == (per_call if neighbouring == "add_remove" else per_call / 2)
    # Parallel composition: sibling calls see disjoint parts of the data, inside their bounds.
    assert top[3] == 101
    assert all(size <= 101 for *_, size in rec.calls)


def test_bad_levels():
    with pytest.raises(ValueError, match="strictly increasing"):
        approx_quantiles(
            [1.0, 2.0],
            [0.5, 0.5],
            epsilon=1,
            bounds=(0, 3),
            neighbouring="swap",
            rng=np.random.default_rng(0),
        )


def _approx_log_density(x, levels, eps, neighbouring, out):
    """Density of ApproxQuantile's output (m = 2 or 3) from PrivateQuantile's density (brute)."""
    a, b = 0.0, 1.0
    m = len(levels)
    per_call = eps / (math.ceil(math.log2(m)) + 1)
    child_eps = per_call if neighbouring == "add_remove" else per_call / 2
    mid = m // 2
    q_mid = levels[mid]
    top_delta = 1.0 if neighbouring == "swap" else max(q_mid, 1 - q_mid)
    v = out[mid]
    logd = brute.pq_log_density(x, a, b, q_mid, per_call, top_delta, v)
    left = [x_ for x_ in x if x_ <= v]
    right = [x_ for x_ in x if x_ > v]
    if mid >= 1:
        q = levels[0] / q_mid
        logd += brute.pq_log_density(left, a, v, q, child_eps, max(q, 1 - q), out[0])
    if m - mid - 1 >= 1:
        q = (levels[-1] - q_mid) / (1 - q_mid)
        logd += brute.pq_log_density(right, v, b, q, child_eps, max(q, 1 - q), out[-1])
    return logd


@pytest.mark.parametrize("levels", [(0.3, 0.7), (0.25, 0.5, 0.75)])
@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("neighbouring", ["swap", "add_remove"])
def test_neighbouring_densities_within_e_eps(levels, eps, neighbouring):
    """Densities on neighbouring data at 1500 random output tuples, from Smith's density.

    A sanity check (the worst ratio here is about e^(ε/2)); the budget split itself is pinned
    by test_each_depth_costs_at_most_eps_per_call_budget.
    """
    rng = np.random.default_rng(17)
    base = [0.12, 0.35, 0.35, 0.6, 0.81]
    if neighbouring == "swap":
        others = [[0.12, 0.35, 0.9, 0.6, 0.81], [0.7, 0.35, 0.35, 0.6, 0.81]]
    else:
        others = [[*base, 0.5], [*base, 0.05], base[1:]]
    points = np.sort(rng.uniform(0, 1, size=(1500, len(levels))), axis=1)
    for other in others:
        worst = max(
            abs(
                _approx_log_density(base, levels, eps, neighbouring, p)
                - _approx_log_density(other, levels, eps, neighbouring, p)
            )
            for p in points
        )
        assert worst <= eps + 1e-9
