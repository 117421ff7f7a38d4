"""What the benchmarks share: the server and a scratch database, the durability settings they
ran with, the raw PGMQ cycle to compare against, worker processes, waiting on conditions with a
deadline, and percentiles. Each benchmark (bench.jobs, bench.workflows, bench.queue_reads) is
its own entry point on top of this."""

from __future__ import annotations

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

from pgbus import migrate

ROOT = Path(__file__).resolve().parents[1]


def server_url() -> str:
    if os.environ.get("PGBUS_DATABASE_URL"):
        return os.environ["PGBUS_DATABASE_URL"]
    out = subprocess.run(
        [str(ROOT / "scripts/pg"), "start"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def scratch_database(admin: str, name: str = "pgbus_bench", *, fresh: bool = True) -> str:
    """The URL of database `name` on the admin URL's server: dropped, re-created and migrated
    unless `fresh` is false (a bench's --skip-load reuses the data it loaded before)."""
    url = urlunsplit(urlsplit(admin)._replace(path="/" + name))
    if fresh:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {name}")
        migrate.migrate(url)
    return url


def run_load_script(url: str, script: str, runs: int) -> float:
    """Runs a bench's set-based load, statement by statement (`%(runs)s` filled in); seconds."""
    t = time.monotonic()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET maintenance_work_mem = '256MB'")
        for stmt in script.split(";\n"):
            if stmt.strip():
                c.execute(stmt.replace("%(runs)s", str(runs)).replace("%%", "%"))
    return time.monotonic() - t


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median of `repeat` timed calls of fn, in ms, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def machine() -> str:
    """This machine's cores and load average: what else ran beside a benchmark."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.1f} / {five:.1f} / {fifteen:.1f}"


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


def start_workers(
    url: str, n: int, threads: int, module: str, queues: str | None = None
) -> list[subprocess.Popen]:
    """`n` worker processes (`pgbus.cli worker`) importing `module`, each of `threads`
    threads, reading `queues` (comma-separated; the default ones when None)."""
    env = {**os.environ, "PGBUS_DATABASE_URL": url}
    command = [sys.executable, "-m", "pgbus.cli", "worker", "--import", module]
    if queues:
        command += ["--queues", queues]
    return [
        subprocess.Popen(
            [*command, "--threads", str(threads)],
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


def server_cpu(url: str, statements: list[tuple[str, str]], repeat: int) -> None:
    """Prints each statement's server CPU time per call (median of `repeat`, one session; the
    backend's own, from /proc/<pid>/schedstat): unlike the wall-clock medians, barely moved by
    other work on a shared machine. Only when the server runs on this machine."""
    with psycopg.connect(url, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        stat = Path(f"/proc/{pid}/schedstat")
        if not stat.exists():
            return

        def used() -> int:
            return int(stat.read_text().split()[0])

        print(f"\nSQL alone, server CPU per call (median of {repeat}, one session):")
        for title, sql in statements:
            conn.execute(sql).fetchall()
            samples = []
            for _ in range(repeat):
                before = used()
                conn.execute(sql).fetchall()
                samples.append((used() - before) / 1e6)
            print(f"{title:<60} {statistics.median(samples):>8.2f} ms")
