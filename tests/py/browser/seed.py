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
        seed_workflows(conn)
        seed_workflow_pages(conn)


def seed_workflows(conn: psycopg.Connection) -> None:
    """A day of runs of one workflow class over two app revisions, for the insights pages:
    finished, cancelled, paused on an error, waiting, and one on a removed step."""
    conn.execute(
        "INSERT INTO pgbus.workflow_definitions (workflow_class, steps, removed_steps, digest, queue)"
        " VALUES ('app.workflows.OrderFlow', %s, '{pack}', 'd2', 'default')",
        (
            Jsonb(
                [
                    {"name": "charge"},
                    {"name": "pack", "removed": True},
                    {"name": "ship"},
                    {"name": "notify"},
                ]
            ),
        ),
    )
    conn.execute(
        """
        WITH runs AS (
            INSERT INTO pgbus.workflows (workflow_class, status, pause_cause, current_step,
                                         definition_digest, created_at, updated_at, ended_at)
            SELECT 'app.workflows.OrderFlow',
                   CASE WHEN g % 11 = 0 THEN 'cancelled' WHEN g % 17 = 0 THEN 'paused'
                        WHEN g % 19 = 0 THEN 'waiting' WHEN g % 23 = 0 THEN 'ready'
                        ELSE 'finished' END,
                   CASE WHEN g % 11 <> 0 AND g % 17 = 0 THEN 'error' END,
                   CASE WHEN g % 11 = 0 THEN 'charge' WHEN g % 17 = 0 THEN 'ship'
                        WHEN g % 19 = 0 THEN 'notify' WHEN g % 23 = 0 THEN 'pack' ELSE 'notify' END,
                   'd2', now() - make_interval(mins => g * 7), now() - make_interval(mins => g * 7),
                   CASE WHEN g % 11 = 0 OR (g % 17 <> 0 AND g % 19 <> 0 AND g % 23 <> 0)
                        THEN now() - make_interval(mins => g * 7) + make_interval(secs => 30 + g % 200) END
            FROM generate_series(1, 200) g
            RETURNING workflow_id, created_at
        )
        INSERT INTO pgbus.workflow_steps (workflow_id, step_name, status, outcome, queue,
                                          scheduled_at, started_at, ended_at, error, error_class,
                                          app_revision, created_at, run_class)
        SELECT r.workflow_id, s.name,
               CASE WHEN (n + s.i) % 9 = 0 THEN 'failed' ELSE 'completed' END,
               CASE WHEN (n + s.i) % 9 = 0 THEN 'reattempt' ELSE 'complete' END, 'default',
               r.created_at + make_interval(secs => s.i * 5),
               r.created_at + make_interval(secs => s.i * 5 + n % 3),
               r.created_at + make_interval(secs => s.i * 5 + n % 3 + 1 + n % 4),
               CASE WHEN (n + s.i) % 9 = 0
                    THEN '{"class": "TimeoutError", "message": "carrier timed out"}'::jsonb END,
               CASE WHEN (n + s.i) % 9 = 0 THEN 'TimeoutError' END,
               CASE WHEN r.created_at > now() - interval '6 hours' THEN 'b7e1' ELSE 'a3f9' END,
               r.created_at, 'app.workflows.OrderFlow'
        FROM (SELECT *, row_number() OVER () AS n FROM runs) r
        CROSS JOIN (VALUES (1, 'charge'), (2, 'ship'), (3, 'notify')) AS s(i, name)
        """
    )


def seed_workflow_pages(conn: psycopg.Connection) -> None:
    """Workflow runs for the Workflows pages: three OrderFlow runs paused on TimeoutError at
    capture (a needs-attention group), one that failed once, was resumed and finished (a
    timeline of three attempts and a pause), a Welcome run scheduled an hour ahead, and a Gated
    run waiting for the signal payment_confirmed."""
    from tests.py.workflow_page_support import (
        ERROR,
        end_step,
        paused_on_error,
        register,
        start,
        take_steps,
    )

    paused_on_error(conn, "OrderFlow", 3)
    done = start(conn, "OrderFlow", ("Order", "done"), {"n": 99, "api_token": "s3cret"})
    conn.execute("UPDATE pgmq.q_orderflow SET vt = now()")
    for s in take_steps(conn, "OrderFlow"):
        end_step(conn, s["step_id"], "pause", ERROR)
    conn.execute(
        "SELECT pgbus.workflow_command(%s, 'resume', 'dashboard:alice', 'gateway is back')", (done,)
    )
    for _ in range(2):  # capture again, then receipt
        conn.execute("UPDATE pgmq.q_orderflow SET vt = now()")
        for s in take_steps(conn, "OrderFlow"):
            end_step(conn, s["step_id"], "complete")
    # Spread its attempts over minutes, as a real run's are (the timeline then has something
    # to zoom into): capture failed at T+5..35 s, paused until T+300 s, capture again at
    # T+302..340 s, receipt at T+345..400 s, T an hour ago.
    conn.execute(
        """
        WITH t AS (SELECT now() - interval '1 hour' AS t0),
             a AS (SELECT s.step_id, row_number() OVER (ORDER BY s.step_id) AS k
                   FROM pgbus.workflow_steps s WHERE s.workflow_id = %(run)s),
             at AS (SELECT a.step_id, t0 + make_interval(secs => (ARRAY[0, 300, 340])[k]) AS c,
                           (ARRAY[5, 2, 5])[k] AS q, (ARRAY[30, 38, 55])[k] AS r
                    FROM a, t)
        UPDATE pgbus.workflow_steps s
        SET created_at = at.c, scheduled_at = at.c, started_at = at.c + make_interval(secs => at.q),
            ended_at = at.c + make_interval(secs => at.q + at.r)
        FROM at WHERE s.step_id = at.step_id
        """,
        {"run": done},
    )
    conn.execute(
        """
        UPDATE pgbus.workflow_events e
        SET created_at = now() - interval '1 hour' + CASE e.event WHEN 'paused' THEN interval '35 seconds'
                                                                  WHEN 'resumed' THEN interval '300 seconds'
                                                                  ELSE interval '400 seconds' END
        WHERE e.workflow_id = %(run)s AND e.event IN ('paused', 'resumed', 'finished')
        """,
        {"run": done},
    )
    conn.execute(
        "UPDATE pgbus.workflows SET created_at = now() - interval '1 hour',"
        " updated_at = now() - interval '1 hour' + interval '400 seconds',"
        " ended_at = now() - interval '1 hour' + interval '400 seconds' WHERE workflow_id = %s",
        (done,),
    )
    register(conn, "Welcome", [{"name": "welcome", "wait": 3600}])
    start(conn, "Welcome", ("User", "1"))
    register(
        conn,
        "Gated",
        [{"name": "confirm", "wait_for": "payment_confirmed", "wait_timeout": 172800}],
    )
    start(conn, "Gated", ("Payment", "9"))
    for s in take_steps(conn, "Gated"):
        end_step(conn, s["step_id"], "park")
