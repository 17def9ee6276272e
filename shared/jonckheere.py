"""Jonckheere-Terpstra test for ordered arms (docs/methods.md §12.2).

Arms 1..k in their hypothesised order. The statistic (Terpstra 1952; Jonckheere 1954) is the sum
of the pairwise Mann-Whitney counts over ordered pairs,

    J = Σ_{i<j} U_ij,   U_ij = #{(a, b): X_ia < X_jb} + ½·#{X_ia = X_jb},

so it can be assembled from pairwise two-arm statistics: with ``shared.mwu``'s
U^± = Σ sign(Y − X) of the pair (X = arm i, Y = arm j), U_ij = (U^± + n_i·n_j)/2. Under H0
(all N records exchangeable across arms), E J = (N² − Σ n_i²)/4 and, with t_r the sizes of the
tie groups of the pooled records (Lehmann 1975, §5.3; Hollander, Wolfe & Chicken 2014, §6.2),

    Var J = [N(N − 1)(2N + 5) − Σ n_i(n_i − 1)(2n_i + 5) − Σ t_r(t_r − 1)(2t_r + 5)]/72
          + [Σ n_i(n_i − 1)(n_i − 2)]·[Σ t_r(t_r − 1)(t_r − 2)] / [36·N(N − 1)(N − 2)]
          + [Σ n_i(n_i − 1)]·[Σ t_r(t_r − 1)] / [8·N(N − 1)],

which without ties is [N²(2N + 3) − Σ n_i²(2n_i + 3)]/72. Z = (J − E J)/√Var J ~ N(0, 1).

The tie correction needs the tie sizes of the pooled records of all arms, which pairwise MWU
releases do not carry: :func:`from_pairs` takes them when given and otherwise uses the no-ties
variance, which is larger than the tie-corrected one, so the test is then conservative.
From a bin table (:func:`table_test`) records in one bin are tied, t_r the bin's total.
Across centers (:func:`sum_test`): J = Σ_c J_c, Var = Σ_c Var J_c (stratified by center).

``alternative``: ``"increasing"`` (later arms larger: J large, p = P(Z >= z)),
``"decreasing"``, ``"two-sided"`` (twice the smaller tail).

Small samples (N <= ``EXACT_MAX_N`` = 50, whole counts, the law within ``EXACT_MAX_WORK``): the
p-value comes from J's exact permutation law given the ties (:func:`exact_null`), as
``shared.mwu`` does for U; the stratified sum from the convolution of the centers' laws when
every center has one. :func:`from_pairs` stays normal (pairwise releases carry no tie order).
Each result's ``null`` names the law (``"exact"`` or ``"normal"``).

References: Terpstra TJ (1952) Indag. Math. 14:327-333. Jonckheere AR (1954) Biometrika
41:133-145. Lehmann EL (1975) Nonparametrics: Statistical Methods Based on Ranks. Hollander M,
Wolfe DA, Chicken E (2014) Nonparametric Statistical Methods, 3rd ed. Mehta CR, Patel NR,
Tsiatis AA (1984) Biometrics 40:819-825.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from shared._validation import as_arms, as_finite_1d, check_choice
from shared.binning import BinTable
from shared.kruskal import table_counts
from shared.mwu import MannWhitneyResult, mann_whitney

FloatArray = NDArray[np.float64]
TREND_ALTERNATIVES = ("increasing", "decreasing", "two-sided")
Method = Literal["auto", "exact", "asymptotic"]

EXACT_MAX_N = 50
"""Up to this total size N (inclusive), with whole counts, ``method="auto"`` takes the p-value from
J's exact permutation law given the ties (:func:`exact_null`), as ``shared.mwu`` does for U
(its ``EXACT_MAX_N``): at small N the normal law's p strays (3 arms of 3 records: exact .214
where the normal gives .152; docs/methods.md §12.2)."""

EXACT_MAX_WORK = 200_000_000
"""The largest exact computation run (:func:`exact_work`, a bound on the additions): ~1 s here
(3 arms of 17, 17, 16 without ties: 2.8e7, 0.14 s; 4 arms of 12 in 12 ties of 4: 4.3e8, 1.6 s).
Beyond it ``"auto"`` is normal and ``"exact"`` refuses."""


@dataclass(frozen=True)
class JonckheereNull:
    """J's permutation law: P(2J = ``low`` + i) = ``pmf[i]`` (2J is an integer)."""

    low: int
    pmf: FloatArray

    def log_tails(self, j: float) -> tuple[float, float]:
        """(log P(J >= j), log P(J <= j)), each tail summed from its own end."""
        i = round(2.0 * j) - self.low
        up = float(self.pmf[max(0, i):].sum())
        down = float(self.pmf[:max(0, i + 1)].sum())
        with np.errstate(divide="ignore"):
            return float(np.log(min(up, 1.0))), float(np.log(min(down, 1.0)))

    def pvalue(self, j: float, alternative: str) -> float:
        upper, lower = (math.exp(t) for t in self.log_tails(j))
        if alternative == "increasing":
            return upper
        if alternative == "decreasing":
            return lower
        return min(1.0, 2.0 * min(upper, lower))

    def plus(self, other: JonckheereNull) -> JonckheereNull:
        """The law of the sum of two independent J's (a convolution)."""
        return JonckheereNull(self.low + other.low, np.convolve(self.pmf, other.pmf))


@dataclass(frozen=True)
class JonckheereResult:
    """``statistic`` J, its null ``mean`` and ``variance`` (tie-corrected when ``tie_corrected``),
    ``zstatistic`` = (J − mean)/√variance and the ``pvalue``, from the law ``null`` names:
    ``"exact"`` (J's permutation law given the ties, ``exact``) or ``"normal"`` (Z)."""

    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    sizes: tuple[float, ...]
    tie_corrected: bool
    null: str = "normal"
    exact: JonckheereNull | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FederatedJonckheereResult:
    """J = Σ_c J_c with variance Σ_c Var J_c across centers (``parts``)."""

    statistic: float
    mean: float
    variance: float
    zstatistic: float
    pvalue: float
    parts: tuple[JonckheereResult, ...]
    null: str = "normal"


def null_moments(sizes: ArrayLike, tie_sizes: ArrayLike | None = None) -> tuple[float, float]:
    """(E J, Var J) under H0 for arm sizes n_i and the pooled tie sizes t_r (None: no ties)."""
    n = np.asarray(sizes, dtype=np.float64)
    big_n = float(n.sum())
    mean = (big_n**2 - float(np.sum(n * n))) / 4.0
    t = np.ones(1) if tie_sizes is None else np.asarray(tie_sizes, dtype=np.float64)
    if big_n < 3:
        # The formula's last terms divide by N(N − 1)(N − 2); with N <= 2 J takes one value.
        return mean, 0.0
    var = (big_n * (big_n - 1) * (2 * big_n + 5) - float(np.sum(n * (n - 1) * (2 * n + 5)))
           - float(np.sum(t * (t - 1) * (2 * t + 5)))) / 72.0
    var += (float(np.sum(n * (n - 1) * (n - 2))) * float(np.sum(t * (t - 1) * (t - 2)))
            / (36.0 * big_n * (big_n - 1) * (big_n - 2)))
    var += (float(np.sum(n * (n - 1))) * float(np.sum(t * (t - 1)))
            / (8.0 * big_n * (big_n - 1)))
    return mean, max(var, 0.0)


def _allocations(t: int, caps: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every (a_1..a_k) with Σ a_i = t and 0 <= a_i <= caps_i."""
    if len(caps) == 1:
        return [(t,)] if t <= caps[0] else []
    return [(a, *rest) for a in range(min(t, caps[0]) + 1)
            for rest in _allocations(t - a, caps[1:])]


def exact_work(sizes: Sequence[int], tie_sizes: Sequence[int]) -> int:
    """A bound on :func:`exact_null`'s computation: Σ over tie groups of (count states before
    the group) × (the group's allocations) × (2·max J + 1), the numbers of states and
    allocations being the numbers of ways to spread that many records over arms of these sizes
    (coefficients of Π_i (1 + x + … + x^{n_i}))."""
    n = [int(v) for v in sizes]
    spread = np.ones(1)
    for v in n:
        spread = np.convolve(spread, np.ones(v + 1))
    support = sum(n) ** 2 - sum(v * v for v in n) + 1
    work, before = 0.0, 0
    for t in tie_sizes:
        work += float(spread[before]) * float(spread[int(t)]) * support
        before += int(t)
    return int(min(work, 1e18))


def exact_null(sizes: ArrayLike, tie_sizes: ArrayLike | None = None) -> JonckheereNull:
    """J's exact null law: every assignment of the N pooled records to arms of ``sizes``
    equally likely, given the tie groups ``tie_sizes`` (in increasing order of the value; None:
    no ties) — the conditional permutation law (Hollander, Wolfe & Chicken 2014, §6.2).

    A dynamic programme over the tie groups in increasing order (the network algorithm of
    Mehta, Patel & Tsiatis 1984 for ordered tables): the state is the count c_i of records of
    each arm already placed and the law of 2J so far; putting a_i of a group's t records into
    arm i (C(t; a_1..a_k) ways) adds Σ_i a_i·(2·Σ_{h<i} c_h + Σ_{h<i} a_h) to 2J (each earlier
    arm's records below count 1, those tied in the group ½). Without ties it is the convolution
    of the Mann-Whitney laws of arm i against arms 1..i−1, which are independent (Terpstra
    1952); a test checks both against enumeration."""
    n = np.asarray(sizes, dtype=np.float64)
    if n.ndim != 1 or n.size < 2 or np.any(n < 1) or np.any(n != np.round(n)):
        raise ValueError("`sizes` must be at least two whole arm sizes >= 1")
    big_n = int(n.sum())
    if tie_sizes is None:
        ties: tuple[int, ...] = (1,) * big_n
    else:
        t = np.asarray(tie_sizes, dtype=np.float64)
        if t.ndim != 1 or np.any(t < 1) or np.any(t != np.round(t)) or t.sum() != big_n:
            raise ValueError("`tie_sizes` must be whole numbers >= 1 summing to the records")
        ties = tuple(int(v) for v in t)
    arms = tuple(int(v) for v in n)
    if exact_work(arms, ties) > EXACT_MAX_WORK:
        raise ValueError(f"J's exact law for arms {arms} with these ties is too large to "
                         "compute here: use the normal approximation (method='asymptotic')")
    return _exact_null(arms, ties)


@functools.lru_cache(maxsize=128)
def _exact_null(arms: tuple[int, ...], ties: tuple[int, ...]) -> JonckheereNull:
    width = sum(arms) ** 2 - sum(v * v for v in arms) + 1  # 2J in 0 .. 2·max J
    layer: dict[tuple[int, ...], FloatArray] = {(0,) * len(arms): np.eye(1, width)[0]}
    for t in ties:
        moves = []
        for a in _allocations(t, arms):
            ways = math.factorial(t) / math.prod(math.factorial(v) for v in a)
            tied = sum(a[i] * sum(a[:i]) for i in range(len(a)))
            moves.append((a, float(ways), tied))
        nxt: dict[tuple[int, ...], FloatArray] = {}
        for c, law in layer.items():
            below = list(itertools.accumulate(c, initial=0))  # Σ_{h<i} c_h
            for a, ways, tied in moves:
                to = tuple(x + y for x, y in zip(c, a, strict=True))
                if any(x > y for x, y in zip(to, arms, strict=True)):
                    continue
                shift = tied + 2 * sum(a[i] * below[i] for i in range(len(a)))
                row = nxt.get(to)
                if row is None:
                    row = nxt[to] = np.zeros(width)
                row[shift:] += ways * law[:width - shift]
        layer = nxt
    counts = layer[arms]
    support = np.nonzero(counts)[0]
    lo, hi = int(support[0]), int(support[-1])
    return JonckheereNull(lo, counts[lo:hi + 1] / counts.sum())


def _pvalue(z: float, alternative: str) -> float:
    if alternative == "increasing":
        return float(special.ndtr(-z))
    if alternative == "decreasing":
        return float(special.ndtr(z))
    return float(min(1.0, 2.0 * special.ndtr(-abs(z))))


def _exact_law(sizes: FloatArray, tie_sizes: FloatArray, method: str) -> JonckheereNull | None:
    """The exact law the ``method`` asks for (module docstring), or None for the normal one."""
    if method == "asymptotic":
        return None
    whole = bool(np.array_equal(sizes, np.round(sizes))
                 and np.array_equal(tie_sizes, np.round(tie_sizes)))
    if method == "exact":
        if not whole:
            raise ValueError("J's exact law needs whole counts")
        return exact_null(sizes, tie_sizes)
    if not whole or sizes.sum() > EXACT_MAX_N:
        return None
    if exact_work(tuple(int(v) for v in sizes), tuple(int(v) for v in tie_sizes)) \
            > EXACT_MAX_WORK:
        return None
    return exact_null(sizes, tie_sizes)


def _finish(j: float, sizes: FloatArray, tie_sizes: FloatArray | None,
            alternative: str, law: JonckheereNull | None = None) -> JonckheereResult:
    mean, var = null_moments(sizes, tie_sizes)
    z = (j - mean) / np.sqrt(var) if var > 0 else 0.0
    if law is not None:
        return JonckheereResult(float(j), mean, var, float(z), law.pvalue(j, alternative),
                                tuple(float(v) for v in sizes), tie_sizes is not None,
                                "exact", law)
    return JonckheereResult(float(j), mean, var, float(z), _pvalue(float(z), alternative),
                            tuple(float(v) for v in sizes), tie_sizes is not None)


def _check_method(method: str) -> str:
    return check_choice(method, "method", ("auto", "exact", "asymptotic"))


def jonckheere_terpstra(*samples: ArrayLike, alternative: str = "increasing",
                        method: Method = "auto") -> JonckheereResult:
    """Jonckheere-Terpstra on raw per-arm data, arms in their hypothesised order; the variance
    is tie-corrected from the pooled data. ``method``: ``"exact"`` takes the p-value from J's
    permutation law given the ties (:func:`exact_null`), ``"asymptotic"`` from Z, ``"auto"``
    exact when N <= ``EXACT_MAX_N`` (and the law within ``EXACT_MAX_WORK``)."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    method = _check_method(method)  # type: ignore[assignment]
    arms = as_arms(samples, "Jonckheere-Terpstra")
    j = 0.0
    for a in range(len(arms)):
        for b in range(a + 1, len(arms)):
            u = mann_whitney(arms[a], arms[b], method="asymptotic").statistic
            j += (u + arms[a].size * arms[b].size) / 2.0
    _, t = np.unique(np.concatenate(arms), return_counts=True)
    sizes = np.array([a.size for a in arms], dtype=np.float64)
    ties = t.astype(np.float64)
    return _finish(j, sizes, ties, alternative, _exact_law(sizes, ties, method))


def from_pairs(pairs: Mapping[tuple[int, int], MannWhitneyResult], *,
               tie_sizes: ArrayLike | None = None,
               alternative: str = "increasing") -> JonckheereResult:
    """J from pairwise two-arm results ``pairs[(i, j)]`` = ``mann_whitney(arm_i, arm_j)`` for
    every i < j (arms numbered 0..k−1): U_ij = (U^± + n_i·n_j)/2. ``tie_sizes``: the tie groups
    of the pooled records of all arms; None uses the no-ties variance (conservative with ties).
    Noisy pairwise releases are refused: their noise would need its own law here."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    if not pairs:
        raise ValueError("`pairs` must hold the pairwise results of at least two arms")
    k = 1 + max(max(p) for p in pairs)
    expected = {(a, b) for a in range(k) for b in range(a + 1, k)}
    if set(pairs) != expected:
        missing = sorted(expected - set(pairs))
        extra = sorted(set(pairs) - expected)
        raise ValueError(f"`pairs` must hold exactly the pairs (i, j), i < j, of arms 0..{k - 1}; "
                         f"missing {missing}, unexpected {extra}")
    sizes = np.zeros(k)
    j = 0.0
    for (a, b), r in pairs.items():
        if r.noise is not None or r.noise_variance:
            raise ValueError(f"pair {(a, b)} is a noisy release; J needs exact pairwise U's")
        for arm, size in ((a, r.n_x), (b, r.n_y)):
            if sizes[arm] and sizes[arm] != size:
                raise ValueError(f"arm {arm} has {int(sizes[arm])} records in one pair and "
                                 f"{size} in another")
            sizes[arm] = size
        j += (r.statistic + r.n_x * r.n_y) / 2.0
    t = None if tie_sizes is None else as_finite_1d(tie_sizes, "tie_sizes")
    if t is not None and not np.isclose(t.sum(), sizes.sum()):
        raise ValueError(f"`tie_sizes` must sum to the {int(sizes.sum())} pooled records, "
                         f"got {t.sum():g}")
    return _finish(j, sizes, t, alternative)


def table_test(table: BinTable | ArrayLike, *, alternative: str = "increasing",
               method: Method = "auto") -> JonckheereResult:
    """J on a bin table (rows arms in order, columns bins in increasing order): records in one
    bin count ½ per pair, t_r = the bins' totals. ``method`` as :func:`jonckheere_terpstra`,
    the exact law given the bins' totals (whole counts only: ``"auto"`` is normal on shared-out
    counts)."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    method = _check_method(method)  # type: ignore[assignment]
    f = table_counts(table)
    cum = np.cumsum(f, axis=1)
    below = np.concatenate([np.zeros((f.shape[0], 1)), cum[:, :-1]], axis=1)  # per arm, bins < b
    j = 0.0
    for a in range(f.shape[0]):
        for b in range(a + 1, f.shape[0]):
            # pairs (x in arm a, y in arm b) with y's bin above x's, plus ½ for the same bin
            j += float(np.dot(f[b], below[a]) + 0.5 * np.dot(f[b], f[a]))
    sizes, ties = f.sum(axis=1), f.sum(axis=0)
    ties = ties[ties > 0]  # an empty bin is no tie group
    return _finish(j, sizes, ties, alternative, _exact_law(sizes, ties, method))


def sum_test(centers: Sequence[JonckheereResult], *,
             alternative: str = "increasing") -> FederatedJonckheereResult:
    """Stratified J: Σ_c J_c against Σ_c E J_c with variance Σ_c Var J_c; the p-value from
    the convolution of the centers' exact laws when every center's result has one (the centers
    are independent under H0), else from Z."""
    alternative = check_choice(alternative, "alternative", TREND_ALTERNATIVES)
    if not centers:
        raise ValueError("`centers` must hold at least one center's result")
    k = len(centers[0].sizes)
    if any(len(c.sizes) != k for c in centers):
        raise ValueError("every center must report the same arms")
    j = float(sum(c.statistic for c in centers))
    mean = float(sum(c.mean for c in centers))
    var = float(sum(c.variance for c in centers))
    z = (j - mean) / np.sqrt(var) if var > 0 else 0.0
    laws = [c.exact for c in centers if c.exact is not None]
    if len(laws) == len(centers):
        total = functools.reduce(JonckheereNull.plus, laws)
        return FederatedJonckheereResult(j, mean, var, float(z), total.pvalue(j, alternative),
                                         tuple(centers), "exact")
    return FederatedJonckheereResult(j, mean, var, float(z), _pvalue(float(z), alternative),
                                     tuple(centers))
