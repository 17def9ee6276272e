"""Where a dataset's rows come from: CSV, Parquet or SQL, each read into a ``pyarrow.Table``.

A source only ever reads the columns it is asked for, and those names have already been checked
against the configuration (``center_agent.data.Dataset``); SQL identifiers are additionally quoted
by SQLAlchemy, never formatted into a statement.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import sqlalchemy as sa

from center_agent.core.config import CsvSource, ParquetSource, SqlSource


class DataSource(Protocol):
    """Reads whole columns by name."""

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        """The named columns (in that order), every row. ``text`` names the label columns (read
        as strings, possibly dictionary-encoded, where the format guesses types); every other
        column is numeric."""
        ...

    def columns(self) -> list[str]:
        """Names of all columns the source has (checked against the config at start-up)."""
        ...

    def version(self) -> Hashable | None:
        """A value that changes whenever the data may have changed, or ``None`` when the source
        cannot tell cheaply (then nothing read from it is kept between requests)."""
        ...

    def close(self) -> None: ...


def file_version(path: Path) -> Hashable:
    """Identity, size and modification time: a file replaced or rewritten gets a new version."""
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class CsvFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        convert = pa_csv.ConvertOptions(
            include_columns=list(columns),
            column_types={name: pa.string() for name in text},
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        )
        return pa_csv.read_csv(self.path, convert_options=convert)

    def columns(self) -> list[str]:
        with pa_csv.open_csv(self.path) as reader:
            return list(reader.schema.names)

    def version(self) -> Hashable:
        return file_version(self.path)

    def close(self) -> None:
        pass


class ParquetFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        # Labels dictionary-encoded: a few distinct strings and an index per row, cheaper to
        # read and to map to group codes than a string per row.
        text_columns = [c for c in text if c in columns]
        return pq.read_table(self.path, columns=list(columns), read_dictionary=text_columns)

    def columns(self) -> list[str]:
        return list(pq.read_schema(self.path).names)

    def version(self) -> Hashable:
        return file_version(self.path)

    def close(self) -> None:
        pass


class SqlTable:
    """A table, or the result of an operator's query, in any database SQLAlchemy can reach."""

    def __init__(self, url: str, *, table: str | None = None, query: str | None = None) -> None:
        if (table is None) == (query is None):
            raise ValueError("give exactly one of `table` or `query`")
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self._from: sa.FromClause
        if table is not None:
            schema, _, name = table.rpartition(".")
            self._from = sa.table(name, schema=schema or None)
        else:
            assert query is not None
            # The query is the operator's (from the config file), never the caller's.
            self._from = sa.text(query).columns().subquery("fedstats_src")

    def read(self, columns: Sequence[str], *, text: Sequence[str] = ()) -> pa.Table:
        with self.engine.connect() as conn:
            wanted: list[sa.ColumnClause[Any]] = [sa.column(c) for c in columns]
            stmt: sa.Select[*tuple[Any, ...]] = sa.select(*wanted).select_from(self._from)
            rows = conn.execute(stmt).all()
        # Transpose in C (zip), then convert each column in one call: numbers (int, float,
        # Decimal incl. NaN, NULL -> NaN) through numpy, ``text`` columns through Arrow.
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
        return pa.table(
            {
                name: pa.array(col) if name in text else pa.array(np.array(col, dtype=np.float64))
                for name, col in zip(columns, cols, strict=True)
            }
        )

    def columns(self) -> list[str]:
        with self.engine.connect() as conn:
            stmt: sa.Select[Any] = sa.select(sa.literal_column("*")).select_from(self._from)
            return list(conn.execute(stmt.limit(0)).keys())

    def version(self) -> None:
        # A database gives no cheap change marker that works for every table and query.
        return None

    def close(self) -> None:
        self.engine.dispose()


def open_source(config: CsvSource | ParquetSource | SqlSource) -> DataSource:
    if isinstance(config, CsvSource):
        return CsvFile(config.path)
    if isinstance(config, ParquetSource):
        return ParquetFile(config.path)
    return SqlTable(config.url, table=config.table, query=config.query)
