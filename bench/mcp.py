"""The MCP read tools at a modest scale: every read tool's median answer time over the
in-process SDK client and over `pgbus mcp --http` (a real subprocess, bearer token), against
the budgets (50 ms in process, 60 ms over HTTP).

Data (set-based SQL, one transaction): --runs workflow runs (default 100,000; one step row and
one event each) over 10 classes, 1% paused on an error, 2% ongoing; one queue holding --messages
messages (default 10,000) and a dead-letter queue of 1,000; 10,000 job_stats rows in the last
hour; 50 recurring tasks.

    .venv/bin/python -m bench.mcp [--runs 100000] [--messages 10000] [--repeat 15] [--skip-load]
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pgbus.mcp import build_server

import pgbus
from bench.harness import durability, scratch_database, server_url
from pgbus.data import DataSource

BUDGET_IN_PROCESS_MS = 50
BUDGET_HTTP_MS = 60

LOAD = """
BEGIN;
SET LOCAL synchronous_commit = off;
INSERT INTO pgbus.workflow_definitions (workflow_class, steps, digest, queue)
SELECT 'Bench' || c, '[{"name": "fetch"}, {"name": "charge"}]', 'd1', 'bench_wf'
FROM generate_series(0, 9) c ON CONFLICT (workflow_class) DO NOTHING;
CREATE TEMP TABLE r ON COMMIT DROP AS
SELECT n, md5('bench' || n)::uuid AS id, 'Bench' || (n %% 10) AS cls,
       now() - interval '30 days' + n * (interval '30 days' / %(runs)s) AS created,
       CASE WHEN n %% 100 = 0 THEN 'paused' WHEN n %% 100 IN (1, 2) THEN 'ready' ELSE 'finished' END AS st
FROM generate_series(1, %(runs)s) n;
INSERT INTO pgbus.workflows (workflow_id, workflow_class, arguments, status, pause_cause, current_step,
                             definition_digest, created_at, updated_at, ended_at)
SELECT id, cls, jsonb_build_object('n', n), st, CASE st WHEN 'paused' THEN 'error' END, 'charge', 'd1',
       created, created + interval '1 minute', CASE st WHEN 'finished' THEN created + interval '1 minute' END
FROM r;
INSERT INTO pgbus.workflow_steps (workflow_id, step_name, status, queue, scheduled_at, started_at, ended_at,
                                  error, error_class)
SELECT id, 'charge', CASE st WHEN 'paused' THEN 'failed' WHEN 'ready' THEN 'scheduled' ELSE 'completed' END,
       'bench_wf', created, created, CASE st WHEN 'ready' THEN NULL ELSE created + interval '1 minute' END,
       CASE st WHEN 'paused' THEN '{"message": "card declined"}'::jsonb END,
       CASE st WHEN 'paused' THEN 'CardDeclined' END
FROM r;
UPDATE pgbus.workflows w SET current_step_id = s.step_id FROM pgbus.workflow_steps s
WHERE s.workflow_id = w.workflow_id;
INSERT INTO pgbus.workflow_events (workflow_id, event, actor, created_at) SELECT id, 'started', 'app', created FROM r;
SELECT pgbus.ensure_queue('pgbus_default');
SELECT pgbus.ensure_queue('pgbus_default_dlq');
SELECT pgmq.send_batch('pgbus_default',
       ARRAY(SELECT jsonb_build_object('job_class', 'Mail', 'args', jsonb_build_array(g))
             FROM generate_series(1, %(messages)s) g));
SELECT pgmq.send_batch('pgbus_default_dlq',
       ARRAY(SELECT jsonb_build_object('job_class', 'Mail', 'args', jsonb_build_array(g))
             FROM generate_series(1, 1000) g));
INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms, created_at)
SELECT 'Mail', 'pgbus_default', (ARRAY['success', 'success', 'failed'])[1 + g %% 3], g %% 500, g %% 50,
       now() - (g %% 3600) * interval '1 second'
FROM generate_series(1, 10000) g;
INSERT INTO pgbus.recurring_tasks (key, class_name, schedule, human_schedule, queue_name, next_run_at)
SELECT 'task' || g, 'Mail', '* * * * *', 'every minute', 'pgbus_default', now() FROM generate_series(1, 50) g;
COMMIT;
ANALYZE;
"""


def calls(paused_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("pgbus_health", {}),
        ("pgbus_queues", {}),
        ("pgbus_queue_detail", {"name": "pgbus_default"}),
        ("pgbus_processes", {}),
        ("pgbus_jobs", {"queue": "pgbus_default"}),
        ("pgbus_jobs", {"queue": "pgbus_default", "page": 40, "per_page": 100}),
        ("pgbus_job_detail", {"queue": "pgbus_default", "msg_id": 5}),
        ("pgbus_dlq", {}),
        ("pgbus_dlq_detail", {"msg_id": 5, "queue": "pgbus_default_dlq"}),
        ("pgbus_throughput", {}),
        ("pgbus_stats", {}),
        ("pgbus_recurring", {}),
        ("pgbus_deploy_tasks", {}),
        ("pgbus_workflows", {}),
        ("pgbus_workflows", {"status": "paused", "workflow_class": "Bench0"}),
        ("pgbus_workflow", {"workflow_id": paused_id}),
        ("pgbus_workflows_attention", {}),
    ]


async def time_calls(client: Client, todo, repeat: int) -> list[float]:
    medians = []
    async with client as c:
        for tool, args in todo:
            r = await c.call_tool(tool, args)
            assert not r.is_error, (tool, r.content)
            samples = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                await c.call_tool(tool, args)
                samples.append((time.perf_counter() - t0) * 1000)
            medians.append(statistics.median(samples))
    return medians


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--skip-load", action="store_true")
    args = ap.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    admin = server_url()
    if args.skip_load:
        url = admin.rsplit("/", 1)[0] + "/pgbus_bench"
    else:
        url = scratch_database(admin)
        t0 = time.monotonic()
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(LOAD % {"runs": args.runs, "messages": args.messages})
        print(f"loaded in {time.monotonic() - t0:.1f} s")
    pgbus.configure(database_url=url)
    with psycopg.connect(url) as c:
        paused = str(
            c.execute(
                "SELECT workflow_id FROM pgbus.workflows WHERE status = 'paused' LIMIT 1"
            ).fetchone()[0]
        )
        n_runs = c.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0]
    todo = calls(paused)
    local = anyio.run(time_calls, Client(build_server(DataSource(url))), todo, args.repeat)

    port = free_port()
    env = {**os.environ, "PGBUS_DATABASE_URL": url, "PGBUS_MCP_TOKEN": "bench"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgbus.cli", "mcp", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        http = create_mcp_http_client(headers={"Authorization": "Bearer bench"})
        transport = streamable_http_client(f"http://127.0.0.1:{port}/", http_client=http)
        remote = anyio.run(time_calls, Client(transport), todo, args.repeat)
    finally:
        proc.terminate()
        proc.wait(10)

    print(
        f"MCP read tools: {n_runs:,} runs, {args.messages:,} queued messages, 1,000 dead letters,"
    )
    print(f"median of {args.repeat} calls each; {durability(url)}; machine shared with other work")
    print(f"{'tool and arguments':<60} {'in-process':>11} {'HTTP':>8}")
    failed = False
    for (tool, a), lo, hi in zip(todo, local, remote, strict=True):
        ok = lo <= BUDGET_IN_PROCESS_MS and hi <= BUDGET_HTTP_MS
        failed |= not ok
        label = tool + (" " + ",".join(f"{k}={v}" for k, v in a.items()) if a else "")
        print(f"{label[:60]:<60} {lo:9.1f}ms {hi:6.1f}ms {'ok' if ok else 'OVER BUDGET'}")
    print(f"budgets: {BUDGET_IN_PROCESS_MS} ms in process, {BUDGET_HTTP_MS} ms over HTTP")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
