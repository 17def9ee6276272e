"""A stored study as the shown half reads it: the API's view (``GET /v1/studies/{id}``, as
JSON) with its spec and result validated here, once, into the coordinator's models; everything
past this boundary reads attributes (``coordinator/analyses/<kind>.py``).

A store outlives versions: a study may hold an analysis this version does not read (a kind from a
newer coordinator, a result stored in an older shape). Each analysis is validated on its own, so
one it cannot read is left out of what is read here (the report still names it,
``rendering.py``) and the others are shown as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import TypeAdapter, ValidationError

from coordinator.models import Analysis as AnalysisSpec
from coordinator.models import AnalysisResult, StudySpec

_ASKED: TypeAdapter[AnalysisSpec] = TypeAdapter(AnalysisSpec)
_FOUND: TypeAdapter[AnalysisResult] = TypeAdapter(AnalysisResult)


def _read(adapter: TypeAdapter[Any], raw: Any) -> Any | None:
    try:
        return adapter.validate_python(raw)
    except ValidationError:
        return None


@dataclass(frozen=True)
class Shown:
    """One study's view, typed: its ``spec`` and the analyses it can read."""

    view: dict[str, Any]

    @cached_property
    def _raw_spec(self) -> dict[str, Any]:
        raw = self.view.get("spec")
        return raw if isinstance(raw, dict) else {}

    @cached_property
    def asked(self) -> list[AnalysisSpec | None]:
        """The spec's analyses in its order; none where this version cannot read one."""
        return [_read(_ASKED, a) for a in self._raw_spec.get("analyses") or []]

    @cached_property
    def found(self) -> list[AnalysisResult | None]:
        """The result's analyses in the spec's order; none where an analysis failed, or where
        this version cannot read its result."""
        result = self.view.get("result")
        raw = result.get("analyses") if isinstance(result, dict) else None
        return [_read(_FOUND, a) for a in raw or []]

    @cached_property
    def spec(self) -> StudySpec:
        """The study's spec; one whose analyses this version does not all read keeps its own
        fields (dataset, variable, groups, K, ...) and the analyses it does read."""
        try:
            return StudySpec.model_validate(self._raw_spec)
        except ValidationError:
            return self._readable_spec()

    def _readable_spec(self) -> StudySpec:
        """The spec's own fields with the analyses this version reads (validated where they
        still make a valid spec, else taken as stored: what is shown reads them only)."""
        readable = [a for a in self.asked if a is not None]
        fields = {k: v for k, v in self._raw_spec.items()
                  if k in StudySpec.model_fields and k not in ("analyses", "primary")}
        try:
            return StudySpec.model_validate({**fields, "analyses": readable})
        except ValidationError:
            groups = fields.get("groups")
            return StudySpec.model_construct(
                **{**fields, "groups": tuple(groups) if groups else None,
                   "analyses": readable})

    def succeeded(self) -> Iterator[tuple[int, AnalysisSpec, AnalysisResult]]:
        """(index, the spec's analysis, its result) of every analysis that gave a result this
        version reads, in the spec's order."""
        for index, (asked, found) in enumerate(zip(self.asked, self.found, strict=False)):
            if asked is not None and found is not None and asked.kind == found.kind:
                yield index, asked, found
