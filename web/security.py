"""Who may use the dashboard, CSRF tokens, signed flash messages, and the response headers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("pgbus.web")

# `web_auth(request)` returns the operator's name, or None/False to refuse (401).
WebAuth = Callable[[Request], "str | bool | Awaitable[str | bool | None] | None"]

CSRF_COOKIE = "pgbus_csrf"
CSRF_FIELD = "csrf_token"
FLASH_COOKIE = "pgbus_flash"
FLASH_MAX_AGE = 60  # seconds: a flash lives across one redirect, not longer

# No inline script or style: ApexCharts 5.0.0 injects one fixed block of legend CSS, allowed
# by its hash (pgbus.js links apexcharts.css so its big stylesheet is never injected).
APEXCHARTS_LEGEND_STYLE = "'sha256-aSysLrDECVdJ6L+jLf8CC5QKLmwRuk/OZiZk9mYky8A='"
CONTENT_SECURITY_POLICY = (
    f"default-src 'self'; script-src 'self'; style-src 'self' {APEXCHARTS_LEGEND_STYLE}; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'self'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "SAMEORIGIN",
    "x-content-type-options": "nosniff",
    "x-xss-protection": "0",
    "referrer-policy": "strict-origin-when-cross-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
    "cross-origin-opener-policy": "same-origin",
}

# Paths answered without authentication: probes must work for an orchestrator that has no
# credentials, and the static files hold nothing private.
OPEN_PATHS = ("/livez", "/readyz", "/static/")


def basic_auth(password: str, *, realm: str = "pgbus") -> WebAuth:
    """HTTP Basic: any user name with this password; the operator is that user name."""
    want = password.encode()

    def check(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if not header.startswith("Basic "):
            return None
        try:
            user, _, given = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if hmac.compare_digest(given.encode(), want):
            return user.strip() or "operator"
        return None

    check.realm = realm  # type: ignore[attr-defined]
    return check


def bearer_auth(token: str, *, operator: str = "token") -> WebAuth:
    """`Authorization: Bearer <token>` (for scrapers and scripts); the operator is `operator`."""
    want = token.encode()

    def check(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), want):
            return operator
        return None

    return check


def any_of(*checks: WebAuth) -> WebAuth:
    """The first check that names an operator wins."""

    async def check(request: Request) -> str | bool | None:
        for c in checks:
            name = await call_auth(c, request)
            if name:
                return name
        return None

    check.realm = next((getattr(c, "realm", None) for c in checks if hasattr(c, "realm")), None)  # type: ignore[attr-defined]
    return check


async def call_auth(auth: WebAuth, request: Request) -> str | bool | None:
    result = auth(request)
    if inspect.isawaitable(result):
        result = await result
    return result


class AuthMiddleware:
    """Asks `auth` about every request but the open paths; 401 when it refuses."""

    def __init__(self, app: ASGIApp, auth: WebAuth | None) -> None:
        self.app = app
        self.auth = auth
        if auth is None:
            log.warning(
                "the pgbus dashboard has no web_auth: anyone who reaches it can act on your "
                "queues (pass web_auth= to create_app, or set PGBUS_WEB_PASSWORD for pgbus web)"
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        local = path[len(root) :] if root and path.startswith(root) else path
        if self.auth is None:
            scope["state"]["operator"] = "anonymous"
        elif not local.startswith(OPEN_PATHS):
            try:
                name = await call_auth(self.auth, Request(scope, receive))
            except Exception:  # a failing auth callable refuses; it never opens the door
                log.exception("web_auth raised: refusing the request")
                name = None
            if not name:
                headers = {}
                realm = getattr(self.auth, "realm", None)
                if realm:
                    headers["www-authenticate"] = f'Basic realm="{realm}", charset="UTF-8"'
                response = PlainTextResponse("Unauthorized", status_code=401, headers=headers)
                await response(scope, receive, send)
                return
            scope["state"]["operator"] = name if isinstance(name, str) else "operator"
        await self.app(scope, receive, send)


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for k, v in SECURITY_HEADERS.items():
                    if k.encode() not in present:
                        headers.append((k.encode(), v.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Signer:
    """HMAC signatures with the app's secret key (CSRF tokens, flash cookies)."""

    def __init__(self, secret_key: str | None) -> None:
        self.key = (secret_key or secrets.token_urlsafe(32)).encode()

    def sign(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def check(self, text: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(text), signature)

    # CSRF: a random value in an HttpOnly cookie; forms carry its signature.
    def csrf_token(self, request: Request) -> str:
        seed = request.state.csrf_seed if hasattr(request.state, "csrf_seed") else None
        if seed is None:
            seed = request.cookies.get(CSRF_COOKIE) or ""
            if not _plausible_seed(seed):
                seed = secrets.token_urlsafe(24)
                request.state.new_csrf_seed = seed
            request.state.csrf_seed = seed
        return self.sign("csrf:" + seed)

    def csrf_ok(self, request: Request, token: Any) -> bool:
        seed = request.cookies.get(CSRF_COOKIE) or ""
        return (
            _plausible_seed(seed)
            and isinstance(token, str)
            and len(token) == 64
            and self.check("csrf:" + seed, token)
        )

    # Flash messages: [{kind, text}] in a signed cookie, read once.
    def flash_cookie(self, messages: list[dict[str, str]]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(messages).encode()).decode()
        return body + "." + self.sign("flash:" + body)

    def read_flash(self, request: Request) -> list[dict[str, str]]:
        raw = request.cookies.get(FLASH_COOKIE) or ""
        body, _, sig = raw.partition(".")
        if not body or not self.check("flash:" + body, sig):
            return []
        try:
            items = json.loads(base64.urlsafe_b64decode(body.encode()))
        except ValueError:
            return []
        return [
            {"kind": i["kind"], "text": i["text"]}
            for i in items
            if isinstance(i, dict)
            and i.get("kind") in ("ok", "refused", "error")
            and isinstance(i.get("text"), str)
        ][:5]


def _plausible_seed(seed: str) -> bool:
    return 16 <= len(seed) <= 64 and all(c.isalnum() or c in "-_" for c in seed)


def cookie_path(request: Request) -> str:
    return (request.scope.get("root_path") or "") + "/"


def finish_response(request: Request, response: Response) -> Response:
    """Sets the CSRF cookie when this request made a new one."""
    seed = getattr(request.state, "new_csrf_seed", None)
    if seed:
        response.set_cookie(
            CSRF_COOKIE,
            seed,
            httponly=True,
            samesite="strict",
            path=cookie_path(request),
            secure=request.url.scheme == "https",
        )
    return response
