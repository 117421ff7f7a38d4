"""Reading a queue that holds many delayed messages: pgbus.queue_read beside pgmq.read.

    .venv/bin/python -m bench.queue_reads [--delayed 1000000] [--reads 50]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. A queue gets --delayed messages visible only in a day (workflow
steps waiting for days look like this), then each function reads 10 messages --reads times,
first with none due, then with 10 due each time (sent just before the read, outside the
timing). Prints the median and p99 milliseconds of each, and their ratio.

Budget: pgbus.queue_read's median <= 5 ms in both cases, whatever --delayed is.
"""

from __future__ import annotations

import argparse
import sys
import time

import psycopg

from bench.harness import p50_p99, scratch_database, server_url

QUEUE = "bench_delayed"
BUDGET_MS = 5.0


def fill(conn: psycopg.Connection, delayed: int) -> None:
    conn.execute("SELECT pgbus.ensure_queue(%s, false)", (QUEUE,))
    conn.execute(
        f"INSERT INTO pgmq.q_{QUEUE} (vt, message)"
        " SELECT now() + interval '1 day', jsonb_build_object('n', i) FROM generate_series(1, %s) i",
        (delayed,),
    )
    conn.execute(f"VACUUM ANALYZE pgmq.q_{QUEUE}")


def timings(conn: psycopg.Connection, read: str, reads: int, due: int) -> list[float]:
    """Milliseconds of each read of 10; `due` messages are made due before each, untimed."""
    out = []
    for _ in range(reads):
        for _ in range(due):
            conn.execute("SELECT pgbus.queue_send(%s, '{}', clock_timestamp())", (QUEUE,))
        started = time.perf_counter()
        conn.execute(read, (QUEUE,)).fetchall()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delayed", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=50)
    args = parser.parse_args()

    url = scratch_database(server_url())
    failures = []
    with psycopg.connect(url, autocommit=True) as conn:
        print(f"filling {QUEUE} with {args.delayed:,} messages delayed by a day...", flush=True)
        fill(conn, args.delayed)
        for due in (0, 10):
            ours = p50_p99(
                timings(conn, "SELECT * FROM pgbus.queue_read(%s, 30, 10)", args.reads, due)
            )
            theirs = p50_p99(timings(conn, "SELECT * FROM pgmq.read(%s, 30, 10)", args.reads, due))
            verdict = "ok" if ours[0] <= BUDGET_MS else f"OVER BUDGET (> {BUDGET_MS} ms)"
            if ours[0] > BUDGET_MS:
                failures.append(f"{due} due")
            print(
                f"{due:2} due: pgbus.queue_read p50 {ours[0]:7.2f} ms, p99 {ours[1]:7.2f} | "
                f"pgmq.read p50 {theirs[0]:7.2f} ms, p99 {theirs[1]:7.2f} | "
                f"{theirs[0] / ours[0]:6.0f}x {verdict}",
                flush=True,
            )
    print("budgets: " + ("all met" if not failures else "missed: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
