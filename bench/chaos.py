"""Chaos, on demand (longer than the test suite's tests/py/test_chaos.py): workflow runs under
PostgreSQL restarts, kill -9s of workers and a database outage, on a throwaway cluster of its
own (tests/py/throwaway_cluster.py: fsync off, synchronous_commit on).

    .venv/bin/python -m bench.chaos [--scenario restart|kills|outage|all] [--runs 8000]
                                    [--workers 2] [--threads 4] [--kills 20] [--outage 75]

The workload is tests.py.chaos_workflows.Chaos: three steps, each writing one row through the
step's connection (committed with the step's end) after leaving a file that says its body
started (no connection of its own, which a restart would fail: that would be the
application's failure). Each scenario starts --runs runs, lets --workers worker processes run them for a few
seconds (the baseline), then:

- restart: `pg_ctl restart -m fast`, then later `-m immediate`;
- kills: --kills times, one a second, kill -9 of one worker (a new one takes its place);
- outage: the server stopped for --outage seconds, then started again.

Reported per scenario: the baseline (steps/s, the median of whole seconds before the event),
the recovery time (from the server being back, or the kill, to the first whole second at >= 90%
of the baseline; for the kills the longest), runs needing an operator (paused; of them, those
whose stalled step body had not recorded its start), duplicates (a step's row written twice),
and lost work (runs neither finished nor paused at the end, finished runs missing a row).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.py.throwaway_cluster import ThrowawayCluster  # noqa: E402

SETTLE_TIMEOUT = 300.0


def worker(url: str, threads: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PGBUS_DATABASE_URL": url,
        "PGBUS_VISIBILITY_TIMEOUT": "10",
        "PGBUS_POLLING_INTERVAL": "0.2",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgbus.cli",
            "worker",
            "--queues",
            "workflows",
            "--threads",
            str(threads),
            "--import",
            "tests.py.chaos_workflows",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def prepare(cluster: ThrowawayCluster, name: str, runs: int, starts: str) -> str:
    import pgbus
    from pgbus.db import close_pool
    from tests.py.chaos_workflows import Chaos

    url = cluster.create_database(name)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE effects (id bigserial PRIMARY KEY, kind text, key text)")
    pgbus.configure(database_url=url)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: Chaos.start(work=0.002, starts_dir=starts), range(runs)))
    close_pool()
    pgbus.config.reset()
    return url


def query(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    for _ in range(600):
        try:
            with psycopg.connect(url, connect_timeout=2) as c:
                return c.execute(sql, params).fetchall()
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise RuntimeError("the database did not come back")


def now(url: str) -> datetime:
    return query(url, "SELECT clock_timestamp()")[0][0]


def per_second(url: str) -> dict[datetime, int]:
    return dict(
        query(
            url,
            "SELECT date_trunc('second', ended_at), count(*) FROM pgbus.workflow_steps"
            " WHERE status = 'completed' GROUP BY 1 ORDER BY 1",
        )
    )


def settle(url: str, runs: int) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        done = query(
            url, "SELECT count(*) FROM pgbus.workflows WHERE status IN ('finished', 'paused')"
        )[0][0]
        if done == runs:
            return
        time.sleep(1)


def report(
    url: str, name: str, events: list[tuple[datetime, datetime]], runs: int, starts: str
) -> None:
    """events: (disturbance began, service back) pairs."""
    rates = per_second(url)
    seconds = sorted(rates)
    last_busy = seconds[-1] if seconds else None  # (after it the work had run out)
    first_event = events[0][0]
    before = [rates[s] for s in seconds[1:] if s < first_event.replace(microsecond=0)][:-1]
    baseline = statistics.median(before) if before else 0
    recoveries = []
    for _, back in events:
        later = [s for s in seconds if s >= back.replace(microsecond=0)]
        hit = next((s for s in later if rates[s] >= 0.9 * baseline), None)
        if hit is None and (last_busy is None or (last_busy - back).total_seconds() < 3):
            continue  # the work ran out before it could recover
        recoveries.append((hit - back).total_seconds() + 1 if hit else float("inf"))
    status = dict(query(url, "SELECT status, count(*) FROM pgbus.workflows GROUP BY 1"))
    started = set(os.listdir(starts))
    paused_never_started = sum(
        f"{wf}.{step}.{attempt}" not in started
        for wf, step, attempt in query(
            url,
            "SELECT w.workflow_id, s.step_name, s.attempt FROM pgbus.workflows w"
            " JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id"
            " WHERE w.status = 'paused'",
        )
    )
    duplicates = query(
        url,
        "SELECT count(*) FROM (SELECT 1 FROM effects GROUP BY kind, key HAVING count(*) > 1) d",
    )[0][0]
    missing = query(
        url,
        "SELECT count(*) FROM pgbus.workflows w, unnest(ARRAY['one', 'two', 'three']) k"
        " WHERE w.status = 'finished' AND NOT EXISTS"
        " (SELECT 1 FROM effects e WHERE e.kind = k AND e.key = w.workflow_id::text)",
    )[0][0]
    unsettled = runs - status.get("finished", 0) - status.get("paused", 0)
    print(
        f"{name}: baseline {baseline:.0f} steps/s; recovery to 90%: "
        + (", ".join(f"{r:.0f} s" for r in recoveries) or "(work ran out first)")
        + (f" (longest {max(recoveries):.0f} s)" if len(recoveries) > 1 else "")
    )
    print(
        f"    runs {runs}: finished {status.get('finished', 0)}, needing an operator (paused)"
        f" {status.get('paused', 0)} (of them {paused_never_started} whose step body had not"
        f" recorded its start); duplicates {duplicates}; lost work: {unsettled} runs unsettled,"
        f" {missing} missing step rows"
    )


def scenario(args: argparse.Namespace, name: str) -> None:
    starts = tempfile.mkdtemp(prefix="pgbus-chaos-starts-")
    with ThrowawayCluster() as cluster:
        url = prepare(cluster, name, args.runs, starts)
        workers = [worker(url, args.threads) for _ in range(args.workers)]
        try:
            time.sleep(6)  # start-up and the baseline
            events: list[tuple[datetime, datetime]] = []
            if name == "restart":
                for mode in ("fast", "immediate"):
                    began = now(url)
                    cluster.restart(mode=mode)
                    events.append((began, now(url)))
                    time.sleep(6)
            elif name == "kills":
                for _ in range(args.kills):
                    victim = workers.pop(0)
                    at = now(url)
                    os.killpg(victim.pid, signal.SIGKILL)
                    victim.wait(10)
                    workers.append(worker(url, args.threads))
                    events.append((at, at))
                    time.sleep(1.0)
            elif name == "outage":
                began = now(url)
                cluster.stop("fast")
                time.sleep(args.outage)
                cluster.start()
                events.append((began, now(url)))
            settle(url, args.runs)
            report(url, name, events, args.runs, starts)
        finally:
            for p in workers:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in workers:
                try:
                    p.wait(40)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="all", choices=["restart", "kills", "outage", "all"])
    parser.add_argument("--runs", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--outage", type=float, default=75.0)
    args = parser.parse_args()
    print(
        "server: a throwaway cluster, fsync=off synchronous_commit=on full_page_writes=off;"
        f" {os.cpu_count()} cores; {args.workers} workers x {args.threads} threads,"
        " visibility timeout 10 s, stall action pause"
    )
    names = ["restart", "kills", "outage"] if args.scenario == "all" else [args.scenario]
    for name in names:
        scenario(args, name)


if __name__ == "__main__":
    main()
