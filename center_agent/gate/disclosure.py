"""Disclosure control: no combination of a center's exact releases isolates 1..K-1 records.

Every exact release of a variable (a table, a refinement) counts records in sets:
per level, the records whose value lies in some cells of the real line. A :class:`Partition` says
which: cells cut by the release's interior limits (right-closed, the first open below, the last
open above) and, per level, the released set each cell belongs to. An ungrouped release counts the
levels together (``pooled``: a set spans the levels).

Subtracting releases from one another can only tell counts of unions of **atoms**: the records
that fall in the same released set of every release (the same cell and level of a table, the same
run of a refinement). So the rule is: every atom of every release ever made of the variable, on
the population the center answers from, holds 0 or at least K records. Then every count anyone
can derive from any combination of releases is a sum of atoms: 0 or at least K.

A new release is not refused when it would break the rule; it is **coarsened** until it keeps it
(:meth:`Disclosure.admit`): bins merged, a refinement's splits dropped, runs merged. Coarsening
always ends: a release that shows only each level's total adds no atom that earlier releases and
the one population (every release counts the same records) do not already have. So whether a
release is made never depends on the data; only how fine it is does.

Every level's size (the n and m of a Mann-Whitney release, the n of YJ moments, a grouped
table's totals) counts as released, always: the memory starts from a release of the levels'
totals. It must: a pooled set whose records are 20 of level a and 3 of level b, beside the size
of a (20, all in that set), gives the 3 away. So a pooled release is coarsened until each
level's part of each of its sets holds 0 or >= K records. The sizes' change over time is checked
with the epoch (``gate.epochs``).

The memory is kept in the ledger's database, in the release's transaction (under the dataset's
lock), per (dataset, variable), across epochs (``center_agent.gate.epochs``), with a snapshot of
the atoms' counts per epoch for the check that runs when the data change.

Cost. With R releases stored for a variable, E distinct interior limits among them and L levels,
an admission counts each level's sorted values against the limits (O(L·E·log n)), forms the atoms
(O(R·L·E)) and coarsens in a few rounds of O(L·E) each. Both R and E are capped per variable
(``max_releases_per_variable``, ``max_limits_per_variable``); past the caps a release is refused,
a decision made from the releases made so far only.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, delete, func, select

from center_agent.core.errors import DisclosureStateFull, HistoryNotSafe
from center_agent.data import Population
from center_agent.db import atom_snapshots, release_sets, released_limits, utcnow, variable_versions
from shared.privacy import isolating

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Partition:
    """How one release splits a variable's records into counted sets (module docstring).

    ``labels[level][j]`` is the released set of cell ``j`` for records of ``level``; a level
    absent from ``labels`` is not counted by the release. With ``pooled`` the set numbers are
    shared by the levels (their records are counted together), else each level's sets are its
    own.
    """

    interior: FloatArray
    labels: Mapping[str, IntArray]
    pooled: bool = False

    @classmethod
    def bins(cls, interior: Sequence[float] | FloatArray, levels: Sequence[str],
             pooled: bool = False) -> Partition:
        """A table: one set per cell, for each level (or pooled)."""
        inner = np.asarray(interior, dtype=np.float64)
        cells = np.arange(inner.size + 1, dtype=np.int64)
        return cls(inner, {level: cells for level in levels}, pooled)

    @classmethod
    def totals(cls, levels: Sequence[str], pooled: bool = False) -> Partition:
        """Only the levels' sizes (or their pooled size)."""
        return cls.bins([], levels, pooled)

    def to_bytes(self) -> bytes:
        levels = sorted(self.labels)
        buffer = io.BytesIO()
        np.savez(buffer, interior=self.interior,
                 labels=np.stack([self.labels[lv] for lv in levels]) if levels
                 else np.zeros((0, self.interior.size + 1), dtype=np.int64))
        header = json.dumps({"levels": levels, "pooled": self.pooled}).encode()
        return len(header).to_bytes(4, "little") + header + buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Partition:
        size = int.from_bytes(blob[:4], "little")
        header = json.loads(blob[4:4 + size])
        arrays = np.load(io.BytesIO(blob[4 + size:]), allow_pickle=False)
        labels = arrays["labels"].astype(np.int64)
        return cls(arrays["interior"].astype(np.float64),
                   {lv: labels[i] for i, lv in enumerate(header["levels"])},
                   bool(header["pooled"]))


class Candidate(Protocol):
    """A release being admitted: its partition, and how to make it coarser."""

    @property
    def partition(self) -> Partition: ...

    def coarsen(self, bad: Mapping[str, IntArray]) -> Candidate:
        """A coarser release that merges each set holding a cell of ``bad[level]`` (cells of
        this partition) with a neighbour, or drops structure; it must reach, in finitely many
        steps, a release that shows at most each level's (or the pooled) total."""
        ...


# -- atoms -------------------------------------------------------------------------------------

def edges_of(partitions: Sequence[Partition]) -> FloatArray:
    parts = [p.interior for p in partitions if p.interior.size]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0)


def probes(edges: FloatArray) -> FloatArray:
    """One point inside each cell cut by ``edges``: its right end (cells are right-closed), and
    a point above the last edge for the last cell."""
    if edges.size == 0:
        return np.zeros(1)
    return np.append(edges, np.nextafter(edges[-1], np.inf))


def cell_counts(population: Population, variable: str, levels: Sequence[str],
                edges: FloatArray) -> IntArray:
    """Records of each level (rows) in each cell cut by ``edges``; 0 for a level not in the
    population."""
    out = np.zeros((len(levels), edges.size + 1), dtype=np.int64)
    for i, level in enumerate(levels):
        if level not in population.levels:
            continue
        values = population.level(variable, level)
        cum = np.searchsorted(values, edges, side="right")
        out[i] = np.diff(np.concatenate([[0], cum, [values.size]]))
    return out


def combine(key: IntArray, partition: Partition, levels: Sequence[str],
            where: FloatArray) -> IntArray:
    """Refine the atom ``key`` (levels × cells) by one more release."""
    cell = np.searchsorted(partition.interior, where, side="left")
    width = 1 + max((int(lab.max(initial=0)) for lab in partition.labels.values()), default=0)
    sets = np.full(key.shape, -1, dtype=np.int64)
    for i, level in enumerate(levels):
        lab = partition.labels.get(level)
        if lab is not None:
            sets[i] = lab[cell] + (0 if partition.pooled else i * width)
    span = int(sets.max(initial=0)) + 2
    # Re-compact after each release so the combined key never overflows.
    _, inverse = np.unique(key * span + (sets + 1), return_inverse=True)
    return inverse.reshape(key.shape).astype(np.int64)


def atoms(partitions: Sequence[Partition], levels: Sequence[str], edges: FloatArray) -> IntArray:
    """The atom of each (level, cell): equal ids share the released set of every release."""
    where = probes(edges)
    key = np.zeros((len(levels), where.size), dtype=np.int64)
    for partition in partitions:
        key = combine(key, partition, levels, where)
    return key


def atom_totals(key: IntArray, counts: IntArray) -> IntArray:
    return np.bincount(key.ravel(), weights=counts.ravel(),
                       minlength=int(key.max(initial=-1)) + 1).astype(np.int64)


def small(key: IntArray, counts: IntArray, k: int) -> NDArray[np.bool_]:
    """Which (level, cell) pairs lie in an atom of 1..k-1 records."""
    return isolating(atom_totals(key, counts), k)[key]


# -- the memory --------------------------------------------------------------------------------

@dataclass(frozen=True)
class VariableVersion:
    """Which of a variable's exact releases the memory holds: those of epoch ``since_epoch``
    on (``number`` 1 since epoch 1 unless the operator renewed it)."""

    number: int
    since_epoch: int


@dataclass(frozen=True)
class Snapshot:
    """Atoms of every set released of a variable up to some moment, with their counts."""

    levels: tuple[str, ...]
    edges: FloatArray
    key: IntArray
    totals: IntArray

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, edges=self.edges, key=self.key.astype(np.int32),
                            totals=self.totals)
        header = json.dumps(list(self.levels)).encode()
        return len(header).to_bytes(4, "little") + header + buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Snapshot:
        size = int.from_bytes(blob[:4], "little")
        levels = tuple(json.loads(blob[4:4 + size]))
        arrays = np.load(io.BytesIO(blob[4 + size:]), allow_pickle=False)
        return cls(levels, arrays["edges"], arrays["key"].astype(np.int64),
                   arrays["totals"].astype(np.int64))

    def recount(self, population: Population, variable: str) -> IntArray:
        """The atoms' counts on another population (a level it lacks counts 0)."""
        counts = cell_counts(population, variable, self.levels, self.edges)
        return np.bincount(self.key.ravel(), weights=counts.ravel(),
                           minlength=self.totals.size).astype(np.int64)


class Disclosure:
    """The center's memory of what its exact releases counted, and the admission rule."""

    def __init__(self, k: int, *, max_releases: int, max_limits: int) -> None:
        self.k = k
        self.max_releases = max_releases
        self.max_limits = max_limits

    def history(self, conn: Connection, dataset: str, variable: str) -> list[Partition]:
        """The partitions of the variable's current version (:meth:`renew`), in release order."""
        rows = conn.execute(
            select(release_sets.c.partition)
            .where(release_sets.c.dataset == dataset, release_sets.c.variable == variable,
                   release_sets.c.epoch >= self.version(conn, dataset, variable).since_epoch)
            .order_by(release_sets.c.id)
        ).all()
        return [Partition.from_bytes(row.partition) for row in rows]

    @staticmethod
    def version(conn: Connection, dataset: str, variable: str) -> VariableVersion:
        """The variable's current version: 1 since epoch 1 until the operator renews it."""
        row = conn.execute(
            select(variable_versions.c.version, variable_versions.c.since_epoch)
            .where(variable_versions.c.dataset == dataset,
                   variable_versions.c.variable == variable)
            .order_by(variable_versions.c.version.desc()).limit(1)
        ).first()
        return VariableVersion(1, 1) if row is None else VariableVersion(int(row.version),
                                                                         int(row.since_epoch))

    def blocked(self, conn: Connection, dataset: str, population: Population
                ) -> dict[str, int]:
        """Per variable whose earlier exact releases (of its current version) are not
        K-anonymous on ``population``, how many of their atoms hold 1..K-1 records: no exact
        release of it can be admitted (:meth:`admit` raises :class:`HistoryNotSafe`). Only a
        forced epoch leads here; for the operator's eyes (the counts are about the data)."""
        found = {}
        variables = conn.execute(
            select(release_sets.c.variable).where(release_sets.c.dataset == dataset).distinct()
        ).scalars().all()
        for variable in sorted(variables):
            if variable not in population.values:
                continue
            history = [Partition.totals(population.levels),
                       *self.history(conn, dataset, variable)]
            edges = edges_of(history)
            counts = cell_counts(population, variable, population.levels, edges)
            base = atoms(history, population.levels, edges)
            bad = int(isolating(atom_totals(base, counts), self.k).sum())
            if bad:
                found[variable] = bad
        return found

    def renew(self, conn: Connection, dataset: str, variable: str, epoch: int
              ) -> VariableVersion:
        """Start a new version of ``variable`` in ``epoch`` (the operator's, after a forced
        epoch left it blocked): its exact releases from then on form a new memory, without the
        earlier ones, whose sets may then be subtracted from new releases (the risk the forced
        epoch accepted, module docstring "A variable's versions"). The earlier releases'
        snapshots leave the version check with them."""
        current = self.version(conn, dataset, variable)
        if current.since_epoch >= epoch:
            raise ValueError(f"{variable!r} already starts version {current.number} in epoch "
                             f"{epoch}")
        new = VariableVersion(current.number + 1, epoch)
        conn.execute(variable_versions.insert().values(
            dataset=dataset, variable=variable, version=new.number, since_epoch=epoch,
            created_at=utcnow()))
        return new

    def admit(
        self,
        conn: Connection,
        *,
        dataset: str,
        variable: str,
        epoch: int,
        population: Population,
        candidate: Candidate,
        request_key: str,
    ) -> Candidate:
        """``candidate``, coarsened until every atom of it and every earlier release of the
        variable holds 0 or >= K records of the population; recorded with a new snapshot.

        Raises :class:`DisclosureStateFull` past the caps on stored releases and limits (decided
        from the earlier releases and the request only), and :class:`HistoryNotSafe` when the
        earlier releases themselves are not safe on this population (only after an operator
        forced a new epoch over data that failed the check).
        """
        self._check_caps(conn, dataset, variable, candidate.partition)
        levels = population.levels
        # Every level's size counts as released (module docstring): Mann-Whitney, YJ and
        # grouped tables give them exactly, and beside a pooled release a size can isolate
        # the level's part of a pooled set.
        history = [Partition.totals(levels), *self.history(conn, dataset, variable)]
        edges = edges_of([*history, candidate.partition])
        where = probes(edges)
        counts = cell_counts(population, variable, levels, edges)
        base = atoms(history, levels, edges)
        if small(base, counts, self.k).any():
            raise HistoryNotSafe(dataset, variable)
        while True:
            key = combine(base, candidate.partition, levels, where)
            bad = small(key, counts, self.k)
            if not bad.any():
                break
            cells = np.searchsorted(candidate.partition.interior, where, side="left")
            try:
                candidate = candidate.coarsen({
                    level: np.unique(cells[bad[i]]).astype(np.int64)
                    for i, level in enumerate(levels) if bad[i].any()
                })
            except HistoryNotSafe:
                raise HistoryNotSafe(dataset, variable) from None
        self._record(conn, dataset, variable, epoch, request_key, candidate.partition)
        snapshot = Snapshot(tuple(levels), edges, key, atom_totals(key, counts))
        self._snapshot(conn, dataset, variable, epoch, snapshot)
        return candidate

    def usage(self, conn: Connection, dataset: str) -> dict[str, tuple[int, int]]:
        """Per variable: the exact releases remembered and the limits they hold (what the caps
        of :meth:`admit` count)."""
        rows = conn.execute(
            select(release_sets.c.variable, release_sets.c.epoch, func.count(),
                   func.coalesce(func.sum(release_sets.c.n_limits), 0))
            .where(release_sets.c.dataset == dataset)
            .group_by(release_sets.c.variable, release_sets.c.epoch)
        ).all()
        since: dict[str, int] = {}
        usage: dict[str, tuple[int, int]] = {}
        for variable, epoch, count, n_limits in rows:
            variable = str(variable)
            if variable not in since:
                since[variable] = self.version(conn, dataset, variable).since_epoch
            if int(epoch) >= since[variable]:
                before = usage.get(variable, (0, 0))
                usage[variable] = (before[0] + int(count), before[1] + int(n_limits))
        return usage

    def snapshots(self, conn: Connection, dataset: str) -> dict[tuple[str, int], Snapshot]:
        """Per (variable, epoch), the atoms of the variable's current version as counted on
        that epoch's data (a renewed variable's earlier snapshots are left out)."""
        rows = conn.execute(
            select(atom_snapshots).where(atom_snapshots.c.dataset == dataset)
        ).all()
        since: dict[str, int] = {}
        kept = {}
        for row in rows:
            if row.variable not in since:
                since[row.variable] = self.version(conn, dataset, row.variable).since_epoch
            if int(row.epoch) >= since[row.variable]:
                kept[(row.variable, int(row.epoch))] = Snapshot.from_bytes(row.snapshot)
        return kept

    # -- internals ------------------------------------------------------------------------

    def _check_caps(self, conn: Connection, dataset: str, variable: str,
                    partition: Partition) -> None:
        row = conn.execute(
            select(func.count(), func.coalesce(func.sum(release_sets.c.n_limits), 0)).where(
                release_sets.c.dataset == dataset, release_sets.c.variable == variable,
                release_sets.c.epoch >= self.version(conn, dataset, variable).since_epoch,
            )
        ).one()
        n_releases, n_limits = int(row[0]), int(row[1])
        if n_releases + 1 > self.max_releases:
            raise DisclosureStateFull(
                f"dataset {dataset!r}: {variable!r} has had {n_releases} distinct exact "
                f"releases, the most this center keeps (setting max_releases_per_variable)"
            )
        if n_limits + partition.interior.size > self.max_limits:
            raise DisclosureStateFull(
                f"dataset {dataset!r}: the releases of {variable!r} would hold more than "
                f"{self.max_limits} limits (setting max_limits_per_variable)"
            )

    @staticmethod
    def _record(conn: Connection, dataset: str, variable: str, epoch: int, request_key: str,
                partition: Partition) -> None:
        conn.execute(release_sets.insert().values(
            dataset=dataset, variable=variable, epoch=epoch, request_key=request_key,
            n_limits=int(partition.interior.size), partition=partition.to_bytes(),
            created_at=utcnow(),
        ))

    @staticmethod
    def _snapshot(conn: Connection, dataset: str, variable: str, epoch: int,
                  snapshot: Snapshot) -> None:
        key = ((atom_snapshots.c.dataset == dataset) & (atom_snapshots.c.variable == variable)
               & (atom_snapshots.c.epoch == epoch))
        conn.execute(delete(atom_snapshots).where(key))
        conn.execute(atom_snapshots.insert().values(
            dataset=dataset, variable=variable, epoch=epoch, snapshot=snapshot.to_bytes()
        ))

    @staticmethod
    def import_auditor_limits(conn: Connection, levels_of: Mapping[str, Sequence[str]]) -> int:
        """Carry the table limits an older center recorded (before the release gate) into the
        memory, once: as tables of every level (conservative). Returns how many were imported."""
        if conn.execute(select(func.count()).select_from(release_sets)).scalar():
            return 0
        rows = conn.execute(select(released_limits)).all()
        for row in rows:
            levels = levels_of.get(row.dataset)
            if levels is None:
                continue
            limits = np.asarray(json.loads(row.limits), dtype=np.float64)
            inner = limits[np.isfinite(limits)]
            partition = Partition.bins(np.unique(inner), levels)
            conn.execute(release_sets.insert().values(
                dataset=row.dataset, variable=row.variable, epoch=1,
                request_key=f"imported-{row.id}", n_limits=int(partition.interior.size),
                partition=partition.to_bytes(), created_at=utcnow(),
            ))
        return len(rows)
