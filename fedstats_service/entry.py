"""The command both services start from (``python -m center_agent``, ``python -m coordinator``,
``fedstats center|coordinator serve``): read the settings, build the app, serve it.

Exit codes: 0 when the server stops; 2 when the settings are invalid or the service cannot start
on them (a declared column missing from its source, say), with one line on stderr,
``fedstats <service>: <what is wrong>``. The line names keys and files, never a secret: config
errors never echo values, and a ``ServiceError``'s detail holds no data.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from fedstats_service import logging as service_logging
from fedstats_service.errors import ServiceError
from fedstats_service.settings import ConfigError, ServiceSettings

if TYPE_CHECKING:  # the web stack is imported to serve, not by the operator's commands
    from fastapi import FastAPI

S = TypeVar("S", bound=ServiceSettings)


def reporting_errors(service: str, run: Callable[[], int]) -> int:
    """``run()``'s exit code, or 2 with the one-line message when it raises a configuration or
    service error."""
    try:
        return run()
    except ConfigError as exc:
        print(f"fedstats {service}: {exc}", file=sys.stderr)
    except ServiceError as exc:
        print(f"fedstats {service}: {exc.detail}", file=sys.stderr)
    return 2


def serve_settings(app: FastAPI, settings: ServiceSettings) -> None:
    """Serve ``app`` with uvicorn as ``settings`` say (HTTPS when they name TLS files; mutual
    TLS when they name ``tls_client_ca`` too)."""
    from fedstats_service.serving import serve

    certfile, keyfile = settings.tls_files or (None, None)
    serve(app, host=settings.host, port=settings.port, certfile=certfile, keyfile=keyfile,
          client_ca=settings.tls_client_ca, header_timeout_s=settings.header_timeout_s,
          max_concurrency=settings.max_concurrency)


def main(
    settings_cls: type[S],
    create_app: Callable[[S], FastAPI],
    argv: list[str] | None,
    *,
    prog: str,
    description: str | None,
) -> int:
    """Parse ``[--config FILE]``, load ``settings_cls``, configure the process's logging
    (``fedstats_service.logging``: before the app is built, so that its start-up lines are in
    the settings' format too) and serve ``create_app(settings)``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", help=f"TOML file (default: ${settings_cls.CONFIG_ENV})")
    args = parser.parse_args(argv)

    def run() -> int:
        settings = settings_cls.load(args.config)
        service_logging.configure(settings)
        serve_settings(create_app(settings), settings)
        return 0

    return reporting_errors(settings_cls.SERVICE, run)
