import math

import numpy as np
import pytest

from shared.dp.approx_quantile import approx_quantiles, approx_quantiles_sorted
from shared.privacy import PrivacySpent


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
