"""Fisher-optimal noise on the unit box [−1, 1]: the ground state of seed 002, solved and tabulated.

Minimising J = E[(d/du log p)²] = 4∫ψ'² over densities p = ψ² on [−1, 1] with ∫u²ψ² = r gives
(Farokhi 2019, seed 002 eq. 6; docs/methods.md §7.5) the ground state of

    H = −4 d²/du² + Λu²,    ψ(±1) = 0,

with the multiplier Λ >= 0 chosen so that s(Λ) = <u²> = r. The ground energy E_0(Λ) is concave and
s = dE_0/dΛ (Hellmann–Feynman) decreases from r_max = 1/3 − 2/π² at Λ = 0 (the raised cosine
cos²(πu/2), J = π²) towards 1/√Λ (the harmonic oscillator); J*(r) = E_0(Λ) − Λr.

Any half-width a follows by w = a·u: J*(ρ; a) = J*(ρ/a²; 1)/a², λ = Λ/a⁴ (docs/methods.md §7.5).

Numerics (docs/methods.md §7.5). Second-order finite differences on M = 128, 256, 512
intervals (diagonal 8/h² + Λu_i², off-diagonal −4/h²); the lowest eigenvector from
``scipy.linalg.eigh_tridiagonal(select='i', select_range=(0, 0))``. J and s are read off the
normalised eigenvector v as 4Σ(Δv)²/h² and Σu_i²v_i²: sums of positive terms, good to ~1e-15,
whereas the bisection eigenvalue itself only carries eps·‖H‖ (~1e-9 on fine grids, which is also
why finer grids do not help). Both have error expansions in even powers of h, removed by two
Richardson steps: the exact case Λ = 1 (E_0 = 10) is reproduced to 1e-14 and the reference
table of docs/methods.md §7.5 to all its printed digits. The sampling table is the eigenvector
on a 2048-interval grid.

Regimes:

* r >= r_max: the constraint is inactive; the raised cosine, in closed form.
* r <= 1/100 (Λ >= 10⁴): the walls are >= 10 standard deviations out, where p ~ e^{−50}; the ground
  state equals the harmonic-oscillator Gaussian ψ ∝ exp(−√Λ u²/4) (s = 1/√Λ, J = √Λ) to a
  relative ~1e-20, far below double precision, so those closed forms are used. The tabulated density
  is the Λ = 10⁴ ground state rescaled to walls at ±10√s (scaling law): a true ground state with a
  compact support inside [−1, 1], never a Gaussian truncated with a jump.
* otherwise Λ is found by ``brentq`` on log Λ.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import eigh_tridiagonal
from scipy.optimize import brentq

R_MAX: Final = 1.0 / 3.0 - 2.0 / math.pi**2
"""<u²> of the raised cosine on [−1, 1]: the largest second moment an optimum can have."""

GAUSS_MULTIPLIER: Final = 1.0e4
"""Λ from which the walls sit >= 10 standard deviations out (s = 1/√Λ <= 1/100)."""

GAUSS_MOMENT: Final = 1.0 / math.sqrt(GAUSS_MULTIPLIER)

# Slopes at Λ = 0 (finite differences): ds/dΛ = −5.9225e-4, d(1/s²)/dΛ = 0.53064. Rounded away
# from the root so that the bracket they give stays a bracket (a failed one is widened anyway).
_SLOPE_AT_ZERO: Final = 5.93e-4
_F_SLOPE_AT_ZERO: Final = 0.5305

_INTERVALS: Final = (128, 256, 512)
_TABLE_INTERVALS: Final = 2048

Kind = Literal["raised_cosine", "ground_state", "harmonic"]


@dataclass(frozen=True)
class _Grid:
    h: float
    u2: NDArray[np.float64]  # squared interior nodes
    off: NDArray[np.float64]


def _grid(intervals: int) -> _Grid:
    h = 2.0 / intervals
    u = np.linspace(-1.0, 1.0, intervals + 1)[1:-1]
    return _Grid(h, u * u, np.full(intervals - 2, -4.0 / h**2))


_GRIDS: Final = tuple(_grid(m) for m in _INTERVALS)
_TABLE_GRID: Final = _grid(_TABLE_INTERVALS)


def _ground_vector(grid: _Grid, lam: float) -> NDArray[np.float64]:
    diag = 8.0 / grid.h**2 + lam * grid.u2
    _, vec = eigh_tridiagonal(diag, grid.off, select="i", select_range=(0, 0))
    v: NDArray[np.float64] = vec[:, 0]
    v = v / math.sqrt(float(v @ v))
    return v if v[v.size // 2] > 0 else -v


def _fisher_and_moment(grid: _Grid, v: NDArray[np.float64]) -> tuple[float, float]:
    """(4∫ψ'², ∫u²ψ²) of the grid function v with walls v = 0 outside."""
    dv2 = float(np.sum(np.diff(v) ** 2) + v[0] ** 2 + v[-1] ** 2)
    return 4.0 * dv2 / grid.h**2, float(grid.u2 @ (v * v))


def _richardson(values: Sequence[float]) -> float:
    """Extrapolate to h → 0 values computed at h, h/2, h/4, ... with errors in powers of h²."""
    row = list(values)
    factor = 1.0
    while len(row) > 1:
        factor *= 4.0
        row = [(factor * fine - coarse) / (factor - 1.0) for coarse, fine in pairwise(row)]
    return row[0]


def unit_moments(lam: float) -> tuple[float, float]:
    """(s, J) = (<u²>, Fisher information) of the unit-box ground state at multiplier Λ >= 0."""
    if lam == 0.0:
        return R_MAX, math.pi**2
    if lam >= GAUSS_MULTIPLIER:
        root = math.sqrt(lam)
        return 1.0 / root, root
    fishers, moments = [], []
    for grid in _GRIDS:
        fisher, moment = _fisher_and_moment(grid, _ground_vector(grid, lam))
        fishers.append(fisher)
        moments.append(moment)
    return _richardson(moments), _richardson(fishers)


def _solve_log_multiplier(
    excess: Callable[[float], float], lo: float, hi: float, relative_gap: float
) -> float:
    """Root of ``excess`` (decreasing in log λ) by brentq; widens a bracket that proved too tight.

    Near the inactive limit s is nearly flat in log λ (ds/dlog λ ≈ −(R_MAX − r)): asking log λ for
    more digits than the ~1e-14 rounding of s can give only makes brentq bisect, so the tolerance
    follows ``relative_gap`` = (R_MAX − r)/R_MAX.
    """
    xtol = max(1e-13, 1e-14 / relative_gap)
    for _ in range(8):
        try:
            return math.exp(brentq(excess, math.log(lo), math.log(hi), xtol=xtol))
        except ValueError:  # no sign change: the cheap bounds below were not bounds after all
            lo, hi = lo / 4.0, hi * 4.0
    raise ArithmeticError("no multiplier found for the second-moment constraint")


def multiplier_for_moment(r: float) -> float:
    """Λ with s(Λ) = r on the unit box, for GAUSS_MOMENT < r < R_MAX.

    The bracket comes from two near-linear laws: s is convex with s'(0) = −5.9225e-4, so
    s(Λ) >= R_MAX − cΛ; and F = 1/s² rises from 1/R_MAX² with slope 0.5306 at Λ = 0 to slope 1
    (F >= Λ since s <= 1/√Λ), convexly. It is within a factor 1.5 of the root everywhere and
    within 1e-3 near both ends, so brentq needs few of its ~0.4 ms evaluations.
    """
    f0 = 1.0 / R_MAX**2
    lo = max((R_MAX - r) / _SLOPE_AT_ZERO, 1.0 / r**2 - f0)
    hi = min(1.0 / r**2, (1.0 / r**2 - f0) / _F_SLOPE_AT_ZERO)

    def excess(log_lam: float) -> float:
        return unit_moments(math.exp(log_lam))[0] - r

    if R_MAX - r < 1e-11:
        # within rounding of the inactive limit: first-order perturbation theory is exact there
        return (R_MAX - r) / 5.9225e-4
    return _solve_log_multiplier(excess, lo, hi, (R_MAX - r) / R_MAX)


def shared_multiplier(half_widths_sq: Sequence[tuple[float, int]], target: float) -> float:
    """The λ >= 0 with Σ count·a²·s(λa⁴) = target, for (a², count) groups of box coordinates.

    A box shares one λ across its coordinates (docs/methods.md §7.6); λ = 0 when the constraint
    is inactive.
    """
    total = math.fsum(c * a2 for a2, c in half_widths_sq)
    dims = sum(c for _, c in half_widths_sq)
    gap = R_MAX * total - target
    if gap <= 0.0:
        return 0.0
    if gap < 1e-11 * total:
        # within rounding of the inactive limit: first-order perturbation theory is exact there
        return gap / (5.9225e-4 * math.fsum(c * a2**3 for a2, c in half_widths_sq))

    def excess(log_lam: float) -> float:
        lam = math.exp(log_lam)
        moments = (c * a2 * unit_moments(lam * a2 * a2)[0] for a2, c in half_widths_sq)
        return math.fsum(moments) - target

    # s(Λ) >= R_MAX − cΛ (convexity) and s(Λ) < 1/√Λ (walls only squeeze)
    lo = gap / (_SLOPE_AT_ZERO * math.fsum(c * a2**3 for a2, c in half_widths_sq))
    return _solve_log_multiplier(excess, lo, (dims / target) ** 2, gap / (R_MAX * total))


_GUIDE_CELLS: Final = 2**14


@dataclass(frozen=True)
class InverseCDF:
    """Exact inverse of a piecewise-linear CDF table, with a guide table (Chen & Asau 1974).

    ``np.interp`` would binary-search the 2049 nodes for every draw (~70 ns each). Instead the
    probability axis is cut into 2^14 equal guide cells; a cell that holds no table node maps to its
    node interval directly, and only draws landing in the few cells that straddle a node (at most
    2048 of 16384) are searched. The result equals ``np.interp(q, probs, nodes)``.
    """

    probs: NDArray[np.float64]  # strictly increasing, 0 ... 1
    nodes: NDArray[np.float64]
    slopes: NDArray[np.float64]  # Δnodes/Δprobs per interval
    guide: NDArray[np.int32]  # interval index per guide cell, −1 where a node falls inside

    @classmethod
    def from_table(cls, probs: NDArray[np.float64], nodes: NDArray[np.float64]) -> InverseCDF:
        edges = np.arange(_GUIDE_CELLS + 1) / _GUIDE_CELLS
        last = probs.size - 2
        first = np.minimum(np.searchsorted(probs, edges[:-1], side="right") - 1, last)
        final = np.minimum(np.searchsorted(probs, edges[1:], side="left") - 1, last)
        guide = np.where(first == final, first, -1).astype(np.int32)
        slopes = np.diff(nodes) / np.diff(probs)
        for arr in (probs, nodes, slopes, guide):
            arr.flags.writeable = False  # shared through the cache
        return cls(probs, nodes, slopes, guide)

    def __call__(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        q = np.clip(q, 0.0, 1.0)
        cell = np.minimum((q * _GUIDE_CELLS).astype(np.intp), _GUIDE_CELLS - 1)
        interval = self.guide[cell].astype(np.intp)
        straddle = np.flatnonzero(interval < 0)
        if straddle.size:
            found = np.searchsorted(self.probs, q.flat[straddle], side="right") - 1
            interval.flat[straddle] = np.clip(found, 0, self.probs.size - 2)
        out: NDArray[np.float64] = self.nodes[interval] + (q - self.probs[interval]) * (
            self.slopes[interval]
        )
        return out


@dataclass(frozen=True)
class UnitState:
    """A Fisher-optimal density on [−1, 1] (support [−L, L] with L <= 1), tabulated for sampling.

    ``nodes``/``sqrt_density``/``cdf`` tabulate ψ = √p and the CDF (walls included, ∫ψ² = 1);
    ``ppf`` inverts the CDF table, linear between nodes.
    """

    multiplier: float
    second_moment: float
    fisher_information: float
    kind: Kind
    nodes: NDArray[np.float64]
    sqrt_density: NDArray[np.float64]
    cdf: NDArray[np.float64]
    ppf: InverseCDF


def _state(
    multiplier: float,
    second_moment: float,
    fisher: float,
    kind: Kind,
    nodes: NDArray[np.float64],
    psi: NDArray[np.float64],
    cdf: NDArray[np.float64],
) -> UnitState:
    for arr in (nodes, psi, cdf):
        arr.flags.writeable = False  # shared through the cache
    # flat stretches of the CDF (far tails below rounding) cannot be inverted: keep the first node
    keep = np.concatenate(([True], np.diff(cdf) > 0.0))
    inverse = InverseCDF.from_table(cdf[keep], nodes[keep])
    return UnitState(multiplier, second_moment, fisher, kind, nodes, psi, cdf, inverse)


def _tabulate(psi: NDArray[np.float64], h: float) -> NDArray[np.float64]:
    """CDF at the nodes of a piecewise-linear ψ: a cell holds h(ψ_i² + ψ_iψ_{i+1} + ψ_{i+1}²)/3."""
    cells = h * (psi[:-1] ** 2 + psi[:-1] * psi[1:] + psi[1:] ** 2) / 3.0
    cdf = np.concatenate(([0.0], np.cumsum(cells)))
    return cdf / cdf[-1]


def _raised_cosine() -> UnitState:
    intervals = _TABLE_INTERVALS
    nodes = np.linspace(-1.0, 1.0, intervals + 1)
    psi = np.cos(0.5 * math.pi * nodes)
    psi[[0, -1]] = 0.0
    cdf = 0.5 * (1.0 + nodes + np.sin(math.pi * nodes) / math.pi)
    cdf[[0, -1]] = 0.0, 1.0
    return _state(0.0, R_MAX, math.pi**2, "raised_cosine", nodes, psi, cdf)


@functools.lru_cache(maxsize=64)  # ~170 kB per solved table
def state_at_multiplier(lam: float) -> UnitState:
    """The unit-box optimum for multiplier Λ >= 0, tabulated (cached)."""
    if lam == 0.0:
        return _raised_cosine()
    if lam >= GAUSS_MULTIPLIER and lam != GAUSS_MULTIPLIER:
        base = state_at_multiplier(GAUSS_MULTIPLIER)
        moment, fisher = unit_moments(lam)
        half = math.sqrt(moment / GAUSS_MOMENT)  # = 10√s: the base state's walls moved in
        return _state(
            lam,
            moment,
            fisher,
            "harmonic",
            base.nodes * half,
            base.sqrt_density / math.sqrt(half),
            base.cdf.copy(),
        )
    moment, fisher = unit_moments(lam)
    grid = _TABLE_GRID
    psi = np.concatenate(([0.0], _ground_vector(grid, lam), [0.0])) / math.sqrt(grid.h)
    nodes = np.linspace(-1.0, 1.0, psi.size)
    kind: Kind = "harmonic" if lam >= GAUSS_MULTIPLIER else "ground_state"
    return _state(lam, moment, fisher, kind, nodes, psi, _tabulate(psi, grid.h))


@functools.lru_cache(maxsize=64)  # ~170 kB per solved table
def state_for_moment(r: float) -> UnitState:
    """The unit-box optimum under <u²> <= r (r > 0), tabulated (cached on r = ρ/a²)."""
    if r >= R_MAX:
        return state_at_multiplier(0.0)
    if r <= GAUSS_MOMENT:
        return state_at_multiplier(1.0 / r**2)
    return state_at_multiplier(multiplier_for_moment(r))


def clear_cache() -> None:
    """Forget every solved density (benchmarks time a cold solve)."""
    state_for_moment.cache_clear()
    state_at_multiplier.cache_clear()
