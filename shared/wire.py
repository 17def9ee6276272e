"""The base of every wire model and the canonical JSON of request keys and signatures.

Kept apart from ``shared.protocol`` (which re-exports both) so that what only stores or reads
records (a center's audit trail, the operator's commands) imports pydantic and nothing of the
statistics.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict

_Result = TypeVar("_Result")


class CenterErrorCode:
    """The ``error`` code strings a center answers its refusals and failures with (its error
    classes, ``center_agent.core.errors``, take theirs from here): the wire's vocabulary, so a
    caller (the coordinator) reads a center's answer without importing the center."""

    UNKNOWN_DATASET = "unknown_dataset"
    UNKNOWN_VARIABLE = "unknown_variable"
    UNKNOWN_LEVEL = "unknown_level"
    INVALID_REQUEST = "invalid_request"
    COMPUTE_ALLOWANCE_EXCEEDED = "compute_allowance_exceeded"
    FORBIDDEN = "forbidden"
    DATA_SOURCE_ERROR = "data_source_error"
    DATA_MOVED = "data_moved"
    PRIVACY_REFUSAL = "privacy_refusal"
    BUDGET_EXCEEDED = "budget_exceeded"
    RELEASE_DISABLED = "release_disabled"
    CALL_CAP_EXCEEDED = "call_cap_exceeded"
    K_ANONYMITY_REFUSED = "k_anonymity_refused"
    DP_MODE_REFUSES_EXACT = "dp_mode_refuses_exact"
    EPSILON_CAP_EXCEEDED = "epsilon_cap_exceeded"
    UNTRUSTED_TABLE = "untrusted_table"
    RELEASE_LIMIT_REACHED = "release_limit_reached"
    DATA_CHANGED = "data_changed"
    INTERNAL_ERROR = "internal_error"


class WireModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    def to_payload(self) -> Any:
        """Plain JSON-compatible data (infinities as strings), e.g. for a ledger to store."""
        return json.loads(self.model_dump_json())

    @classmethod
    def _from_fields(cls, result: Any, **values: Any) -> Self:
        """The model whose fields are the same-named fields of ``result`` (a core dataclass),
        then ``values`` (fields the result names otherwise or lacks)."""
        shared = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                  if f.name in cls.model_fields and f.name not in values}
        return cls(**shared, **values)

    def _to_fields(self, result_type: type[_Result], **values: Any) -> _Result:
        """The ``result_type`` dataclass made of this model's same-named fields, then ``values``."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(result_type)  # type: ignore[arg-type]
                  if f.init and f.name in type(self).model_fields and f.name not in values}
        return result_type(**shared, **values)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, no NaN: equal values give equal strings (request keys,
    signatures)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
