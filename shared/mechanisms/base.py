"""The interface every additive noise mechanism implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from shared.mechanisms.guarantees import Guarantee

Size = int | tuple[int, ...]


@runtime_checkable
class Mechanism(Protocol):
    """Additive noise w for a release y = f(x) + w.

    ``sample(rng, size)`` returns an array of shape ``size`` when ``dim == 1`` and
    ``(*size, dim)`` otherwise, drawn from the passed generator only. ``variance`` is E‖w‖² (the
    trace of the covariance; the plain variance in one dimension) — what a downstream test adds to
    the variance of the statistic it released. ``guarantee`` says what kind of privacy the noise
    gives; only :class:`~shared.privacy.PrivacySpent` and
    :class:`~shared.mechanisms.guarantees.ZCDPSpent` are differential privacy.

    Floating-point samplers can leak through the low-order bits of their output (Mironov 2012);
    services should draw from a generator seeded from OS entropy (``numpy.random.default_rng()``
    with no seed, or one seeded with ``secrets.randbits(128)``) and never reuse a seed.
    """

    @property
    def dim(self) -> int: ...

    @property
    def variance(self) -> float: ...

    @property
    def guarantee(self) -> Guarantee: ...

    def sample(self, rng: np.random.Generator, size: Size) -> NDArray[np.float64]: ...


def as_shape(size: Size) -> tuple[int, ...]:
    """``size`` as a shape tuple of non-negative ints (an int n means ``(n,)``)."""
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    if any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0 for n in shape):
        raise ValueError(f"`size` must be a non-negative int or a tuple of them, got {size!r}")
    return tuple(int(n) for n in shape)
