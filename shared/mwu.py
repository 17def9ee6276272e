"""Mann-Whitney U: the local statistic and four federated tests (seed 001 §6; docs/methods.md §3).

Convention (seed 001): U = Σ_i Σ_j sign(Y_j − X_i), so U > 0 when Y tends to exceed X.
Under H0, E[U] = 0 and

    Var U = n·m·(N + 1)/3 · [1 − Σ_r (t_r³ − t_r) / (N(N² − 1))],

t_r the size of the r-th tie group, N = n + m. Z = U/√Var (normal approximation, no continuity
correction). U relates to scipy's statistic for ``x`` by U = n·m − 2·U_x.

Small samples (N <= ``EXACT_MAX_N`` = 50): the local test's p-value comes from U's exact
permutation law given the ties (:func:`exact_null`), not the normal one; a release's numbers
determine that law when it has no ties and no noise (:func:`public_exact_null`), and then the
federated tests use it too — each center's own p-value (Fisher), and for the sum test the
convolution of the centers' laws when every center has one. With ties a release without noise
carries the two exact tails at its U, computed by the center (``exact_log_tails``,
:func:`check_exact_tails`): the center's own p-value comes from them, the sum test stays
normal (a convolution needs the laws). A small noisy release (which states
the no-ties V) is referred to U's no-ties law plus its noise (:meth:`ExactNull.noisy_log_tails`).
Each result names the law its p-value comes from (``null``; ``NULLS``).

``alternative`` has scipy's meaning for the pair (x, y): ``"less"`` — X is stochastically smaller
than Y (U large, p = P(Z ≥ z)); ``"greater"`` — X is larger (p = P(Z ≤ z)); ``"two-sided"`` —
twice the smaller tail.

Federated tests on released numbers only, each center releasing (U_l, V_l, n_l, m_l):

* sum: Z = Σ U_l / √(Σ V_l);
* weighted: Z_w = Σ w_l Z_l / √(Σ w_l²), w_l = n_l·m_l/√V_l, the weights that maximize power
  under a common P(Y > X) − P(Y < X) (seed 001 appendix);
* Fisher: T = −2 Σ log p_l ~ χ²_{2L} on one-sided center p-values; two-sided: the test is run in
  both directions and the smaller p doubled (Bonferroni over the two directions);
* table: U on the federated bin table, records in one bin tied (t_r = fx_r + fy_r, non-integer
  counts allowed).

Noisy releases: a center may release U_l + w_l, w_l drawn from a noise mechanism of variance σ_l²
whose law (:class:`shared.noisy_null.NoiseLaw`) travels with the release. Under H0, U_l is
approximately N(0, V_l) and w_l independent of it. Referring (U_l + w_l)/√(V_l + σ_l²) to N(0, 1)
is anti-conservative when the noise is Laplace and not small against √V_l (its tails are heavier),
so every test refers its statistic to the exact law of normal + noise
(:class:`shared.noisy_null.NoisyNormal`; the normal-Laplace law of Reed & Jorgensen 2004 for one
Laplace noise, a saddle-point inversion of the moment generating function otherwise):

* local: U + w ~ N(0, V) + w;
* sum: Σ_l (U_l + w_l) ~ N(0, Σ V_l) + Σ_l w_l;
* weighted: Z_w = Σ_l c_l (U_l + w_l), c_l = w_l/(√(V_l + σ_l²)·√Σ w_l²), with the weights
  w_l = n_l·m_l/√(V_l + σ_l²): Z_w ~ N(0, Σ c_l² V_l) + Σ_l c_l w_l;
* Fisher: every center's p-value from its own exact law, so that T = −2 Σ log p_l ~ χ²_{2L}
  holds as exactly as U_l's normal approximation.

The displayed statistics keep V_l + σ_l² (the sum's denominator, the weights and the Z_l); only
the p-values change, and a release without noise keeps its normal p-value. A noisy release states
the no-ties V = n·m·(N + 1)/3 (a public function of the sizes): with ties U's null variance is
smaller, so the tests are conservative there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from shared import _greedy, _walk
from shared._sorting import ascending
from shared._validation import (
    RELEASE_RTOL,
    Alternative,
    as_finite_1d,
    check_alternative,
    check_generator,
)
from shared.binning import BinTable
from shared.mechanisms import Mechanism
from shared.noisy_null import NoiseLaw, NoisyNormal, noise_law_of

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class MannWhitneyResult:
    """Local test: ``statistic`` is U = Σ sign(Y − X); ``zstatistic`` = U/√``variance``.

    A noisy release has ``statistic`` = U + w, ``variance`` = V (U's null variance),
    ``noise_variance`` = σ² = Var w and ``noise`` the law of w; then ``zstatistic`` =
    (U + w)/√(V + σ²) and ``pvalue`` comes from the exact law of N(0, V) + w (``null_law``).
    """

    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    n_x: int
    n_y: int
    noise_variance: float = 0.0
    noise: NoiseLaw | None = None
    exact: ExactNull | None = field(default=None, compare=False, repr=False)
    exact_log_tails: tuple[float, float] | None = None
    """(log P(U >= U_obs), log P(U <= U_obs)) under U's exact permutation law given the
    center's ties, as the center computed them (:meth:`release_tails`); None when not
    released. Where the released numbers do not determine the law (ties), a released result's
    p-value comes from these."""

    @property
    def null(self) -> str:
        """The law the p-value comes from (``NULLS``): ``"exact"`` (U's permutation law,
        :func:`exact_null`), ``"exact+noise"`` (that law + the noise), ``"normal+noise"``
        (N(0, V) + the noise, ``shared.noisy_null``) or ``"normal"``."""
        if self.exact is not None or (self.exact_log_tails is not None and self.noise is None):
            return "exact+noise" if self.noise is not None else "exact"
        return "normal+noise" if self.noise is not None else "normal"

    def release_tails(self) -> tuple[float, float] | None:
        """What a small center releases beside U so that the coordinator can refer U to its
        exact law given the ties: the two log tails at U, when the law is exact and there is
        no noise (else None). Every split of the pooled records is equally likely, so each tail
        is at least 1/C(N, n) and the two sum to 1 + P(U = U_obs) >= 1."""
        if self.noise is not None or self.exact is None:
            return None
        return self.exact.log_tails(self.statistic)

    @property
    def total_variance(self) -> float:
        """Null variance of the released statistic: V + σ²."""
        return self.variance + self.noise_variance

    @property
    def null_law(self) -> NoisyNormal | None:
        """The law of ``statistic`` under H0: N(0, V) plus the noise; None when it is the point
        mass at 0 (no noise and V = 0: every value tied)."""
        if self.noise is not None:
            return NoisyNormal(self.variance, (self.noise,))
        return NoisyNormal(self.variance) if self.variance > 0 else None


@dataclass(frozen=True)
class CenterPart:
    """One center's share of a federated test."""

    statistic: float
    variance: float
    zstatistic: float
    pvalue: float
    weight: float
    null: str = "normal"


NULLS = ("exact", "exact+noise", "normal", "normal+noise", "chi2")
"""What a p-value is computed from: ``exact`` — U's permutation law (:func:`exact_null`, for a sum
the convolution of the centers' laws); ``exact+noise`` — that law plus the DP noise, exactly
(:meth:`ExactNull.noisy_log_tails`); ``normal`` — N(0, 1) for Z; ``normal+noise`` — the exact
law of N(0, V) + the DP noise (``shared.noisy_null``); ``chi2`` — Fisher's χ²_{2L} over the
centers' p-values, each from its own law (its part's ``null``)."""


@dataclass(frozen=True)
class FederatedMWUResult:
    """A federated test: ``statistic`` is its Z (or Fisher's T, with ``df`` = 2L degrees of
    freedom of its χ² law), ``parts`` one per center, ``null`` the law its p-value comes from
    (one of ``NULLS``)."""

    method: str
    statistic: float
    pvalue: float
    parts: tuple[CenterPart, ...]
    df: int | None = None
    null: str = "normal"


def _z_pvalue(z: FloatArray | float, alternative: str) -> FloatArray:
    z = np.asarray(z, dtype=np.float64)
    if alternative == "less":
        return np.asarray(special.ndtr(-z))
    if alternative == "greater":
        return np.asarray(special.ndtr(z))
    return np.asarray(np.minimum(1.0, 2.0 * special.ndtr(-np.abs(z))))


def _z(statistic: FloatArray, variance: FloatArray) -> FloatArray:
    """U/√V, and 0 where V = 0 (all values tied: U = 0 and there is no evidence either way)."""
    safe = np.where(variance > 0, variance, 1.0)
    return np.where(variance > 0, statistic / np.sqrt(safe), 0.0)


EXACT_MAX_N = 50
"""Below this total size N = n + m (inclusive) a center's test uses U's exact permutation law by
default (:func:`exact_null`): there the normal approximation's level strays from α (n = m = 10,
α = .01: .0068; n = m = 25: .0090; docs/methods.md §3.1), and the law costs at most ~20 ms
(n = m = 25 with ties; laws without ties are cached)."""


EXACT_MAX_CELLS = 20_000_000
"""The largest counting table :func:`exact_null` builds (160 MB; n = m = 150 fits, 200 does not)."""


@dataclass(frozen=True)
class ExactNull:
    """The permutation law of U under H0: P(U = ``low`` + i) = ``pmf[i]`` (U is an integer)."""

    low: int
    pmf: FloatArray

    @property
    def high(self) -> int:
        return self.low + self.pmf.size - 1

    def log_tails(self, u: float) -> tuple[float, float]:
        """(log P(U >= u), log P(U <= u)), each tail summed from its own end (no cancellation)."""
        i = u - self.low
        up = float(self.pmf[max(0, math.ceil(i - 1e-9)):].sum())
        down = float(self.pmf[:max(0, math.floor(i + 1e-9) + 1)].sum())
        with np.errstate(divide="ignore"):
            return float(np.log(min(up, 1.0))), float(np.log(min(down, 1.0)))

    def pvalue(self, u: float, alternative: str) -> float:
        upper, lower = (math.exp(t) for t in self.log_tails(u))
        if alternative == "less":
            return upper
        if alternative == "greater":
            return lower
        return min(1.0, 2.0 * min(upper, lower))

    def noisy_log_tails(self, t: float, noise: NoiseLaw) -> tuple[float, float]:
        """(log P(U + w >= t), log P(U + w <= t)) with w ~ ``noise`` independent of U:
        log Σ_u P(U = u)·P(w >= t − u), P(w >= x) in closed form (Laplace: ½e^{−x/b} for
        x >= 0, 1 − ½e^{x/b} below; Gaussian: Φ(−x/σ)), summed in log space; the lower tail
        likewise with P(w <= t − u) = P(w >= u − t) (w is symmetric; U's law need not be)."""
        if noise.kind not in ("laplace", "gaussian"):
            raise ValueError(f"no closed form for {noise.kind} noise here")
        u = self.low + np.arange(self.pmf.size, dtype=np.float64)
        keep = self.pmf > 0
        logp, u = np.log(self.pmf[keep]), u[keep]

        def log_tail(x: FloatArray) -> float:  # log Σ P(U = u)·P(w >= x_u)
            if noise.kind == "laplace":
                b = noise.scale
                log_sf = np.where(x >= 0, math.log(0.5) - np.abs(x) / b,
                                  np.log1p(-0.5 * np.exp(-np.abs(x) / b)))
            else:
                log_sf = special.log_ndtr(-x / noise.scale)
            return float(special.logsumexp(logp + log_sf))

        return log_tail(t - u), log_tail(u - t)

    def plus(self, other: ExactNull) -> ExactNull:
        """The law of the sum of two independent such U's (a convolution)."""
        return ExactNull(self.low + other.low, np.convolve(self.pmf, other.pmf))


def exact_null(n: int, m: int, tie_sizes: ArrayLike | None = None) -> ExactNull:
    """The exact null law of U = Σ sign(Y − X): every split of the N = n + m pooled values into
    n X's and m Y's equally likely, given the tie structure.

    ``tie_sizes``: the sizes of the groups of equal values, in increasing order of the value
    (None: no ties). With mid-ranks, U = 2·R_Y − m·(N + 1) where R_Y is Y's rank sum; a tie group
    of size t after a records has the doubled mid-rank 2a + t + 1, an integer, and k of its t
    records go to Y in C(t, k) ways. The count of splits by doubled rank sum is built one tie group
    at a time (exact enumeration over the tie structure, a generating-function recursion in the
    spirit of Mehta, Patel & Tsiatis's 1984 network algorithm for ordered categorical data),
    O(N²·min(n, m)²) operations on a table of (min(n, m) + 1)·(2N·min(n, m) + 1) numbers (at most
    ``EXACT_MAX_CELLS``). Without ties it is the law of scipy.stats.mannwhitneyu(method="exact");
    with ties the conditional permutation law (Hollander, Wolfe & Chicken 2014, §4.1).
    """
    n, m = int(n), int(m)
    if n < 1 or m < 1:
        raise ValueError(f"`n` and `m` must be >= 1, got {n} and {m}")
    k = min(n, m)
    if (k + 1) * (2 * (n + m) * k + 1) > EXACT_MAX_CELLS:
        raise ValueError(
            f"U's exact law for n = {n}, m = {m} needs more than {EXACT_MAX_CELLS:.0e} numbers: "
            "use the normal approximation (method='asymptotic'), accurate at these sizes")
    if tie_sizes is None:
        ties: tuple[int, ...] = (1,) * (n + m)
    else:
        t = np.asarray(tie_sizes, dtype=np.float64)
        if t.ndim != 1 or np.any(t < 1) or np.any(t != np.round(t)) or t.sum() != n + m:
            raise ValueError("`tie_sizes` must be positive integers summing to n + m")
        ties = tuple(int(v) for v in t)
    return _exact_null(n, m, ties)


@functools.lru_cache(maxsize=256)
def _exact_null(n: int, m: int, ties: tuple[int, ...]) -> ExactNull:
    big_n = n + m
    # Enumerate the smaller group: U = 2·R_Y − m(N + 1) = −(2·R_X − n(N + 1)).
    k_max, sign = (m, 1) if m <= n else (n, -1)
    width = 2 * big_n * k_max + 1
    ways = np.zeros((k_max + 1, width))
    ways[0, 0] = 1.0
    before = 0
    for t in ties:
        score = 2 * before + t + 1
        nxt = np.zeros_like(ways)
        for k in range(min(t, k_max) + 1):
            shift = k * score
            if shift >= width:
                break
            nxt[k:, shift:] += math.comb(t, k) * ways[: k_max + 1 - k, : width - shift]
        ways = nxt
        before += t
    counts = ways[k_max]
    rank2 = np.nonzero(counts)[0]
    lo, hi = int(rank2[0]), int(rank2[-1])
    pmf = counts[lo: hi + 1] / counts.sum()
    centre = k_max * (big_n + 1)
    if sign > 0:
        return ExactNull(lo - centre, pmf)
    return ExactNull(centre - hi, pmf[::-1].copy())


def tie_variance(n: float, m: float, tie_sizes: FloatArray) -> float:
    """Null variance of U with the tie correction (seed 001 §6.1)."""
    return _variance_from_ties(n, m, float(np.sum(tie_sizes**3 - tie_sizes)))


def _variance_from_ties(n: float, m: float, ties: float) -> float:
    """:func:`tie_variance` given Σ(t³ − t) over the pooled tie sizes."""
    big_n = n + m
    if big_n < 2:
        return 0.0
    return n * m * (big_n + 1) / 3.0 * (1.0 - ties / (big_n * (big_n * big_n - 1)))


def mann_whitney(
    x: ArrayLike,
    y: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    noise: Mechanism | None = None,
    rng: np.random.Generator | None = None,
    method: Literal["auto", "exact", "asymptotic"] = "auto",
) -> MannWhitneyResult:
    """Local Mann-Whitney test of one center, U = Σ_i Σ_j sign(Y_j − X_i).

    ``method="asymptotic"`` matches ``scipy.stats.mannwhitneyu(x, y, method="asymptotic",
    use_continuity=False)`` with U = n·m − 2·U_x. ``"exact"`` takes the p-value from U's exact
    permutation law given the ties (:func:`exact_null`; without ties scipy's
    ``method="exact"``); ``"auto"`` (default) is exact when N = n + m <= ``EXACT_MAX_N``.
    ``zstatistic`` is U/√V either way. O(N log N): two sorts and a merge, no per-observation
    Python work (the exact law adds O(N²·min(n, m)²), only at small N).

    With ``noise`` (a one-dimensional mechanism exposing its ``noise_law``, drawn from ``rng``)
    the release is U + w: the local Z uses V + Var w and the p-value the exact law of
    N(0, V) + w, where V is the no-ties null variance n·m·(N + 1)/3 (a function of the sizes
    only, so the release carries nothing of the data but U + w). For a DP release calibrate the
    mechanism to U's sensitivity under ``swap`` (n, m public): one record moves U by at most
    2·max(n, m).
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    if method not in ("auto", "exact", "asymptotic"):
        raise ValueError(
            f"`method` must be one of {{'auto', 'exact', 'asymptotic'}}, got {method!r}")
    law: NoiseLaw | None = None
    if noise is not None:
        if rng is None:
            raise ValueError("`rng` (a numpy.random.Generator) is required when `noise` is given")
        check_generator(rng)
        if noise.dim != 1:
            raise ValueError(f"`noise` must be one-dimensional, got dim {noise.dim}")
        law = noise_law_of(noise)
    xa = as_finite_1d(x, "x")
    ya = as_finite_1d(y, "y")
    if _walk.AVAILABLE and xa.size + ya.size > EXACT_MAX_N and not (
            method == "exact" and noise is None):
        # Large samples: U and the tie correction by one compiled linear merge of the sorted
        # samples (a center keeps its levels sorted), without the pooled cuts' O(N) arrays.
        u, ties = _walk.mwu_merge(ascending(xa), ascending(ya))
        if noise is not None and rng is not None:
            u += float(noise.sample(rng, 1)[0])
            return released_result(u, tie_variance(xa.size, ya.size, np.zeros(0)),
                                   int(xa.size), int(ya.size), law, alternative,
                                   exact=method == "auto")
        return released_result(u, _variance_from_ties(xa.size, ya.size, ties), int(xa.size),
                               int(ya.size), None, alternative, exact=False)
    _, cum = _greedy.pooled_cuts([ascending(xa), ascending(ya)])
    cx = np.diff(cum[0]).astype(np.float64)
    cy = np.diff(cum[1]).astype(np.float64)
    # Pairs (X at value v, Y above v) count +1, (X at v, Y below v) count −1.
    y_below = cum[1, :-1].astype(np.float64)
    y_above = ya.size - y_below - cy
    u = float(np.dot(cx, y_above - y_below))
    if noise is not None and rng is not None:
        u += float(noise.sample(rng, 1)[0])
        # The tie-corrected V moves when one record moves (with ties), so released beside a noisy
        # U it would carry the data past the noise: a noisy release states the no-ties V, a
        # function of n and m alone. With ties U's true null variance is smaller: conservative.
        var = tie_variance(xa.size, ya.size, np.zeros(0))
        return released_result(u, var, int(xa.size), int(ya.size), law, alternative,
                               exact=method == "auto")
    var = tie_variance(xa.size, ya.size, cx + cy)
    exact = None
    if method == "exact" or (method == "auto" and xa.size + ya.size <= EXACT_MAX_N):
        if xa.size == 0 or ya.size == 0:
            raise ValueError("the exact law needs records in both groups")
        exact = exact_null(xa.size, ya.size, cx + cy)
    result = released_result(u, var, int(xa.size), int(ya.size), None, alternative, exact=False)
    return _with_exact(result, exact, alternative)


def _tails_pvalue(log_upper: float, log_lower: float, alternative: str) -> float:
    if alternative == "less":
        return math.exp(log_upper)
    if alternative == "greater":
        return math.exp(log_lower)
    return min(1.0, 2.0 * math.exp(min(log_upper, log_lower)))


def _with_exact(result: MannWhitneyResult, exact: ExactNull | None,
                alternative: str) -> MannWhitneyResult:
    if exact is None:
        return result
    return replace(result, pvalue=exact.pvalue(result.statistic, alternative), exact=exact)


def check_exact_tails(tails: Sequence[float], statistic: float, variance: float, n_x: int,
                      n_y: int) -> str | None:
    """Why two released log tails (``MannWhitneyResult.exact_log_tails``) cannot be U's exact
    tails at ``statistic`` for a center of these sizes, or None when they can: N <=
    ``EXACT_MAX_N``, each tail in [1/C(N, n), 1] (the observed split is one of C(N, n) equally
    likely ones), their sum >= 1 (it is 1 + P(U = U_obs)), and, where the numbers determine the
    law (no ties, :func:`public_exact_null`), that law's tails."""
    big_n = n_x + n_y
    if len(tails) != 2 or not all(math.isfinite(t) for t in tails):
        return "the exact tails must be two finite numbers"
    if n_x < 1 or n_y < 1 or big_n > EXACT_MAX_N:
        return f"exact tails are released only for n, m >= 1 and n + m <= {EXACT_MAX_N}"
    least = -math.log(math.comb(big_n, n_x))
    if any(t > 1e-12 or t < least - 1e-9 for t in tails):
        return "an exact tail lies outside [1/C(N, n), 1]"
    if math.exp(tails[0]) + math.exp(tails[1]) < 1 - 1e-9:
        return "the exact tails sum to less than 1"
    law = public_exact_null(statistic, variance, n_x, n_y)
    if law is not None and not all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
            for a, b in zip(law.log_tails(statistic), tails, strict=True)):
        return "the exact tails are not those of U's law without ties"
    return None


def public_exact_null(statistic: float, variance: float, n_x: int, n_y: int,
                      noise: NoiseLaw | None = None) -> ExactNull | None:
    """U's exact law when the released numbers determine it: N <= ``EXACT_MAX_N`` and no ties —
    V is the no-ties n·m·(N + 1)/3 and, without noise, U an integer of n·m's parity
    (U = 2·#(Y > X) − n·m). With ties the law depends on which records tie, which a release
    does not carry; then None (the normal law with the tie-corrected V is used).

    A noisy release states the no-ties V whatever its ties (``shared.releases``): its U + w is
    referred to the no-ties law of U plus the noise (Laplace or Gaussian; None for other noise).
    With ties that is conservative — over random tie structures at n = m = 5-15, ε = 1 and 5,
    its level stayed below α (at most 0.9996α), as the normal + noise law's does."""
    big_n = n_x + n_y
    if n_x < 1 or n_y < 1 or big_n > EXACT_MAX_N:
        return None
    if not math.isclose(variance, n_x * n_y * (big_n + 1) / 3.0, rel_tol=1e-12):
        return None
    if noise is not None:
        return exact_null(n_x, n_y) if noise.kind in ("laplace", "gaussian") else None
    if statistic != round(statistic) or (round(statistic) - n_x * n_y) % 2:
        return None
    return exact_null(n_x, n_y)


def released_result(
    statistic: float,
    variance: float,
    n_x: int,
    n_y: int,
    noise: NoiseLaw | None = None,
    alternative: Alternative = "two-sided",
    *,
    exact: bool = True,
    exact_log_tails: Sequence[float] | None = None,
) -> MannWhitneyResult:
    """A local result from released numbers: Z = statistic/√(V + σ²) and the p-value of
    ``statistic`` under N(0, V) + noise; without ``noise``, under U's exact law where the
    numbers determine it (:func:`public_exact_null`; ``exact=False``: never), else from the
    center's ``exact_log_tails`` of that law given its ties where it released them (checked
    beforehand, :func:`check_exact_tails`), else the normal one."""
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    noise_variance = 0.0 if noise is None else noise.variance
    z = float(_z(np.asarray(statistic), np.asarray(variance + noise_variance)))
    law = public_exact_null(statistic, variance, n_x, n_y, noise) if exact else None
    tails = None
    if exact and noise is None and exact_log_tails is not None:
        up, low = (float(t) for t in exact_log_tails)
        tails = (up, low)
    if noise is None:
        p = float(_z_pvalue(z, alternative))
        if law is not None:
            p = law.pvalue(statistic, alternative)
        elif tails is not None:
            p = _tails_pvalue(*tails, alternative)
    elif law is not None:
        p = _tails_pvalue(*law.noisy_log_tails(statistic, noise), alternative)
    else:
        p = float(NoisyNormal(variance, (noise,)).pvalue(statistic, alternative))
    return MannWhitneyResult(
        statistic=statistic,
        variance=variance,
        zstatistic=z,
        pvalue=p,
        n_x=n_x,
        n_y=n_y,
        noise_variance=noise_variance,
        noise=noise,
        exact=law,
        exact_log_tails=tails,
    )


@dataclass(frozen=True)
class ReleasedCenters:
    """The released numbers of the centers, checked: U_l (+ w_l), V_l, V_l + σ_l², sizes, laws."""

    u: FloatArray
    v: FloatArray
    total: FloatArray
    n: FloatArray
    m: FloatArray
    noise: tuple[NoiseLaw | None, ...]
    exact: tuple[ExactNull | None, ...] = ()
    tails: tuple[tuple[float, float] | None, ...] = ()
    """Each center's released exact log tails at its U (a small center with ties, no noise)."""

    @property
    def noisy(self) -> bool:
        return any(law is not None for law in self.noise)

    def exact_law(self, i: int) -> ExactNull | None:
        return self.exact[i] if self.exact else None

    def exact_tails(self, i: int) -> tuple[float, float] | None:
        return self.tails[i] if self.tails and self.noise[i] is None else None

    def null_of(self, i: int) -> str:
        """The law center i's own p-value comes from (``NULLS``)."""
        noisy = self.noise[i] is not None
        if self.exact_law(i) is not None or self.exact_tails(i) is not None:
            return "exact+noise" if noisy else "exact"
        return "normal+noise" if noisy else "normal"

    @property
    def all_exact(self) -> bool:
        """Every center's U has its exact law and no noise (small N; ties only for local
        results): Σ U_l's law is their convolution."""
        return (bool(self.exact) and not self.noisy
                and all(e is not None for e in self.exact))

    @functools.cached_property
    def log_tails(self) -> tuple[FloatArray, FloatArray]:
        """Each center's (log P(≥ statistic), log P(<= statistic)) under its own null law: U's
        exact law where known (or the tails of it the center released), the normal N(0, V)
        without noise (0 ↦ ½ when V = 0), N(0, V) + w_l with noise."""
        z = _z(self.u, self.total)
        upper, lower = special.log_ndtr(-z), special.log_ndtr(z)
        for i, (v, law) in enumerate(zip(self.v, self.noise, strict=True)):
            exact = self.exact_law(i)
            tails = self.exact_tails(i)
            if exact is None and tails is not None:
                upper[i], lower[i] = tails
            elif exact is not None and law is not None:
                upper[i], lower[i] = exact.noisy_log_tails(float(self.u[i]), law)
            elif exact is not None:
                upper[i], lower[i] = exact.log_tails(float(self.u[i]))
            elif law is not None:
                up, low = NoisyNormal(float(v), (law,)).log_tails(self.u[i])
                upper[i], lower[i] = float(up), float(low)
        return upper, lower

    def pvalues(self, alternative: str) -> FloatArray:
        """Each center's own p-value: from U's exact law or the exact noisy law where it has
        one, else the normal one."""
        upper, lower = self.log_tails
        if alternative == "less":
            exact = np.exp(upper)
        elif alternative == "greater":
            exact = np.exp(lower)
        else:
            exact = np.minimum(1.0, 2.0 * np.exp(np.minimum(upper, lower)))
        known = np.array([law is not None or self.exact_law(i) is not None
                          or self.exact_tails(i) is not None
                          for i, law in enumerate(self.noise)])
        return np.where(known, exact, _z_pvalue(_z(self.u, self.total), alternative))


def released_centers(centers: Sequence[MannWhitneyResult]) -> ReleasedCenters:
    """The centers' releases as arrays, checked once for every federated statistic: finite U and
    V >= 0, σ² >= 0 and each noisy release's law agreeing with its σ²."""
    if len(centers) == 0:
        raise ValueError("`centers` must hold at least one center's release")
    u = np.array([c.statistic for c in centers], dtype=np.float64)
    v = np.array([c.variance for c in centers], dtype=np.float64)
    s2 = np.array([c.noise_variance for c in centers], dtype=np.float64)
    n = np.array([c.n_x for c in centers], dtype=np.float64)
    m = np.array([c.n_y for c in centers], dtype=np.float64)
    if not (np.isfinite(u).all() and np.isfinite(v).all()) or np.any(v < 0):
        raise ValueError("every center's statistic and variance must be finite, variance >= 0")
    if not np.isfinite(s2).all() or np.any(s2 < 0):
        raise ValueError("every center's noise variance must be >= 0")
    for i, c in enumerate(centers):
        if c.noise is None and c.noise_variance > 0:
            raise ValueError(
                f"center {i} states a noise variance but no noise law (`noise`): the exact "
                "null law needs it"
            )
        if c.noise is not None and not math.isclose(
            c.noise_variance, c.noise.variance, rel_tol=RELEASE_RTOL
        ):
            raise ValueError(
                f"center {i}'s noise_variance ({c.noise_variance:g}) is not the variance of its "
                f"noise law ({c.noise.variance:g})"
            )
    # noisy releases: Var(U_l + w_l) = V_l + σ_l² in the displayed Z, the weights and the parts
    noise = tuple(c.noise for c in centers)
    return ReleasedCenters(u, v, v + s2, n, m, noise, tuple(c.exact for c in centers),
                           tuple(c.exact_log_tails for c in centers))


def _result(
    method: str,
    statistic: float,
    pvalue: float,
    c: ReleasedCenters,
    w: FloatArray,
    alternative: str,
    df: int | None = None,
    null: str = "normal",
) -> FederatedMWUResult:
    z = _z(c.u, c.total)
    p = c.pvalues(alternative)
    parts = tuple(
        CenterPart(float(a), float(b), float(zz), float(pp), float(e), c.null_of(i))
        for i, (a, b, zz, pp, e) in enumerate(zip(c.u, c.total, z, p, w, strict=True))
    )
    return FederatedMWUResult(method, float(statistic), float(pvalue), parts, df, null)


def sum_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Sum test: Z = Σ U_l / √(Σ V_l) (V_l + σ_l² for noisy releases).

    With noise the p-value is that of Σ_l (U_l + w_l) under N(0, Σ V_l) + Σ_l w_l. When every
    center's U has its exact law (small centers, :func:`public_exact_null`), that of Σ_l U_l
    under their convolution.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    c = released_centers(centers)
    z = float(_z(np.asarray(c.u.sum()), np.asarray(c.total.sum())))
    if c.all_exact:
        laws = [e for e in c.exact if e is not None]
        total = functools.reduce(ExactNull.plus, laws)
        p = total.pvalue(float(c.u.sum()), alternative)
        return _result("sum", z, p, c, np.ones_like(c.u), alternative, null="exact")
    if c.noisy:
        law = NoisyNormal(float(c.v.sum()), tuple(n for n in c.noise if n is not None))
        p = float(law.pvalue(float(c.u.sum()), alternative))
        return _result("sum", z, p, c, np.ones_like(c.u), alternative, null="normal+noise")
    p = float(_z_pvalue(z, alternative))
    return _result("sum", z, p, c, np.ones_like(c.u), alternative)


def weighted_coefficients(centers: Sequence[MannWhitneyResult]) -> FloatArray:
    """c_l with Z_w = Σ_l c_l·statistic_l: w_l/(√(V_l + σ_l²)·√Σ w_l²), w_l = n_l·m_l/√(V_l + σ_l²)
    (0 for a center with V_l + σ_l² = 0, and all 0 when every weight is)."""
    return _coefficients(released_centers(centers))


def _weights(c: ReleasedCenters) -> FloatArray:
    return np.where(c.total > 0, c.n * c.m / np.sqrt(np.where(c.total > 0, c.total, 1.0)), 0.0)


def _coefficients(c: ReleasedCenters) -> FloatArray:
    w = _weights(c)
    norm = float(np.sqrt(np.sum(w * w)))
    if norm == 0:
        return np.zeros_like(w)
    return np.asarray(w / (np.sqrt(np.where(c.total > 0, c.total, 1.0)) * norm))


def weighted_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Weighted test: Z_w = Σ w_l Z_l / √(Σ w_l²) with w_l = n_l·m_l/√V_l (V_l + σ_l² when noisy).

    Centers with V_l = 0 (all values tied) carry no information and get weight 0. With noise the
    p-value is that of Z_w = Σ c_l (U_l + w_l) under N(0, Σ c_l² V_l) + Σ c_l w_l
    (:func:`weighted_coefficients`).
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    c = released_centers(centers)
    w = _weights(c)
    norm = float(np.sqrt(np.sum(w * w)))
    z = float(np.dot(w, _z(c.u, c.total)) / norm) if norm > 0 else 0.0
    if c.noisy and norm > 0:
        coef = _coefficients(c)
        noises = tuple(
            n.scaled(float(k)) for n, k in zip(c.noise, coef, strict=True)
            if n is not None and k > 0
        )
        law = NoisyNormal(float(np.sum(coef * coef * c.v)), noises)
        p = float(law.pvalue(z, alternative))
        return _result("weighted", z, p, c, w, alternative, null="normal+noise")
    # Normal even when every center's U has its exact law: Z_w weighs lattices of different
    # steps, whose exact convolution grows as the product of their sizes.
    p = float(_z_pvalue(z, alternative))
    return _result("weighted", z, p, c, w, alternative)


def fisher_test(
    centers: Sequence[MannWhitneyResult], *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """Fisher's method: T = −2 Σ log p_l ~ χ²_{2L} on one-sided center p-values.

    Each p_l is the center's own: from U_l's exact law for a small center without noise (and,
    in a released result, without ties; :func:`public_exact_null`), from the exact law of
    N(0, V_l) + w_l for a noisy one, else normal. Exact p-values are discrete, P(p_l <= a) <= a,
    so T is then stochastically below χ²_{2L}: conservative (docs/methods.md §3.4). Two-sided:
    T in both directions, p = min(1, 2·min(p_less, p_greater)); the reported statistic is the T
    of the more significant direction, ``df`` = 2L.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    c = released_centers(centers)
    dof = 2 * c.u.size
    upper, lower = c.log_tails

    def combine(direction: str) -> tuple[float, float]:
        # log p from the log-CDF keeps far tails finite.
        logp = upper if direction == "less" else lower
        t = float(-2.0 * np.sum(logp))
        return t, float(stats.chi2.sf(t, dof))

    if alternative == "two-sided":
        (t_lo, p_lo), (t_hi, p_hi) = combine("less"), combine("greater")
        t, p = (t_lo, p_lo) if p_lo <= p_hi else (t_hi, p_hi)
        p = min(1.0, 2.0 * p)
    else:
        t, p = combine(alternative)
    return _result("fisher", t, p, c, np.ones_like(c.u), alternative, dof, null="chi2")


def table_test(
    table: BinTable, *, alternative: Alternative = "two-sided"
) -> FederatedMWUResult:
    """MWU on a federated two-group table: records in the same bin are tied.

    U_fed = Σ_i Σ_j fx_i·fy_j·sign(j − i), variance by the tie formula with t_r = fx_r + fy_r.
    Row 0 of ``table.counts`` is X, row 1 is Y.
    """
    alternative = check_alternative(alternative)  # type: ignore[assignment]
    if table.n_groups != 2:
        raise ValueError("`table` must have two groups (rows X and Y)")
    fx, fy = table.counts
    y_below = np.concatenate([[0.0], np.cumsum(fy)[:-1]])
    y_above = fy.sum() - y_below - fy
    u = float(np.dot(fx, y_above - y_below))
    v = tie_variance(float(fx.sum()), float(fy.sum()), fx + fy)
    z = float(_z(np.asarray(u), np.asarray(v)))
    ua, va = np.array([u]), np.array([v])
    c = ReleasedCenters(ua, va, va, np.array([fx.sum()]), np.array([fy.sum()]), (None,))
    return _result("table", z, float(_z_pvalue(z, alternative)), c, np.ones(1), alternative)
