"""The web console under ``/ui`` (docs/console.md): server-rendered pages over the same functions
the REST API's routes call, so the console is no second API.

Pages: sign-in, the catalog, the study builder (with the dry run's plan before submitting, or an
uploaded study TOML), the studies with their live status, a study's results (the report's
sections, ``coordinator.reporting.report``, with figures to download and the raw JSON), and for
admins
the centers' health and the audit log. Sign-in and CSRF: :mod:`coordinator.ui.sessions`. Every
asset is served by the coordinator (``/ui/static``); nothing is loaded from elsewhere.
"""

from __future__ import annotations

from coordinator.ui.routes import STATIC_DIR, router

__all__ = ["STATIC_DIR", "router"]
