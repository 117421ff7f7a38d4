"""Job throughput and pickup latency, beside the raw PGMQ rate of the same run.

    .venv/bin/python -m bench.jobs [--seconds 10] [--jobs 6000] [--threads 4]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. Prints the durability settings it ran with.

- raw PGMQ: `threads x workers` connections, each looping send + read(1) + archive (three
  transactions per message) for --seconds.
- jobs: the same number of producer threads enqueue --jobs no-op jobs one by one
  (perform_later) while 1, then 2 worker processes of --threads threads run them; the rate is
  jobs / (first enqueue -> last archive).
- pickup: one idle worker; jobs sent 0.3 s apart (past PGMQ's 250 ms notify throttle); the
  latency is the worker's own enqueue -> start measure (pgbus.job_stats.enqueue_latency_ms).

Budgets (issue #3): jobs/s >= 0.9 x raw PGMQ at the same concurrency; pickup p50 <= 10 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

import pgbus
from pgbus import migrate

ROOT = Path(__file__).resolve().parents[1]
RATIO_BUDGET = 0.9
PICKUP_P50_BUDGET_MS = 10.0


def server_url() -> str:
    if os.environ.get("PGBUS_DATABASE_URL"):
        return os.environ["PGBUS_DATABASE_URL"]
    out = subprocess.run(
        [str(ROOT / "scripts/pg"), "start"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def scratch_database(admin: str) -> str:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS pgbus_bench WITH (FORCE)")
        c.execute("CREATE DATABASE pgbus_bench")
    url = urlunsplit(urlsplit(admin)._replace(path="/pgbus_bench"))
    migrate.migrate(url)
    return url


def durability(url: str) -> str:
    with psycopg.connect(url) as c:
        values = [
            c.execute(f"SHOW {g}").fetchone()[0]
            for g in ("fsync", "synchronous_commit", "full_page_writes")
        ]
    return "fsync={} synchronous_commit={} full_page_writes={}".format(*values)


def in_threads(n: int, fn) -> None:
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def raw_pgmq_rate(url: str, concurrency: int, seconds: float) -> float:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pgmq.create('bench_raw')")
    counts = [0] * concurrency
    deadline = time.monotonic() + seconds

    def loop(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            while time.monotonic() < deadline:
                c.execute("SELECT pgmq.send('bench_raw', '{\"job\": \"noop\"}')")
                row = c.execute("SELECT msg_id FROM pgmq.read('bench_raw', 30, 1)").fetchone()
                if row:
                    c.execute("SELECT pgmq.archive('bench_raw', %s::bigint)", (row[0],))
                    counts[i] += 1

    in_threads(concurrency, loop)
    return sum(counts) / seconds


def start_workers(url: str, n: int, threads: int) -> list[subprocess.Popen]:
    env = {**os.environ, "PGBUS_DATABASE_URL": url}
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pgbus.cli",
                "worker",
                "--import",
                "bench.noop_jobs",
                "--threads",
                str(threads),
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(30)


def poll(
    condition: Callable[[], bool], what: str, timeout: float = 300.0, every: float = 0.005
) -> None:
    """Checks `condition()` every `every` s until it holds; raises TimeoutError naming `what`
    after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench: no {what} after {timeout:.0f} s")
        time.sleep(every)


def p50_p99(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), statistics.quantiles(values, n=100, method="inclusive")[98]


def wait_for_workers(url: str, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        poll(
            lambda: (
                c.execute("SELECT count(*) FROM pgbus.processes WHERE kind = 'worker'").fetchone()[
                    0
                ]
                >= n
            ),
            f"{n} worker(s) registered",
        )


# Sessions of this database whose last statement was a LISTEN: the workers' listeners, waiting.
LISTENERS = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND query LIKE 'LISTEN %'"
)


def wait_for_listener(c: psycopg.Connection, before: int) -> None:
    """Waits until one more worker listens for notifications than `before`."""
    poll(lambda: c.execute(LISTENERS).fetchone()[0] > before, "new notification listener")


def archived(c: psycopg.Connection) -> int:
    return c.execute("SELECT count(*) FROM pgmq.a_pgbus_default").fetchone()[0]


def job_rate(url: str, workers: int, threads: int, jobs: int) -> float:
    from bench.noop_jobs import Noop

    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pgbus.ensure_queue('pgbus_default')")
        c.execute("TRUNCATE pgmq.a_pgbus_default")
        procs = start_workers(url, workers, threads)
        try:
            wait_for_workers(url, workers)
            producers = workers * threads
            started = time.monotonic()

            def produce(i: int) -> None:
                with psycopg.connect(url, autocommit=True) as pc:
                    for _ in range(i, jobs, producers):
                        Noop.perform_later(conn=pc)

            in_threads(producers, produce)
            poll(lambda: archived(c) >= jobs, f"{jobs} jobs archived")
            return jobs / (time.monotonic() - started)
        finally:
            stop(procs)


def pickup_latency(url: str, samples: int) -> tuple[float, float]:
    from bench.noop_jobs import Noop

    with psycopg.connect(url, autocommit=True) as c:
        c.execute("TRUNCATE pgbus.job_stats")
        listening = c.execute(LISTENERS).fetchone()[0]
        procs = start_workers(url, 1, 1)
        try:
            wait_for_workers(url, 1)
            wait_for_listener(c, listening)
            for i in range(samples):
                Noop.perform_later(conn=c)
                poll(
                    lambda i=i: c.execute("SELECT count(*) FROM pgbus.job_stats").fetchone()[0] > i,
                    f"job {i + 1} done",
                )
                time.sleep(0.3)  # quiet past PGMQ's 250 ms notify throttle, as in production
            lat = [r[0] for r in c.execute("SELECT enqueue_latency_ms FROM pgbus.job_stats")]
        finally:
            stop(procs)
    return p50_p99(lat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()

    url = scratch_database(server_url())
    pgbus.configure(database_url=url)
    print(f"server: {durability(url)}; {os.cpu_count()} cores", flush=True)
    failures = []
    for workers in (1, 2):
        concurrency = workers * args.threads
        raw = raw_pgmq_rate(url, concurrency, args.seconds)
        rate = job_rate(url, workers, args.threads, args.jobs)
        ratio = rate / raw
        verdict = "ok" if ratio >= RATIO_BUDGET else f"OVER BUDGET (< {RATIO_BUDGET})"
        print(
            f"{workers} worker(s) x {args.threads} threads: raw PGMQ {raw:7.0f} msg/s | "
            f"jobs {rate:7.0f} jobs/s | ratio {ratio:.2f} {verdict}",
            flush=True,
        )
        if ratio < RATIO_BUDGET:
            failures.append(f"ratio with {workers} worker(s)")
    p50, p99 = pickup_latency(url, args.samples)
    verdict = "ok" if p50 <= PICKUP_P50_BUDGET_MS else f"OVER BUDGET (> {PICKUP_P50_BUDGET_MS} ms)"
    print(
        f"pickup latency (idle, {args.samples} jobs): p50 {p50:.1f} ms, p99 {p99:.1f} ms {verdict}"
    )
    if p50 > PICKUP_P50_BUDGET_MS:
        failures.append("pickup p50")
    print("budgets: " + ("all met" if not failures else "missed: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
