"""Exact null laws of noisy statistics: a normal part plus independent symmetric noise.

A statistic released with additive noise is, under H0, T = S + Σ_l w_l with S ~ N(0, v) (the
statistic's normal approximation; for Mann-Whitney, U with v = V) and the w_l independent draws
of symmetric noise laws. Referring T/√(v + Σ σ_l²) to N(0, 1) is anti-conservative when a noise
is heavier-tailed than the normal (Laplace) and not small against √v. This module gives the law
of T itself.

Noise laws (:class:`NoiseLaw`), with characteristic function φ(s) = E e^{isw} and moment
generating function M(z) = E e^{zw}:

* ``laplace``, scale b: density e^{−|w|/b}/(2b), variance 2b², M(z) = 1/(1 − b²z²) for
  |Re z| < 1/b;
* ``gaussian``, scale σ: N(0, σ²), M(z) = e^{σ²z²/2};
* ``raised_cosine``, half-width a: density cos²(πw/(2a))/a on [−a, a], variance
  a²(1/3 − 2/π²), M(z) = π² sinh(az)/(az(π² + a²z²)) (entire);
* ``pdf``, half-width a: a symmetric density p on [−a, a], M(z) = ∫p(w)e^{zw}dw by
  Gauss-Legendre quadrature.

The raised cosine is the Fisher-information-optimal noise on [−a, a] without a second-moment
constraint (Farokhi 2019, seed 002; docs/methods.md §7.4); ``pdf`` covers the constrained
optimum (the ground state tabulated by :mod:`shared.mechanisms.fisher_optimal`) and any other
symmetric noise with a bounded support.

The law of T (:class:`NoisyNormal`) is computed by the cheapest exact route:

* Gaussian noise is part of the normal: with no other noise T ~ N(0, v + Σσ_l²).
* One Laplace noise: the normal-Laplace law (Reed & Jorgensen 2004; Reed 2006; their CDF with
  α = β = 1/b and Mills' ratio written out), σ² = v:

      P(T <= t) = Φ(t/σ) − ½ e^{σ²/(2b²) − t/b} Φ(t/σ − σ/b) + ½ e^{σ²/(2b²) + t/b} Φ(−t/σ − σ/b).

  (It follows from P(T <= t) = E Φ((t − w)/σ), integrating each half-line of the Laplace law.)
  The upper tail is summed in log space from log Φ of each term; the subtracted term is at most
  half the first (Mills' ratio decreases), so no digits cancel and tails keep their relative
  precision.
* No normal part and a single noise: the noise's own law (closed forms; a ``pdf`` by quadrature).
* Otherwise, inversion of M along the vertical line Re z = θ through the saddle point
  K'(θ) = t of K = log M (Helstrom 1978; the Gil-Pelaez (1951) formula is its θ → 0 limit):

      P(T > t) = (1/π) ∫_0^∞ Re[ M(θ + is) e^{−(θ+is)t} / (θ + is) ] ds,    0 < θ < θ_sup,

  θ_sup = 1/max b (∞ without Laplace noise), by the trapezoidal rule, which converges
  exponentially for integrands analytic in a strip |Im s| < d (Trefethen & Weideman 2014,
  Thm 5.1: error <= 2·I_d/(e^{2πd/h} − 1), I_d the integral of |f| along the strip's edges). The
  nearest singularities are the pole of 1/z at z = 0 and a Laplace pole at z = 1/b; I_d is
  bounded by M(θ ± d)e^{−(θ ± d)t} (a density's |M(x + is)| <= M(x)). The step h makes that
  bound 1e-14 of the result; the range [0, s_max] stops where a bound on |M(θ + is)| (exact
  moduli for Laplace and Gaussian factors, |sinh| <= cosh for the raised cosine) leaves less. The
  integrand is written relative to M(θ)e^{−θt}, the Chernoff bound, so a far-tail probability
  keeps its relative precision. Without a normal part |M(θ + is)| falls only like a power of s
  and far tails would need more than 2²⁰ nodes: there the target loosens to 1e-11, then 1e-8.
  Beyond e^{−700}, where even that fails, the Chernoff bound itself is returned (an upper
  bound; the p-value is 0 in double precision).

Accuracy (``tests/shared/test_noisy_null.py``, against references computed independently by
adaptive quadrature and partial fractions), for P from 1e-12 to 0.5: the normal-Laplace form and
the inversion (one or several Laplace noises, the raised cosine, the normal) within 2e-14
relative; a tabulated ``pdf`` within 4e-7 relative and 1.2e-9 absolute (the tabulated
Fisher-optimal density is linear in √p between its nodes, which Gauss-Legendre integrates to
that precision). A sum of several noises without a normal part is slow in its far tails (the
power-law decay above).

All noises are symmetric, so P(T >= t) = P(T <= −t), and p-values follow the convention of
:mod:`shared.mwu`: ``"less"`` is the upper tail P(T >= t), ``"greater"`` the lower tail
P(T <= t), ``"two-sided"`` min(1, 2·P(T >= |t|)).

References: J. Gil-Pelaez, Note on the inversion theorem, Biometrika 38 (1951) 481-482.
C. W. Helstrom, Approximate evaluation of detection probabilities in radar and optical
communications, IEEE Trans. Aerosp. Electron. Syst. 14 (1978) 630-640. W. J. Reed and M.
Jorgensen, The double Pareto-lognormal distribution, Commun. Statist. Theory Methods 33 (2004)
1733-1753; W. J. Reed, The normal-Laplace distribution and its relatives, in Advances in
Distribution Theory, Order Statistics, and Inference, Birkhäuser (2006) 61-74. L. N. Trefethen
and J. A. C. Weideman, The exponentially convergent trapezoidal rule, SIAM Review 56 (2014)
385-458. F. Farokhi, Taking a lesson from quantum particles for statistical data privacy,
arXiv:1908.04954 (2019).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from shared._validation import check_positive

FloatArray = NDArray[np.float64]
NoiseKind = Literal["laplace", "gaussian", "raised_cosine", "pdf"]
Method = Literal["auto", "inversion"]
Pdf = Callable[[FloatArray], FloatArray]

NOISE_KINDS: Final = ("laplace", "gaussian", "raised_cosine", "pdf")
ALTERNATIVES: Final = ("two-sided", "less", "greater")

_RC_VARIANCE: Final = 1.0 / 3.0 - 2.0 / math.pi**2
"""Variance of the raised cosine on [−1, 1]."""

_TOLERANCES: Final = (1e-14, 1e-11, 1e-8)
"""Relative targets of the inversion's discretisation and truncation errors, loosened in turn
only where the tighter one would need more than 2^20 nodes."""

_MAX_NODES: Final = 2**20
_BUDGET: Final = 2**21
"""Complex values evaluated at once (memory per chunk of the inversion)."""

_PDF_NODES: Final = 256
"""Gauss-Legendre nodes for a ``pdf`` law's M and its derivatives at real arguments."""

_RANGE_BLOCK: Final = 32
"""Candidate ranges s_max tried at once per row (most rows settle within the first 32)."""

_RANGE_ROWS: Final = 4096
"""Rows per evaluation of those candidates (memory: rows·_RANGE_BLOCK values)."""

_STEP_VALUES: Final = 2**20
"""Values per evaluation of the 24 strip half-widths of the trapezoidal step (rows·24, times a
``pdf`` law's nodes): the memory of one block of rows."""


def _row_blocks(count: int, size: int) -> list[NDArray[np.intp]]:
    """The row indices 0..count−1 in consecutive blocks of at most ``size``."""
    return [np.arange(i, min(i + size, count)) for i in range(0, count, size)]


@functools.lru_cache(maxsize=32)
def _legendre(n: int) -> tuple[FloatArray, FloatArray]:
    x, w = np.polynomial.legendre.leggauss(n)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


@dataclass(frozen=True)
class _ScaledPdf:
    """The density of c·w when ``pdf`` is the density of w."""

    pdf: Pdf
    factor: float

    def __call__(self, w: FloatArray) -> FloatArray:
        return np.asarray(self.pdf(np.asarray(w) / self.factor), dtype=np.float64) / self.factor


@dataclass(frozen=True)
class NoiseLaw:
    """The law of a symmetric additive noise w (the kinds: module docstring).

    Build one with :meth:`laplace`, :meth:`gaussian`, :meth:`raised_cosine` or :meth:`from_pdf`;
    a mechanism of :mod:`shared.mechanisms` gives its own as ``noise_law``.

    >>> NoiseLaw.laplace(2.0).variance
    8.0
    >>> NoiseLaw.laplace(2.0).scaled(0.5) == NoiseLaw.laplace(1.0)
    True
    """

    kind: NoiseKind
    scale: float
    """b (Laplace), σ (Gaussian), the half-width a (raised cosine, pdf)."""
    pdf: Pdf | None = field(default=None, repr=False)
    pdf_variance: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise ValueError(f"`kind` must be one of {set(NOISE_KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        if (self.kind == "pdf") != (self.pdf is not None):
            raise ValueError("`pdf` must be given for kind 'pdf' and only for it")
        if self.kind == "pdf":
            var = self.pdf_variance
            if var is None:
                raise ValueError("a 'pdf' law needs its variance (use NoiseLaw.from_pdf)")
            object.__setattr__(self, "pdf_variance", check_positive(var, "pdf_variance"))
        elif self.pdf_variance is not None:
            raise ValueError("`pdf_variance` is only for kind 'pdf'")

    @classmethod
    def laplace(cls, b: float) -> NoiseLaw:
        """Laplace(0, b): density e^{−|w|/b}/(2b)."""
        return cls("laplace", check_positive(b, "b"))

    @classmethod
    def gaussian(cls, sigma: float) -> NoiseLaw:
        """N(0, σ²)."""
        return cls("gaussian", check_positive(sigma, "sigma"))

    @classmethod
    def raised_cosine(cls, half_width: float) -> NoiseLaw:
        """Density cos²(πw/(2a))/a on [−a, a] (``scipy.stats.cosine(scale=a/π)``)."""
        return cls("raised_cosine", check_positive(half_width, "half_width"))

    @classmethod
    def from_pdf(cls, pdf: Pdf, half_width: float, *, variance: float | None = None) -> NoiseLaw:
        """A symmetric density ``pdf`` on [−a, a] (vectorized; 0 outside).

        Checked once on 256 Gauss-Legendre nodes: finite, >= 0, symmetric and of mass 1 (to
        1e-5; the inversion normalizes by the computed mass). ``variance`` defaults to ∫w²p.
        """
        a = check_positive(half_width, "half_width")
        x, g = _legendre(_PDF_NODES)
        p = np.asarray(pdf(a * x), dtype=np.float64)
        if p.shape != x.shape or not np.isfinite(p).all() or (p < 0).any():
            raise ValueError("`pdf` must return finite values >= 0, one per point")
        if np.abs(p - p[::-1]).max() > 1e-8 * p.max():
            raise ValueError("`pdf` must be symmetric about 0")
        mass = a * float(g @ p)
        if abs(mass - 1.0) > 1e-5:
            raise ValueError(f"`pdf` must integrate to 1 on [-a, a], got {mass:.8g}")
        if variance is None:
            variance = a**3 * float(g @ (x * x * p)) / mass
        return cls("pdf", a, pdf, check_positive(variance, "variance"))

    @property
    def variance(self) -> float:
        if self.kind == "laplace":
            return 2.0 * self.scale**2
        if self.kind == "gaussian":
            return self.scale**2
        if self.kind == "raised_cosine":
            return _RC_VARIANCE * self.scale**2
        assert self.pdf_variance is not None
        return self.pdf_variance

    def scaled(self, c: float) -> NoiseLaw:
        """The law of c·w, c > 0."""
        c = check_positive(c, "c")
        if self.kind != "pdf":
            return NoiseLaw(self.kind, self.scale * c)
        assert self.pdf is not None and self.pdf_variance is not None
        inner = self.pdf
        pdf = (
            _ScaledPdf(inner.pdf, inner.factor * c)
            if isinstance(inner, _ScaledPdf)
            else _ScaledPdf(inner, c)
        )
        return NoiseLaw("pdf", self.scale * c, pdf, self.pdf_variance * c * c)

    def cf(self, s: ArrayLike) -> FloatArray:
        """The characteristic function E e^{isw} (real: the law is symmetric)."""
        s = np.asarray(s, dtype=np.float64)
        if self.kind == "laplace":
            return np.asarray(1.0 / (1.0 + (self.scale * s) ** 2))
        if self.kind == "gaussian":
            return np.asarray(np.exp(-0.5 * (self.scale * s) ** 2))
        if self.kind == "raised_cosine":
            # π² sin x/(x(π² − x²)), x = a|s|: sin x = x·sinc(x/π) removes x = 0, and
            # sin x = (π − x)·sinc((π − x)/π) removes x = π
            x = np.abs(self.scale * s)
            low = np.minimum(x, 0.5 * math.pi)
            high = np.maximum(x, 0.5 * math.pi)
            near_zero = math.pi**2 * np.sinc(low / math.pi) / (math.pi**2 - low * low)
            near_pi = math.pi**2 * np.sinc((math.pi - high) / math.pi) / (high * (math.pi + high))
            return np.asarray(np.where(x < 0.5 * math.pi, near_zero, near_pi))
        nodes, weights = _pdf_quadrature(self, max(_PDF_NODES, _pdf_nodes_for(self, s)))
        flat = s.reshape(-1)
        out = np.cos(np.multiply.outer(flat, nodes)) @ weights
        return np.asarray(out.reshape(s.shape))


@functools.lru_cache(maxsize=128)
def _pdf_quadrature(law: NoiseLaw, n: int) -> tuple[FloatArray, FloatArray]:
    """Gauss-Legendre nodes on [−a, a] and weights g·p(w) normalized to total 1."""
    assert law.pdf is not None
    x, g = _legendre(n)
    nodes = law.scale * x
    weights = g * np.asarray(law.pdf(nodes), dtype=np.float64)
    weights = weights / weights.sum()
    nodes.flags.writeable = False
    weights.flags.writeable = False
    return nodes, weights


def _pdf_nodes_for(law: NoiseLaw, s: ArrayLike) -> int:
    """Gauss-Legendre nodes resolving e^{isw} on [−a, a] for |s| up to max |s| (a multiple of 64:
    the degree of e^{isw}'s Legendre series is about |s|·a; the density needs some more)."""
    smax = float(np.max(np.abs(s), initial=0.0))
    n = int(0.55 * smax * law.scale) + 96
    return min(64 * -(-n // 64), 16384)


# -- the single-noise closed forms ----------------------------------------------------------------


def _normal_laplace_log_tail(x: FloatArray, sigma: float, b: float) -> FloatArray:
    """log P(S + w > x), x >= 0, S ~ N(0, σ²), w ~ Laplace(b) (module docstring, Reed & Jorgensen
    2004): P = Φ(−u) − ½e^{r²/2 + x/b}Φ(−u − r) + ½e^{r²/2 − x/b}Φ(u − r), u = x/σ, r = σ/b."""
    if sigma == 0.0:
        return np.asarray(math.log(0.5) - x / b)
    r = sigma / b
    u = x / sigma
    log_a = special.log_ndtr(-u)
    log_c = math.log(0.5) + 0.5 * r * r + x / b + special.log_ndtr(-u - r)
    log_b = math.log(0.5) + 0.5 * r * r - x / b + special.log_ndtr(u - r)
    # C <= A/2 (Mills' ratio decreases): log(A − C) without cancellation
    log_ac = log_a + np.log1p(-np.exp(np.minimum(log_c - log_a, 0.0)))
    return np.asarray(np.logaddexp(log_ac, log_b))


def _raised_cosine_log_tail(x: FloatArray, a: float) -> FloatArray:
    """log P(w > x) for the raised cosine on [−a, a]: (y − sin y)/(2π), y = π(1 − x/a)."""
    y = math.pi * np.clip(1.0 - x / a, 0.0, 1.0)
    series = y**3 / 6.0 * (1.0 - y * y / 20.0 * (1.0 - y * y / 42.0 * (1.0 - y * y / 72.0)))
    tail = np.where(y < 0.1, series, y - np.sin(y)) / (2.0 * math.pi)
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(tail))


def _pdf_log_tail(x: FloatArray, law: NoiseLaw) -> FloatArray:
    """log ∫_x^a p(w) dw by Gauss-Legendre on [x, a], normalized by the mass on [−a, a]."""
    assert law.pdf is not None
    a = law.scale
    xs, g = _legendre(_PDF_NODES)
    mass = a * float(g @ np.asarray(law.pdf(a * xs), dtype=np.float64))
    lo = np.minimum(x, a)[:, None]
    nodes = lo + (a - lo) * (xs + 1.0) / 2.0
    tail = (np.asarray(law.pdf(nodes), dtype=np.float64) @ g) * (a - lo[:, 0]) / 2.0 / mass
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.maximum(tail, 0.0)))


# -- the inversion --------------------------------------------------------------------------------


def _log_sinhc(x: FloatArray) -> FloatArray:
    """log(sinh x / x), x >= 0."""
    small = x < 0.1
    x2 = x * x
    series = x2 * (1 / 6 - x2 * (1 / 180 - x2 * (1 / 2835 - x2 * (1 / 37800 - x2 / 467775))))
    big = x > 20.0
    mid = np.where(small | big, 1.0, x)
    return np.asarray(np.where(
        small, series,
        np.where(big, x - np.log(2.0 * np.where(big, x, 1.0)), np.log(np.sinh(mid) / mid)),
    ))


def _coth_minus_inverse(x: FloatArray) -> FloatArray:
    """coth x − 1/x, x > 0."""
    x2 = x * x
    series = x * (1 / 3 - x2 * (1 / 45 - x2 * (2 / 945 - x2 / 4725)))
    safe = np.where(x < 0.1, 1.0, x)
    return np.asarray(np.where(x < 0.1, series, 1.0 / np.tanh(safe) - 1.0 / safe))


def _inverse_square_minus_csch2(x: FloatArray) -> FloatArray:
    """1/x² − 1/sinh² x, x > 0."""
    x2 = x * x
    series = 1 / 3 - x2 * (1 / 15 - x2 * (2 / 189 - x2 / 675))
    safe = np.where(x < 0.1, 1.0, x)
    e = np.exp(-2.0 * safe)
    csch2 = 4.0 * e / (1.0 - e) ** 2
    return np.asarray(np.where(x < 0.1, series, 1.0 / (safe * safe) - csch2))


@dataclass(frozen=True)
class _Inversion:
    """K = log M of N(0, σ²) + the noises (Gaussian noise already in σ²), and the inversion."""

    sigma2: float
    laplace: tuple[float, ...]
    cosine: tuple[float, ...]
    pdfs: tuple[NoiseLaw, ...]

    @property
    def theta_sup(self) -> float:
        return 1.0 / max(self.laplace) if self.laplace else math.inf

    @property
    def bounded(self) -> bool:
        """Whether T has a bounded support (no normal part, no Laplace noise)."""
        return self.sigma2 == 0.0 and not self.laplace

    @property
    def reach(self) -> float:
        """sup T when bounded."""
        return math.fsum(self.cosine) + math.fsum(p.scale for p in self.pdfs)

    def cumulants(self, theta: FloatArray, order: int) -> FloatArray:
        """K (order 0), K' (1) or K'' (2) at real θ (|θ| < θ_sup), elementwise."""
        return self._cumulants(theta, (order,))[0]

    def _slope_and_curvature(self, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(K'(θ), K''(θ)) in one pass (a ``pdf`` law's tilted weights computed once)."""
        slope, curvature = self._cumulants(theta, (1, 2))
        return slope, curvature

    def _cumulants(self, theta: FloatArray, orders: tuple[int, ...]) -> list[FloatArray]:
        """[K^(order)(θ) for order in ``orders``] (orders 0, 1, 2), elementwise."""
        t = np.asarray(theta, dtype=np.float64)
        outs = []
        for order in orders:
            out = (
                0.5 * self.sigma2 * t * t if order == 0 else self.sigma2 * t if order == 1
                else np.full_like(t, self.sigma2)
            )
            for b in self.laplace:
                lo, hi = 1.0 - b * t, 1.0 + b * t
                if order == 0:
                    out = out - np.log(lo * hi)
                elif order == 1:
                    out = out + 2.0 * b * b * t / (lo * hi)
                else:
                    out = out + 2.0 * b * b * (1.0 + (b * t) ** 2) / (lo * hi) ** 2
            for a in self.cosine:
                x = np.abs(a * t)
                if order == 0:
                    out = out + _log_sinhc(x) - np.log1p((x / math.pi) ** 2)
                elif order == 1:
                    out = out + np.sign(t) * a * (
                        _coth_minus_inverse(x) - 2.0 * x / (math.pi**2 + x * x)
                    )
                else:
                    out = out + a * a * (
                        _inverse_square_minus_csch2(x)
                        - 2.0 * (math.pi**2 - x * x) / (math.pi**2 + x * x) ** 2
                    )
            outs.append(out)
        for law in self.pdfs:
            nodes, weights = _pdf_quadrature(law, _PDF_NODES)
            e = np.multiply.outer(t, nodes)
            shift = e.max(axis=-1, keepdims=True)
            q = np.exp(e - shift) * weights  # the tilted weights, once for every order
            total = q.sum(axis=-1)
            mean = (q @ nodes) / total
            for i, order in enumerate(orders):
                if order == 0:
                    outs[i] = outs[i] + np.log(total) + shift[..., 0]
                else:
                    outs[i] = outs[i] + (
                        mean if order == 1 else (q @ (nodes * nodes)) / total - mean**2
                    )
        return [np.asarray(out) for out in outs]

    def bracket(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(lo, hi) with K'(lo) <= x <= K'(hi) inside (0, θ_sup), for :meth:`saddle`."""
        lo = np.zeros_like(x)
        if self.laplace:
            hi = np.full_like(x, self.theta_sup * (1.0 - 2.0**-40))
            if self.sigma2 > 0.0:
                hi = np.minimum(hi, x / self.sigma2)
        elif self.sigma2 > 0.0:
            hi = x / self.sigma2
        else:  # bounded noises only: K' rises to the reach; double until it passes x
            hi = np.full_like(x, 1.0 / math.sqrt(float(self.cumulants(np.zeros(1), 2)[0])))
            for _ in range(2000):
                short = self.cumulants(hi, 1) < x
                if not short.any():
                    break
                hi = np.where(short, 2.0 * hi, hi)
        return lo, hi

    def saddle(self, x: FloatArray) -> FloatArray:
        """θ in (0, θ_sup) with K'(θ) = x (x > 0; T unbounded above x), by Newton's method
        safeguarded by bisection."""
        lo, hi = self.bracket(x)
        # Newton's method on the increasing K', kept inside the bracket [lo, hi] that every
        # evaluation narrows (a bisection step where Newton's would leave it): a few steps
        # where 64 halvings cost several times the evaluations. It starts where the tangent of
        # K' at 0 reaches x, beyond the root when K' is convex (normal and Laplace parts).
        var0 = float(self.cumulants(np.zeros(1), 2)[0])
        theta = np.minimum(x / var0, 0.5 * (lo + hi))
        settled = np.zeros(theta.shape, dtype=bool)
        for _ in range(200):
            slope, curvature = self._slope_and_curvature(theta)
            above = slope >= x
            hi = np.where(above, theta, hi)
            lo = np.where(above, lo, theta)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = (slope - x) / curvature
            newton = theta - step
            # converged: Newton's last correction is at the rounding of θ (the root may then
            # sit on the bracket's end, where the bisection step must not move it away)
            now = (np.abs(step) <= 1e-15 * theta) | (hi - lo <= 2e-16 * hi)
            inside = (newton > lo) & (newton < hi)
            new = np.where(inside | now, newton, 0.5 * (lo + hi))
            theta = np.where(settled, theta, new)  # a settled row stays where it settled
            settled |= now
            if settled.all():
                break
        return np.asarray(theta)

    def ratio(
        self, theta: FloatArray, s: FloatArray, s_max: FloatArray | None = None
    ) -> NDArray[np.complex128]:
        """Π_l M_l(θ + is)/M_l(θ) of the noises (rows: θ; columns: s, each row's up to its
        ``s_max``, by default its last)."""
        th = theta[:, None]
        z = th + 1j * s
        out = np.ones(s.shape, dtype=np.complex128)
        for b in self.laplace:
            num = (1.0 - b * th) * (1.0 + b * th)
            out *= num / (num + (b * s) ** 2 - 2j * b * b * th * s)
        for a in self.cosine:
            coth = 1.0 / np.tanh(a * th)
            shape = np.cos(a * s) + 1j * coth * np.sin(a * s)
            out *= shape * th * (math.pi**2 + (a * th) ** 2) / (z * (math.pi**2 + (a * z) ** 2))
        if self.pdfs:
            reach = s[:, -1] if s_max is None else s_max
            for law in self.pdfs:
                # each row's quadrature depends on its own range only (not on its batch)
                orders = np.array([max(_PDF_NODES, _pdf_nodes_for(law, v)) for v in reach])
                for order in np.unique(orders):
                    rows = orders == order
                    out[rows] *= self._pdf_ratio(law, int(order), theta[rows], s[rows])
        return out

    @staticmethod
    def _pdf_ratio(
        law: NoiseLaw, order: int, theta: FloatArray, s: FloatArray
    ) -> NDArray[np.complex128]:
        """Σ_j q_j(θ) e^{i s_k w_j} over ``order`` Gauss-Legendre nodes w_j, q the tilted
        weights, on the uniform grid s_k = k·h of each row: with k = k0 + B·m,
        e^{ikhw} = e^{ik0hw}·e^{iBmhw}, so the sum is a matrix product and only (B + N/B)·n
        exponentials are taken."""
        nodes, weights = _pdf_quadrature(law, order)
        tilt = np.exp(np.multiply.outer(theta, nodes) - theta[:, None] * law.scale)
        q = tilt * weights
        q /= q.sum(axis=1, keepdims=True)
        rows, count = s.shape
        h = s[:, 1] if count > 1 else np.zeros(rows)
        inner = max(1, math.isqrt(count))
        outer = -(-count // inner)
        out = np.empty((rows, count), dtype=np.complex128)
        block = max(1, _BUDGET // ((inner + outer) * nodes.size))
        for i in range(0, rows, block):
            step = h[i : i + block, None, None] * nodes  # (r, 1, n)
            near = np.exp(1j * np.arange(inner)[:, None] * step) * q[i : i + block, None, :]
            far = np.exp(1j * (inner * np.arange(outer))[:, None] * step)
            sums = near @ far.transpose(0, 2, 1)  # (r, inner, outer): k = k0 + inner·m
            out[i : i + block] = sums.transpose(0, 2, 1).reshape(len(step), -1)[:, :count]
        return out

    def bound(self, theta: FloatArray, s: FloatArray) -> FloatArray:
        """A bound on |M(θ + is)/M(θ)|/|θ + is|, non-increasing in s beyond its first drop."""
        z_abs = np.hypot(theta, s)
        out = np.exp(-0.5 * self.sigma2 * s * s) / z_abs
        for b in self.laplace:
            num = (1.0 - b * theta) * (1.0 + b * theta)
            out = out * num / np.hypot(num + (b * s) ** 2, 2.0 * b * b * theta * s)
        for a in self.cosine:
            c = math.pi**2 + (a * theta) ** 2
            far = (a * s) ** 2 >= 2.0 * c
            safe = np.where(far, s, 1.0)
            decay = 2.0 * theta * c / (np.tanh(a * theta) * z_abs * (a * safe) ** 2)
            out = out * np.where(far, np.minimum(1.0, decay), 1.0)
        return np.asarray(out)

    def log_tail(self, x: FloatArray) -> FloatArray:
        """log P(T > x) for x >= 0 (module docstring: the saddle-point contour)."""
        out = np.empty_like(x)
        todo = np.ones(x.shape, dtype=bool)
        if self.bounded:
            beyond = x >= self.reach
            out[beyond] = -np.inf
            todo &= ~beyond
        if not todo.any():
            return out
        xs = x[todo]
        var0 = float(self.cumulants(np.zeros(1), 2)[0])
        theta_min = min(0.5 / math.sqrt(var0), 0.5 * self.theta_sup)
        theta = np.maximum(self.saddle(np.maximum(xs, 1e-300)), theta_min)
        k0 = self.cumulants(theta, 0)
        k2 = self.cumulants(theta, 2)
        # Q = P(T > x)/(M(θ)e^{−θx}) is about min(½, 1/(θ√(2πK''))) (the normal case)
        q_est = np.minimum(0.5, 1.0 / (theta * np.sqrt(2.0 * math.pi * k2)))
        h = np.empty_like(xs)
        nodes = np.full(xs.shape, _MAX_NODES + 1, dtype=np.int64)
        # Without a normal part |M(θ + is)| falls only like a power of s: a far tail may need a
        # looser (still 1e-8) tolerance to stay within 2^20 nodes.
        for rel in _TOLERANCES:
            redo = nodes > _MAX_NODES
            if not redo.any():
                break
            tol = rel * q_est[redo] * math.pi
            th = theta[redo]
            s_max = self._range(th, tol, 1.0 / np.sqrt(k2[redo]))
            h[redo] = self._step(th, xs[redo], k0[redo], s_max, tol)
            nodes[redo] = np.ceil(s_max / h[redo]).astype(np.int64) + 1
        chernoff = k0 - theta * xs
        log_q = np.full_like(xs, np.nan)
        hopeless = nodes > _MAX_NODES
        if (hopeless & (chernoff > -700.0)).any():
            raise ArithmeticError("the inversion needs more than 2^20 nodes above e^-700")
        log_q[hopeless] = 0.0  # the Chernoff bound
        rows = np.flatnonzero(~hopeless)
        rows = rows[np.argsort(nodes[rows], kind="stable")]
        start = 0
        while start < rows.size:
            stop = start + 1
            while stop < rows.size and (stop - start + 1) * int(nodes[rows[stop]]) <= _BUDGET:
                stop += 1
            chunk = rows[start:stop]
            log_q[chunk] = self._log_integral(theta[chunk], xs[chunk], h[chunk], nodes[chunk])
            start = stop
        out[todo] = chernoff + log_q
        return out

    def _range(self, theta: FloatArray, tol: FloatArray, start: FloatArray) -> FloatArray:
        """s_max with ∫_{s_max}^∞ bound <= tol (a tail of a bound that falls at least like s⁻²:
        bound(S)·S; checked on a doubling): the first of start·1.25^j that passes, the j tried
        _RANGE_BLOCK at a time (one evaluation of the bound per block, not per j)."""
        out = np.full_like(start, np.nan)
        for rows in _row_blocks(start.size, _RANGE_ROWS):
            th, tl = theta[rows, None], tol[rows, None]
            s0 = start[rows]
            todo = np.arange(s0.size)
            for _ in range(-(-400 // _RANGE_BLOCK)):
                # s0·1.25·1.25·…: the same products as multiplying by 1.25 in turn
                grid = np.cumprod(np.column_stack(
                    [s0[todo], np.full((todo.size, _RANGE_BLOCK - 1), 1.25)]), axis=1)
                here = self.bound(th[todo], grid)
                ok = (here * grid <= tl[todo]) & (self.bound(th[todo], 2.0 * grid) <= 0.25 * here)
                found = ok.any(axis=1)
                first = ok.argmax(axis=1)
                out[rows[todo[found]]] = grid[found, first[found]]
                s0[todo] = 1.25 * grid[:, -1]
                todo = todo[~found]
                if not todo.size:
                    break
            else:
                raise ValueError(
                    "the null law has no normal part and too little smoothing noise to be "
                    "inverted (give a normal variance > 0 or at least one Laplace or "
                    "raised-cosine noise)"
                )
        return out

    def _step(
        self, theta: FloatArray, x: FloatArray, k0: FloatArray, s_max: FloatArray,
        tol: FloatArray,
    ) -> FloatArray:
        """The trapezoidal step: the best 2πd/(G(d) + log(2·I/tol)) over strip half-widths d."""
        halvings = 2.0 ** (-np.arange(24) / 2)  # d from d_max down by √2 at a time
        best = np.zeros_like(theta)
        block = max(1, _STEP_VALUES // (24 * (1 + _PDF_NODES * len(self.pdfs))))
        for rows in _row_blocks(theta.size, block):
            th, xx = theta[rows, None], x[rows, None]
            d = 0.9 * np.minimum(th, self.theta_sup - th) * halvings
            grow = np.maximum(
                self.cumulants(th - d, 0) + d * xx, self.cumulants(th + d, 0) - d * xx
            ) - k0[rows, None]
            spread = 2.0 * np.arcsinh(s_max[rows, None] / (th - d))  # ∫|1/z| along the edge
            h = 2.0 * math.pi * d / (np.maximum(grow, 0.0) + np.log(2.0 * spread / tol[rows, None]))
            best[rows] = np.maximum(h.max(axis=1), 0.0)
        return best

    def _log_integral(
        self, theta: FloatArray, x: FloatArray, h: FloatArray, nodes: NDArray[np.int64]
    ) -> FloatArray:
        """log of (h/π)·Σ' Re[R(s_k)e^{−is_k x}/(θ + is_k)], s_k = k·h, R = M(θ+is)/M(θ)."""
        k = np.arange(int(nodes.max()))
        s = h[:, None] * k
        th = theta[:, None]
        # the Gaussian factor and e^{−isx} together: phase (σ²θ − x)s, decay e^{−σ²s²/2}
        r = np.exp(-0.5 * self.sigma2 * s * s + 1j * (self.sigma2 * th - x[:, None]) * s)
        r *= self.ratio(theta, s, h * (nodes - 1))
        f = (r / (th + 1j * s)).real
        f[:, 0] *= 0.5
        f[k[None, :] >= nodes[:, None]] = 0.0
        total = h / math.pi * f.sum(axis=1)
        if (total <= 0.0).any():
            raise ArithmeticError("the inversion lost the tail probability to rounding")
        return np.asarray(np.log(total))


# -- the law of T ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoisyNormal:
    """The law of T = S + Σ_l w_l, S ~ N(0, ``normal_variance``), w_l ~ ``noises`` independent.

    ``method="inversion"`` skips the closed forms (for checks: every law then goes through the
    saddle-point inversion).

    >>> law = NoisyNormal(1.0, (NoiseLaw.laplace(3.0),))
    >>> round(float(law.pvalue(10.0, "two-sided")), 6)   # N(0, 19) would give 0.021781
    0.037712
    """

    normal_variance: float
    noises: tuple[NoiseLaw, ...] = ()
    method: Method = "auto"
    _inversion: _Inversion = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            v = float(self.normal_variance)
        except (TypeError, ValueError):
            v = math.nan
        if not (math.isfinite(v) and v >= 0.0):
            raise ValueError(
                f"`normal_variance` must be a finite number >= 0, got {self.normal_variance!r}"
            )
        noises = tuple(self.noises)
        if not all(isinstance(n, NoiseLaw) for n in noises):
            raise ValueError("`noises` must be a sequence of NoiseLaw")
        if self.method not in ("auto", "inversion"):
            raise ValueError(
                f"`method` must be one of {{'auto', 'inversion'}}, got {self.method!r}"
            )
        sigma2 = math.fsum([v, *(n.variance for n in noises if n.kind == "gaussian")])
        if sigma2 == 0.0 and all(n.kind == "gaussian" for n in noises):
            raise ValueError("the law is a point mass at 0: give a normal variance or a noise > 0")
        inversion = _Inversion(
            sigma2,
            tuple(n.scale for n in noises if n.kind == "laplace"),
            tuple(n.scale for n in noises if n.kind == "raised_cosine"),
            tuple(n for n in noises if n.kind == "pdf"),
        )
        object.__setattr__(self, "normal_variance", v)
        object.__setattr__(self, "noises", noises)
        object.__setattr__(self, "_inversion", inversion)

    @property
    def variance(self) -> float:
        return math.fsum([self.normal_variance, *(n.variance for n in self.noises)])

    def _log_tail(self, x: FloatArray) -> FloatArray:
        """log P(T > x) for finite x >= 0 (1-D)."""
        inv = self._inversion
        others = len(inv.laplace) + len(inv.cosine) + len(inv.pdfs)
        if self.method == "auto":
            if others == 0:
                return np.asarray(special.log_ndtr(-x / math.sqrt(inv.sigma2)))
            if others == 1 and inv.laplace:
                return _normal_laplace_log_tail(x, math.sqrt(inv.sigma2), inv.laplace[0])
            if others == 1 and inv.sigma2 == 0.0:
                if inv.cosine:
                    return _raised_cosine_log_tail(x, inv.cosine[0])
                return _pdf_log_tail(x, inv.pdfs[0])
        return inv.log_tail(x)

    def _signed(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
        """(t, log P(T > |t|), t < 0) with NaN kept and ±∞ mapped to log 0."""
        tt = np.asarray(t, dtype=np.float64)
        flat = tt.reshape(-1)
        x = np.abs(flat)
        log_tail = np.full(flat.shape, np.nan)
        finite = np.isfinite(x)
        log_tail[np.isinf(x)] = -np.inf
        if finite.any():
            log_tail[finite] = self._log_tail(x[finite])
        return tt, log_tail.reshape(tt.shape), tt < 0

    def log_tails(self, t: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(log P(T >= t), log P(T <= t)), from one evaluation of the tail beyond |t|."""
        _, log_tail, negative = self._signed(t)
        with np.errstate(divide="ignore"):
            rest = np.log1p(-np.exp(log_tail))
        upper = np.where(negative, rest, log_tail)
        lower = np.where(negative, log_tail, rest)
        return np.asarray(upper), np.asarray(lower)

    def logsf(self, t: ArrayLike) -> FloatArray:
        """log P(T >= t) (T is continuous: = log P(T > t))."""
        return self.log_tails(t)[0]

    def sf(self, t: ArrayLike) -> FloatArray:
        """P(T >= t)."""
        _, log_tail, negative = self._signed(t)
        return np.asarray(np.where(negative, -np.expm1(log_tail), np.exp(log_tail)))

    def cdf(self, t: ArrayLike) -> FloatArray:
        """P(T <= t) = P(T >= −t) (symmetric law)."""
        return self.sf(-np.asarray(t, dtype=np.float64))

    def logcdf(self, t: ArrayLike) -> FloatArray:
        return self.logsf(-np.asarray(t, dtype=np.float64))

    def pvalue(self, t: ArrayLike, alternative: str = "two-sided") -> FloatArray:
        """p-value of the observed T = t: ``"less"`` P(T >= t), ``"greater"`` P(T <= t),
        ``"two-sided"`` min(1, 2·P(T >= |t|)) (the conventions of :mod:`shared.mwu`)."""
        if alternative not in ALTERNATIVES:
            raise ValueError(f"`alternative` must be one of {set(ALTERNATIVES)}, "
                             f"got {alternative!r}")
        if alternative == "less":
            return self.sf(t)
        if alternative == "greater":
            return self.cdf(t)
        _, log_tail, _ = self._signed(t)
        return np.asarray(np.minimum(1.0, 2.0 * np.exp(log_tail)))

    def isf(self, q: ArrayLike) -> FloatArray:
        """The t with P(T >= t) = q, q in (0, 1) (the critical values of a simulation).

        Regula falsi with the Illinois modification (Dowell & Jarratt 1971) on log P(T > x),
        which is close to linear in x in the tails, to a relative 1e-13 in t.
        """
        qq = np.asarray(q, dtype=np.float64)
        if not ((qq > 0) & (qq < 1)).all():
            raise ValueError("`q` must lie in (0, 1)")
        flat = qq.reshape(-1)
        target = np.log(np.minimum(flat, 1.0 - flat))  # P(T > x) for x >= 0
        lo = np.zeros_like(flat)
        f_lo = np.full_like(flat, math.log(0.5)) - target
        hi = np.full_like(flat, math.sqrt(self.variance))
        if self._inversion.bounded:
            hi = np.minimum(hi, self._inversion.reach)
        f_hi = self._log_tail(hi) - target
        for _ in range(2000):
            short = f_hi > 0
            if not short.any():
                break
            lo = np.where(short, hi, lo)
            f_lo = np.where(short, f_hi, f_lo)
            hi = np.where(short, 2.0 * hi, hi)
            f_hi[short] = self._log_tail(hi[short]) - target[short]
        side = np.zeros(flat.shape, dtype=np.int8)
        done = f_lo <= 0  # q = ½: t = 0
        hi = np.where(done, lo, hi)
        for _ in range(200):
            done |= (hi - lo <= 1e-13 * hi) | (f_hi == 0)
            if done.all():
                break
            act = ~done
            f_hi_safe = np.where(np.isfinite(f_hi), f_hi, -1e300)
            x = np.where(
                np.isfinite(f_hi), hi - f_hi_safe * (hi - lo) / (f_hi_safe - f_lo), 0.5 * (lo + hi)
            )
            x = np.clip(x, lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo))
            fx = np.zeros_like(x)
            fx[act] = self._log_tail(x[act]) - target[act]
            above = act & (fx > 0)
            below = act & (fx <= 0)
            lo = np.where(above, x, lo)
            f_lo = np.where(above, fx, f_lo)
            hi = np.where(below, x, hi)
            f_hi = np.where(below, fx, f_hi)
            # Illinois: halve the end that stayed twice running
            f_hi = np.where(above & (side == 1), 0.5 * f_hi, f_hi)
            f_lo = np.where(below & (side == -1), 0.5 * f_lo, f_lo)
            side = np.where(above, 1, np.where(below, -1, side)).astype(np.int8)
        x = np.where(f_hi == 0, hi, 0.5 * (lo + hi))
        return np.asarray(np.where(flat <= 0.5, x, -x).reshape(qq.shape))


def noise_law_of(mechanism: object) -> NoiseLaw:
    """The law of a one-dimensional mechanism's noise (its ``noise_law``).

    :class:`~shared.mechanisms.Laplace`, :class:`~shared.mechanisms.Gaussian` and
    :class:`~shared.mechanisms.FisherOptimal` expose one; another mechanism must too for an exact
    null law.
    """
    law = getattr(mechanism, "noise_law", None)
    if not isinstance(law, NoiseLaw):
        raise ValueError(
            f"`noise` ({type(mechanism).__name__}) does not expose its law as `noise_law` "
            "(a shared.noisy_null.NoiseLaw): the exact null law needs it"
        )
    return law
