"""The dashboard: pages, their partial-refresh fragments, actions and endpoints.

Every page is one handler that gathers its data from `pgbus.data.DataSource` and renders a
template; with `?fragment=<region id>` the same handler renders only that region (the
auto-refresh asks for it). Every action is a POST handled by `_act`: check the CSRF token,
run one SQL function through `DataSource.act`, redirect back (303) with its answer as a flash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
import psycopg
from pgbus.web import metrics as metrics_endpoint
from pgbus.web.security import (
    CSRF_FIELD,
    FLASH_COOKIE,
    FLASH_MAX_AGE,
    AuthMiddleware,
    SecurityHeadersMiddleware,
    Signer,
    WebAuth,
    cookie_path,
    finish_response,
)
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pgbus.config import settings
from pgbus.data import (
    BULK_LIMIT,
    DEFAULT_FILTER,
    INSIGHT_PERIODS,
    PAGE_COUNT_LIMIT,
    DataSource,
    filter_secrets,
)
from pgbus.serialization import NUL_REFUSAL, SerializationError, dump_arguments

log = logging.getLogger("pgbus.web")

HERE = Path(__file__).parent
QUEUE_NAME = re.compile(r"^[a-z0-9_]{1,47}$")
# ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
DIGITS = re.compile(r"[0-9]{1,19}")
# A path parameter that goes into a path as it is (no "/", "?", "#", "%", space or control
# character); any other is percent-encoded, and the router, which decodes the path before it
# matches, hands the handler the value itself (a route whose value may hold "/", such as a
# workflow class name, takes it as {name:path}).
PLAIN_PATH_PARAM = re.compile(r"[A-Za-z0-9._~:@!$&'()*+,;=-]+")
PATH_PARAM_MARKER = re.compile(r"~pgbus-param-([A-Za-z_][A-Za-z0-9_]*)~")
MAX_BIGINT = 2**63 - 1
MAX_BODY = 256 * 1024  # a form bigger than this is refused before it is read
MAX_FIELD = 4096
# Fields that hold a JSON payload may be as long as the form: their own limit (such as
# workflow_max_payload_size) is checked where they are read.
LONG_FIELDS = frozenset({"payload"})
MAX_SELECTED = BULK_LIMIT
CSRF_REFUSAL = "Forbidden: the form's CSRF token is missing or wrong; reload the page"


class BadInput(HTTPException):
    def __init__(self, text: str, status: int = 400) -> None:
        super().__init__(status_code=status, detail=text)


def not_found(what: str) -> BadInput:
    return BadInput(what, 404)


# -- input parsing: anything odd is a 400/404 with a plain sentence --------------------------


def queue_param(value: str | None, *, required: bool = True) -> str | None:
    if value is None or value == "":
        if required:
            raise BadInput("A queue name is required")
        return None
    if not QUEUE_NAME.fullmatch(value):
        raise not_found("No such queue")
    return value


def msg_id_param(value: str) -> int:
    if not DIGITS.fullmatch(value) or int(value) > MAX_BIGINT:
        raise not_found("No such message")
    return int(value)


def cursor_id(value: str | None) -> int | None:
    if value in (None, ""):
        return None
    if not DIGITS.fullmatch(value) or int(value) > MAX_BIGINT:
        raise BadInput("Bad page cursor")
    return int(value)


def encode_cursor(row: dict[str, Any], at: str) -> str:
    return f"{row[at].isoformat()}~{row['queue_name']}~{row['msg_id']}"


def decode_cursor(value: str | None) -> tuple[datetime, str, int] | None:
    if value in (None, ""):
        return None
    parts = value.split("~")
    try:
        if len(parts) != 3 or len(value) > 120:
            raise ValueError
        at = datetime.fromisoformat(parts[0])
        if at.tzinfo is None or not QUEUE_NAME.fullmatch(parts[1]):
            raise ValueError
        return at, parts[1], cursor_id(parts[2]) or 0
    except (ValueError, OverflowError, BadInput):
        raise BadInput("Bad page cursor") from None


def json_object(text: str) -> dict[str, Any]:
    """A form's JSON object (a payload), refused with a plain sentence when it is not one, or
    holds what PostgreSQL cannot store: NaN or Infinity (not JSON), a NUL character."""

    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError:
        raise BadInput("The payload is not valid JSON") from None
    except RecursionError:
        raise BadInput("The payload is nested too deeply") from None
    if not isinstance(value, dict):
        raise BadInput("The payload must be a JSON object")
    try:
        dump_arguments((), value)  # (plain JSON: only a NUL character is refused)
    except SerializationError:
        raise BadInput(f"The payload {NUL_REFUSAL}") from None
    except RecursionError:
        raise BadInput("The payload is nested too deeply") from None
    return value


def item_param(value: str) -> dict[str, Any]:
    """A bulk checkbox's value: "<queue>:<msg_id>"."""
    queue, _, mid = value.partition(":")
    if not QUEUE_NAME.fullmatch(queue) or not DIGITS.fullmatch(mid):
        raise BadInput("Bad selection")
    if int(mid) > MAX_BIGINT:
        raise BadInput("Bad selection")
    return {"queue": queue, "msg_id": int(mid)}


# -- the app --------------------------------------------------------------------------------


class Dashboard:
    def __init__(
        self,
        data: DataSource,
        signer: Signer,
        refresh_ms: int,
        filter_names: tuple[str, ...],
        per_page: int,
    ) -> None:
        self.data = data
        self.signer = signer
        self.refresh_ms = refresh_ms
        self.filter_names = filter_names
        self.per_page = per_page
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(HERE / "templates")),
            autoescape=jinja2.select_autoescape(["html"]),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            age=human_age,
            when=format_when,
            pretty=lambda v: json.dumps(v, indent=2, sort_keys=True, default=str),
            filtered=lambda v: filter_secrets(v, self.filter_names),
            number=number,
            tojson_attr=lambda v: json.dumps(v, separators=(",", ":"), default=str),
            count=count_text,
            counted_ago=counted_ago,
        )
        self.env.globals["page_count_limit"] = PAGE_COUNT_LIMIT
        # Route paths by (root path, route name, parameter names), split into literal text and
        # parameter names: url_for walks every route, and a page asks for a dozen paths.
        self._path_shapes: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
        self._static_paths: dict[tuple[str, str], str] = {}  # (root path, asset): its path

    def route_path(self, request: Request, name: str, /, **params: str) -> str:
        """The path of route `name` for `params` (each percent-encoded unless plain), its shape
        looked up once per process: the page's links fill their values into it instead of
        asking the router for every link (a list page has dozens)."""
        params = {
            k: v if PLAIN_PATH_PARAM.fullmatch(v) else quote(v, safe="") for k, v in params.items()
        }
        keys = tuple(sorted(params))
        key = (request.scope.get("root_path") or "", name, keys)
        shape = self._path_shapes.get(key)
        if shape is None:
            # The route's path asked once with a marker for each parameter, split into literal
            # text and parameter names (alternately).
            marked = request.url_for(name, **{k: f"~pgbus-param-{k}~" for k in keys}).path
            shape = self._path_shapes[key] = PATH_PARAM_MARKER.split(marked)
        return "".join(part if i % 2 == 0 else params[part] for i, part in enumerate(shape))

    # -- rendering -----------------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        fragments: dict[str, str] | None = None,
        status: int = 200,
        **context: Any,
    ) -> Response:
        """The page, or with ?fragment=<id> only that region's partial template."""
        fragment = request.query_params.get("fragment")
        ctx = self.context(request, **context)
        if fragment is not None:
            partial = (fragments or {}).get(fragment)
            if partial is None:
                raise not_found("No such fragment")
            html = self.env.get_template(partial).render(ctx)
            return finish_response(request, HTMLResponse(html, status_code=status))
        flash = self.signer.read_flash(request)
        html = self.env.get_template(template).render(ctx, flash=flash)
        response = HTMLResponse(html, status_code=status)
        if request.cookies.get(FLASH_COOKIE):
            response.delete_cookie(FLASH_COOKIE, path=cookie_path(request))
        return finish_response(request, response)

    def context(self, request: Request, **extra: Any) -> dict[str, Any]:
        def url(name: str, /, query: dict[str, Any] | None = None, **params: Any) -> str:
            path = self.route_path(request, name, **{k: str(v) for k, v in params.items()})
            q = {k: v for k, v in (query or {}).items() if v not in (None, "")}
            return path + ("?" + urlencode(q) if q else "")

        def static_url(path: str) -> str:
            key = (request.scope.get("root_path") or "", path)
            found = self._static_paths.get(key)
            if found is None:
                found = self._static_paths[key] = request.url_for("static", path=path).path
            return found

        def fragment_url(region: str) -> str:
            q = [(k, v) for k, v in request.query_params.multi_items() if k != "fragment"]
            q.append(("fragment", region))
            return request.url.path + "?" + urlencode(q)

        here = request.url.path + (("?" + request.url.query) if request.url.query else "")
        if "fragment=" in here:
            here = request.url.path
        return {
            "request": request,
            "url": url,
            "static_url": static_url,
            "fragment_url": fragment_url,
            "csrf_token": self.signer.csrf_token(request),
            "return_to": here,
            "refresh_ms": self.refresh_ms,
            "operator": getattr(request.state, "operator", "anonymous"),
            "charts": False,
            "flash": [],
            "bulk_limit": BULK_LIMIT,
            **extra,
        }

    # -- actions -------------------------------------------------------------------------

    async def form(self, request: Request) -> dict[str, list[str]]:
        """The POSTed form after the CSRF check (403 on a missing or wrong token)."""
        length = request.headers.get("content-length")
        if length is not None and (not DIGITS.fullmatch(length) or int(length) > MAX_BODY):
            raise BadInput("Form too large", 413)
        body = await request.body()
        if len(body) > MAX_BODY:
            raise BadInput("Form too large", 413)
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in ("application/x-www-form-urlencoded", "multipart/form-data"):
            raise BadInput(CSRF_REFUSAL, 403)  # no form, so no token
        try:
            form = await request.form(max_files=0, max_fields=MAX_SELECTED + 10)
        except Exception:  # malformed multipart or too many fields: nothing was done
            raise BadInput("Malformed form") from None
        fields: dict[str, list[str]] = {}
        for k, v in form.multi_items():
            # (A NUL character can be in no text PostgreSQL stores: refused here, not a 500.)
            longest = MAX_BODY if k in LONG_FIELDS else MAX_FIELD
            if not isinstance(v, str) or len(v) > longest or "\x00" in v or "\x00" in k:
                raise BadInput("Malformed form")
            fields.setdefault(k, []).append(v)
        token = (fields.get(CSRF_FIELD) or [None])[0]
        if not self.signer.csrf_ok(request, token):
            raise BadInput(CSRF_REFUSAL, 403)
        return fields

    def back(self, request: Request, fields: dict[str, list[str]], default: str) -> str:
        """Where to go after an action: the form's return_to when it is a page of this app."""
        root = request.scope.get("root_path") or ""
        want = (fields.get("return_to") or [""])[0]
        if (
            want.startswith(root + "/")
            and not want.startswith("//")
            and "\\" not in want
            and all(32 < ord(c) < 127 for c in want)
        ):
            return want
        return default

    def done(self, request: Request, to: str, outcome: dict[str, Any]) -> Response:
        kind = "ok" if outcome.get("ok") else "refused"
        text = outcome.get("message") or ("Done" if kind == "ok" else "Not done")
        response = RedirectResponse(to, status_code=303)
        response.set_cookie(
            FLASH_COOKIE,
            self.signer.flash_cookie([{"kind": kind, "text": text}]),
            max_age=FLASH_MAX_AGE,
            httponly=True,
            samesite="lax",
            path=cookie_path(request),
        )
        return response

    async def act(
        self,
        request: Request,
        action: str,
        default_back: str,
        args: Callable[[dict[str, list[str]]], dict[str, Any]] | dict[str, Any],
    ) -> Response:
        fields = await self.form(request)
        kwargs = args(fields) if callable(args) else args
        operator = "dashboard:" + str(getattr(request.state, "operator", "anonymous"))
        from starlette.concurrency import run_in_threadpool

        outcome = await run_in_threadpool(self.data.act, action, operator, **kwargs)
        return self.done(request, self.back(request, fields, default_back), outcome)


class Lazy:
    """A page's data, read on first use: a fragment request reads only what its region shows."""

    __slots__ = ("_fn", "_value")
    _unset = object()

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self._value = Lazy._unset

    def get(self) -> Any:
        if self._value is Lazy._unset:
            self._value = self._fn()
        return self._value

    def __getattr__(self, name: str) -> Any:
        value = self.get()
        try:
            return getattr(value, name)
        except AttributeError:
            try:
                return value[name]
            except (KeyError, TypeError, IndexError):
                raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:
        return self.get()[key]

    def __iter__(self) -> Any:
        return iter(self.get())

    def __len__(self) -> int:
        return len(self.get())

    def __bool__(self) -> bool:
        return bool(self.get())


def count_text(value: int | None, capped: bool = False, estimate: bool = False) -> str:
    """A count from pgbus.queue_stats: "≈ 600,000" for an estimated depth, "1,000+" for a
    count that stopped at the page's limit."""
    if value is None:
        return "—"
    if capped and estimate:
        return f"≈ {value:,}"
    if capped and value > PAGE_COUNT_LIMIT:
        return f"{PAGE_COUNT_LIMIT:,}+"
    return f"{value:,}"


def counted_ago(rows: Any) -> str | None:
    """How long ago the oldest capped queue row of pgbus.queue_stats was counted ("now",
    "6 s"), or None when no row is capped (every figure then is an exact count of now)."""
    times = []
    for r in rows:
        at = r.get("counted_at") if r.get("counts_capped") else None
        if isinstance(at, str):
            at = datetime.fromisoformat(at)
        if at is not None:
            times.append(at)
    if not times:
        return None
    return human_age((datetime.now(UTC) - min(times)).total_seconds())


def human_age(seconds: float | None) -> str:
    """Seconds as the SQL layer words them (pgbus.human_duration): "40 s", "3 min", "2 h"."""
    if seconds is None:
        return "—"
    s = abs(float(seconds))
    if s < 1:
        return "now"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.0f} h"
    return f"{s / 86400:.0f} d"


def number(value: Any) -> str:
    """A count with thousands separators ("—" for none): the templates' `number` filter, and
    texts built in Python."""
    return "—" if value is None else f"{value:,}"


def format_when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def create_app(
    *,
    database_url: str | None = None,
    web_auth: WebAuth | None = None,
    secret_key: str | None = None,
    data: DataSource | None = None,
    refresh_interval_ms: int | None = None,
    filter_parameters: tuple[str, ...] | list[str] | None = None,
    mcp: Any = None,
) -> Starlette:
    """The dashboard as an ASGI app, to mount under any prefix or run alone (`pgbus web`).

    web_auth: a callable given the request that returns the operator's name (recorded on
        every audit row as "dashboard:<name>") or None/False to refuse with 401; defaults to
        the `web_auth` setting. With none, anyone who reaches the app may use it (a warning
        is logged).
    mcp: an MCP app from pgbus.mcp.asgi_app(...), served at /mcp behind the dashboard's auth
        (and its own token or auth, if given); the dashboard's lifespan runs it.
    secret_key: signs CSRF tokens and flash cookies; default PGBUS_WEB_SECRET_KEY, else a
        random key per process (set one when several processes serve the dashboard).
    """
    s = settings()
    auth = web_auth if web_auth is not None else s.web_auth
    dash = Dashboard(
        data or DataSource(database_url),
        Signer(secret_key or os.environ.get("PGBUS_WEB_SECRET_KEY") or None),
        refresh_ms=(
            refresh_interval_ms
            if refresh_interval_ms is not None
            else int(s.web_refresh_interval.total_seconds() * 1000)
        ),
        filter_names=tuple(
            filter_parameters if filter_parameters is not None else s.web_filter_parameters
        ),
        per_page=s.web_per_page,
    )
    from pgbus.web import insight_pages, pages, workflow_pages

    routes = [
        *pages.routes(dash),
        # (before the workflow pages: /workflows/definitions is not a run id)
        *insight_pages.routes(dash),
        *workflow_pages.routes(dash),
        Route("/api/metrics", metrics_endpoint.endpoint(dash.data), name="metrics"),
        Route("/livez", livez, name="livez"),
        Route("/readyz", metrics_endpoint.readyz(dash.data), name="readyz"),
        Mount(
            "/static",
            app=StaticFiles(directory=str(HERE / "static"), check_dir=False),
            name="static",
        ),
    ]

    async def plain_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return PlainTextResponse(str(exc.detail), status_code=exc.status_code)
        return PlainTextResponse("Internal error", status_code=500)

    async def database_down(request: Request, exc: Exception) -> Response:
        log.warning("dashboard: database unavailable: %s", type(exc).__name__)
        return PlainTextResponse("The database is unavailable; try again shortly", status_code=503)

    lifespan = None
    if mcp is not None:
        routes.append(Mount("/mcp", app=mcp, name="mcp"))

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette):
            async with mcp.lifespan():
                yield

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: plain_error,
            psycopg.OperationalError: database_down,
            PoolTimeout: database_down,
        },
    )
    app.state.dashboard = dash
    app.add_middleware(AuthMiddleware, auth=auth)
    app.add_middleware(SecurityHeadersMiddleware)
    return app


async def livez(request: Request) -> Response:
    return PlainTextResponse("ok")


__all__ = ["DEFAULT_FILTER", "INSIGHT_PERIODS", "create_app"]
