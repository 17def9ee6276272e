"""The DP twin of the federated Mann-Whitney tests: each center's ε-DP release under add/remove
(``POST .../dp/mwu``, ``shared.dp.mwu``), asked in parallel and checked, and the sum, weighted
and Fisher tests of ``shared.mwu`` over them (each center's part: Ũ, the no-ties V̂ of its kept
sizes' estimates, the Laplace(2M/ε₂) noise law; p-values from the exact law of normal + the
noises). No table test: it needs the K-anonymous table a DP-mode center does not release.

A release is implausible (the center is named, ``implausible``) unless it could come from a
center asked for this ε and split: ε, ε₁ and ε₂ those asked, the cap M the one its noisy sizes
and margin give (``shared.dp.mwu.noise_cap``), the noise on U Laplace(2M/ε₂).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.core.errors import CenterFailure
from coordinator.models import DP_MWU_TESTS, DPMWUTest
from coordinator.ports import CenterPort
from coordinator.protocols.mwu import LOCAL_TESTS
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require, survey_centers
from shared import kinds
from shared.dp.mwu import noise_cap
from shared.mwu import Alternative, FederatedMWUResult
from shared.protocol import RELEASE_RTOL, DPMWURelease, DPMWURequest


@dataclass(frozen=True)
class FederatedDPMWU:
    """The requested tests; ``centers`` orders their parts, ``releases`` holds what each
    center released."""

    tests: dict[str, FederatedMWUResult]
    centers: tuple[str, ...]
    releases: dict[str, DPMWURelease]
    excluded: tuple[CenterFailure, ...]


def check_dp_mwu_release(center: str, release: DPMWURelease, asked: DPMWURequest) -> None:
    """Raise ``implausible`` unless the release's ε, split, cap and noise are those ``asked``
    implies (module docstring)."""
    def implausible(detail: str) -> CenterFailure:
        return CenterFailure(center, "implausible", detail)

    eps1, eps2 = asked.epsilon * asked.size_share, asked.epsilon * (1.0 - asked.size_share)
    for name, got, want in (("ε", release.epsilon, asked.epsilon),
                            ("ε₁ (sizes)", release.size_epsilon, eps1),
                            ("ε₂ (U)", release.u_epsilon, eps2)):
        if not math.isclose(got, want, rel_tol=RELEASE_RTOL):
            raise implausible(f"reports {name} = {got:g}, {want:g} was asked")
    cap = noise_cap(release.n_x_hat, release.n_y_hat, release.size_epsilon, release.margin)
    if release.cap != cap:
        raise implausible(f"its cap M = {release.cap} is not the {cap} its noisy sizes and "
                          f"margin give")
    scale = 2.0 * release.cap / release.u_epsilon
    if release.noise.kind != "laplace" or not math.isclose(release.noise.scale, scale,
                                                           rel_tol=RELEASE_RTOL):
        raise implausible(f"the noise is not the Laplace({scale:g}) that M = {release.cap} and "
                          f"ε₂ = {release.u_epsilon:g} imply")


async def federated_dp_mwu(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, str],
    epsilon: float,
    size_share: float,
    k: int = 10,
    tests: Sequence[DPMWUTest] = DP_MWU_TESTS,
    alternative: Alternative = "two-sided",
    min_centers: int = 1,
    allow_partial: bool = False,
    survey: Survey | None = None,
) -> FederatedDPMWU:
    """The DP twin's tests of level ``groups[0]`` (X) against ``groups[1]`` (Y): every center
    spends ``epsilon`` (``size_share`` of it on its noisy sizes)."""
    unknown = [t for t in tests if t not in DP_MWU_TESTS]
    if unknown or not tests:
        raise ValueError(f"`tests` must be a non-empty subset of {set(DP_MWU_TESTS)}, "
                         f"got {tests!r}")
    if survey is None:
        survey = await survey_centers(
            centers, dataset=dataset, variable=variable, groups=groups, k=k,
            min_centers=min_centers, allow_partial=allow_partial)
    request = DPMWURequest(variable=variable, groups=groups, epsilon=epsilon,
                           size_share=size_share)
    releases, failures = await ask_all(
        survey.usable, lambda p: p.release(kinds.DP_MWU, dataset, request),
        lambda c, r: check_dp_mwu_release(c, r, request), allow_partial=allow_partial)
    excluded = [*survey.excluded, *failures]
    require(max(1, min_centers), list(releases), excluded)
    parts = [r.to_result(alternative) for r in releases.values()]
    results: dict[str, FederatedMWUResult] = {
        name: LOCAL_TESTS[name](parts, alternative=alternative) for name in tests}
    return FederatedDPMWU(results, tuple(releases), releases, tuple(excluded))
