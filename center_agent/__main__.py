"""``python -m center_agent [--config FILE]``: validate the settings and serve with uvicorn."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from center_agent.core.config import ConfigError, Settings, load_settings
from center_agent.core.errors import CenterError
from center_agent.main import create_app


def serve(settings: Settings) -> None:
    """Run the center under uvicorn (TLS when ``tls_certfile``/``tls_keyfile`` are set)."""
    app = create_app(settings)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=str(settings.tls_certfile) if settings.tls_certfile else None,
        ssl_keyfile=str(settings.tls_keyfile) if settings.tls_keyfile else None,
        server_header=False,
        log_level="info",
    )


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
