"""fedstats' Python client for analysts (notebooks, scripts): studies built in Python, run on a
coordinator, results as pandas frames and matplotlib plots (docs/client.md).

    from fedstats_client import Client, Study

    fs = Client("https://coordinator.example.org:8800")      # token: FEDSTATS_ANALYST_TOKEN
    study = fs.run(Study("cohort", "los_days", groups=["control", "treated"]).table().mwu())
    study.result.mwu.to_frame()

It talks to the coordinator over HTTP only and imports none of the services' server code
(``center_agent``, ``fedstats_service``, FastAPI, SQLAlchemy, uvicorn): the spec and the
answers are validated with the coordinator's API models (``coordinator.models``, a leaf of
pydantic and the core's field types). Install with ``pip install 'fedstats[client]'``.
"""

from fedstats_client.aio import AsyncClient
from fedstats_client.client import Client
from fedstats_client.errors import (
    AnalysisFailed,
    AuthenticationError,
    CenterFailed,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    FedstatsError,
    Forbidden,
    InvalidRequest,
    NoSuchAnalysis,
    NotFound,
    QuotaExceeded,
    StudyFailed,
    Unavailable,
    Unsupported,
)
from fedstats_client.results import CatalogView, PlanView, Results, StudyRecord
from fedstats_client.spec import SpecError, Study

__all__ = [
    "AnalysisFailed",
    "AsyncClient",
    "AuthenticationError",
    "CatalogView",
    "CenterFailed",
    "Client",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "FedstatsError",
    "Forbidden",
    "InvalidRequest",
    "NoSuchAnalysis",
    "NotFound",
    "PlanView",
    "QuotaExceeded",
    "Results",
    "SpecError",
    "Study",
    "StudyFailed",
    "StudyRecord",
    "Unavailable",
    "Unsupported",
]
