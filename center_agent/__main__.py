"""``python -m center_agent [--config FILE]``: validate the settings and serve with uvicorn."""

from __future__ import annotations

import sys

from center_agent.core.config import Settings
from center_agent.main import create_app
from fedstats_service import entry


def main(argv: list[str] | None = None) -> int:
    """Serve the center (TLS when ``tls_certfile``/``tls_keyfile`` are set); exit code."""
    return entry.main(Settings, create_app, argv, prog="python -m center_agent",
                      description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
