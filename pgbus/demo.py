"""`pgbus demo`: migrations, a supervisor with workers and a dispatcher, and a sample workload
whose progress prints once a second.

The workload: welcome mails (quick), thumbnails (slower), card charges that fail now and then
and retry (one poison charge ends in the dead letter queue), and a nightly-report batch whose
callback runs when its members are done.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time

import psycopg

import pgbus
from pgbus import migrate
from pgbus.config import settings
from pgbus.db import connect, redact

pgbus.configure(
    retry_backoff_base=0.5,
    retry_backoff_max=3,
    max_retries=3,
    workers=[{"queues": ["default"], "threads": 5}, {"queues": ["media"], "threads": 3}],
)


class SendWelcome(pgbus.Job):
    def perform(self, user_id: int) -> None:
        time.sleep(random.uniform(0.01, 0.05))


class MakeThumbnail(pgbus.Job):
    queue = "media"

    def perform(self, image_id: int) -> None:
        time.sleep(random.uniform(0.1, 0.4))


class ChargeCard(pgbus.Job):
    def perform(self, order_id: int, poison: bool = False) -> None:
        if poison or random.random() < 0.2:
            raise ConnectionError(f"payment gateway timed out for order {order_id}")


class ReportPart(pgbus.Job):
    queue = "media"

    def perform(self, part: int) -> None:
        time.sleep(random.uniform(0.05, 0.2))


class ReportReady(pgbus.Job):
    def perform(self, properties: dict) -> None:
        """The batch's callback: runs once, after all four parts."""


def enqueue_wave(n: int) -> None:
    SendWelcome.perform_all_later([(n * 10 + i,) for i in range(10)])
    MakeThumbnail.perform_all_later([(n * 5 + i,) for i in range(5)])
    ChargeCard.perform_later(n, poison=(n == 1))
    if n % 3 == 0:
        with pgbus.batch(on_complete=ReportReady, properties={"report": f"night-{n}"}) as b:
            for part in range(4):
                b.add(ReportPart, part)


def progress(conn: psycopg.Connection) -> str:
    row = conn.execute(
        """SELECT
             (SELECT coalesce(sum(queue_length), 0) FROM pgmq.metrics_all()
               WHERE queue_name NOT LIKE '%%\\_dlq'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'success'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'failed'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'dead_lettered'),
             (SELECT count(*) FROM pgbus.batches WHERE status = 'finished'),
             (SELECT string_agg(kind || ' x' || n, ', ' ORDER BY kind)
                FROM (SELECT kind, count(*) AS n FROM pgbus.processes GROUP BY kind) k)"""
    ).fetchone()
    waiting, done, failed, dead, batches, procs = row
    return (
        f"waiting {waiting} | done {done} | failed attempts {failed} | dead-lettered {dead}"
        f" | batches finished {batches} | {procs or 'starting processes'}"
    )


def run(args: argparse.Namespace) -> int:
    dsn = settings().dsn()
    print(f"pgbus demo on {redact(dsn)}", flush=True)
    for line in migrate.migrate(dsn).lines():
        print(f"  {line}", flush=True)
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "pgbus.cli", "start", "--import", "pgbus.demo"],
        env={**os.environ, "PGBUS_DATABASE_URL": dsn},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print("  started the supervisor (workers and a dispatcher); Ctrl-C stops the demo", flush=True)
    started = time.monotonic()
    wave = 0
    try:
        with connect(dsn) as conn:
            while not args.seconds or time.monotonic() - started < args.seconds:
                if wave < 20:
                    enqueue_wave(wave)
                    wave += 1
                print(f"[{time.monotonic() - started:5.1f}s] {progress(conn)}", flush=True)
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(60)
    print("demo stopped", flush=True)
    return 0
