"""Workflow insights by class at scale: about 1,000,000 step rows over 20 classes and 30 days,
six app revisions, a spread of outcomes (finished, cancelled, paused on an error, scheduled,
running, waiting; failed, reattempted and skipped attempts). Loads the data with set-based SQL
(deterministic: every value is a function of the run's number), VACUUM ANALYZE, then times
each page in-process (the Starlette app through its test client, minus the client's own
per-request cost measured on /livez: SQL plus rendering, no network), median of --repeat
requests, per window, against the budgets; then each SQL block of the pages on its own.

    .venv/bin/python -m bench.insights [--runs 180000] [--repeat 20] [--skip-load] [--database NAME]

Budgets (issue #14, half the seed's measured 26 ms / 86 ms): a class's page <= 13 ms and the
list <= 43 ms over 24 h; either <= 150 ms over 30 d.
"""

from __future__ import annotations

import argparse
import time
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
    ("class page", "24h"): 13,
    ("list", "24h"): 43,
    ("class page", "30d"): 150,
    ("list", "30d"): 150,
}
WINDOWS = ("1h", "24h", "7d", "30d")

# Run n (1 = oldest): class n % 20 with 3 + (class % 6) steps, created evenly over the last 30
# days; revision rev-<k> by age (six, a new one every 5 days). Outcome by n % 200: 0-3 cancelled
# (at step 1 + n % steps), 4 paused on an error (stuck), 5 ready with its step due in an hour
# (a wait), 6 waiting at a gate, by (n / 20) % 200 so that every class has each; the rest
# finished, 40 s a step plus up to 10 min more. An attempt fails (an error recorded) when
# (n * 7 + step) % 31 = 0 (then reattempted: a second attempt that completes), is skipped when
# (n + step) % 47 = 0. Pickup 0.1-5 s, run
# time 0.05-30 s, both spread by n and the step.
LOAD = """
SET synchronous_commit = off;
DELETE FROM pgbus.workflows WHERE workflow_class LIKE 'Bench%';
-- (Registered before the runs began, but for two classes whose new definition a deploy
-- registered a day ago, as in bench.workflow_pages.)
INSERT INTO pgbus.workflow_definitions (workflow_class, steps, digest, queue, registered_at)
SELECT 'Bench' || c, (SELECT jsonb_agg(jsonb_build_object('name', 'step' || i)) FROM generate_series(1, 3 + c % 6) i),
       'd1', 'bench_insights', now() - CASE WHEN c <= 1 THEN interval '1 day' ELSE interval '31 days' END
FROM generate_series(0, 19) c
ON CONFLICT (workflow_class) DO UPDATE SET registered_at = excluded.registered_at;
CREATE UNLOGGED TABLE bench_runs AS
SELECT n, md5('insights' || n)::uuid AS id, 'Bench' || (n % 20) AS cls, 3 + (n % 20) % 6 AS steps,
       now() - interval '720 hours' + (n * (interval '720 hours' / %(runs)s)) AS created,
       CASE WHEN (n / 20) %% 200 < 4 THEN 'cancelled' WHEN (n / 20) %% 200 = 4 THEN 'paused'
            WHEN (n / 20) %% 200 = 5 THEN 'ready' WHEN (n / 20) %% 200 = 6 THEN 'waiting'
            ELSE 'finished' END AS status
FROM generate_series(1, %(runs)s) n;
-- The step a run stopped at (all of them for a finished run).
ALTER TABLE bench_runs ADD COLUMN last_step integer;
UPDATE bench_runs SET last_step = CASE WHEN status = 'finished' THEN steps ELSE 1 + n %% steps END;
INSERT INTO pgbus.workflows (workflow_id, workflow_class, status, pause_cause, current_step,
                             definition_digest, created_at, updated_at, ended_at)
SELECT id, cls, status, CASE WHEN status = 'paused' THEN 'error' END, 'step' || last_step, 'd1',
       created, created + last_step * interval '40 seconds',
       CASE WHEN status IN ('finished', 'cancelled')
            THEN created + last_step * interval '40 seconds' + ((n * 7) %% 600) * interval '1 second' END
FROM bench_runs;
INSERT INTO pgbus.workflow_steps (workflow_id, step_name, attempt, status, outcome, queue, scheduled_at,
                                  started_at, ended_at, error, error_class, app_revision, created_at,
                                  run_class)
SELECT r.id, 'step' || s.i, a.attempt,
       CASE WHEN open_ THEN CASE r.status WHEN 'running' THEN 'running' WHEN 'waiting' THEN 'waiting' ELSE 'scheduled' END
            WHEN failed THEN 'failed' WHEN r.status = 'cancelled' AND s.i = r.last_step THEN 'cancelled'
            WHEN (r.n + s.i) %% 47 = 0 THEN 'skipped' ELSE 'completed' END,
       CASE WHEN open_ THEN NULL WHEN failed THEN CASE WHEN r.status = 'paused' AND s.i = r.last_step THEN 'pause' ELSE 'reattempt' END
            WHEN r.status = 'cancelled' AND s.i = r.last_step THEN 'cancel'
            WHEN (r.n + s.i) %% 47 = 0 THEN 'skip' ELSE 'complete' END,
       'bench_insights', due,
       CASE WHEN open_ AND r.status = 'ready' THEN NULL ELSE due + pickup END,
       CASE WHEN open_ THEN NULL ELSE due + pickup + runtime END,
       CASE WHEN failed THEN '{"class": "TimeoutError", "message": "gateway timed out"}'::jsonb END,
       CASE WHEN failed THEN 'TimeoutError' END,
       'rev-' || (5 - least(5, floor(extract(epoch FROM now() - r.created) / 432000)::int)),
       due, r.cls
FROM bench_runs r
CROSS JOIN LATERAL generate_series(1, r.last_step) s(i)
CROSS JOIN LATERAL (SELECT ((r.n * 7 + s.i) %% 31 = 0 OR (r.status = 'paused' AND s.i = r.last_step)) AS fails) f
CROSS JOIN LATERAL generate_series(1, CASE WHEN f.fails AND NOT (r.status = 'paused' AND s.i = r.last_step) THEN 2 ELSE 1 END) a(attempt)
CROSS JOIN LATERAL (SELECT r.status IN ('ready', 'running', 'waiting') AND s.i = r.last_step AS open_) o
CROSS JOIN LATERAL (SELECT f.fails AND a.attempt = 1 AS failed,
                           CASE WHEN o.open_ AND r.status = 'ready' THEN now() + interval '1 hour'
                                ELSE r.created + (s.i - 1) * interval '40 seconds' + (a.attempt - 1) * interval '15 seconds'
                           END AS due,
                           make_interval(secs => 0.1 + ((r.n * 13 + s.i * 7) %% 50) / 10.0) AS pickup,
                           make_interval(secs => 0.05 + ((r.n * 17 + s.i * 3) %% 600) / 20.0) AS runtime) x;
UPDATE pgbus.workflows w SET current_step_id = m.step_id
FROM (SELECT workflow_id, max(step_id) AS step_id FROM pgbus.workflow_steps
      WHERE queue = 'bench_insights' GROUP BY workflow_id) m
WHERE w.workflow_id = m.workflow_id;
DROP TABLE bench_runs;
VACUUM ANALYZE pgbus.workflows;
VACUUM ANALYZE pgbus.workflow_steps;
VACUUM ANALYZE pgbus.workflow_definitions
"""


def load(url: str, runs: int) -> float:
    return run_load_script(url, LOAD, runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=180_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument(
        "--database", default="pgbus_bench_insights", help="the scratch database's name"
    )
    args = ap.parse_args()
    admin = server_url()
    url = scratch_database(admin, args.database, fresh=not args.skip_load)
    if not args.skip_load:
        print(f"loading {args.runs:,} runs ...", flush=True)
        print(f"loaded in {load(url, args.runs):.0f} s", flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        # What the dispatcher's workflow_insights_rollup duty does every 5 minutes: roll up every
        # closed hour (the first time: 30 days of them).
        t = time.monotonic()
        hours = conn.execute("SELECT pgbus.workflow_insights_rollup()").fetchone()[0]
        print(f"rolled up {hours} hours in {time.monotonic() - t:.1f} s", flush=True)
    pgbus.configure(database_url=url)
    from pgbus.web import create_app
    from starlette.testclient import TestClient

    c = TestClient(create_app(database_url=url, web_auth=lambda r: "bench"))
    with psycopg.connect(url) as conn:
        runs, ongoing, steps, classes, revisions = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL),"
            " (SELECT count(*) FROM pgbus.workflow_steps),"
            " count(DISTINCT workflow_class),"
            " (SELECT count(DISTINCT app_revision) FROM pgbus.workflow_steps)"
            " FROM pgbus.workflows"
        ).fetchone()
    print(
        f"runs {runs:,} (ongoing {ongoing:,}), step rows {steps:,}, classes {classes},"
        f" revisions {revisions}; {durability(url)}; {machine()}"
    )

    def get(path: str):
        def fn() -> None:
            r = c.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:200])

        return fn

    base = median_ms(lambda: c.get("/livez"), args.repeat * 2)
    print(f"test client overhead per request (median, subtracted below): {base:.1f} ms")
    print(f"\n{'page':<60} {'window':>6} {'median ms':>10} {'budget':>7}")
    over = []
    for window in WINDOWS:
        for kind, path in (
            ("list", f"/workflows/definitions?window={window}"),
            ("class page", f"/workflows/definitions/Bench7?window={window}"),
            ("class page", f"/workflows/definitions/Bench5?window={window}"),
        ):
            ms = max(0.0, median_ms(get(path), args.repeat) - base)
            budget = BUDGETS_MS.get((kind, window))
            flag = "" if budget is None or ms <= budget else "  OVER"
            if flag:
                over.append(f"{path} ({ms:.1f} ms > {budget} ms)")
            print(f"{kind + ': ' + path:<60} {window:>6} {ms:>10.1f} {budget or '':>7}{flag}")

    print("\nEach SQL block alone (median ms), class Bench7:")
    from pgbus.data import DataSource

    data = DataSource(url)
    print(f"{'block':<14}" + "".join(f"{w:>9}" for w in WINDOWS))
    rows: list[tuple[str, Any]] = [("overview", lambda w: data.workflow_definitions(w))]
    for block in ("steps", "throughput", "durations", "funnel", "revisions"):
        rows.append((block, lambda w, b=block: data.workflow_class_block(b, "Bench7", w)))
    for name, fn in rows:
        cells = [median_ms(lambda fn=fn, w=w: fn(w), args.repeat) for w in WINDOWS]
        print(f"{name:<14}" + "".join(f"{ms:>9.1f}" for ms in cells))
    data.close()
    server_cpu(
        url,
        [
            (f"{what} {w}", sql.format(w=w))
            for w in WINDOWS
            for what, sql in (
                ("list", "SELECT * FROM pgbus.workflow_definitions_overview('{w}')"),
                ("class page Bench7", "SELECT pgbus.workflow_class_page('Bench7', '{w}')"),
                ("class page Bench5", "SELECT pgbus.workflow_class_page('Bench5', '{w}')"),
            )
        ],
        args.repeat,
    )
    if over:
        print("\nOver budget:", "; ".join(over))
    else:
        print("\nEvery budget met.")


if __name__ == "__main__":
    main()
