"""The scheduler process: fires recurring tasks at their ticks and deploy tasks once the fleet
has rolled over.

Python computes the ticks (cron lines through cronsim, in the task's time zone, against the
database's clock so that schedulers on two hosts agree); each claim and its enqueue is one SQL
call in one transaction (`pgbus.recurring_fire`, `pgbus.deploy_tasks_fire`), so two schedulers
never both fire one tick or one arm. A scheduler that starts catches up the ticks of the last
`recurring_catch_up_window` that nobody claimed.
"""

from __future__ import annotations

import logging
import signal
import threading
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from pgbus.config import settings
from pgbus.db import (
    RECONNECT_DELAY,
    SHORT_WAIT,
    check_reachable,
    is_connection_error,
    pool,
    reachability,
)
from pgbus.instrumentation import emit
from pgbus.migrate import require_migration
from pgbus.processes import ProcessRecord, orphaned, orphaned_reason
from pgbus.reporting import report_error
from pgbus.scheduling import Declared, Schedule, load_tasks, parse_schedule

log = logging.getLogger("pgbus.scheduler")
MIGRATION = "0010_scheduler"


def declared_tasks() -> tuple[list[Declared], list[Declared]]:
    """(recurring, deploy) declarations, all checked: TaskDeclarationError names the bad one."""
    return load_tasks("recurring"), load_tasks("deploy")


def emit_deploy_enqueue(run: dict[str, Any]) -> None:
    emit(
        "pgbus.deploy_task.enqueue",
        task_key=run["task_key"],
        arm=run["arm"],
        version=run.get("version"),
        app_revision=run.get("app_revision"),
        class_name=run["class_name"],
        queue=run.get("queue_name"),
        msg_id=run.get("msg_id"),
        workflow_id=run.get("workflow_id"),
        manual=run.get("manual", False),
    )


class Scheduler:
    def __init__(
        self,
        recurring: list[Declared] | None = None,
        deploy: list[Declared] | None = None,
    ) -> None:
        if recurring is None or deploy is None:
            loaded = declared_tasks()
            recurring = loaded[0] if recurring is None else recurring
            deploy = loaded[1] if deploy is None else deploy
        self.recurring = recurring
        self.deploy = deploy
        self.revision = settings().revision()
        # Per task: the newest tick this scheduler saw settled (fired here or claimed elsewhere).
        self.settled: dict[str, datetime] = {}
        self._schedules: dict[tuple[str, str], Schedule] = {}
        self._deploy_declared = False  # the fleet took this revision's declarations
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def prepare(self) -> None:
        """Checks the schema, registers workflow classes, writes the recurring declarations."""
        with pool().connection() as c:
            require_migration(c, MIGRATION)
            for task in [*self.recurring, *self.deploy]:
                if task.workflow_class is not None:
                    task.workflow_class.register(c)
            sync = c.execute(
                "SELECT pgbus.recurring_sync(%s)", (Jsonb([t.row() for t in self.recurring]),)
            ).fetchone()[0]
        log.info(
            "recurring tasks: %d declared (%d added, %d changed, %d removed); deploy tasks: %d",
            len(self.recurring),
            sync["added"],
            sync["changed"],
            sync["removed"],
            len(self.deploy),
        )

    def _schedule(self, text: str, zone: str) -> Schedule:
        key = (text, zone)
        if key not in self._schedules:
            self._schedules[key] = parse_schedule(text, zone)
        return self._schedules[key]

    def tick(self) -> dict[str, list[dict[str, Any]]]:
        """Fires what is due; returns {"recurring": [...], "deploy": [...]} fired here."""
        return {"recurring": self.tick_recurring(), "deploy": self.tick_deploy()}

    def tick_recurring(self, at: datetime | None = None) -> list[dict[str, Any]]:
        """Fires the due ticks of every enabled task. `at` stands in for the database's clock
        (tests walk a schedule through a past night of a DST change with it)."""
        window = settings().recurring_catch_up_window
        fired: list[dict[str, Any]] = []
        next_runs: dict[str, str] = {}
        with pool().connection(timeout=SHORT_WAIT) as c:  # (a stop never waits long)
            rows = c.execute(
                "SELECT key, schedule, time_zone, schedule_from, clock_timestamp()"
                " FROM pgbus.recurring_tasks WHERE enabled ORDER BY key"
            ).fetchall()
            for key, text, zone, schedule_from, clock in rows:
                now = at or clock
                try:
                    schedule = self._schedule(text, zone)
                except ValueError as exc:  # a row written by another scheduler's version
                    report_error(exc, {"action": "scheduler", "task": key})
                    continue
                # Ticks from the later of the catch-up window and the schedule's start
                # (inclusive), or after the newest tick already settled here.
                since = max(now - window, schedule_from) - timedelta(microseconds=1)
                settled = self.settled.get(key)
                due = schedule.ticks(max(since, settled) if settled else since, now)
                claimed: set[datetime] = set()
                if len(due) > 1:
                    claimed = {
                        r[0]
                        for r in c.execute(
                            "SELECT pgbus.recurring_claimed(task_key => %s, since => %s,"
                            " until => %s)",
                            (key, due[0], due[-1]),
                        )
                    }
                for run_at in due:
                    if run_at in claimed:
                        self.settled[key] = run_at
                        continue
                    try:
                        result = c.execute(
                            "SELECT pgbus.recurring_fire(task_key => %s, run_at => %s)",
                            (key, run_at),
                        ).fetchone()[0]
                    except Exception as exc:
                        report_error(exc, {"action": "recurring_fire", "task": key})
                        break  # this tick and the later ones are tried again next time
                    if result["ok"]:
                        fired.append(result)
                        emit(
                            "pgbus.recurring.enqueue",
                            task_key=key,
                            run_at=run_at,
                            class_name=result["class_name"],
                            queue=result.get("queue_name"),
                            msg_id=result.get("msg_id"),
                            workflow_id=result.get("workflow_id"),
                        )
                    elif result["code"] not in ("already_fired", "before_schedule"):
                        break  # disabled, removed, or our clock ahead: look again next tick
                    self.settled[key] = run_at
                next_runs[key] = schedule.next_after(now).isoformat()
            if next_runs:
                c.execute("SELECT pgbus.recurring_note_next_runs(%s)", (Jsonb(next_runs),))
        return fired

    def tick_deploy(self) -> list[dict[str, Any]]:
        declared = None if self._deploy_declared else Jsonb([t.row() for t in self.deploy])
        with pool().connection(timeout=SHORT_WAIT) as c:  # (a stop never waits long)
            result = c.execute(
                "SELECT pgbus.deploy_tasks_fire(revision => %s, declared => %s, live_within => %s)",
                (self.revision, declared, settings().stale_process_threshold),
            ).fetchone()[0]
        if result["rolled_over"]:
            self._deploy_declared = True
        for run in result["fired"]:
            log.info(
                "deploy task %s enqueued for %s (revision %s)",
                run["task_key"],
                run["arm"],
                run.get("app_revision"),
            )
            emit_deploy_enqueue(run)
        return result["fired"]

    def run(self) -> int:
        check_reachable()  # (fails fast, with its cause, on one line)
        self.prepare()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        record = ProcessRecord(
            "scheduler",
            lambda: {
                "recurring_tasks": len(self.recurring),
                "deploy_tasks": len(self.deploy),
            },
        )
        record.start()
        log.info("scheduler started (revision %s)", self.revision or "none")
        interval = settings().scheduler_interval.total_seconds()
        try:
            while not self._stopping.is_set():
                if orphaned():
                    log.warning("scheduler: %s", orphaned_reason())
                    break
                try:
                    self.tick()
                    reachability.ok()
                except Exception as exc:
                    if is_connection_error(exc):
                        reachability.failed(exc, "scheduler")
                    else:
                        report_error(exc, {"action": "scheduler_tick"})
                self._stopping.wait(
                    min(interval, RECONNECT_DELAY) if reachability.down else interval
                )
        finally:
            record.stop()
        log.info("scheduler stopped")
        return 0
