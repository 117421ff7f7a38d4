"""Event throughput (publish -> handled) through 1 and 2 consumer processes, beside the raw
PGMQ topic cycle of the same run.

    .venv/bin/python -m bench.events [--seconds 10] [--events 6000] [--threads 4]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. Prints the durability settings it ran with.

- raw PGMQ topics: `threads x consumers` connections, each looping pgmq.send_topic (one bound
  queue) + read(1) + archive for --seconds.
- events: as many producer threads pgbus.publish --events events one by one while 1, then 2
  `pgbus consumer` processes of --threads threads run a no-op handler; the rate is
  events / (first publish -> last archive).

Budget (issue #16): events/s >= 0.9 x raw PGMQ topics at the same concurrency.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import psycopg

import pgbus
from bench.harness import ROOT, durability, in_threads, poll, scratch_database, server_url, stop

RATIO_BUDGET = 0.9
QUEUE = "pgbus_ev_noop_handler"


def raw_topic_rate(url: str, concurrency: int, seconds: float) -> float:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pgmq.create('bench_raw_topic')")
        c.execute("SELECT pgmq.bind_topic('raw.#', 'bench_raw_topic')")
    counts = [0] * concurrency
    deadline = time.monotonic() + seconds

    def loop(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            while time.monotonic() < deadline:
                c.execute("SELECT pgmq.send_topic('raw.noop', '{\"event\": \"noop\"}', NULL, 0)")
                row = c.execute("SELECT msg_id FROM pgmq.read('bench_raw_topic', 30, 1)").fetchone()
                if row:
                    c.execute("SELECT pgmq.archive('bench_raw_topic', %s::bigint)", (row[0],))
                    counts[i] += 1

    in_threads(concurrency, loop)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pgmq.drop_queue('bench_raw_topic')")
    return sum(counts) / seconds


def start_consumers(url: str, n: int, threads: int) -> list[subprocess.Popen]:
    env = {**os.environ, "PGBUS_DATABASE_URL": url}
    command = [sys.executable, "-m", "pgbus.cli", "consumer", "--import", "bench.noop_events"]
    return [
        subprocess.Popen(
            [*command, "--topics", "bench.#", "--threads", str(threads)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def event_rate(url: str, consumers: int, threads: int, events: int) -> float:
    with psycopg.connect(url, autocommit=True) as c:
        procs = start_consumers(url, consumers, threads)
        try:
            poll(
                lambda: (
                    c.execute(
                        "SELECT count(*) FROM pgbus.processes WHERE kind = 'consumer'"
                    ).fetchone()[0]
                    >= consumers
                ),
                f"{consumers} consumer(s) registered",
            )
            c.execute(f"TRUNCATE pgmq.a_{QUEUE}")
            producers = consumers * threads
            started = time.monotonic()

            def produce(i: int) -> None:
                with psycopg.connect(url, autocommit=True) as pc:
                    for _ in range(i, events, producers):
                        pgbus.publish("bench.noop", {}, conn=pc)

            in_threads(producers, produce)
            poll(
                lambda: c.execute(f"SELECT count(*) FROM pgmq.a_{QUEUE}").fetchone()[0] >= events,
                f"{events} events archived",
            )
            return events / (time.monotonic() - started)
        finally:
            stop(procs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    url = scratch_database(server_url())
    pgbus.configure(database_url=url)
    from bench import noop_events  # noqa: F401  (its subscription)
    from pgbus import events

    events.bind_all()
    print(f"server: {durability(url)}; {os.cpu_count()} cores", flush=True)
    failures = []
    for consumers in (1, 2):
        concurrency = consumers * args.threads
        raw = raw_topic_rate(url, concurrency, args.seconds)
        rate = event_rate(url, consumers, args.threads, args.events)
        ratio = rate / raw
        verdict = "ok" if ratio >= RATIO_BUDGET else f"OVER BUDGET (< {RATIO_BUDGET})"
        print(
            f"{consumers} consumer(s) x {args.threads} threads: raw PGMQ topics {raw:7.0f} msg/s"
            f" | events {rate:7.0f} events/s | ratio {ratio:.2f} {verdict}",
            flush=True,
        )
        if ratio < RATIO_BUDGET:
            failures.append(f"ratio with {consumers} consumer(s)")
    print("budgets: " + ("all met" if not failures else "missed: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
