"""A batch of releases (``POST /v1/datasets/{dataset}/releases``) item by item: each item's
request validated by its kind's model, the valid ones answered by the gate together
(``ReleaseGate.release_batch``), each answer in the shape its own call would have had."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from center_agent.gate import ReleaseGate
from center_agent.gate.kinds import ReleaseKind
from fedstats_service.errors import InvalidFields, NotFound, ServiceError
from shared.protocol import BatchAnswer, BatchRelease, BatchRequest, ErrorBody, WireModel


def answer_batch(gate: ReleaseGate, dataset: str, body: BatchRequest,
                 kinds: Mapping[str, ReleaseKind[Any, Any]], caller: str) -> BatchRelease:
    """Every item's answer, in order: a validation error in its slot, else the gate's."""
    parsed, answers = batch_items(body, kinds)
    released = iter(gate.release_batch(dataset, parsed, caller) if parsed else [])
    return BatchRelease(answers=[answer if answer is not None else batch_answer(next(released))
                                 for answer in answers])


def batch_items(
    body: BatchRequest, kinds: Mapping[str, ReleaseKind[Any, Any]]
) -> tuple[list[tuple[ReleaseKind[Any, Any], WireModel]], list[BatchAnswer | None]]:
    """The items that validate, as (kind, request), for the gate; and one slot per item, holding
    the error answer of an item that does not (an unknown kind, an invalid request) or ``None``
    where the gate's answer goes."""
    parsed: list[tuple[ReleaseKind[Any, Any], WireModel]] = []
    answers: list[BatchAnswer | None] = []
    for index, item in enumerate(body.items):
        kind = kinds.get(item.kind)
        if kind is None:
            answers.append(batch_answer(NotFound(
                f"items.{index}.kind: no release kind named {item.kind!r} (one of "
                f"{', '.join(sorted(kinds))})")))
            continue
        try:
            request = kind.request_model.model_validate(item.request)
        except ValidationError as exc:
            located = [{**err, "loc": ("items", index, "request", *err.get("loc", ()))}
                       for err in exc.errors()]
            answers.append(batch_answer(InvalidFields(located)))
            continue
        parsed.append((kind, request))
        answers.append(None)
    return parsed, answers


def batch_answer(answer: WireModel | ServiceError) -> BatchAnswer:
    """An item's answer: the release with 200, or the error body with its status."""
    if isinstance(answer, ServiceError):
        return BatchAnswer(status=answer.status_code,
                           error=ErrorBody.model_validate(answer.body()))
    return BatchAnswer(status=200, release=answer.to_payload())
