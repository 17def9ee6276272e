"""``python -m coordinator [--config FILE]``: validate the settings and serve with uvicorn."""

from __future__ import annotations

import argparse
import sys

from coordinator.core.config import ConfigError, Settings, load_settings
from coordinator.main import create_app
from fedstats_service.serving import serve as serve_app


def serve(settings: Settings) -> None:
    """Run the coordinator under uvicorn."""
    serve_app(create_app(settings), host=settings.host, port=settings.port,
              header_timeout_s=settings.header_timeout_s, max_concurrency=settings.max_concurrency)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator", description=__doc__)
    parser.add_argument("--config", help="TOML file (default: $FEDSTATS_COORDINATOR_CONFIG)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"fedstats coordinator: {exc}", file=sys.stderr)
        return 2
    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
