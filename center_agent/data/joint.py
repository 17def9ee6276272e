"""Variables of several columns, read together: one declared joint read per variable.

A **joint variable** is a record's value made of several source columns (a time-to-event
variable: its time and its event indicator). Its columns are read in the dataset's one read with
every other declared column (``Dataset._read``: one ``DataSource.read`` of the dataset's columns,
so its rows stay aligned with the group column and with each other, from every source kind: CSV,
Parquet, SQL), and each column is decoded by its part's rule into float64 (NaN where missing).
The variable's value of a row is the row of its decoded parts, ``(rows, parts)``; the row is
*present* when every part is (a row missing any part is missing the variable).

A part is either numeric (read as float64 like a declared variable, then checked) or a label
(read as text, then mapped to a number by a declared table of labels). A value that breaks the
part's rule is a data problem of the dataset (:class:`BadJointValue`: the variable, its column
and the first data row where the source has a stable order, never the value), reported at
start-up and on a request like a value that is not a number (``center_agent.data.sources``).

What a dataset keeps of a joint variable is in ``Population.joint``: per level, the present
records' rows, sorted lexicographically (the row order of the source tells nothing) and
read-only. How a missing part counts depends on the dataset's ``missing`` mode
(``center_agent.data``, ``docs/center.md``, "Time-to-event variables").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from center_agent.core.config import TimeToEventConfig, event_texts
from center_agent.data.sources import SourceProblem, to_float

__all__ = ["BadJointValue", "JointPart", "JointVariable", "time_to_event"]

FloatArray = NDArray[np.float64]


class BadJointValue(SourceProblem):
    """A column of a joint variable holds a value its part's rule does not accept (``what``
    says which rule), first in data row ``row`` (from 1, the header not counted) where the
    source has a stable order. Neither the value nor the number of such rows is told."""

    def __init__(self, dataset: str, variable: str, column: str, what: str, fix: str, *,
                 row: int | None = None) -> None:
        where = f" (first in data row {row}, the header not counted)" if row is not None else ""
        super().__init__(
            f"column {column!r} of time-to-event variable {variable!r} holds {what}{where}",
            fix.replace("<dataset>", dataset))
        self.column = column
        self.row = row


@dataclass(frozen=True)
class JointPart:
    """One column of a joint variable: read as a label (``text``) or as a number, and decoded
    by ``decode`` (the column read, the dataset's name, whether the source's rows have a stable
    order) into float64, NaN where missing; raises :class:`BadJointValue`."""

    column: str
    text: bool
    decode: Callable[[pa.ChunkedArray, str, bool], FloatArray]


@dataclass(frozen=True)
class JointVariable:
    """A declared variable of several columns (module docstring)."""

    name: str
    parts: tuple[JointPart, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(part.column for part in self.parts)

    def decode(self, columns: Mapping[str, pa.ChunkedArray], dataset: str, ordered: bool
               ) -> FloatArray:
        """The variable's rows × parts from the dataset's read (NaN where missing)."""
        decoded = [part.decode(columns[part.column], dataset, ordered) for part in self.parts]
        n = decoded[0].size if decoded else 0
        out = np.empty((n, len(decoded)), dtype=np.float64)
        for j, values in enumerate(decoded):
            out[:, j] = values
        return out


def present(rows: FloatArray) -> NDArray[np.bool_]:
    """Which rows hold every part (a joint variable's present records)."""
    return np.asarray(~np.isnan(rows).any(axis=1), dtype=bool)


def sort_rows(rows: FloatArray) -> FloatArray:
    """``rows`` ordered by their first part, then the next (lexicographically), read-only."""
    if rows.shape[0] > 1:
        rows = rows[np.lexsort(rows.T[::-1])]
    else:
        rows = rows.copy()
    rows.flags.writeable = False
    return rows


def _first(bad: NDArray[np.bool_], ordered: bool) -> int | None:
    return int(np.flatnonzero(bad)[0]) + 1 if ordered else None


def _floats(column: pa.ChunkedArray) -> FloatArray:
    return np.asarray(pc.fill_null(column, np.nan).to_numpy(zero_copy_only=False),
                      dtype=np.float64)


def _time_part(name: str, column: str) -> JointPart:
    def decode(values: pa.ChunkedArray, dataset: str, ordered: bool) -> FloatArray:
        try:
            t = _floats(to_float(values, column))
        except SourceProblem as exc:  # not a number: said as for a variable
            raise BadJointValue(dataset, name, column, "a value that is not a number",
                                exc.fix, row=getattr(exc, "row", None)) from None
        bad = ~np.isnan(t) & ~((t >= 0) & np.isfinite(t))
        if bad.any():
            raise BadJointValue(
                dataset, name, column, "a negative or infinite time",
                "times are from the start of follow-up: finite and >= 0 (leave a missing time "
                "blank or write NA); fix the column, or the query that computes it",
                row=_first(bad, ordered))
        return t
    return JointPart(column, text=False, decode=decode)


def _event_part(name: str, column: str, config: TimeToEventConfig) -> JointPart:
    events = pa.array([t for v in config.event_values for t in event_texts(v)], pa.string())
    censored = pa.array([t for v in config.censored_values for t in event_texts(v)], pa.string())

    def decode(values: pa.ChunkedArray, dataset: str, ordered: bool) -> FloatArray:
        if pa.types.is_dictionary(values.type):
            values = pc.cast(values, values.type.value_type)
        try:  # every column type as text: 1 and 1.0 read "1", a boolean "true"
            text = pc.utf8_trim_whitespace(pc.cast(values, pa.string()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise BadJointValue(
                dataset, name, column, f"{values.type} values",
                "give the event column as labels or numbers (e.g. 1 for the event, 0 for "
                "censored)") from None
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        is_event = np.asarray(pc.fill_null(pc.is_in(text, value_set=events), False)
                              .to_numpy(zero_copy_only=False), dtype=bool)
        is_censored = np.asarray(pc.fill_null(pc.is_in(text, value_set=censored), False)
                                 .to_numpy(zero_copy_only=False), dtype=bool)
        missing = np.asarray(pc.is_null(text).to_numpy(zero_copy_only=False), dtype=bool)
        bad = ~(is_event | is_censored | missing)
        if bad.any():
            raise BadJointValue(
                dataset, name, column, "a value that is neither an event nor a censoring value",
                f"declare it under [datasets.<dataset>.time_to_event.{name}] in `event_values` "
                "or `censored_values`, or leave a missing value blank",
                row=_first(bad, ordered))
        out = np.where(is_event, 1.0, 0.0)
        out[missing] = np.nan
        return out
    return JointPart(column, text=True, decode=decode)


def time_to_event(name: str, config: TimeToEventConfig) -> JointVariable:
    """A time-to-event variable's joint read: (time, event) per row, the event 1.0 (one of
    ``event_values``) or 0.0 (one of ``censored_values``)."""
    return JointVariable(name, (_time_part(name, config.time),
                                _event_part(name, config.event, config)))


def joint_variables(declared: Mapping[str, TimeToEventConfig]) -> tuple[JointVariable, ...]:
    """Every joint variable a dataset declares, in declared order."""
    return tuple(time_to_event(name, config) for name, config in declared.items())


def read_columns(variables: Sequence[str], text: Sequence[str],
                 joint: Sequence[JointVariable]) -> tuple[list[str], list[str]]:
    """The columns of a dataset's one read and those of them read as text: the declared
    variables, the label columns (group, categorical), then each joint variable's columns not
    already read. A joint label column that is also a numeric variable is read as a number (the
    variable's rule) and decoded from that."""
    columns = list(dict.fromkeys([*variables, *text]))
    labels = list(text)
    for variable in joint:
        for part in variable.parts:
            if part.column not in columns:
                columns.append(part.column)
                if part.text:
                    labels.append(part.column)
    return columns, labels
