"""The differentially private twin of a center's Mann-Whitney release (``dp_mwu``;
docs/methods.md §3.10, docs/privacy.md §16).

A center's exact Mann-Whitney release (``shared.releases.mwu_release``) shows the two levels'
exact sizes, and even with ε its noise scale 2·max(n, m)/ε is a function of them: it is ε-DP
only with the sizes public (swap neighbours). Under add/remove neighbours (DP mode) nothing
about the sizes may pass unnoised, so this release is built in three steps, every public number
a function of released values only:

1. **Sizes.** n̂_X = n_X + L_X, n̂_Y = n_Y + L_Y, L ~ Laplace(1/ε₁) independent. The two levels
   are disjoint sets of records, so one added or removed record moves one count by 1: the pair
   is ε₁-DP (the Laplace mechanism on a vector of L1 sensitivity 1; Dwork & Roth 2014, Thm 3.6).
2. **Cap.** M = max(1, ⌈max(n̂_X, n̂_Y) + t/ε₁⌉), a function of the released sizes (post-
   processing, nothing spent). A level with more than M records keeps a uniformly random subset
   of M of them (drawn from ``rng``); P(n_X > M) <= P(L_X < −t/ε₁) = ½e^{−t}, so with the
   default margin t a level is cut with probability at most ½e^{−t}.
3. **Statistic.** U' = Σ sign(y − x) over the kept records, released as Ũ = U' + Laplace(2M/ε₂),
   ε₂ = ε − ε₁.

**Sensitivity given M (the coupling argument).** Let D' be D with one record r added to level X
(removal is the same pair read backwards; level Y is symmetric). The release is a mixture over
the kept subsets, P(Ũ ∈ A | D) = E_S[P(U'(S) + W ∈ A)], so it is ε₂-DP given M if the kept
subsets S of D and S' of D' can be coupled (drawn jointly, each with its own law) so that
|U'(S) − U'(S')| <= Δ = 2M for every coupled pair: then the density of the mixture at any
output changes by at most the factor e^{ε₂·|ΔU'|/Δ} <= e^{ε₂} pair by pair. Level Y's subset is
the same law under D and D' (its records are the same): couple it identically. For level X:

* n_X + 1 <= M: nothing is cut in either, S' = S ∪ {r}: U' moves by r's pairs,
  |Σ_{y kept} sign(y − r)| <= min(n_Y, M) <= M;
* n_X >= M: draw S (uniform M-subset of D's X, or all of it when n_X = M); with probability
  M/(n_X + 1) replace a uniformly chosen member of S by r, else keep S. Then S' is a uniform
  M-subset of D''s n_X + 1 records (r is in it with probability M/(n_X + 1), and given either
  case the rest is uniform), and S' differs from S by one record swapped: U' moves by
  |Σ_{y kept} (sign(y − r) − sign(y − x))| <= 2M.

So Δ = 2M. M alone would do when nothing can be cut (the first case), but whether a level is cut
depends on its true size, which is private: the scale must be fixed by released values only,
so it is 2M/ε₂ always (``tests/shared/dp/test_dp_mwu.py`` checks both bounds exhaustively on
small neighbours, and the whole release's privacy loss exactly). By sequential composition the
release (n̂_X, n̂_Y, Ũ) is (ε₁ + ε₂) = ε-DP under add/remove.

**The test.** Under H0 (the two levels exchangeable) a uniform subset of each level is still
exchangeable, so U' is a Mann-Whitney U of the kept sizes (min(n_X, M), min(n_Y, M)), of null
variance V = a·b·(a + b + 1)/3 without ties (this project's U = Σ sign is twice the textbook's
U minus a·b, hence /3 rather than /12). The kept sizes are private; their estimates
â = min(M, max(0, n̂_X + ``LIFT``/ε₁)), b̂ likewise (rounded to whole records) stand in, and Ũ is
referred to N(0, V̂) + Laplace(2M/ε₂) exactly (``shared.noisy_null``). The no-ties V̂ is
conservative with ties (ties lower U's variance); the lift makes V̂ too small less often (its
noise would otherwise push the level above α at small n), which the level simulation checks
(docs/methods.md §3.10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared._validation import Alternative, as_finite_1d, check_generator
from shared.mwu import MannWhitneyResult, released_result
from shared.noisy_null import NoiseLaw

FloatArray = NDArray[np.float64]

SIZE_SHARE = 0.2
"""The default share of ε spent on the two sizes (ε₁ = SIZE_SHARE·ε); the rest noises U'. Chosen
by simulation at ε = 1 (docs/methods.md §3.10): against 0.1 it keeps V̂ closer to the kept
sizes' (the level at n = 20-50 per arm 0.041-0.046 against 0.041-0.050, α = 0.05) and gains
0.01-0.03 of power at n <= 100, at no measurable cost at 1,000 per arm."""
MARGIN = 0.0
"""The default margin t of the cap M = ⌈max(n̂_X, n̂_Y) + t/ε₁⌉, in units of the size noise's
scale 1/ε₁: a level is cut with probability at most ½e^{−t}, and then loses only the records
beyond M (about 1/ε₁ on average). A margin cuts less but noises U' more on every release (its
scale is 2M/ε₂): at ε = 1 the power simulation found t = 0 best or tied at n = 10-1,000 per
arm (t = 1 lost 0.06-0.09 of power at n = 10-20, t = 2 more; t = 7 lost 0.07 at n = 100; at
n = 50-1,000 t = 0-2 were within the simulation's error)."""
LIFT = 0.5
"""How far above its noisy size a level's kept size is taken when the tests read V̂, in units
of 1/ε₁ (then clipped to M): V̂ read from the noisy sizes themselves is too small about half
the time, and the test's level rose to 0.054-0.061 at n = 20-50 per arm, ε = 1 (α = 0.05);
with the lift 0.5 it stayed at or below α within simulation error at n = 10-1,000, ties or
not (docs/methods.md §3.10). Post-processing: it changes no release."""


def u_statistic(x: ArrayLike, y: ArrayLike) -> float:
    """U = Σ_i Σ_j sign(y_j − x_i), in O((n + m) log n): per y, #{x < y} − #{x > y}."""
    xs = np.sort(np.asarray(x, dtype=np.float64))
    ya = np.asarray(y, dtype=np.float64)
    below = np.searchsorted(xs, ya, side="left")
    above = xs.size - np.searchsorted(xs, ya, side="right")
    return float(np.sum(below - above, dtype=np.int64))


def keep_at_most(values: FloatArray, cap: int, rng: np.random.Generator) -> FloatArray:
    """``values`` when there are at most ``cap`` of them, else a uniformly random subset of
    ``cap`` (without replacement, drawn from ``rng``)."""
    if values.size <= cap:
        return values
    return values[rng.choice(values.size, size=cap, replace=False)]


def noise_cap(n_x_hat: float, n_y_hat: float, size_epsilon: float, margin: float) -> int:
    """M = max(1, ⌈max(n̂_X, n̂_Y) + t/ε₁⌉): a function of released values only."""
    top = max(n_x_hat, n_y_hat) + margin / size_epsilon
    return max(1, math.ceil(top)) if math.isfinite(top) else 1


def sizes_in_use(n_x_hat: float, n_y_hat: float, cap: int, lift: float = 0.0
                 ) -> tuple[int, int]:
    """The estimates of the kept sizes min(n, M): each noisy size plus ``lift`` (in records),
    clipped to [0, M] and rounded to whole records (post-processing)."""
    return (round(min(float(cap), max(0.0, n_x_hat + lift))),
            round(min(float(cap), max(0.0, n_y_hat + lift))))


def null_variance(a: float, b: float) -> float:
    """U's no-ties null variance a·b·(a + b + 1)/3 (0 when a level is empty)."""
    return a * b * (a + b + 1.0) / 3.0


@dataclass(frozen=True)
class DPMannWhitney:
    """One center's ε-DP Mann-Whitney release (module docstring): ``statistic`` Ũ = U' +
    Laplace(2M/ε₂), the noisy sizes ``n_x_hat``, ``n_y_hat``, the public cap ``cap`` (M) and
    the ε split (``size_epsilon`` ε₁, ``u_epsilon`` ε₂; ``margin`` t). Everything else is a
    function of these: the noise law (:attr:`noise`), the kept sizes' estimates
    (:attr:`sizes`), the null variance V̂ (:attr:`variance`)."""

    statistic: float
    n_x_hat: float
    n_y_hat: float
    cap: int
    size_epsilon: float
    u_epsilon: float
    margin: float

    @property
    def epsilon(self) -> float:
        return self.size_epsilon + self.u_epsilon

    @property
    def noise(self) -> NoiseLaw:
        """Laplace(2M/ε₂): U''s sensitivity given M over ε₂."""
        return NoiseLaw.laplace(2.0 * self.cap / self.u_epsilon)

    @property
    def sizes(self) -> tuple[int, int]:
        """The kept sizes' estimates the tests use: n̂ + ``LIFT``/ε₁, clipped to [0, M]."""
        return sizes_in_use(self.n_x_hat, self.n_y_hat, self.cap, LIFT / self.size_epsilon)

    @property
    def variance(self) -> float:
        return null_variance(*self.sizes)

    def to_result(self, alternative: Alternative = "two-sided") -> MannWhitneyResult:
        """The release as the federated tests of ``shared.mwu`` take it: U = Ũ, n, m the kept
        sizes' estimates, V = V̂, the Laplace noise law; the p-value from N(0, V̂) + noise,
        never from an "exact" permutation law (the sizes are estimates)."""
        a, b = self.sizes
        return released_result(self.statistic, null_variance(a, b), a, b, self.noise,
                               alternative, exact=False)


def check_split(epsilon: float, size_share: float, margin: float) -> tuple[float, float]:
    """(ε₁, ε₂) of ``epsilon`` split by ``size_share`` in (0, 1); ``ValueError`` otherwise."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"`epsilon` must be a finite number > 0, got {epsilon!r}")
    if not (math.isfinite(size_share) and 0 < size_share < 1):
        raise ValueError(f"`size_share` must lie in (0, 1), got {size_share!r}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"`margin` must be a finite number >= 0, got {margin!r}")
    return epsilon * size_share, epsilon * (1.0 - size_share)


def dp_mann_whitney(
    x: ArrayLike,
    y: ArrayLike,
    *,
    epsilon: float,
    rng: np.random.Generator,
    size_share: float = SIZE_SHARE,
    margin: float = MARGIN,
) -> DPMannWhitney:
    """The ε-DP Mann-Whitney release of levels ``x`` (X) and ``y`` (Y) under add/remove
    neighbours (module docstring): ε₁ = ``size_share``·ε on the two sizes, the rest on U'.

    The draws from ``rng``, in order: L_X, L_Y (``rng.laplace(0, 1/ε₁, 2)``); the kept subset
    of X, then of Y, where a level holds more than M records (``rng.choice``, without
    replacement); the noise on U' (``rng.laplace(0, 2M/ε₂)``).
    """
    check_generator(rng)
    eps1, eps2 = check_split(float(epsilon), float(size_share), float(margin))
    # Empty levels are data too (DP mode answers every size): U' = 0 over them, the noise
    # decides, and the release exists whatever the sizes.
    xa = as_finite_1d(x, "x", allow_empty=True)
    ya = as_finite_1d(y, "y", allow_empty=True)
    noisy = rng.laplace(0.0, 1.0 / eps1, size=2)
    n_x_hat, n_y_hat = float(xa.size + noisy[0]), float(ya.size + noisy[1])
    cap = noise_cap(n_x_hat, n_y_hat, eps1, margin)
    kept_x, kept_y = keep_at_most(xa, cap, rng), keep_at_most(ya, cap, rng)
    u = u_statistic(kept_x, kept_y) + float(rng.laplace(0.0, 2.0 * cap / eps2))
    return DPMannWhitney(statistic=u, n_x_hat=n_x_hat, n_y_hat=n_y_hat, cap=cap,
                         size_epsilon=eps1, u_epsilon=eps2, margin=float(margin))
