"""Where a dataset's rows come from: CSV, Parquet or SQL, each read into a ``pyarrow.Table``.

A source only ever reads the columns it is asked for, and those names have already been checked
against the configuration (``center_agent.data.Dataset``); SQL identifiers are additionally quoted
by SQLAlchemy, never formatted into a statement.

**What "numeric" means** (the same at start-up and on every request, ``docs/deploy.md``,
"Start-up checks"). Every declared variable is read as float64. A value is numeric when Arrow
parses it as a number (``'.'`` as the decimal point, an optional exponent, ``inf``; in a CSV file
surrounding spaces are ignored) or when it is a *missing marker*: a NULL, or in a CSV file one of
:data:`MISSING_MARKERS` (a blank, ``NA``, ``n/a``, ``NULL``, ``NaN`` ...). A missing (or
infinite) value leaves its row out of the complete cases the population counts; anything else
(``12,5``, ``<5``, ``unknown``, a date) is a :class:`NotNumeric` problem, which the center
reports at start-up and refuses to serve from.

**Problems are told without data.** A :class:`SourceProblem` says what is wrong and how to fix it
with names an operator chose (dataset, setting, file path, column, table, role), a row number and
a type at most, for the operator's log only (a caller is told the source could not be read):
never a value of the data, and never a database's error text that may quote one (SQLSTATE class
22, data exceptions).
"""

from __future__ import annotations

import io
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import sqlalchemy as sa

from center_agent.core.config import CsvSource, ParquetSource, SqlSource

log = logging.getLogger(__name__)

MISSING_MARKERS: tuple[str, ...] = (
    "", "NA", "N/A", "n/a", "#N/A", "#N/A N/A", "#NA", "NULL", "null", "NaN", "nan", "-NaN",
    "-nan", "1.#IND", "-1.#IND", "1.#QNAN", "-1.#QNAN",
)
"""CSV cells read as a missing value (Arrow's defaults, spelled out so that what counts as
missing does not change with the Arrow version)."""

_Arrow = TypeVar("_Arrow", pa.Array, pa.ChunkedArray)
_R = TypeVar("_R")


class SourceProblem(Exception):
    """Something in a dataset's source its operator must fix: what is wrong and the fix, in one
    line, without a data value (``str()`` gives both)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem = problem
        self.fix = fix


class NotNumeric(SourceProblem):
    """A declared variable holds a value that is neither a number nor missing. ``row`` is the
    first such data row (from 1, the header not counted) where the source has a stable order;
    ``kind`` the column's or value's type where that is the reason."""

    def __init__(self, column: str, *, row: int | None = None, kind: str | None = None,
                 sql: bool = False) -> None:
        where = f" (first in data row {row}, the header not counted)" if row is not None else ""
        what = f" holds {kind} values, not numbers" if kind is not None else (
            " holds a value that is neither a number nor a missing marker")
        # A database column is fixed where the operator controls it: in the query the center
        # runs (a view of the table), not by editing the hospital's records.
        fix = (f"cast it in the query: give the source a `query` such as SELECT CAST(NULLIF("
               f"{column}, '') AS double precision) AS {column}, ... (a CASE turning every "
               "non-numeric text into NULL), or clean the column; if it holds labels, declare "
               "it as the dataset's group column instead of a variable (docs/deploy.md, "
               "\"SQL sources\")" if sql else
               "clean the column (numbers with '.' as the decimal point; leave a missing value "
               "blank or write NA) or, if it holds labels, declare it as the dataset's group "
               "column instead of a variable")
        super().__init__(f"variable {column!r}{what}{where}", fix)
        self.column = column
        self.row = row


class OffGrid(SourceProblem):
    """A variable's values are not all recorded at the resolution its metadata declares
    (``[datasets.X.metadata.v] resolution``). Grid-aware DP quantiles rely on it (off-grid data
    make them 5-10 times worse, ``docs/methods.md`` §5.10), so the center refuses to serve the
    dataset until the declaration or the data are fixed. Neither the values, their rows nor
    their number are told: only the variable and its declared resolution."""

    def __init__(self, column: str, resolution: float) -> None:
        super().__init__(
            f"variable {column!r} holds values that are not multiples of its declared "
            f"resolution {resolution:g}",
            f"declare the resolution the values are recorded at (or none) under "
            f"[datasets.<name>.metadata.{column}], or round the column to it",
        )
        self.column = column
        self.resolution = resolution


@dataclass(frozen=True)
class SourceIdentity:
    """What a source reads, told apart from every other source of the center: two sources with
    equal ``key`` read the same rows (one file, one table or one query of one database), however
    their settings spell it (a relative path, a symlink, a hard link; ``cohort`` or
    ``public.cohort``; ``localhost`` or ``127.0.0.1``). ``what`` names it for the operator, without
    a path or a URL (``docs/privacy.md``, "One source, one dataset")."""

    key: Hashable
    what: str


class DataSource(Protocol):
    """Reads whole columns by name."""

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        """The named columns (in that order), every row. ``text`` names the label columns (read
        as strings, possibly dictionary-encoded); every other column is float64 (a missing value
        NaN) or the read raises :class:`NotNumeric`."""
        ...

    def missing(self, columns: Sequence[str]) -> list[str]:
        """Those of ``columns`` the source does not have (checked at start-up, reading no row);
        raises :class:`SourceProblem` when some cannot be read (a database permission)."""
        ...

    def version(self) -> Hashable | None:
        """A value that changes whenever the data may have changed, or ``None`` when the source
        cannot tell cheaply (then nothing read from it is kept between requests)."""
        ...

    def identity(self) -> SourceIdentity:
        """What the source reads (checked at start-up: two datasets may not read the same)."""
        ...

    def close(self) -> None: ...


def file_identity(path: Path) -> SourceIdentity:
    """A file by its device and inode: every path that reaches it (relative, through a symlink
    or a hard link, a bind mount) gives the same key."""
    st = os.stat(path)
    return SourceIdentity(("file", st.st_dev, st.st_ino), "the same file")


def file_version(path: Path) -> Hashable:
    """Identity, size and modification time: a file replaced or rewritten gets a new version."""
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_file(path: Path, what: str, key: str) -> None:
    """The data file is there, is a file, and this process may read it; otherwise a
    :class:`SourceProblem` naming the path, the setting (``key``) and the fix. Run before a
    file's columns are looked up (start-up), so the operator reads the reason rather than the
    reader's."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise SourceProblem(
            f"its {what} file {path} does not exist",
            f"check `{key}`, or put the file there (the dataset is served once it reads, "
            "without a restart)") from None
    except OSError as exc:
        raise SourceProblem(
            f"its {what} file {path} cannot be reached ({exc.strerror or type(exc).__name__})",
            f"check `{key}` and that the service's user may enter its directories") from None
    if not stat.S_ISREG(st.st_mode):
        raise SourceProblem(f"its {what} path {path} is not a file",
                            f"give the data file itself in `{key}`")
    if not os.access(path, os.R_OK):
        raise SourceProblem(
            f"its {what} file {path} may not be read by the service's user (permission denied)",
            "let that user read it (its owner, group or mode; in Docker, the volume's)")


def _casts(values: _Arrow) -> bool:
    try:
        pc.cast(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def first_unparsable(strings: _Arrow) -> int | None:
    """Index of the first non-null string Arrow cannot parse as a number, or ``None``.

    Found by halving (each step casts half of what is left: about two casts of the column in
    all), so it follows Arrow's own parsing rule exactly instead of imitating it."""
    if _casts(strings):
        return None
    lo, hi = 0, len(strings)  # the first bad index lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _casts(strings.slice(lo, mid - lo)):
            lo = mid
        else:
            hi = mid
    return lo


def to_float(column: _Arrow, name: str) -> _Arrow:
    """``column`` as float64 (nulls kept), or :class:`NotNumeric` naming the first bad row
    (text) or the column's type (dates, bytes, ...)."""
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        try:
            return pc.cast(column, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise NotNumeric(name, kind=str(column.type)) from None
    row = first_unparsable(column)
    if row is None:
        return pc.cast(column, pa.float64())
    raise NotNumeric(name, row=row + 1)


class CsvFile:
    def __init__(self, path: Path, *, key: str = "path") -> None:
        self.path = Path(path)
        self.key = key

    def _options(self, columns: Sequence[str], types: dict[str, pa.DataType]
                 ) -> pa_csv.ConvertOptions:
        return pa_csv.ConvertOptions(
            include_columns=list(columns),
            column_types=types,
            null_values=list(MISSING_MARKERS),
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        )

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        # Numbers parsed by the reader as float64 (not guessed from the first block): one rule
        # for every row of a variable, and a bad cell is an error, never a text column.
        numeric = [c for c in columns if c not in text]
        types = {name: pa.string() for name in text} | dict.fromkeys(numeric, pa.float64())
        try:
            return pa_csv.read_csv(self.path, convert_options=self._options(columns, types))
        except pa.ArrowInvalid:
            # Arrow's message quotes the bad cell: dropped; found again (row, not value) below.
            pass
        self._locate(numeric)
        raise self._malformed()  # not a bad number: the file itself

    @staticmethod
    def _malformed() -> SourceProblem:
        return SourceProblem(
            "the file could not be parsed as CSV (a row with more or fewer fields than the "
            "header, or an unclosed quote)",
            "check it with a CSV tool: every row as many fields as the header, quotes closed",
        )

    def _locate(self, numeric: Sequence[str]) -> None:
        """Raise :class:`NotNumeric` for the first numeric column holding a bad cell."""
        try:
            strings = pa_csv.read_csv(
                self.path,
                convert_options=self._options(numeric, dict.fromkeys(numeric, pa.string())))
        except pa.ArrowInvalid:
            return
        for name in numeric:
            # The reader ignores spaces around a number; Arrow's cast does not.
            row = first_unparsable(pc.utf8_trim_whitespace(strings.column(name)))
            if row is not None:
                raise NotNumeric(name, row=row + 1)

    def missing(self, columns: Sequence[str]) -> list[str]:
        check_file(self.path, "CSV", self.key)
        try:  # the reader parses the first block to find the names: it may meet a bad row
            with pa_csv.open_csv(self.path) as reader:
                present = set(reader.schema.names)
        except pa.ArrowInvalid:
            raise self._malformed() from None
        return [c for c in columns if c not in present]

    def version(self) -> Hashable:
        return file_version(self.path)

    def identity(self) -> SourceIdentity:
        return file_identity(self.path)

    def close(self) -> None:
        pass


class ParquetFile:
    def __init__(self, path: Path, *, key: str = "path") -> None:
        self.path = Path(path)
        self.key = key

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        # Labels dictionary-encoded: a few distinct strings and an index per row, cheaper to
        # read and to map to group codes than a string per row.
        text_columns = [c for c in text if c in columns]
        table = pq.read_table(self.path, columns=list(columns), read_dictionary=text_columns)
        return pa.table({name: table.column(name) if name in text_columns
                         else to_float(table.column(name), name) for name in columns})

    def missing(self, columns: Sequence[str]) -> list[str]:
        check_file(self.path, "Parquet", self.key)
        try:
            present = set(pq.read_schema(self.path).names)
        except pa.ArrowInvalid:
            raise SourceProblem("the file could not be read as Parquet (not a Parquet file, or "
                                "a truncated one)",
                                "export it again, or give the source the file's `kind`") from None
        return [c for c in columns if c not in present]

    def version(self) -> Hashable:
        return file_version(self.path)

    def identity(self) -> SourceIdentity:
        return file_identity(self.path)

    def close(self) -> None:
        pass


# -- SQL ----------------------------------------------------------------------------------------

INSUFFICIENT_PRIVILEGE = "42501"
UNDEFINED_COLUMN = "42703"
UNDEFINED_TABLE = "42P01"
_DENIED_TABLE = re.compile(r"permission denied for (?:table|relation|view) ([\w.\"]+)")


def _sqlstate(exc: sa.exc.DBAPIError) -> str | None:
    """The SQLSTATE of a driver error (psycopg 3: ``sqlstate``, psycopg2: ``pgcode``)."""
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return str(state) if state else None


def _first_line(exc: sa.exc.DBAPIError) -> str:
    return str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""


def describe_db_error(exc: sa.exc.DBAPIError) -> str:
    """A driver error for the operator: its class, SQLSTATE and first line, but not the text
    of a data exception (SQLSTATE class 22 quotes the value that failed) nor any detail line."""
    state = _sqlstate(exc)
    name = type(exc.orig).__name__
    head = f"{name}, SQLSTATE {state}" if state else name
    if state is not None and state.startswith(("22", "23")):
        return head
    line = _first_line(exc)
    return f"{head}: {line}" if line else head


def _undefined_column(exc: sa.exc.DBAPIError) -> bool:
    if _sqlstate(exc) == UNDEFINED_COLUMN:
        return True
    return _first_line(exc).startswith("no such column")  # SQLite has no SQLSTATE


def _denied(exc: sa.exc.DBAPIError) -> bool:
    return _sqlstate(exc) == INSUFFICIENT_PRIVILEGE


class _Blocks(io.RawIOBase):
    """The blocks of a ``COPY ... TO STDOUT`` as a readable byte stream (one block at a time
    in memory, never the whole answer)."""

    def __init__(self, blocks: Iterator[Any]) -> None:
        self._blocks = blocks
        self._rest = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._rest = memoryview(block).cast("B")
        n = min(len(buffer), len(self._rest))
        buffer[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


class SqlTable:
    """A table, or the result of an operator's query, in any database SQLAlchemy can reach."""

    def __init__(self, url: str, *, table: str | None = None, query: str | None = None,
                 version_query: str | None = None, version_ttl_s: float = 0.0) -> None:
        if (table is None) == (query is None):
            raise ValueError("give exactly one of `table` or `query`")
        if version_ttl_s < 0:
            raise ValueError("version_ttl_s must be >= 0")
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.table = table
        self._query = query
        # The operator's, from the config file (never the caller's), like ``query``.
        self._version_query = sa.text(version_query) if version_query is not None else None
        self._ttl_s = float(version_ttl_s)
        self._ttl_lock = threading.Lock()
        self._generation = 0
        self._generation_started: float | None = None
        self._from: sa.FromClause
        if table is not None:
            schema, _, name = table.rpartition(".")
            self._from = sa.table(name, schema=schema or None)
        else:
            assert query is not None
            # The query is the operator's (from the config file), never the caller's.
            self._from = sa.text(query).columns().subquery("fedstats_src")

    def _select(self, columns: Sequence[str]) -> sa.Select[Any]:
        wanted: list[sa.ColumnClause[Any]] = [sa.column(c) for c in columns]
        return sa.select(*wanted).select_from(self._from)

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        if self.engine.dialect.name == "postgresql" and self.engine.dialect.driver == "psycopg":
            table = self._copy(columns, text)
            if table is not None:
                return table
        return self._rows(columns, text)

    def _copy(self, columns: Sequence[str], text: Sequence[str]) -> pa.Table | None:
        """PostgreSQL: the rows as CSV from ``COPY (SELECT ...) TO STDOUT``, streamed into Arrow's
        CSV reader (1.1-1.3x faster than fetching rows at 10^7, ``docs/benchmarks.md``, "Hospital
        scale"). ``None`` (then :meth:`_rows` reads, and names any problem) when the statement
        fails or a value does not parse as its column's type: the fast path never decides what
        is numeric. Floats are sent with every digit (``extra_float_digits = 3``), NULL as an
        unquoted empty field, an empty label as a quoted one."""
        statement = self._select(columns).compile(dialect=self.engine.dialect)
        types = {name: pa.dictionary(pa.int32(), pa.string()) if name in text else pa.float64()
                 for name in columns}
        options = pa_csv.ConvertOptions(column_types=types, null_values=[""],
                                        strings_can_be_null=True,
                                        quoted_strings_can_be_null=False)
        try:
            with self.engine.connect() as conn:
                driver = conn.connection.driver_connection
                assert driver is not None
                with driver.cursor() as cur:
                    cur.execute("SET LOCAL extra_float_digits = 3")
                    sql = f"COPY ({statement}) TO STDOUT (FORMAT csv)"
                    # SQLAlchemy's statement listeners (an audit, the tests' counter) see it
                    # as any statement it runs itself.
                    conn.dispatch.before_cursor_execute(conn, cur, sql, {}, None, False)
                    with cur.copy(sql) as copy:
                        stream = io.BufferedReader(_Blocks(iter(copy)), buffer_size=1 << 20)
                        return pa_csv.read_csv(
                            stream,
                            read_options=pa_csv.ReadOptions(column_names=list(columns),
                                                            block_size=8 << 20),
                            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                            convert_options=options)
        except Exception as exc:
            # The message may quote a value: its type only; the rows path reads and tells.
            log.debug("COPY read fell back to fetching rows (%s)", type(exc).__name__)
            return None

    def _rows(self, columns: Sequence[str], text: Sequence[str]) -> pa.Table:
        rows = self._run(lambda conn: conn.execute(self._select(columns)).all())
        # Transpose in C (zip), then convert each column in one call: numbers (int, float,
        # Decimal incl. NaN, NULL -> NaN) through numpy, ``text`` columns through Arrow.
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
        return pa.table({name: pa.array(col) if name in text else self._floats(name, col)
                         for name, col in zip(columns, cols, strict=True)})

    @staticmethod
    def _floats(name: str, values: Sequence[Any]) -> pa.Array:
        try:
            return pa.array(np.array(values, dtype=np.float64))
        except (ValueError, TypeError):
            pass  # numpy's message quotes the value: dropped
        for v in values:
            try:
                np.float64(v if v is not None else np.nan)
            except (ValueError, TypeError):
                # The database returns rows in no fixed order: a row number would mislead.
                raise NotNumeric(name, kind=type(v).__name__, sql=True) from None
        raise NotNumeric(name, sql=True)

    def missing(self, columns: Sequence[str]) -> list[str]:
        """Probe the declared columns only: a role granted ``SELECT (a, b)`` on a table may not
        run ``SELECT *`` on it, so a table is probed with ``SELECT a, b FROM t LIMIT 0`` and,
        when that fails, column by column, to name the missing and the unreadable ones. A
        query's columns are those of its answer (``SELECT * FROM (query) LIMIT 0``)."""
        if self.table is None:
            star: sa.Select[Any] = (
                sa.select(sa.literal_column("*")).select_from(self._from).limit(0))
            names = self._run(lambda conn: list(conn.execute(star).keys()))
            return [c for c in columns if c not in names]
        if self._probe(columns) is None:
            return []
        missing, denied = [], []
        for column in columns:
            exc = self._probe([column])
            if exc is None:
                continue
            if _undefined_column(exc):
                missing.append(column)
            elif _denied(exc):
                denied.append(column)
            else:
                raise self._problem(exc)
        if denied:
            raise self._denied_problem(denied, None)
        return missing

    def _probe(self, columns: Sequence[str]) -> sa.exc.DBAPIError | None:
        """The error of ``SELECT columns FROM table LIMIT 0``, or ``None``."""
        try:
            with self.engine.connect() as conn:
                conn.execute(self._select(columns).limit(0))
        except sa.exc.DBAPIError as exc:
            return exc
        return None

    def _run(self, work: Callable[[sa.Connection], _R], *, what: str | None = None) -> _R:
        """``work`` on a connection; a driver error becomes a :class:`SourceProblem` (``what``
        names the statement that failed, when it is not the data's)."""
        try:
            with self.engine.connect() as conn:
                return work(conn)
        except sa.exc.DBAPIError as exc:
            if what is not None:
                raise SourceProblem(f"{what} failed ({describe_db_error(exc)})",
                                    "check it, the database in `url` and the role's SELECT on "
                                    "the tables it reads") from None
            if _denied(exc):
                raise self._denied_problem([], exc) from None
            raise self._problem(exc) from None

    def _role(self) -> str:
        """The database role the center connects as (for the GRANT it needs)."""
        try:
            with self.engine.connect() as conn:
                if conn.dialect.name == "postgresql":
                    return str(conn.execute(sa.text("SELECT current_user")).scalar_one())
        except sa.exc.SQLAlchemyError as exc:
            # Only the wording of a GRANT hint depends on it: the URL's user names the role.
            log.debug("current_user could not be read (%s)", type(exc).__name__)
        return self.engine.url.username or "<the center's role>"

    def _denied_problem(self, columns: list[str], exc: sa.exc.DBAPIError | None
                        ) -> SourceProblem:
        role = self._role()
        if self.table is not None:
            listed = ", ".join(columns) or "<the declared columns>"
            return SourceProblem(
                f"role {role!r} may not read columns {columns} of table {self.table} "
                f"(permission denied, SQLSTATE {INSUFFICIENT_PRIVILEGE})",
                f"grant them: GRANT SELECT ({listed}) ON {self.table} TO {role}",
            )
        found = _DENIED_TABLE.search(_first_line(exc)) if exc is not None else None
        table = found.group(1) if found else "<the table>"
        return SourceProblem(
            f"role {role!r} may not read every column the dataset's query reads "
            f"(permission denied for table {table}, SQLSTATE {INSUFFICIENT_PRIVILEGE})",
            f"grant them: GRANT SELECT (<each column of {table} the query uses>) ON {table} "
            f"TO {role}",
        )

    def _problem(self, exc: sa.exc.DBAPIError) -> SourceProblem:
        what = f"table {self.table}" if self.table is not None else "the dataset's query"
        if _sqlstate(exc) == UNDEFINED_TABLE or _first_line(exc).startswith("no such table"):
            told = (f"table {self.table} does not exist" if self.table is not None
                    else "the dataset's query reads a table that does not exist")
            return SourceProblem(
                f"{told} or the role cannot see it ({describe_db_error(exc)})",
                "check `table` (schema.name) or the query, the database in `url`, and the "
                "role's USAGE on the schema",
            )
        return SourceProblem(f"reading {what} failed ({describe_db_error(exc)})",
                             "check `url`, the table or query, and the database")

    def version(self) -> Hashable | None:
        """The answer of the operator's ``version_query`` (one row; it changes when the data
        do), else a generation that advances every ``version_ttl_s`` seconds, else (TTL 0)
        ``None``: a database gives no change marker that works for every table and query, so
        the operator names one or accepts data up to ``version_ttl_s`` old."""
        if self._version_query is not None:
            return ("query", self._run(self._version_row, what="the dataset's version_query"))
        if self._ttl_s == 0:
            return None
        now = time.monotonic()
        with self._ttl_lock:
            if self._generation_started is None:
                self._generation_started = now
            elif now - self._generation_started >= self._ttl_s:
                self._generation += 1
                self._generation_started = now
            return ("ttl", self._generation)

    def _version_row(self, conn: sa.Connection) -> tuple[Any, ...]:
        assert self._version_query is not None
        rows = conn.execute(self._version_query).all()
        if len(rows) != 1:
            raise SourceProblem(
                f"the dataset's version_query answered {len(rows)} rows, not one",
                "write it to answer one row that changes whenever the data do, e.g. "
                "SELECT max(updated_at), count(*) FROM <table>")
        return tuple(rows[0])

    def identity(self) -> SourceIdentity:
        """The database, asked rather than read from the URL where it can tell (PostgreSQL: its
        system identifier and database name; SQLite: the file's device and inode), and in it the
        table (PostgreSQL: its OID, resolved on the role's search path as the reads resolve it)
        or the query's text with its white space collapsed. A query and a table over the same
        rows, or two queries that differ in their text, are not told apart (``docs/privacy.md``,
        "One source, one dataset")."""
        database = self._database()
        if self.table is None:
            assert self._query is not None
            text = " ".join(self._query.split())
            return SourceIdentity(("sql", database, "query", text),
                                  "the same query of one database")
        return SourceIdentity(("sql", database, "table", self._run(self._resolved_table)),
                              f"table {self.table} of one database")

    def _database(self) -> Hashable:
        url = self.engine.url
        backend = url.get_backend_name()
        if backend == "sqlite":
            name = url.database or ""
            if name in ("", ":memory:") or "mode=memory" in str(url):
                return ("sqlite-memory", id(self))  # private to this engine
            st = os.stat(name)
            return ("sqlite", st.st_dev, st.st_ino)
        if backend == "postgresql":
            asked = sa.text("SELECT (SELECT system_identifier FROM pg_control_system()), "
                            "current_database()")
            try:
                with self.engine.connect() as conn:
                    return ("postgresql", *tuple(conn.execute(asked).one()))
            except sa.exc.DBAPIError as exc:  # a server without it: the URL tells
                log.debug("the database's identity was not given (%s)", type(exc).__name__)
        port = url.port if url.port is not None else "default"
        return (backend, (url.host or "").lower(), port, url.database)

    def _resolved_table(self, conn: sa.Connection) -> Hashable:
        assert self.table is not None
        schema, _, name = self.table.rpartition(".")
        if conn.dialect.name == "postgresql":
            quoted = conn.dialect.identifier_preparer.format_table(self._from)
            oid = conn.execute(sa.text("SELECT to_regclass(:name)::oid"),
                               {"name": quoted}).scalar_one()
            if oid is not None:
                return ("oid", int(oid))
        if not schema:
            schema = sa.inspect(conn).default_schema_name or ""
        if conn.dialect.name == "sqlite":  # names without case there
            return (schema.lower(), name.lower())
        return (schema, name)

    def close(self) -> None:
        self.engine.dispose()


def open_source(config: CsvSource | ParquetSource | SqlSource, *,
                key: str = "source") -> DataSource:
    """The source ``config`` declares (``key``: its settings key, named in problems). Nothing is
    read or connected to here: a file that is not there, or a database that does not answer,
    is found when the source is read."""
    if isinstance(config, CsvSource):
        return CsvFile(config.path, key=f"{key}.path")
    if isinstance(config, ParquetSource):
        return ParquetFile(config.path, key=f"{key}.path")
    return SqlTable(config.connect_url(), table=config.table, query=config.query,
                    version_query=config.version_query, version_ttl_s=config.version_ttl_s)
