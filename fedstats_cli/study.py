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
gave it) is written as ``study.json`` next to ``report.html``. A study the coordinator left
``failed_resumable`` (it stopped mid-study) is run again with ``POST /v1/studies/{id}/resume``
and waited for the same way (:func:`resume_study`).

An HTTPS coordinator is trusted as ``fedstats_service.tls.client_context`` says: the CA bundle
given (``--ca-bundle``), else ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else the system's store.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from coordinator.models import StudySpec
from fedstats_service import tls
from fedstats_service.errors import describe_errors

FINAL = frozenset({"succeeded", "partially_failed", "failed", "failed_resumable"})


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
        raise RuntimeError(f"the coordinator refused the study {_refusal(created)}")
    progress(f"study {created.json()['id']} created")
    return wait_study(client, created.json()["status_url"], timeout_s=timeout_s,
                      progress=progress)


def resume_study(
    client: httpx.Client,
    study_id: str,
    *,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run a ``failed_resumable`` study again (the releases it received are not asked again),
    poll it until it ends and return its view."""
    resumed = client.post(f"{study_path(study_id)}/resume")
    if resumed.status_code != 202:
        raise RuntimeError(f"the coordinator did not resume study {study_id} "
                           f"{_refusal(resumed)}")
    progress(f"study {study_id} resumed")
    return wait_study(client, resumed.json()["status_url"], timeout_s=timeout_s,
                      progress=progress)


def study_status(client: httpx.Client, study_id: str) -> dict[str, Any]:
    """The study's view without its provenance (``GET /v1/studies/{id}?provenance=false``)."""
    answer = client.get(study_path(study_id), params={"provenance": "false"})
    if answer.status_code != 200:
        raise RuntimeError(f"no status for study {study_id} {_refusal(answer)}")
    view: dict[str, Any] = answer.json()
    return view


def wait_study(
    client: httpx.Client,
    url: str,
    *,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Poll the study at ``url`` until it ends (:data:`FINAL`) and return its full view."""
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


def study_path(study_id: str) -> str:
    """``/v1/studies/<id>``, the id escaped (it comes from a command line)."""
    return f"/v1/studies/{quote(study_id, safe='')}"


def _refusal(answer: httpx.Response) -> str:
    """``(status): error: detail`` of an error answer (its text when it is not the error body)."""
    try:
        body = answer.json()
        said = f"{body['error']}: {body['detail']}"
    except (ValueError, KeyError, TypeError):
        said = answer.text[:2000]
    return f"({answer.status_code}): {said}"


def analyst_client(
    base_url: str, token: str, *, timeout_s: float = 30.0, ca_bundle: Path | None = None
) -> httpx.Client:
    """A client of the coordinator's analyst API. Over HTTPS it trusts ``ca_bundle`` only, when
    given, else ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else the system's store
    (``fedstats_service.tls``): httpx itself, with ``trust_env=False`` (no proxy from the
    environment), would read none of them.

    Raises ``fedstats_service.tls.TrustError`` when ``ca_bundle`` cannot be read as PEM.
    """
    return httpx.Client(
        base_url=base_url.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
        timeout=timeout_s, trust_env=False, verify=tls.client_context(ca_bundle),
    )


def connection_problem(exc: httpx.HTTPError, *, ca_bundle: Path | None) -> str:
    """What went wrong reaching the coordinator, with what to do when its certificate is not
    trusted."""
    said = tls.describe_failure(exc)
    if said is None:
        return str(exc) or type(exc).__name__
    if "certificate verify failed" not in said:
        return said
    if ca_bundle is not None:
        where = f"--ca-bundle {ca_bundle}"
    else:
        where = ", ".join(f"{k}={v}" for k, v in tls.trust_from_env().items()) or (
            "the system's trust store")
    return (f"{said}; the coordinator's certificate is not signed by a CA in {where}: give "
            "the CA that signed it with --ca-bundle FILE (or SSL_CERT_FILE)")


def write_view(view: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "study.json"
    path.write_text(json.dumps(view, indent=2) + "\n")
    return path
