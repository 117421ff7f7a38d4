"""Sample data for the browser tests: a few queues with messages, failures, dead letters, a
batch, processes and job stats, written through pgbus's own SQL functions."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

POLICY = Jsonb({"max_retries": 3, "backoff_base": 30, "backoff_max": 600, "jitter": 0})


def error(cls: str, message: str) -> Jsonb:
    return Jsonb(
        {
            "class": cls,
            "message": message,
            "backtrace": ["app/jobs.py:12 in perform", "pgbus/worker.py:200 in run"],
        }
    )


def enqueue(conn: psycopg.Connection, queue: str, job_class: str, args: list[dict]) -> list[int]:
    rows = conn.execute(
        "SELECT pgbus.enqueue(%s, %s, %s::jsonb[])", (queue, job_class, [Jsonb([a]) for a in args])
    ).fetchall()
    return [r[0] for r in rows]


def fail(conn: psycopg.Connection, queue: str, msg_id: int, cls: str, message: str) -> str:
    """One failed attempt of a message: read it (read_ct + 1), then report the failure."""
    conn.execute("SELECT pgmq.set_vt(%s, %s::bigint, 0)", (queue, msg_id))
    conn.execute(
        "UPDATE pgmq.q_" + queue + " SET read_ct = read_ct + 1 WHERE msg_id = %s", (msg_id,)
    )
    return conn.execute(
        "SELECT pgbus.job_failed(%s, %s::bigint, %s, %s)",
        (queue, msg_id, error(cls, message), POLICY),
    ).fetchone()[0]


def seed(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for q in ("default", "mailers", "reports"):
            conn.execute("SELECT pgbus.ensure_queue(%s)", (q,))
        ids = enqueue(
            conn,
            "default",
            "app.jobs:ChargeCard",
            [{"order": i, "api_key": "sk_live_secret", "amount": 10 * i} for i in range(1, 31)],
        )
        enqueue(conn, "mailers", "app.jobs:SendWelcome", [{"user": i} for i in range(1, 13)])
        enqueue(conn, "reports", "app.jobs:BuildReport", [{"day": d} for d in range(1, 6)])
        for msg_id in ids[:4]:
            fail(conn, "default", msg_id, "ConnectionError", "could not reach the card processor")
        for msg_id in ids[4:7]:
            conn.execute(
                "SELECT pgbus.dead_letter('default', %s::bigint, %s)",
                (msg_id, error("ValueError", "card number is not valid")),
            )
        batch = conn.execute(
            "SELECT pgbus.batch_open('Nightly import', %s)", (Jsonb({"source": "warehouse"}),)
        ).fetchone()[0]
        conn.execute(
            "SELECT pgbus.enqueue('reports', 'app.jobs:ImportRow', %s::jsonb[], NULL, %s)",
            ([Jsonb([{"row": i}]) for i in range(4)], batch),
        )
        conn.execute("SELECT pgbus.batch_close(%s)", (batch,))
        conn.execute(
            "SELECT pgbus.recurring_sync(%s)",
            (
                Jsonb(
                    [
                        {
                            "key": "nightly_report",
                            "class_name": "app.jobs:BuildReport",
                            "schedule": "0 3 * * *",
                            "queue_name": "reports",
                        }
                    ]
                ),
            ),
        )
        conn.execute(
            "SELECT pgbus.deploy_tasks_declare(%s)",
            (
                Jsonb(
                    [
                        {
                            "key": "backfill_totals",
                            "class_name": "app.jobs:Backfill",
                            "version": "1",
                            "queue_name": "default",
                        }
                    ]
                ),
            ),
        )
        conn.execute("SELECT pgbus.process_register('supervisor', 'app-1', 4100, 'a1b2c3d')")
        conn.execute(
            "SELECT pgbus.process_register('worker', 'app-1', 4101, 'a1b2c3d', %s)",
            (Jsonb({"queues": ["default", "mailers", "reports"], "threads": 5}),),
        )
        # An hour of job stats, one row a minute per status mix, for the insights charts.
        conn.execute(
            """
            INSERT INTO pgbus.job_stats
                (job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count, created_at)
            SELECT c.job_class, c.queue_name,
                   CASE WHEN g % 13 = 0 THEN 'failed' WHEN g % 29 = 0 THEN 'dead_lettered' ELSE 'success' END,
                   20 + (g * 37) % 400, 5 + (g * 11) % 900, (g % 13 = 0)::int,
                   now() - make_interval(secs => g * 20)
            FROM generate_series(1, 180) g
            CROSS JOIN (VALUES ('app.jobs:ChargeCard', 'default'), ('app.jobs:SendWelcome', 'mailers'))
                AS c(job_class, queue_name)
            """
        )
