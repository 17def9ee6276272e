"""A study's provenance as each caller may see it.

An admin sees every answer a center gave, as received. An analyst sees what is needed to trust
the result without the raw intermediate numbers the protocols combine (a center's own bin counts,
refinement run totals, local U statistics, noised moment sums, ...): for each answer its center,
call, dataset, the request's public parameters, the ε the center spent, and the noise's mechanism
and scale where the answer states them, with the time received. The signed table a refinement
request carries (a peer's statement of its limits) is left out too: the result holds the
federated table's limits.
"""

from __future__ import annotations

import json
from typing import Any

from coordinator.db import ReleaseRecord
from coordinator.models import Provenance
from shared.fields import canonical_method

# Request fields that are not public parameters of the question.
PRIVATE_REQUEST_FIELDS = frozenset({"table"})


def _noise(call: str, response: dict[str, Any]) -> tuple[str | None, float | None]:
    """(mechanism, scale) of an answer, where it states them."""
    if call == "mwu":
        noise = response.get("noise")
        return (noise["kind"], noise["scale"]) if isinstance(noise, dict) else (None, None)
    if call == "dp_boxplot":
        # DPBoxplot's version by its current name (shared.fields.canonical_method).
        return canonical_method(response.get("method")), response.get("outlier_scale")
    if call == "dp_quantiles":
        return response.get("algorithm"), None
    if call == "dp_tree_histogram":
        return "laplace", response.get("noise_scale")
    if call == "dp_threshold_counts":
        return "laplace", response.get("scale")
    if call == "dp_extremes":
        return "unbounded_walk", None
    if call == "yj_moments":
        return "laplace", None
    return None, None


def _epsilon(call: str, request: dict[str, Any] | None, response: dict[str, Any]) -> float | None:
    if call == "info":
        return None
    value = response.get("epsilon")
    if value is None and request is not None:
        value = request.get("epsilon")
    return float(value) if value is not None else 0.0


def provenance(record: ReleaseRecord, *, full: bool) -> Provenance:
    """One answer as an admin (``full``) or an analyst sees it."""
    asked = json.loads(record.request)
    request: dict[str, Any] | None = asked["request"]
    response: dict[str, Any] = json.loads(record.response)
    mechanism, scale = _noise(record.kind, response)
    if not full and request is not None:
        request = {k: v for k, v in request.items() if k not in PRIVATE_REQUEST_FIELDS}
    return Provenance(
        center=record.center, call=record.kind, dataset=asked["dataset"] or None,
        request=request, epsilon=_epsilon(record.kind, request, response), mechanism=mechanism,
        noise_scale=scale, response=response if full else None, received_at=record.received_at,
    )
