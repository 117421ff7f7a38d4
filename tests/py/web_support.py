"""Helpers for the dashboard tests: a client on a test's database, forms with their CSRF token,
and jobs put into known states through the real SQL functions."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from pgbus.web import create_app
from psycopg.types.json import Jsonb
from starlette.testclient import TestClient

from pgbus.data import DataSource

POLICY = {"max_retries": 3, "backoff_base": 30, "backoff_max": 300, "jitter": 0}


def client(db_url: str, **kwargs: Any) -> TestClient:
    app = create_app(database_url=db_url, **kwargs)
    return TestClient(app, raise_server_exceptions=False, follow_redirects=False)


def csrf(c: TestClient, page: str = "/jobs") -> str:
    html = c.get(page).text
    m = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert m, "the page carries no CSRF token"
    return m.group(1)


def post(c: TestClient, path: str, data: dict[str, Any] | None = None, page: str = "/jobs") -> Any:
    return c.post(path, data={"csrf_token": csrf(c, page), **(data or {})})


def flash_text(c: TestClient, page: str) -> list[str]:
    html = c.get(page).text
    return re.findall(r'<output class="toast" data-kind="(\w+)">([^<]*)</output>', html)


def enqueue(
    conn: psycopg.Connection,
    queue: str,
    job_class: str = "Mail",
    n: int = 1,
    kwargs: dict[str, Any] | None = None,
    batch_id: Any = None,
) -> list[int]:
    rows = conn.execute(
        "SELECT * FROM pgbus.enqueue(%s, %s, %s::jsonb[], NULL, %s)",
        (
            queue,
            job_class,
            [Jsonb({"args": [i], "kwargs": kwargs or {}}) for i in range(n)],
            batch_id,
        ),
    ).fetchall()
    return [r[0] for r in rows]


def fail(conn: psycopg.Connection, queue: str, msg_id: int, policy: dict | None = None) -> str:
    """Reads the message (as a worker would) and reports a failure."""
    conn.execute("SELECT pgmq.set_vt(%s, %s::bigint, 0)", (queue, msg_id))
    conn.execute(
        "UPDATE pgmq.q_" + queue + " SET read_ct = read_ct + 1 WHERE msg_id = %s", (msg_id,)
    )
    return conn.execute(
        "SELECT pgbus.job_failed(%s, %s, %s, %s)",
        (
            queue,
            msg_id,
            Jsonb(
                {
                    "class": "ConnectionError",
                    "message": "gateway timed out",
                    "backtrace": ["a.py:1", "b.py:2"],
                }
            ),
            Jsonb(policy or POLICY),
        ),
    ).fetchone()[0]


def dead_letter(conn: psycopg.Connection, queue: str, msg_id: int) -> None:
    assert conn.execute(
        "SELECT pgbus.dead_letter(%s, %s, %s)",
        (queue, msg_id, Jsonb({"class": "ValueError", "message": "poison"})),
    ).fetchone()[0]


def data(db_url: str) -> DataSource:
    return DataSource(db_url)
