"""Pieces shared by the DP quantile algorithms: the interval view of the data, exact log-space
sampling, and the result type.

The quantile mechanisms of Smith (2011) and Gillenwater et al. (2021) both see the data through the
n + 1 intervals between consecutive order statistics of the clipped, sorted data,
a = x_0 <= x_1 <= ... <= x_n <= x_{n+1} = b. Interval i is [x_i, x_{i+1}]; an output inside it has
exactly i data points at or below it. Zero-width intervals (ties) carry probability 0: their log
width is -inf and every weight built from it stays -inf, so no special case is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._sorting import ascending
from shared._validation import (
    as_finite_1d,
    check_bounds,
    check_epsilon,
    check_generator,
    check_levels,
    check_neighbouring,
)
from shared.privacy import Neighbouring, PrivacySpent

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

SortedQuantiles = Callable[
    [FloatArray, tuple[float, ...], float, tuple[float, float], Neighbouring, np.random.Generator],
    FloatArray,
]
"""A quantile mechanism on validated input: (sorted data, levels, ε, bounds, neighbouring, rng)
→ the estimates, one per level."""


@dataclass(frozen=True)
class QuantilesResult:
    """DP estimates ``values[i]`` of the quantiles at ``levels[i]`` and the budget they used."""

    levels: tuple[float, ...]
    values: tuple[float, ...]
    spent: PrivacySpent
    method: str


def quantiles_result(
    mechanism: SortedQuantiles, method: str, x: ArrayLike, levels: tuple[float, ...], *,
    epsilon: float, bounds: tuple[float, float], neighbouring: Neighbouring,
    rng: np.random.Generator,
) -> QuantilesResult:
    """The public face of every DP quantile mechanism: the arguments validated once, the data
    sorted, ``mechanism`` run, its estimates wrapped with the ε they spent (``levels`` are
    checked by the caller, which knows whether it takes one level or several)."""
    epsilon = check_epsilon(epsilon)
    bounds = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    rng = check_generator(rng)
    # Any size, none included: every mechanism is defined (and ε-DP) on empty data.
    data = ascending(as_finite_1d(x, "x", allow_empty=True))
    values = mechanism(data, levels, epsilon, bounds, neighbouring, rng)
    return QuantilesResult(
        levels=levels,
        values=tuple(float(v) for v in values),
        spent=PrivacySpent(epsilon),
        method=method,
    )


def check_single_level(q: Any) -> float:
    """One quantile level in [0, 1] (the single-quantile mechanisms refuse sequences)."""
    if np.ndim(q) != 0:
        raise ValueError(f"`q` must be a single level in [0, 1], got {q!r}")
    return check_levels(q, "q")[0]


def interval_edges(
    x_sorted: FloatArray, a: float, b: float, lo: int = 0, hi: int | None = None
) -> FloatArray:
    """Edges of intervals lo..hi-1 (default all n + 1): x_lo, ..., x_hi with x_0 = a, x_{n+1} = b.

    ``x_sorted`` must be sorted; values are clipped to [a, b]. Only the slice is touched.
    """
    n = x_sorted.size
    hi = n + 1 if hi is None else hi
    edges = np.empty(hi - lo + 1)
    # edge k is x_(k) (1-based order statistic) for 1 <= k <= n
    first, last = max(lo, 1), min(hi, n)
    if first <= last:
        np.clip(x_sorted[first - 1 : last], a, b, out=edges[first - lo : last - lo + 1])
    if lo == 0:
        edges[0] = a
    if hi == n + 1:
        edges[-1] = b
    return edges


def log_widths(
    x_sorted: FloatArray, a: float, b: float, lo: int = 0, hi: int | None = None
) -> FloatArray:
    """log |I_i| for intervals lo..hi-1 (default all n + 1); -inf for the zero-width ones."""
    with np.errstate(divide="ignore"):
        return np.log(np.diff(interval_edges(x_sorted, a, b, lo, hi)))


def sample_rows(log_w: FloatArray, rng: np.random.Generator) -> IntArray:
    """For each row r, an index i drawn with probability exp(log_w[r, i]) / sum_i exp(log_w[r, i]).

    Inverse-CDF sampling after subtracting the row maximum: every weight within a factor e^-745 of
    the largest is represented with full relative precision (a Gumbel-max draw resolves only
    about e^-40, the range of a Gumbel variate built from a 53-bit uniform).
    """
    top = log_w.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise RuntimeError("no output has positive probability; this is a bug")
    p = np.exp(log_w - top)
    cdf = np.cumsum(p, axis=1)
    u = rng.random(log_w.shape[0]) * cdf[:, -1]
    idx = np.sum(cdf <= u[:, None], axis=1)
    # u * total can round up to total; fall back to the last index that has positive weight.
    last_positive = log_w.shape[1] - 1 - np.argmax(p[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last_positive).astype(np.intp)


def uniform_in_intervals(
    x_sorted: FloatArray, a: float, b: float, intervals: IntArray, rng: np.random.Generator
) -> FloatArray:
    """One uniform draw inside each chosen interval [x_i, x_{i+1}] (of the clipped data)."""
    n = x_sorted.size
    if n == 0:  # a single interval, [a, b]
        x_sorted = np.array([a])
    lo = np.where(intervals == 0, a, np.clip(x_sorted[np.maximum(intervals - 1, 0)], a, b))
    hi = np.where(intervals == n, b, np.clip(x_sorted[np.minimum(intervals, n - 1)], a, b))
    out: FloatArray = lo + (hi - lo) * rng.random(intervals.shape)
    return out


# -- grid-aware output (a variable's public resolution) -----------------------------------------

MAX_GRID_POINTS = 2**48
"""The most points an output grid may hold: every grid index stays an exact integer in a float,
and a finer grid is no coarser than the floating-point numbers themselves."""

_GRID_TOLERANCE = 1e-6
"""A value within this fraction of the resolution of a grid point counts as on it, so the
rounding of recorded decimals (2.3 stored as 2.2999999999999998) never moves a value off its
point. Exact for values below about 10⁹ resolutions from 0."""


@dataclass(frozen=True)
class Grid:
    """The public output grid of a variable recorded at resolution r, within bounds [a, b]: the
    multiples of r (anchored on 0) strictly inside (a, b), and a and b themselves, i.e. the
    multiples of r clipped into the bounds. Values recorded at resolution r (and clipped to the
    bounds, as the mechanisms clip them) are exactly grid points; with r = 1/N (0.1, 0.25) the
    points are j/N, the correctly rounded decimals that ``round(x, 1)`` also gives.

    Grid point g_0 = a, g_k = (first + k − 1)·r for 1 <= k <= interior, g_{M−1} = b,
    M = interior + 2. Everything is public (bounds and resolution), never data.
    """

    a: float
    b: float
    resolution: float
    first: int  # the smallest multiple index j with j·r > a
    interior: int  # how many multiples lie strictly inside (a, b)
    divisor: int | None  # N when r = 1/N: the multiples are j / N

    @property
    def size(self) -> int:
        """M, the number of grid points."""
        return self.interior + 2

    @property
    def tolerance(self) -> float:
        return _GRID_TOLERANCE * self.resolution

    def _multiple(self, j: Any) -> Any:
        if self.divisor is not None:
            return np.asarray(j, dtype=np.float64) / self.divisor
        return np.asarray(j, dtype=np.float64) * self.resolution

    def points(self, idx: ArrayLike) -> FloatArray:
        """Grid points g_idx (idx in 0..M−1)."""
        k = np.asarray(idx, dtype=np.int64)
        inner = self._multiple(self.first + np.clip(k, 1, max(1, self.interior)) - 1)
        out: FloatArray = np.where(k <= 0, self.a, np.where(k >= self.size - 1, self.b, inner))
        return out

    def ranks(self, values: ArrayLike) -> IntArray:
        """s(v): how many grid points lie below v (by more than the tolerance), for v clipped to
        [a, b]. Monotone in v, so #{x : s(x) <= k} — the count "at or below g_k" the utilities
        use — is a fixed per-record function: a neighbour moves it by at most 1."""
        v = np.clip(np.asarray(values, dtype=np.float64), self.a, self.b) - self.tolerance
        inner = np.clip(np.ceil(v / self.resolution) - self.first, 0, self.interior)
        out: IntArray = ((v > self.a).astype(np.int64) + inner.astype(np.int64)).astype(np.intp)
        return out

    def floor(self, values: ArrayLike) -> FloatArray:
        """The largest grid point at or below each value (within the tolerance); a below a."""
        return self.points(self.hi_ranks(values))

    def ceil(self, values: ArrayLike) -> FloatArray:
        """The smallest grid point at or above each value (within the tolerance); b above b."""
        return self.points(self.ranks(values))

    def nearest(self, values: ArrayLike) -> FloatArray:
        """The nearest grid point to each value (clipped into [a, b]; halfway: the lower one).
        Post-processing: applied to a DP output it spends nothing."""
        v = np.clip(np.asarray(values, dtype=np.float64), self.a, self.b)
        lo, hi = self.floor(v), self.ceil(v)
        out: FloatArray = np.where(v - lo <= hi - v, lo, hi)
        return out

    def hi_ranks(self, values: ArrayLike) -> IntArray:
        """h(v): the index of the last grid point at or below v (within the tolerance), for v
        clipped to [a, b]. A value is *at* g_k when s(v) <= k <= h(v) (then s(v) = h(v) = k:
        grid points are more than twice the tolerance apart), else between g_h(v) and g_s(v)."""
        y = np.clip(np.asarray(values, dtype=np.float64), self.a, self.b) + self.tolerance
        inner = np.clip(np.floor(y / self.resolution) - self.first + 1, 0, self.interior)
        out: IntArray = (inner.astype(np.int64) + (y >= self.b).astype(np.int64)).astype(np.intp)
        return out

    def lattice(self, x_sorted: FloatArray) -> GridLattice:
        """The grid seen through the data (see :class:`GridLattice`), in O(n)."""
        n = x_sorted.size
        s, h = self.ranks(x_sorted), self.hi_ranks(x_sorted)
        sizes = np.zeros(2 * n + 1, dtype=np.int64)
        starts = np.zeros(2 * n + 1, dtype=np.int64)
        # Gap cell i: the grid points strictly between x_(i) and x_(i+1), none at a value.
        left = np.concatenate(([-1], h))
        right = np.concatenate((s, [self.size]))
        sizes[0::2] = np.maximum(right - left - 1, 0)
        starts[0::2] = left + 1
        # Atoms: a grid point with T values at it and L below sits at rank L + T/2.
        on = np.flatnonzero(s <= h)
        if on.size:
            points, first, tied = np.unique(s[on], return_index=True, return_counts=True)
            where = 2 * on[first] + tied
            if (sizes[where] > 0).any():  # impossible: an atom lies strictly inside a tie run
                raise RuntimeError("an atom and a gap share a lattice position; this is a bug")
            sizes[where] = 1
            starts[where] = points
        return GridLattice(grid=self, sizes=sizes, starts=starts)


@dataclass(frozen=True)
class GridLattice:
    """A grid seen through sorted data: the candidates of grid-aware PrivateQuantile.

    Smith's utility counts #{x <= o}. On a grid that is one-sided:
    at a grid point g with T tied values at it and L below, #{x <= g} = L + T, and the
    mechanism returns g − r whenever the target rank is nearer L than L + T, however many
    values sit at g (one grid step of bias on rounded data). The grid-aware utilities count
    the tied values half: C(g) = #{x below g} + ½·#{x at g} — the mid-rank, as OpenDP's
    candidate score counts the ties at a candidate in part. A neighbour still moves C by at
    most 1 (add/remove: C − q·n by 1 − q, ½ − q or −q), so the sensitivity stays that of the
    continuous utility (docs/methods.md §5.10).

    2·C is an integer: position 2i for the grid points with no value at them and i values
    below (gap cell i, between x_(i) and x_(i+1)); position 2L + T for the grid point with T
    values at it (an atom). Position p holds ``sizes[p]`` consecutive grid points from index
    ``starts[p]`` (0 or 1 for an atom's position), all of the same utility; positions run
    0..2n and the sizes sum to M.
    """

    grid: Grid
    sizes: NDArray[np.int64]
    starts: NDArray[np.int64]

    @property
    def last(self) -> int:
        """The last position, 2n."""
        return self.sizes.size - 1

    def log_sizes(self, lo: int = 0, hi: int | None = None) -> FloatArray:
        """log of the number of grid points at positions lo..hi-1; -inf where there are none."""
        with np.errstate(divide="ignore"):
            return np.log(self.sizes[lo:hi].astype(np.float64))


def make_grid(bounds: tuple[float, float], resolution: float | None) -> Grid | None:
    """The output grid of ``resolution`` within validated ``bounds`` (None: no grid).

    Raises ``ValueError`` for a resolution that is not finite and positive, or so fine for the
    bounds that the grid would hold more than :data:`MAX_GRID_POINTS` points.
    """
    if resolution is None:
        return None
    if isinstance(resolution, bool) or not isinstance(resolution, (int, float, np.floating,
                                                                   np.integer)):
        raise ValueError(f"`resolution` must be a positive number or None, got {resolution!r}")
    r = float(resolution)
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"`resolution` must be finite and > 0, got {resolution!r}")
    a, b = bounds
    span = max(abs(a), abs(b)) / r
    if not (math.isfinite(span) and (b - a) / r < MAX_GRID_POINTS and span < 2.0**52):
        raise ValueError(
            f"`resolution` {r!r} is too fine for the bounds ({a!r}, {b!r}): the grid would hold "
            f"more than {MAX_GRID_POINTS} points"
        )
    inverse = round(1.0 / r)
    divisor = inverse if r < 1 and inverse >= 2 and abs(inverse * r - 1.0) <= 1e-12 else None
    tol = _GRID_TOLERANCE * r

    def multiple(j: int) -> float:
        return j / divisor if divisor is not None else j * r

    first = math.floor(a / r)
    # Multiples within 3 tolerances of a bound are that bound (points stay > 2 tolerances
    # apart, so no value is at two of them).
    first = math.floor(a / r)
    while multiple(first) <= a + 3 * tol:
        first += 1
    while multiple(first - 1) > a + 3 * tol:
        first -= 1
    last = math.ceil(b / r)
    while multiple(last) >= b - 3 * tol:
        last -= 1
    while multiple(last + 1) < b - 3 * tol:
        last += 1
    return Grid(a=float(a), b=float(b), resolution=r, first=first,
                interior=max(0, last - first + 1), divisor=divisor)


def snap_to_grid(
    values: ArrayLike, *, bounds: tuple[float, float], resolution: float | None
) -> FloatArray:
    """Each value moved to the nearest point of the resolution's grid (:class:`Grid`): for the
    DP algorithms without a grid-aware sampler (ApproxQuantile, the unbounded walk). Post-
    processing of a DP release, so it spends nothing; ``resolution=None`` returns the values."""
    out = np.asarray(values, dtype=np.float64)
    grid = make_grid(check_bounds(bounds), resolution)
    return out if grid is None else grid.nearest(out)


def off_grid_count(values: ArrayLike, resolution: float) -> int:
    """How many finite ``values`` lie off the multiples of ``resolution`` (anchored on 0, with
    :class:`Grid`'s tolerance, 1e-6 of the resolution): a declared resolution that does not
    hold makes grid-aware quantiles 5-10 times worse (docs/methods.md §5.10). A center checks
    its data with it on every read (``center_agent.data``); the count goes to its operator,
    never to a caller. Time O(n); memory a few blocks of 2^20 values, whatever n (a center
    holds up to 10^8 values per variable)."""
    r = float(resolution)
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"`resolution` must be finite and > 0, got {resolution!r}")
    x = np.asarray(values, dtype=np.float64).ravel()
    inverse = round(1.0 / r)
    divisor = inverse if r < 1 and inverse >= 2 and abs(inverse * r - 1.0) <= 1e-12 else None
    eps = np.finfo(np.float64).eps
    off = 0
    for start in range(0, x.size, _BLOCK):
        block = x[start:start + _BLOCK]
        block = block[np.isfinite(block)]
        if divisor is not None:
            # r = 1/N: x·N is a whole number for a recorded j/N (as Grid's divisor points).
            scaled = block * divisor
            distance = np.abs(scaled - np.round(scaled)) / divisor
        else:
            scaled = block / r
            distance = np.abs(scaled - np.round(scaled)) * r
        # Beyond about 10⁹ resolutions from 0 a double's own spacing exceeds the tolerance.
        tolerance = np.maximum(_GRID_TOLERANCE * r, 8.0 * eps * np.abs(block))
        off += int(np.count_nonzero(distance > tolerance))
    return off


_BLOCK = 1 << 20
