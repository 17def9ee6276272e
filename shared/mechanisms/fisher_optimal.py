"""Fisher-information-optimal additive noise (Farokhi 2019, seed 002; docs/methods.md §7). Not DP.

The noise density p minimises the Fisher information J = E‖∇ log p(w)‖² subject to
E‖w‖² <= ρ and a support: by Cramér–Rao, any unbiased estimate of the released value f(x) from
y = f(x) + w then has E‖x̂ − f(x)‖² >= 1/J (1/(kJ) after k independent releases). The optimum is the
ground state ψ = √p of a Schrödinger equation (seed eq. 6):

* support ℝ: the Gaussian N(0, ρ), J = 1/ρ (the privacy principle J·Q >= 1 holds with equality);
* support [−a, a]: the ground state of −4ψ'' + λw²ψ = Eψ with ψ(±a) = 0, λ >= 0 chosen so that
  E[w²] = ρ; when ρ >= a²(1/3 − 2/π²) the constraint is inactive and the optimum is the raised
  cosine p(w) = cos²(πw/(2a))/a, J = π²/a² (the seed prints π²/a, a misprint:
  docs/methods.md §7.4);
* a box ∏[−a_j, a_j]: the product of one-dimensional ground states sharing one λ, with
  Σ_j E[w_j²] = ρ; J = Σ_j J_j and J·Q >= m².

**This is not differential privacy.** The guarantee bounds only unbiased estimators' mean squared
error; it gives no (ε, δ), says nothing about priors, biased estimators or membership, and does not
compose into a DP budget. Use :class:`~shared.mechanisms.laplace.Laplace` or
:class:`~shared.mechanisms.gaussian.Gaussian` where DP is required. Uniform noise has infinite
Fisher information (its density jumps at the walls), so it is never offered as Fisher noise.

Solving: see :mod:`shared.mechanisms._ground_state`. Densities are solved once on the unit box and
cached by ρ/a² (scaling law J*(ρ; a) = J*(ρ/a²; 1)/a²); a new (a, ρ) costs ~10 ms, a cached one
nothing. Sampling is by inverse CDF on the solved table (linear between 2049 nodes).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from shared._validation import check_generator, check_positive
from shared.mechanisms import _ground_state as gs
from shared.mechanisms.base import Size, as_shape
from shared.mechanisms.guarantees import FisherGuarantee
from shared.noisy_null import NoiseLaw

FisherKind = Literal["gaussian", "raised_cosine", "ground_state", "harmonic"]
"""``harmonic``: a ground state whose walls sit >= 10 standard deviations out (ρ <= a²/100), equal
to the Gaussian N(0, ρ) to ~1e-20 relative but with compact support."""


def _check_half_width(value: float, name: str) -> float:
    try:
        return check_positive(value, name)
    except ValueError as err:
        raise ValueError(f"{err}; for unbounded support use half_width=None") from None


def _interp_psi(state: gs.UnitState, u: NDArray[np.float64]) -> NDArray[np.float64]:
    psi: NDArray[np.float64] = np.interp(u, state.nodes, state.sqrt_density, left=0.0, right=0.0)
    return psi


def _unit_pdf(state: gs.UnitState, u: NDArray[np.float64]) -> NDArray[np.float64]:
    if state.kind == "raised_cosine":
        return np.where(np.abs(u) < 1.0, np.cos(0.5 * math.pi * u) ** 2, 0.0)
    return _interp_psi(state, u) ** 2


def _unit_cdf(state: gs.UnitState, u: NDArray[np.float64]) -> NDArray[np.float64]:
    if state.kind == "raised_cosine":
        v = np.clip(u, -1.0, 1.0)
        return 0.5 * (1.0 + v + np.sin(math.pi * v) / math.pi)
    cdf: NDArray[np.float64] = np.interp(u, state.nodes, state.cdf, left=0.0, right=1.0)
    return cdf


@dataclass(frozen=True)
class FisherOptimal:
    """Noise of least Fisher information with E[w²] <= ρ on [−a, a] (``half_width=None``: ℝ).

    >>> noise = FisherOptimal(rho=0.1, half_width=1.0)
    >>> round(noise.fisher_information, 5)
    10.79963
    >>> w = noise.sample(np.random.default_rng(), 1000)     # doctest: +SKIP

    Not differential privacy: see the module docstring.
    """

    rho: float
    half_width: float | None = None
    _state: gs.UnitState | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rho = check_positive(self.rho, "rho")
        object.__setattr__(self, "rho", rho)
        state = None
        if self.half_width is not None:
            a = _check_half_width(self.half_width, "half_width")
            object.__setattr__(self, "half_width", a)
            state = gs.state_for_moment(rho / a**2)
        object.__setattr__(self, "_state", state)

    @property
    def dim(self) -> int:
        return 1

    @property
    def support(self) -> tuple[float, float]:
        a = math.inf if self.half_width is None else self.half_width
        return -a, a

    @property
    def kind(self) -> FisherKind:
        return "gaussian" if self._state is None else self._state.kind

    @property
    def multiplier(self) -> float:
        """λ of −4ψ'' + λw²ψ = Eψ (0 when the second-moment constraint is inactive)."""
        if self._state is None or self.half_width is None:
            return 1.0 / self.rho**2
        return self._state.multiplier / self.half_width**4

    @property
    def fisher_information(self) -> float:
        """J = E[(d/dw log p)²] = 4∫ψ'²."""
        if self._state is None or self.half_width is None:
            return 1.0 / self.rho
        return self._state.fisher_information / self.half_width**2

    @property
    def variance(self) -> float:
        """E[w²]: ρ, or a²(1/3 − 2/π²) < ρ when the support binds first."""
        if self._state is None or self.half_width is None:
            return self.rho
        return self._state.second_moment * self.half_width**2

    @property
    def guarantee(self) -> FisherGuarantee:
        j = self.fisher_information
        return FisherGuarantee(j, (j,), self.variance, self.rho)

    @property
    def noise_law(self) -> NoiseLaw:
        """The law of w for exact null laws of noisy statistics (:mod:`shared.noisy_null`).

        N(0, ρ) on ℝ; the raised cosine when the constraint is inactive; N(0, E[w²]) in the
        ``harmonic`` regime (the ground state equals it to ~1e-20); otherwise the tabulated
        ground-state density (``pdf``). The sampler inverts a CDF table that is linear between
        2049 nodes (a histogram density): its CDF is within 3e-6 of these laws for the narrowest
        states (walls 10 standard deviations out), 1.5e-6 beyond two standard deviations, and
        within 6e-7 from r = ρ/a² = 0.05 on; added to a normal part at least as large as the
        noise, the two laws of the sum differ by less than 1e-6.
        """
        if self._state is None or self.half_width is None:
            return NoiseLaw.gaussian(math.sqrt(self.rho))
        if self.kind == "raised_cosine":
            return NoiseLaw.raised_cosine(self.half_width)
        if self.kind == "harmonic":
            return NoiseLaw.gaussian(math.sqrt(self.variance))
        return NoiseLaw.from_pdf(self.pdf, self.half_width, variance=self.variance)

    def pdf(self, w: ArrayLike) -> NDArray[np.float64]:
        """Density p(w) (table-interpolated ψ², squared; closed form for Gaussian/raised cosine)."""
        x = np.asarray(w, dtype=np.float64)
        if self._state is None or self.half_width is None:
            out: NDArray[np.float64] = np.exp(-0.5 * x * x / self.rho) / math.sqrt(
                2.0 * math.pi * self.rho
            )
            return out
        return _unit_pdf(self._state, x / self.half_width) / self.half_width

    def cdf(self, w: ArrayLike) -> NDArray[np.float64]:
        """P(W <= w), the function the sampler inverts (closed form for Gaussian/raised cosine)."""
        x = np.asarray(w, dtype=np.float64)
        if self._state is None or self.half_width is None:
            out: NDArray[np.float64] = ndtr(x / math.sqrt(self.rho))
            return out
        return _unit_cdf(self._state, x / self.half_width)

    def ppf(self, q: ArrayLike) -> NDArray[np.float64]:
        """Inverse CDF, q in [0, 1]."""
        p = np.asarray(q, dtype=np.float64)
        if self._state is None or self.half_width is None:
            out: NDArray[np.float64] = math.sqrt(self.rho) * ndtri(p)
            return out
        return self.half_width * self._state.ppf(p)

    def sample(self, rng: np.random.Generator, size: Size) -> NDArray[np.float64]:
        rng = check_generator(rng)
        shape = as_shape(size)
        if self._state is None or self.half_width is None:
            return rng.normal(0.0, math.sqrt(self.rho), shape)
        return self.half_width * self._state.ppf(rng.random(shape))


@functools.lru_cache(maxsize=64)
def _box_states(r: float, ratios: tuple[float, ...]) -> tuple[float, tuple[gs.UnitState, ...]]:
    """Shared λ and per-coordinate unit-box states for half-widths ``ratios`` (max 1), ρ = r."""
    groups = sorted(Counter(c * c for c in ratios).items())
    lam = gs.shared_multiplier(groups, r)
    # coordinate j seen on its own unit box has multiplier λ·c_j⁴ (scaling law)
    by_ratio = {c: gs.state_at_multiplier(lam * c**4) for c in set(ratios)}
    return lam, tuple(by_ratio[c] for c in ratios)


def clear_cache() -> None:
    """Forget every solved density (benchmarks time a cold solve)."""
    gs.clear_cache()
    _box_states.cache_clear()


@dataclass(frozen=True)
class FisherOptimalBox:
    """Noise of least Fisher information tr(I) on the box ∏[−a_j, a_j] with E‖w‖² <= ρ.

    The density is the product of one-dimensional ground states of −4ψ'' + λw_j²ψ = Eψ on
    [−a_j, a_j] sharing one λ (docs/methods.md §7.6); ``sample`` returns shape ``(*size, m)``.

    >>> noise = FisherOptimalBox(rho=0.2, half_widths=(1.0, 1.0))
    >>> noise.dim, round(noise.fisher_information, 5)   # 2·J*(0.1; 1)
    (2, 21.59927)

    Not differential privacy: see the module docstring.
    """

    rho: float
    half_widths: Sequence[float]
    _multiplier: float = field(init=False, repr=False, compare=False)
    _states: tuple[gs.UnitState, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rho = check_positive(self.rho, "rho")
        try:
            raw = tuple(self.half_widths)
        except TypeError:
            raise ValueError(
                f"`half_widths` must be a sequence of finite numbers > 0, got {self.half_widths!r}"
            ) from None
        if not raw:
            raise ValueError("`half_widths` must hold at least one half-width")
        widths = tuple(_check_half_width(a, f"half_widths[{j}]") for j, a in enumerate(raw))
        scale = max(widths)
        lam, states = _box_states(rho / scale**2, tuple(a / scale for a in widths))
        object.__setattr__(self, "rho", rho)
        object.__setattr__(self, "half_widths", widths)
        object.__setattr__(self, "_multiplier", lam / scale**4)
        object.__setattr__(self, "_states", states)

    @property
    def dim(self) -> int:
        return len(self._states)

    @property
    def kind(self) -> tuple[FisherKind, ...]:
        return tuple(state.kind for state in self._states)

    @property
    def multiplier(self) -> float:
        """The shared λ (0 when the second-moment constraint is inactive)."""
        return self._multiplier

    @property
    def coordinate_information(self) -> tuple[float, ...]:
        """J_j = E[(∂_j log p)²], the diagonal of the Fisher information matrix."""
        return tuple(
            st.fisher_information / a**2
            for st, a in zip(self._states, self.half_widths, strict=True)
        )

    @property
    def coordinate_variances(self) -> tuple[float, ...]:
        return tuple(
            st.second_moment * a**2 for st, a in zip(self._states, self.half_widths, strict=True)
        )

    @property
    def fisher_information(self) -> float:
        """tr(I) = Σ_j J_j, the seed's J."""
        return math.fsum(self.coordinate_information)

    @property
    def variance(self) -> float:
        """E‖w‖² = Σ_j E[w_j²]: ρ, or less when every wall binds first."""
        return math.fsum(self.coordinate_variances)

    @property
    def guarantee(self) -> FisherGuarantee:
        return FisherGuarantee(
            self.fisher_information, self.coordinate_information, self.variance, self.rho
        )

    def marginal(self, j: int) -> FisherOptimal:
        """Coordinate j on its own: the 1-D optimum with its share of the second moment.

        Solved afresh, so it is also a check: its multiplier equals the shared λ.
        """
        return FisherOptimal(self.coordinate_variances[j], self.half_widths[j])

    def pdf(self, w: ArrayLike) -> NDArray[np.float64]:
        """Product density at points of shape ``(..., m)``."""
        x = np.asarray(w, dtype=np.float64)
        if x.shape[-1:] != (self.dim,):
            raise ValueError(f"`w` must have last axis of length {self.dim}, got shape {x.shape}")
        out = np.ones(x.shape[:-1])
        for j, (st, a) in enumerate(zip(self._states, self.half_widths, strict=True)):
            out = out * _unit_pdf(st, x[..., j] / a) / a
        return out

    def sample(self, rng: np.random.Generator, size: Size) -> NDArray[np.float64]:
        rng = check_generator(rng)
        u = rng.random((*as_shape(size), self.dim))
        for j, (st, a) in enumerate(zip(self._states, self.half_widths, strict=True)):
            u[..., j] = a * st.ppf(u[..., j])
        return u
