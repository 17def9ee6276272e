"""``python -m center_agent [--config FILE]``: validate the settings and serve with uvicorn."""

from __future__ import annotations

import argparse
import sys

from center_agent.core.config import ConfigError, Settings, load_settings
from center_agent.core.errors import CenterError
from center_agent.main import create_app
from fedstats_service.serving import serve as serve_app


def serve(settings: Settings) -> None:
    """Run the center under uvicorn (TLS when ``tls_certfile``/``tls_keyfile`` are set)."""
    app = create_app(settings)
    serve_app(app, host=settings.host, port=settings.port, certfile=settings.tls_certfile,
              keyfile=settings.tls_keyfile, header_timeout_s=settings.header_timeout_s,
              max_concurrency=settings.max_concurrency)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m center_agent", description=__doc__)
    parser.add_argument("--config", help="TOML file (default: $FEDSTATS_CENTER_CONFIG)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"fedstats center: {exc}", file=sys.stderr)
        return 2
    try:
        serve(settings)
    except CenterError as exc:  # e.g. a declared column missing from its source
        print(f"fedstats center: {exc.detail}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
