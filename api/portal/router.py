"""The self-service portal at ``/portal``: server-rendered pages over the same services, roles and
tenant scoping as the API.

Every page authenticates the session's API key with ``security.authenticate_tenant`` and checks the
role the matching API route needs (reads: viewer; writes and connection tests: editor), then calls
the domain services with that ``TenantContext`` in one unit of work per request. Domain errors
become HTML: a field's message beside the field, anything else an error page with the same status
the API would answer. None of these routes is part of the OpenAPI contract.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import ValidationError
from sqlmodel import Session
from starlette.datastructures import FormData

from api.connections import probe
from api.connections import service as connections
from api.connections.schemas import ConnectionSpec
from api.core.db import unit_of_work
from api.core.errors import (
    Conflict,
    DomainError,
    Forbidden,
    NotFound,
    Unauthorized,
    ValidationFailed,
    validation_errors,
)
from api.core.pagination import PageParams
from api.core.security import Role, TenantContext
from api.tenancy.auth import authenticate_tenant
from api.offsets import service as offsets
from api.offsets.schemas import OffsetsPatch
from api.pipelines import service as pipelines
from api.pipelines.schemas import PipelineSpec
from api.portal import views
from api.portal.session import (
    COOKIE_PATH,
    LOGIN_COOKIE,
    LOGIN_TTL_S,
    SESSION_COOKIE,
    SESSION_TTL_S,
    PortalSession,
    SessionCodec,
    tokens_match,
)
from api.runs import service as runs
from api.runs.states import TERMINAL_STATES

router = APIRouter(prefix="/portal", include_in_schema=False)

_HERE = Path(__file__).parent
_STATIC = {"portal.css": "text/css; charset=utf-8", "portal.js": "text/javascript; charset=utf-8"}
PAGE_SIZE = 20
RUNS_SHOWN = 20

_env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters.update(age=views.age, duration=views.duration, number=views.number, schedule=views.schedule_text,
                    symbol=lambda state: views.STATE_SYMBOLS.get(state, "•"))

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Messages shown after a redirect; the query names one, so no text from the URL is ever rendered.
NOTICES = {
    "created": "The pipeline was created.",
    "paused": "The pipeline is paused: its schedule no longer fires.",
    "resumed": "The pipeline is active again.",
    "run-queued": "The run is queued; this page follows it.",
    "replayed": "The offsets were moved; the next run reads from the new positions.",
    "connection-created": "The connection was saved; its credentials went to the secret store.",
    "signed-out": "You are signed out.",
}


class SignInRequired(Unauthorized):
    def __init__(self) -> None:
        super().__init__("Sign in with an API key")


class CsrfRefused(Forbidden):
    code, title = "csrf-failed", "The form expired or did not come from this portal"

    def __init__(self) -> None:
        super().__init__("The form's security token is missing or wrong; reload the page and submit it again")


def _codec(request: Request) -> SessionCodec:
    codec = getattr(request.app.state, "portal_sessions", None)
    if codec is None:
        codec = SessionCodec(request.app.state.settings.data_dir / "portal-session.key")
        request.app.state.portal_sessions = codec
    return codec


class Portal:
    """One portal request: its cookie session, the authenticated caller once known, rendering."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.settings = request.app.state.settings
        self.codec = _codec(request)
        self.cookie: PortalSession | None = self.codec.open_session(request.cookies.get(SESSION_COOKIE))
        self.ctx: TenantContext | None = None

    @contextmanager
    def work(self, role: Role = Role.viewer, *, form: FormData | None = None) -> Iterator[Session]:
        """One unit of work as the signed-in key, which must have ``role``; ``form``: check its CSRF token."""
        if self.cookie is None:
            raise SignInRequired()
        if form is not None and not tokens_match(form.get("csrf_token"), self.cookie.csrf):  # type: ignore[arg-type]
            raise CsrfRefused()
        admin = self.settings.admin_token.get_secret_value() if self.settings.admin_token else None
        with unit_of_work(self.request.app.state.engine) as session:
            self.ctx = authenticate_tenant(session, self.cookie.api_key, admin)
            self.ctx.require(role)
            yield session

    @property
    def can_edit(self) -> bool:
        return self.ctx is not None and self.ctx.role.rank >= Role.editor.rank

    def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("notice", NOTICES.get(self.request.query_params.get("notice", "")))
        html = _env.get_template(template).render(
            ctx=self.ctx, can_edit=self.can_edit, csrf=self.cookie.csrf if self.cookie else "",
            path=self.request.url.path, **context,
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def redirect(self, url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


PortalDep = Annotated[Portal, Depends(Portal)]


async def _form(request: Request) -> FormData:
    """The urlencoded body of a portal form (anything else reads as empty, and fails the CSRF check)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return FormData()
    try:
        pairs = parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True,
                          max_num_fields=5000)
    except ValueError:
        return FormData()
    return FormData(pairs)


Form = Annotated[FormData, Depends(_form)]


def html_errors(handler: Callable[..., Response]) -> Callable[..., Response]:
    """Render a domain error escaping ``handler`` as a page (or, unauthenticated, send to sign-in)."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Response:
        portal: Portal = kwargs["portal"]
        try:
            return handler(*args, **kwargs)
        except Unauthorized:
            target = portal.request.url.path if portal.request.method == "GET" else "/portal/pipelines"
            response = portal.redirect(f"/portal/login?next={quote(target)}")
            response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
            return response
        except DomainError as exc:
            return portal.render("error.html", status=exc.status, problem=exc)

    return wrapper


def _id(value: str, resource: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(resource, value) from None


def _set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


# Sign-in.

@router.get("")
def portal_home() -> RedirectResponse:
    return RedirectResponse("/portal/pipelines", status_code=303)


def _login_page(portal: Portal, *, status: int = 200, error: str | None = None, next_url: str = "") -> Response:
    token, csrf = portal.codec.seal_login()
    response = portal.render("login.html", status=status, login_csrf=csrf, error=error, next_url=next_url)
    _set_cookie(response, portal.request, LOGIN_COOKIE, token, LOGIN_TTL_S)
    return response


def _safe_next(value: str | None) -> str:
    if value and value.startswith("/portal/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/portal/pipelines"


@router.get("/login")
def login_form(portal: PortalDep, next: str = "") -> Response:
    return _login_page(portal, next_url=_safe_next(next))


@router.post("/login")
def login(portal: PortalDep, form: Form) -> Response:
    next_url = _safe_next(form.get("next"))  # type: ignore[arg-type]
    expected = portal.codec.open_login(portal.request.cookies.get(LOGIN_COOKIE))
    if not tokens_match(form.get("csrf_token"), expected):  # type: ignore[arg-type]
        return _login_page(portal, status=403, error=CsrfRefused().detail, next_url=next_url)
    key = str(form.get("api_key", "")).strip()
    admin = portal.settings.admin_token.get_secret_value() if portal.settings.admin_token else None
    try:
        if not key:
            raise Unauthorized("Enter an API key")
        with unit_of_work(portal.request.app.state.engine) as session:
            authenticate_tenant(session, key, admin)
    except (Unauthorized, Forbidden) as exc:
        return _login_page(portal, status=exc.status, error=exc.detail, next_url=next_url)
    token, _ = portal.codec.seal_session(key)
    response = portal.redirect(next_url)
    _set_cookie(response, portal.request, SESSION_COOKIE, token, SESSION_TTL_S)
    response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
    return response


@router.post("/logout")
@html_errors
def logout(portal: PortalDep, form: Form) -> Response:
    if portal.cookie is not None and not tokens_match(form.get("csrf_token"), portal.cookie.csrf):  # type: ignore[arg-type]
        raise CsrfRefused()
    response = portal.redirect("/portal/login?notice=signed-out")
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
    return response


# Pipelines.

@router.get("/pipelines")
@html_errors
def pipelines_page(portal: PortalDep, name: str = "", state: str = "", page: str = "1") -> Response:
    number = int(page) if page.isdigit() and int(page) > 0 else 1
    state = state if state in ("active", "paused") else ""
    name = name.strip()[:100]
    with portal.work() as session:
        assert portal.ctx is not None
        params = PageParams(limit=PAGE_SIZE, offset=(number - 1) * PAGE_SIZE, sort="name")
        rows, total = pipelines.list_pipelines(session=session, ctx=portal.ctx, page=params,
                                               name_contains=name or None, state=state or None)
        items = []
        for row in rows:
            last, _ = runs.list_runs(session=session, ctx=portal.ctx, pipeline_id=row.id,
                                     page=PageParams(limit=1, offset=0, sort="-created_at"))
            items.append({"pipeline": row, "last_run": last[0] if last else None})
        pages = max((total + PAGE_SIZE - 1) // PAGE_SIZE, 1)
        return portal.render("pipelines.html", items=items, total=total, page=number, pages=pages,
                             filters={"name": name, "state": state})


def _connection_choices(session: Session, ctx: TenantContext) -> list[Any]:
    rows, _ = connections.list_connections(session=session, ctx=ctx, page=PageParams(limit=500, offset=0, sort="name"))
    return rows


@router.get("/pipelines/new")
@html_errors
def new_pipeline_form(portal: PortalDep) -> Response:
    with portal.work(Role.editor) as session:
        assert portal.ctx is not None
        return portal.render("pipeline_new.html", connections=_connection_choices(session, portal.ctx),
                             values={"state": "active", "value_format": "string", "starting_offsets": "earliest",
                                     "schedule_kind": "none", "timezone": "UTC"},
                             errors=views.FormErrors())


_PIPELINE_FIELDS = {
    "name": "name", "source": "topics", "source.topics": "topics", "source.connection_id": "connection_id",
    "source.value_format": "value_format", "source.schema": "schema", "source.max_offsets_per_run": "max_offsets_per_run",
    "source.starting_offsets": "starting_offsets", "target": "target_path", "schedule": "schedule",
    "schedule.cron": "cron", "schedule.timezone": "timezone", "schedule.interval_seconds": "interval_seconds",
    "state": "state",
}


def _pipeline_body(form: FormData) -> dict[str, Any]:
    text = lambda key: str(form.get(key, "")).strip()  # noqa: E731
    topics = [t for t in re.split(r"[,\s]+", text("topics")) if t]
    source: dict[str, Any] = {"connection_id": text("connection_id") or None, "topics": topics or None,
                              "value_format": text("value_format") or "raw",
                              "starting_offsets": text("starting_offsets") or "earliest"}
    if source["value_format"] == "json":
        source["schema"] = text("schema") or None
    if text("max_offsets_per_run"):
        source["max_offsets_per_run"] = text("max_offsets_per_run")
    schedule: dict[str, Any] | None = None
    if text("schedule_kind") == "interval":
        schedule = {"interval_seconds": text("interval_seconds")}
    elif text("schedule_kind") == "cron":
        schedule = {"cron": text("cron"), "timezone": text("timezone") or "UTC"}
    return {"name": text("name"), "source": source, "target": {"type": "delta", "path": text("target_path")},
            "schedule": schedule, "state": text("state") or "active"}


@router.post("/pipelines/new")
@html_errors
def create_pipeline(portal: PortalDep, form: Form) -> Response:
    kind = str(form.get("schedule_kind", "none"))
    drop = ["target.kafka", "IntervalSchedule" if kind == "cron" else "CronSchedule"]
    strip = ["CronSchedule", "IntervalSchedule", "delta"]
    try:
        with portal.work(Role.editor, form=form) as session:
            assert portal.ctx is not None
            try:
                spec = PipelineSpec.model_validate(_pipeline_body(form))
            except ValidationError as exc:
                raise ValidationFailed("The pipeline is not valid", errors=validation_errors(exc.errors())) from None
            created = pipelines.create_pipeline(session=session, ctx=portal.ctx, spec=spec,
                                                storage_root=portal.settings.resolved_storage_root)
            target = f"/portal/pipelines/{created.id}?notice=created"
        return portal.redirect(target)
    except (ValidationFailed, Conflict) as exc:
        errors = views.sort_errors(exc.errors or [], _PIPELINE_FIELDS, drop=drop, strip=strip)
        if isinstance(exc, Conflict):
            errors.add("name", exc.detail)
        elif not errors:
            errors.add(None, exc.detail)
        with portal.work(Role.editor) as session:
            assert portal.ctx is not None
            return portal.render("pipeline_new.html", status=exc.status, errors=errors,
                                 connections=_connection_choices(session, portal.ctx),
                                 values={k: v for k, v in form.items() if k != "csrf_token"})


def _pipeline_view(portal: Portal, session: Session, pipeline_id: uuid.UUID) -> dict[str, Any]:
    assert portal.ctx is not None
    pipeline = pipelines.get_pipeline(session=session, ctx=portal.ctx, pipeline_id=pipeline_id)
    factory = offsets.default_client_factory(portal.request.app.state.secrets, portal.settings.kafka_timeout_s)
    table, etag = offsets.read_offsets(session=session, ctx=portal.ctx, pipeline_id=pipeline.id, client_factory=factory)
    conn = connections.get_connection(session=session, ctx=portal.ctx, connection_id=pipeline.connection_id)
    read = pipelines.to_read(pipeline, portal.settings.resolved_storage_root)
    definition = read.model_dump(mode="json", by_alias=True, exclude={"id", "status", "created_at", "updated_at"})
    return {"pipeline": pipeline, "read": read, "definition_json": json.dumps(definition, indent=2),
            "connection": conn, "offsets": table, "offsets_etag": etag,
            "max_lag": max((p.lag or 0 for p in table.partitions), default=0)}


@router.get("/pipelines/{pipeline_id}")
@html_errors
def pipeline_page(portal: PortalDep, pipeline_id: str) -> Response:
    with portal.work() as session:
        assert portal.ctx is not None
        view = _pipeline_view(portal, session, _id(pipeline_id, "Pipeline"))
        recent, total_runs = runs.list_runs(session=session, ctx=portal.ctx, pipeline_id=view["pipeline"].id,
                                            page=PageParams(limit=RUNS_SHOWN, offset=0, sort="-created_at"))
        reads = [runs.to_read(r) for r in recent]
        chronological = list(reversed(reads))
        records = views.bars((f"#{r.seq}", r.records_read, f"run {r.seq}: {views.number(r.records_read)} records")
                             for r in chronological)
        durations = views.bars((f"#{r.seq}", r.duration_s, f"run {r.seq}: {views.duration(r.duration_s)}")
                               for r in chronological)
        active = any(r.state not in TERMINAL_STATES for r in reads)
        return portal.render("pipeline.html", **view, runs=reads, total_runs=total_runs, records_chart=records,
                             duration_chart=durations, live=active, share=views.share)


def _set_state(portal: Portal, form: FormData, pipeline_id: str, state: str, notice: str) -> Response:
    with portal.work(Role.editor, form=form) as session:
        assert portal.ctx is not None
        pipeline = pipelines.set_state(session=session, ctx=portal.ctx, pipeline_id=_id(pipeline_id, "Pipeline"),
                                       state=state)
        target = f"/portal/pipelines/{pipeline.id}?notice={notice}"
    return portal.redirect(target)


@router.post("/pipelines/{pipeline_id}/pause")
@html_errors
def pause_pipeline(portal: PortalDep, form: Form, pipeline_id: str) -> Response:
    return _set_state(portal, form, pipeline_id, "paused", "paused")


@router.post("/pipelines/{pipeline_id}/resume")
@html_errors
def resume_pipeline(portal: PortalDep, form: Form, pipeline_id: str) -> Response:
    return _set_state(portal, form, pipeline_id, "active", "resumed")


@router.post("/pipelines/{pipeline_id}/run")
@html_errors
def run_now(portal: PortalDep, form: Form, pipeline_id: str) -> Response:
    with portal.work(Role.editor, form=form) as session:
        assert portal.ctx is not None
        run = runs.trigger_run(session=session, ctx=portal.ctx, pipeline_id=_id(pipeline_id, "Pipeline"),
                               dispatcher=portal.request.app.state.dispatcher)
        target = f"/portal/runs/{run.id}?notice=run-queued"
    return portal.redirect(target)


# Replay (moving offsets).

_REPLAY_MODES = ("offset", "earliest", "latest", "timestamp", "shift")
_MINUTE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")


def _chosen(form: FormData, errors: views.FormErrors) -> list[tuple[str, int]]:
    out = []
    for raw in form.getlist("tp"):
        topic, sep, partition = str(raw).rpartition("|")
        if sep and topic and partition.isdigit():
            out.append((topic, int(partition)))
    if not out:
        errors.add("partitions", "Choose at least one partition")
    return sorted(set(out))


def _replay_body(form: FormData, errors: views.FormErrors) -> dict[str, Any]:
    """The OffsetsPatch the form asks for, as a dry run; problems of the form itself go to ``errors``."""
    chosen = _chosen(form, errors)
    mode = str(form.get("mode", ""))
    body: dict[str, Any] = {"replay_mode": str(form.get("replay_mode", "append")), "clamp": form.get("clamp") == "on",
                            "dry_run": True}
    if mode not in _REPLAY_MODES:
        errors.add("mode", "Choose how to move the offsets")
        return body
    if mode == "offset":
        body["offsets"] = []
        for topic, partition in chosen:
            raw = str(form.get(f"offset:{topic}|{partition}", "")).strip()
            if not raw:
                errors.add(f"offset:{topic}|{partition}", "Enter the offset to move to")
            body["offsets"].append({"topic": topic, "partition": partition, "offset": raw or None})
        return body
    by_topic: dict[str, set[int]] = {}
    for topic, partition in chosen:
        by_topic.setdefault(topic, set()).add(partition)
    if len({frozenset(p) for p in by_topic.values()}) > 1:
        errors.add("partitions", "For this mode choose the same partition numbers in every topic (or one topic at a "
                                 "time); the offset mode can name any partitions")
    if chosen:
        body["topics"] = sorted(by_topic)
        body["partitions"] = sorted(next(iter(by_topic.values())))
    if mode in ("earliest", "latest"):
        body["reset"] = mode
    elif mode == "timestamp":
        moment = str(form.get("timestamp", "")).strip()
        if not _MINUTE.match(moment):
            errors.add("timestamp", "Enter a date and time (UTC)")
        else:
            body["to_timestamp"] = moment + (":00" if moment.count(":") == 1 else "") + "+00:00"
    else:
        shift = str(form.get("shift", "")).strip()
        if not re.fullmatch(r"-?\d+", shift):
            errors.add("shift", "Enter a whole number of offsets, negative to go back")
        else:
            body["shift_by"] = shift
    return body


def _replay_routes(body: dict[str, Any], rows: list[Any]) -> dict[str, str]:
    routes = {"offsets": "partitions", "topics": "partitions", "partitions": "partitions", "to_timestamp": "timestamp",
              "by_duration": "timestamp", "shift_by": "shift", "replay_mode": "replay_mode", "reset": "mode",
              "clamp": "clamp"}
    for row in rows:
        routes[f"offsets.{row.topic}[{row.partition}]"] = f"offset:{row.topic}|{row.partition}"
    for i, entry in enumerate(body.get("offsets") or []):
        routes[f"offsets[{i}]"] = f"offset:{entry['topic']}|{entry['partition']}"
    return routes


def _replay_page(portal: Portal, pipeline_id: str, *, status: int = 200, **context: Any) -> Response:
    with portal.work(Role.editor) as session:
        view = _pipeline_view(portal, session, _id(pipeline_id, "Pipeline"))
        context.setdefault("values", {"mode": "earliest", "replay_mode": "append"})
        context.setdefault("chosen", {(p.topic, p.partition) for p in view["offsets"].partitions})
        context.setdefault("errors", views.FormErrors())
        return portal.render("replay.html", status=status, **view, **context)


@router.get("/pipelines/{pipeline_id}/replay")
@html_errors
def replay_form(portal: PortalDep, pipeline_id: str) -> Response:
    return _replay_page(portal, pipeline_id)


@router.post("/pipelines/{pipeline_id}/replay")
@html_errors
def replay(portal: PortalDep, form: Form, pipeline_id: str) -> Response:
    errors = views.FormErrors()
    apply = form.get("action") == "apply"
    if apply:
        body = json.loads(str(form.get("patch", "{}")) or "{}")
        body["dry_run"] = False
    else:
        body = _replay_body(form, errors)
    values = {k: v for k, v in form.items() if k not in ("csrf_token", "tp", "patch", "etag", "action")}
    chosen = set(_chosen(form, views.FormErrors()))
    if errors:
        with portal.work(Role.editor, form=form):  # the CSRF and role checks come first, as for any write
            pass
        return _replay_page(portal, pipeline_id, status=422, errors=errors, values=values, chosen=chosen)
    try:
        with portal.work(Role.editor, form=form) as session:
            assert portal.ctx is not None
            factory = offsets.default_client_factory(portal.request.app.state.secrets, portal.settings.kafka_timeout_s)
            try:
                patch = OffsetsPatch.model_validate(body)
            except ValidationError as exc:
                raise ValidationFailed("The offsets change is not valid", errors=validation_errors(exc.errors())) from None
            result = offsets.change_offsets(session=session, ctx=portal.ctx, pipeline_id=_id(pipeline_id, "Pipeline"),
                                            body=patch, if_match=str(form.get("etag")) if apply else None,
                                            client_factory=factory, dispatcher=portal.request.app.state.dispatcher)
            target = f"/portal/pipelines/{pipeline_id}?notice=replayed"
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        with portal.work(Role.editor) as session:
            rows = _pipeline_view(portal, session, _id(pipeline_id, "Pipeline"))["offsets"].partitions
        errors = views.sort_errors(exc.errors or [], _replay_routes(body, rows))
        if not exc.errors or not errors:
            errors.add(None, exc.detail)
        return _replay_page(portal, pipeline_id, status=exc.status, errors=errors, values=values, chosen=chosen,
                            problem=exc)
    if apply:
        return portal.redirect(target)
    confirm = patch.model_dump(mode="json", exclude={"dry_run"}, exclude_none=True)
    return _replay_page(portal, pipeline_id, values=values, chosen=chosen, preview=result,
                        confirm_patch=json.dumps(confirm), confirm_etag=result.etag)


# Connections.

_CONNECTION_FIELDS = {
    "name": "name", "bootstrap_servers": "bootstrap_servers", "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism", "credentials": "username", "credentials.username": "username",
    "credentials.password": "password", "ssl": "ca_pem", "options": "general",
}


def _connection_body(form: FormData) -> dict[str, Any]:
    text = lambda key: str(form.get(key, "")).strip()  # noqa: E731
    body: dict[str, Any] = {"name": text("name"), "bootstrap_servers": text("bootstrap_servers"),
                            "security_protocol": text("security_protocol") or "PLAINTEXT",
                            "sasl_mechanism": text("sasl_mechanism") or None}
    if text("username") or str(form.get("password", "")):
        body["credentials"] = {"username": text("username"), "password": str(form.get("password", ""))}
    if text("ca_pem"):
        body["ssl"] = {"ca_pem": text("ca_pem")}
    return body


def _connections_page(portal: Portal, *, status: int = 200, **context: Any) -> Response:
    with portal.work() as session:
        assert portal.ctx is not None
        context.setdefault("errors", views.FormErrors())
        context.setdefault("values", {"security_protocol": "PLAINTEXT"})
        rows = _connection_choices(session, portal.ctx)
        statuses = connections.credentials_statuses(rows, portal.request.app.state.secrets)
        return portal.render("connections.html", status=status, connections=rows, credentials=statuses, **context)


@router.get("/connections")
@html_errors
def connections_page(portal: PortalDep) -> Response:
    return _connections_page(portal)


@router.post("/connections")
@html_errors
def create_connection(portal: PortalDep, form: Form) -> Response:
    try:
        with portal.work(Role.editor, form=form) as session:
            assert portal.ctx is not None
            try:
                spec = ConnectionSpec.model_validate(_connection_body(form))
            except ValidationError as exc:
                raise ValidationFailed("The connection is not valid", errors=validation_errors(exc.errors())) from None
            connections.create_connection(session=session, ctx=portal.ctx, secrets=portal.request.app.state.secrets,
                                          spec=spec)
        return portal.redirect("/portal/connections?notice=connection-created")
    except (ValidationFailed, Conflict) as exc:
        errors = views.sort_errors(exc.errors or [], _CONNECTION_FIELDS, drop=["OAuthCredentials"],
                                   strip=["SaslCredentials"])
        if isinstance(exc, Conflict):
            errors.add("name", exc.detail)
        elif not errors:
            errors.add(None, exc.detail)
        # Credentials are write-only: the password is never sent back, even into its own field.
        values = {k: v for k, v in form.items() if k not in ("csrf_token", "password")}
        return _connections_page(portal, status=exc.status, errors=errors, values=values)


@router.post("/connections/{connection_id}/test")
@html_errors
def test_connection(portal: PortalDep, form: Form, connection_id: str) -> Response:
    ident = _id(connection_id, "Connection")
    try:
        with portal.work(Role.editor, form=form) as session:
            assert portal.ctx is not None
            result = probe.probe_connection(session=session, ctx=portal.ctx, secrets=portal.request.app.state.secrets,
                                            connection_id=ident, timeout_s=portal.settings.kafka_timeout_s)
        outcome = {"id": ident, "ok": True, "result": result}
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        outcome = {"id": ident, "ok": False, "title": exc.title, "detail": exc.detail}
    return _connections_page(portal, test=outcome)


# Runs.

@router.get("/runs/{run_id}")
@html_errors
def run_page(portal: PortalDep, run_id: str) -> Response:
    with portal.work() as session:
        assert portal.ctx is not None
        run = runs.get_run(session=session, ctx=portal.ctx, run_id=_id(run_id, "Run"))
        read = runs.to_read(run, log=runs.log_text(session, run.id))
        pipeline = pipelines.get_pipeline(session=session, ctx=portal.ctx, pipeline_id=run.pipeline_id)
        return portal.render("run.html", run=read, pipeline=pipeline, live=read.state not in TERMINAL_STATES)


# Static files: a fixed allow-list, so no path from the URL ever reaches the file system.

@router.get("/static/{name}")
def static(name: str) -> Response:
    media = _STATIC.get(name)
    if media is None:
        return Response("Not found", status_code=404, media_type="text/plain")
    return Response((_HERE / "static" / name).read_bytes(), media_type=media,
                    headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})
