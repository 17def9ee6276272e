"""Sizes first: ask every center what it holds, in parallel, before any release is requested."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coordinator.core.errors import CenterFailure, TooFewCenters
from coordinator.ports import CenterPort
from coordinator.protocols.parallel import ask_all
from shared.protocol import CenterInfo
from shared.wire import CenterErrorCode


@dataclass(frozen=True)
class Survey:
    """Who can take part, how large each center is, and who was left out (and why).

    ``declared[c][g]`` is the size center ``c`` declared for group ``g`` (its population's size,
    rounded down to the center's K) and ``bounds[c][g]`` the most records it can hold there
    (the truth lies below ``declared + K``): a release totalling less or more is implausible.
    ``keys[c]`` is the public key the center signs its table statements with, ``epochs[c]``
    the data version (epoch) of the dataset its releases come from.
    """

    usable: tuple[CenterPort, ...]
    sizes: dict[str, int]
    bounds: dict[str, tuple[int, ...]]
    excluded: tuple[CenterFailure, ...]
    declared: dict[str, tuple[int, ...]] = field(default_factory=dict)
    keys: dict[str, str | None] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    present: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """``present[c][v][level]``: the records of the level holding ``v`` (rounded down to K),
    from a center whose releases count each variable's present records (``n_by_variable``:
    ``missing = "per_variable"``)."""
    groups: tuple[str, ...] | None = None
    dp_mode: frozenset[str] = frozenset()
    """The centers releasing the dataset in DP mode (``release_mode = "dp"``): they refuse every
    exact kind before reading anything, so an optional exact request is not sent to them."""

    def floors(self, center: str, variable: str) -> tuple[int, ...] | None:
        """The fewest records a release of ``variable`` at ``center`` counts per group asked:
        the declared sizes, or where the center counts each variable's present records, the
        variable's (a table of a variable missing on some records totals fewer)."""
        declared = self.declared.get(center)
        per_level = self.present.get(center, {}).get(variable)
        if declared is None or per_level is None:
            return declared
        if self.groups is None:
            return (sum(per_level.values()),)
        return tuple(per_level.get(level, 0) for level in self.groups)


def _check(
    center_id: str,
    info: CenterInfo,
    dataset: str,
    variable: str,
    groups: tuple[str, ...] | None,
    k: int | None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The center's declared sizes of the groups asked and the most records each can hold.

    What the center would refuse is refused here, from its ``/v1/info``, with the code the center
    would answer (its error classes': one vocabulary), so no release is asked in vain."""
    if info.k < 2:
        raise CenterFailure(center_id, "implausible", f"declares K = {info.k}")
    if k is not None and k < info.k:
        raise CenterFailure(center_id, "refused",
                            f"releases only with K >= {info.k}; the study asks K = {k}",
                            center_error=CenterErrorCode.K_ANONYMITY_REFUSED)
    found = next((d for d in info.datasets if d.name == dataset), None)
    if found is None:
        raise CenterFailure(center_id, "error", f"exposes no dataset named {dataset!r}",
                            center_error=CenterErrorCode.UNKNOWN_DATASET)
    if variable not in found.variables:
        raise CenterFailure(center_id, "error",
                            f"dataset {dataset!r} exposes no variable {variable!r}",
                            center_error=CenterErrorCode.UNKNOWN_VARIABLE)
    # DP mode without a declared size (docs/privacy.md, "DP mode"): no public size, taken as 0.
    # Its DP releases need none (they are answered on any number of records, none included),
    # and every exact release, the only ones these sizes bound, is refused by the center itself
    # (and by the plan, ``coordinator.plan``), so the center takes part in DP analyses.
    n_records = found.n_records if found.n_records is not None else 0
    if n_records < 0 or any(n < 0 for n in found.n_by_group.values()):
        raise CenterFailure(center_id, "implausible", f"declares a negative size of {dataset!r}")
    slack = info.k - 1
    if groups is None:
        return (n_records,), (n_records + slack,)
    declared = found.group.levels if found.group is not None else []
    missing = [level for level in groups if level not in declared]
    if missing:
        raise CenterFailure(center_id, "error",
                            f"dataset {dataset!r} declares no group level {missing[0]!r}",
                            center_error=CenterErrorCode.UNKNOWN_LEVEL)
    per_group = tuple(found.n_by_group.get(level, 0) for level in groups)
    return per_group, tuple(n + slack for n in per_group)


def require(needed: int, usable: Sequence[str], failures: Sequence[CenterFailure]) -> None:
    """Raise :class:`TooFewCenters` unless ``needed`` centers remain."""
    if len(usable) < needed:
        raise TooFewCenters(needed, list(usable), list(failures))


async def survey_centers(
    centers: Sequence[CenterPort],
    *,
    dataset: str,
    variable: str,
    groups: tuple[str, ...] | None = None,
    k: int | None = None,
    min_centers: int = 1,
    allow_partial: bool = False,
) -> Survey:
    """Every center's info in parallel, checked against the study.

    With ``k``, a center whose own K is larger is refused here (it would refuse every release).

    Without ``allow_partial`` the first failing center (in the given order) is raised; with it,
    failing centers are left out and recorded.
    """
    declared: dict[str, tuple[int, ...]] = {}
    bounds: dict[str, tuple[int, ...]] = {}
    epochs: dict[str, int] = {}

    present: dict[str, dict[str, dict[str, int]]] = {}
    dp_mode: set[str] = set()

    def check(cid: str, info: CenterInfo) -> None:
        declared[cid], bounds[cid] = _check(cid, info, dataset, variable, groups, k)
        found = next(d for d in info.datasets if d.name == dataset)
        epochs[cid] = found.epoch
        if found.release_mode == "dp":
            dp_mode.add(cid)
        if found.n_by_variable:
            present[cid] = {v: dict(levels) for v, levels in found.n_by_variable.items()}

    infos, failures = await ask_all(centers, lambda c: c.info(), check,
                                    allow_partial=allow_partial)
    usable = tuple(port for port in centers if port.center_id in infos)
    require(min_centers, list(infos), failures)
    return Survey(usable, {cid: sum(declared[cid]) for cid in infos}, bounds, tuple(failures),
                  declared, {cid: info.signing_key for cid, info in infos.items()},
                  {cid: epochs[cid] for cid in infos},
                  {cid: present[cid] for cid in infos if cid in present},
                  tuple(groups) if groups is not None else None,
                  frozenset(dp_mode & set(infos)))
