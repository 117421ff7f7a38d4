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
import subprocess
import sys
import time

import psycopg

import pgbus
from bench import harness
from bench.harness import (
    LISTENERS,
    durability,
    in_threads,
    p50_p99,
    poll,
    raw_pgmq_rate,
    scratch_database,
    server_url,
    stop,
    wait_for_listener,
    wait_for_workers,
)

RATIO_BUDGET = 0.9
PICKUP_P50_BUDGET_MS = 10.0


def start_workers(url: str, n: int, threads: int) -> list[subprocess.Popen]:
    return harness.start_workers(url, n, threads, "bench.noop_jobs")


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
