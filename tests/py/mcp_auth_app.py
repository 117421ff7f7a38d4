"""An ASGI app for the transport tests, served by uvicorn in a subprocess: pgbus.mcp.asgi_app
with an auth callable (async, so the awaitable path is the one taken) and a token it wins
over. PGBUS_MCP_WRITE_TOOLS and PGBUS_DATABASE_URL come from the environment."""

from __future__ import annotations

from pgbus.mcp import asgi_app
from starlette.requests import Request


async def team_is_ops(request: Request) -> bool:
    team = request.headers.get("x-team")
    if team == "boom":
        raise RuntimeError("the directory is down")
    return team == "ops"


app = asgi_app(token="t0k", auth=team_is_ops)
