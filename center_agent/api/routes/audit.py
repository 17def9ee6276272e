"""``GET /v1/audit``: the audit trail, for the center's operator only (an operator token,
``operator_tokens``; the router's dependency refuses the coordinator's tokens with 403).

Records come in increasing ``id``; a page holds at most ``limit`` of them and names the
``after_id`` of the next one. What a record holds: ``center_agent.audit``; the operator's view:
``docs/privacy.md``, "Audit trail".
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from center_agent.api.deps import GateDep
from center_agent.audit import MAX_PAGE, AuditPage, AuditQuery

router = APIRouter(tags=["audit"])


class AuditParams(BaseModel):
    """The query's filters; an unknown parameter is a 422 naming it (a misspelt filter must not
    silently return everything)."""

    model_config = ConfigDict(extra="forbid")

    since: datetime | None = Field(default=None,
                                   description="records written at or after (ISO 8601; UTC if "
                                               "no zone is given)")
    until: datetime | None = Field(default=None, description="records written before (ISO 8601)")
    dataset: str | None = Field(default=None, max_length=128)
    study: str | None = Field(default=None, max_length=64, description="a study id")
    analyst: str | None = Field(default=None, max_length=64, description="an analyst id")
    limit: int = Field(default=1000, ge=1, le=MAX_PAGE, description="records per page")
    after_id: int = Field(default=0, ge=0,
                          description="the page after this record (next_after_id of the last)")


@router.get("/audit")
def read_audit(params: Annotated[AuditParams, Query()], gate: GateDep) -> AuditPage:
    """The audit trail: every release, answer served from the store and refusal, with who asked
    (token fingerprint, study, analyst, request id), the question, ε and the data version."""
    return gate.audit(AuditQuery(
        since=params.since, until=params.until, dataset=params.dataset, study=params.study,
        analyst=params.analyst, after_id=params.after_id, limit=params.limit,
    ))
