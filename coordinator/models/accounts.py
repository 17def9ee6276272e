"""Analyst accounts, shares, quotas and the audit trail (docs/coordinator.md, "Analyst
accounts")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

AnalystRole = Literal["analyst", "admin"]


AnalystId = Annotated[str, Field(min_length=1, max_length=64,
                                 pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]


class ShareRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    analyst_id: AnalystId


class Share(BaseModel):
    """An analyst who may read (and resume) a study besides its owner."""

    study_id: str
    analyst_id: str
    shared_by: str | None
    created_at: str


class NewAnalyst(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    role: AnalystRole = "analyst"
    expires_in_days: float | None = Field(
        default=None, gt=0, le=36_600, allow_inf_nan=False,
        description="the token stops working this many days from now (default: never)")


class RotateAnalyst(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expires_in_days: float | None = Field(
        default=None, gt=0, le=36_600, allow_inf_nan=False,
        description="the new token stops working this many days from now (default: never)")


class AnalystView(BaseModel):
    id: str
    name: str
    role: str
    created_at: str
    revoked_at: str | None
    expires_at: str | None = Field(
        default=None, description="when the token stops working (UTC; null: never)")


class AnalystCreated(AnalystView):
    token: str = Field(description="the account's bearer token: shown this once, kept hashed")


class QuotaRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epsilon: float | None = Field(ge=0, le=1e6, allow_inf_nan=False,
                                  description="the most ε; null removes the quota")


class Quota(BaseModel):
    analyst_id: str
    center: str
    dataset: str
    epsilon: float | None = Field(description="the quota; none: unlimited")
    spent: float = Field(description="ε the analyst's studies spent there")


class AuditEntry(BaseModel):
    id: int
    at: str
    analyst_id: str | None = Field(description="none: the operator at the command line, or a "
                                               "refused token")
    token_id: str | None = Field(description="fingerprint of the token used")
    action: str
    target: str | None
    request_id: str | None
    detail: str | None
