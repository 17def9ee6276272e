"""Laplace mechanism: ε-DP for a release of L1 sensitivity Δ (Dwork, McSherry, Nissim & Smith 2006).

See also docs/methods.md §7.1.

Noise Laplace(0, b) with b = Δ/ε; Var = 2b². The sensitivity must be computed under the caller's
neighbouring relation (``add_remove`` or ``swap``, see :mod:`shared.privacy`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shared._validation import check_epsilon, check_generator, check_positive
from shared.mechanisms.base import Size, as_shape
from shared.noisy_null import NoiseLaw
from shared.privacy import PrivacySpent


@dataclass(frozen=True)
class Laplace:
    """ε-DP Laplace noise of scale Δ/ε for a scalar release with L1 sensitivity Δ."""

    epsilon: float
    sensitivity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))

    @property
    def dim(self) -> int:
        return 1

    @property
    def scale(self) -> float:
        """b = Δ/ε."""
        return self.sensitivity / self.epsilon

    @property
    def variance(self) -> float:
        """2b²."""
        return 2.0 * self.scale**2

    @property
    def noise_law(self) -> NoiseLaw:
        """Laplace(0, b), for exact null laws of noisy statistics (:mod:`shared.noisy_null`)."""
        return NoiseLaw.laplace(self.scale)

    @property
    def fisher_information(self) -> float:
        """1/b² (E[(d/dw log p)²] with |d/dw log p| = 1/b almost everywhere); for comparisons."""
        return 1.0 / self.scale**2

    @property
    def guarantee(self) -> PrivacySpent:
        return PrivacySpent(self.epsilon, 0.0)

    def sample(self, rng: np.random.Generator, size: Size) -> NDArray[np.float64]:
        return check_generator(rng).laplace(0.0, self.scale, as_shape(size))
