"""Signing in to the portal, and who is signed in on every other page.

The sign-in form takes an API key, authenticates it exactly as the API does
(``api.tenancy.auth.authenticate_tenant``) and opens a server-side session
(``api.tenancy.portal_sessions``) whose random id is all the cookie holds. Every other page takes
``Viewer``, ``Editor`` or ``Admin`` (the role its API route needs: reads viewer, writes and connection
tests editor, API keys admin): a dependency that reads the cookie, checks a POST's CSRF token, resumes
the session in the request's unit of work (refused once it has ended, timed out, or its key is
revoked), checks the role, and hands the page a ``SignedIn``. The unit of
work commits once the page has returned, before the response is sent, and rolls back on any failure.

Pages are ``PortalRoute``s: a domain error becomes HTML, not problem+json. An expired or missing
sign-in goes to the sign-in page; anything else is the error page with the status the API would answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from sqlalchemy import Engine
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from api.connections.clients import KafkaClientCache
from api.core.auth_throttle import TooManyFailures
from api.core.config import Settings
from api.core.db import unit_of_work
from api.core.deps import SessionDep, SettingsDep, operator_token, throttled
from api.core.errors import DomainError, Forbidden, Unauthorized
from api.core.security import Role, TenantContext
from api.portal import pages
from api.portal.forms import LoginForm
from api.portal.session import COOKIE_PATH, LOGIN_COOKIE, LOGIN_TTL_S, SESSION_COOKIE, SessionCodec, tokens_match
from api.secrets.store import SecretStore
from api.tenancy import portal_sessions
from api.tenancy.auth import authenticate_tenant
from api.tenancy.portal_sessions import SessionLimits


class SignInRequired(Unauthorized):
    def __init__(self) -> None:
        super().__init__("Sign in with an API key")


class CsrfRefused(Forbidden):
    code, title = "csrf-failed", "The form expired or did not come from this portal"

    def __init__(self) -> None:
        super().__init__("The form's security token is missing or wrong; reload the page and submit it again")


def session_codec(request: Request) -> SessionCodec:
    """The app's cookie codec, made on first use (its key file lives under ``data_dir``)."""
    codec: SessionCodec | None = getattr(request.app.state, "portal_sessions", None)
    if codec is None:
        codec = SessionCodec(request.app.state.settings.data_dir / "portal-session.key")
        request.app.state.portal_sessions = codec
    return codec


def _session_id(request: Request) -> str | None:
    return request.cookies.get(SESSION_COOKIE) or None


class _UnitOfWork:
    """``db.unit_of_work`` held open from the dependency through the page, closed by ``close``."""

    def __init__(self, engine: Engine) -> None:
        self._stack = ExitStack()
        self.session: Session = self._stack.enter_context(unit_of_work(engine))

    def close(self, failure: BaseException | None) -> None:
        """Commit; or, given the ``failure``, roll back and compensate as ``unit_of_work`` does for any error."""
        if failure is None:
            self._stack.close()
        else:
            self._stack.__exit__(type(failure), failure, failure.__traceback__)


class SignedIn:
    """A signed-in portal request: the caller (``ctx``), the CSRF token its page's forms carry, and the
    request's unit of work (``session``)."""

    def __init__(self, request: Request, ctx: TenantContext, csrf: str, work: _UnitOfWork) -> None:
        self.request = request
        self.ctx = ctx
        self.csrf = csrf
        self._work: _UnitOfWork | None = work

    @classmethod
    def authenticate(cls, request: Request, session_id: str) -> SignedIn:
        """The cookie's session resumed (its key still active), in a new unit of work."""
        work = _UnitOfWork(request.app.state.engine)
        try:
            ctx = portal_sessions.resume_session(session=work.session, session_id=session_id,
                                                 limits=SessionLimits.of(request.app.state.settings))
        except BaseException as exc:
            work.close(exc)
            raise
        return cls(request, ctx, portal_sessions.csrf_token(session_id), work)

    @property
    def session(self) -> Session:
        if self._work is None:
            raise RuntimeError("this request's unit of work has ended")
        return self._work.session

    @property
    def settings(self) -> Settings:
        settings: Settings = self.request.app.state.settings
        return settings

    @property
    def secrets(self) -> SecretStore:
        store: SecretStore = self.request.app.state.secrets
        return store

    @property
    def kafka_clients(self) -> KafkaClientCache:
        clients: KafkaClientCache = self.request.app.state.kafka_clients
        return clients

    def fail(self, failure: BaseException) -> None:
        """Undo the request's work as a failed unit of work is undone (rollback and compensations)."""
        if self._work is not None:
            work, self._work = self._work, None
            work.close(failure)

    def start_over(self, failure: BaseException) -> None:
        """``fail``, then begin a fresh unit of work: for a page that shows the failure beside data it reads."""
        self.fail(failure)
        self._work = _UnitOfWork(self.request.app.state.engine)

    def finish(self) -> None:
        """Commit the request's work (the page returned)."""
        if self._work is not None:
            work, self._work = self._work, None
            work.close(None)

    def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        return pages.render(self.request, template, ctx=self.ctx, csrf=self.csrf, status=status, **context)


async def _sent_csrf(request: Request) -> str | None:
    """The ``csrf_token`` of a POSTed form (a page that takes a form model has had it read already)."""
    if request.method != "POST":
        return None
    token = (await request.form()).get("csrf_token")
    return token if isinstance(token, str) else None


SentCsrf = Annotated[str | None, Depends(_sent_csrf)]


def _signed_in(role: Role) -> Callable[[Request, str | None], Iterator[SignedIn]]:
    def dependency(request: Request, sent_csrf: SentCsrf) -> Iterator[SignedIn]:
        session_id = _session_id(request)
        if session_id is None:
            raise SignInRequired()
        if request.method == "POST" and not tokens_match(sent_csrf, portal_sessions.csrf_token(session_id)):
            raise CsrfRefused()
        caller = SignedIn.authenticate(request, session_id)
        request.state.portal_caller = caller  # for PortalRoute: a failure's page still shows who is signed in
        try:
            caller.ctx.require(role)
            yield caller
        except BaseException as exc:
            caller.fail(exc)
            raise
        caller.finish()

    return dependency


# scope="function": the commit happens before the response is sent, as for the API's SessionDep.
Viewer = Annotated[SignedIn, Depends(_signed_in(Role.viewer), scope="function")]
Editor = Annotated[SignedIn, Depends(_signed_in(Role.editor), scope="function")]
Admin = Annotated[SignedIn, Depends(_signed_in(Role.admin), scope="function")]


def _failure_page(request: Request, failure: DomainError) -> Response:
    caller: SignedIn | None = getattr(request.state, "portal_caller", None)
    if caller is not None:
        caller.fail(failure)
    if isinstance(failure, Unauthorized):
        target = request.url.path if request.method == "GET" else "/portal/pipelines"
        response = pages.redirect(f"/portal/login?next={quote(target)}")
        response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
        return response
    if caller is not None:
        return caller.render("error.html", status=failure.status, problem=failure)
    return pages.render(request, "error.html", status=failure.status, problem=failure)


class PortalRoute(APIRoute):
    """A portal page: a domain error, raised by its dependencies or the page, is answered as a page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handle(request)
            except DomainError as failure:
                # The rollback happens here, before the error page: the page caught the error the
                # unit of work would otherwise have seen.
                return await run_in_threadpool(_failure_page, request, failure)

        return page


def portal_router() -> APIRouter:
    """A router of portal pages (under ``/portal``, outside the OpenAPI document)."""
    return APIRouter(prefix="/portal", route_class=PortalRoute, include_in_schema=False)


router = portal_router()


def _trusted_proxy(host: str | None, allowed: list[str]) -> bool:
    if "*" in allowed:
        return True
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(entry, strict=False) for entry in allowed)


def came_over_https(request: Request) -> bool:
    """Whether the browser's request was HTTPS: as this server saw it, or as ``X-Forwarded-Proto`` says
    when a proxy in ``INLET_FORWARDED_ALLOW_IPS`` sent it (any hop saying https is believed)."""
    if request.url.scheme == "https":
        return True
    forwarded = request.headers.get("x-forwarded-proto")
    if not forwarded or "https" not in {hop.strip().lower() for hop in forwarded.split(",")}:
        return False
    settings: Settings = request.app.state.settings
    return _trusted_proxy(request.client.host if request.client else None, settings.forwarded_allow_ips)


def secure_cookies(request: Request) -> bool:
    mode = request.app.state.settings.portal_secure_cookies
    return mode == "always" or (mode == "auto" and came_over_https(request))


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int, *,
               path: str = COOKIE_PATH) -> None:
    """A portal cookie: HttpOnly, SameSite=Strict, under ``/portal``, Secure as ``INLET_PORTAL_SECURE_COOKIES``
    says (by default over HTTPS, a trusted proxy's included)."""
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, samesite="strict",
                        secure=secure_cookies(request))


def _login_page(request: Request, *, status: int = 200, error: str | None = None, next_url: str = "") -> Response:
    token, csrf = session_codec(request).seal_login()
    response = pages.render(request, "login.html", status=status, login_csrf=csrf, error=error, next_url=next_url)
    set_cookie(response, request, LOGIN_COOKIE, token, LOGIN_TTL_S)
    return response


def _safe_next(value: str) -> str:
    """Only a portal path: a sign-in link must not send the browser elsewhere."""
    if value.startswith("/portal/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/portal/pipelines"


@router.get("")
def portal_home() -> RedirectResponse:
    return RedirectResponse("/portal/pipelines", status_code=303)


@router.get("/login")
def login_form(request: Request, next: str = "") -> Response:
    return _login_page(request, next_url=_safe_next(next))


@router.post("/login")
def login(request: Request, session: SessionDep, settings: SettingsDep,
          form: Annotated[LoginForm, Form()]) -> Response:
    next_url = _safe_next(form.next)
    if not tokens_match(form.csrf_token, session_codec(request).open_login(request.cookies.get(LOGIN_COOKIE))):
        return _login_page(request, status=403, error=CsrfRefused().detail, next_url=next_url)
    key = form.api_key.strip()
    try:
        if not key:
            raise Unauthorized("Enter an API key")
        ctx = throttled(request, key, lambda: authenticate_tenant(session, key, operator_token(settings)))
    except (Unauthorized, Forbidden, TooManyFailures) as exc:
        return _login_page(request, status=exc.status, error=exc.detail, next_url=next_url)
    limits = SessionLimits.of(settings)
    session_id = portal_sessions.open_session(session=session, ctx=ctx, limits=limits)
    response = pages.redirect(next_url)
    set_cookie(response, request, SESSION_COOKIE, session_id, int(limits.max_s))
    response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
    return response


@router.post("/logout")
def logout(request: Request, session: SessionDep, sent_csrf: SentCsrf) -> Response:
    session_id = _session_id(request)
    if session_id is not None:
        if not tokens_match(sent_csrf, portal_sessions.csrf_token(session_id)):
            raise CsrfRefused()
        portal_sessions.end_session(session=session, session_id=session_id)
    response = pages.redirect("/portal/login?notice=signed-out")
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
    return response
