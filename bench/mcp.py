"""The MCP read tools at the dashboard benchmark's data size: every read tool's median answer
time over the in-process SDK client and over `pgbus mcp --http` (a real subprocess, bearer
token), against the budgets (50 ms in process, 60 ms over HTTP).

Data, built deterministically with set-based SQL (generate_series, one transaction per part):
the workflow runs of bench.workflow_pages (--runs, default 1,000,000: 3 step rows and 3 events
each, 20 classes, 1% stuck, 2% ongoing), one queue holding --messages messages (default 10,000)
and a dead-letter queue of 1,000, 10,000 job_stats rows in the last hour, 50 recurring tasks.

    .venv/bin/python -m bench.mcp [--runs 1000000] [--messages 10000] [--repeat 15] [--skip-load]
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
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pgbus.mcp import build_server

import pgbus
from bench import workflow_pages
from bench.harness import durability, machine, server_cpu, server_url
from pgbus import migrate
from pgbus.data import DataSource

BUDGET_IN_PROCESS_MS = 50
BUDGET_HTTP_MS = 60
DATABASE = "pgbus_bench_mcp"

# Everything besides the workflow runs (those are bench.workflow_pages' load).
LOAD = """
BEGIN;
SET LOCAL synchronous_commit = off;
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


def load(admin: str, runs: int, messages: int) -> str:
    url = urlunsplit(urlsplit(admin)._replace(path="/" + DATABASE))
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DATABASE}")
    migrate.migrate(url)
    t0 = time.monotonic()
    print(f"loading {runs:,} runs ...", flush=True)
    took = workflow_pages.load(url, runs)
    print(f"runs loaded in {took:.0f} s", flush=True)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(LOAD % {"messages": messages})
        # What the dispatcher's workflow_insights_rollup duty does: the insights' closed hours.
        c.execute("SELECT pgbus.workflow_insights_rollup()")
        # Then what autovacuum does soon after: the rollup's tables analyzed (unanalyzed, the
        # insights tools' first minutes took twice as long) and their pages all-visible.
        rolled_up = c.execute(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
            " WHERE schemaname = 'pgbus' AND tablename LIKE 'workflow\\_insights\\_%'"
        ).fetchall()
        for (table,) in rolled_up:
            c.execute(f"VACUUM ANALYZE {table}")
    print(f"loaded in {time.monotonic() - t0:.0f} s", flush=True)
    return url


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
        ("pgbus_workflows", {"status": "all"}),
        ("pgbus_workflows", {"status": "all", "workflow_class": "Bench7"}),
        ("pgbus_workflows", {"status": "paused", "workflow_class": "Bench0"}),
        ("pgbus_workflows", {"error_class": "Timeout1"}),
        ("pgbus_workflows", {"status": "all", "subject_type": "User", "subject_id": "4242"}),
        ("pgbus_workflows", {"status": "finished", "page": 5, "per_page": 100}),
        ("pgbus_workflows", {"status": "all", "page": 40, "per_page": 100}),
        ("pgbus_workflow", {"workflow_id": paused_id}),
        ("pgbus_workflows_attention", {}),
        ("pgbus_workflows_attention", {"workflow_class": "Bench3"}),
        ("pgbus_workflow_definitions", {}),
        ("pgbus_workflow_definitions", {"window": "7d"}),
        ("pgbus_workflow_stats", {"workflow_class": "Bench7"}),
        ("pgbus_workflow_stats", {"workflow_class": "Bench7", "window": "7d"}),
        ("pgbus_workflow_stats", {"workflow_class": "Bench7", "blocks": ["steps"]}),
    ]


class TimedDataSource(DataSource):
    """A data source that adds up the time its statements take (every read goes through
    _rows), so a call's time splits into SQL and the MCP side (SDK, validation, redaction,
    serialization). Blocks read side by side add up to more than their wall time."""

    sql_ms = 0.0

    def _rows(self, sql, params=()):
        t0 = time.perf_counter()
        try:
            return super()._rows(sql, params)
        finally:
            self.sql_ms += (time.perf_counter() - t0) * 1000


async def time_calls(
    client: Client, todo, repeat: int, ds: TimedDataSource | None = None
) -> list[tuple[float, float | None]]:
    """Per call: the median answer time and, with a timed data source, the median SQL time."""
    medians = []
    async with client as c:
        for tool, args in todo:
            r = await c.call_tool(tool, args)
            assert not r.is_error, (tool, r.content)
            samples, sql = [], []
            for _ in range(repeat):
                if ds is not None:
                    ds.sql_ms = 0.0
                t0 = time.perf_counter()
                await c.call_tool(tool, args)
                samples.append((time.perf_counter() - t0) * 1000)
                if ds is not None:
                    sql.append(ds.sql_ms)
            medians.append((statistics.median(samples), statistics.median(sql) if sql else None))
    return medians


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--only", help="time only the tools whose name contains this")
    args = ap.parse_args()
    admin = server_url()
    if args.skip_load:
        url = urlunsplit(urlsplit(admin)._replace(path="/" + DATABASE))
    else:
        url = load(admin, args.runs, args.messages)
    pgbus.configure(database_url=url)
    # One INFO line per request otherwise (the SDK's HTTP client logs as "httpx2").
    for name in ("httpx", "httpx2", "mcp"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger().setLevel(logging.WARNING)
    with psycopg.connect(url) as c:
        paused = str(
            c.execute(
                "SELECT workflow_id FROM pgbus.workflows WHERE status = 'paused'"
                " ORDER BY created_at LIMIT 1"
            ).fetchone()[0]
        )
        n_runs = c.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0]
    todo = [c for c in calls(paused) if not args.only or args.only in c[0]]
    timed = TimedDataSource(url)
    local = anyio.run(time_calls, Client(build_server(timed)), todo, args.repeat, timed)

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
    print(f"median of {args.repeat} calls each; {durability(url)}; {machine()}")
    print("(SQL: the in-process call's statements; MCP side: in-process minus SQL)")
    print(f"{'tool and arguments':<60} {'in-process':>11} {'SQL':>8} {'MCP side':>9} {'HTTP':>8}")
    failed = False
    for (tool, a), (lo, sql), (hi, _) in zip(todo, local, remote, strict=True):
        ok = lo <= BUDGET_IN_PROCESS_MS and hi <= BUDGET_HTTP_MS
        failed |= not ok
        label = tool + (" " + ",".join(f"{k}={v}" for k, v in a.items()) if a else "")
        print(
            f"{label[:60]:<60} {lo:9.1f}ms {sql:6.1f}ms {lo - sql:7.1f}ms {hi:6.1f}ms"
            f" {'ok' if ok else 'OVER BUDGET'}"
        )
    print(f"budgets: {BUDGET_IN_PROCESS_MS} ms in process, {BUDGET_HTTP_MS} ms over HTTP")
    if not args.only or "workflow_" in args.only:
        server_cpu(
            url,
            [
                (f"{what} {w}", sql.format(w=w))
                for w in ("24h", "7d")
                for what, sql in (
                    (
                        "definitions overview",
                        "SELECT * FROM pgbus.workflow_definitions_overview('{w}')",
                    ),
                    ("class page Bench7", "SELECT pgbus.workflow_class_page('Bench7', '{w}')"),
                )
            ],
            args.repeat,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
