"""What a DP release buys before it is paid: each DP analysis' 95 % error at the centers' sizes
and the asked ε, from the mechanisms' known error laws (docs/methods.md §9; docs/methods.md
§9.6 states the figures and the threshold).

The dry run gives ε; an analyst needs to know whether that ε gives an informative number. Every
figure here is a function of public numbers only — ε, the algorithm, the levels, the public
bounds, the centers' sizes as their info shows them (rounded down to K) — never of data, so the
coordinator can state it before anything is asked or spent.

An error is given in the unit its law has: **records** for a quantile (a rank error) or a count,
**value** for a mean. Its ``share`` is of the centers' size n (records) or of the bounds' width
b − a (values). Where the data are spread evenly over the bounds the two readings coincide: a
quantile h ranks off is h/n·(b − a) off in value. Data filling a small part of wide bounds fare
worse in value (the exponential mechanism weighs each gap between records by its length, so the
empty part of the bounds draws the output; docs/methods.md §9.2), so the share is a floor on
how bad it can be, not a ceiling.

A part is **uninformative** when its 95 % error exceeds :data:`UNINFORMATIVE_SHARE` of n or of
the bounds: a quartile that can be a quarter of the records off can be read as the median or
the extreme next to it, and the box drawn from it says nothing of the data's shape.

* Quantiles (JointExp, PrivateQuantile, the unbounded walk): ``shared.dp.uncertainty``'s rank
  half-widths at the center's relation (§9.2, §9.3). ApproxQuantile has no single law: None.
* A center's DPBoxplot (§5.6, §9.4): quartiles (JointExp at ε/2), the whisker at the walk's ψ
  (3ε/16, about its count target, for any data), the outlier counts (Laplace(8/ε) under
  add/remove, 16/ε under swap: the pair's sensitivity at ε/8).
* The pooled box (§6, §9.5): its quartiles read off the summed tree — the one part without a
  closed law: a quick seeded simulation of the node noise through the consistency map (linear,
  so data-free) — and its outlier counts summed over centers.
* A DP Table 1 row (§8.9): the count (Laplace at 0.1ε), the quartiles (JointExp at 0.3ε) and
  the mean — the sum's noise (0.15ε) and the count's through (mean − c), with the DP range's
  half-width h at its widest, (b − a)/2: an upper bound, as the range is usually narrower.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from shared._validation import check_positive
from shared.dp.boxplot import outlier_scale
from shared.dp.pooled import TreeHistogram, consistent_leaves
from shared.dp.uncertainty import (
    QUARTILES,
    box_rank_halfwidths,
    laplace_halfwidth,
    laplace_sum_halfwidth,
    rank_halfwidth,
)
from shared.privacy import Neighbouring, PrivacySpent

UNINFORMATIVE_SHARE = 0.25
"""A 95 % error above this share of n (records) or of the bounds' width (values) makes a part
uninformative (module docstring)."""

LEVEL = 0.95


def pct(share: float) -> str:
    """A share as the reports show it ("25 %")."""
    return f"{share * 100:.0f} %" if share < 1e6 else "∞"

Unit = Literal["records", "value"]


@dataclass(frozen=True)
class PartError:
    """One released part's 95 % error: ``error`` in ``unit`` (records or the variable's
    values), ``share`` of the size ``n`` or of the bounds' width, ``uninformative`` when the
    share exceeds :data:`UNINFORMATIVE_SHARE`."""

    part: str
    n: int
    error: float
    unit: Unit
    share: float

    @property
    def uninformative(self) -> bool:
        return self.share > UNINFORMATIVE_SHARE


def _records(part: str, n: int, error: float) -> PartError:
    # n = 0 (a center too small to show a size) cannot be informed at all.
    return PartError(part, n, error, "records", error / n if n > 0 else float("inf"))


def _width(bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    if not hi > lo:
        raise ValueError(f"`bounds` must have lower < upper, got {bounds}")
    return float(hi - lo)


def quantiles_errors(algorithm: str, levels: Sequence[float], epsilon: float, n: int,
                     bounds: tuple[float, float], neighbouring: Neighbouring = "swap",
                     ) -> list[PartError]:
    """A center's DP quantiles (``dp_quantiles``, docs/methods.md §5.8): the 95 % rank error
    of each value; [] for ApproxQuantile (no single law)."""
    from shared.dp.unbounded import DEFAULT_BETA, grid_steps

    epsilon = check_positive(epsilon, "epsilon")
    _width(bounds)
    steps = grid_steps(bounds, DEFAULT_BETA) if algorithm == "unbounded" else None
    h = rank_halfwidth(algorithm, levels, epsilon, neighbouring, LEVEL, grid_steps=steps)
    return [] if h is None else [_records("quantiles", n, h)]


def box_errors(epsilon: float, n: int, bounds: tuple[float, float],
               method: str = "dpboxplot_one_sided_walk",
               neighbouring: Neighbouring = "swap") -> list[PartError]:
    """A center's DPBoxplot at ``epsilon`` (per box): its quartiles, the whisker at the walk's
    ψ and the outlier counts at the center's relation (docs/methods.md §9.4)."""
    epsilon = check_positive(epsilon, "epsilon")
    _width(bounds)
    quartiles, extreme = box_rank_halfwidths(method, epsilon, bounds, LEVEL)
    out = []
    if quartiles is not None:
        out.append(_records("quartiles", n, quartiles))
    if extreme is not None:
        out.append(_records("whisker at ψ", n, extreme))
    scale = outlier_scale(epsilon / 8.0, neighbouring)
    out.append(_records("outlier counts", n, laplace_halfwidth(scale, LEVEL)))
    return out


POOLED_DRAWS = 300
"""Noise draws of :func:`pooled_tree_rank_error`'s simulation (fixed seed: the same figure for
the same question)."""


def pooled_tree_rank_error(scales: Sequence[float], branching: int, depth: int,
                           levels: Sequence[float] = QUARTILES, draws: int = POOLED_DRAWS,
                           seed: int = 0) -> float:
    """See :func:`_pooled_tree_rank_error` (kept: a dry run asked again costs nothing)."""
    return _pooled_tree_rank_error(tuple(float(s) for s in scales), int(branching), int(depth),
                                   tuple(float(q) for q in levels), int(draws), int(seed))


@functools.lru_cache(maxsize=64)
def _pooled_tree_rank_error(scales: tuple[float, ...], branching: int, depth: int,
                            levels: tuple[float, ...], draws: int, seed: int) -> float:
    """The 95 % rank error of the widest of ``levels`` read off the pooled tree, for data
    spread evenly over its grid: the consistent tree is linear in the counts, so its error is
    that of the noise alone — each center's Laplace(``scales[l]``) on every node, summed, made
    consistent (Hay et al. 2010), the cumulative count at the level's leaf edge less the level
    times the total's noise. Simulated (seeded, public numbers only); docs/methods.md §9.5's
    bound (:func:`shared.dp.uncertainty.tree_rank_halfwidth`) is what a release states, and is
    several times wider."""
    rng = np.random.default_rng(seed)
    leaves = branching ** depth
    edges = [max(1, min(leaves, round(q * leaves))) - 1 for q in levels]
    errors = np.empty((draws, len(levels)))
    for r in range(draws):
        nodes = tuple(sum(rng.laplace(0.0, s, size=branching ** d) for s in scales)
                      for d in range(depth + 1))
        tree = TreeHistogram(nodes, branching, max(scales), PrivacySpent(1.0))  # the noise only
        cum = np.cumsum(consistent_leaves(tree))
        errors[r] = [abs(cum[e] - q * cum[-1]) for e, q in zip(edges, levels, strict=True)]
    return float(np.quantile(errors, LEVEL, axis=0).max())


def pooled_box_errors(epsilon: float, sizes: Sequence[int], bounds: tuple[float, float], *,
                      branching: int, depth: int,
                      relations: Sequence[Neighbouring] | None = None) -> list[PartError]:
    """The pooled box over centers of ``sizes`` (each at ``epsilon``, docs/methods.md §6): its
    quartiles read off the summed tree (:func:`pooled_tree_rank_error`) and its outlier counts
    (the sum of the centers' Laplace(Δ·8/ε), round 3 at ε/8 with Δ = 1 under add/remove, 2
    under swap: ``shared.dp.pooled.threshold_counts``), both against the pooled size."""
    epsilon = check_positive(epsilon, "epsilon")
    _width(bounds)
    if not sizes:
        return []
    relations = list(relations) if relations is not None else ["swap"] * len(sizes)
    # Round 2's node scale at each center (shared.dp.pooled.tree_histogram), ε/2 for the tree.
    scales = [(depth + 1) * (2.0 if r == "swap" else 1.0) / (epsilon / 2.0) for r in relations]
    total = int(sum(sizes))
    return [
        _records("quartiles", total, pooled_tree_rank_error(scales, branching, depth)),
        _records("outlier counts", total, laplace_sum_halfwidth(
            [(2.0 if r == "swap" else 1.0) * 8.0 / epsilon for r in relations], LEVEL)),
    ]


def describe_errors(epsilon: float, n: int, bounds: tuple[float, float],
                    neighbouring: Neighbouring = "swap") -> list[PartError]:
    """A center's DP Table 1 row of one variable and arm (docs/methods.md §8.9): the count, the
    quartiles and the mean (an upper bound: the DP range at its widest)."""
    from shared.describe import EPSILON_SPLIT

    epsilon = check_positive(epsilon, "epsilon")
    width = _width(bounds)
    share = dict(EPSILON_SPLIT)
    eps_n, eps_q, eps_s = (share[p] * epsilon for p in ("count", "quantiles", "sum"))
    h = width / 2.0
    sum_scale = (2.0 if neighbouring == "swap" else 1.0) * h / eps_s
    out = [_records("n", n, laplace_halfwidth(1.0 / eps_n, LEVEL))]
    q = rank_halfwidth("joint_exp", QUARTILES, eps_q, neighbouring, LEVEL)
    if q is not None:
        out.append(_records("quartiles", n, q))
    if n > 0:
        mean = laplace_sum_halfwidth([sum_scale, h / eps_n], LEVEL) / n
        out.append(PartError("mean", n, mean, "value", mean / width))
    else:
        out.append(PartError("mean", n, float("inf"), "value", float("inf")))
    return out
