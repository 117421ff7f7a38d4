"""Workflow step throughput, pickup latency and transactions per step, beside raw PGMQ.

    .venv/bin/python -m bench.workflows [--rounds 5] [--seconds 5] [--runs 2000] [--threads 4]
                                        [--samples 50] [--without-rollup-triggers]

Uses PGBUS_DATABASE_URL's server (a scratch database `pgbus_bench` is created on it) or starts
the local one with scripts/pg. Prints the durability settings it ran with. The workflow is
bench.noop_workflows.NoopWorkflow: three steps that do nothing.

The phases are interleaved and repeated: each of --rounds rounds measures steps with 1 worker,
then with 2, each between two halves of its raw PGMQ cycle (--seconds / 2 before, as long
after), so that each ratio compares phases seconds apart; the figures printed are the medians
over the rounds (with their range). On a machine shared with other work the raw rates swing
with the load; the ratio of the same round, and the CPU time per step, move much less.

- raw PGMQ: `threads x workers` connections, each looping send + read(1) + archive (three
  transactions per message) for --seconds in all, around the steps (bench.harness.raw_pgmq_rate).
- steps/s: --runs runs are started first (NoopWorkflow.start from 8 threads), so their first
  steps wait in the queue: the workflow's own, bench_workflows, so that no other worker on the
  database takes them. Then 1, then 2 worker processes (`pgbus.cli worker --queues
  bench_workflows --threads T`) run all 3 x runs steps. The rate is 3 x runs / (first worker's
  start -> last run's end), both read from the database's clock (pgbus.processes.started_at,
  pgbus.workflows.ended_at), so the workers' Python start-up is not counted.
  ratio = steps/s / raw PGMQ msg/s at the same concurrency, in the same round.
- WAL per step: pg_current_wal_lsn() before the workers start and after the last run ended,
  divided by the 3 x runs steps.
- CPU per step: the worker processes' CPU time (user + system, from /proc) and the database
  server's (every process of its postmaster, when the server runs on this machine and its data
  directory is readable), over the batch, less what the same idle workers use for as long
  (start-up, polling), divided by the 3 x runs steps. Unlike a rate, it hardly depends on what
  else the machine runs.
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
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int], children_of: int | None = None) -> float:
    """User + system CPU seconds of `pids` (and of every child of `children_of`), from /proc;
    a process gone meanwhile counts 0."""
    total = 0.0
    wanted = set(pids)
    if children_of is not None:
        wanted.add(children_of)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                fields = _stat(int(entry.name))
                if fields and int(fields[1]) == children_of:
                    wanted.add(int(entry.name))
    for pid in wanted:
        fields = _stat(pid)
        if fields:
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def postmaster_pid(admin: psycopg.Connection) -> int | None:
    """The server's postmaster pid when it runs on this machine and its data directory is
    readable (CPU per step then counts the server's side); else None."""
    try:
        data = admin.execute("SHOW data_directory").fetchone()[0]
        pid = int((Path(data) / "postmaster.pid").read_text().split()[0])
    except (psycopg.Error, OSError, ValueError, IndexError):
        return None
    return pid if _stat(pid) else None


def wal_lsn(admin: psycopg.Connection) -> int:
    return admin.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()[0]


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
    wal: int = 0  # bytes of WAL written meanwhile
    worker_cpu: float = 0.0  # s, the worker processes' (start-up included)
    server_cpu: float | None = None  # s, the server's processes' (None: not measurable here)


def run_batch(
    url: str,
    admin: psycopg.Connection,
    workers: int,
    threads: int,
    runs: int,
    postmaster: int | None = None,
) -> Batch:
    clear_runs(url)
    start_runs(url, runs)
    before = settled_transactions(admin)
    server_before = cpu_seconds([], postmaster) if postmaster else None
    wal_before = wal_lsn(admin)
    spawned = time.monotonic()
    procs = start_workers(url, workers, threads)
    monitor = Monitor(url)
    try:
        poll(lambda: finished(monitor, runs), f"{runs} runs finished", every=BATCH_POLL)
        wal = wal_lsn(admin) - wal_before
        worker_cpu = cpu_seconds([p.pid for p in procs])
        server_cpu = cpu_seconds([], postmaster) - server_before if postmaster else None
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
    return Batch(float(seconds), wall, used, wal, worker_cpu, server_cpu)


def idle_batch(
    url: str,
    admin: psycopg.Connection,
    workers: int,
    threads: int,
    seconds: float,
    postmaster: int | None = None,
) -> Batch:
    """What the same workers cost with nothing to do for `seconds`: start-up, polling,
    heartbeats, shutdown (transactions; CPU up to the end of the idle period)."""
    before = settled_transactions(admin)
    server_before = cpu_seconds([], postmaster) if postmaster else None
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
        worker_cpu = cpu_seconds(pids)
        server_cpu = cpu_seconds([], postmaster) - server_before if postmaster else None
    finally:
        monitor.close()
        stop(procs)
    used = settled_transactions(admin) - before - monitor.queries
    return Batch(seconds, seconds, used, 0, worker_cpu, server_cpu)


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


def disable_rollup_triggers(url: str) -> None:
    """Disables the row triggers by which a write into the past forgets rolled-up insights hours
    (migration 0018): the only work the rollup adds to a step's writes."""
    with psycopg.connect(url, autocommit=True) as c:
        for table in ("workflows", "workflow_steps"):
            for event in ("insert", "update", "delete"):
                c.execute(f"ALTER TABLE pgbus.{table} DISABLE TRIGGER {table}_insights_{event}")


def spread(values: list[float], fmt: str) -> str:
    """The median of `values`, with their range when there are several."""
    med = format(statistics.median(values), fmt)
    if len(values) < 2:
        return med
    return f"{med} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument(
        "--without-rollup-triggers",
        action="store_true",
        help="disable the insights rollup's row triggers, to measure what they cost a step",
    )
    args = parser.parse_args()

    admin_url = server_url()
    url = scratch_database(admin_url)
    pgbus.configure(database_url=url)
    if args.without_rollup_triggers:
        disable_rollup_triggers(url)
    with psycopg.connect(admin_url, autocommit=True) as c:
        # (To count the rollup triggers' calls below; sessions opened from here on see it.)
        c.execute("ALTER DATABASE pgbus_bench SET track_functions = 'pl'")
    print(
        f"server: {durability(url)}; {os.cpu_count()} cores; insights rollup triggers "
        + ("off" if args.without_rollup_triggers else "on"),
        flush=True,
    )
    steps = STEPS_PER_RUN * args.runs
    failures = []
    with psycopg.connect(admin_url, autocommit=True) as admin:
        postmaster = postmaster_pid(admin)
        raws: dict[int, list[float]] = {1: [], 2: []}
        batches: dict[int, list[Batch]] = {1: [], 2: []}
        for r in range(args.rounds):
            for workers in (1, 2):
                # (Half of the raw cycle's time before the steps, half after: the mean of the
                # two is the raw rate around the steps, as the machine's load was then.)
                before = raw_pgmq_rate(url, workers * args.threads, args.seconds / 2)
                batch = run_batch(url, admin, workers, args.threads, args.runs, postmaster)
                raw = (before + raw_pgmq_rate(url, workers * args.threads, args.seconds / 2)) / 2
                raws[workers].append(raw)
                batches[workers].append(batch)
                print(
                    f"round {r + 1}, {workers} worker(s): raw PGMQ {raw:6.0f} msg/s | steps "
                    f"{steps / batch.seconds:6.0f} steps/s | ratio {steps / batch.seconds / raw:.2f}",
                    flush=True,
                )
        for workers in (1, 2):
            runs = batches[workers]
            typical = statistics.median(b.seconds for b in runs)
            idle = idle_batch(url, admin, workers, args.threads, typical, postmaster)
            rates = [steps / b.seconds for b in runs]
            ratios = [rate / raw for rate, raw in zip(rates, raws[workers], strict=True)]
            per_step = [(b.transactions - idle.transactions) / steps for b in runs]
            ratio = statistics.median(ratios)
            rate = statistics.median(rates)

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
                f"{workers} worker(s) x {args.threads} threads, median of {len(runs)} rounds: "
                f"raw PGMQ {spread(raws[workers], '.0f')} msg/s | steps {spread(rates, '.0f')} "
                f"steps/s | ratio {spread(ratios, '.2f')} {verdict}",
                flush=True,
            )

            tx = statistics.median(per_step)
            verdict = (
                "ok" if tx <= TRANSACTIONS_BUDGET else f"OVER BUDGET (> {TRANSACTIONS_BUDGET:.0f})"
            )
            if tx > TRANSACTIONS_BUDGET:
                failures.append(f"transactions per step with {workers} worker(s)")
            worker_cpu = [(b.worker_cpu - idle.worker_cpu) * 1000 / steps for b in runs]
            cpu = f"worker CPU {spread(worker_cpu, '.3f')} ms/step"
            if idle.server_cpu is not None:
                server_cpu = [(b.server_cpu - idle.server_cpu) * 1000 / steps for b in runs]
                cpu += f", server CPU {spread(server_cpu, '.3f')} ms/step"
            print(
                f"    {steps} steps in {spread([b.seconds for b in runs], '.2f')} s | "
                f"{spread(per_step, '.2f')} transactions/step {verdict} (idle workers' own "
                f"{idle.transactions} left out) | WAL {spread([b.wal / steps for b in runs], '.0f')}"
                f" bytes/step | {cpu}",
                flush=True,
            )

    with psycopg.connect(url) as c:
        calls = c.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
            " WHERE schemaname = 'pgbus' AND funcname = 'workflow_insights_row_changed'"
        ).fetchone()[0]
    print(f"insights rollup trigger function calls during all the batches' steps: {calls}")

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
