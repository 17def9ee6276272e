"""The asynchronous client: :class:`AsyncClient` has :class:`fedstats_client.Client`'s methods,
awaitable (``async with AsyncClient(url) as fs: study = await fs.run(spec)``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from coordinator import models
from fedstats_client import _core
from fedstats_client.client import ProgressLike, SpecLike
from fedstats_client.errors import Unsupported
from fedstats_client.progress import progress_for
from fedstats_client.results import CatalogView, PlanView, StudyRecord
from fedstats_client.spec import spec_body


class AsyncClient:
    """A client of one coordinator, as one analyst; arguments as :class:`~fedstats_client.Client`
    (``transport``: an ``httpx.AsyncBaseTransport``, e.g. ``httpx.ASGITransport(app)``)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        ca_bundle: str | Path | None = None,
        cert: tuple[str | Path, str | Path] | None = None,
        timeout: float = 30.0,
        poll_interval: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = _core.settings(base_url, token, ca_bundle, timeout, cert)
        self.poll_interval = poll_interval
        self._http = httpx.AsyncClient(base_url=self.settings.base_url,
                                       headers=self.settings.headers, timeout=timeout,
                                       verify=self.settings.verify, trust_env=False,
                                       transport=transport)

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, *, expected: tuple[int, ...] = (200,),
                    **kwargs: Any) -> httpx.Response:
        try:
            answer = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _core.connection_failed(exc, self.base_url) from None
        return _core.check(answer, expected)

    async def centers(self) -> _core.ModelList[models.CenterStatus]:
        return _core.models_of(await self._call("GET", "/v1/centers"), models.CenterStatus)

    async def catalog(self) -> CatalogView:
        return CatalogView(_core.model(await self._call("GET", "/v1/catalog"),
                                       models.Catalog))

    async def plan(self, spec: SpecLike) -> PlanView:
        answer = await self._call("POST", "/v1/studies", params={"dry_run": "true"},
                                  json=spec_body(spec), expected=(200, 202))
        if answer.status_code == 202:
            created = answer.json().get("id")
            raise Unsupported(f"this coordinator has no dry run: it created study {created} "
                              "(cancel it if it was not meant to run)", code="no_dry_run",
                              status=202)
        return PlanView(_core.model(answer, models.StudyPlan))

    async def submit(self, spec: SpecLike, *, idempotency_key: str | None = None
                     ) -> models.StudyCreated:
        answer = await self._call("POST", "/v1/studies", json=spec_body(spec),
                                  headers=_core.idempotency(idempotency_key),
                                  expected=(200, 201, 202))
        return _core.model(answer, models.StudyCreated)

    async def study(self, study_id: str, *, provenance: bool = True) -> StudyRecord:
        return _core.record(await self._call("GET", _core.study_path(study_id),
                                             params={"provenance": str(provenance).lower()}))

    async def studies(self, status: str | None = None, *, limit: int = 100, offset: int = 0
                      ) -> _core.ModelList[models.StudySummary]:
        answer = await self._call("GET", "/v1/studies", params={
            "limit": limit, "offset": offset, **_core.statuses(status)})
        return _core.models_of(answer, models.StudySummary)

    async def wait(self, study_id: str, *, progress: ProgressLike = True,
                   timeout: float | None = None, raise_on_failure: bool = True) -> StudyRecord:
        """``Client.wait``: the study's events followed, polled when they cannot be."""
        waiting = _core.Waiting(study_id, progress_for(progress), timeout)
        try:
            if not await self._follow(study_id, waiting):
                while not waiting.seen(await self.study(study_id, provenance=False)):
                    await asyncio.sleep(self.poll_interval)
        finally:
            waiting.progress.close()
        return _core.finished(await self.study(study_id), raise_on_failure)

    async def _follow(self, study_id: str, waiting: _core.Waiting) -> bool:
        """Whether the study's event stream showed its end (False: poll instead)."""
        parser = _core.EventParser()
        try:
            async with self._http.stream("GET", _core.events_path(study_id)) as answer:
                if not _core.can_follow(answer):
                    return False
                async for line in answer.aiter_lines():
                    if waiting.seen_event(parser.line(line)):
                        return True
        except (httpx.TransportError, ValueError, KeyError):
            return False  # a cut or garbled stream: the poll takes over
        return False

    async def run(self, spec: SpecLike, *, progress: ProgressLike = True,
                  timeout: float | None = None, idempotency_key: str | None = None,
                  raise_on_failure: bool = True) -> StudyRecord:
        created = await self.submit(spec, idempotency_key=idempotency_key)
        return await self.wait(created.id, progress=progress, timeout=timeout,
                               raise_on_failure=raise_on_failure)

    async def resume(self, study_id: str, *, progress: ProgressLike = True,
                     timeout: float | None = None, raise_on_failure: bool = True
                     ) -> StudyRecord:
        await self._call("POST", _core.study_path(study_id, "resume"), expected=(200, 202))
        return await self.wait(study_id, progress=progress, timeout=timeout,
                               raise_on_failure=raise_on_failure)

    async def cancel(self, study_id: str) -> StudyRecord:
        await self._call("POST", _core.study_path(study_id, "cancel"),
                         expected=(200, 202, 204))
        return await self.study(study_id, provenance=False)

    async def share(self, study_id: str, analyst_id: str) -> models.Share:
        return _core.model(await self._call("POST", _core.study_path(study_id, "shares"),
                                            json={"analyst_id": analyst_id},
                                            expected=(200, 201)), models.Share)

    async def unshare(self, study_id: str, analyst_id: str) -> None:
        await self._call("DELETE", _core.study_path(study_id, "shares", analyst_id),
                         expected=(204,))

    async def shares(self, study_id: str) -> _core.ModelList[models.Share]:
        return _core.models_of(await self._call("GET", _core.study_path(study_id, "shares")),
                               models.Share)

    async def figure(self, study_id: str, index: int, *, format: str = "svg") -> bytes:
        answer = await self._call("GET", _core.study_path(study_id, "analyses", str(index),
                                                          "figure"), params={"format": format})
        return answer.content

    async def export_csv(self, study_id: str, part: str) -> str:
        answer = await self._call("GET", _core.study_path(study_id, "export.csv"),
                                  params={"part": part})
        return answer.text

    async def to_xlsx(self, study_id: str, path: str | Path) -> Path:
        answer = await self._call("GET", _core.study_path(study_id, "export.xlsx"))
        return _core.write_file(answer.content, path)

    async def to_csv(self, study_id: str, directory: str | Path) -> list[Path]:
        answer = await self._call("GET", _core.study_path(study_id, "export.zip"))
        return _core.unpack_exports(answer.content, directory)
