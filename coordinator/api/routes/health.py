from __future__ import annotations

from fastapi import APIRouter

from coordinator.models import Health

router = APIRouter(tags=["service"])


@router.get("/health")
def health() -> Health:
    """Liveness; the only endpoint that needs no token."""
    return Health()
