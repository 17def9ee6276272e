"""Input checks run once at the top of each public function; messages name what to fix."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shared.privacy import NEIGHBOURING_RELATIONS, Neighbouring

Alternative = Literal["two-sided", "less", "greater"]
ALTERNATIVES: tuple[Alternative, ...] = get_args(Alternative)
RELEASE_RTOL = 1e-9
"""How far a released number may sit from the value it must equal when both sides compute it
(an ε split, a noise law's variance, a sum of totals): float rounding, never more."""


def check_choice(value: Any, name: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {set(allowed)}, got {value!r}")
    return str(value)


def check_alternative(alternative: str) -> str:
    return check_choice(alternative, "alternative", ALTERNATIVES)


def check_neighbouring(neighbouring: str) -> Neighbouring:
    check_choice(neighbouring, "neighbouring", NEIGHBOURING_RELATIONS)
    return neighbouring  # type: ignore[return-value]


def check_positive(value: float, name: str) -> float:
    """A finite, strictly positive real (ε, a scale, a sensitivity)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}")
    return v


def check_epsilon(epsilon: float) -> float:
    return check_positive(epsilon, "epsilon")


def check_bounds(bounds: tuple[float, float], name: str = "bounds") -> tuple[float, float]:
    """Public bounds (a, b) with finite a < b."""
    try:
        a, b = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` must be a pair (a, b) of finite numbers, got {bounds!r}"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b)) or a >= b:
        raise ValueError(f"`{name}` must be finite with a < b, got {bounds!r}")
    return a, b


def check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_finite_1d(x: ArrayLike, name: str, *, allow_empty: bool = False) -> NDArray[np.float64]:
    """A 1-D float64 copy-free view of ``x``; refuses NaN/inf and (unless allowed) empty input."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"`{name}` must not be empty")
    if not all_finite(arr):
        raise ValueError(f"`{name}` contains NaN or infinite values; drop or impute them first")
    return arr


CHECK_CHUNK = 1 << 20
"""Values per step of an O(n) check: its boolean temporary is 1 MB, not one byte per value (an
eighth of the data again at 10^8 values, docs/benchmarks.md "The 10^8-row study")."""


def all_finite(arr: NDArray[np.float64]) -> bool:
    """Whether every value of the 1-D ``arr`` is finite, a chunk at a time."""
    return all(bool(np.isfinite(arr[i:i + CHECK_CHUNK]).all())
               for i in range(0, arr.size, CHECK_CHUNK))



def as_arms(samples: Sequence[ArrayLike], test: str) -> list[NDArray[np.float64]]:
    """Per-arm data of a k-arm test (``test`` names it in the error): at least two arms, each
    at least one finite value."""
    if len(samples) < 2:
        raise ValueError(f"{test} needs at least two arms, got {len(samples)}")
    arms = []
    for i, x in enumerate(samples):
        try:
            arms.append(as_finite_1d(x, f"samples[{i}]"))
        except ValueError as err:
            raise ValueError(f"arm {i}: {err} (every arm needs at least one record)") from None
    return arms


def check_open_unit(value: float, name: str) -> float:
    """A real strictly between 0 and 1 (δ, a probability that must not be degenerate)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:  # also refuses NaN
        raise ValueError(f"`{name}` must be a number in (0, 1), got {value!r}")
    return v


def check_generator(rng: Any) -> np.random.Generator:
    """Randomness must be an explicit ``numpy.random.Generator`` (never the global numpy state)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"`rng` must be a numpy.random.Generator (e.g. numpy.random.default_rng()), "
            f"got {type(rng).__name__}"
        )
    return rng


def check_levels(levels: Any, name: str = "q") -> tuple[float, ...]:
    """Quantile levels: a non-empty, strictly increasing sequence in [0, 1]."""
    try:
        arr = np.atleast_1d(np.asarray(levels, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be numbers in [0, 1], got {levels!r}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a number or a 1-D sequence in [0, 1], got {levels!r}")
    if not (np.isfinite(arr).all() and (arr >= 0).all() and (arr <= 1).all()):
        raise ValueError(f"`{name}` must lie in [0, 1], got {levels!r}")
    if (np.diff(arr) <= 0).any():
        raise ValueError(f"`{name}` must be strictly increasing, got {levels!r}")
    return tuple(float(v) for v in arr)
