"""What a center releases for each request: the core's functions with the center's own choices.

A request names what to compute; a center still chooses how: the Laplace calibration of a noisy
Mann-Whitney statistic, how ε is split over quantile levels, which public size DPBoxplot's whisker
buffer uses under add/remove, that the tree histogram sees data clipped to the public bounds.
Those choices live here, once: the center's release gate (``center_agent.gate.kinds``, which
in-process centers run too) calls these functions, and so does the end-to-end benchmark's local
baseline.

Every function takes the center's raw values and the request, plus what a center knows of itself
(its K, its neighbouring relation) and a ``numpy.random.Generator``; it returns the wire release
(a refinement: the core's :class:`~shared.federation.Refinement`, which the center's disclosure
control may coarsen before it leaves). The caller checks names, sizes and budgets first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shared import protocol
from shared.binning import (
    BinTable,
    Extreme,
    Placement,
    bin_groups,
    close_table,
    coarsen_table,
    random_placement,
    sorted_scales,
)
from shared.dp import (
    approx_quantiles,
    dp_boxplot,
    joint_exp,
    private_quantile,
    snap_to_grid,
    unbounded_quantile,
)
from shared.dp.life_table import dp_life_table
from shared.dp.pooled import center_extremes, threshold_counts, tree_histogram
from shared.dp.unbounded import DEFAULT_BETA, grid_steps
from shared.dp.uncertainty import rank_halfwidth
from shared.federation import Refinement, refine_pooled, refine_table
from shared.mechanisms import Laplace
from shared.mwu import mann_whitney
from shared.privacy import Neighbouring
from shared.privacy import public_size as public_size  # re-exported: the one rounding rule
from shared.quantiles import quantile_loss, yeojohnson, yj_moments
from shared.quantiles import wire as quantile_wire

FloatArray = NDArray[np.float64]


def canonical_table(
    levels: Sequence[FloatArray], k: int, place: Placement | np.random.Generator
) -> BinTable:
    """A center's one table of a variable: every declared level binned at once (each count 0 or
    >= K), privacy buffers at both ends, its limits placed by ``place`` (a center's keyed
    placement; a Generator: the seed's fresh draws). Every table the center releases of the
    variable is a view of it (:func:`table_view`), so no two of its tables have different
    limits, and natural limits never move one.

    A table never holds more than :data:`~shared.protocol.MAX_LIMITS` bins (what a peer accepts
    to refine): beyond that, adjacent bins are merged (as :func:`~shared.binning.cap_bins`),
    before the limits are placed."""
    source = {"rng": place} if isinstance(place, np.random.Generator) else {"place": place}
    return bin_groups(levels, k=k, lower="buffer", upper="buffer",
                      max_bins=protocol.MAX_LIMITS, **source)


def table_view(
    canonical: BinTable,
    rows: Sequence[int] | None,
    *,
    k: int,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
) -> BinTable:
    """The table a request asks for, from the canonical one by post-processing only: the rows
    of the levels asked (``rows``; ``None`` pools every level into one row), bins merged until
    each shown count is 0 or >= ``k`` (a study's K may exceed the center's), and the extremes
    closed as asked (a natural limit counts the values beyond it in the extreme bin)."""
    counts = (
        canonical.counts.sum(axis=0, keepdims=True)
        if rows is None
        else canonical.counts[list(rows)]
    )
    view = BinTable(limits=canonical.limits, counts=counts, k=canonical.k)
    view = coarsen_table(view, k) if k > canonical.k else view
    view = close_table(view, lower, upper)
    return BinTable(limits=view.limits, counts=view.counts, k=k)


def refinement_release(
    groups: Sequence[FloatArray], request: protocol.RefinementRequest,
    place: Placement | np.random.Generator, *, split: bool = True, level_k: int | None = None,
) -> Refinement:
    """The center's half of joining the table its request carries (Algorithms 4-6), treating
    values beyond the table's extremes as the statement says they were made (a natural limit
    as a view of the refinement inside the interior limits, never as a clip of the data).

    An ungrouped request (``groups`` None) is refined over ``groups``, every declared level of
    the population, together (:func:`~shared.federation.refine_pooled`: one row, each set 0 or
    >= K records of every level, ``level_k`` the center's own K, the sets the center's
    disclosure control admits as they are); a grouped one over the levels asked, one row
    each."""
    statement = request.table.statement
    if isinstance(place, np.random.Generator):
        values = np.sort(np.concatenate(list(groups))) if groups else np.zeros(0)
        place = random_placement(place, *(sorted_scales(values, request.k) if values.size
                                          else (0.0, 0.0)))
    if request.groups is None:
        return refine_pooled(statement.limits, groups, k=request.k, level_k=level_k,
                             place=place, lower=statement.lower, upper=statement.upper,
                             split=split)
    return refine_table(statement.limits, *groups, k=request.k, place=place,
                        lower=statement.lower, upper=statement.upper, split=split)


def mwu_sensitivity(n_x: int, n_y: int) -> float:
    """How far U = Σ sign(Y − X) moves when one record's value changes: 2·max(n, m)."""
    return 2.0 * max(n_x, n_y)


def mwu_release(
    x: FloatArray, y: FloatArray, request: protocol.MWURequest, rng: np.random.Generator
) -> protocol.MWURelease:
    """Local U, V, n, m; with ``request.epsilon``, U + Laplace(2·max(n, m)/ε), V the no-ties
    null variance (a function of n and m) and the noise's law (``noise``: Laplace of that
    scale), from which the coordinator's tests take exact p-values.

    ε-DP for U with the group sizes treated as public (swap): n and m are the levels' sizes,
    K-anonymous counts the center's tables also total; nothing else data-dependent is released.
    """
    noise = None
    if request.epsilon is not None:
        noise = Laplace(request.epsilon, mwu_sensitivity(x.size, y.size))
    return protocol.MWURelease.from_result(mann_whitney(x, y, noise=noise, rng=rng))


def dp_quantiles_release(
    x: FloatArray,
    request: protocol.DPQuantilesRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
    k: int | None = None,
    resolution: float | None = None,
) -> protocol.DPQuantilesRelease:
    """ε-DP quantiles: JointExp and ApproxQuantile in one call; PrivateQuantile and the
    unbounded walk one level at a time with ε split evenly (sequential composition), the
    independent answers sorted (post-processing). With the variable's public ``resolution``
    every value is on its grid (``shared.dp._common.Grid``): JointExp and PrivateQuantile by
    their grid-aware mechanisms, ApproxQuantile and the walk moved to the nearest grid point
    (post-processing)."""
    eps, bounds, levels = request.epsilon, request.bounds, request.levels
    values: Sequence[float]
    if request.algorithm == "joint_exp":
        values = joint_exp(x, levels, epsilon=eps, bounds=bounds, neighbouring=neighbouring,
                           rng=rng, resolution=resolution).values
    elif request.algorithm == "approx_quantile":
        values = approx_quantiles(x, levels, epsilon=eps, bounds=bounds,
                                  neighbouring=neighbouring, rng=rng).values
    else:
        share = eps / len(levels)
        values = sorted(
            (private_quantile(x, q, epsilon=share, bounds=bounds, neighbouring=neighbouring,
                              rng=rng, resolution=resolution)
             if request.algorithm == "private_quantile" else
             unbounded_quantile(x, q, epsilon=share, bounds=bounds, neighbouring=neighbouring,
                                rng=rng)).values[0]
            for q in levels
        )
    if resolution is not None and request.algorithm in ("approx_quantile", "unbounded"):
        values = snap_to_grid(values, bounds=bounds, resolution=resolution).tolist()
    return protocol.DPQuantilesRelease(
        levels=levels, values=list(values), algorithm=request.algorithm, epsilon=eps,
        neighbouring=neighbouring,
        rank_halfwidth=rank_halfwidth(
            request.algorithm, levels, eps, neighbouring,
            grid_steps=grid_steps(bounds, DEFAULT_BETA) if request.algorithm == "unbounded"
            else None),
        n_public=public_size(x.size, k) if k is not None else None,
    )


def dp_boxplot_release(
    x: FloatArray,
    request: protocol.DPBoxplotRequest,
    neighbouring: Neighbouring,
    k: int,
    rng: np.random.Generator,
    resolution: float | None = None,
) -> protocol.DPBoxplotRelease:
    """ε-DP boxplot (DPBoxplot). Under add/remove the whisker buffer uses a public size:
    ``request.n_public``, else the center's size as ``/v1/info`` shows it (rounded down to K).
    With the variable's public ``resolution`` every point of the box is on its grid."""
    n_public = None
    if neighbouring == "add_remove":
        n_public = request.n_public or max(4, public_size(x.size, k))
    result = dp_boxplot(x, epsilon=request.epsilon, bounds=request.bounds,
                        neighbouring=neighbouring, rng=rng, n_public=n_public,
                        resolution=resolution)
    return protocol.DPBoxplotRelease.from_result(result)


def extremes_release(
    x: FloatArray,
    request: protocol.ExtremesRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> protocol.ExtremesRelease:
    """Pooled boxplot round 1: ε-DP minimum and maximum."""
    return protocol.ExtremesRelease.from_result(center_extremes(
        x, epsilon=request.epsilon, bounds=request.bounds, neighbouring=neighbouring, rng=rng))


def tree_histogram_release(
    x: FloatArray,
    request: protocol.TreeHistogramRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> protocol.TreeHistogramRelease:
    """Pooled boxplot round 2: an ε-DP tree histogram of the data clipped to the public bounds."""
    return protocol.TreeHistogramRelease.from_result(tree_histogram(
        np.clip(x, *request.bounds), grid=request.grid, depth=request.depth,
        branching=request.branching, epsilon=request.epsilon, neighbouring=neighbouring, rng=rng))


def threshold_counts_release(
    x: FloatArray,
    request: protocol.ThresholdCountsRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> protocol.ThresholdCountsRelease:
    """Pooled boxplot round 3: ε-DP counts below ``lower`` and above ``upper``."""
    return protocol.ThresholdCountsRelease.from_result(threshold_counts(
        x, lower=request.lower, upper=request.upper, epsilon=request.epsilon,
        neighbouring=neighbouring, rng=rng))


def yj_moments_sensitivity(
    lmbda: float, bounds: tuple[float, float], neighbouring: Neighbouring
) -> float:
    """L1 sensitivity of (Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)²) for values in bounds.

    The first two terms increase with x and YJ(0) = 0, so on [a, b] each term's range and
    largest magnitude come from the ends (and 0 when a <= 0 <= b for the square). One record
    moves the vector by Σ range (swap) or Σ largest magnitude (add/remove).
    """
    a, b = bounds
    ends = np.array([a, b])
    # Wide bounds at an extreme λ overflow to inf: the caller refuses an infinite sensitivity.
    with np.errstate(over="ignore", invalid="ignore"):
        f1 = np.sign(ends) * np.log1p(np.abs(ends))
        f2 = yeojohnson(ends, lmbda)
        f3 = f2 * f2
        f3_min = 0.0 if a <= 0.0 <= b else float(f3.min())
        if neighbouring == "swap":
            total = float(np.ptp(f1) + np.ptp(f2) + (f3.max() - f3_min))
        else:
            total = float(np.abs(f1).max() + np.abs(f2).max() + f3.max())
    return total if np.isfinite(total) else float("inf")


def yj_moments_release(
    x: FloatArray,
    request: quantile_wire.YJMomentsRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> quantile_wire.YJMomentsRelease:
    """The YJ-data moment sums at one λ, ε-DP: the values are clipped to the public bounds and
    each sum gets Laplace noise calibrated to :func:`yj_moments_sensitivity` (the L1 norm of
    the three sums' change, so ε covers all three). ``n`` is the selection's size, a
    K-anonymous count. Raises ``ValueError`` when the bounds and λ give no finite sensitivity."""
    sensitivity = yj_moments_sensitivity(request.lmbda, request.bounds, neighbouring)
    if not np.isfinite(sensitivity):
        raise ValueError("`bounds` and `lmbda` give an infinite sensitivity: narrow the bounds")
    clipped = np.clip(x, *request.bounds)
    noise = Laplace(request.epsilon, sensitivity)
    return quantile_wire.YJMomentsRelease.from_result(
        yj_moments(clipped, request.lmbda, mechanism=noise, rng=rng)
    )


def quantile_loss_release(
    x: FloatArray, request: quantile_wire.QuantileLossRequest
) -> quantile_wire.QuantileLossRelease:
    """Σ ρ_level(x − u): a benchmark release that leaks data (centers keep it switched off)."""
    loss = quantile_loss(x, request.u, request.level)
    return quantile_wire.QuantileLossRelease.from_result(loss)


def dp_life_table_release(
    times: FloatArray,
    events: FloatArray,
    request: protocol.DPLifeTableRequest,
    neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> protocol.DPLifeTableRelease:
    """One arm's ε-DP life table on the request's public grid (``shared.dp.life_table``): the
    center's choice is the Laplace mechanism (pure ε-DP, δ = 0, as every other DP release of a
    center) under its neighbouring relation. ``times`` (>= 0) and ``events`` (1 the event, 0
    censored) are the selection's records; a time after the grid's end counts as censored in
    the last interval, one before its start in the first."""
    return protocol.DPLifeTableRelease.of(dp_life_table(
        times, events, grid=request.grid, epsilon=request.epsilon, rng=rng,
        mechanism="laplace", delta=0.0, neighbouring=neighbouring))
