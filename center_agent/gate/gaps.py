"""One number per gap: where a center's limits fall between its data (docs/privacy.md, "One
number per gap").

A table's interior limit, a refinement's split limit, a privacy buffer and a moved buffer are
all numbers placed between two consecutive distinct values of the variable, or beyond the
smallest or largest one. The core (``shared.binning``, ``shared.federation``) decides *which*
gaps get a limit, from ranks and counts; this module decides *which number*, for the center:

* a gap is one of the **population's** (every record any release of the variable counts), found
  from the two values the core names: a release of two levels cuts between two of their values
  ``p < q``, and the limit goes in the population's gap just below ``q`` (between ``q`` and the
  largest population value under it), inside ``(p, q)``; the buffer below a release's smallest
  value ``q`` goes in the population's gap below ``q`` (the outer gap when ``q`` is the
  population's minimum), and symmetrically above;
* a gap that already holds a number this center released (in any epoch) gets that number again;
* any other gap gets its **keyed** number: the fraction MAC_secret(variable, gap) of the way
  across it (:meth:`~center_agent.gate.keys.CenterKeys.gap_fractions`), and beyond the data the
  extreme value moved out by (½ + that fraction) of the mean gap of the population's K most
  extreme records; the numbers a release places are remembered (:func:`record`, one block of
  the new ones per release) in its transaction.

So the number in a gap depends on the secret, the gap and the numbers already released, never on
a request: every release that puts a limit in a gap puts the same one there. A caller who reads
them all learns, of each gap, one number inside it. Two requests computed concurrently agree too:
a gap without a remembered number gets its keyed number from either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, select

from center_agent.db import placed_blocks, placed_numbers
from center_agent.gate.keys import CenterKeys
from shared.binning import buffer_scales, place_points

FloatArray = NDArray[np.float64]


_NUMBERS = np.dtype("<f8")


def placed(conn: Connection, dataset: str, variable: str) -> FloatArray:
    """The numbers this center placed between data of ``variable`` so far, sorted and distinct:
    the blocks of the releases that placed them, and the rows of a ledger made before blocks."""
    blocks = conn.execute(
        select(placed_blocks.c.numbers).where(placed_blocks.c.dataset == dataset,
                                              placed_blocks.c.variable == variable)
    ).scalars().all()
    older = conn.execute(
        select(placed_numbers.c.value).where(placed_numbers.c.dataset == dataset,
                                             placed_numbers.c.variable == variable)
    ).scalars().all()
    parts = [np.frombuffer(b, dtype=_NUMBERS).astype(np.float64) for b in blocks]
    if older:
        parts.append(np.asarray([float.fromhex(v) for v in older], dtype=np.float64))
    if not parts:
        return np.empty(0, dtype=np.float64)
    return np.unique(np.concatenate(parts))


def record(conn: Connection, dataset: str, variable: str, numbers: Iterable[float]) -> None:
    """Remember the finite ``numbers`` a release placed, as one block of those not remembered
    yet (a release under the dataset's lock: ``ReleaseGate.remember``); -0.0 is kept as 0.0."""
    values = np.fromiter((float(v) for v in numbers), dtype=np.float64)
    values = np.unique(values[np.isfinite(values)] + 0.0)
    if not values.size:
        return
    new = np.setdiff1d(values, placed(conn, dataset, variable), assume_unique=True)
    if new.size:
        conn.execute(placed_blocks.insert().values(
            dataset=dataset, variable=variable, numbers=new.astype(_NUMBERS).tobytes()))


def last_below(levels: Sequence[FloatArray], points: FloatArray) -> FloatArray:
    """Per point, the largest value below it (-inf when none) of the sorted ``levels`` pooled:
    ties (0.0 and -0.0) go to the later level, as in their stable merge."""
    out = np.full(points.size, -np.inf)
    for values in levels:
        i = np.searchsorted(values, points, side="left")
        nearest = np.where(i > 0, values[np.maximum(i - 1, 0)], -np.inf)
        np.copyto(out, nearest, where=nearest >= out)
    return out


def first_above(levels: Sequence[FloatArray], points: FloatArray) -> FloatArray:
    """Per point, the smallest value above it (+inf when none) of the sorted ``levels`` pooled:
    ties go to the earlier level, as in their stable merge."""
    out = np.full(points.size, np.inf)
    for values in levels:
        j = np.searchsorted(values, points, side="right")
        nearest = np.where(j < values.size, values[np.minimum(j, values.size - 1)], np.inf)
        np.copyto(out, nearest, where=nearest < out)
    return out


def pooled_scales(levels: Sequence[FloatArray], k: int) -> tuple[float, float]:
    """:func:`~shared.binning.sorted_scales` of the sorted, non-empty ``levels`` pooled, from
    each level's K extreme values (the pooled K extreme ones are among them)."""
    n = sum(v.size for v in levels)
    m = min(k, n)
    heads = np.sort(np.concatenate([v[:m] for v in levels]), kind="stable")
    tails = np.sort(np.concatenate([v[v.size - min(m, v.size):] for v in levels]),
                    kind="stable")
    return buffer_scales(float(heads[0]), float(heads[m - 1]), float(tails[-m]),
                         float(tails[-1]), n, k)


class GapPoints:
    """The center's :data:`~shared.binning.Placement` for one variable of one population (see
    the module docstring). ``levels`` are the population's values of the variable, each level
    sorted (read where they lie: the population is never pooled for this, so a table costs no
    copy of the data); ``remembered`` the numbers placed before, sorted.

    Every number is the one the population's values pooled into one sorted array (a stable
    sort of the levels, in their order) would give: the largest value below a point is the
    last such value of the last level holding it, the smallest above the first of the first,
    and the K extreme values those of the levels' K extreme ones sorted stably."""

    def __init__(self, keys: CenterKeys, variable: str, levels: Sequence[FloatArray],
                 remembered: FloatArray, k: int) -> None:
        self.keys = keys
        self.variable = variable
        self.levels = [np.asarray(v, dtype=np.float64) for v in levels if v.size]
        self.remembered = remembered
        self.scales = pooled_scales(self.levels, k) if self.levels else (0.0, 0.0)

    def gaps(self, below: FloatArray, above: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The population's gap for each gap the core names (module docstring): the one just
        below ``above`` (just above ``below`` when ``above`` is +inf)."""
        lo = np.asarray(below, dtype=np.float64).copy()
        hi = np.asarray(above, dtype=np.float64).copy()
        up = np.isposinf(hi) & np.isfinite(lo)
        down = ~up
        lo[down] = np.maximum(lo[down], last_below(self.levels, hi[down]))
        hi[up] = np.minimum(hi[up], first_above(self.levels, lo[up]))
        return lo, hi

    def __call__(self, below: FloatArray, above: FloatArray) -> FloatArray:
        lo, hi = self.gaps(below, above)
        out = np.empty(lo.size)
        mem = self.remembered
        # The first remembered number above the gap's lower end, if it lies below its upper.
        i = np.searchsorted(mem, lo, side="right")
        candidate = mem[np.minimum(i, mem.size - 1)] if mem.size else np.full(lo.size, np.inf)
        held = (i < mem.size) & (candidate < hi)
        out[held] = candidate[held]
        fresh = ~held
        if fresh.any():
            w = self.keys.gap_fractions(self.variable, lo[fresh], hi[fresh])
            out[fresh] = place_points(lo[fresh], hi[fresh], w, *self.scales)
        return out
