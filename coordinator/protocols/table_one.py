"""One consistent ε-DP Table 1 (docs/methods.md, "One consistent DP Table 1"): one size per
center and arm shared by every row, every overall the sum of its arms, every pooled number the
sum of its centers'. Post-processing of the releases the Table 1 makes anyway (each described
variable's noisy (present, missing) counts and each categorical variable's noisy cells, all of
the same records): nothing more is asked of a center and no ε is spent.

Per center and arm, N̂ combines every release's total (``shared.consistency.combined_total``)
and is shown rounded; each numeric variable's (present, missing) is the nearest nonnegative
integer pair adding up to it (``shared.consistency.projected``), as are each categorical
variable's cells (``coordinator.protocols.categorical.shown_counts``). A center's overall and
the pooled rows add the shown numbers, so n + missing is the same N in every row of a column.
The rows' other statistics (mean, SD, quartiles, the shares' intervals) are read from their own
release as before. Each shown count's 95 % interval is that of the linear estimate it rounds
(its noise an exact linear function of the released draws, ``shared.consistency.Linear``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.models import ArmSize, DescribeRow
from coordinator.protocols.categorical import FederatedCounts
from coordinator.protocols.describe import ALL, POOLED, FederatedDescribe
from shared.consistency import Linear, NoisyCounts, adjusted, combined_total, projected, shown_total


@dataclass(frozen=True)
class Shown:
    """A count as shown and the linear estimate its interval is read from."""

    value: int
    estimate: Linear

    def __add__(self, other: Shown) -> Shown:
        return Shown(self.value + other.value, self.estimate + other.estimate)


def _interval(shown: Shown, variances: Mapping[Any, float]) -> tuple[float, float] | None:
    """The 95 % interval of the count's linear estimate (None: exact, no noise)."""
    if not shown.estimate.coefficients:
        return None
    t = shown.estimate.halfwidth(variances)
    v = shown.estimate.value
    return (max(0.0, v - t), max(0.0, v + t))


@dataclass(frozen=True)
class ArmSizes:
    """The one size per center and arm (``sizes[center][g]``, arms in the study's order)."""

    arms: tuple[str, ...]
    sizes: dict[str, list[Shown]]
    variances: dict[Hashable, float]

    def shown(self) -> dict[str, list[int]]:
        return {c: [s.value for s in arms] for c, arms in self.sizes.items()}

    def columns(self) -> dict[tuple[str, str], Shown]:
        """Every column's N: each center's arms and overall, the pooled arms and overall."""
        out: dict[tuple[str, str], Shown] = {}
        for c, arms in self.sizes.items():
            for arm, s in zip(self.arms, arms, strict=True):
                out[(c, arm)] = s
            if len(self.arms) > 1:
                out[(c, ALL)] = _sum(arms)
        for g, arm in enumerate(self.arms):
            out[(POOLED, arm)] = _sum([arms[g] for arms in self.sizes.values()])
        if len(self.arms) > 1:
            out[(POOLED, ALL)] = _sum([s for arms in self.sizes.values() for s in arms])
        return out

    def rows(self) -> list[ArmSize]:
        return [ArmSize(center=c, arm=a, n=s.value, n_interval=_interval(s, self.variances))
                for (c, a), s in self.columns().items()]


def _sum(parts: Sequence[Shown]) -> Shown:
    out = Shown(0, Linear(0.0))
    for p in parts:
        out = out + p
    return out


def _categorical_parts(fed: FederatedCounts) -> dict[tuple[str, str], NoisyCounts]:
    if fed.variances is None:
        return {}
    out = {}
    for c, counts in fed.counts.items():
        for g, arm in enumerate(fed.arms):
            variance = float(fed.variances[c][g][0])
            if variance > 0:
                out[(c, arm)] = NoisyCounts(
                    tuple(("categorical", fed.variable, c, arm, j) for j in range(len(fed.cells))),
                    tuple(float(x) for x in counts[g]), variance)
    return out


def arm_sizes(described: FederatedDescribe, categorical: Sequence[FederatedCounts],
              arms: Sequence[str], centers: Sequence[str]) -> ArmSizes | None:
    """N̂ per center (``centers``: the numeric rows') and arm from every DP release of the
    Table 1 (module docstring); None when a center released no noisy count of an arm (a
    table Table 1)."""
    parts: dict[tuple[str, str], list[NoisyCounts]] = {}
    for (_, c, arm), counts in described.releases.items():
        parts.setdefault((c, arm), []).append(counts)
    for fed in categorical:
        for key, counts in _categorical_parts(fed).items():
            parts.setdefault(key, []).append(counts)
    if not parts:
        return None
    variances = {k: p.variance for found in parts.values() for p in found for k in p.keys}
    if not all((c, arm) in parts for c in centers for arm in arms):
        return None  # a center released no noisy count of an arm: nothing to make consistent
    sizes = {c: [Shown(shown_total(t), t) for t in
                 (combined_total(parts[(c, arm)]) for arm in arms)] for c in centers}
    return ArmSizes(tuple(arms), sizes, variances)


def _variable_counts(described: FederatedDescribe, sizes: ArmSizes, variable: str, center: str,
                     g: int, exact_missing: int | None) -> tuple[Shown, Shown | None]:
    """(present, missing) of ``variable`` in one center's arm g, adding up to its size."""
    arm = sizes.arms[g]
    size = sizes.sizes[center][g]
    part = described.releases.get((variable, center, arm))
    if part is not None and len(part.counts) == 2:
        present, missing = (int(x) for x in projected(part.counts, size.value))
        estimate = adjusted(part, size.estimate, 1)
        return (Shown(present, size.estimate - estimate), Shown(missing, estimate))
    if exact_missing is not None:  # an exact missing count (a center of an older version)
        m = min(exact_missing, size.value)
        return Shown(size.value - m, size.estimate - Linear(float(m))), Shown(m, Linear(float(m)))
    return size, None  # complete cases: every record of the arm has the variable


def consistent_rows(rows: Sequence[DescribeRow], described: FederatedDescribe,
                    sizes: ArmSizes,
                    exact_missing: Mapping[tuple[str, str, str], int | None]) -> list[DescribeRow]:
    """``rows`` with their n and missing (and their intervals) made consistent with ``sizes``
    (module docstring); a row of a center without a size is kept as it is."""
    shown: dict[tuple[str, str, str], tuple[Shown, Shown | None]] = {}
    variables = dict.fromkeys(r.variable for r in rows)
    for v in variables:
        for c in sizes.sizes:
            for g, arm in enumerate(sizes.arms):
                shown[(v, c, arm)] = _variable_counts(described, sizes, v, c, g,
                                                      exact_missing.get((v, c, arm)))

    def total(keys: list[tuple[str, str, str]]) -> tuple[Shown, Shown | None]:
        found = [shown[k] for k in keys]
        missing = (None if any(m is None for _, m in found)
                   else _sum([m for _, m in found if m is not None]))
        return _sum([n for n, _ in found]), missing

    for v in variables:
        for c in sizes.sizes:
            if len(sizes.arms) > 1:
                shown[(v, c, ALL)] = total([(v, c, a) for a in sizes.arms])
        for arm in sizes.arms:
            shown[(v, POOLED, arm)] = total([(v, c, arm) for c in sizes.sizes])
        if len(sizes.arms) > 1:
            shown[(v, POOLED, ALL)] = total([(v, c, a) for c in sizes.sizes for a in sizes.arms])
    out = []
    for r in rows:
        found = shown.get((r.variable, r.center, r.arm))
        if found is None:
            out.append(r)
            continue
        n, m = found
        out.append(r.model_copy(update={
            "n": n.value, "n_interval": _interval(n, sizes.variances),
            "missing": None if m is None else m.value,
            "missing_interval": None if m is None else _interval(m, sizes.variances)}))
    return out
