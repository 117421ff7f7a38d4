"""Helpers for the MCP tests: the real SDK client on a server built over a test's database,
and workflow runs put into known states through the real SQL functions."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import psycopg
from mcp import Client
from mcp.types import Implementation
from pgbus.mcp import build_server
from psycopg.types.json import Jsonb

from pgbus.data import DataSource

SECRET = "hunter2-secret"


def server(db_url: str, **kwargs: Any):
    return build_server(DataSource(db_url), **kwargs)


def client(db_url: str, name: str | None = "test-agent", **kwargs: Any) -> Client:
    info = Implementation(name=name, version="1") if name is not None else None
    return Client(server(db_url, **kwargs), client_info=info)


async def call(c: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured answer; fails the test on a tool error."""
    r = await c.call_tool(tool, args)
    assert not r.is_error, f"{tool} answered an error: {r.content}"
    assert r.structured_content is not None, f"{tool} has no structured content"
    return r.structured_content


async def error(c: Client, tool: str, **args: Any) -> str:
    """A tool error's text; fails the test when the call succeeded."""
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} answered without an error: {r.structured_content}"
    return r.content[0].text


def text_of(value: Any) -> str:
    return json.dumps(value, default=str)


# -- workflow runs in known states -------------------------------------------------------------


def register(conn: psycopg.Connection, cls: str, steps: list[dict[str, Any]]) -> None:
    conn.execute(
        "SELECT pgbus.workflow_register(%s, %s, 'd1', %s)", (cls, Jsonb(steps), queue_of(cls))
    )


def queue_of(cls: str) -> str:
    return "wf_" + cls.lower()


def start(conn: psycopg.Connection, cls: str, arguments: dict[str, Any] | None = None) -> UUID:
    return conn.execute(
        "SELECT workflow_id FROM pgbus.workflow_start(%s, NULL, NULL, %s, actor => 'tester')",
        (cls, Jsonb(arguments or {})),
    ).fetchone()[0]


def begin(conn: psycopg.Connection, cls: str) -> int:
    """Reads the class's queue as a worker would: the step id it began."""
    row = conn.execute(
        "SELECT context FROM pgbus.read_jobs(ARRAY[%s], 30, 1, 'host:1', 'rev')",
        (queue_of(cls),),
    ).fetchone()
    assert row is not None, f"no step of {cls} was due"
    return int(row[0]["step_id"])


def paused_run(conn: psycopg.Connection, cls: str = "McpPaused") -> UUID:
    """A run paused by an error in its first step (arguments and error hold secrets)."""
    register(conn, cls, [{"name": "one"}, {"name": "two"}])
    run = start(conn, cls, {"card": SECRET, "nested": {"deep": [SECRET]}})
    step = begin(conn, cls)
    conn.execute(
        "SELECT pgbus.workflow_end_step(%s, 'pause', error => %s)",
        (step, Jsonb({"class": "KeyError", "message": f"boom {SECRET}", "backtrace": [SECRET]})),
    )
    return run


def waiting_run(conn: psycopg.Connection, cls: str = "McpWaiting") -> UUID:
    """A run parked at a gate step waiting for signal `paid`."""
    register(
        conn, cls, [{"name": "capture", "wait_for": "paid", "wait_timeout": 3600}, {"name": "ship"}]
    )
    run = start(conn, cls)
    step = begin(conn, cls)
    conn.execute("SELECT pgbus.workflow_end_step(%s, 'park')", (step,))
    return run


def later_run(conn: psycopg.Connection, cls: str = "McpLater") -> UUID:
    """A ready run whose first step is due in an hour."""
    register(conn, cls, [{"name": "a", "wait": 3600}, {"name": "b"}])
    return start(conn, cls)


def status(conn: psycopg.Connection, run: UUID) -> str:
    return conn.execute(
        "SELECT status FROM pgbus.workflows WHERE workflow_id = %s", (run,)
    ).fetchone()[0]


def events(conn: psycopg.Connection, run: UUID) -> list[tuple[str, str | None, str | None]]:
    return conn.execute(
        "SELECT event, actor, reason FROM pgbus.workflow_events WHERE workflow_id = %s ORDER BY event_id",
        (run,),
    ).fetchall()
