"""Counts of a categorical variable per category and group, K-anonymous or ε-DP.

A categorical variable has public categories in a declared order; a record whose label is
missing (or not a declared category) falls in one more cell, the *missing* cell, last in that
order. Its records are coded 0..C-1 by category and C when missing (:func:`category_counts`).

* **K-anonymous** (:func:`merge_adjacent`): every released cell of every group holds 0 or >= K
  records; a cell that breaks it is merged with its neighbours in the declared order, by one
  rule that looks only at which cells break it (never at where a record lies): a run of
  adjacent breaking cells is merged together, a lone one with the next cell (the one before,
  for the last). Merged cells are sums of cells, so a merged table of 0-or->=K cells stays so.
* **ε-DP** (:func:`dp_category_counts`): each cell's count plus two-sided geometric noise
  (Ghosh, Roughgarden & Sundararajan 2009), P(Z = z) ∝ α^|z|, α = exp(-ε/Δ). A record lies in
  exactly one cell, so adding or removing one moves one cell by 1 (Δ = 1) and changing one
  moves two (Δ = 2, ``swap``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._validation import check_epsilon, check_generator, check_int, check_neighbouring
from shared.privacy import Neighbouring, PrivacySpent, isolating

IntArray = NDArray[np.int64]

__all__ = ["CategoryCounts", "DPCategoryCounts", "category_counts", "dp_category_counts",
           "geometric_halfwidth", "merge_adjacent"]


@dataclass(frozen=True)
class CategoryCounts:
    """Counts per group (rows) and released cell (columns); ``cells[j]`` lists the cells of
    the declared order (0..C-1 the categories, C the missing cell) merged into column ``j``."""

    cells: tuple[tuple[int, ...], ...]
    counts: IntArray
    k: int


def category_counts(codes: Sequence[ArrayLike], n_categories: int) -> IntArray:
    """Records of each group (one array of codes per group) in each of the ``n_categories``
    categories and the missing cell (code ``n_categories``): shape (groups, C + 1)."""
    c = check_int(n_categories, "n_categories", 1)
    out = np.zeros((len(codes), c + 1), dtype=np.int64)
    for g, group in enumerate(codes):
        x = np.asarray(group, dtype=np.float64)
        if x.size and (not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > c
                       or not np.all(x == np.round(x))):
            raise ValueError(f"codes must be integers in 0..{c}")
        out[g] = np.bincount(x.astype(np.int64), minlength=c + 1)
    return out


def _drop(bad: NDArray[np.bool_]) -> list[int]:
    """The boundaries (between column j and j+1) to remove so that every run of adjacent bad
    columns merges: the boundaries inside a run of several, the one after a lone bad column
    (before it, for the last column)."""
    n = bad.size
    drop: list[int] = []
    j = 0
    while j < n:
        if not bad[j]:
            j += 1
            continue
        end = j
        while end + 1 < n and bad[end + 1]:
            end += 1
        if end > j:
            drop.extend(range(j, end))
        else:
            drop.append(min(j, n - 2))
        j = end + 1
    return drop


def merge_adjacent(counts: ArrayLike, k: int,
                   cells: tuple[tuple[int, ...], ...] | None = None) -> CategoryCounts:
    """``counts`` (groups × cells, in the declared order) with adjacent cells merged until every
    cell of every group holds 0 or >= ``k`` (the module's rule; a table of one cell is kept as
    it is: its cells are the groups' totals)."""
    k = check_int(k, "k", 2)
    table = np.asarray(counts, dtype=np.int64)
    if table.ndim != 2 or table.shape[1] < 1:
        raise ValueError("counts must be a (groups, cells) table")
    groups: list[tuple[int, ...]] = (list(cells) if cells is not None
                                     else [(j,) for j in range(table.shape[1])])
    if len(groups) != table.shape[1]:
        raise ValueError("one entry of `cells` per column")
    while table.shape[1] > 1:
        bad = np.asarray(isolating(table, k).any(axis=0), dtype=bool)
        if not bad.any():
            break
        keep = np.ones(table.shape[1] - 1, dtype=bool)
        keep[_drop(bad)] = False
        owner = np.concatenate([[0], np.cumsum(keep)])
        merged = np.zeros((table.shape[0], int(owner[-1]) + 1), dtype=np.int64)
        for g in range(table.shape[0]):
            merged[g] = np.bincount(owner, weights=table[g], minlength=merged.shape[1])
        new_groups: list[tuple[int, ...]] = [() for _ in range(merged.shape[1])]
        for j, o in enumerate(owner.tolist()):
            new_groups[o] = (*new_groups[o], *groups[j])
        table, groups = merged, new_groups
    return CategoryCounts(tuple(groups), table, k)


@dataclass(frozen=True)
class DPCategoryCounts:
    """ε-DP counts per cell (0..C-1 the categories, C the missing cell), unrounded integers
    (they may be negative: clamping is the reader's post-processing)."""

    counts: IntArray
    alpha: float
    """The geometric noise's parameter α = exp(-ε/Δ)."""
    sensitivity: int
    variance: float
    halfwidth: int
    """The 95 % half-width of one cell's noise (:func:`geometric_halfwidth`)."""
    spent: PrivacySpent


def geometric_halfwidth(alpha: float, level: float = 0.95) -> int:
    """The least h with P(|Z| <= h) >= ``level`` for two-sided geometric noise of parameter
    ``alpha``: P(|Z| > h) = 2·α^(h+1)/(1 + α)."""
    if not 0 <= alpha < 1:
        raise ValueError("alpha must lie in [0, 1)")
    if alpha == 0:
        return 0
    tail = (1 - level) * (1 + alpha) / 2
    return max(0, math.ceil(math.log(tail) / math.log(alpha) - 1))


def dp_category_counts(codes: ArrayLike, n_categories: int, *, epsilon: float,
                       neighbouring: Neighbouring, rng: np.random.Generator) -> DPCategoryCounts:
    """Each cell's count plus two-sided geometric noise (module docstring): ε-DP under
    ``neighbouring``."""
    eps = check_epsilon(epsilon)
    relation = check_neighbouring(neighbouring)
    check_generator(rng)
    true = category_counts([codes], n_categories)[0]
    sensitivity = 2 if relation == "swap" else 1
    alpha = math.exp(-eps / sensitivity)
    # The difference of two geometric draws on {0, 1, ...} is two-sided geometric.
    p = 1.0 - alpha
    noise = (rng.geometric(p, size=true.size) - rng.geometric(p, size=true.size)
             if p < 1 else np.zeros(true.size, dtype=np.int64))
    return DPCategoryCounts(
        counts=(true + noise).astype(np.int64), alpha=alpha, sensitivity=sensitivity,
        variance=2 * alpha / (1 - alpha) ** 2, halfwidth=geometric_halfwidth(alpha),
        spent=PrivacySpent(eps),
    )


def common_cells(partitions: Sequence[tuple[tuple[int, ...], ...]],
                 n_cells: int) -> tuple[tuple[int, ...], ...]:
    """The finest cells, runs of adjacent cells 0..``n_cells``-1, of which every partition's
    cells are unions (each partition a run of adjacent cells per entry, as
    :func:`merge_adjacent` gives): a boundary is kept only where every partition keeps it. The
    centers' tables coarsened to them add up (post-processing of released counts)."""
    kept = set(range(n_cells - 1))  # boundary j: between cell j and cell j + 1
    for cells in partitions:
        flat = [c for cell in cells for c in cell]
        if flat != list(range(n_cells)):
            raise ValueError("each partition must cover the cells once, in order")
        kept &= {cell[-1] for cell in cells[:-1]}
    out: list[tuple[int, ...]] = []
    run: list[int] = []
    for j in range(n_cells):
        run.append(j)
        if j in kept or j == n_cells - 1:
            out.append(tuple(run))
            run = []
    return tuple(out)


def regroup(counts: ArrayLike, cells: tuple[tuple[int, ...], ...],
            common: tuple[tuple[int, ...], ...]) -> NDArray[np.float64]:
    """``counts`` (groups × ``cells``) summed into the coarser ``common`` cells."""
    table = np.asarray(counts, dtype=np.float64)
    owner = {c: i for i, cell in enumerate(common) for c in cell}
    out = np.zeros((table.shape[0], len(common)))
    for j, cell in enumerate(cells):
        targets = {owner[c] for c in cell}
        if len(targets) != 1:
            raise ValueError(f"cell {cell} straddles the common cells")
        out[:, targets.pop()] += table[:, j]
    return out
