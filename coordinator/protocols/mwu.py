"""Federated Mann-Whitney U: the four tests of ``shared.mwu`` with the per-center parts.

* sum, weighted, Fisher — from the centers' local releases (U_l, V_l, n_l, m_l, σ_l² and the
  law of the noise), asked of every center in parallel (``POST .../mwu``); with noise each test
  refers its statistic to the exact law of normal + the centers' noise (``shared.mwu``); a
  center with n + m <= 50 has its p-value from U's exact law (docs/methods.md §3.1): the law
  its release determines (no ties, or noise), or, with ties, the two exact tails at U the
  center computed and released; each result names its law (``null``);
* table — U on the federated bin table of the two groups
  (:func:`coordinator.protocols.table.federated_bin_table`).

A local release is checked before it is used (``implausible`` otherwise): group sizes 0 or >= K
and within the center's declared sizes, V no larger than its no-tie maximum n·m·(N+1)/3, the noise
variance that of the stated noise law (a release with σ² > 0 states its law, one without noise
states none), the noise the one asked (Laplace(2·max(n, m)/ε) with ε, none without) and, for a
release without noise, |U| <= n·m, and released exact tails possible (``check_exact_tails``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from coordinator.core.errors import CenterFailure
from coordinator.models import MWU_TESTS, MWUTest
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from coordinator.protocols.survey import Survey, require, survey_centers
from coordinator.protocols.table import FederatedTable, federated_bin_table, isolates
from shared import kinds
from shared.binning import Extreme
from shared.mwu import (
    Alternative,
    FederatedMWUResult,
    check_exact_tails,
    fisher_test,
    sum_test,
    table_test,
    weighted_test,
)
from shared.protocol import RELEASE_RTOL, MWURelease, MWURequest
from shared.releases import mwu_sensitivity

LocalTest = Callable[..., FederatedMWUResult]
LOCAL_TESTS: dict[str, LocalTest] = {
    "sum": sum_test,
    "weighted": weighted_test,
    "fisher": fisher_test,
}


@dataclass(frozen=True)
class FederatedMWU:
    """The requested tests; ``centers`` orders the parts of the local tests (sum, weighted,
    Fisher) and ``releases`` holds what each center released; ``table`` is the federated table
    behind the table test."""

    tests: dict[str, FederatedMWUResult]
    centers: tuple[str, ...]
    releases: dict[str, MWURelease]
    table: FederatedTable | None
    excluded: tuple[CenterFailure, ...]


def check_mwu_release(
    center: str, release: MWURelease, *, k: int, bounds: tuple[int, ...],
    epsilon: float | None = None,
) -> None:
    """Raise ``implausible`` unless the release could come from a center of these sizes that
    was asked for ``epsilon`` (its noise the Laplace noise the request implies, or none)."""
    n, m = release.n_x, release.n_y
    for name, size, bound in (("n_x", n, bounds[0]), ("n_y", m, bounds[1])):
        if isolates(size, k):
            raise CenterFailure(center, "implausible", f"{name}={size} is between 1 and k-1")
        if size > bound:
            raise CenterFailure(center, "implausible",
                                f"{name}={size} exceeds the declared size ({bound})")
    big_n = n + m
    if release.variance > n * m * (big_n + 1) / 3.0 * (1 + RELEASE_RTOL):
        raise CenterFailure(center, "implausible", "variance exceeds n·m·(N+1)/3")
    try:
        release.noise_law()
    except ValueError as err:
        raise CenterFailure(center, "implausible", str(err)) from None
    # A center noising more (or less, or otherwise) than asked would move every p-value.
    if epsilon is None and release.noise is not None:
        raise CenterFailure(center, "implausible", "noise added where none was asked")
    if epsilon is not None:
        scale = mwu_sensitivity(n, m) / epsilon
        if (release.noise is None or release.noise.kind != "laplace"
                or not math.isclose(release.noise.scale, scale, rel_tol=RELEASE_RTOL)):
            raise CenterFailure(center, "implausible",
                                f"the noise is not the Laplace({scale:g}) that ε = {epsilon:g} "
                                f"implies for n = {n}, m = {m}")
    if release.noise_variance == 0 and abs(release.statistic) > n * m * (1 + RELEASE_RTOL):
        raise CenterFailure(center, "implausible", "|U| exceeds n·m for a release without noise")
    if release.exact_log_tails is not None:
        why = ("exact tails beside noise" if release.noise is not None else check_exact_tails(
            release.exact_log_tails, release.statistic, release.variance, n, m))
        if why is not None:
            raise CenterFailure(center, "implausible", why)


async def _local_releases(
    survey: Survey,
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, str],
    k: int,
    epsilon: float | None,
    allow_partial: bool,
) -> tuple[dict[str, MWURelease], list[CenterFailure]]:
    request = MWURequest(variable=variable, groups=groups, epsilon=epsilon)
    return await ask_all(
        survey.usable, lambda p: p.release(kinds.MWU, dataset, request),
        lambda c, r: check_mwu_release(c, r, k=k, bounds=survey.bounds[c], epsilon=epsilon),
        allow_partial=allow_partial,
    )


async def federated_mwu(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, str],
    k: int = 10,
    tests: Sequence[MWUTest] = MWU_TESTS,
    alternative: Alternative = "two-sided",
    epsilon: float | None = None,
    lower: Extreme = "buffer",
    upper: Extreme = "buffer",
    min_centers: int = 1,
    allow_partial: bool = False,
    survey: Survey | None = None,
    table: Awaitable[FederatedTable] | None = None,
) -> FederatedMWU:
    """Federated MWU of level ``groups[0]`` (X) against ``groups[1]`` (Y) of ``variable``.

    With ``epsilon`` every center noises its local U (ε-DP, paid from its budget) and the local
    tests take their p-values from the exact law of normal + Laplace noise (their Z from
    V + σ²); the table test is not affected (a K-anonymous table spends no ε). The
    table test uses ``table`` when given (a study's one federated table of ``variable`` over
    ``groups``, closed by ``lower``/``upper``), else builds it.
    """
    unknown = [t for t in tests if t not in MWU_TESTS]
    if unknown or not tests:
        raise ValueError(f"`tests` must be a non-empty subset of {set(MWU_TESTS)}, got {tests!r}")
    if survey is None:
        survey = await survey_centers(
            centers, dataset=dataset, variable=variable, groups=groups, k=k,
            min_centers=min_centers, allow_partial=allow_partial,
        )
    excluded = list(survey.excluded)
    results: dict[str, FederatedMWUResult] = {}
    releases: dict[str, MWURelease] = {}
    local = [t for t in tests if t in LOCAL_TESTS]
    if local:
        releases, failures = await _local_releases(
            survey, dataset=dataset, variable=variable, groups=groups, k=k, epsilon=epsilon,
            allow_partial=allow_partial,
        )
        excluded.extend(failures)
        require(max(1, min_centers), list(releases), excluded)
        parts = [r.to_result(alternative) for r in releases.values()]
        for name in local:
            results[name] = LOCAL_TESTS[name](parts, alternative=alternative)
    federated: FederatedTable | None = None
    if "table" in tests:
        if table is None:
            table = federated_bin_table(
                centers, dataset=dataset, variable=variable, groups=groups, k=k,
                lower=lower, upper=upper, min_centers=min_centers, allow_partial=allow_partial,
                survey=survey,
            )
        federated = await table
        excluded.extend(f for f in federated.excluded if f not in excluded)
        results["table"] = table_test(federated.table, alternative=alternative)
    ordered: dict[str, FederatedMWUResult] = {name: results[name] for name in tests}
    return FederatedMWU(ordered, tuple(releases), releases, federated, tuple(excluded))
