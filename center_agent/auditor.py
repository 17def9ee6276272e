"""The release auditor: no sequence of K-anonymous tables may isolate fewer than K records.

Two tables over the same variable with different limits can be subtracted: with limits {0, 10, 20}
and {0, 12, 20}, the counts in (10, 12] follow from the first cells of both. So the unit that must
be K-anonymous is a cell of the *common refinement*: the bins cut by every limit ever released for
that variable plus the new ones. :meth:`Auditor.check_table` refuses a new table
(:class:`DifferencingRefusal`, HTTP 409) when any refinement cell would hold 1..K-1 records of any
group; :meth:`Auditor.record_table` remembers an accepted table's limits.
:meth:`Auditor.admit_table` does both in one transaction under the dataset's lock, so two
concurrent releases cannot each pass against the other's absence.

A refinement (the new center's half of adding a center) releases run totals, not one count per
bin: each group's bins are grouped into runs (``labels``: the run of each bin) and only the run
totals are released. The unit that must be K-anonymous is then an *atom*: the set of records that
fall in the same released set of every release (the same bin of a plain table, the same run of a
refinement). For plain tables the atoms are exactly the cells of the common refinement.

Cells are right-closed, as in the binning core: ``(c_{j-1}, c_j]``, plus ``(-inf, c_0]`` and
``(c_B, +inf)``. Limits released under any grouping of the same (dataset, variable) are combined:
the refinement a table creates does not care how its counts were split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sqlalchemy import Connection, select

from center_agent.core.errors import DifferencingRefusal, UnknownDataset
from center_agent.db import Store, UnknownLedgerDataset, released_limits

NO_GROUPING = "(none)"


def _as_limits(limits: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(limits, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"`limits` must be one-dimensional, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError("`limits` must not contain NaN")
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        raise ValueError("`limits` must be strictly increasing")
    return arr


def refinement_counts(
    edges: NDArray[np.float64], values: ArrayLike
) -> NDArray[np.int64]:
    """Counts of ``values`` in the cells cut by sorted unique ``edges`` (right-closed cells).

    Cell 0 is (-inf, edges[0]], cell i is (edges[i-1], edges[i]], the last is (edges[-1], +inf).
    """
    x = np.asarray(values, dtype=np.float64)
    cells = np.searchsorted(edges, x, side="left")
    return np.bincount(cells, minlength=edges.size + 1).astype(np.int64)


Labels = Mapping[str, ArrayLike]
"""Per group, the released set (run) of each bin of a release; absent: each bin on its own."""


def small_cells(
    limit_sets: Sequence[ArrayLike],
    values_by_group: Mapping[str, ArrayLike],
    k: int,
    label_sets: Sequence[Labels | None] | None = None,
) -> dict[str, NDArray[np.int64]]:
    """Per group, the atoms holding 1..k-1 values (empty when safe).

    An atom is the set of values sharing, in every release, the same released set: the same
    cell cut by that release's limits, or the same run when the release carries ``labels`` for
    the group. Returned are the small atoms' indices: cells of the common refinement when no
    release carries labels, otherwise atoms in an arbitrary but fixed order.

    Every released set is a union of cells of the common refinement (all limits together), so
    the values are counted per cell once, O(n log E), and the atoms are formed from the cells,
    O(E) per release: each cell is classified by one point inside it (its right end; cells are
    right-closed, the last one is open above).
    """
    parts = [_as_limits(lim) for lim in limit_sets]
    labels = list(label_sets) if label_sets is not None else [None] * len(parts)
    edges = np.unique(np.concatenate(parts)) if parts else np.empty(0)
    plain = all(lab is None for lab in labels)
    beyond = np.nextafter(edges[-1], np.inf) if edges.size else 0.0
    probe = np.append(edges, beyond)  # one point in each cell
    found: dict[str, NDArray[np.int64]] = {}
    for group, values in values_by_group.items():
        counts = refinement_counts(edges, values)
        if not plain:
            key = np.zeros(probe.size, dtype=np.int64)
            for lim, lab in zip(parts, labels, strict=True):
                if lab is not None and group in lab:
                    # Runs are over the release's bins (c_j, c_{j+1}]; extremes are open.
                    run_of_bin = np.asarray(lab[group], dtype=np.int64)
                    released_set = run_of_bin[np.searchsorted(lim[1:-1], probe, side="left")]
                else:
                    released_set = np.searchsorted(lim, probe, side="left")
                # Re-compact after each release so the combined key never overflows.
                _, key = np.unique(
                    key * (int(released_set.max(initial=0)) + 1) + released_set,
                    return_inverse=True,
                )
            counts = np.bincount(key, weights=counts).astype(np.int64)
        bad = np.flatnonzero((counts >= 1) & (counts < k))
        if bad.size:
            found[group] = bad.astype(np.int64)
    return found


def _limits_hash(limits: NDArray[np.float64], labels: str | None = None) -> str:
    doc = json.dumps([float(v) for v in limits]) + (labels or "")
    return hashlib.sha256(doc.encode()).hexdigest()


class Auditor:
    """Remembers released limits per (dataset, variable, grouping) in the ledger's database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def check_table(
        self,
        dataset: str,
        variable: str,
        grouping: str | None,
        limits: ArrayLike,
        values_by_group: Mapping[str, ArrayLike],
        k: int,
        labels: Labels | None = None,
    ) -> None:
        """Raise :class:`DifferencingRefusal` if releasing ``limits`` would isolate < k records.

        ``values_by_group`` holds the center's values per group the table counts (for an
        ungrouped table, ``{"all": values}``); ``grouping`` names the group column or is ``None``.
        """
        with self._locked(dataset) as conn:
            self._check(conn, dataset, variable, limits, values_by_group, k, labels)

    def record_table(
        self,
        dataset: str,
        variable: str,
        grouping: str | None,
        limits: ArrayLike,
        labels: Labels | None = None,
    ) -> None:
        """Remember an accepted release's limits (idempotent)."""
        with self._locked(dataset) as conn:
            self._record(conn, dataset, variable, grouping, _as_limits(limits), labels)

    def admit_table(
        self,
        dataset: str,
        variable: str,
        grouping: str | None,
        limits: ArrayLike,
        values_by_group: Mapping[str, ArrayLike],
        k: int,
        labels: Labels | None = None,
    ) -> None:
        """Check and, if accepted, record in one locked transaction (what an endpoint calls).

        ``labels`` (a refinement's runs per group) says which bins were released together.
        """
        arr = _as_limits(limits)
        with self._locked(dataset) as conn:
            self._check(conn, dataset, variable, arr, values_by_group, k, labels)
            self._record(conn, dataset, variable, grouping, arr, labels)

    def released(self, dataset: str, variable: str) -> list[NDArray[np.float64]]:
        """Every limit set released so far for (dataset, variable), any grouping."""
        with self.store.engine.connect() as conn:
            return [lim for lim, _ in self._released(conn, dataset, variable)]

    # -- internals ------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, dataset: str) -> Iterator[Connection]:
        try:
            with self.store.locked(dataset) as (conn, _total, _spent):
                yield conn
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

    @staticmethod
    def _released(
        conn: Connection, dataset: str, variable: str
    ) -> list[tuple[NDArray[np.float64], Labels | None]]:
        rows = conn.execute(
            select(released_limits.c.limits, released_limits.c.labels).where(
                released_limits.c.dataset == dataset, released_limits.c.variable == variable
            )
        ).all()
        return [
            (
                np.asarray(json.loads(row.limits), dtype=np.float64),
                json.loads(row.labels) if row.labels is not None else None,
            )
            for row in rows
        ]

    def _check(
        self,
        conn: Connection,
        dataset: str,
        variable: str,
        limits: ArrayLike,
        values_by_group: Mapping[str, ArrayLike],
        k: int,
        labels: Labels | None = None,
    ) -> None:
        before = self._released(conn, dataset, variable)
        limit_sets = [*(lim for lim, _ in before), _as_limits(limits)]
        label_sets = [*(lab for _, lab in before), labels]
        bad = small_cells(limit_sets, values_by_group, k, label_sets)
        if bad:
            groups = ", ".join(sorted(bad))
            raise DifferencingRefusal(
                f"releasing these limits for {dataset!r}/{variable!r} together with the "
                f"{len(limit_sets) - 1} table(s) released before would leave a cell with fewer "
                f"than K={k} records (group(s): {groups})",
                extra={"reason": "small_refinement_cell", "previous_tables": len(limit_sets) - 1},
            )

    @staticmethod
    def _record(
        conn: Connection,
        dataset: str,
        variable: str,
        grouping: str | None,
        limits: NDArray[np.float64],
        labels: Labels | None = None,
    ) -> None:
        grouping_name = grouping or NO_GROUPING
        stored_labels = (
            None
            if labels is None
            else json.dumps({g: [int(v) for v in np.asarray(lab)] for g, lab in labels.items()},
                            sort_keys=True)
        )
        digest = _limits_hash(limits, stored_labels)
        exists = conn.execute(
            select(released_limits.c.id).where(
                released_limits.c.dataset == dataset,
                released_limits.c.variable == variable,
                released_limits.c.grouping == grouping_name,
                released_limits.c.limits_hash == digest,
            )
        ).first()
        if exists is None:
            conn.execute(
                released_limits.insert().values(
                    dataset=dataset,
                    variable=variable,
                    grouping=grouping_name,
                    limits_hash=digest,
                    limits=json.dumps([float(v) for v in limits]),
                    labels=stored_labels,
                )
            )
