"""What every spec and result model shares: the base models (extra keys refused, frozen), the most
group levels a spec names, a variable's name and a center left out."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

DescribeMode = Literal["dp", "table"]


class _Spec(BaseModel):
    """A part of a study spec: frozen, and a field it does not declare is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# The most group levels a spec may name (``StudySpec.groups``).
MAX_GROUPS = 32


class _AnalysisSpec(_Spec):
    """One analysis of a spec (its module: ``coordinator/analyses/<kind>.py``)."""

    # The fewest group levels it compares (0: it runs on every record, or on each of the
    # spec's levels) and the most (none: any number); a spec naming fewer or more is refused.
    min_groups: ClassVar[int] = 0
    max_groups: ClassVar[int | None] = 2
    # How the refusal of a spec with fewer levels than ``min_groups`` names the analysis and
    # what it needs: "{article} {kind} analysis needs `groups` ({groups_needed})".
    article: ClassVar[str] = "a"
    groups_needed: ClassVar[str] = "the two levels X and Y"


VariableName = Annotated[str, Field(min_length=1, max_length=128,
                                     pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class _Result(BaseModel):
    """A part of a study's result: frozen; infinite table limits serialize as ``"±Infinity"``."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    @classmethod
    def of(cls, source: object, **values: Any) -> Self:
        """The part made of ``source``'s same-named attributes (a core result or a release),
        then ``values`` (what the source names otherwise or lacks)."""
        shared = {name: getattr(source, name) for name in cls.model_fields
                  if name not in values and hasattr(source, name)}
        return cls(**shared, **values)


class ExcludedCenter(_Result):
    """A center left out of an analysis (``allow_partial``), and why."""

    center: str
    kind: str
    detail: str
    center_error: str | None = None
