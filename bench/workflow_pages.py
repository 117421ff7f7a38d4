"""The Workflows pages at scale: 1,000,000 runs (3 step rows and 3 events each), 20 classes,
1% stuck. Loads the data with set-based SQL (generate_series, one transaction) and VACUUM ANALYZEs it
(as autovacuum would a table that size), then times
every page in-process (the Starlette app through its test client, minus the client's own
per-request cost measured on /livez: SQL plus rendering, no network), median of --repeat
requests each, against the budgets, and prints the plans of the
heaviest statements.

    .venv/bin/python -m bench.workflow_pages [--runs 1000000] [--repeat 20] [--skip-load]
"""

from __future__ import annotations

import argparse
from typing import Any

import psycopg

import pgbus
from bench.harness import (
    durability,
    machine,
    median_ms,
    run_load_script,
    scratch_database,
    server_cpu,
    server_url,
)

BUDGETS_MS = {
    "list first page": 20,
    "single filter": 30,
    "deep keyset page": 20,
    "detail": 10,
    "attention": 50,
    "home card": 20,
}

LOAD = """
BEGIN;
SET LOCAL synchronous_commit = off;
DELETE FROM pgbus.workflows WHERE workflow_class LIKE 'Bench%';
-- Every class's definition unchanged for longer than its runs are old, but for two classes
-- whose new definition a deploy registered a day ago (their older ongoing runs are read for
-- removed steps by the insights list).
INSERT INTO pgbus.workflow_definitions (workflow_class, steps, digest, queue, registered_at)
SELECT 'Bench' || c, '[{"name": "fetch"}, {"name": "charge"}, {"name": "notify"}]', 'd1', 'bench_wf',
       now() - CASE WHEN c <= 2 THEN interval '1 day' ELSE interval '31 days' END
FROM generate_series(1, 20) c
ON CONFLICT (workflow_class) DO UPDATE SET registered_at = excluded.registered_at;
-- Run n: class (n + n / 100) % 20 (so the stuck runs spread over every class too); created over
-- the last 30 days (n = 1 oldest); 97% finished,
-- 1% stuck (n % 100 = 0: paused on an error at charge, or every 4th of those overdue / stalled),
-- 2% ongoing and healthy (n % 100 in (1, 2): scheduled ahead at notify).
CREATE TEMP TABLE bench_runs ON COMMIT DROP AS
SELECT n, md5('bench' || n)::uuid AS id, 'Bench' || ((n + n / 100) %% 20) AS cls,
       now() - interval '30 days' + (n * (interval '30 days' / %(runs)s)) AS created,
       CASE WHEN n %% 100 = 0 THEN 'stuck' WHEN n %% 100 IN (1, 2) THEN 'ongoing' ELSE 'done' END AS kind,
       (n / 100) %% 4 AS variant
FROM generate_series(1, %(runs)s) n;
INSERT INTO pgbus.workflows (workflow_id, workflow_class, subject_type, subject_id, arguments, status,
                             pause_cause, current_step, current_step_id, error_class, definition_digest,
                             created_at, updated_at, ended_at)
SELECT id, cls, 'User', n::text, jsonb_build_object('n', n),
       CASE kind WHEN 'done' THEN 'finished' WHEN 'ongoing' THEN 'ready'
                 ELSE CASE variant WHEN 2 THEN 'ready' WHEN 3 THEN 'running' ELSE 'paused' END END,
       CASE WHEN kind = 'stuck' AND variant < 2 THEN 'error' END,
       CASE kind WHEN 'stuck' THEN 'charge' ELSE 'notify' END,
       n * 3 + CASE kind WHEN 'stuck' THEN 1 ELSE 2 END,
       -- (What the triggers keep: the current attempt's error class, set on the steps below.)
       CASE WHEN kind = 'stuck' AND variant < 2 THEN 'Timeout' || (n %% 3) END,
       'd1', created, created + interval '3 minutes',
       CASE kind WHEN 'done' THEN created + interval '3 minutes' END
FROM bench_runs;
INSERT INTO pgbus.workflow_steps (step_id, workflow_id, step_name, attempt, status, outcome, queue,
                                  scheduled_at, started_at, ended_at, error, error_class, worker,
                                  app_revision, created_at, run_class)
OVERRIDING SYSTEM VALUE
SELECT r.n * 3 + k, r.id, (ARRAY['fetch', 'charge', 'notify'])[k + 1], 1,
       CASE WHEN r.kind = 'done' OR k = 0 THEN 'completed'
            WHEN r.kind = 'stuck' AND k = 1 THEN CASE r.variant WHEN 2 THEN 'scheduled' WHEN 3 THEN 'running' ELSE 'failed' END
            WHEN r.kind = 'stuck' THEN 'superseded'
            WHEN k = 1 THEN 'completed'
            ELSE 'scheduled' END,
       'complete', 'bench_wf',
       CASE WHEN r.kind = 'ongoing' AND k = 2 THEN now() + interval '1 hour' ELSE r.created + k * interval '1 minute' END,
       CASE WHEN r.kind = 'ongoing' AND k = 2 THEN NULL
            WHEN r.kind = 'stuck' AND k = 1 AND r.variant = 2 THEN NULL
            ELSE r.created + k * interval '1 minute' + interval '1 second' END,
       CASE WHEN (r.kind = 'ongoing' AND k = 2) OR (r.kind = 'stuck' AND k = 1 AND r.variant IN (2, 3)) THEN NULL
            ELSE r.created + k * interval '1 minute' + interval '2 seconds' END,
       CASE WHEN r.kind = 'stuck' AND k = 1 AND r.variant < 2
            THEN jsonb_build_object('class', 'Timeout' || (r.n %% 3), 'message', 'gateway timed out ' || r.n) END,
       CASE WHEN r.kind = 'stuck' AND k = 1 AND r.variant < 2 THEN 'Timeout' || (r.n %% 3) END,
       'host:' || (r.n %% 7), 'rev-1', r.created + k * interval '1 minute', r.cls
FROM bench_runs r CROSS JOIN generate_series(0, 2) k
WHERE r.kind = 'done' OR k <= CASE r.kind WHEN 'stuck' THEN 1 ELSE 2 END;
INSERT INTO pgbus.workflow_events (workflow_id, step_id, event, actor, created_at)
SELECT r.id, r.n * 3 + k, (ARRAY['started', 'step_started', 'finished'])[k + 1], 'bench',
       r.created + k * interval '1 minute'
FROM bench_runs r CROSS JOIN generate_series(0, 2) k;
SELECT setval(pg_get_serial_sequence('pgbus.workflow_steps', 'step_id'),
              (SELECT max(step_id) FROM pgbus.workflow_steps));
COMMIT;
VACUUM ANALYZE pgbus.workflows;
VACUUM ANALYZE pgbus.workflow_steps;
VACUUM ANALYZE pgbus.workflow_events;
-- The first VACUUM right after the load leaves the runs' visibility map unset (the load's own
-- foreign-key row locks are still on those rows); autovacuum's next visit sets it, as this does.
VACUUM pgbus.workflows;
"""


def load(url: str, runs: int) -> float:
    return run_load_script(url, LOAD, runs)


# The heaviest statements alone, as the server's CPU time per call (the backend's own, from
# /proc/<pid>/schedstat): unlike the wall-clock medians above, barely moved by other work on a
# shared machine. Only when the server runs on this machine.
CPU_STATEMENTS = [
    ("attention", "SELECT * FROM pgbus.workflow_attention()"),
    ("attention, one class", "SELECT * FROM pgbus.workflow_attention('Bench3')"),
    ("stuck runs", "SELECT * FROM pgbus.workflow_stuck()"),
    (
        "list, current step",
        "SELECT * FROM pgbus.workflow_list(only_step => 'charge', page_size => 26)",
    ),
    ("count, current step", "SELECT pgbus.workflow_list_count(only_step => 'charge')"),
    (
        "list, error class",
        "SELECT * FROM pgbus.workflow_list(only_error_class => 'Timeout1', page_size => 26)",
    ),
    ("count, error class", "SELECT pgbus.workflow_list_count(only_error_class => 'Timeout1')"),
    ("list, paused", "SELECT * FROM pgbus.workflow_list('paused', page_size => 26)"),
    ("count, ready", "SELECT pgbus.workflow_list_count('ready')"),
    ("count, ongoing", "SELECT pgbus.workflow_list_count()"),
    ("home card", "SELECT pgbus.workflow_home_card()"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--skip-load", action="store_true")
    args = ap.parse_args()
    admin = server_url()
    url = scratch_database(admin, "pgbus_bench_wfpages", fresh=not args.skip_load)
    if not args.skip_load:
        print(f"loading {args.runs:,} runs ...", flush=True)
        print(f"loaded in {load(url, args.runs):.0f} s", flush=True)
    pgbus.configure(database_url=url)
    from pgbus.web import create_app
    from starlette.testclient import TestClient

    c = TestClient(create_app(database_url=url, web_auth=lambda r: "bench"))
    with psycopg.connect(url) as conn:
        counts = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL),"
            " (SELECT count(*) FROM pgbus.workflow_steps), (SELECT count(*) FROM pgbus.workflow_events),"
            " (SELECT count(*) FROM pgbus.workflow_stuck())"
            " FROM pgbus.workflows"
        ).fetchone()
        deep = conn.execute(
            "SELECT created_at, workflow_id FROM pgbus.workflows ORDER BY created_at, workflow_id"
            " OFFSET 1000 LIMIT 1"
        ).fetchone()
        visible = conn.execute(
            "SELECT string_agg(format('%s %s%%', relname, round(100.0 * relallvisible / greatest(relpages, 1))),"
            " ', ' ORDER BY relname) FROM pg_class WHERE relnamespace = 'pgbus'::regnamespace"
            " AND relname IN ('workflows', 'workflow_steps', 'workflow_events')"
        ).fetchone()[0]
        some_run = conn.execute(
            "SELECT workflow_id FROM pgbus.workflows WHERE ended_at IS NOT NULL LIMIT 1"
            " OFFSET least(5000, (SELECT count(*) / 2 FROM pgbus.workflows WHERE ended_at IS NOT NULL))"
        ).fetchone()[0]
    print(
        f"runs {counts[0]:,} (ongoing {counts[1]:,}, stuck {counts[4]:,}), steps {counts[2]:,},"
        f" events {counts[3]:,}; {durability(url)}; {machine()}"
    )
    print(f"pages all-visible (index-only scans skip their heap): {visible}")

    def get(path: str) -> Any:
        def fn() -> None:
            r = c.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:200])

        return fn

    cursor = f"{deep[0].isoformat()}~{deep[1]}"
    from urllib.parse import quote

    pages = [
        ("list first page", "/workflows"),
        ("list first page", "/workflows?status=all"),
        ("single filter", "/workflows?status=all&workflow_class=Bench7"),
        ("single filter", "/workflows?workflow_class=Bench7"),
        ("single filter", "/workflows?step=charge"),
        ("single filter", "/workflows?error_class=Timeout1"),
        ("single filter", "/workflows?status=all&subject_type=User&subject_id=4242"),
        ("single filter", f"/workflows?status=all&workflow_id={some_run}"),
        ("single filter", "/workflows?status=paused"),
        ("single filter", "/workflows?status=ready"),
        ("single filter", "/workflows?status=finished"),
        (
            "single filter",
            "/workflows?status=all&created_from=2026-11-20T00:00&created_to=2026-11-21T00:00",
        ),
        (
            "single filter",
            "/workflows?status=all&ended_from=2026-11-20T00:00&ended_to=2026-11-21T00:00",
        ),
        ("deep keyset page", f"/workflows?status=all&before={quote(cursor)}"),
        ("detail", f"/workflows/{some_run}"),
        ("attention", "/workflows/attention"),
        ("attention", "/workflows/attention?workflow_class=Bench3"),
    ]
    # The test client's own cost per request (measured on /livez, which does nothing) is taken
    # off each page's time: what remains is the server's work (SQL and rendering).
    base = median_ms(lambda: c.get("/livez"), args.repeat * 2)
    print(f"test client overhead per request (median, subtracted below): {base:.1f} ms")
    print(f"\n{'page':<95} {'median ms':>10} {'budget':>7}")
    over = []
    for kind, path in pages:
        ms = max(0.0, median_ms(get(path), args.repeat) - base)
        budget = BUDGETS_MS[kind]
        flag = "" if ms <= budget else "  OVER"
        if flag:
            over.append(path)
        print(f"{kind + ': ' + path[:80]:<95} {ms:>10.1f} {budget:>7}{flag}")
    from pgbus.data import DataSource

    data = DataSource(url)
    ms = median_ms(data.workflow_home_card, args.repeat)
    print(
        f"{'home card: pgbus.workflow_home_card()':<95} {ms:>10.1f} {BUDGETS_MS['home card']:>7}"
        f"{'' if ms <= BUDGETS_MS['home card'] else '  OVER'}"
    )
    data.close()
    server_cpu(url, [(f"{t}: {sql[:40]}", sql) for t, sql in CPU_STATEMENTS], args.repeat)

    print("\nPlans of the heaviest statements (auto_explain, nested statements):")
    with psycopg.connect(url, autocommit=True) as conn:
        notices: list[str] = []

        def keep(d: Any) -> None:
            notices.append(d.message_primary or "")

        conn.add_notice_handler(keep)
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_analyze = on")
        conn.execute("SET auto_explain.log_buffers = on")
        conn.execute("SET auto_explain.log_level = notice")
        for title, sql in [
            ("list first page (ongoing)", "SELECT * FROM pgbus.workflow_list()"),
            ("list first page (all)", "SELECT * FROM pgbus.workflow_list('all')"),
            ("list count (all, capped)", "SELECT pgbus.workflow_list_count('all')"),
            (
                "filter: error class",
                "SELECT * FROM pgbus.workflow_list(only_error_class => 'Timeout1')",
            ),
            ("filter: paused", "SELECT * FROM pgbus.workflow_list('paused')"),
            ("count: current step", "SELECT pgbus.workflow_list_count(only_step => 'charge')"),
            ("attention", "SELECT * FROM pgbus.workflow_attention()"),
            ("home card", "SELECT pgbus.workflow_home_card()"),
        ]:
            notices.clear()
            conn.execute(sql).fetchall()
            print(f"\n-- {title}")
            for n in notices:
                lines = [ln for ln in n.splitlines() if ln.strip()]
                if sql in n and len(lines) <= 6:
                    continue  # the outer call alone (a Result or Function Scan: no plan to see)
                print("\n".join("   " + ln[:160] for ln in lines[:40]))
    if over:
        print("\nOver budget:", ", ".join(over))


if __name__ == "__main__":
    main()
