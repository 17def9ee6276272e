"""Tukey's whiskers read off the pooled tree (``shared.dp.pooled.tukey_whiskers``,
docs/methods.md §6.5) against Tukey's rule on the raw records: exact histograms (no noise, h = 0)
give Tukey's whiskers up to the leaf; round 3 counts beyond the fences."""

from __future__ import annotations

import numpy as np
import pytest

from shared.dp.pooled import (
    grid_edges,
    harmonic,
    pooled_boxplot,
    tukey_whiskers,
)

N_LEAVES = 1024


def tukey(x: np.ndarray, q1: float, q3: float) -> tuple[float, float]:
    """Tukey's whiskers at the given quartiles: the most extreme records inside the fences."""
    iqr = q3 - q1
    return float(x[x >= q1 - 1.5 * iqr].min()), float(x[x <= q3 + 1.5 * iqr].max())


def exact(x: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    edges = grid_edges(lo, hi, N_LEAVES)
    return np.histogram(x, bins=edges)[0].astype(float), edges


def fence_leaf_blind(x: np.ndarray, edges: np.ndarray, fence: float, upper: bool) -> bool:
    """The one case the leaf cannot tell: the fence's own leaf holds records, all beyond it."""
    j = int(np.clip(np.searchsorted(edges, fence, side="right") - 1, 0, edges.size - 2))
    inside = x[(x >= edges[j]) & (x <= edges[j + 1])]
    return inside.size > 0 and bool((inside > fence).all() if upper else (inside < fence).all())


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("law", ["normal", "lognormal", "uniform", "gappy"])
def test_exact_histogram_gives_tukeys_whiskers_up_to_the_leaf(law: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = {"normal": lambda: rng.normal(50, 10, 900),
         "lognormal": lambda: rng.lognormal(0, 1, 900),
         "uniform": lambda: rng.uniform(0, 10, 900),
         # a gap just inside the upper fence: Tukey's whisker far below it
         "gappy": lambda: np.concatenate([rng.uniform(0, 10, 880), rng.uniform(40, 60, 20)]),
         }[law]()
    q1, q3 = (float(v) for v in np.quantile(x, [0.25, 0.75]))
    lo, hi = float(x.min()) - 1.0, float(x.max()) + 1.0
    leaves, edges = exact(x, lo, hi)
    width = edges[1] - edges[0]
    got = tukey_whiskers(leaves, edges, q1, q3, bounds=(lo - 100, hi + 100), halfwidth=0.0)
    want_lo, want_hi = tukey(x, q1, q3)
    assert got.lower_fence == pytest.approx(q1 - 1.5 * (q3 - q1))
    assert got.upper_fence == pytest.approx(q3 + 1.5 * (q3 - q1))
    if fence_leaf_blind(x, edges, got.upper_fence, upper=True):
        assert got.upper == pytest.approx(got.upper_fence)  # documented: the fence
    else:
        assert abs(got.upper - want_hi) <= width
    if fence_leaf_blind(x, edges, got.lower_fence, upper=False):
        assert got.lower == pytest.approx(got.lower_fence)
    else:
        assert abs(got.lower - want_lo) <= width
    # records that end inside the fence: the whisker is the tree's most extreme record
    if x.max() < got.upper_fence - width:
        assert got.upper_branch == "record"
    if x.min() > got.lower_fence + width:
        assert got.lower_branch == "record"


def test_short_tails_end_at_the_data_and_long_ones_at_the_fence() -> None:
    # Uniform data: both fences lie beyond the data, the whiskers are its extremes.
    x = np.linspace(0.0, 10.0, 2001)
    leaves, edges = exact(x, -20.0, 30.0)
    got = tukey_whiskers(leaves, edges, 2.5, 7.5, bounds=(-20.0, 30.0), halfwidth=0.0)
    width = edges[1] - edges[0]
    assert (got.lower_branch, got.upper_branch) == ("record", "record")
    assert abs(got.lower - 0.0) <= width and abs(got.upper - 10.0) <= width
    # Records beyond both fences, densely up to them: the whiskers are the fences.
    y = np.linspace(-20.0, 30.0, 5001)
    leaves, edges = exact(y, -20.0, 30.0)
    got = tukey_whiskers(leaves, edges, 2.5, 7.5, bounds=(-20.0, 30.0), halfwidth=0.0)
    assert (got.lower_branch, got.upper_branch) == ("fence", "fence")
    assert (got.lower, got.upper) == pytest.approx((-5.0, 15.0))


def test_the_extrapolated_end_on_an_exponential_tail() -> None:
    # An exact exponential tail beyond e_h: S(v) = N·exp(−v) above v, so e_h = ln(N/h),
    # e_2h = ln(N/2h), μ = 1 and the end is e_h + H_h, the expected maximum of N Exp(1)
    # (= H_N, up to the leaf): Rényi's representation.
    n, h = 20000, 50.0
    x = -np.log1p(-(np.arange(n) + 0.5) / n)  # Exp(1) quantiles
    leaves, edges = exact(x, 0.0, 40.0)
    got = tukey_whiskers(leaves, edges, float(np.log(4 / 3)), float(np.log(4)),
                         bounds=(0.0, 40.0), halfwidth=h)
    # Q3 + 1.5 IQR = ln 4 + 1.5 ln 3 ≈ 3.03 is well inside: the fence.
    assert got.upper_branch == "fence" and got.upper == pytest.approx(got.upper_fence)
    wide = tukey_whiskers(leaves, edges, 0.0, 5.0, bounds=(0.0, 40.0), halfwidth=h)  # f_hi 12.5
    assert wide.upper_branch == "record"
    expected = np.log(n / h) + (np.log(n / h) - np.log(n / (2 * h))) / np.log(2) * harmonic(h)
    assert wide.upper == pytest.approx(expected, abs=2 * (edges[1] - edges[0]))
    assert harmonic(3) == pytest.approx(1 + 1 / 2 + 1 / 3) and harmonic(0.2) == 1.0


def test_noise_larger_than_the_tails_leaves_the_fences() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(0.0, 1.0, 300)
    leaves, edges = exact(x, -10.0, 10.0)
    got = tukey_whiskers(leaves, edges, -0.67, 0.67, bounds=(-10.0, 10.0), halfwidth=200.0)
    assert (got.lower_branch, got.upper_branch) == ("fence", "fence")
    assert (got.lower, got.upper) == pytest.approx((-0.67 - 2.01, 0.67 + 2.01))


def test_whiskers_stay_between_the_bounds_and_the_box() -> None:
    x = np.linspace(0.0, 10.0, 1001)
    leaves, edges = exact(x, 0.0, 10.0)
    got = tukey_whiskers(leaves, edges, 2.0, 8.0, bounds=(0.0, 10.0), halfwidth=0.0)
    # fences at −7 and 17 are clamped to the bounds (the records were clipped to them)
    assert (got.lower_fence, got.upper_fence) == (0.0, 10.0)
    assert 0.0 <= got.lower <= 2.0 and 8.0 <= got.upper <= 10.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"q1": 3.0, "q3": 2.0}, "q1 <= q3"), ({"halfwidth": -1.0}, "halfwidth"),
     ({"halfwidth": float("nan")}, "halfwidth"), ({"q1": float("inf")}, "finite")],
)
def test_bad_input_is_refused(kwargs: dict[str, float], match: str) -> None:
    leaves, edges = exact(np.linspace(0, 1, 50), 0.0, 1.0)
    args = {"q1": 0.25, "q3": 0.75, "halfwidth": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        tukey_whiskers(leaves, edges, args["q1"], args["q3"], bounds=(0.0, 1.0),
                       halfwidth=args["halfwidth"])
    with pytest.raises(ValueError, match="edges"):
        tukey_whiskers(leaves, edges[:-1], 0.25, 0.75, bounds=(0.0, 1.0), halfwidth=1.0)


def test_round_three_counts_beyond_the_fences(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process protocol asks each center's counts at the fences (Tukey's outliers),
    not at the whiskers."""
    import shared.dp.pooled as pooled

    asked: list[tuple[float, float]] = []
    real = pooled.threshold_counts

    def spy(x, *, lower, upper, **kw):  # type: ignore[no-untyped-def]
        asked.append((lower, upper))
        return real(x, lower=lower, upper=upper, **kw)

    monkeypatch.setattr(pooled, "threshold_counts", spy)
    rng = np.random.default_rng(9)
    centers = [rng.normal(50, 10, 300) for _ in range(3)]
    out = pooled_boxplot(centers, epsilon=1.0, bounds=(0.0, 100.0), neighbouring="add_remove",
                         rng=np.random.default_rng(1))
    box = out.box
    iqr = box.q3 - box.q1
    fences = (max(0.0, box.q1 - 1.5 * iqr), min(100.0, box.q3 + 1.5 * iqr))
    assert asked == [pytest.approx(fences)] * 3
    assert box.lower_whisker >= fences[0] and box.upper_whisker <= fences[1]
