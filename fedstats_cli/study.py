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
and waited for the same way (:func:`resume_study`). :func:`get_study`, :func:`list_studies` and
:func:`cancel_study` read and stop studies (``fedstats study get|list|cancel``).

With an idempotency key (``--idempotency-key``: a cron job passes, say, the date), a submission
repeated with the same key and spec gets the study the first made instead of a new one
(docs/coordinator.md, "Idempotent submission").

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

FINAL = frozenset({"succeeded", "partially_failed", "failed", "failed_resumable", "cancelled"})


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
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Create the study (once per ``idempotency_key``), poll it until it ends and return its
    view (``GET /v1/studies/{id}``)."""
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    created = client.post("/v1/studies", json=spec, headers=headers)
    if created.status_code != 202:
        raise RuntimeError(f"the coordinator refused the study {_refusal(created)}")
    again = created.headers.get("Idempotent-Replayed") == "true"
    progress(f"study {created.json()['id']} " + (
        "already created with this idempotency key" if again else "created"))
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


def get_study(client: httpx.Client, study_id: str) -> dict[str, Any]:
    """The study's full view, provenance included (``GET /v1/studies/{id}``)."""
    answer = client.get(study_path(study_id))
    if answer.status_code != 200:
        raise RuntimeError(f"no study {study_id} {_refusal(answer)}")
    view: dict[str, Any] = answer.json()
    return view


def list_studies(client: httpx.Client, *, status: str | None = None,
                 limit: int = 100) -> list[dict[str, Any]]:
    """The caller's studies and those shared with it, newest first (``GET /v1/studies``)."""
    params: dict[str, str | int] = {"limit": limit}
    if status is not None:
        params["status"] = status
    answer = client.get("/v1/studies", params=params)
    if answer.status_code != 200:
        raise RuntimeError(f"no list of studies {_refusal(answer)}")
    listed: list[dict[str, Any]] = answer.json()
    return listed


def cancel_study(client: httpx.Client, study_id: str) -> dict[str, Any]:
    """Cancel a pending or running study (``POST /v1/studies/{id}/cancel``) and return its
    view without the provenance."""
    answer = client.post(f"{study_path(study_id)}/cancel")
    if answer.status_code != 200:
        raise RuntimeError(f"study {study_id} not cancelled {_refusal(answer)}")
    return study_status(client, study_id)


def wait_study(
    client: httpx.Client,
    url: str,
    *,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Follow the study at ``url`` until it ends (:data:`FINAL`) and return its full view: its
    progress pushed by the coordinator (``GET <url>/events``, server-sent events), or polled
    every 0.2 s when the coordinator has no such route or the stream is cut."""
    deadline = time.monotonic() + timeout_s
    last = ("", -1)

    def seen(status: str | None, received: int) -> bool:
        """Show a change; whether the study ended (None: a heartbeat, the deadline only)."""
        nonlocal last
        if status is None:
            status, received = last
        if (status, received) != last:
            progress(f"{status}: {received} releases received")
            last = (status, received)
        if status in FINAL:
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"study still {status} after {timeout_s:.0f} s")
        return False

    if not _follow(client, url, seen):
        while True:
            # Polled without the provenance (it grows to megabytes); read in full at the end.
            view: dict[str, Any] = client.get(url, params={"provenance": "false"}
                                              ).raise_for_status().json()
            if seen(view["status"], view["releases_received"]):
                break
            time.sleep(0.2)
    full: dict[str, Any] = client.get(url).raise_for_status().json()
    return full


def _follow(client: httpx.Client, url: str, seen: Callable[[str | None, int], bool]) -> bool:
    """Whether the study's event stream showed its end (False: poll instead). A heartbeat
    comment checks the deadline."""
    try:
        with client.stream("GET", f"{url}/events") as answer:
            if answer.status_code != 200 or not answer.headers.get(
                    "content-type", "").startswith("text/event-stream"):
                return False
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    data = json.loads(line.removeprefix("data:"))
                    if seen(str(data["status"]), int(data["releases_received"])):
                        return True
                elif line.startswith(":"):
                    seen(None, -1)
    except (httpx.TransportError, ValueError, KeyError):
        return False  # a cut or garbled stream: the poll takes over
    return False


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


class UsageError(ValueError):
    """A command's arguments cannot be used (exit 2); the message says what to give."""


def connect(
    coordinator: str, token: str | None, *, token_env: str, ca_bundle: Path | None,
    study_file: Path | None = None,
) -> tuple[httpx.Client, dict[str, Any] | None]:
    """The analyst client (:func:`analyst_client`) and the study file's spec when one is named:
    what every analyst command starts from. Raises :class:`UsageError` for a missing token, a
    study file that is not a valid spec or a CA bundle that is not PEM."""
    if not token:
        raise UsageError(f"give --token or set {token_env}")
    spec = None
    if study_file is not None:
        try:
            spec = load_spec(study_file)
        except StudyFileError as exc:
            raise UsageError(str(exc)) from None
    try:
        return analyst_client(coordinator, token, ca_bundle=ca_bundle), spec
    except tls.TrustError as exc:
        raise UsageError(f"--ca-bundle {exc}") from None


def connection_problem(exc: httpx.HTTPError, *, ca_bundle: Path | None) -> str:
    """What went wrong reaching the coordinator, with what to do when its certificate is not
    trusted."""
    said = tls.describe_failure(exc)
    if said is None:
        text = str(exc) or type(exc).__name__
        if not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return text
        # A bare "[Errno 111] Connection refused" names neither the URL nor what to do.
        try:
            url = exc.request.url
        except RuntimeError:  # an error raised without its request
            return f"cannot reach the coordinator: {text}"
        base = f"{url.scheme}://{url.netloc.decode()}"
        return (f"cannot reach the coordinator at {base}: {text}; is it running and listening "
                f"there (--coordinator)? `fedstats health {base}` checks")
    if "certificate verify failed" not in said:
        return said
    if ca_bundle is not None:
        where = f"--ca-bundle {ca_bundle}"
    else:
        where = ", ".join(f"{k}={v}" for k, v in tls.trust_from_env().items()) or (
            "the system's trust store")
    return (f"{said}; the coordinator's certificate is not signed by a CA in {where}: give "
            "the CA that signed it with --ca-bundle FILE (or SSL_CERT_FILE)")


def studies_table(studies: list[dict[str, Any]]) -> str:
    """``fedstats study list``: one line per study, newest first."""
    if not studies:
        return "no studies"
    rows = [("ID", "STATUS", "DATASET.VARIABLE", "OWNER", "CREATED", "TITLE")] + [
        (s["id"], s["status"], f"{s['dataset']}.{s['variable']}", s.get("created_by") or "-",
         s["created_at"][:19], _short(s.get("title") or "-")) for s in studies]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def status_line(view: dict[str, Any]) -> str:
    """``study <id>: <status> (<n> releases received)[; <error>: <detail>]``."""
    error = view.get("error") or {}
    said = f"; {error.get('error')}: {error.get('detail')}" if error else ""
    return (f"study {view['id']}: {view['status']} ({view['releases_received']} releases "
            f"received){said}")


def write_csv(view: dict[str, Any], out: Path) -> list[Path]:
    """The study's exports (``coordinator.reporting.exports.csv_files``: a CSV per table it has, the
    Methods paragraph, spec and reproducibility record) written into ``out``; the paths."""
    from coordinator.reporting.exports import csv_files

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in csv_files(view).items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_xlsx(view: dict[str, Any], path: Path) -> Path:
    """The study's tables as one XLSX workbook (``coordinator.reporting.exports.workbook``) at
    ``path``, written whole or not at all; the path."""
    from coordinator.reporting.exports import workbook

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(workbook(view))
    partial.replace(path)
    return path


def write_view(view: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "study.json"
    path.write_text(json.dumps(view, indent=2) + "\n")
    return path
