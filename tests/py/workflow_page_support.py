"""Workflow runs in known states for the dashboard's workflow page tests, made through the
real SQL functions (register, start, read as a worker, end the step)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

ERROR = {
    "class": "TimeoutError",
    "message": "gateway timed out",
    "backtrace": ["app/orders.py:12 in capture"],
    "causes": [{"class": "OSError", "message": "connection reset"}],
}


def register(conn: psycopg.Connection, cls: str, steps: list[dict[str, Any]]) -> None:
    conn.execute(
        "SELECT pgbus.workflow_register(%s, %s, 'd1', %s)", (cls, Jsonb(steps), cls.lower())
    )


def start(
    conn: psycopg.Connection,
    cls: str,
    subject: tuple[str, str] | None = None,
    arguments: dict[str, Any] | None = None,
) -> str:
    st, sid = subject or (None, None)
    return str(
        conn.execute(
            "SELECT workflow_id FROM pgbus.workflow_start(%s, %s, %s, %s, actor => 'test')",
            (cls, st, sid, Jsonb(arguments or {})),
        ).fetchone()[0]
    )


def take_steps(conn: psycopg.Connection, cls: str, n: int = 50) -> list[dict[str, Any]]:
    """Reads the class's queue the way a worker does: the steps begin."""
    return [
        {"step_id": int(r[0]["step_id"]), "workflow_id": r[0]["workflow_id"]}
        for r in conn.execute(
            "SELECT context FROM pgbus.read_jobs(ARRAY[%s], 30, %s, 'host:1', 'rev-7')",
            (cls.lower(), n),
        ).fetchall()
    ]


def end_step(
    conn: psycopg.Connection,
    step_id: int,
    verb: str,
    error: dict | None = None,
    fan_out: list[dict[str, Any]] | None = None,
) -> Any:
    return conn.execute(
        "SELECT pgbus.workflow_end_step(%s, %s, error => %s, fan_out => %s)",
        (step_id, verb, Jsonb(error) if error else None, Jsonb(fan_out) if fan_out else None),
    ).fetchone()[0]


def paused_on_error(conn: psycopg.Connection, cls: str, n: int) -> list[str]:
    """n runs of `cls` (steps capture, receipt) paused on TimeoutError at capture."""
    register(conn, cls, [{"name": "capture"}, {"name": "receipt"}])
    ids = [start(conn, cls, ("Order", str(i)), {"n": i, "api_token": "s3cret"}) for i in range(n)]
    for s in take_steps(conn, cls, n):
        end_step(conn, s["step_id"], "pause", ERROR)
    return ids


def status(conn: psycopg.Connection, workflow_id: str) -> str:
    return conn.execute(
        "SELECT status FROM pgbus.workflows WHERE workflow_id = %s", (workflow_id,)
    ).fetchone()[0]
