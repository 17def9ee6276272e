"""Federated tables kept for reuse: a later study that needs a table it could only get from the
centers as the same answer again reads it here instead (docs/coordinator.md, "Reused tables").

A federated table is fixed by what it was asked for and by the data it counts: the dataset,
variable, group levels, K, how its ends are closed, the centers that built it and each one's data
version (the epoch its ``/v1/info`` shows; ``center_agent.gate.epochs``). Centers answer the same
question in the same epoch with the stored answer (the release gate's request keys), so a table
kept under that key is exactly the table the centers would give again: reusing it releases
nothing new, spends nothing and needs no round through the centers. The group levels are kept in
one (sorted) order: a study asking (Y, X) reads the (X, Y) table with its rows swapped, and a
study of k arms reads its rows in the order it names them.

A table is not reused across a change of any part of the key. A new epoch at any of its centers,
another center set (``centers``, or a center left out with ``allow_partial``), another K or another
closing asks the centers anew; their disclosure control then coarsens the new table against every
earlier release of the variable (docs/privacy.md §2), and the dry run says so before a study is
submitted (:func:`coordinator.plan.plan_study`).

A reused table is described by what it is (:class:`coordinator.models.ReusedTable`: dataset,
variable, groups, K, closing, centers and their epochs, when it was obtained), never by the study
that obtained it: that study's id (``reused_from``, a kept table's ``study_id``) is another
analyst's, shown only to an admin and to that study's owner (``coordinator.api.access``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from coordinator.db import Store, TableRecord
from coordinator.models import ReusedTable
from coordinator.protocols.table import FederatedTable
from shared.binning import BinTable, Extreme
from shared.protocol import canonical_json


@dataclass(frozen=True)
class TableKey:
    """What fixes a federated table (module docstring). ``epochs`` pairs each center that built
    it with its data version, sorted by center."""

    dataset: str
    variable: str
    groups: tuple[str, ...] | None
    k: int
    lower: Extreme
    upper: Extreme
    epochs: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, *, dataset: str, variable: str, groups: tuple[str, ...] | None, k: int,
           lower: Extreme, upper: Extreme, epochs: Mapping[str, int]) -> TableKey:
        return cls(dataset, variable, groups, k, lower, upper, tuple(sorted(epochs.items())))

    @property
    def swapped(self) -> bool:
        """Whether the groups are asked in another order than the kept table's."""
        return self.rows != tuple(range(len(self.rows)))

    @property
    def rows(self) -> tuple[int, ...]:
        """The kept table's rows as rows of the table asked: kept row i is asked row
        ``rows[i]`` (the groups sorted; one row without groups)."""
        if self.groups is None:
            return (0,)
        groups = self.groups
        return tuple(sorted(range(len(groups)), key=groups.__getitem__))

    @property
    def centers(self) -> list[str]:
        return [c for c, _ in self.epochs]

    def described(self) -> dict[str, Any]:
        """The key as JSON-able values, groups in the kept order."""
        groups = None if self.groups is None else sorted(self.groups)
        return {"dataset": self.dataset, "variable": self.variable, "groups": groups,
                "k": self.k, "lower": self.lower, "upper": self.upper,
                "centers": dict(self.epochs)}

    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.described()).encode()).hexdigest()


@dataclass(frozen=True)
class KeptTable:
    """A kept table as its key describes it, the order its centers built it in (the builder
    first), and the study that obtained it (shown only to an admin and that study's owner:
    :meth:`reused` describes the table without it)."""

    described: dict[str, Any]
    order: tuple[str, ...]
    study_id: str
    created_at: str

    @classmethod
    def of(cls, record: TableRecord) -> KeptTable:
        return cls(json.loads(record.described), tuple(json.loads(record.table)["order"]),
                   record.study_id, record.created_at)

    def reused(self) -> ReusedTable:
        """The table as a study that reads it sees it: what it is, never who obtained it."""
        d = self.described
        return ReusedTable(dataset=d["dataset"], variable=d["variable"], groups=d["groups"],
                           k=d["k"], lower=d["lower"], upper=d["upper"],
                           centers=dict(d["centers"]), obtained_at=self.created_at)


# How a table's rows are reordered: ``True`` swaps two rows, a tuple (``TableKey.rows``) puts
# row ``rows[i]`` at i; ``False`` keeps them.
Rows = bool | tuple[int, ...]


def _kept(values: Any, rows: Rows) -> list[Any]:
    """``values`` (one per row) as kept."""
    values = list(values)
    if isinstance(rows, bool):
        return values[::-1] if rows else values
    return [values[r] for r in rows]


def _asked(values: Any, rows: Rows) -> list[Any]:
    """Kept ``values`` as the table asked has them (the inverse of :func:`_kept`)."""
    values = list(values)
    if isinstance(rows, bool):
        return values[::-1] if rows else values
    out: list[Any] = [None] * len(values)
    for i, r in enumerate(rows):
        out[r] = values[i]
    return out


def encode(table: FederatedTable, rows: Rows) -> str:
    """The table as kept (groups in the kept order: ``rows``, :attr:`TableKey.rows`)."""
    t = table.table
    return json.dumps({
        "limits": [float(x) for x in t.limits],
        "counts": [list(r) for r in _kept(t.counts.tolist(), rows)],
        "k": t.k,
        "order": list(table.order),
        "center_totals": {c: _kept(v, rows) for c, v in table.center_totals.items()},
        "center_tables": {c: {"limits": [float(x) for x in own.limits],
                              "counts": _kept(own.counts.tolist(), rows)}
                          for c, own in table.center_tables.items()},
    })


def decode(text: str, rows: Rows, study_id: str,
           reused: ReusedTable | None = None) -> FederatedTable:
    """A kept table as the study asking it needs it (``rows``: the order it asks its groups
    in, :attr:`TableKey.rows`), marked as reused from ``study_id`` and described by
    ``reused``."""
    data = json.loads(text)
    table = BinTable(limits=np.asarray(data["limits"], dtype=np.float64),
                     counts=np.asarray(_asked(data["counts"], rows), dtype=np.float64),
                     k=int(data["k"]))
    own = {c: BinTable(limits=np.asarray(t["limits"], dtype=np.float64),
                       counts=np.asarray(_asked(t["counts"], rows), dtype=np.float64),
                       k=table.k)
           for c, t in (data.get("center_tables") or {}).items()}
    return FederatedTable(
        table, tuple(data["order"]),
        {c: tuple(float(x) for x in _asked(v, rows)) for c, v in data["center_totals"].items()},
        (), reused_from=study_id, reused=reused, center_tables=own,
    )


class TableMemory:
    """The kept tables of a coordinator's store (synchronous store, called from async code),
    and the tables this process is building (:meth:`building`, :meth:`after_builds`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._building: dict[str, asyncio.Future[None]] = {}

    @contextlib.contextmanager
    def building(self, key: TableKey) -> Iterator[None]:
        """Mark the table of ``key`` as being built by the caller until the block ends (kept
        by then, or failed): a study needing the same table meanwhile waits for it
        (:meth:`after_builds`) instead of asking the centers for the same answers again."""
        digest = key.digest()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._building.setdefault(digest, done)
        try:
            yield
        finally:
            if self._building.get(digest) is done:
                del self._building[digest]
            done.set_result(None)

    async def after_builds(self, key: TableKey) -> FederatedTable | None:
        """The table of ``key`` once the build of it under way in this process ends, when that
        build kept it (:meth:`find`); None when none is under way, or it failed or was kept
        under another key (a partial table): the caller builds it then.

        Concurrent studies of one table (50 analysts submitting the same study) would
        otherwise each walk the whole refinement chain, every center answering each of them
        from its store, one after the other: the same table, for the price of one chain per
        study. Waiting for the first is reuse as :meth:`find` does it, a little earlier."""
        digest = key.digest()
        while True:
            while (pending := self._building.get(digest)) is not None:
                await asyncio.shield(pending)
            found = await self.find(key)
            # A build may have started while the store was read (another study's find ended
            # first): wait for it too. Otherwise nothing awaits between this check and the
            # caller's :meth:`building`, so two callers can never both build.
            if found is not None or digest not in self._building:
                return found

    async def find(self, key: TableKey) -> FederatedTable | None:
        record = await asyncio.to_thread(self.store.find_table, key.digest())
        if record is None:
            return None
        return decode(record.table, key.rows, record.study_id, KeptTable.of(record).reused())

    async def keep(self, key: TableKey, table: FederatedTable, study_id: str) -> None:
        """Keep ``table``, obtained by ``study_id`` for ``key``; only a table every center of
        the key took part in (a partial one is kept under the key of those that did)."""
        if set(table.order) != set(key.centers):
            key = TableKey.of(dataset=key.dataset, variable=key.variable, groups=key.groups,
                              k=key.k, lower=key.lower, upper=key.upper,
                              epochs={c: e for c, e in key.epochs if c in table.order})
        described = canonical_json(key.described())
        await asyncio.to_thread(self.store.keep_table, key.digest(), key.dataset, key.variable,
                                described, encode(table, key.rows), study_id)

    def kept(self, dataset: str, variable: str) -> list[KeptTable]:
        """Every table of ``variable`` kept so far (for the dry run), oldest first."""
        return [KeptTable.of(r) for r in self.store.tables_of(dataset, variable)]
