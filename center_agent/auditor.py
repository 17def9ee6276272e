"""The release auditor: no sequence of K-anonymous tables may isolate fewer than K records.

Two tables over the same variable with different limits can be subtracted: with limits {0, 10, 20}
and {0, 12, 20}, the counts in (10, 12] follow from the first cells of both. So the unit that must
be K-anonymous is a cell of the *common refinement*: the bins cut by every limit ever released for
that variable plus the new ones. :meth:`Auditor.check_table` refuses a new table
(:class:`DifferencingRefusal`, HTTP 409) when any refinement cell would hold 1..K-1 records of any
group; :meth:`Auditor.record_table` remembers an accepted table's limits.
:meth:`Auditor.admit_table` does both in one transaction under the dataset's lock, so two
concurrent releases cannot each pass against the other's absence.

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


def small_cells(
    limit_sets: Sequence[ArrayLike], values_by_group: Mapping[str, ArrayLike], k: int
) -> dict[str, NDArray[np.int64]]:
    """Per group, the indices of refinement cells holding 1..k-1 values (empty when safe)."""
    parts = [_as_limits(lim) for lim in limit_sets]
    edges = np.unique(np.concatenate(parts)) if parts else np.empty(0)
    found: dict[str, NDArray[np.int64]] = {}
    for group, values in values_by_group.items():
        counts = refinement_counts(edges, values)
        bad = np.flatnonzero((counts >= 1) & (counts < k))
        if bad.size:
            found[group] = bad.astype(np.int64)
    return found


def _limits_hash(limits: NDArray[np.float64]) -> str:
    return hashlib.sha256(json.dumps([float(v) for v in limits]).encode()).hexdigest()


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
    ) -> None:
        """Raise :class:`DifferencingRefusal` if releasing ``limits`` would isolate < k records.

        ``values_by_group`` holds the center's values per group the table counts (for an
        ungrouped table, ``{"all": values}``); ``grouping`` names the group column or is ``None``.
        """
        with self._locked(dataset) as conn:
            self._check(conn, dataset, variable, limits, values_by_group, k)

    def record_table(
        self, dataset: str, variable: str, grouping: str | None, limits: ArrayLike
    ) -> None:
        """Remember an accepted release's limits (idempotent)."""
        with self._locked(dataset) as conn:
            self._record(conn, dataset, variable, grouping, _as_limits(limits))

    def admit_table(
        self,
        dataset: str,
        variable: str,
        grouping: str | None,
        limits: ArrayLike,
        values_by_group: Mapping[str, ArrayLike],
        k: int,
    ) -> None:
        """Check and, if accepted, record in one locked transaction (what an endpoint calls)."""
        arr = _as_limits(limits)
        with self._locked(dataset) as conn:
            self._check(conn, dataset, variable, arr, values_by_group, k)
            self._record(conn, dataset, variable, grouping, arr)

    def released(self, dataset: str, variable: str) -> list[NDArray[np.float64]]:
        """Every limit set released so far for (dataset, variable), any grouping."""
        with self.store.engine.connect() as conn:
            return self._released(conn, dataset, variable)

    # -- internals ------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, dataset: str) -> Iterator[Connection]:
        try:
            with self.store.locked(dataset) as (conn, _total, _spent):
                yield conn
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

    @staticmethod
    def _released(conn: Connection, dataset: str, variable: str) -> list[NDArray[np.float64]]:
        rows = conn.execute(
            select(released_limits.c.limits).where(
                released_limits.c.dataset == dataset, released_limits.c.variable == variable
            )
        ).all()
        return [np.asarray(json.loads(row.limits), dtype=np.float64) for row in rows]

    def _check(
        self,
        conn: Connection,
        dataset: str,
        variable: str,
        limits: ArrayLike,
        values_by_group: Mapping[str, ArrayLike],
        k: int,
    ) -> None:
        limit_sets = [*self._released(conn, dataset, variable), _as_limits(limits)]
        bad = small_cells(limit_sets, values_by_group, k)
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
    ) -> None:
        grouping_name = grouping or NO_GROUPING
        digest = _limits_hash(limits)
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
                )
            )

