"""The console's pages (``coordinator.ui``). Each handler signs the caller in from the session
cookie, then calls what the REST API's route for the same thing calls (the route functions
themselves where they hold the rules: quotas, audit, ownership), and renders a template."""

from __future__ import annotations

import asyncio
import json
import secrets
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from pydantic import ValidationError

from coordinator import feed
from coordinator.api.access import readable_study
from coordinator.api.deps import is_admin
from coordinator.api.routes import audit as audit_routes
from coordinator.api.routes import studies as study_routes
from coordinator.catalog import build_catalog
from coordinator.core.errors import ServiceError
from coordinator.models import StudyPlan, StudySpec, StudyView
from coordinator.reporting import exports, figures
from coordinator.reporting.report import report_sections
from coordinator.services import Services
from coordinator.ui import forms
from coordinator.ui.sessions import (
    CSRF_FIELD,
    LOGIN_COOKIE,
    SESSION_COOKIE,
    SESSION_HOURS,
    Session,
    Sessions,
    same,
)
from fedstats_service.auth import AuthenticationError
from fedstats_service.errors import describe_errors

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")
UI_PREFIX = "/ui"
router = APIRouter(prefix=UI_PREFIX, include_in_schema=False)
RUNNING = ("pending", "running")


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


def sessions(request: Request) -> Sessions:
    svc = services(request)
    return Sessions(svc.store, svc.accounts)


def secure(request: Request) -> bool:
    """Cookies are ``Secure`` when the console is reached over TLS."""
    return request.url.scheme == "https"


def page(request: Request, name: str, session: Session | None, status_code: int = 200,
         **context: Any) -> HTMLResponse:
    response = templates.TemplateResponse(
        request, name, {"session": session, "admin": session is not None
                        and is_admin(session.caller), "csrf_field": CSRF_FIELD, **context},
        status_code=status_code)
    # The pages hold results and tokens: never cached, never framed elsewhere.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; form-action 'self'")
    return response


def to_sign_in() -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


async def signed_in(request: Request) -> Session | None:
    return await sessions(request).current(request.cookies.get(SESSION_COOKIE))


async def checked_form(request: Request, session: Session) -> dict[str, Any] | None:
    """The posted form, if it carries the session's CSRF token (None otherwise)."""
    form = await request.form()
    if not same(str(form.get(CSRF_FIELD) or ""), session.csrf):
        return None
    return dict(form)


def refused(request: Request, session: Session | None) -> HTMLResponse:
    return page(request, "error.html", session, status_code=403,
                message="The form was refused: it did not carry this session's token. Reload "
                        "the page and try again.")


# -- sign in and out ---------------------------------------------------------------------------


@router.get("", response_class=RedirectResponse)
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/studies", status_code=303)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    return _login(request)


def _login(request: Request, error: str | None = None, status_code: int = 200) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    response = page(request, "login.html", None, status_code=status_code, login_csrf=token,
                    error=error)
    response.set_cookie(LOGIN_COOKIE, token, max_age=900, httponly=True, samesite="strict",
                        secure=secure(request), path="/ui")
    return response


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form()
    if not same(str(form.get(CSRF_FIELD) or ""), request.cookies.get(LOGIN_COOKIE)):
        return _login(request, "The sign-in form expired; please try again.", 403)
    token = str(form.get("token") or "").strip()
    try:
        session_id, _ = await sessions(request).sign_in(token, request.url.path)
    except AuthenticationError:
        return _login(request, "This token is not valid for this coordinator.", 401)
    response = RedirectResponse("/ui/studies", status_code=303)
    response.set_cookie(SESSION_COOKIE, session_id, max_age=SESSION_HOURS * 3600, httponly=True,
                        samesite="strict", secure=secure(request), path="/ui")
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


@router.post("/logout", response_class=HTMLResponse)
async def logout(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    if await checked_form(request, session) is None:
        return refused(request, session)
    await sessions(request).sign_out(request.cookies.get(SESSION_COOKIE))
    response = to_sign_in()
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response


# -- catalog, centers, audit -------------------------------------------------------------------


@router.get("/catalog", response_class=HTMLResponse)
async def catalog(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    found = build_catalog(await services(request).registry.declarations())
    return page(request, "catalog.html", session, catalog=found)


@router.get("/centers", response_class=HTMLResponse)
async def centers(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    if not is_admin(session.caller):
        return page(request, "error.html", session, status_code=403,
                    message="Only an admin may see the centers' health.")
    statuses = await services(request).registry.statuses()
    return page(request, "centers.html", session, centers=statuses)


@router.get("/audit", response_class=HTMLResponse)
async def audit_log(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    if not is_admin(session.caller):
        return page(request, "error.html", session, status_code=403,
                    message="Only an admin may read the audit log.")
    entries = await audit_routes.read_audit(services(request).store, session.caller, limit=200)
    return page(request, "audit.html", session, entries=entries)


# -- studies -----------------------------------------------------------------------------------


@router.get("/studies", response_class=HTMLResponse)
async def studies(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    listed = await study_routes.list_studies(services(request).store, session.caller)
    return page(request, "studies.html", session, studies=listed, running=RUNNING)


@router.get("/studies/new", response_class=HTMLResponse)
async def new_study(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    return await _builder(request, session, {})


async def _builder(request: Request, session: Session, values: dict[str, Any], *,
                   plan: StudyPlan | None = None, errors: list[str] | None = None,
                   field_errors: dict[str, str] | None = None,
                   asked: list[tuple[int, str, str]] | None = None,
                   focus: str | None = None, status_code: int = 200) -> HTMLResponse:
    found = build_catalog(await services(request).registry.declarations(budgets=False))
    shown = {**forms.DEFAULTS, **values}
    return page(request, "new.html", session, status_code=status_code, catalog=found,
                names=forms.catalog_names(found), groups=forms.instance_groups(shown),
                primary_tests=forms.PRIMARY_TESTS, primary_groups=forms.PRIMARY_GROUPS,
                values=shown,
                plan=plan, asked=asked or [], focus=focus, errors=errors or [],
                field_errors=field_errors or {},
                centers=list(services(request).centers))


@router.post("/studies/new", response_class=HTMLResponse)
async def submit_study(request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    posted = await request.form()
    try:
        if not same(str(posted.get(CSRF_FIELD) or ""), session.csrf):
            return refused(request, session)
        upload = posted.get("toml_file")
        text = str(posted.get("toml") or "") if isinstance(posted.get("toml"), str) else ""
        if upload is not None and not isinstance(upload, str):
            text = (await upload.read()).decode("utf-8", errors="replace") or text
        values = forms.posted_values(posted.multi_items())
    finally:
        await posted.close()  # an uploaded file is spooled to a temporary file
    action = str(values.get("action") or "")
    if action.startswith(("add:", "remove:")):  # an analysis added or removed: the page again
        try:
            changed = forms.edited(values, action)
        except forms.FormError as exc:
            return await _builder(request, session, values, errors=[str(exc)], status_code=422,
                                  field_errors={exc.field: str(exc)} if exc.field else None)
        if changed is None:
            return await _builder(request, session, values)
        # Focus where the analyst goes on: the analysis added, or the kind's Add button.
        verb, _, target = action.partition(":")
        focus = changed["instances"][-1] if verb == "add" else \
            f"add-{target.partition('-')[0]}"
        return await _builder(request, session, changed, focus=focus)
    raw: dict[str, Any] = {}
    keys = forms.chosen_keys(values)
    try:
        raw = tomllib.loads(text) if text.strip() else forms.spec_from_form(values)
        spec = StudySpec.model_validate(raw)
    except tomllib.TOMLDecodeError as exc:
        return await _builder(request, session, values, errors=[f"study TOML: {exc}"],
                              status_code=422)
    except forms.FormError as exc:
        return await _builder(request, session, values, errors=[str(exc)], status_code=422,
                              field_errors={exc.field: str(exc)} if exc.field else None)
    except ValidationError as exc:
        found = exc.errors(include_url=False, include_input=False)
        if text.strip():  # a study file: its own keys
            return await _builder(request, session, values, errors=[describe_errors(found)],
                                  status_code=422)
        problems, marks = forms.form_errors(found, raw, keys)
        return await _builder(request, session, values, errors=problems, field_errors=marks,
                              status_code=422)
    runner = services(request).runner
    response = Response()
    try:
        answer = await study_routes.create_study(
            spec, runner, session.caller, request, response,
            dry_run=action == "plan")
    except ServiceError as exc:
        marks = {} if text.strip() else forms.marked_fields(exc.extra, raw, keys)
        return await _builder(request, session, values, errors=[exc.detail],
                              field_errors=marks, status_code=exc.status_code)
    if isinstance(answer, StudyPlan):
        return await _builder(request, session, values, plan=answer,
                              asked=forms.asked(spec, None if text.strip() else keys))
    return RedirectResponse(f"/ui/studies/{answer.id}", status_code=303)


async def _view(request: Request, session: Session, study_id: str) -> StudyView:
    answer = await study_routes.get_study(study_id, services(request).store, session.caller)
    return StudyView.model_validate_json(bytes(answer.body))


@router.get("/studies/{study_id}", response_class=HTMLResponse)
async def study(request: Request, study_id: str) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    try:
        view = await _view(request, session, study_id)
    except ServiceError as exc:
        return page(request, "error.html", session, status_code=exc.status_code,
                    message=exc.detail)
    data = json.loads(view.model_dump_json())
    body = Markup(report_sections(data, console=True)) if view.status not in RUNNING else None
    progress = _progress(data)
    return page(request, "study.html", session, view=data, body=body, progress=progress,
                running=view.status in RUNNING, figures=forms.figure_links(data),
                exports=forms.export_links(data))


def _progress(view: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per center, the answers received so far by call (the study's progress while it runs)."""
    out: dict[str, dict[str, int]] = {}
    for p in view.get("provenance") or []:
        calls = out.setdefault(p["center"], {})
        calls[p["call"]] = calls.get(p["call"], 0) + 1
    return out


@router.get("/studies/{study_id}/status")
async def study_status(request: Request, study_id: str) -> Response:
    """The live status the studies pages poll: status and answers received per center."""
    session = await signed_in(request)
    if session is None:
        return Response(status_code=401)
    try:
        answer = await study_routes.get_study(study_id, services(request).store, session.caller,
                                              provenance=False)
    except ServiceError as exc:
        return Response(status_code=exc.status_code)
    view = json.loads(bytes(answer.body))
    released = await asyncio.to_thread(services(request).store.releases_of, study_id)
    per_center: dict[str, int] = {}
    for r in released:
        per_center[r.center] = per_center.get(r.center, 0) + 1
    return Response(json.dumps({"status": view["status"],
                                "releases_received": view["releases_received"],
                                "centers": per_center}), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


@router.get("/studies/{study_id}/events")
async def study_events(request: Request, study_id: str) -> Response:
    """The study's progress as server-sent events for the live pages (the REST route's stream,
    ``coordinator.feed``); they poll :func:`study_status` when this fails."""
    session = await signed_in(request)
    if session is None:
        return Response(status_code=401)
    store = services(request).store
    try:
        await readable_study(store, session.caller, study_id)
    except ServiceError as exc:
        return Response(status_code=exc.status_code)

    async def alive() -> bool:  # a rotated, expired or revoked token ends the stream too
        return await signed_in(request) is not None

    return StreamingResponse(feed.stream(store, study_id, alive=alive),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/studies/{study_id}/json")
async def study_json(request: Request, study_id: str) -> Response:
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    try:
        answer = await study_routes.get_study(study_id, services(request).store, session.caller)
    except ServiceError as exc:
        return Response(exc.detail, status_code=exc.status_code)
    return Response(bytes(answer.body), media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="study-{study_id}.json"'})


async def _study_file(request: Request, study_id: str, make: Callable[[dict[str, Any]], bytes],
                      media_type: str, suffix: str) -> Response:
    """A signed-in reader's export of a study, ``make`` run on its exported view."""
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    try:
        view = await study_routes.exported_view(services(request).store, session.caller,
                                                study_id)
    except ServiceError as exc:
        return Response(exc.detail, status_code=exc.status_code)
    data = await asyncio.to_thread(make, view)
    return Response(data, media_type=media_type,
                    headers=study_routes.attachment(f"study-{study_id}.{suffix}"))


@router.get("/studies/{study_id}/export.zip")
async def study_export_zip(request: Request, study_id: str) -> Response:
    """Every table of the study as CSV, its Methods paragraph and record, in one zip."""
    return await _study_file(request, study_id, exports.bundle, "application/zip", "zip")


@router.get("/studies/{study_id}/export.xlsx")
async def study_export_xlsx(request: Request, study_id: str) -> Response:
    """Every table of the study as a sheet of one XLSX workbook."""
    return await _study_file(request, study_id, exports.workbook, study_routes.XLSX, "xlsx")


@router.get("/studies/{study_id}/export/{part}.csv")
async def study_export_csv(request: Request, study_id: str, part: str) -> Response:
    """One table of the study as CSV (``coordinator.reporting.exports.PARTS``)."""
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    if part not in exports.PARTS:
        return Response("no such table", status_code=404)
    try:
        view = await study_routes.exported_view(services(request).store, session.caller,
                                                study_id)
    except ServiceError as exc:
        return Response(exc.detail, status_code=exc.status_code)
    return Response(exports.part_csv(view, part), media_type="text/csv; charset=utf-8",
                    headers=study_routes.attachment(f"study-{study_id}-{part}.csv"))


@router.get("/studies/{study_id}/figures/{index}.{fmt}")
async def study_figure(request: Request, study_id: str, index: int, fmt: str,
                       name: str | None = None) -> Response:
    """An analysis' figure to download (``coordinator.reporting.figures.figure_names``)."""
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    names: dict[str | None, figures.FigureName | None] = {
        None: None, "table": "table", "effects": "effects", "boxplots": "boxplots",
        "quantiles": "quantiles"}
    if fmt not in ("svg", "png") or not 0 <= index <= 1000 or name not in names:
        return Response("no such figure", status_code=404)
    kind: figures.FigureFormat = "svg" if fmt == "svg" else "png"
    try:
        record = await readable_study(services(request).store, session.caller, study_id)
        image = await asyncio.to_thread(figures.analysis_figure, record, index, kind,
                                        names[name])
    except ServiceError as exc:
        return Response(exc.detail, status_code=exc.status_code)
    return Response(image, media_type=figures.MEDIA_TYPES[fmt], headers={
        "Content-Disposition":
        f'attachment; filename="study-{study_id}-{index}{"-" + name if name else ""}.{fmt}"'})


@router.post("/studies/{study_id}/{action}", response_class=HTMLResponse)
async def study_action(request: Request, study_id: str, action: str) -> Response:
    """Cancel or resume, as the API's routes do (with their rules on who may)."""
    session = await signed_in(request)
    if session is None:
        return to_sign_in()
    if await checked_form(request, session) is None:
        return refused(request, session)
    routes = {"cancel": study_routes.cancel_study, "resume": study_routes.resume_study}
    if action not in routes:
        return page(request, "error.html", session, status_code=404, message="No such action.")
    try:
        await routes[action](study_id, services(request).runner, session.caller, request,
                             Response())
    except ServiceError as exc:
        return page(request, "error.html", session, status_code=exc.status_code,
                    message=exc.detail)
    return RedirectResponse(f"/ui/studies/{study_id}", status_code=303)
