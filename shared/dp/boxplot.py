"""DPBoxplot (Ramsay & Diaz-Rodriguez, Differentially Private Boxplots, ICML 2025,
arXiv 2405.20415): the authors' code's version (the default) and the paper's Algorithm 1 as
written, and the "naive" DP boxplots.

Two versions, told apart by step 1 only (``extremes``), each with its own ``method`` name
(:data:`METHOD_NAMES`; the names results carried before are read as deprecated aliases,
:func:`canonical_method`):

- ``"dpboxplot_one_sided_walk"`` (the default, ``extremes="one_sided"``): the authors' code's
  extremes walk (jairoadiazr/DPBoxplot, ``pboxplots.py`` with
  ``private_quantiles/unboundedQuantile.py``) with the paper's budget split. It departs from
  Algorithm 1 in step 1: ψ is not the unbounded estimate of the maximum (target n, Laplace
  noise) but of about the (1 − 1/(20√n))-quantile (target n − √n/20, one-sided exponential
  noise); ψ_max is thus an estimate of a high quantile, not of the maximum, and up to √n/20
  values may lie above it. Its privacy proof is ours (:mod:`shared.dp.unbounded`).
- ``"dpboxplot_algorithm_1"`` (``extremes="algorithm_1"``, :func:`dp_boxplot_algorithm_1`): the
  paper's Algorithm 1 as written (in our translation-invariant reading of its whisker rule,
  step 4). Formerly ``"dp_boxplot_seed_walk"`` (``extremes="seed"``).

The steps, with total budget ε:

1. ψ_min: the unbounded walk down from b, 3ε/16; ψ_max: up from a, 3ε/16
   (:mod:`shared.dp.unbounded`). Two walks (``extremes``):

   - ``"one_sided"`` (the default): count target t(n) = n − √n/20 (the (1 − 1/(20√n))-quantile of
     x for ψ_max, of −x for ψ_min) and exponential noise on the threshold and on every query, as
     in the authors' code.
   - ``"algorithm_1"``: the paper's text, count target n (the maximum) with Laplace noise.

   Both are ε_walk-DP under both relations (proof in :mod:`shared.dp.unbounded`). The one-sided
   walk is the default because it is the more accurate: with target n the walk past the maximum
   stops only when one noise beats another, and its overshoot is heavy-tailed whatever ε and n.
   In the seed's simulation design (``docs/benchmarks.md``, "Seed 000's boxplot simulation",
   200 replications) the one-sided walk halves the whisker error on the uniform, Beta(2, 2) and
   log-normal laws, is never worse by more than 2 standard errors, and reproduces the authors'
   published whisker errors; its cost is slightly larger outlier-count errors on Beta(2, 2) at
   large ε (up to √n/20 values lie beyond its whisker). Both walks use the data's own n in their
   target (private under add/remove, covered by the proof: t(n + 1) − t(n) ∈ [0, 1]); the public
   size below serves λ only.
2. (ξ_1/4, ξ_1/2, ξ_3/4): one JointExp run, ε/2 (:mod:`shared.dp.joint_exp`).
3. IQR = ξ_3/4 − ξ_1/4, fences ℓ_1 = ξ_1/4 − 1.5·IQR, u_1 = ξ_3/4 + 1.5·IQR, buffer λ = n^(-1/4).
4. Whiskers, in the translation-invariant reading of the seed's rule:
   upper u = max(ψ_max, ξ_3/4) if ψ_max − ξ_3/4 < (1 − λ)·1.5·IQR, else u_1 (branch "extreme" or
   "fence"); lower ℓ = min(ψ_min, ξ_1/4) if ξ_1/4 − ψ_min < (1 − λ)·1.5·IQR, else ℓ_1; both
   clamped to [a, b]. The authors' code (jairoadiazr/DPBoxplot, ``pboxplots.py``) tests
   |(ψ − fence)/fence| > λ instead, which changes with a shift of the data; we keep their clamp,
   not that test.
5. Outlier counts #{x < ℓ} and #{x > u}, one Laplace mechanism on the pair with ε/8: the two
   counted sets are disjoint (ℓ <= u), so the pair's L1 sensitivity is Δ = 1 under add/remove
   (an added or removed record moves one count by 1) and Δ = 2 under swap (a record moved from
   below ℓ to above u moves both); each count gets Laplace(8Δ/ε) (Dwork & Roth 2014, Thm 3.6),
   8/ε under add/remove, 16/ε under swap, rounded and floored at 0 (post-processing). The
   counts used ε/16 each at Laplace(16/ε) under both relations before, a loss of ε/16 under
   add/remove for ε/8 paid; the result states its scale (``outlier_scale``).

Sequential composition: 3/16 + 3/16 + 1/2 + 1/8 = 1. By construction
ℓ <= ξ_1/4 <= ξ_1/2 <= ξ_3/4 <= u.

Any number of records, none included, under add/remove: the walks, JointExp and the counts are
defined and ε-DP on empty data (JointExp is then uniform on ordered triples of [a, b], the walks
stop on their noise alone), and the whisker buffer uses the public size, so nothing refuses a
small or empty selection (whether a box comes back must not depend on the private size). Under
swap the size is public and a box needs at least 4 values.

The buffer λ uses the sample size n. Under ``swap`` n is public. Under ``add_remove`` n is private
and a whisker that depends on it is not ε-DP, so the caller passes a public size ``n_public``
(a registry or planned cohort size). A center uses the request's ``n_public`` or else its own
size rounded down to a multiple of K, the size ``/v1/info`` already shows
(``shared.releases.dp_boxplot_release``); the pooled protocol uses its DP root count
(:mod:`shared.dp.pooled`). See docs/methods.md §5.6.

Naive boxplots (seed §"How well does the naive private boxplot perform"): the five points at levels
(1/n, 1/4, 1/2, 3/4, 1) all from one method, then the same whisker and outlier rules. The five
points get the 7ε/8 that DPBoxplot's quantiles get, split as the method needs (JointExp and
ApproxQuantile: one call; PrivateQuantile and unbounded: 7ε/40 per level); the outlier counts
get ε/8 for the pair, as in DPBoxplot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_choice,
    check_epsilon,
    check_generator,
    check_int,
    check_neighbouring,
)
from shared.dp._common import FloatArray, Grid, make_grid
from shared.dp.approx_quantile import approx_quantiles_sorted
from shared.dp.joint_exp import joint_exp_sorted
from shared.dp.private_quantile import private_quantile_sorted
from shared.dp.unbounded import (
    Noise,
    one_sided_max_target,
    threshold_for_level,
    unbounded_sorted,
)
from shared.fields import (
    DEPRECATED_WALKS,
    EXTREMES_WALKS,
    METHOD_NAMES,
    ExtremesWalk,
)
from shared.fields import canonical_method as canonical_method  # re-exported
from shared.privacy import Neighbouring, PrivacySpent

Branch = Literal["extreme", "fence", "record"]
"""A whisker at the walk's ψ (``"extreme"``), at Tukey's fence, or (the pooled box only)
at the tree's estimate of the most extreme record inside the fence (``"record"``)."""
NaiveMethod = Literal["joint_exp", "private_quantile", "approx_quantile", "unbounded"]
NAIVE_METHODS: tuple[NaiveMethod, ...] = (
    "joint_exp",
    "private_quantile",
    "approx_quantile",
    "unbounded",
)
MIN_N = 4  # fewer points than boxplot statistics is not a boxplot
UNBOUNDED_BETA = 1.001  # Durfee's default grid base, also the seed's


@dataclass(frozen=True)
class BoxplotResult:
    """A DP seven-number summary: (o_ℓ, ℓ, ξ_1/4, ξ_1/2, ξ_3/4, u, o_u) and how it was made.

    ``budget`` lists every release and its cost; ``spent`` is their sequential composition (ε).
    ``n`` is the size used for λ_n (public: len(x) under swap, ``n_public`` under add/remove).
    ``outlier_scale`` is the Laplace scale of each outlier count's noise (None: not stated).
    """

    lower_outliers: int
    lower_whisker: float
    q1: float
    median: float
    q3: float
    upper_whisker: float
    upper_outliers: int
    n: int
    lower_branch: Branch
    upper_branch: Branch
    spent: PrivacySpent
    budget: tuple[tuple[str, PrivacySpent], ...]
    method: str
    outlier_scale: float | None = None

    def to_bxp_stats(self, label: str | None = None) -> dict[str, Any]:
        """The dict ``matplotlib.axes.Axes.bxp`` draws (:func:`bxp_stats`)."""
        return bxp_stats(self.lower_whisker, self.q1, self.median, self.q3, self.upper_whisker,
                         label)


def check_extremes(extremes: str) -> ExtremesWalk:
    """``extremes`` validated, the deprecated ``"seed"`` read as ``"algorithm_1"``."""
    walk = DEPRECATED_WALKS.get(extremes, extremes)
    check_choice(walk, "extremes", EXTREMES_WALKS)
    return walk  # type: ignore[return-value]


def bxp_stats(lower_whisker: float, q1: float, median: float, q3: float, upper_whisker: float,
              label: str | None = None) -> dict[str, Any]:
    """The dict ``matplotlib.axes.Axes.bxp`` draws for one box. No fliers: a DP box's outliers
    are counts, not points."""
    stats: dict[str, Any] = {"med": median, "q1": q1, "q3": q3, "whislo": lower_whisker,
                             "whishi": upper_whisker, "fliers": []}
    if label is not None:
        stats["label"] = label
    return stats


def whiskers(
    psi_min: float,
    q1: float,
    q3: float,
    psi_max: float,
    n: int,
    bounds: tuple[float, float],
    grid: Grid | None = None,
) -> tuple[float, Branch, float, Branch]:
    """(ℓ, lower branch, u, upper branch) by the translation-invariant rule (module docstring).

    On a ``grid`` (every input on it) a fence whisker is the last grid point inside the fence
    (the upper fence rounded down, the lower one up), as a box of values recorded at the
    grid's resolution draws its whisker at the most extreme value inside the fence."""
    a, b = bounds
    iqr = q3 - q1
    reach = (1.0 - n**-0.25) * 1.5 * iqr
    upper_branch: Branch = "extreme" if psi_max - q3 < reach else "fence"
    lower_branch: Branch = "extreme" if q1 - psi_min < reach else "fence"
    upper = max(psi_max, q3) if upper_branch == "extreme" else q3 + 1.5 * iqr
    lower = min(psi_min, q1) if lower_branch == "extreme" else q1 - 1.5 * iqr
    lower, upper = min(max(lower, a), b), min(max(upper, a), b)
    if grid is not None:
        lower, upper = float(grid.ceil(lower)), float(grid.floor(upper))
    return lower, lower_branch, upper, upper_branch


def extremes_sorted(
    data: FloatArray,
    epsilon_each: float,
    bounds: tuple[float, float],
    rng: np.random.Generator,
    *,
    extremes: ExtremesWalk,
) -> tuple[float, float]:
    """DPBoxplot's step 1 on sorted data: (ψ_min, ψ_max), one unbounded walk each, each
    ``epsilon_each``-DP under both relations. The minimum is the maximum of −x, so both walks
    share one count target: n − √n/20 with exponential noise (``"one_sided"``) or n with Laplace
    noise (``"seed"``); n is the data's own size (module docstring)."""
    noise: Noise
    extremes = check_extremes(extremes)
    if extremes == "one_sided":
        target, noise = one_sided_max_target(data.size), "exponential"
    else:
        target, noise = float(data.size), "laplace"
    psi_min = unbounded_sorted(
        data, target, epsilon_each, bounds, rng, UNBOUNDED_BETA, True, noise=noise
    )
    psi_max = unbounded_sorted(
        data, target, epsilon_each, bounds, rng, UNBOUNDED_BETA, False, noise=noise
    )
    return psi_min, psi_max


def extremes_budget(extremes: ExtremesWalk, epsilon_each: float) -> list[tuple[str, PrivacySpent]]:
    """The budget lines of step 1, naming the walk."""
    walk = "one-sided walk" if extremes == "one_sided" else "Algorithm 1's walk"
    return [
        (f"minimum (unbounded, reflected, {walk})", PrivacySpent(epsilon_each)),
        (f"maximum (unbounded, {walk})", PrivacySpent(epsilon_each)),
    ]


def noisy_count(count: int, scale: float, rng: np.random.Generator) -> int:
    """A count plus Laplace(``scale``), rounded and floored at 0 (post-processing)."""
    return max(0, round(count + rng.laplace(0.0, scale)))


def outlier_scale(epsilon_pair: float, neighbouring: Neighbouring) -> float:
    """The Laplace scale of each of the two outlier counts released together with
    ``epsilon_pair``: Δ/ε with the pair's L1 sensitivity Δ = 1 (add/remove) or 2 (swap), the
    counted sets being disjoint (module docstring, step 5)."""
    return (2.0 if neighbouring == "swap" else 1.0) / epsilon_pair


def _validate(
    x: ArrayLike,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: str,
    rng: Any,
    n_public: int | None,
) -> tuple[FloatArray, float, tuple[float, float], Neighbouring, np.random.Generator, int]:
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    relation = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    data = as_finite_1d(x, "x", allow_empty=True)
    if relation == "swap":
        # n is public under swap: fewer values than a box's points is no boxplot. Under
        # add/remove any size is answered (refusing a small one would tell its size).
        if data.size < MIN_N:
            raise ValueError(
                f"`x` must hold at least {MIN_N} values for a boxplot under swap, got {data.size}")
        if n_public is not None and n_public != data.size:
            raise ValueError(
                f"`n_public` must be None or len(x) = {data.size} under swap, got {n_public!r}"
            )
        n = data.size
    else:
        if n_public is None:
            raise ValueError(
                "`n_public` is required under add_remove (n is private there): pass a public size "
                "for the whisker buffer λ_n = n^(-1/4), or use neighbouring='swap'"
            )
        n = check_int(n_public, "n_public", MIN_N)
    return ascending(data), epsilon, bounds, relation, rng, n


def _finish(
    data: FloatArray,
    psi_min: float,
    box: FloatArray,
    psi_max: float,
    n: int,
    bounds: tuple[float, float],
    epsilon: float,
    rng: np.random.Generator,
    budget: list[tuple[str, PrivacySpent]],
    method: str,
    neighbouring: Neighbouring,
    grid: Grid | None = None,
) -> BoxplotResult:
    q1, med, q3 = (float(v) for v in box)
    if grid is not None:  # post-processing: the walks' grid is geometric, not the resolution's
        psi_min, psi_max = (float(v) for v in grid.nearest([psi_min, psi_max]))
    lower, lower_branch, upper, upper_branch = whiskers(psi_min, q1, q3, psi_max, n, bounds, grid)
    eps_counts = epsilon / 8.0
    scale = outlier_scale(eps_counts, neighbouring)
    below = int(np.searchsorted(data, lower, side="left"))
    above = int(data.size - np.searchsorted(data, upper, side="right"))
    budget = [*budget, ("outlier counts (pair)", PrivacySpent(eps_counts))]
    return BoxplotResult(
        lower_outliers=noisy_count(below, scale, rng),
        lower_whisker=lower,
        q1=q1,
        median=med,
        q3=q3,
        upper_whisker=upper,
        upper_outliers=noisy_count(above, scale, rng),
        n=n,
        lower_branch=lower_branch,
        upper_branch=upper_branch,
        # Sequential composition of the parts; a float loop over them could be off by one ulp
        # (3ε/16 is rounded), their exact sum rounds to ε (tested with math.fsum).
        spent=PrivacySpent(epsilon),
        budget=tuple(budget),
        method=method,
        outlier_scale=scale,
    )


def dp_boxplot(
    x: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    n_public: int | None = None,
    extremes: ExtremesWalk = "one_sided",
    resolution: float | None = None,
) -> BoxplotResult:
    """ε-DP boxplot of ``x`` (DPBoxplot, Ramsay & Diaz-Rodriguez, ICML 2025, arXiv
    2405.20415), bounds may be loose: by default the authors' code's version (one-sided walk for
    the extremes, ψ about the (1 − 1/(20√n))-quantiles), with ``extremes="algorithm_1"`` the
    paper's Algorithm 1 (module docstring).

    Privacy: ε-DP under ``neighbouring`` by sequential composition of the steps (module
    docstring), with or without ``resolution``.

    Parameters
    ----------
    x : the data (one value per patient); finite; any number under add/remove (none
        included), at least 4 values under swap.
    epsilon : total budget, > 0, split 3/16, 3/16, 1/2, 1/8 (module docstring).
    bounds : public (a, b), a < b; quantiles are computed on data clipped to them.
    neighbouring : ``"add_remove"`` or ``"swap"``.
    rng : the only source of randomness.
    n_public : public size for λ_n, required under ``add_remove`` (module docstring).
    extremes : the walk of step 1: ``"one_sided"`` (default; target n − √n/20, exponential
        noise; ``method`` ``"dpboxplot_one_sided_walk"``) or ``"algorithm_1"`` (target n,
        Laplace noise; ``method`` ``"dpboxplot_algorithm_1"``; ``"seed"`` is its deprecated
        name). Both ε-DP; the budget lines name the walk.
    resolution : the variable's public resolution (> 0), or None. With it every point of the box
        is on the resolution's grid within the bounds (the multiples of r clipped into [a, b],
        :class:`shared.dp._common.Grid`): the quartiles by grid-aware JointExp
        (:func:`shared.dp.joint_exp`), the walks' extremes moved to the nearest grid point and a
        fence whisker to the last grid point inside the fence (post-processing, no ε).

    Time O(n log n + n) (one sort; JointExp's passes are linear).
    """
    data, epsilon, bounds, relation, rng, n = _validate(
        x, epsilon, bounds, neighbouring, rng, n_public
    )
    grid = make_grid(bounds, resolution)
    extremes = check_extremes(extremes)
    eps_extreme = 3.0 * epsilon / 16.0
    eps_box = epsilon / 2.0
    # Both extremes are "the maximum" of x or of −x: the query c_k − t(n) moves by at most 1 in
    # total spread between neighbours (see shared.dp.unbounded).
    psi_min, psi_max = extremes_sorted(data, eps_extreme, bounds, rng, extremes=extremes)
    box = joint_exp_sorted(data, (0.25, 0.5, 0.75), eps_box, bounds, relation, rng,
                           resolution=resolution)
    budget = [
        *extremes_budget(extremes, eps_extreme),
        ("quartiles (JointExp)", PrivacySpent(eps_box)),
    ]
    return _finish(data, psi_min, box, psi_max, n, bounds, epsilon, rng, budget,
                   METHOD_NAMES[extremes], relation, grid)


def dp_boxplot_algorithm_1(
    x: ArrayLike,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    n_public: int | None = None,
    resolution: float | None = None,
) -> BoxplotResult:
    """ε-DP boxplot by the paper's Algorithm 1 as written (Ramsay & Diaz-Rodriguez, ICML 2025,
    arXiv 2405.20415): ψ_min and ψ_max by the unbounded walk with count target n and Laplace
    noise. :func:`dp_boxplot` with ``extremes="algorithm_1"``; ``method`` is
    ``"dpboxplot_algorithm_1"``."""
    return dp_boxplot(x, epsilon=epsilon, bounds=bounds, neighbouring=neighbouring, rng=rng,
                      n_public=n_public, extremes="algorithm_1", resolution=resolution)


def naive_boxplot(
    x: ArrayLike,
    method: NaiveMethod,
    *,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    n_public: int | None = None,
) -> BoxplotResult:
    """ε-DP "naive" boxplot: all five points from one quantile ``method`` (for comparison only).

    ``method`` is one of ``"joint_exp"``, ``"private_quantile"``, ``"approx_quantile"``,
    ``"unbounded"``; the other parameters are those of :func:`dp_boxplot`.
    """
    data, epsilon, bounds, relation, rng, n = _validate(
        x, epsilon, bounds, neighbouring, rng, n_public
    )
    check_choice(method, "method", NAIVE_METHODS)
    levels = (1.0 / n, 0.25, 0.5, 0.75, 1.0)
    eps_points = 7.0 * epsilon / 8.0
    if method == "joint_exp":
        points = joint_exp_sorted(data, levels, eps_points, bounds, relation, rng)
    elif method == "approx_quantile":
        points = approx_quantiles_sorted(data, levels, eps_points, bounds, relation, rng)
    elif method == "private_quantile":
        points = np.sort(
            [
                private_quantile_sorted(data, q, eps_points / 5, bounds, relation, rng)[0]
                for q in levels
            ]
        )
    else:
        # Below the median walk down from b, else up from a (the mirror images of each other).
        points = np.sort(
            [
                unbounded_sorted(
                    data,
                    threshold_for_level(q, data.size, q < 0.5),
                    eps_points / 5,
                    bounds,
                    rng,
                    UNBOUNDED_BETA,
                    q < 0.5,
                )
                for q in levels
            ]
        )
    budget = [(f"five quantiles ({method})", PrivacySpent(eps_points))]
    return _finish(
        data,
        float(points[0]),
        points[1:4],
        float(points[4]),
        n,
        bounds,
        epsilon,
        rng,
        budget,
        f"naive_{method}",
        relation,
    )
