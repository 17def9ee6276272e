"""The field types every request and study spec speaks, declared once (pydantic ``Annotated``).

A center's wire models (:mod:`shared.protocol`), the coordinator's study spec
(``coordinator.models``) and the CLI's study files (``fedstats_cli.study``, through that spec)
validate ε, public bounds, quantile levels, table extremes and the neighbouring relation with
the same types, so a value one of them accepts is a value the others accept::

    class DPRequest(WireModel):
        epsilon: Epsilon
        bounds: Bounds

    class DPBoxplotAnalysis(Spec):
        epsilon: Annotated[float, epsilon_field(8 * MIN_EPSILON)]   # ε/8 per round >= MIN_EPSILON

Each check raises ``ValueError`` naming the field (pydantic adds where it stands).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from shared._validation import Alternative
from shared.binning import Extreme, ExtremeKind
from shared.privacy import Neighbouring

__all__ = [
    "DP_MAX_EVALUATIONS",
    "MAX_BOUND",
    "MAX_EPSILON",
    "MAX_LEAVES",
    "MAX_LEVELS",
    "MIN_EPSILON",
    "Alternative",
    "Bounds",
    "DPQuantileAlgorithm",
    "Distinct",
    "Epsilon",
    "Extreme",
    "ExtremeKind",
    "FiniteExtreme",
    "Levels",
    "Neighbouring",
    "VariableMeta",
    "check_leaves",
    "check_levels",
    "check_public_bounds",
    "epsilon_field",
]

MIN_EPSILON = 1e-6
"""The smallest ε a request may ask for: below it the noise is a million times the sensitivity
(useless), and far below it ε/2 and friends underflow to 0."""
MAX_EPSILON = 100.0
"""The largest ε a request may ask for (far past any privacy: a typo, not a choice)."""
MAX_BOUND = 1e15
"""The largest magnitude a public bound may have: beyond it, widths, sensitivities and noise
scales of the DP releases overflow or lose every digit of the data."""
MAX_LEVELS = 64
"""The most quantile levels one request may ask for."""
MAX_LEAVES = 2**16
"""The most leaves a tree histogram's grid may have (``branching**depth``)."""
DP_MAX_EVALUATIONS = 24
"""λ evaluations a YJ data fit on ε-DP sums may use: each costs ε / DP_MAX_EVALUATIONS per center,
and with the looser ``shared.quantiles.yj_data.DP_TOL`` Brent needs fewer
(benchmarks/sim_quantiles.py --dp)."""

DPQuantileAlgorithm = Literal["joint_exp", "private_quantile", "approx_quantile", "unbounded"]
"""The ε-DP quantile algorithms a request may name (``shared.dp``)."""


def epsilon_field(minimum: float = MIN_EPSILON, **field: Any) -> Any:
    """The ``Field`` of an ε in [``minimum``, MAX_EPSILON]: a protocol that splits ε in parts
    asks for a larger minimum, so that every part is at least MIN_EPSILON."""
    return Field(ge=minimum, le=MAX_EPSILON, allow_inf_nan=False, **field)


def check_public_bounds(bounds: tuple[float, float], name: str) -> tuple[float, float]:
    """Finite public bounds a < b within ±MAX_BOUND (so every width and scale stays finite)."""
    a, b = bounds
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ValueError(f"{name} must be finite with lower < upper")
    if max(abs(a), abs(b)) > MAX_BOUND:
        raise ValueError(f"{name} must lie within ±{MAX_BOUND:g}")
    return a, b


def check_levels(levels: Sequence[float]) -> list[float]:
    """Quantile levels strictly increasing inside (0, 1)."""
    if not all(0 < q < 1 for q in levels) or any(b <= a for a, b in pairwise(levels)):
        raise ValueError("levels must be strictly increasing and inside (0, 1)")
    return list(levels)


def check_leaves(branching: int, depth: int) -> None:
    """A tree histogram's grid of at most MAX_LEAVES leaves."""
    if branching**depth > MAX_LEAVES:
        raise ValueError(f"branching**depth must be at most {MAX_LEAVES} leaves")


def _distinct(values: Sequence[Any] | None, info: ValidationInfo) -> Sequence[Any] | None:
    if values is not None and len(set(values)) != len(values):
        raise ValueError(f"{info.field_name} must be distinct")
    return values


Distinct = AfterValidator(_distinct)
"""A list field whose items must differ: ``Annotated[list[str], Distinct]``."""


def _bounds(value: tuple[float, float], info: ValidationInfo) -> tuple[float, float]:
    return check_public_bounds(value, info.field_name or "bounds")


def _finite_extreme(value: Extreme) -> Extreme:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a natural limit must be a finite number")
    return value


Epsilon = Annotated[float, epsilon_field()]
"""An ε a single release may spend: [MIN_EPSILON, MAX_EPSILON]."""
Bounds = Annotated[tuple[float, float], AfterValidator(_bounds)]
"""Public bounds (a, b) the data are clipped to, or a public grid: finite, a < b, within
±MAX_BOUND."""
Levels = Annotated[list[float], Field(min_length=1, max_length=MAX_LEVELS),
                   AfterValidator(check_levels)]
"""Quantile levels: 1 to MAX_LEVELS of them, strictly increasing inside (0, 1)."""
FiniteExtreme = Annotated[Extreme, AfterValidator(_finite_extreme)]
"""How a table is closed at one end (:data:`shared.binning.Extreme`), a natural limit finite."""


class VariableMeta(BaseModel):
    """What a center's operator declares public about a variable (``[datasets.X.metadata.v]``):
    bounds the DP algorithms clip to by default, the unit, and the resolution the values are
    recorded at (1 day, 0.1 mmHg), which grid-aware DP quantiles output on. None: undeclared.
    Shown in ``/v1/info`` and the coordinator's catalog."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bounds: tuple[float, float] | None = None
    unit: str | None = Field(default=None, max_length=64)
    resolution: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if self.bounds is not None:
            lo, hi = self.bounds
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError("bounds must be finite with lower < upper")
        if self.resolution is not None and not math.isfinite(self.resolution):
            raise ValueError("resolution must be finite")
        return self


# -- DPBoxplot's versions by name (Ramsay & Diaz-Rodriguez, Differentially Private Boxplots,
# ICML 2025, arXiv 2405.20415; shared.dp.boxplot, docs/methods.md §5.6), and the names results
# carried before, still read (stored studies).

ExtremesWalk = Literal["one_sided", "algorithm_1"]
EXTREMES_WALKS: tuple[ExtremesWalk, ...] = ("one_sided", "algorithm_1")
# The authors' code's extremes walk with the paper's budget split (the default), and the
# paper's Algorithm 1 as written.
METHOD_NAMES: dict[ExtremesWalk, str] = {
    "one_sided": "dpboxplot_one_sided_walk",
    "algorithm_1": "dpboxplot_algorithm_1",
}
# Earlier names, still accepted: the walk's, and the methods results carried (stored studies).
DEPRECATED_WALKS: dict[str, ExtremesWalk] = {"seed": "algorithm_1"}
DEPRECATED_METHODS: dict[str, str] = {
    "dp_boxplot": METHOD_NAMES["one_sided"],
    "dp_boxplot_seed_walk": METHOD_NAMES["algorithm_1"],
}


def canonical_method(name: Any) -> Any:
    """A boxplot's ``method`` by its current name: the deprecated names results carried before
    (``"dp_boxplot"``, ``"dp_boxplot_seed_walk"``) are read as the methods they were; anything
    else is returned as it is (a model's own validation judges it)."""
    return DEPRECATED_METHODS.get(name, name) if isinstance(name, str) else name
