"""Independent references for the null laws of noisy statistics (tests only).

None of them calls ``shared.noisy_null``; each is an adaptive quadrature (``scipy.integrate.quad``)
of a positive integrand, or an exact identity on top of one:

* normal + Laplace(b): P(S + w > t) = ∫ Φ̄((t − w)/σ) e^{−|w|/b}/(2b) dw, split at 0 and t;
* normal + Laplace noises of distinct scales: the partial fractions of their moment generating
  function, Π_l 1/(1 − b_l²z²) = Σ_l A_l/(1 − b_l²z²) with A_l = Π_{k≠l} b_l²/(b_l² − b_k²),
  make the law a signed mixture of normal-Laplace laws: P(T > t) = Σ_l A_l P(S + w_l > t);
* normal + a density p on [−a, a]: ∫ Φ̄((t − w)/σ) p(w) dw (a table density: cell by cell, with
  Gauss-Legendre inside each cell, where it is a polynomial);
* normal + a density + Laplace noises: ∫ p(w) P(S + Σ w_l > t − w) dw, the inner law as above.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np
from scipy import integrate, interpolate, special

QUAD = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 800}


def normal_sf(t: float, sigma: float) -> float:
    return float(special.ndtr(-t / sigma))


def normal_laplace_sf(t: float, sigma: float, b: float) -> float:
    """P(S + w > t), S ~ N(0, σ²), w ~ Laplace(b), by quadrature over w."""

    def f(w: float) -> float:
        return normal_sf(t - w, sigma) * math.exp(-abs(w) / b) / (2.0 * b)

    edges = [-math.inf, *sorted({0.0, t}), math.inf]
    return math.fsum(integrate.quad(f, lo, hi, **QUAD)[0] for lo, hi in pairwise(edges))


def laplace_sum_sf(t: float, sigma: float, scales: Sequence[float]) -> float:
    """P(S + Σ w_l > t), w_l ~ Laplace(b_l) of distinct scales, by partial fractions."""
    b = [float(v) for v in scales]
    if len(set(b)) != len(b):
        raise ValueError("the partial fractions need distinct scales")
    weights = [math.prod(bi**2 / (bi**2 - bk**2) for k, bk in enumerate(b) if k != i)
               for i, bi in enumerate(b)]
    return math.fsum(a * normal_laplace_sf(t, sigma, bi) for a, bi in zip(weights, b, strict=True))


def raised_cosine_pdf(a: float) -> Callable[[float], float]:
    return lambda w: math.cos(math.pi * w / (2.0 * a)) ** 2 / a if abs(w) < a else 0.0


def bounded_sf(
    t: float, sigma: float, pdf: Callable[[float], float], a: float,
    laplace: Sequence[float] = (),
) -> float:
    """P(S + w + Σ w_l > t), w of density ``pdf`` on [−a, a] (smooth there), w_l Laplace."""
    def inner(x: float) -> float:
        if not laplace:
            return normal_sf(x, sigma)
        return laplace_sum_sf(x, sigma, laplace)

    return integrate.quad(lambda w: pdf(w) * inner(t - w), -a, a, **QUAD)[0]


def table_sf(
    t: float, sigma: float, nodes: np.ndarray, pdf: Callable[[np.ndarray], np.ndarray],
    laplace: Sequence[float] = (),
) -> float:
    """As :func:`bounded_sf` for a density that is a polynomial between ``nodes`` (a table),
    normalized to mass 1: Gauss-Legendre of order 8 in every cell."""
    x, g = np.polynomial.legendre.leggauss(8)
    lo, hi = nodes[:-1, None], nodes[1:, None]
    w = (lo + hi) / 2 + (hi - lo) / 2 * x
    weight = (hi - lo) / 2 * g * pdf(w)
    mass = weight.sum()
    if laplace:
        # the inner law is smooth in w (σ > 0): quadrature at 97 Chebyshev points of the
        # support, interpolated (barycentric; its error is below 1e-14 at this degree)
        a = float(nodes[-1])
        cheb = a * np.cos(np.pi * (np.arange(97) + 0.5) / 97)
        inner = [laplace_sum_sf(t - v, sigma, laplace) for v in cheb]
        vals = interpolate.BarycentricInterpolator(cheb, inner)(w)
    else:
        vals = special.ndtr(-(t - w) / sigma)
    return float((weight * vals).sum() / mass)


def table_cf(s: float, nodes: np.ndarray, pdf: Callable[[np.ndarray], np.ndarray]) -> float:
    """∫ cos(sw) p(w) dw for a density that is a polynomial between ``nodes``, mass 1."""
    x, g = np.polynomial.legendre.leggauss(8)
    lo, hi = nodes[:-1, None], nodes[1:, None]
    w = (lo + hi) / 2 + (hi - lo) / 2 * x
    weight = (hi - lo) / 2 * g * pdf(w)
    return float((weight * np.cos(s * w)).sum() / weight.sum())
