"""Datasets as the configuration declares them, and the one population every release counts.

``Datasets`` maps each configured name to a :class:`Dataset`; ``Dataset.population()`` returns the
dataset's :class:`Population`: the records that every release of the dataset, of any variable and
any grouping, is computed from. Names the configuration does not declare raise
:class:`UnknownDataset` / :class:`UnknownVariable` / :class:`UnknownLevel` before any file or
database is touched.

**One population per dataset** (``docs/privacy.md``, "One population"). A row belongs to it when

* its group label is a declared level (datasets with a group column), and
* every declared variable of the row is present and finite (complete cases), and
* its level holds at least K such rows (K-anonymous mode; in DP mode every declared level is
  in, with however many rows, none included: below).

So every release counts the same rows: a table of one variable and a table of another have the
same totals, an ungrouped table totals exactly its levels' tables, and no difference of two
releases' totals can fall in 1..K-1 (which missing values, undeclared labels or a level of 3
records would otherwise give away). A level with fewer than K rows is left out entirely; its size
shows as 0 in ``/v1/info`` (sizes there are rounded down to a multiple of K), so refusing it is
decided from public information.

**DP mode** (``release_mode = "dp"``): no rule of the population reads K. Every declared level
is in (a level with no row is an empty array), values missing per variable leave only that
variable's value (no K rule, ``missing = "per_variable"``), and :meth:`Dataset.require` refuses
nothing: whether an answer exists never depends on the data, and every DP mechanism is defined
and ε-DP on any number of records (docs/privacy.md, "DP mode"). Each row's membership is then a
function of that row alone, so neighbouring sources give neighbouring populations.

Each level's values of each variable are kept sorted and read-only, a variable's levels one after
the other in one buffer (with complete cases), so that the compiled walk of a table and the merge
of the pooled values read them where they lie (``shared._walk.sorted_buffer``). The population is
read once
per version of the source and kept: a file's version is its identity, size and modification time;
a SQL source's is the answer of the operator's ``version_query`` or, without one, a generation
that advances every ``version_ttl_s`` seconds (``center_agent.data.sources.SqlTable.version``;
``version_ttl_s = 0`` reads it on every request). Requests arriving together share one read.
Memory: the values kept (8 bytes per complete row and variable, and as much again for a variable
whose levels were pooled: a release of every record, never a table) plus transient copies during
a read (``docs/benchmarks.md``, "Hospital scale" and "The 10^8-row study"). Its
:attr:`Population.fingerprint` is a digest of its content (the sorted values per level), so
re-ordering rows or touching a file does not change it, and any change of a counted value does:
the release gate ties releases to it (``center_agent.gate``).

Everything is vectorized in Arrow/numpy; there is no per-row Python loop.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

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
from center_agent.data.joint import joint_variables, read_columns, sort_rows
from center_agent.data.joint import present as joint_present
from center_agent.data.leave_out import dataset_key, fill_up, least_ranked
from center_agent.data.memory import give_back, tune_allocator
from center_agent.data.missing import available_cases
from center_agent.data.sources import (
    CsvFile,
    DataSource,
    OffGrid,
    ParquetFile,
    SourceIdentity,
    SourceProblem,
    open_source,
    to_float,
)
from shared import _walk
from shared.privacy import public_size

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_N = TypeVar("_N", bound=np.generic)
_Arrow = TypeVar("_Arrow", pa.Array, pa.ChunkedArray)

ALL = ""
"""The one level of a dataset without a group column (never a declared level: those are
non-empty)."""
UNDECLARED = -1
"""Group code of a label that is not a declared level: the row is in no group, left out."""
MISSING = -2
"""Group code of a missing label: the row is left out."""

_CHUNK = 1 << 20
"""Rows per step when a level's values are selected from the column read."""
MERGE_COMPILED_FROM = 1 << 20
"""Values from which :meth:`Population.pooled` merges the levels by the compiled merge (no working
copy) rather than a stable sort of their concatenation (a working buffer of up to half of them):
8 MB, where the copy starts to weigh and loading Numba (about a second) does not."""

__all__ = ["ALL", "Dataset", "Datasets", "Population", "round_down"]

_PROCESS_SECRET = secrets.token_bytes(32)
"""The leave-out secret of a dataset built without the ledger's (``Dataset(secret=None)``)."""

round_down = public_size
"""``n`` rounded down to a multiple of ``k`` (so a released size never reveals n mod k)."""


def _frozen(a: NDArray[_N]) -> NDArray[_N]:
    """``a``, read-only: a shared population must not be changed by one request for the next."""
    a.flags.writeable = False
    return a


def _select_into(out: NDArray[np.float64], values: NDArray[np.float64],
                 codes: NDArray[np.signedinteger], code: int,
                 keep: NDArray[np.bool_] | None) -> None:
    """The ``values`` whose group code is ``code`` (and ``keep``), in row order, written into
    ``out`` (exactly as many) a chunk of rows at a time: no mask, index or copy of the whole
    column is made (``np.compress`` would make an index of 8 bytes per selected row)."""
    at = 0
    for start in range(0, values.size, _CHUNK):
        stop = start + _CHUNK
        selected = codes[start:stop] == code
        if keep is not None:
            selected &= keep[start:stop]
        chunk = values[start:stop][selected]
        out[at:at + chunk.size] = chunk
        at += chunk.size
    if at != out.size:
        raise AssertionError("the level's rows were counted otherwise; this is a bug")


@dataclass(frozen=True)
class Population:
    """The records every release of one dataset counts (see the module docstring).

    ``levels`` are the included levels in declared order (``(ALL,)`` for a dataset without a
    group column); ``excluded`` the declared levels left out for holding fewer than K rows.
    ``values[variable][level]`` is sorted and read-only. Sizes are exact: release them only
    rounded (:func:`round_down`) or as K-anonymous counts.
    """

    levels: tuple[str, ...]
    excluded: tuple[str, ...]
    values: Mapping[str, Mapping[str, NDArray[np.float64]]]
    fingerprint: str
    level_sizes: Mapping[str, int] | None = None
    """Records per included level when a variable may miss some of them (``missing =
    "per_variable"``); None: complete cases, every variable one value per record."""
    enrolled: Mapping[str, int] | None = None
    """The source's rows per declared level (labelled with it), before any is left out: with
    the level's size, the rows it leaves out (0 or >= K in K-anonymous mode: :meth:`left_out`).
    None: not known (a population built by hand) or DP mode (no K rule)."""
    joint: Mapping[str, Mapping[str, NDArray[np.float64]]] = field(default_factory=dict)
    """Per joint variable (``center_agent.data.joint``: a time-to-event variable) and included
    level, its present records' rows (records × parts: time, event), sorted and read-only."""
    _pooled: dict[str, NDArray[np.float64]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def sizes(self) -> dict[str, int]:
        """Records per included level (with complete cases, every variable has one value per
        record)."""
        if self.level_sizes is not None:
            return dict(self.level_sizes)
        first = next(iter(self.values.values()))
        return {level: int(first[level].size) for level in self.levels}

    @property
    def n(self) -> int:
        return sum(self.sizes.values())

    def left_out(self) -> dict[str, int]:
        """Per included level, the source's rows of the level that no release counts (what a
        public enrolment minus the level's released size tells); {} when not known."""
        if self.enrolled is None:
            return {}
        sizes = self.sizes
        return {level: self.enrolled[level] - sizes[level] for level in self.levels}

    def size(self, variable: str, level: str | None) -> int:
        """Records of one level (or all, ``None``) whose ``variable`` is present."""
        parts = self.values[variable]
        return int(parts[level].size if level is not None
                   else sum(parts[lv].size for lv in self.levels))

    def missing(self, variable: str, level: str) -> int:
        """Records of ``level`` missing ``variable`` (0 with complete cases): 0 or >= K, a
        released set of every release of the variable (``center_agent.data.missing``)."""
        return self.sizes[level] - self.size(variable, level)

    def level(self, variable: str, level: str) -> NDArray[np.float64]:
        """One included level's sorted values of ``variable``."""
        return self.values[variable][level]

    def pooled(self, variable: str) -> NDArray[np.float64]:
        """Every included level's values of ``variable``, sorted (computed once)."""
        with self._lock:
            kept = self._pooled.get(variable)
            if kept is None:
                parts = self.values[variable]
                if len(self.levels) == 1:
                    kept = parts[self.levels[0]]
                else:
                    arrays = [parts[level] for level in self.levels]
                    # Levels kept in one buffer (_read): merged straight into the result, no
                    # working copy (a stable sort of their concatenation, bit for bit). Small
                    # data are not worth loading Numba for (a DP-mode center may never bin).
                    large = sum(a.size for a in arrays) >= MERGE_COMPILED_FROM
                    merged = _walk.merge_sorted(arrays) if large and _walk.AVAILABLE else None
                    if merged is None:
                        merged = np.concatenate(arrays)
                        # Sorted runs: a stable sort (timsort) merges them, in place (measured
                        # 0.9 s against 1.3 s for quicksort at 10^7 in two runs), with a working
                        # buffer of up to half the values.
                        merged.sort(kind="stable")
                    kept = merged
                self._pooled[variable] = _frozen(kept)
            return kept

    def selection(self, variable: str, level: str | None) -> NDArray[np.float64]:
        """One level's values, or every level's (``None``)."""
        return self.pooled(variable) if level is None else self.level(variable, level)

    def joint_selection(self, variable: str, level: str | None) -> NDArray[np.float64]:
        """One level's rows of a joint variable (records × parts), or every level's
        (``None``, the levels one after the other: a release counts them, in any order)."""
        parts = self.joint[variable]
        if level is not None:
            return parts[level]
        return np.concatenate([parts[lv] for lv in self.levels]) if self.levels else \
            np.empty((0, 2), dtype=np.float64)


def _fingerprint(levels: tuple[str, ...], values: Mapping[str, Mapping[str, NDArray[np.float64]]],
                 sizes: Mapping[str, int] | None = None,
                 left_out: Mapping[str, int] | None = None,
                 joint: Mapping[str, Mapping[str, NDArray[np.float64]]] | None = None) -> str:
    """A digest of the population's content: sorted values per level and variable, the levels'
    sizes when values may be missing (they then tell the missing counts), and the rows each
    level leaves out when some does (a public enrolment minus a size tells them; none left out
    adds nothing, so such a population keeps the digest it had before they counted)."""
    digest = hashlib.blake2b(digest_size=32)
    if sizes is not None:
        digest.update(repr(sorted(sizes.items())).encode())
    if left_out and any(left_out.values()):
        digest.update(b"left out\0" + repr(sorted(left_out.items())).encode())
    for variable in sorted(values):
        for level in levels:
            digest.update(f"{variable}\0{level}\0".encode())
            arr = np.ascontiguousarray(values[variable][level])
            digest.update(arr.size.to_bytes(8, "little"))
            digest.update(arr.data)
    for variable in sorted(joint or {}):  # none declared: the digest it had before they were
        for level in levels:
            assert joint is not None
            digest.update(f"joint\0{variable}\0{level}\0".encode())
            rows = np.ascontiguousarray(joint[variable][level])
            digest.update(rows.shape[0].to_bytes(8, "little"))
            digest.update(rows.data)
    return digest.hexdigest()


class Dataset:
    """One configured dataset: its declared names, its source, and its population."""

    def __init__(self, name: str, config: DatasetConfig, k: int,
                 source: DataSource | None = None, *, secret: bytes | None = None) -> None:
        self.name = name
        self.config = config
        self.k = k
        # The key of the rows a level leaves out beyond its own (center_agent.data.leave_out):
        # a center passes its ledger's secret, so that every process of it builds the same
        # population; without one (a test, a benchmark), a secret of this process.
        self._rank_key = dataset_key(secret if secret is not None else _PROCESS_SECRET, name)
        self.source = (source if source is not None
                       else open_source(config.source, key=f"datasets.{name}.source"))
        self._lock = threading.Lock()
        self._kept: tuple[Hashable, Population] | None = None
        self.vet: Callable[[], None] | None = None
        """Set by :meth:`Datasets.check_columns` on a dataset unavailable at start-up: the
        start-up check it missed (no other dataset reads its source), run before its first
        read; it raises :class:`DataSourceError` (or a source's error) while it fails."""
        self._down_since_start = False
        self.joint = joint_variables(config.time_to_event)
        """The dataset's variables of several columns (``center_agent.data.joint``)."""

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(self.config.variables)

    @property
    def dp_mode(self) -> bool:
        """Whether the dataset is released in DP mode (``release_mode = "dp"``): then no level
        is left out and no selection refused for its size (docs/privacy.md, "DP mode")."""
        return self.config.release_mode == "dp"

    @property
    def least(self) -> int:
        """The fewest rows a level must hold to be in the population: K, or 0 in DP mode
        (every DP mechanism is defined and ε-DP on any number of records, none included)."""
        return 0 if self.dp_mode else self.k

    @property
    def categories(self) -> dict[str, tuple[str, ...]]:
        """Each categorical variable's public categories, in their declared (merge) order."""
        return {name: tuple(levels) for name, levels in self.config.categorical.items()}

    def check_categorical(self, variable: str) -> tuple[str, ...]:
        """The categories of a declared categorical variable (404 otherwise)."""
        categories = self.categories.get(variable)
        if categories is None:
            raise UnknownVariable(self.name, variable)
        return categories

    def check_time_to_event(self, variable: str) -> tuple[float, float]:
        """The follow-up range of a declared time-to-event variable (404 otherwise)."""
        declared = self.config.time_to_event.get(variable)
        if declared is None:
            raise UnknownVariable(self.name, variable)
        return declared.follow_up

    @property
    def group_column(self) -> str | None:
        return self.config.group.column if self.config.group is not None else None

    @property
    def levels(self) -> tuple[str, ...]:
        """The declared levels (``()`` without a group column)."""
        return tuple(self.config.group.levels) if self.config.group is not None else ()

    def check_variable(self, variable: str) -> str:
        if variable not in self.config.variables:
            raise UnknownVariable(self.name, variable)
        return variable

    def check_level(self, level: str) -> str:
        if level not in self.levels:
            raise UnknownLevel(self.name, level)
        return level

    def check_levels(self, levels: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Distinct declared levels (X, Y, or a table's k arms), or ``None`` (every record)."""
        if levels is None:
            return None
        seen: set[str] = set()
        for level in levels:
            self.check_level(level)
            if level in seen:
                raise UnknownLevel(self.name, f"{level} (the same level twice)")
            seen.add(level)
        return levels

    def check_columns(self) -> None:
        """Start-up: every declared column is in the source and readable, and one full read
        succeeds (a number or a missing marker in every variable's every row): what would
        otherwise fail every request is found before the center serves. Raises
        :class:`DataSourceError` whose detail is one line for the operator: dataset, column,
        table or row, and the fix (never a data value; ``docs/deploy.md``, "Start-up checks")."""
        declared, _ = self._columns()
        missing = self._guard(lambda: self.source.missing(declared), at_start=True)
        if missing:
            raise DataSourceError(
                f"dataset {self.name!r}: declared columns {missing} are not in its source; "
                f"check their spelling under [datasets.{self.name}] (variables, group.column, "
                "categorical, time_to_event's time and event) against the source's column "
                "names"
            )
        try:
            self._population(at_start=True)
        except DataSourceError as exc:
            # The columns are there but the data do not read (a text value, a broken export):
            # this dataset's problem, which need not stop the others (Datasets.check_columns).
            raise UnreadableData(exc.detail) from None

    def source_identity(self) -> SourceIdentity:
        """What the dataset's source reads (start-up: a failure says what to fix)."""
        return self._guard(self.source.identity, at_start=True)

    def population(self) -> Population:
        """The dataset's population, read once per version of its source."""
        return self._population(at_start=False)

    def _population(self, *, at_start: bool) -> Population:
        vet = self.vet
        if vet is not None:
            self._down_since_start = True
            self._guard(vet, at_start=at_start)
            self.vet = None
        version = self._guard(self.source.version, at_start=at_start)
        if version is None:
            population = self._guard(self._read, at_start=at_start)
            give_back()
            self._served()
            return population
        # One lock per dataset: requests arriving together while the data change wait for the
        # one read and share its population (one read, not one per request).
        with self._lock:
            if self._kept is not None and self._kept[0] == version:
                return self._kept[1]
            # The old population is dropped before the new one is read (a request still
            # computing on it holds its own reference): a center never keeps two.
            self._kept = None
            population = self._guard(self._read, at_start=at_start)
            # The read's transient copies (the Arrow table, masks) back to the system.
            give_back()
            # The version was taken before the read: a file changed meanwhile is read again.
            self._kept = (version, population)
            self._served()
            return population

    def _served(self) -> None:
        if self._down_since_start:
            self._down_since_start = False
            log.warning("dataset %r: unavailable since start-up, its source reads now; it is "
                        "served", self.name)

    def require(self, population: Population, level: str | None, k: int,
                variable: str | None = None) -> None:
        """Refuse (403 ``k_anonymity_refused``) a level left out of the population, or a
        selection whose public size (rounded down to the center's K) is below ``k``: decided from
        the sizes ``/v1/info`` shows, never from the exact ones. With ``variable`` (a numeric
        variable's release), the records whose value is present (``n_by_variable``: with
        complete cases, the level's size).

        In DP mode nothing is refused here: ``/v1/info`` shows no size read from the data, so
        a refusal by size would be a bit outside the accountant's ε; every DP release is
        computed on whatever the selection holds, no record included (exact kinds never get
        here: refused first, ``ReleaseKind.check_release_mode``)."""
        if self.dp_mode:
            return
        if level is not None and level not in population.levels:
            raise KAnonymityRefusal(
                f"level {level!r} of dataset {self.name!r} holds fewer than K = {self.k} "
                "complete records (its size in /v1/info is 0)"
            )
        size = population.n if level is None else population.sizes[level]
        if round_down(size, self.k) < k:
            what = "the dataset" if level is None else f"level {level!r}"
            raise KAnonymityRefusal(
                f"{what} of {self.name!r} shows fewer than K = {k} records in /v1/info"
            )
        if variable is not None and round_down(population.size(variable, level), self.k) < k:
            what = "the dataset" if level is None else f"level {level!r}"
            raise KAnonymityRefusal(
                f"{what} of {self.name!r} shows fewer than K = {k} records with {variable!r} "
                "present in /v1/info (n_by_variable)"
            )

    # -- reading ----------------------------------------------------------------------------

    def _columns(self) -> tuple[list[str], list[str]]:
        """The columns of the dataset's one read, and those read as text: the variables, the
        group column, the categorical variables, the joint variables' columns
        (:func:`center_agent.data.joint.read_columns`)."""
        group = self.group_column
        text = ([group] if group is not None else []) + list(self.categories)
        return read_columns(self.variables, text, self.joint)

    def _joint(self, table: pa.Table) -> dict[str, NDArray[np.float64]]:
        """Each joint variable's rows × parts from the dataset's read (rows aligned with every
        other column), decoded and checked (on every row, in the population or not)."""
        columns = {name: table.column(name) for v in self.joint for name in v.columns}
        ordered = isinstance(self.source, CsvFile | ParquetFile)
        return {v.name: v.decode(columns, self.name, ordered) for v in self.joint}

    def _read(self) -> Population:
        """Read the declared columns once and build the population, keeping no more than the
        sorted values: the Arrow table is dropped once its columns are numpy arrays, group codes
        are one byte per row (two or four with many levels), the complete-case mask is applied
        only when some row is left out, and each level is sorted in place."""
        group = self.group_column
        columns, text = self._columns()
        table = self.source.read(columns, text=text)
        n_rows = table.num_rows
        if group is None:
            codes = None
            declared: tuple[str, ...] = (ALL,)
        else:
            codes = self._level_codes(table.column(group))
            declared = self.levels
        values = {variable: self._as_float(table.column(variable), variable)
                  for variable in self.variables}
        # A categorical variable is kept as the float code of its category in declared order,
        # its missing cell (a missing or undeclared label) coded len(categories): it never
        # leaves a row out of the population (docs/privacy.md, guarantee 15).
        categorical = {
            name: self._category_codes(table.column(name), name, categories)
            for name, categories in self.categories.items()
        }
        # A joint variable (a time-to-event variable's time and event), its columns read in
        # the same read, rows aligned: a row missing a part is missing the variable.
        joint = self._joint(table)
        del table  # its buffers: only the numpy copies are kept from here on
        # Arrow's pool keeps the freed pages (center_agent.data.memory): returned before the
        # levels are copied out, so that the table and the levels never count together.
        pa.default_memory_pool().release_unused()
        self._check_resolutions(values)
        if self.config.missing == "per_variable":
            return self._per_variable(values, categorical, joint, codes, declared, n_rows)
        keep: NDArray[np.bool_] | None = None
        # Complete cases: a record missing its time or event is left out like one missing any
        # declared variable (every release counts the same records).
        masks = [np.isfinite(v) for v in values.values()]
        masks += [joint_present(rows) for rows in joint.values()]
        for finite in masks:
            if not finite.all():
                keep = finite if keep is None else keep & finite
        if codes is not None:
            labelled = codes >= 0
            if not labelled.all():
                keep = labelled if keep is None else keep & labelled
        if codes is None:
            counts = np.array([n_rows if keep is None else int(np.count_nonzero(keep))])
            enrolled = np.array([n_rows])
        else:
            counts = np.bincount(codes if keep is None else codes[keep],
                                 minlength=len(declared))
            enrolled = (counts if keep is None
                        else np.bincount(codes[codes >= 0], minlength=len(declared)))
        if keep is not None and not self.dp_mode:
            keep = self._fill_up(keep, codes, counts, enrolled, values, categorical, joint)
        # The one rule of the population: a level of fewer than K complete rows is left out
        # (K-anonymous mode; in DP mode every declared level is in, however few its rows).
        enough = dict(zip(declared, (counts >= self.least).tolist(), strict=True))
        included = tuple(lv for lv in declared if enough[lv])
        excluded = tuple(lv for lv in declared if not enough[lv])
        index = {lv: i for i, lv in enumerate(declared)}
        by_variable: dict[str, dict[str, NDArray[np.float64]]] = {}
        values.update(categorical)
        for variable in [*self.variables, *categorical]:
            v = values.pop(variable)
            parts = {}
            if codes is None:
                # A boolean selection is a fresh array (sorted in place); the whole column
                # is sorted as a copy only when it is a read-only view of the source's buffer.
                part = v[keep] if keep is not None else v
                if part is v and not (v.flags.writeable and v.flags.owndata):
                    part = np.sort(v)
                else:
                    part.sort()
                parts[ALL] = _frozen(part)
            else:
                # The levels one after the other in one buffer, each sorted in place there:
                # the compiled walk and the pooled merge read them as they lie, with no copy
                # (shared._walk.sorted_buffer, Population.pooled).
                sizes = [int(counts[index[level]]) for level in included]
                buffer = np.empty(sum(sizes), dtype=v.dtype)
                start = 0
                for level, size in zip(included, sizes, strict=True):
                    part = buffer[start:start + size]
                    _select_into(part, v, codes, index[level], keep)
                    part.sort()
                    parts[level] = _frozen(part)
                    start += size
                del buffer
            del v
            by_variable[variable] = parts
        by_joint: dict[str, dict[str, NDArray[np.float64]]] = {}
        for name, rows in joint.items():
            chosen = keep if keep is not None else np.ones(n_rows, dtype=bool)
            by_joint[name] = {
                level: sort_rows(rows[chosen if codes is None
                                      else chosen & (codes == index[level])])
                for level in included}
        del joint
        entered = dict(zip(declared, enrolled.tolist(), strict=True))
        left_out = None if self.dp_mode else {
            level: entered[level] - int(counts[index[level]]) for level in included}
        return Population(
            levels=included,
            excluded=tuple(lv for lv in excluded if lv != ALL),
            values=by_variable,
            fingerprint=_fingerprint(included, by_variable, left_out=left_out, joint=by_joint),
            enrolled=None if self.dp_mode else entered,
            joint=by_joint,
        )

    def _fill_up(self, keep: NDArray[np.bool_], codes: NDArray[np.signedinteger] | None,
                 counts: NDArray[np.intp], enrolled: NDArray[np.intp],
                 values: Mapping[str, NDArray[np.float64]],
                 categorical: Mapping[str, NDArray[np.float64]],
                 joint: Mapping[str, NDArray[np.float64]]) -> NDArray[np.bool_]:
        """Complete cases: each level leaving 1..K-1 of its rows out leaves out K - e more, of
        least keyed rank (:mod:`center_agent.data.leave_out`); ``counts`` is updated in place. A
        level that would keep fewer than K is left out whole: no rank is computed for it (nor
        for any level whose left-out rows are 0 or >= K already, the common case)."""
        for i in range(counts.size):
            more = fill_up(int(enrolled[i] - counts[i]), self.k)
            if not more:
                continue
            counts[i] -= more
            if counts[i] < self.k:
                continue  # out whole (the population's one rule)
            rows = np.flatnonzero(keep if codes is None else keep & (codes == i))
            keep[rows[least_ranked(self._rank_key,
                                   self._content(rows, values, categorical, joint),
                                   more)]] = False
        return keep

    def _content(self, rows: NDArray[np.intp], values: Mapping[str, NDArray[np.float64]],
                 categorical: Mapping[str, NDArray[np.float64]],
                 joint: Mapping[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """The content the keyed rank of ``rows`` is a function of: every declared variable's
        value, then every categorical code, then every joint variable's parts, in declared
        order (rows × columns)."""
        columns = [values[name] for name in self.variables] + [
            categorical[name] for name in self.categories] + [
            joint[v.name][:, j] for v in self.joint for j in range(len(v.parts))]
        return np.stack([column[rows] for column in columns], axis=1)

    def _per_variable(self, values: dict[str, NDArray[np.float64]],
                      categorical: dict[str, NDArray[np.float64]],
                      joint: dict[str, NDArray[np.float64]],
                      codes: NDArray[np.signedinteger] | None, declared: tuple[str, ...],
                      n_rows: int) -> Population:
        """The population when variables may be missing (``missing = "per_variable"``): per
        level, the records and values :func:`available_cases` keeps; each variable's values
        are those present among them. A joint variable (time-to-event) counts the kept records
        holding every part of it; it is released only with DP noise (guarantee 17), so its
        present and missing counts take no part in the K rule and never take a record from
        another variable."""
        names = list(self.variables)
        present = np.stack([np.isfinite(values[name]) for name in names])
        by_variable: dict[str, dict[str, NDArray[np.float64]]] = {
            name: {} for name in [*names, *categorical]}
        by_joint: dict[str, dict[str, NDArray[np.float64]]] = {name: {} for name in joint}
        sizes: dict[str, int] = {}
        included: list[str] = []
        excluded: list[str] = []
        for i, level in enumerate(declared):
            rows = np.arange(n_rows) if codes is None else np.flatnonzero(codes == i)
            if self.dp_mode:
                # DP mode: no K rule (it would decide from exact counts); each variable's
                # values are those present among the level's records, however few.
                kept, withheld = np.ones(rows.size, dtype=bool), np.zeros(len(names), bool)
            else:
                kept, withheld = available_cases(present[:, rows], self.k)
                more = fill_up(int(rows.size - np.count_nonzero(kept)), self.k)
                if more and np.count_nonzero(kept) - more >= self.k:
                    # K - e more of the level's records out (leave_out), then the K rule again
                    # on the rest: it may drop more (never fewer), so e stays >= K.
                    candidates = rows[kept]
                    dropped = least_ranked(
                        self._rank_key,
                        self._content(candidates, values, categorical, joint), more)
                    kept[np.flatnonzero(kept)[dropped]] = False
                    again, withheld = available_cases(present[:, rows[kept]], self.k)
                    kept[np.flatnonzero(kept)[~again]] = False
                elif more:
                    kept[:] = False  # fewer than K would stay: the level is out whole
            if not kept.any() and not self.dp_mode:
                excluded.append(level)
                continue
            rows = rows[kept]
            included.append(level)
            sizes[level] = int(rows.size)
            for j, name in enumerate(names):
                part = values[name][rows]
                part = part[np.isfinite(part)] if not withheld[j] else part[:0].copy()
                part.sort()
                by_variable[name][level] = _frozen(part)
            for name, column in categorical.items():
                part = column[rows]
                part.sort()
                by_variable[name][level] = _frozen(part)
            for name, pairs in joint.items():
                chosen = pairs[rows]
                by_joint[name][level] = sort_rows(chosen[joint_present(chosen)])
        levels = tuple(included)
        if codes is None:
            entered = {ALL: n_rows}
        else:
            counted = np.bincount(codes[codes >= 0], minlength=len(declared)).tolist()
            entered = dict(zip(declared, counted, strict=True))
        left_out = None if self.dp_mode else {
            level: entered[level] - sizes[level] for level in levels}
        return Population(
            levels=levels, excluded=tuple(lv for lv in excluded if lv != ALL),
            values=by_variable,
            fingerprint=_fingerprint(levels, by_variable, sizes, left_out, by_joint),
            level_sizes=sizes, joint=by_joint, enrolled=None if self.dp_mode else entered,
        )

    def _check_resolutions(self, values: Mapping[str, NDArray[np.float64]]) -> None:
        """Every value of a variable with a declared resolution is a multiple of it (within
        1e-6 of the resolution), on every read: at start-up the operator is told which
        variable (:class:`OffGrid`, never a value, row or count) and the center does not
        start; on a request the data source "could not be read" (a public state, the same for
        any source problem) and the log says why. Rows outside the population are checked too:
        whether a row counts must not decide whether the center serves."""
        declared = {variable: meta.resolution for variable, meta in self.config.metadata.items()
                    if meta.resolution is not None}
        if not declared:
            return  # nothing to check: no statistics imported (an operator command reads too)
        from shared.dp._common import off_grid_count  # the statistics only when checked

        for variable, resolution in declared.items():
            if off_grid_count(values[variable], resolution) > 0:
                raise OffGrid(variable, resolution)

    def _level_codes(self, labels: pa.ChunkedArray) -> NDArray[np.signedinteger]:
        """Each label's index in the declared levels; UNDECLARED or MISSING (null) otherwise
        (the smallest integer type that holds them: a byte per row for up to 127 levels)."""
        value_set = pa.array(self.levels, type=pa.string())
        dtype = np.int8 if len(self.levels) < 127 else np.int32
        chunks = []
        for chunk in labels.chunks:
            if pa.types.is_dictionary(chunk.type):
                # Look up the few distinct labels, then index by each row's dictionary entry
                # (the entry one past the end stands for a missing label).
                known = self._index_in(self._as_text(chunk.dictionary), value_set)
                lookup = np.append(known, MISSING).astype(dtype)
                entry = pc.fill_null(chunk.indices, len(chunk.dictionary))
                chunks.append(lookup[np.asarray(entry.to_numpy(zero_copy_only=False))])
            else:
                codes = self._index_in(self._as_text(chunk), value_set).astype(dtype)
                missing = np.asarray(pc.is_null(chunk).to_numpy(zero_copy_only=False), dtype=bool)
                codes[missing] = MISSING
                chunks.append(codes)
        if not chunks:
            return np.empty(0, dtype=dtype)
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def _category_codes(self, labels: pa.ChunkedArray, name: str,
                        categories: tuple[str, ...]) -> NDArray[np.float64]:
        """Each row's category index as a float; ``len(categories)`` for a missing or
        undeclared label (the missing cell)."""
        value_set = pa.array(categories, type=pa.string())
        try:
            text = pc.cast(labels, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SourceProblem(
                f"categorical variable {name!r} holds {labels.type} values, which cannot be "
                "read as categories", "declare a column of text or integer labels",
            ) from None
        found = pc.fill_null(pc.index_in(text, value_set=value_set), len(categories))
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.float64)

    @staticmethod
    def _index_in(labels: pa.Array, value_set: pa.Array) -> NDArray[np.intp]:
        codes = pc.fill_null(pc.index_in(labels, value_set=value_set), UNDECLARED)
        return np.array(codes.to_numpy(zero_copy_only=False), dtype=np.intp)

    @staticmethod
    def _as_float(column: pa.ChunkedArray, variable: str) -> NDArray[np.float64]:
        """The variable's values, NaN where missing (sources give float64 already; any other
        source's column is held to the same rule, :func:`to_float`)."""
        floats = to_float(column, variable)
        chunks = floats.chunks if isinstance(floats, pa.ChunkedArray) else [floats]
        # One chunk (a Parquet row group, a CSV block) at a time into the one array kept: the
        # column is never held twice more (filled, then concatenated) beside the table.
        out = np.empty(len(floats), dtype=np.float64)
        at = 0
        for chunk in chunks:
            out[at:at + len(chunk)] = pc.fill_null(chunk, np.nan).to_numpy(zero_copy_only=False)
            at += len(chunk)
        return out

    def _as_text(self, column: _Arrow) -> _Arrow:
        try:
            return pc.cast(column, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            group = self.group_column
            raise SourceProblem(
                f"group column {group!r} holds {column.type} values, which cannot be read as "
                "labels", "declare a column of text or integer labels as the group column",
            ) from None

    def _guard(self, read: Callable[[], _T], *, at_start: bool = False) -> _T:
        """Run a read; any error becomes a DataSourceError. On a request its detail is generic
        (what went wrong goes to the log: a caller learns nothing of the data); at start-up
        it says what to fix (``at_start``: the operator reads it)."""
        try:
            return read()
        except DataSourceError:
            raise
        except SourceProblem as exc:
            told = f"dataset {self.name!r}: {exc}"
            if at_start:
                raise DataSourceError(told) from None
            log.error("%s", told)
        except OSError as exc:
            if at_start:
                reason = exc.strerror or type(exc).__name__
                raise DataSourceError(
                    f"dataset {self.name!r}: its source could not be read ({reason}: "
                    f"{exc.filename}); check the path and that the service's user may read it"
                ) from None
            log.error("dataset %r: reading the source failed: %s", self.name, exc)
        except Exception as exc:
            # The message of an unexpected error may quote a value of the data: its type only.
            log.error("dataset %r: reading the source failed (%s)", self.name,
                      type(exc).__name__)
            log.debug("dataset %r: the failure in full", self.name, exc_info=True)
            if at_start:
                raise DataSourceError(
                    f"dataset {self.name!r}: its source could not be read "
                    f"({type(exc).__name__}); check the source's settings and format") from None
        raise DataSourceError(
            f"dataset {self.name!r}: the data source could not be read (the center's log says "
            "why)")


class UnreadableData(DataSourceError):
    """At start-up: a dataset's declared columns are there but its data do not read (the
    detail names the column, row and fix)."""


class Datasets(Mapping[str, Dataset]):
    """The configured datasets by name; ``[name]`` raises :class:`UnknownDataset`."""

    def __init__(self, datasets: Mapping[str, Dataset]) -> None:
        self._datasets = dict(datasets)
        self._vetting = threading.Lock()
        self._sources: dict[Hashable, str] = {}
        """What each dataset that passed the start-up checks reads (``SourceIdentity.key``)."""

    @classmethod
    def from_settings(cls, settings: Settings, *, secret: bytes | None = None) -> Datasets:
        """The center's datasets (this process is a center: its allocator is tuned to return
        freed arrays, :mod:`center_agent.data.memory`); ``secret`` keys the rows a level leaves
        out (the ledger's, ``center_agent.gate.keys.population_secret``)."""
        tune_allocator()
        return cls({name: Dataset(name, cfg, settings.k, secret=secret)
                    for name, cfg in settings.datasets.items()})

    def __getitem__(self, name: str) -> Dataset:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownDataset(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._datasets)

    def __len__(self) -> int:
        return len(self._datasets)

    def check_columns(self) -> dict[str, str]:
        """Start-up: :meth:`Dataset.check_columns` of each, then :meth:`check_one_source_each`
        over those that passed. A dataset that fails its own checks (its file missing or
        unreadable, a declared column, table or grant missing, its database unreachable, a
        value that is not a number: any :class:`DataSourceError`) is logged with the fix and
        left unavailable (503 ``data_source_error``, ``"available": false`` in ``/v1/info``),
        exactly as when its source fails while the center runs, and the others are served: one
        broken source does not keep the center's other datasets down. It serves once its source
        reads, without a restart, after the one check it missed (no other dataset reads the
        same source: :meth:`_vet`). Returns those datasets' problems by name.

        Two datasets over one source, or every dataset failing, stop start-up and close every
        source (a database connection must not linger): the first is a configuration the
        center must not serve, the second a center with nothing to serve, whose one line
        (``fedstats center serve`` exits 2) is the operator's fastest way to the fix."""
        broken: dict[str, DataSourceError] = {}
        try:
            for name, dataset in self._datasets.items():
                try:
                    dataset.check_columns()
                except DataSourceError as exc:
                    broken[name] = exc
            if broken and len(broken) == len(self._datasets):
                raise next(iter(broken.values()))
            identities: dict[str, SourceIdentity] = {}
            for name, dataset in self._datasets.items():
                if name in broken:
                    continue
                try:
                    identities[name] = dataset.source_identity()
                except DataSourceError as exc:
                    broken[name] = exc
            if broken and len(broken) == len(self._datasets):
                raise next(iter(broken.values()))
            self._check_identities(identities)
        except BaseException:
            self.close()
            raise
        self._sources = {identity.key: name for name, identity in identities.items()}
        for name, problem in broken.items():
            self._datasets[name].vet = self._vetter(name)
            log.error("start-up: %s; this dataset answers 503 data_source_error until its "
                      "source reads, the center's other datasets are served", problem.detail)
        if broken:
            log.warning("start-up: serving %d of %d datasets; unavailable: %s",
                        len(self._datasets) - len(broken), len(self._datasets),
                        ", ".join(repr(name) for name in broken))
        return {name: problem.detail for name, problem in broken.items()}

    def _vetter(self, name: str) -> Callable[[], None]:
        return lambda: self._vet(name)

    def _vet(self, name: str) -> None:
        """Before the first read of a dataset that was unavailable at start-up: the check it
        missed then (:meth:`check_one_source_each`). Its source must read something no other
        dataset reads, told apart as at start-up; otherwise it stays unavailable and the log
        says which datasets to declare as one (two budgets of the same patients are never
        served). Under one lock, so that two such datasets over one source never both pass."""
        dataset = self._datasets[name]
        with self._vetting:
            identity = dataset.source.identity()  # a failure: still unavailable (_guard)
            other = self._sources.get(identity.key)
            if other is not None and other != name:
                problem = self._one_source_error([other, name], identity.what)
                log.error("dataset %r stays unavailable: %s", name, problem.detail)
                raise DataSourceError(f"dataset {name!r}: the data source could not be read "
                                      "(the center's log says why)")
            self._sources[identity.key] = name

    def check_one_source_each(self) -> None:
        """Start-up: no two datasets read the same source (one file, however its path is
        spelled; one table or one query of one database; ``SourceIdentity``). Two datasets over
        one source are two populations, two disclosure memories and two budgets of the same
        patients: two releases that each pass their own dataset's guards differ by the rows one
        of them leaves out (missing a variable only the other declares: a count in 1..K-1), and
        ε is spent twice on each record (``docs/privacy.md``, "One source, one dataset"). So the
        center stops, naming the datasets and how to declare them as one, rather than sharing a
        population between two names (which would still leave two budgets)."""
        self._check_identities({name: dataset.source_identity()
                                for name, dataset in self._datasets.items()})

    def _check_identities(self, identities: Mapping[str, SourceIdentity]) -> None:
        """:meth:`check_one_source_each` over the identities given."""
        by_source: dict[Hashable, list[str]] = {}
        told: dict[Hashable, str] = {}
        for name, identity in identities.items():
            by_source.setdefault(identity.key, []).append(name)
            told.setdefault(identity.key, identity.what)
        for key, names in by_source.items():
            if len(names) > 1:
                raise self._one_source_error(names, told[key])

    def _one_source_error(self, names: list[str], what: str) -> DataSourceError:
        datasets = [self._datasets[name] for name in names]
        keep, *others = names
        variables = list(dict.fromkeys(v for d in datasets for v in d.variables))
        groups = list(dict.fromkeys(d.group_column for d in datasets if d.group_column))
        listed = ", ".join(repr(name) for name in names[:-1]) + f" and {names[-1]!r}"
        grouped = (f", group column {groups[0]!r}" if len(groups) == 1 else
                   f", one group column (they group by {groups}: keep one)" if groups else "")
        removed = ", ".join(f"[datasets.{name}]" for name in others)
        return DataSourceError(
            f"datasets {listed} read {what}: two datasets over one source keep two populations, "
            "two disclosure memories and two budgets of the same patients, and their "
            "differences can give away counts below K; declare them as one dataset: "
            f"[datasets.{keep}] with variables {variables}{grouped} and one epsilon_total, "
            f"and remove {removed}")

    def close(self) -> None:
        for dataset in self._datasets.values():
            dataset.source.close()
