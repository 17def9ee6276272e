"""The report says which law each Mann-Whitney p-value comes from
(``coordinator.reporting.report``):
N(0, 1), U's exact law for small centers, the exact law of normal + Laplace noise for noisy
releases — never "z" for a p-value that the normal law did not give."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from coordinator.protocols.mwu import FederatedMWU
from coordinator.reporting.report import render_html, summary
from coordinator.results import mwu_result
from shared.mechanisms import Laplace
from shared.mwu import fisher_test, mann_whitney, sum_test, weighted_test
from shared.protocol import MWURelease


def _view(sizes: list[tuple[int, int]], epsilon: float | None) -> dict[str, Any]:
    g = np.random.default_rng(1)
    releases = {}
    for i, (n, m) in enumerate(sizes):
        noise = Laplace(epsilon, 2.0 * max(n, m)) if epsilon is not None else None
        releases[f"c{i}"] = MWURelease.from_result(
            mann_whitney(g.normal(size=n), g.normal(0.5, size=m), noise=noise, rng=g))
    parts = [r.to_result() for r in releases.values()]
    tests = {t.__name__.removesuffix("_test"): t(parts)
             for t in (sum_test, weighted_test, fisher_test)}
    fed = FederatedMWU(tests, tuple(releases), releases, None, ())
    analysis = mwu_result(fed, "two-sided").model_dump(mode="json")
    return {"id": "s", "status": "succeeded", "created_at": "2026-12-02T00:00:00Z",
            "spec": {"dataset": "d", "variable": "v", "groups": ["a", "b"], "k": 10,
                     "analyses": []},
            "error": None, "provenance": [],
            "result": {"centers": list(releases), "excluded": [], "analyses": [analysis]}}


def test_noisy_tests_name_the_exact_normal_plus_laplace_law() -> None:
    view = _view([(60, 70), (80, 50)], epsilon=0.5)
    tests = view["result"]["analyses"][0]["tests"]
    assert [tests[t]["null"] for t in ("sum", "weighted", "fisher")] == [
        "normal+noise", "normal+noise", "chi2"]
    for shown in (summary(view), html.unescape(render_html(view))):
        assert "z; p from N(0, V) + Laplace noise, exact" in shown
        assert "χ²(4) of the centers' p-values from N(0, V) + Laplace noise, exact" in shown
        assert "p from N(0, 1)" not in shown


def test_small_centers_name_us_exact_law_and_large_ones_the_normal() -> None:
    view = _view([(10, 12), (60, 70)], epsilon=None)
    tests = view["result"]["analyses"][0]["tests"]
    assert [p["null"] for p in tests["fisher"]["parts"]] == ["exact", "normal"]
    shown = summary(view)
    assert "sum" in shown and "z; p from N(0, 1)" in shown  # the sum of a mixture: normal
    assert "χ²(4) of the centers' p-values from N(0, 1) / U's exact permutation law" in shown
    small = summary(_view([(10, 12), (8, 9)], epsilon=None))
    assert "z; p from U's exact permutation law" in small  # the sum by convolution


def test_small_noisy_centers_name_us_exact_law_plus_the_noise() -> None:
    view = _view([(10, 12), (60, 70)], epsilon=1.0)
    tests = view["result"]["analyses"][0]["tests"]
    assert [p["null"] for p in tests["fisher"]["parts"]] == ["exact+noise", "normal+noise"]
    shown = summary(view)
    assert ("χ²(4) of the centers' p-values from N(0, V) + Laplace noise, exact / U's exact "
            "law + Laplace noise, exact") in shown


def test_a_small_tied_center_is_exact_and_its_tails_are_checked() -> None:
    """A tied small center's p-value comes from the exact tails it released (the report names
    U's exact law); tails that cannot be, or tails beside noise, make the center implausible."""
    import pytest

    from coordinator.core.errors import CenterFailure
    from coordinator.protocols.mwu import check_mwu_release

    g = np.random.default_rng(3)
    tied = MWURelease.from_result(mann_whitney(g.integers(0, 4, 12).astype(float),
                                               g.integers(0, 4, 14).astype(float)))
    assert tied.exact_log_tails is not None
    check_mwu_release("c", tied, k=10, bounds=(12, 14))
    fisher = fisher_test([tied.to_result()])
    assert fisher.parts[0].null == "exact"
    bad = tied.model_copy(update={"exact_log_tails": [0.5, -0.1]})
    with pytest.raises(CenterFailure, match="outside"):
        check_mwu_release("c", bad, k=10, bounds=(12, 14))
    noisy = MWURelease.from_result(mann_whitney(
        g.normal(size=12), g.normal(size=14), noise=Laplace(1.0, 28.0), rng=g))
    with pytest.raises(CenterFailure, match="beside noise"):
        check_mwu_release("c", noisy.model_copy(update={"exact_log_tails": [-1.0, -0.2]}),
                          k=10, bounds=(12, 14), epsilon=1.0)
