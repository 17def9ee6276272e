"""The synchronous client of the coordinator's analyst API (docs/client.md)::

    from fedstats_client import Client, Study

    with Client("https://coordinator.example.org:8800") as fs:   # token: FEDSTATS_ANALYST_TOKEN
        study = fs.run(Study("cohort", "los_days", groups=["control", "treated"]).table().mwu())
        study.result.mwu.to_frame()

:class:`fedstats_client.aio.AsyncClient` has the same methods, awaitable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from coordinator import models
from fedstats_client import _core
from fedstats_client.errors import Unsupported
from fedstats_client.progress import progress_for
from fedstats_client.results import CatalogView, PlanView, StudyRecord
from fedstats_client.spec import Study, spec_body

SpecLike = Study | models.StudySpec | Mapping[str, Any]
ProgressLike = bool | Callable[[str], None]


class Client:
    """A client of one coordinator, as one analyst (its bearer token).

    ``base_url`` (else ``FEDSTATS_COORDINATOR_URL``), ``token`` (else
    ``FEDSTATS_ANALYST_TOKEN``), ``ca_bundle``: the CA that signed an HTTPS coordinator's
    certificate (else ``SSL_CERT_FILE``/``SSL_CERT_DIR``, else the system's store); ``cert``: a
    client certificate and key (PEM) for a coordinator behind mutual TLS; ``transport``: an
    httpx transport to use instead of the network (tests). No proxy is read from the
    environment.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        ca_bundle: str | Path | None = None,
        cert: tuple[str | Path, str | Path] | None = None,
        timeout: float = 30.0,
        poll_interval: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = _core.settings(base_url, token, ca_bundle, timeout, cert)
        self.poll_interval = poll_interval
        self._http = httpx.Client(base_url=self.settings.base_url, headers=self.settings.headers,
                                  timeout=timeout, verify=self.settings.verify,
                                  trust_env=False, transport=transport)

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, *, expected: tuple[int, ...] = (200,),
              **kwargs: Any) -> httpx.Response:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _core.connection_failed(exc, self.base_url) from None
        return _core.check(answer, expected)

    # -- the federation ---------------------------------------------------------------------

    def centers(self) -> _core.ModelList[models.CenterStatus]:
        """Every registered center: health, problem, remaining ε per dataset."""
        return _core.models_of(self._call("GET", "/v1/centers"), models.CenterStatus)

    def catalog(self) -> CatalogView:
        """Each dataset across the centers: variables, group levels, rounded sizes, remaining ε
        (``GET /v1/catalog``; docs/coordinator.md, "Catalog")."""
        return CatalogView(_core.model(self._call("GET", "/v1/catalog"), models.Catalog))

    # -- studies ------------------------------------------------------------------------------

    def plan(self, spec: SpecLike) -> PlanView:
        """What the study would spend at each center and what would be refused, without running
        it (``POST /v1/studies?dry_run=true``; docs/coordinator.md, "Dry run")."""
        answer = self._call("POST", "/v1/studies", params={"dry_run": "true"},
                            json=spec_body(spec), expected=(200, 202))
        if answer.status_code == 202:  # a coordinator without dry runs created the study
            created = answer.json().get("id")
            raise Unsupported(f"this coordinator has no dry run: it created study {created} "
                              "(cancel it if it was not meant to run)", code="no_dry_run",
                              status=202)
        return PlanView(_core.model(answer, models.StudyPlan))

    def submit(self, spec: SpecLike, *, idempotency_key: str | None = None
               ) -> models.StudyCreated:
        """Start a study (it runs in the background); a repeat with the same
        ``idempotency_key`` returns the same study instead of starting another."""
        answer = self._call("POST", "/v1/studies", json=spec_body(spec),
                            headers=_core.idempotency(idempotency_key), expected=(200, 201, 202))
        return _core.model(answer, models.StudyCreated)

    def study(self, study_id: str, *, provenance: bool = True) -> StudyRecord:
        """A study: status, spec, result, error and (unless ``provenance=False``) every answer
        the centers gave it."""
        return _core.record(self._call("GET", _core.study_path(study_id),
                                       params={"provenance": str(provenance).lower()}))

    def studies(self, status: str | None = None, *, limit: int = 100, offset: int = 0
                ) -> _core.ModelList[models.StudySummary]:
        """The caller's studies and those shared with it, newest first."""
        answer = self._call("GET", "/v1/studies",
                            params={"limit": limit, "offset": offset, **_core.statuses(status)})
        return _core.models_of(answer, models.StudySummary)

    def wait(self, study_id: str, *, progress: ProgressLike = True,
             timeout: float | None = None, raise_on_failure: bool = True) -> StudyRecord:
        """Follow the study until it ends, showing progress (see ``fedstats_client.progress``);
        read it in full then. Its progress is pushed (``GET /v1/studies/{id}/events``); a
        coordinator without that route, or a stream cut short, is polled every
        ``poll_interval`` instead. A study that ended without a result (failed,
        failed_resumable, cancelled) raises ``StudyFailed`` naming the center that failed it,
        unless ``raise_on_failure=False``; a ``partially_failed`` one is returned (its failed
        analyses raise when read)."""
        waiting = _core.Waiting(study_id, progress_for(progress), timeout)
        try:
            if not self._follow(study_id, waiting):
                while not waiting.seen(self.study(study_id, provenance=False)):
                    time.sleep(self.poll_interval)
        finally:
            waiting.progress.close()
        return _core.finished(self.study(study_id), raise_on_failure)

    def _follow(self, study_id: str, waiting: _core.Waiting) -> bool:
        """Whether the study's event stream showed its end (False: poll instead)."""
        parser = _core.EventParser()
        try:
            with self._http.stream("GET", _core.events_path(study_id)) as answer:
                if not _core.can_follow(answer):
                    return False
                for line in answer.iter_lines():
                    if waiting.seen_event(parser.line(line)):
                        return True
        except (httpx.TransportError, ValueError, KeyError):
            return False  # a cut or garbled stream: the poll takes over
        return False

    def run(self, spec: SpecLike, *, progress: ProgressLike = True,
            timeout: float | None = None, idempotency_key: str | None = None,
            raise_on_failure: bool = True) -> StudyRecord:
        """:meth:`submit` and :meth:`wait`."""
        created = self.submit(spec, idempotency_key=idempotency_key)
        return self.wait(created.id, progress=progress, timeout=timeout,
                         raise_on_failure=raise_on_failure)

    def resume(self, study_id: str, *, progress: ProgressLike = True,
               timeout: float | None = None, raise_on_failure: bool = True) -> StudyRecord:
        """Run again what a study did not finish (nothing asked or paid twice) and wait."""
        self._call("POST", _core.study_path(study_id, "resume"), expected=(200, 202))
        return self.wait(study_id, progress=progress, timeout=timeout,
                         raise_on_failure=raise_on_failure)

    def cancel(self, study_id: str) -> StudyRecord:
        """Stop a pending or running study (``POST /v1/studies/{id}/cancel``); the study as it
        is then."""
        self._call("POST", _core.study_path(study_id, "cancel"), expected=(200, 202, 204))
        return self.study(study_id, provenance=False)

    # -- sharing ------------------------------------------------------------------------------

    def share(self, study_id: str, analyst_id: str) -> models.Share:
        """Let another analyst read (and resume) the study (its owner or an admin only)."""
        return _core.model(self._call("POST", _core.study_path(study_id, "shares"),
                                      json={"analyst_id": analyst_id}, expected=(200, 201)),
                           models.Share)

    def unshare(self, study_id: str, analyst_id: str) -> None:
        self._call("DELETE", _core.study_path(study_id, "shares", analyst_id), expected=(204,))

    def shares(self, study_id: str) -> _core.ModelList[models.Share]:
        return _core.models_of(self._call("GET", _core.study_path(study_id, "shares")),
                               models.Share)

    def figure(self, study_id: str, index: int, *, format: str = "svg") -> bytes:
        """The boxplots of a finished ``dp_boxplot`` analysis (``index`` in the spec), drawn by
        the coordinator as SVG or PNG."""
        return self._call("GET", _core.study_path(study_id, "analyses", str(index), "figure"),
                          params={"format": format}).content

    def export_csv(self, study_id: str, part: str) -> str:
        """One of a finished study's tables as tidy CSV text: ``table1``, ``tests``,
        ``effects``, ... (docs/coordinator.md, "Exports"); read it with
        ``pandas.read_csv(io.StringIO(text))``."""
        return self._call("GET", _core.study_path(study_id, "export.csv"),
                          params={"part": part}).text

    def to_xlsx(self, study_id: str, path: str | Path) -> Path:
        """Every table of a finished study as one XLSX workbook (a sheet per table, then
        ``methods`` and ``spec``) written to ``path``; the path."""
        data = self._call("GET", _core.study_path(study_id, "export.xlsx")).content
        return _core.write_file(data, path)

    def to_csv(self, study_id: str, directory: str | Path) -> list[Path]:
        """Every table of a finished study as CSV, its Methods paragraph (``methods.txt``), spec
        and reproducibility record, written into ``directory``; the paths written."""
        data = self._call("GET", _core.study_path(study_id, "export.zip")).content
        return _core.unpack_exports(data, directory)
