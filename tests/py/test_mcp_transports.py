"""The MCP server over its real transports: `pgbus mcp` as a stdio subprocess (the token rule),
`pgbus mcp --http` as a subprocess with a bearer token (the 401's shape, DNS-rebinding
protection), and asgi_app mounted in the dashboard."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation
from starlette.testclient import TestClient

from tests.py.mcp_support import events, paused_run, status
from tests.py.test_mcp_write import WRITE_TOOLS

pytestmark = pytest.mark.anyio
PGBUS = [sys.executable, "-m", "pgbus.cli"]
ROOT = Path(__file__).resolve().parents[2]
RPC_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def env_for(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGBUS_")}
    return {**env, "PGBUS_DATABASE_URL": db_url, **extra}


def test_stdio_refuses_to_start_when_the_tokens_differ(db_url):
    for extra in (
        {"PGBUS_MCP_TOKEN": "s3cret", "PGBUS_MCP_AUTH_TOKEN": "guess"},
        {"PGBUS_MCP_TOKEN": "s3cret"},
        {"PGBUS_MCP_TOKEN": ""},
        {"PGBUS_MCP_TOKEN": "  ", "PGBUS_MCP_AUTH_TOKEN": "  "},
    ):
        p = subprocess.run(
            [*PGBUS, "mcp"],
            env=env_for(db_url, **extra),
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 1, extra
        assert "refusing to start the MCP server" in p.stderr and "s3cret" not in p.stderr
        assert "Traceback" not in p.stderr and p.stdout == ""


def test_http_refuses_to_start_with_an_empty_token(db_url):
    """A token variable that is set but blank is a broken secret, not "no authentication"."""
    p = subprocess.run(
        [*PGBUS, "mcp", "--http", "--port", "9"],
        env=env_for(db_url, PGBUS_MCP_TOKEN="  "),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1
    assert "PGBUS_MCP_TOKEN is set but empty" in p.stderr and "Traceback" not in p.stderr


@contextlib.asynccontextmanager
async def stdio(db_url: str, log: Path, **env: str) -> AsyncIterator[Client]:
    """The official client on `pgbus mcp` over stdio; the server's stderr goes to `log`."""
    params = StdioServerParameters(
        command=PGBUS[0], args=[*PGBUS[1:], "mcp"], env=env_for(db_url, **env)
    )
    with log.open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as c:
            yield c


async def test_stdio_serves_with_a_matching_token(db_url, conn, tmp_path):
    run = paused_run(conn)
    log = tmp_path / "stderr.log"
    tokens = {"PGBUS_MCP_TOKEN": "s3cret", "PGBUS_MCP_AUTH_TOKEN": "s3cret"}
    async with stdio(db_url, log, **tokens, PGBUS_MCP_WRITE_TOOLS="true") as c:
        health = await c.call_tool("pgbus_health", {})
        assert not health.is_error and health.structured_content["status"] in ("OK", "DEGRADED")
        r = await c.call_tool("pgbus_workflow_cancel", {"workflow_id": str(run), "reason": "stdio"})
        assert r.structured_content["ok"]
    assert events(conn, run)[-1] == ("cancelled", "mcp:mcp", "stdio")
    # The server said at its start that the write tools are on; off, it neither says so nor
    # lists them.
    said = log.read_text()
    assert "pgbus MCP: workflow write tools are ON (mcp_write_tools)" in said
    assert "Traceback" not in said
    async with stdio(db_url, log) as c:
        listed = {t.name for t in (await c.list_tools()).tools}
    assert not WRITE_TOOLS & listed and "pgbus_workflow" in listed
    assert "write tools are ON" not in log.read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(db_url) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*PGBUS, "mcp", "--http", "--port", str(port)],
        env=env_for(db_url, PGBUS_MCP_TOKEN="s3cret", PGBUS_MCP_WRITE_TOOLS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_http_refuses_without_the_exact_bearer_token(http_server):
    for auth in (None, "Bearer wrong", "bearer s3cret", "Bearer  s3cret", "Basic s3cret", "s3cret"):
        headers = {**MCP_HEADERS, **({"authorization": auth} if auth else {})}
        r = httpx.post(http_server, json=RPC_LIST, headers=headers, timeout=10)
        assert r.status_code == 401, auth
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32001, "message": "Unauthorized"},
        }
    ok = httpx.post(
        http_server,
        json=RPC_LIST,
        timeout=10,
        headers={**MCP_HEADERS, "authorization": "Bearer s3cret"},
    )
    assert ok.status_code == 200 and "pgbus_health" in ok.text


def test_http_keeps_dns_rebinding_protection(http_server):
    r = httpx.post(
        http_server,
        json=RPC_LIST,
        timeout=10,
        headers={**MCP_HEADERS, "authorization": "Bearer s3cret", "host": "evil.example"},
    )
    assert r.status_code == 421


async def test_http_client_with_the_token(http_server, conn):
    run = paused_run(conn)
    http = create_mcp_http_client(headers={"Authorization": "Bearer s3cret"})
    async with Client(streamable_http_client(http_server, http_client=http)) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        assert {"pgbus_health", "pgbus_workflow_cancel"} <= tools
        r = await c.call_tool("pgbus_queues", {})
        assert not r.is_error and "queues" in r.structured_content
        r = await c.call_tool("pgbus_workflow_cancel", {"workflow_id": str(run), "reason": "http"})
        assert r.structured_content["ok"]
    # The SDK's client calls itself "mcp" when given no client_info.
    assert events(conn, run)[-1] == ("cancelled", "mcp:mcp", "http")


# -- a real HTTP server process and the official client -----------------------------------------


@contextlib.contextmanager
def serving(db_url: str, args: list[str], **env: str) -> Iterator[tuple[str, Path]]:
    """A server process on a free port (args get --port N appended); yields its URL and the
    file its stderr goes to; stopped and reaped on the way out."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="pgbus-mcp-", suffix=".log")[1])
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*args, "--port", str(port)],
            env=env_for(db_url, **env),
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/", log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.unlink(missing_ok=True)


def http_client(
    url: str, name: str | None = "claude-desktop", *, mode: str = "auto", **headers: str
) -> Client:
    """The official client over streamable HTTP; mode "legacy" forces the pre-2026 handshake."""
    info = Implementation(name=name, version="1") if name else None
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url, http_client=http), client_info=info, mode=mode)


def mcp_errors(exc: BaseException) -> list[MCPError]:
    """The MCPErrors inside what the client raised (it wraps them in exception groups)."""
    if isinstance(exc, MCPError):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        return [e for x in exc.exceptions for e in mcp_errors(x)]
    return []


async def unauthorized(client: Client) -> bool:
    try:
        async with client as c:
            await c.list_tools()
    except Exception as exc:  # the client raises it inside exception groups
        found = mcp_errors(exc)
        return bool(found) and all(e.error.code == -32001 for e in found)
    return False


async def test_over_http_the_actor_names_the_client_or_is_plain_mcp(http_server, conn):
    """The modern protocol sends the client's name with every request, so a stateless HTTP
    call knows it: `mcp:<name>`. The legacy handshake gave it once, at initialize, in another
    request: that call does not know the client, and the audit trail says plain `mcp`."""
    named, legacy = paused_run(conn), paused_run(conn, "McpOther")
    async with http_client(http_server, "claude-desktop", Authorization="Bearer s3cret") as c:
        r = await c.call_tool(
            "pgbus_workflow_cancel", {"workflow_id": str(named), "reason": "over http"}
        )
        assert r.structured_content["ok"] and r.structured_content["reason"] == "Cancelled"
    old = http_client(http_server, "claude-desktop", mode="legacy", Authorization="Bearer s3cret")
    async with old as c:
        r = await c.call_tool(
            "pgbus_workflow_resume",
            {"workflow_id": str(legacy), "reason": "legacy", "expected_status": "paused"},
        )
        assert r.structured_content["ok"]
        assert r.structured_content["workflow"]["run"]["status"] == "ready"
    assert events(conn, named)[-1] == ("cancelled", "mcp:claude-desktop", "over http")
    assert ("resumed", "mcp", "legacy") in events(conn, legacy)


async def test_over_http_the_official_client_gets_unauthorized(http_server):
    assert await unauthorized(http_client(http_server))
    assert await unauthorized(http_client(http_server, Authorization="Bearer wrong"))
    assert await unauthorized(http_client(http_server, Authorization="bearer s3cret"))
    async with http_client(http_server, Authorization="Bearer s3cret") as c:
        assert "pgbus_health" in {t.name for t in (await c.list_tools()).tools}


async def test_over_http_write_tools_are_off_unless_switched_on(db_url, conn):
    run = paused_run(conn)
    before = events(conn, run)
    args = [*PGBUS, "mcp", "--http", "--allow-host", "pgbus.internal:*"]
    with serving(db_url, args, PGBUS_MCP_TOKEN="s3cret") as (url, log):
        # DNS-rebinding protection: localhost and the allowed host answer, any other Host 421.
        bearer = {**MCP_HEADERS, "authorization": "Bearer s3cret"}
        port = url.rsplit(":", 1)[1].strip("/")
        for host, code in (("pgbus.internal:" + port, 200), ("evil.example", 421)):
            r = httpx.post(url, json=RPC_LIST, headers={**bearer, "host": host}, timeout=10)
            assert r.status_code == code, (host, r.status_code)
        async with http_client(url, Authorization="Bearer s3cret") as c:
            listed = {t.name for t in (await c.list_tools()).tools}
            r = await c.call_tool("pgbus_workflow_cancel", {"workflow_id": str(run), "reason": "x"})
            assert r.is_error and "Traceback" not in r.content[0].text
            assert not (await c.call_tool("pgbus_workflow", {"workflow_id": str(run)})).is_error
        assert "write tools are ON" not in log.read_text()
    assert not WRITE_TOOLS & listed and "pgbus_workflow" in listed
    assert status(conn, run) == "paused" and events(conn, run) == before
    # On and without a token (localhost): it says so, and that anyone can change runs.
    with serving(db_url, [*PGBUS, "mcp", "--http"], PGBUS_MCP_WRITE_TOOLS="true") as (url, log):
        async with http_client(url) as c:
            on = {t.name for t in (await c.list_tools()).tools}
        said = log.read_text()
    assert on - listed == WRITE_TOOLS and listed <= on
    assert "no token or auth" in said
    assert "write tools are ON" in said
    assert "anyone who reaches it" in said and "change workflow runs" in said


async def test_over_http_an_auth_callable_wins_over_the_token(db_url, conn):
    run = paused_run(conn)
    uvicorn = [
        sys.executable,
        "-m",
        "uvicorn",
        "tests.py.mcp_auth_app:app",
        "--log-level",
        "warning",
    ]
    with serving(db_url, uvicorn, PGBUS_MCP_WRITE_TOOLS="1") as (url, log):
        assert await unauthorized(http_client(url, Authorization="Bearer t0k"))
        assert await unauthorized(http_client(url, **{"x-team": "dev"}))
        assert await unauthorized(http_client(url, **{"x-team": "boom"}))
        raw = httpx.post(url, json=RPC_LIST, headers={**MCP_HEADERS, "x-team": "boom"}, timeout=10)
        assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"
        assert raw.json()["error"] == {"code": -32001, "message": "Unauthorized"}
        assert "directory" not in raw.text
        async with http_client(url, **{"x-team": "ops"}) as c:
            health = await c.call_tool("pgbus_health", {})
            assert not health.is_error and health.structured_content["status"]
            r = await c.call_tool(
                "pgbus_workflow_cancel", {"workflow_id": str(run), "reason": "team ops"}
            )
            assert r.structured_content["ok"]
        said = log.read_text()
    assert "MCP auth callable raised" in said and "directory is down" in said
    assert events(conn, run)[-1] == ("cancelled", "mcp:claude-desktop", "team ops")


def test_the_dashboard_mounts_it_at_mcp(db_url, caplog):
    from pgbus.mcp import asgi_app
    from pgbus.web import create_app

    mcp = asgi_app(token="t0k", allowed_hosts=["testserver"])
    assert "no token or auth" not in caplog.text
    app = create_app(database_url=db_url, mcp=mcp)
    with TestClient(app) as tc:
        assert tc.post("/mcp", json=RPC_LIST, headers=MCP_HEADERS).status_code == 401
        r = tc.post("/mcp", json=RPC_LIST, headers={**MCP_HEADERS, "authorization": "Bearer t0k"})
        assert r.status_code == 200 and "pgbus_health" in r.text
        assert tc.get("/livez").text == "ok"


def test_auth_callable_wins_over_the_token(db_url, caplog):
    from pgbus.mcp import asgi_app

    app = asgi_app(
        token="t0k",
        auth=lambda req: req.headers.get("x-team") == "ops",
        allowed_hosts=["testserver"],
    )
    with TestClient(app) as tc:
        bearer = {**MCP_HEADERS, "authorization": "Bearer t0k"}
        assert tc.post("/", json=RPC_LIST, headers=bearer).status_code == 401
        assert (
            tc.post("/", json=RPC_LIST, headers={**MCP_HEADERS, "x-team": "ops"}).status_code == 200
        )
    caplog.clear()
    asgi_app(write_tools=True)
    assert "anyone who reaches it" in caplog.text and "change workflow runs" in caplog.text
