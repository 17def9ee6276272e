"""The DP twin of the Mann-Whitney tests, for centers in DP mode: its spec, what each center
released and its result (docs/methods.md §3.10)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from coordinator.models._base import _AnalysisSpec, _Result
from coordinator.models.mwu import MWUResult
from shared.fields import MIN_EPSILON, Alternative, Distinct, epsilon_field

# The DP twin's tests: every local one (the table test needs the K-anonymous table).
DPMWUTest = Literal["sum", "weighted", "fisher"]


DP_MWU_TESTS: tuple[DPMWUTest, ...] = ("sum", "weighted", "fisher")


class DPMWUAnalysis(_AnalysisSpec):
    """The differentially private twin of the Mann-Whitney tests (needs ``groups``): each
    center's ε-DP release under add/remove (noisy sizes, U over at most M records per level
    plus Laplace noise: docs/methods.md §3.10), the sum, weighted and Fisher tests over them.
    Centers in DP mode answer it."""

    kind: Literal["dp_mwu"]
    min_groups = 2
    tests: Annotated[list[DPMWUTest], Distinct] = Field(
        default_factory=lambda: list(DP_MWU_TESTS), min_length=1, max_length=3)
    alternative: Alternative = "two-sided"
    # Each part of the split is a release's ε on its own (shared.protocol.DPMWURequest).
    epsilon: Annotated[float, epsilon_field(100 * MIN_EPSILON)] = Field(
        description="ε each center spends (its sizes and its U together)")
    # shared.dp.mwu.SIZE_SHARE (not imported: the models stay light).
    size_share: float = Field(
        default=0.2, ge=0.01, le=0.99, allow_inf_nan=False,
        description="the share of ε spent on the two noisy sizes (the rest noises U)")


class DPMWUCenter(_Result):
    """What one center released for the DP twin of the Mann-Whitney tests
    (``shared.dp.mwu``): the noisy sizes, the public cap M, the ε split, the Laplace noise's
    scale on U, and the kept sizes' estimates the tests used."""

    center: str
    n_x_hat: float = Field(description="n_X + Laplace(1/ε₁), unrounded")
    n_y_hat: float = Field(description="n_Y + Laplace(1/ε₁), unrounded")
    cap: int = Field(description="M: at most M records of each level enter U")
    epsilon: float
    size_epsilon: float
    u_epsilon: float
    noise_scale: float = Field(description="the Laplace scale 2M/ε₂ of the noise on U")
    n_x: int = Field(description="the estimate of X's kept size the tests used")
    n_y: int = Field(description="the estimate of Y's kept size the tests used")


class DPMWUResult(MWUResult):
    """The DP twin's tests, effects and heterogeneity, read as an ``mwu`` result's (no table);
    ``releases``: what each center released."""

    kind: Literal["dp_mwu"] = "dp_mwu"  # type: ignore[assignment]
    releases: list[DPMWUCenter] = Field(default_factory=list)
