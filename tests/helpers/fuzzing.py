"""Schemathesis driven by hand (its pytest plugin does not load under pytest 9): the operations
of an OpenAPI schema, cases aimed at the test dataset so that the generated numbers (ε, bounds,
levels, limits, grids) reach the statistics instead of meeting 404s, and the check that no
generated request makes a service answer 500."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Aim = Callable[[Any], None]


def operations(schema: Any) -> list[Any]:
    """Every operation of ``schema``."""
    return [result.ok() for result in schema.get_all_operations()]


def aim_center(case: Any) -> None:
    """A center request at dataset ``cohort``, variable ``x``, levels ``a`` and ``b``."""
    if "dataset" in (case.path_parameters or {}):
        case.path_parameters["dataset"] = "cohort"
    body = case.body
    if isinstance(body, dict):
        if "variable" in body:
            body["variable"] = "x"
        if "groups" in body:
            body["groups"] = ["a", "b"]
        if body.get("group") is not None:
            body["group"] = "a"


def aim_study(variable: str, groups: Sequence[str], centers: Sequence[str]) -> Aim:
    """A coordinator request at dataset ``cohort``: its variable, levels and centers."""

    def aim(case: Any) -> None:
        body = case.body
        if isinstance(body, dict):
            body.update(dataset="cohort", variable=variable)
            if "groups" in body:
                body["groups"] = list(groups)
            if isinstance(body.get("centers"), list):
                body["centers"] = list(centers)

    return aim


def never_a_server_error(operations: Sequence[Any], headers: dict[str, str], aim: Aim, *,
                         max_examples: int) -> None:
    """``max_examples`` generated cases per operation, sent with ``headers`` (through the ASGI
    app the schema was loaded from), half of them aimed: none may be answered with a 500."""
    from schemathesis.checks import not_a_server_error  # not at collection: it takes seconds

    for operation in operations:

        @given(case=operation.as_strategy(), aimed=st.booleans())
        @settings(max_examples=max_examples, deadline=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: Any, aimed: bool) -> None:
            if aimed:
                aim(case)
            response = case.call(headers=headers)
            case.validate_response(response, checks=[not_a_server_error])

        run()
