"""`pgbus demo`: migrations, a supervisor with workers and a dispatcher, and a sample workload
whose progress prints once a second.

The workload: welcome mails (quick), thumbnails (slower), card charges that fail now and then
and retry (one poison charge ends in the dead letter queue), a nightly-report batch whose
callback runs when its members are done; and workflows: signups that wait between steps, and
orders that fan out to their vendors (one batch), whose payment step fails, pauses the run and
is resumed by the demo a moment later, and that then wait at a gate for the payment provider's
signal, which the demo sends as a webhook would.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta

import psycopg

import pgbus
from pgbus import migrate
from pgbus.config import settings
from pgbus.db import connect, redact

pgbus.configure(
    retry_backoff_base=0.5,
    retry_backoff_max=3,
    max_retries=3,
    workers=[
        {"queues": ["default", "workflows"], "threads": 5},
        {"queues": ["media"], "threads": 3},
    ],
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


class SignupWorkflow(pgbus.Workflow):
    """The README's workflow, with waits of a second instead of days."""

    @pgbus.step
    def welcome(self):
        SendWelcome.perform_later(self.arguments["user_id"])  # commits with the step

    @pgbus.step(wait=timedelta(seconds=1), skip_if=lambda wf: wf.arguments["user_id"] % 4 == 0)
    def reminder(self):
        self.output(reminded=self.arguments["user_id"])

    @pgbus.step(wait=timedelta(seconds=1))
    def complete(self):
        pass


class NotifyVendor(pgbus.Job):
    def perform(self, order_id: int, vendor: str) -> None:
        time.sleep(random.uniform(0.05, 0.2))


class OrderWorkflow(pgbus.Workflow):
    """Fans out to three vendors; its payment times out on the first try (the run pauses until
    someone resumes it); then it waits for the provider's payment_confirmed signal."""

    @pgbus.step
    def reserve(self):
        self.output(reserved=True)

    @pgbus.fan_out
    def notify_vendors(self, b):
        for vendor in ("warehouse", "courier", "invoicing"):
            b.add(NotifyVendor, self.arguments["order"], vendor)

    @pgbus.step
    def charge(self):
        if self.attempt == 1:
            raise TimeoutError("payment gateway timed out")
        self.output(charge_id=f"ch_{self.workflow_id.hex[:8]}")

    @pgbus.step(
        wait_for="payment_confirmed", wait_timeout=timedelta(minutes=1), on_timeout="cancel"
    )
    def capture(self):
        self.output(amount=self.received_signal.payload["amount"])

    @pgbus.step
    def receipt(self):
        SendWelcome.perform_later(0)


def enqueue_wave(n: int) -> None:
    SendWelcome.perform_all_later([(n * 10 + i,) for i in range(10)])
    MakeThumbnail.perform_all_later([(n * 5 + i,) for i in range(5)])
    ChargeCard.perform_later(n, poison=(n == 1))
    if n % 3 == 0:
        with pgbus.batch(on_complete=ReportReady, properties={"report": f"night-{n}"}) as b:
            for part in range(4):
                b.add(ReportPart, part)
    SignupWorkflow.start(user_id=n)
    if n % 5 == 0:
        OrderWorkflow.start(order=n)


def resume_paused_orders(conn: psycopg.Connection) -> int:
    """What an operator would do once the gateway is back."""
    paused = conn.execute(
        "SELECT workflow_id FROM pgbus.workflow_runs_overview"
        " WHERE status = 'paused' AND workflow_class = %s"
        " AND updated_at < now() - interval '2 seconds'",
        (OrderWorkflow.workflow_name,),
    ).fetchall()
    for (workflow_id,) in paused:
        pgbus.workflow.WorkflowRun(workflow_id, OrderWorkflow.workflow_name).resume(
            actor="demo", reason="gateway is back"
        )
    return len(paused)


def confirm_payments(conn: psycopg.Connection) -> int:
    """The payment provider's webhook: one signal per order waiting at its gate."""
    waiting = conn.execute(
        "SELECT workflow_id FROM pgbus.workflow_runs_overview WHERE status = 'waiting'"
        " AND current_wait_for IS NOT NULL AND workflow_class = %s"
        " AND current_waiting_since < now() - interval '1 second'",
        (OrderWorkflow.workflow_name,),
    ).fetchall()
    for (workflow_id,) in waiting:
        pgbus.workflow.WorkflowRun(workflow_id, OrderWorkflow.workflow_name).signal(
            "payment_confirmed", {"amount": 42}, idempotency_key=f"evt_{workflow_id}", actor="psp"
        )
    return len(waiting)


def progress(conn: psycopg.Connection) -> str:
    row = conn.execute(
        """SELECT
             (SELECT coalesce(sum(queue_length), 0) FROM pgmq.metrics_all()
               WHERE queue_name NOT LIKE '%%\\_dlq'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'success'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'failed'),
             (SELECT count(*) FROM pgbus.job_stats WHERE status = 'dead_lettered'),
             (SELECT count(*) FROM pgbus.batches WHERE status = 'finished'),
             (SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
                FROM (SELECT status, count(*) AS n FROM pgbus.workflow_runs_overview
                      GROUP BY status) w),
             (SELECT string_agg(kind || ' x' || n, ', ' ORDER BY kind)
                FROM (SELECT kind, count(*) AS n FROM pgbus.processes GROUP BY kind) k)"""
    ).fetchone()
    waiting, done, failed, dead, batches, workflows, procs = row
    return (
        f"jobs: waiting {waiting}, done {done}, failed attempts {failed}, dead-lettered {dead}"
        f" | batches finished {batches} | workflows: {workflows or 'none yet'}"
        f" | {procs or 'starting processes'}"
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
    dashboard = None
    if args.web_port:
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "pgbus.cli", "web", "--port", str(args.web_port)],
            env={**os.environ, "PGBUS_DATABASE_URL": dsn},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        print(
            f"  dashboard: http://127.0.0.1:{args.web_port}/ (watch the workload live)", flush=True
        )
    started = time.monotonic()
    wave = 0
    try:
        with connect(dsn) as conn:
            while not args.seconds or time.monotonic() - started < args.seconds:
                if wave < 20:
                    enqueue_wave(wave)
                    wave += 1
                resumed = resume_paused_orders(conn)
                if resumed:
                    print(
                        f"  resumed {resumed} paused order workflow(s): gateway is back", flush=True
                    )
                confirmed = confirm_payments(conn)
                if confirmed:
                    print(f"  signalled payment_confirmed to {confirmed} order(s)", flush=True)
                print(f"[{time.monotonic() - started:5.1f}s] {progress(conn)}", flush=True)
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        supervisor.send_signal(signal.SIGTERM)
        if dashboard is not None:
            dashboard.send_signal(signal.SIGTERM)
            dashboard.wait(10)
        supervisor.wait(60)
    print("demo stopped", flush=True)
    return 0
