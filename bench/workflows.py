"""Workflow step throughput, pickup latency and transactions per step, beside raw PGMQ.

    .venv/bin/python -m bench.workflows [--seconds 10] [--runs 1000] [--threads 4] [--samples 50]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. Prints the durability settings it ran with. The workflow is
bench.noop_workflows.NoopWorkflow: three steps that do nothing.

- raw PGMQ: `threads x workers` connections, each looping send + read(1) + archive (three
  transactions per message) for --seconds (bench.harness.raw_pgmq_rate).
- steps/s: --runs runs are started first (NoopWorkflow.start from 8 threads), so their first
  steps wait in the queue: the workflow's own, bench_workflows, so that no other worker on the
  database takes them. Then 1, then 2 worker processes (`pgbus.cli worker --queues
  bench_workflows --threads T`) run all 3 x runs steps. The rate is 3 x runs / (first worker's
  start -> last run's end), both read from the database's clock (pgbus.processes.started_at,
  pgbus.workflows.ended_at), so the workers' Python start-up is not counted; the wall time
  including it is printed beside.
  ratio = steps/s / raw PGMQ msg/s at the same concurrency.
- transactions per step: xact_commit + xact_rollback of `pgbus_bench` in pg_stat_database (read
  from the admin database, so reading it does not count) just before the workers start, and
  after they have stopped and the counter has settled (backends flush their counts late, exiting
  ones at once); minus the benchmark's own queries on `pgbus_bench` while the workers ran;
  minus the workers' own start-up, idle polling, heartbeats and shutdown, calibrated by running
  the same workers idle for as long; divided by the 3 x runs steps. Starting the runs (one
  transaction each, the application's) is not counted.
- pickup: one idle worker of one thread; --samples runs started one at a time, each waited for
  and followed by 0.3 s of quiet (past PGMQ's 250 ms notify throttle); the latency is each
  step attempt's started_at - scheduled_at (pgbus.workflow_steps). A run's first step is woken
  by PGMQ's insert notification, the next ones by the worker finishing the step before.

Budgets: steps/s >= 0.7 x raw PGMQ at the same concurrency; >= 600 steps/s with 2 workers;
pickup p50 <= 10 ms; <= 2 transactions per step.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from bench.noop_workflows import QUEUE, NoopWorkflow

RATIO_BUDGET = 0.7
STEPS_BUDGET = 600.0  # steps/s with 2 workers
PICKUP_P50_BUDGET_MS = 10.0
TRANSACTIONS_BUDGET = 2.0  # per step
STEPS_PER_RUN = 3
PRODUCERS = 8
WORKERS = "SELECT count(*) FROM pgbus.processes WHERE kind = 'worker'"
# (One pass over the runs, and no join: the benchmark's watching takes a share of the same two
# cores as the workers and must stay small beside theirs.)
PROGRESS = (
    "SELECT count(*) FILTER (WHERE status = 'finished'),"
    " count(*) FILTER (WHERE status IN ('paused', 'cancelled')) FROM pgbus.workflows"
)
STOPPED = (
    "SELECT error FROM pgbus.workflows JOIN pgbus.workflow_steps USING (workflow_id)"
    " WHERE workflows.status IN ('paused', 'cancelled') LIMIT 1"
)
BATCH_POLL = 0.1  # s; the rate is read from the database's clock, not from when we look


def start_workers(url: str, n: int, threads: int) -> list[subprocess.Popen]:
    return harness.start_workers(url, n, threads, "bench.noop_workflows", QUEUE)


def clear_runs(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("TRUNCATE pgbus.workflows, pgbus.workflow_steps, pgbus.workflow_events CASCADE")


def start_runs(url: str, runs: int) -> None:
    def produce(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            for _ in range(i, runs, PRODUCERS):
                NoopWorkflow.start(conn=c)

    in_threads(PRODUCERS, produce)


def transactions(admin: psycopg.Connection) -> int:
    """Transactions committed or rolled back in pgbus_bench, as far as the stats know yet."""
    admin.execute("SELECT pg_stat_clear_snapshot()")
    return admin.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'pgbus_bench'"
    ).fetchone()[0]


def settled_transactions(admin: psycopg.Connection, trickle: int = 5, limit: float = 15.0) -> int:
    """The counter once it has moved by at most `trickle` over the last second (idle workers of
    someone else's on the database keep it trickling), or after `limit` seconds."""
    readings = [(time.monotonic(), transactions(admin))]
    while True:
        time.sleep(0.1)
        now, value = time.monotonic(), transactions(admin)
        readings.append((now, value))
        older = [v for t, v in readings if t <= now - 1.0]
        if (older and value - older[-1] <= trickle) or now - readings[0][0] > limit:
            return value


class Monitor:
    """The benchmark's connection to pgbus_bench; counts its statements (a transaction each)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.queries = 0

    def row(self, query: str, params: tuple = ()) -> tuple | None:
        self.queries += 1
        return self.conn.execute(query, params).fetchone()

    def value(self, query: str, params: tuple = ()):
        row = self.row(query, params)
        return row[0] if row else None

    def close(self) -> None:
        self.conn.close()


def finished(monitor: Monitor, runs: int) -> bool:
    """Whether `runs` runs have finished; raises when one stopped (paused or cancelled) instead."""
    done, stopped = monitor.row(PROGRESS)
    if stopped:
        raise RuntimeError(f"a run stopped before finishing: {monitor.value(STOPPED)}")
    return done >= runs


@dataclasses.dataclass
class Batch:
    seconds: float  # first worker's start -> last run's end (database clock)
    wall: float  # worker processes spawned -> all runs seen finished
    transactions: int  # in pgbus_bench, the benchmark's own queries left out


def run_batch(url: str, admin: psycopg.Connection, workers: int, threads: int, runs: int) -> Batch:
    clear_runs(url)
    start_runs(url, runs)
    before = settled_transactions(admin)
    spawned = time.monotonic()
    procs = start_workers(url, workers, threads)
    monitor = Monitor(url)
    try:
        poll(lambda: finished(monitor, runs), f"{runs} runs finished", every=BATCH_POLL)
        wall = time.monotonic() - spawned
        seconds = monitor.value(
            "SELECT extract(epoch FROM (SELECT max(ended_at) FROM pgbus.workflows)"
            " - (SELECT min(started_at) FROM pgbus.processes WHERE pid = ANY(%s)))",
            ([p.pid for p in procs],),
        )
    finally:
        monitor.close()
        stop(procs)
    used = settled_transactions(admin) - before - monitor.queries
    return Batch(float(seconds), wall, used)


def idle_transactions(
    url: str, admin: psycopg.Connection, workers: int, threads: int, seconds: float
) -> int:
    """What the same workers cost with nothing to do: start-up, polling, heartbeats, shutdown."""
    before = settled_transactions(admin)
    procs = start_workers(url, workers, threads)
    monitor = Monitor(url)
    try:
        pids = [p.pid for p in procs]
        poll(
            lambda: (
                monitor.value("SELECT count(*) FROM pgbus.processes WHERE pid = ANY(%s)", (pids,))
                >= workers
            ),
            f"{workers} worker(s) registered",
        )
        time.sleep(seconds)  # the idle period being measured
    finally:
        monitor.close()
        stop(procs)
    return settled_transactions(admin) - before - monitor.queries


def pickup_latency(url: str, samples: int) -> dict[str, list[float]]:
    """Milliseconds from scheduled to started, for first steps and for the steps after."""
    clear_runs(url)
    with psycopg.connect(url, autocommit=True) as c:
        others = c.execute(WORKERS).fetchone()[0]  # someone else's, counted by wait_for_workers
        listening = c.execute(LISTENERS).fetchone()[0]
        procs = start_workers(url, 1, 1)
        try:
            wait_for_workers(url, others + 1)
            wait_for_listener(c, listening)
            monitor = Monitor(url)
            for i in range(samples):
                NoopWorkflow.start(conn=c)
                poll(lambda i=i: finished(monitor, i + 1), f"run {i + 1} finished")
                time.sleep(0.3)  # quiet past PGMQ's 250 ms notify throttle, as in production
            monitor.close()
            rows = c.execute(
                "SELECT step_name = 'one', extract(epoch FROM started_at - scheduled_at) * 1000"
                " FROM pgbus.workflow_steps"
            ).fetchall()
        finally:
            stop(procs)
    return {
        "first": [float(ms) for first, ms in rows if first],
        "next": [float(ms) for first, ms in rows if not first],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()

    admin_url = server_url()
    url = scratch_database(admin_url)
    pgbus.configure(database_url=url)
    print(f"server: {durability(url)}; {os.cpu_count()} cores", flush=True)
    steps = STEPS_PER_RUN * args.runs
    failures = []
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for workers in (1, 2):
            concurrency = workers * args.threads
            raw = raw_pgmq_rate(url, concurrency, args.seconds)
            batch = run_batch(url, admin, workers, args.threads, args.runs)
            idle = idle_transactions(url, admin, workers, args.threads, batch.seconds)
            rate = steps / batch.seconds
            ratio = rate / raw
            per_step = (batch.transactions - idle) / steps

            verdict = "ok" if ratio >= RATIO_BUDGET else f"OVER BUDGET (< {RATIO_BUDGET})"
            if ratio < RATIO_BUDGET:
                failures.append(f"ratio with {workers} worker(s)")
            if workers == 2:
                if rate >= STEPS_BUDGET:
                    verdict += f"; >= {STEPS_BUDGET:.0f} steps/s ok"
                else:
                    verdict += f"; OVER BUDGET (< {STEPS_BUDGET:.0f} steps/s)"
                    failures.append("steps/s with 2 workers")
            print(
                f"{workers} worker(s) x {args.threads} threads: raw PGMQ {raw:7.0f} msg/s | "
                f"steps {rate:7.0f} steps/s | ratio {ratio:.2f} {verdict}",
                flush=True,
            )

            verdict = (
                "ok"
                if per_step <= TRANSACTIONS_BUDGET
                else f"OVER BUDGET (> {TRANSACTIONS_BUDGET:.0f})"
            )
            if per_step > TRANSACTIONS_BUDGET:
                failures.append(f"transactions per step with {workers} worker(s)")
            print(
                f"    {steps} steps in {batch.seconds:.2f} s ({batch.wall:.2f} s wall, worker "
                f"start-up included) | {per_step:.2f} transactions/step {verdict} "
                f"({batch.transactions} in all, {idle} of them idle workers' own)",
                flush=True,
            )

    latency = pickup_latency(url, args.samples)
    p50, p99 = p50_p99(latency["first"] + latency["next"])
    verdict = "ok" if p50 <= PICKUP_P50_BUDGET_MS else f"OVER BUDGET (> {PICKUP_P50_BUDGET_MS} ms)"
    print(
        f"pickup latency (idle, {args.samples} runs, {STEPS_PER_RUN * args.samples} steps): "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms {verdict}"
    )
    first, after = p50_p99(latency["first"]), p50_p99(latency["next"])
    print(
        f"    first steps p50 {first[0]:.1f} ms, p99 {first[1]:.1f} ms | "
        f"later steps p50 {after[0]:.1f} ms, p99 {after[1]:.1f} ms"
    )
    if p50 > PICKUP_P50_BUDGET_MS:
        failures.append("pickup p50")
    print("budgets: " + ("all met" if not failures else "missed: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
