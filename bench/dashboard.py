"""The dashboard on a large database: server time of every page and fragment.

    .venv/bin/python -m bench.dashboard [--messages 1000000] [--failures 100000]
        [--dead 100000] [--queues 50] [--runs 20] [--skip-load]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. Loads, with generate_series straight into the PGMQ tables:
--queues queues holding --messages messages (one queue, bench_q00, holds 60% so its message
list has more than 10,000 pages), --failures rows in pgbus.job_failures for messages waiting
for their retry, --dead dead letters spread over ten `_dlq` queues, 300,000 job stats over 30
days, 1,000 batches and 20 processes. Then VACUUM ANALYZE.

Every page, and every fragment a page names in `data-refresh`, is requested --runs times
through the ASGI app in this process (no network); the server time of a request is measured
around the app, from the request's arrival to the end of its response body. Prints the median
and the slowest run of each, the queue page's first and 10,000th keyset page side by side, and
`EXPLAIN (ANALYZE, BUFFERS)` of the heaviest SQL statement (with the plans of the statements
run inside it, through auto_explain, when the server allows LOAD).

Budget: every page and fragment's median <= 50 ms; the 10,000th queue page within 2x (and
5 ms) of the first.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from html import unescape

import psycopg

from bench.harness import durability, machine, scratch_database, server_url

BUDGET_MS = 50.0
BIG = "bench_q00"
DEAD_QUEUES = 10


def step(text: str) -> float:
    print(text, flush=True)
    return time.perf_counter()


def done(started: float) -> None:
    print(f"    {time.perf_counter() - started:6.1f} s", flush=True)


def envelope(queue_expr: str) -> str:
    """SQL for a job message shaped like pgbus.job_envelope's (without its per-row call)."""
    return (
        "jsonb_build_object('job_class', 'app.jobs:Job' || (i %% 7), 'job_id', gen_random_uuid(),"
        f" 'queue', {queue_expr}, 'args', jsonb_build_array(i), 'kwargs',"
        " jsonb_build_object('order', i, 'api_key', 'sk_bench'), 'enqueued_at', now())"
    )


def load(conn: psycopg.Connection, queues: int, messages: int, failures: int, dead: int) -> None:
    names = [f"bench_q{i:02}" for i in range(queues)]
    t = step(f"creating {queues} queues and {DEAD_QUEUES} dead-letter queues...")
    for name in names:
        conn.execute("SELECT pgbus.ensure_queue(%s, false)", (name,))
    for name in names[:DEAD_QUEUES]:
        conn.execute("SELECT pgbus.ensure_queue(%s, false)", (name + "_dlq",))
    done(t)

    big = int(messages * 0.6)
    rest = messages - big
    per_queue = [big] + [
        rest // (queues - 1) + (1 if i < rest % (queues - 1) else 0) for i in range(queues - 1)
    ]
    t = step(f"loading {messages:,} messages ({big:,} in {BIG})...")
    for name, n in zip(names, per_queue, strict=True):
        # Enqueued over the last 6 hours, oldest first, all visible now.
        conn.execute(
            f"INSERT INTO pgmq.q_{name} (enqueued_at, vt, read_ct, message)"
            f" SELECT now() - make_interval(secs => (%s - i) * 21600.0 / %s), now() - interval '1 second', 0,"
            f" {envelope(repr(name))}"
            " FROM generate_series(1, %s) i",
            (n, n, n),
        )
    done(t)

    t = step(f"recording {failures:,} failures waiting for their retry...")
    per = failures // queues
    for k, name in enumerate(names):
        n = per + (1 if k < failures % queues else 0)
        conn.execute(
            f"""
            WITH picked AS (
                SELECT msg_id FROM pgmq.q_{name} ORDER BY msg_id LIMIT %s
            ), hidden AS (
                UPDATE pgmq.q_{name} q
                SET read_ct = 1 + q.msg_id %% 3, vt = now() + make_interval(secs => 30 + q.msg_id %% 600)
                FROM picked p WHERE q.msg_id = p.msg_id
                RETURNING q.msg_id, q.read_ct, q.message
            )
            INSERT INTO pgbus.job_failures
                (queue_name, msg_id, job_class, error_class, error_message, backtrace, read_ct, failed_at)
            SELECT %s, msg_id, message ->> 'job_class', 'ConnectionError',
                   'could not reach upstream (attempt ' || read_ct || ')',
                   'app/jobs.py:12 in perform' || E'\\n' || 'pgbus/worker.py:200 in run',
                   read_ct, now() - make_interval(secs => msg_id %% 3600)
            FROM hidden
            """,
            (n, name),
        )
    done(t)

    t = step(f"loading {dead:,} dead letters...")
    per = dead // DEAD_QUEUES
    for k, name in enumerate(names[:DEAD_QUEUES]):
        n = per + (1 if k < dead % DEAD_QUEUES else 0)
        conn.execute(
            f"INSERT INTO pgmq.q_{name}_dlq (enqueued_at, vt, read_ct, message, headers)"
            f" SELECT now() - make_interval(secs => (%s - i) * 86400.0 / %s), now(), 0, {envelope(repr(name))},"
            " jsonb_build_object('pgbus_dead_letter', jsonb_build_object("
            f"   'queue', {name!r}, 'msg_id', 10000000 + i, 'read_ct', 4,"
            "   'error', jsonb_build_object('class', 'ValueError', 'message', 'bad input ' || i),"
            "   'dead_lettered_at', now() - make_interval(secs => (%s - i))))"
            " FROM generate_series(1, %s) i",
            (n, n, n, n),
        )
    done(t)

    t = step("job stats (300,000 over 30 days), 1,000 batches, 20 processes...")
    conn.execute(
        """
        INSERT INTO pgbus.job_stats
            (job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count, created_at)
        SELECT 'app.jobs:Job' || (i %% 7), 'bench_q' || lpad((i %% %s)::text, 2, '0'),
               CASE WHEN i %% 17 = 0 THEN 'failed' WHEN i %% 101 = 0 THEN 'dead_lettered' ELSE 'success' END,
               5 + (i * 37) %% 900, (i * 11) %% 5000, (i %% 17 = 0)::int,
               now() - make_interval(secs => i * 8.64)
        FROM generate_series(1, 300000) i
        """,
        (queues,),
    )
    conn.execute(
        """
        INSERT INTO pgbus.batches (description, properties, total_jobs, completed_jobs, discarded_jobs,
                                   status, created_at, finished_at)
        SELECT 'import ' || i, jsonb_build_object('n', i), 100, CASE WHEN i % 3 = 0 THEN 100 ELSE i % 100 END,
               0, CASE WHEN i % 3 = 0 THEN 'finished' ELSE 'processing' END,
               now() - make_interval(mins => i), CASE WHEN i % 3 = 0 THEN now() END
        FROM generate_series(1, 1000) i
        """
    )
    for i in range(20):
        kind = "supervisor" if i == 0 else "worker"
        conn.execute(
            "SELECT pgbus.process_register(%s, %s, %s, 'bench')", (kind, f"host-{i % 4}", 1000 + i)
        )
    done(t)

    t = step("VACUUM ANALYZE...")
    conn.execute("VACUUM ANALYZE")
    done(t)


class Timed:
    """ASGI wrapper: the server time of each request, arrival to the end of the response body."""

    def __init__(self, app) -> None:
        self.app = app
        self.last_ms = 0.0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message):
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last_ms = (time.perf_counter() - started) * 1000

        await self.app(scope, receive, timed_send)


class Statements:
    """Every SQL statement the app runs, with its duration (psycopg's execute, wrapped)."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self.params: dict[str, object] = {}
        self._orig = psycopg.Cursor.execute
        rec = self

        def execute(cur, query, params=None, **kw):
            started = time.perf_counter()
            try:
                return rec._orig(cur, query, params, **kw)
            finally:
                key = query if isinstance(query, str) else str(query)
                rec.times[key].append((time.perf_counter() - started) * 1000)
                rec.params[key] = params

        psycopg.Cursor.execute = execute

    def restore(self) -> None:
        psycopg.Cursor.execute = self._orig

    def heaviest(self) -> tuple[str, object, float]:
        key = max(self.times, key=lambda k: statistics.median(self.times[k]))
        return key, self.params[key], statistics.median(self.times[key])


def page_paths(url: str, per_page: int) -> dict[str, str]:
    with psycopg.connect(url) as c:
        newest = c.execute(f"SELECT max(msg_id) FROM pgmq.q_{BIG}").fetchone()[0]
        failed = c.execute(
            "SELECT queue_name, msg_id FROM pgbus.job_failures ORDER BY failed_at DESC LIMIT 1"
        ).fetchone()
        dead = c.execute(f"SELECT max(msg_id) FROM pgmq.q_{BIG}_dlq").fetchone()[0]
        batch = c.execute(
            "SELECT batch_id FROM pgbus.batches ORDER BY created_at DESC LIMIT 1"
        ).fetchone()[0]
    # Newest first: the 10,000th page starts below the newest 9,999 pages.
    before_10000 = max(1, newest - per_page * 9999 + 1)
    return {
        "home": "/",
        "queues": "/queues",
        "queue, page 1": f"/queues/{BIG}",
        "queue, page 10,000": f"/queues/{BIG}?before={before_10000}",
        "jobs": "/jobs",
        "jobs failed": "/jobs?status=failed",
        "job": f"/jobs/{BIG}/{newest}",
        "failed job": f"/jobs/{failed[0]}/{failed[1]}",
        "dead letters": "/dead-letters",
        "dead letter": f"/dead-letters/{BIG}_dlq/{dead}",
        "batches": "/batches",
        "batch": f"/batches/{batch}",
        "processes": "/processes",
        "insights": "/insights",
        "metrics": "/api/metrics",
        "readyz": "/readyz",
    }


REFRESH = re.compile(r'data-refresh="([^"]+)"')


def measure(client, timed: Timed, path: str, runs: int) -> tuple[list[float], str]:
    body = ""
    for _ in range(2):  # warm-up: pool connections, plans, template compilation
        r = client.get(path)
    out = []
    for _ in range(runs):
        r = client.get(path)
        if r.status_code not in (200, 503):
            raise SystemExit(f"{path}: HTTP {r.status_code}\n{r.text[:500]}")
        out.append(timed.last_ms)
        body = r.text
    return out, body


def explain(url: str, query: str, params: object) -> None:
    print("\nEXPLAIN (ANALYZE, BUFFERS) of the heaviest statement:")
    print("  " + " ".join(query.split()))
    print(f"  params: {params!r}")
    with psycopg.connect(url, autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        nested = True
        try:
            c.execute("LOAD 'auto_explain'")
            for setting in (
                "auto_explain.log_min_duration = 0",
                "auto_explain.log_analyze = on",
                "auto_explain.log_buffers = on",
                "auto_explain.log_nested_statements = on",
                "auto_explain.log_timing = on",
                "client_min_messages = log",
            ):
                c.execute("SET " + setting)
        except psycopg.Error as e:
            nested = False
            print(f"  (auto_explain not available: {e.diag.message_primary}; top level only)")
        rows = c.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, params).fetchall()
        for (line,) in rows:
            print("  " + line)
        if nested:
            plans = []
            for n in notices:
                m = re.match(r"duration: ([\d.]+) ms", n)
                if m and "EXPLAIN (ANALYZE" not in n:
                    plans.append((float(m.group(1)), n))
            plans.sort(key=lambda t: -t[0])
            print(
                f"\n  the {min(3, len(plans))} slowest of the {len(plans)} statements run inside it"
                f" (auto_explain; together {sum(t for t, _ in plans):.2f} ms):"
            )
            for _, n in plans[:3]:
                for line in n.splitlines():
                    print("    " + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--failures", type=int, default=100_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--skip-load", action="store_true", help="reuse the last run's pgbus_bench")
    args = parser.parse_args()

    admin = server_url()
    if args.skip_load:
        from urllib.parse import urlsplit, urlunsplit

        url = urlunsplit(urlsplit(admin)._replace(path="/pgbus_bench"))
    else:
        url = scratch_database(admin)
        with psycopg.connect(url, autocommit=True) as conn:
            load(conn, args.queues, args.messages, args.failures, args.dead)
    print(f"durability: {durability(url)}")

    from pgbus.web import create_app
    from starlette.testclient import TestClient

    import pgbus
    from pgbus.config import settings

    pgbus.configure(database_url=url)
    per_page = settings().web_per_page
    timed = Timed(create_app(database_url=url))
    statements = Statements()
    results: dict[str, list[float]] = {}
    with TestClient(timed, base_url="http://127.0.0.1") as client:
        for name, path in page_paths(url, per_page).items():
            results[name], body = measure(client, timed, path, args.runs)
            for frag in dict.fromkeys(unescape(u) for u in REFRESH.findall(body)):
                key = f"  fragment {frag.split('fragment=')[-1]} of {name}"
                if frag.startswith("http"):
                    frag = "/" + frag.split("/", 3)[3]
                results[key], _ = measure(client, timed, frag, args.runs)
    statements.restore()

    print(f"\nserver time over {args.runs} runs (ms; {machine()}):")
    print(f"  {'page or fragment':46} {'median':>8} {'max':>8}")
    failures = []
    for name, times in results.items():
        med = statistics.median(times)
        verdict = "" if med <= BUDGET_MS else f"  OVER BUDGET (> {BUDGET_MS:.0f} ms)"
        if med > BUDGET_MS:
            failures.append(name.strip())
        print(f"  {name:46} {med:8.2f} {max(times):8.2f}{verdict}")

    first = statistics.median(results["queue, page 1"])
    far = statistics.median(results["queue, page 10,000"])
    same = far <= max(2 * first, first + 5)
    print(
        f"\nqueue page, keyset: page 1 {first:.2f} ms, page 10,000 {far:.2f} ms"
        f" ({far / first:.2f}x) -> {'same cost' if same else 'NOT the same cost'}"
    )
    if not same:
        failures.append("queue keyset pages")

    query, params, med = statements.heaviest()
    print(f"\nheaviest statement: median {med:.2f} ms over {len(statements.times[query])} runs")
    explain(url, query, params)

    print("\nbudgets: " + ("all met" if not failures else "missed: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
