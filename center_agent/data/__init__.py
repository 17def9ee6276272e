"""Datasets as the configuration declares them, loaded into numpy arrays.

``Datasets`` maps each configured name to a :class:`Dataset`; ``Dataset.load(variable, group)``
returns a :class:`Sample`: finite float64 values and, when a group column is asked for, their group
labels restricted to the declared levels. Names that the configuration does not declare raise
:class:`UnknownDataset` / :class:`UnknownVariable` before any file or database is touched.

Missing-value policy (documented in docs/privacy.md):

* a row whose value is missing (empty, NULL, NA) or non-finite (NaN, ±inf) is dropped; so is a row
  whose group label is missing, when a group is asked for;
* a row whose group label is present but not a declared level is not part of any declared group and
  is left out silently (it is neither used nor counted);
* the number of dropped rows is released only as :func:`dropped_report` gives it: exactly when it is
  0 or >= K, else the string ``"<K"``.

Loaded samples are kept in memory, per (variable, group column), while the source's
``version()`` (a file's identity, size and modification time) is unchanged: a study asks a center
for several releases of the same variable, and reading and splitting the column dominated each
of them. A rewritten file is read again on the next request; a SQL source has no cheap version
and is read on every request. One request reads at a time per key; concurrent ones wait for it.

Everything is vectorized in Arrow/numpy; there is no per-row Python loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from center_agent.core.config import DatasetConfig, Settings
from center_agent.core.errors import (
    DataSourceError,
    KAnonymityRefusal,
    UnknownDataset,
    UnknownLevel,
    UnknownVariable,
)
from center_agent.data.sources import DataSource, open_source
from shared.releases import public_size

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_V = TypeVar("_V")
_N = TypeVar("_N", bound=np.generic)
_Arrow = TypeVar("_Arrow", pa.Array, pa.ChunkedArray)
_Key = tuple[str, ...]  # ("sample", variable, group column or ""), ("codes",), ("sizes",)

UNDECLARED = -1
"""Group code of a label that is not a declared level: the row is in no group, left out silently."""
MISSING = -2
"""Group code of a missing label: the row is dropped and counted in ``n_dropped``."""

__all__ = ["Dataset", "Datasets", "Groups", "Sample", "dropped_report", "round_down"]


def dropped_report(n_dropped: int, k: int) -> int | Literal["<K"]:
    """How many rows were dropped, as it may be released: exact if 0 or >= k, else ``"<K"``."""
    return n_dropped if n_dropped == 0 or n_dropped >= k else "<K"


round_down = public_size
"""``n`` rounded down to a multiple of ``k`` (so a released size never reveals n mod k)."""


@dataclass(frozen=True)
class Sample:
    """One variable of one dataset, missing rows dropped.

    ``codes`` is ``None`` when no group was asked for, else the index in ``levels`` of each
    value's group. ``n_dropped`` is internal: release it only through :func:`dropped_report`.
    Samples are shared between requests (see the module docstring): never write to their arrays.
    """

    values: NDArray[np.float64]
    codes: NDArray[np.intp] | None
    levels: tuple[str, ...]
    n_dropped: int
    parts: Mapping[str, NDArray[np.float64]] = field(default_factory=dict, repr=False)

    @classmethod
    def grouped(
        cls, values: NDArray[np.float64], codes: NDArray[np.intp], levels: tuple[str, ...],
        n_dropped: int,
    ) -> Sample:
        """A sample from values and the index of each one's level in ``levels``; each level's
        values sorted (every release is a function of the multiset, and sorted once here, they
        are not sorted again by each release: ``shared._sorting.ascending``)."""
        parts = {level: _frozen(np.sort(values[codes == i])) for i, level in enumerate(levels)}
        return cls(_frozen(values), _frozen(codes), levels, n_dropped, parts)

    @property
    def groups(self) -> NDArray[np.str_] | None:
        """The group label of each value (``None`` when no group was asked for)."""
        if self.codes is None:
            return None
        return np.asarray(self.levels, dtype=np.str_)[self.codes]

    def by_group(self) -> dict[str, NDArray[np.float64]]:
        """Values per declared level (every level present, possibly empty)."""
        if self.codes is None:
            raise ValueError("this sample was loaded without a group")
        return dict(self.parts)


def _frozen(a: NDArray[_N]) -> NDArray[_N]:
    """``a``, read-only: a shared sample must not be changed by one request for the next."""
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Groups:
    """The arrays a release counts: ``arrays`` in the core's order (X, Y) or the one group,
    ``by_name`` keyed as the auditor records them, and the group column (None: ungrouped)."""

    grouping: str | None
    arrays: tuple[NDArray[np.float64], ...]
    by_name: dict[str, NDArray[np.float64]]


class Dataset:
    """One configured dataset: its declared names, its source, and the loading policy."""

    def __init__(self, name: str, config: DatasetConfig, source: DataSource | None = None) -> None:
        self.name = name
        self.config = config
        self.source = source if source is not None else open_source(config.source)
        self._lock = threading.Lock()
        self._key_locks: dict[_Key, threading.Lock] = {}
        self._kept_values: dict[_Key, tuple[Hashable, object]] = {}

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(self.config.variables)

    @property
    def group_column(self) -> str | None:
        return self.config.group.column if self.config.group is not None else None

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(self.config.group.levels) if self.config.group is not None else ()

    def check_variable(self, variable: str) -> str:
        if variable not in self.config.variables:
            raise UnknownVariable(self.name, variable)
        return variable

    def check_group(self, group: str) -> str:
        if group != self.group_column:
            raise UnknownVariable(self.name, group)
        return group

    def check_columns(self) -> None:
        """Every declared column exists in the source (run at start-up)."""
        declared = [*self.variables, *([self.group_column] if self.group_column else [])]
        present = set(self._guard(self.source.columns))
        missing = [c for c in declared if c not in present]
        if missing:
            raise DataSourceError(
                f"dataset {self.name!r}: declared columns {missing} are not in its source"
            )

    def load(self, variable: str, group: str | None = None) -> Sample:
        """``variable``'s finite values (and labels of the declared ``group`` column)."""
        self.check_variable(variable)
        if group is None:
            return self._kept(("sample", variable, ""), lambda: self._read_ungrouped(variable))
        self.check_group(group)
        return self._kept(("sample", variable, group), lambda: self._read_grouped(variable))

    def _read_ungrouped(self, variable: str) -> Sample:
        values = self._as_float(self._guard(lambda: self.source.read([variable])).column(0))
        keep = np.isfinite(values)
        n_dropped = int(keep.size - np.count_nonzero(keep))
        return Sample(_frozen(np.sort(values[keep])), None, (), n_dropped)  # see grouped()

    def _read_grouped(self, variable: str) -> Sample:
        group = self.group_column
        assert group is not None  # load() checked it
        before = self._guard(self.source.version)
        if before is not None:
            # A file: the group column's codes are kept (every variable and the sizes use them),
            # so only the variable is read. Both come from one version of the file, or neither
            # is used: a file changed in between is read again, both columns at once.
            codes = self._codes()
            values = self._as_float(self._guard(lambda: self.source.read([variable])).column(0))
            if self._guard(self.source.version) == before and values.size == codes.size:
                return self._grouped_sample(values, codes)
        table = self._guard(lambda: self.source.read([variable, group], text=[group]))
        values = self._as_float(table.column(0))
        return self._grouped_sample(values, self._level_codes(table.column(1)))

    def _grouped_sample(self, values: NDArray[np.float64], codes: NDArray[np.intp]) -> Sample:
        declared = codes >= 0
        finite = np.isfinite(values)
        keep = declared & finite
        n_dropped = int(np.count_nonzero(codes == MISSING) + np.count_nonzero(declared & ~finite))
        return Sample.grouped(values[keep], codes[keep], self.levels, n_dropped)

    def _codes(self) -> NDArray[np.intp]:
        """The group code of every row (a level's index, UNDECLARED or MISSING)."""
        group = self.group_column
        assert group is not None
        return self._kept(("codes",), lambda: _frozen(self._level_codes(
            self._guard(lambda: self.source.read([group], text=[group])).column(0))))

    def _kept(self, key: _Key, read: Callable[[], _V]) -> _V:
        """``read()``, or what it gave for ``key`` while the source's version is unchanged."""
        version = self._guard(self.source.version)
        if version is None:
            return read()
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            kept = self._kept_values.get(key)
            if kept is not None and kept[0] == version:
                return cast(_V, kept[1])
            value = read()
            # The version was taken before the read: a file changed meanwhile is read again.
            self._kept_values[key] = (version, value)
            return value

    def groups(self, variable: str, levels: tuple[str, str] | None) -> Groups:
        """``variable`` split as a release asks: all records, or the two named levels (X, Y).

        Unknown levels are refused (404 ``unknown_level``) before any data is read.
        """
        if levels is None:
            sample = self.load(variable)
            return Groups(None, (sample.values,), {"all": sample.values})
        if self.group_column is None:
            raise UnknownLevel(self.name, levels[0])
        for level in levels:
            if level not in self.levels:
                raise UnknownLevel(self.name, level)
        if levels[0] == levels[1]:
            raise UnknownLevel(self.name, f"{levels[1]} (the same level twice)")
        by_level = self.load(variable, self.group_column).by_group()
        arrays = (by_level[levels[0]], by_level[levels[1]])
        return Groups(self.group_column, arrays, dict(zip(levels, arrays, strict=True)))

    def values(self, variable: str, level: str | None) -> NDArray[np.float64]:
        """``variable``'s usable values: all records, or those of one declared level."""
        if level is None:
            return self.load(variable).values
        if self.group_column is None or level not in self.levels:
            raise UnknownLevel(self.name, level)
        return self.load(variable, self.group_column).by_group()[level]

    def usable(self, variable: str, level: str | None, k: int) -> NDArray[np.float64]:
        """:meth:`values`, refused (403 ``k_anonymity_refused``) when they are fewer than ``k``: no
        release is computed from fewer than K records (and a DP release spends nothing)."""
        values = self.values(variable, level)
        if values.size < k:
            raise KAnonymityRefusal(f"the selection holds fewer than K = {k} usable records")
        return values

    def sizes(self) -> tuple[int, dict[str, int]]:
        """Exact row count and per-level row counts (internal: release only rounded)."""
        if self.group_column is None:
            return self._kept(("sizes",), self._count_rows), {}
        codes = self._codes()
        counts = np.bincount(codes[codes >= 0], minlength=len(self.levels))
        return codes.size, {lvl: int(c) for lvl, c in zip(self.levels, counts, strict=True)}

    def _count_rows(self) -> int:
        return int(self._guard(lambda: self.source.read([self.variables[0]])).num_rows)

    def _level_codes(self, labels: pa.ChunkedArray) -> NDArray[np.intp]:
        """Each label's index in the declared levels; UNDECLARED or MISSING (null) otherwise."""
        value_set = pa.array(self.levels, type=pa.string())
        chunks = []
        for chunk in labels.chunks:
            if pa.types.is_dictionary(chunk.type):
                # Look up the few distinct labels, then index by each row's dictionary entry
                # (the entry one past the end stands for a missing label).
                known = self._index_in(self._as_text(chunk.dictionary), value_set)
                lookup = np.append(known, MISSING)
                entry = pc.fill_null(chunk.indices, len(chunk.dictionary))
                chunks.append(lookup[np.asarray(entry.to_numpy(zero_copy_only=False))])
            else:
                codes = self._index_in(self._as_text(chunk), value_set)
                missing = np.asarray(pc.is_null(chunk).to_numpy(zero_copy_only=False), dtype=bool)
                codes[missing] = MISSING
                chunks.append(codes)
        if not chunks:
            return np.empty(0, dtype=np.intp)
        return np.concatenate(chunks).astype(np.intp, copy=False)

    @staticmethod
    def _index_in(labels: pa.Array, value_set: pa.Array) -> NDArray[np.intp]:
        codes = pc.fill_null(pc.index_in(labels, value_set=value_set), UNDECLARED)
        return np.array(codes.to_numpy(zero_copy_only=False), dtype=np.intp)

    def _as_float(self, column: pa.ChunkedArray) -> NDArray[np.float64]:
        try:
            floats = pc.cast(column, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.error("dataset %r: column is not numeric: %s", self.name, exc)
            raise DataSourceError(f"dataset {self.name!r}: a variable is not numeric") from None
        return np.asarray(pc.fill_null(floats, np.nan).to_numpy(), dtype=np.float64)

    def _as_text(self, column: _Arrow) -> _Arrow:
        try:
            return pc.cast(column, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.error("dataset %r: group column cannot be read as text: %s", self.name, exc)
            raise DataSourceError(f"dataset {self.name!r}: unreadable group column") from None

    def _guard(self, read: Callable[[], _T]) -> _T:
        """Run a read; any I/O or driver error becomes a DataSourceError (details only logged)."""
        try:
            return read()
        except DataSourceError:
            raise
        except Exception:
            log.exception("dataset %r: reading the source failed", self.name)
            raise DataSourceError(
                f"dataset {self.name!r}: the data source could not be read"
            ) from None


class Datasets(Mapping[str, Dataset]):
    """The configured datasets by name; ``[name]`` raises :class:`UnknownDataset`."""

    def __init__(self, datasets: Mapping[str, Dataset]) -> None:
        self._datasets = dict(datasets)

    @classmethod
    def from_settings(cls, settings: Settings) -> Datasets:
        return cls({name: Dataset(name, cfg) for name, cfg in settings.datasets.items()})

    def __getitem__(self, name: str) -> Dataset:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownDataset(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._datasets)

    def __len__(self) -> int:
        return len(self._datasets)

    def check_columns(self) -> None:
        for dataset in self._datasets.values():
            dataset.check_columns()

    def close(self) -> None:
        for dataset in self._datasets.values():
            dataset.source.close()
