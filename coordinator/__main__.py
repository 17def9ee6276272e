"""``python -m coordinator [--config FILE]``: validate the settings and serve with uvicorn."""

from __future__ import annotations

import sys

from coordinator.core.config import Settings
from coordinator.main import create_app
from fedstats_service import entry


def main(argv: list[str] | None = None) -> int:
    """Serve the coordinator; exit code."""
    return entry.main(Settings, create_app, argv, prog="python -m coordinator",
                      description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
