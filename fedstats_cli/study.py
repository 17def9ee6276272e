"""Study files and unattended runs against a coordinator's analyst API.

A study file is the coordinator's study spec (``coordinator.models.StudySpec``) written as TOML::

    dataset = "cohort"
    variable = "los_days"
    groups = ["control", "treated"]
    k = 10

    [[analyses]]
    kind = "table"
    lower = 0.0

    [[analyses]]
    kind = "mwu"
    tests = ["sum", "weighted", "fisher", "table"]

It is validated here first (a typo fails before anything is sent), then ``POST /v1/studies``;
the run is polled until it ends, and its view (spec, result, error, every release the centers
gave it) is written as ``study.json`` next to ``report.html``.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from coordinator.models import StudySpec
from fedstats_service.errors import describe_errors

FINAL = frozenset({"succeeded", "failed", "failed_resumable"})


class StudyFileError(ValueError):
    """The study file is unreadable or not a valid spec; the message names the key."""


def load_spec(path: Path) -> dict[str, Any]:
    """The spec of a TOML study file, validated against the coordinator's ``StudySpec``."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StudyFileError(f"{path}: {exc}") from None
    check_spec(raw, source=str(path))
    return raw


def check_spec(spec: dict[str, Any], *, source: str = "study") -> None:
    try:
        StudySpec.model_validate(spec)
    except ValidationError as exc:
        problems = describe_errors(exc.errors(include_url=False, include_input=False),
                                   empty="(top level)")
        raise StudyFileError(f"{source}: {problems}") from None


def run_study(
    client: httpx.Client,
    spec: dict[str, Any],
    *,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Create the study, poll it until it ends and return its view (``GET /v1/studies/{id}``)."""
    created = client.post("/v1/studies", json=spec)
    if created.status_code != 202:
        raise RuntimeError(f"the coordinator refused the study ({created.status_code}): "
                           f"{created.text[:2000]}")
    url = created.json()["status_url"]
    progress(f"study {created.json()['id']} created")
    deadline = time.monotonic() + timeout_s
    last = ("", -1)
    while True:
        # Polled without the provenance (it grows to megabytes); read in full once at the end.
        view: dict[str, Any] = client.get(url, params={"provenance": "false"}).raise_for_status(
        ).json()
        state = (view["status"], view["releases_received"])
        if state != last:
            progress(f"{state[0]}: {state[1]} releases received")
            last = state
        if view["status"] in FINAL:
            full: dict[str, Any] = client.get(url).raise_for_status().json()
            return full
        if time.monotonic() > deadline:
            raise TimeoutError(f"study still {view['status']} after {timeout_s:.0f} s")
        time.sleep(0.2)


def analyst_client(base_url: str, token: str, *, timeout_s: float = 30.0) -> httpx.Client:
    return httpx.Client(
        base_url=base_url.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
        timeout=timeout_s, trust_env=False,
    )


def write_view(view: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "study.json"
    path.write_text(json.dumps(view, indent=2) + "\n")
    return path
