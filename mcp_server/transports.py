"""How the server is reached: stdio (`pgbus mcp`, a shared-token rule) and streamable HTTP
(`pgbus mcp --http`, asgi_app: stateless, JSON responses, a bearer token or an auth callable,
the SDK's DNS-rebinding protection kept on)."""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from pgbus.mcp.server import build_server, write_tools_enabled
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from pgbus.config import env_boolean
from pgbus.data import DataSource
from pgbus.errors import PgbusError

log = logging.getLogger("pgbus.mcp")

LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
UNAUTHORIZED = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}

McpAuth = Callable[[Request], Any]


def payloads_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """PGBUS_MCP_ALLOW_PAYLOADS read as the settings' booleans are (unset or blank: no); a
    word that is neither a yes nor a no stops the server from starting."""
    raw = (os.environ if environ is None else environ).get("PGBUS_MCP_ALLOW_PAYLOADS", "")
    if not raw.strip():
        return False
    try:
        return env_boolean(raw)
    except KeyError:
        raise PgbusError(
            f"refusing to start the MCP server: PGBUS_MCP_ALLOW_PAYLOADS={raw!r} is neither a yes "
            "(1, true, yes, on) nor a no (0, false, no, off)"
        ) from None


def configured_token(environ: Mapping[str, str] | None = None) -> str | None:
    """PGBUS_MCP_TOKEN, or None when it is unset. Set but blank, it is a broken secret rather
    than "no authentication": the server refuses to start (stdio and HTTP alike)."""
    token = (os.environ if environ is None else environ).get("PGBUS_MCP_TOKEN")
    if token is not None and not token.strip():
        raise PgbusError(
            "refusing to start the MCP server: PGBUS_MCP_TOKEN is set but empty (unset it to "
            "serve without a token)"
        )
    return token


def check_stdio_token(environ: Mapping[str, str] | None = None) -> None:
    """When PGBUS_MCP_TOKEN is set, PGBUS_MCP_AUTH_TOKEN must match it (constant time), or
    the server refuses to start."""
    env = os.environ if environ is None else environ
    expected = configured_token(env)
    if expected is None:
        return
    given = env.get("PGBUS_MCP_AUTH_TOKEN", "")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise PgbusError(
            "refusing to start the MCP server: PGBUS_MCP_TOKEN is set and "
            "PGBUS_MCP_AUTH_TOKEN does not match it"
        )


def serve_stdio(data: DataSource | None = None) -> None:
    check_stdio_token()
    server = build_server(data, allow_payloads=payloads_allowed())
    if write_tools_enabled():
        log.warning("pgbus MCP: workflow write tools are ON (mcp_write_tools)")
    server.run("stdio")


def bearer_matches(header: str | None, token: str) -> bool:
    """Exactly `Bearer <token>`, compared in constant time."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())


class McpApp:
    """The MCP server as an ASGI app: checks auth, then hands the request to the SDK's
    streamable HTTP app. Run alone, its lifespan starts the SDK's session manager; mounted in
    another app, that app's lifespan enters `lifespan()` (pgbus.web.create_app(mcp=...) does)."""

    def __init__(
        self,
        server: Any,
        *,
        token: str | None,
        auth: McpAuth | None,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        if token is not None and not token:
            raise PgbusError("the MCP token is empty")
        self.server = server
        self.token = token
        self.auth = auth
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*LOCAL_HOSTS, *allowed_hosts],
            allowed_origins=[*LOCAL_ORIGINS, *allowed_origins],
        )
        self.inner = server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=True,
            json_response=True,
            transport_security=security,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def allowed(self, scope: Scope, receive: Receive) -> bool:
        if self.auth is not None:
            try:
                result = self.auth(Request(scope, receive))
                if inspect.isawaitable(result):
                    result = await result
            except Exception:  # a failing auth callable refuses; it never opens the door
                log.exception("MCP auth callable raised: refusing the request")
                return False
            return bool(result)
        if self.token is not None:
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization")
            return bearer_matches(raw.decode("latin-1") if raw else None, self.token)
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not await self.allowed(scope, receive):
            body = json.dumps(UNAUTHORIZED).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and scope.get("path", "") == scope.get("root_path", ""):
            # Mounted at /mcp, a request for /mcp itself is the endpoint (no redirect to /mcp/).
            scope = {**scope, "path": scope.get("root_path", "") + "/"}
        await self.inner(scope, receive, send)


def asgi_app(
    *,
    token: str | None = None,
    auth: McpAuth | None = None,
    allow_payloads: bool = False,
    data: DataSource | None = None,
    write_tools: bool | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> McpApp:
    """The MCP server over streamable HTTP (stateless, JSON responses) as an ASGI app.

    auth: a callable given the Starlette request, truthy to allow (wins over token).
    token: clients must send exactly `Authorization: Bearer <token>`.
    With neither, anyone who reaches the app may use it (a warning is logged).
    allowed_hosts / allowed_origins: Host and Origin values accepted besides localhost
    (DNS-rebinding protection), e.g. ["pgbus.internal:*"].
    """
    writes = write_tools_enabled() if write_tools is None else bool(write_tools)
    server = build_server(data, allow_payloads=allow_payloads, write_tools=writes)
    if auth is None and token is None:
        log.warning(
            "the pgbus MCP endpoint has no token or auth: anyone who reaches it can read it"
            + (" and change workflow runs (write tools are on)" if writes else "")
        )
    if writes:
        log.warning("pgbus MCP: workflow write tools are ON (mcp_write_tools)")
    return McpApp(
        server,
        token=token,
        auth=auth,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
