"""The dispatcher: periodic maintenance. Every duty is one SQL function (pg_cron can run them
instead); the dispatcher only decides when, and reports failures without stopping."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from pgbus.config import Settings, settings
from pgbus.db import (
    CONNECT_TIMEOUT,
    RECONNECT_DELAY,
    SHORT_WAIT,
    connect,
    is_connection_error,
    pool,
    reachability,
)
from pgbus.errors import SweepRepairFailed
from pgbus.instrumentation import emit
from pgbus.migrate import require_migration
from pgbus.processes import ProcessRecord, orphaned, orphaned_reason
from pgbus.reporting import report_error

log = logging.getLogger("pgbus.dispatcher")


@dataclasses.dataclass
class Duty:
    name: str
    every: float  # seconds
    statement: Callable[[Settings], tuple[str, tuple[Any, ...]]]
    # What the statement answered -> rows removed (logged); may emit instrumentation.
    report: Callable[[Any], int] = int
    due_at: float = 0.0  # monotonic; 0 = at the first tick


def workflow_sweep_report(result: dict[str, Any]) -> int:
    """The sweep's answer: each stall and wait timeout, each run it moved (its
    workflow_paused / _cancelled / _finished event) and the gauge go out as instrumentation;
    each run whose repair failed is reported as SweepRepairFailed."""
    from pgbus.workflow.runs import emit_status

    for stall in result["stalled"]:
        emit(
            "pgbus.workflow.stall_detected",
            **{k: stall.get(k) for k in ("workflow_id", "workflow_class", "step", "action")},
            detection="sweep",
        )
    for timeout in result["timed_out"]:
        emit(
            "pgbus.workflow.wait_timed_out",
            **{k: timeout.get(k) for k in ("workflow_id", "workflow_class", "step", "action")},
            status=timeout.get("status"),
        )
    for moved in result.get("moved", ()):
        emit_status(
            moved["workflow_class"],
            moved["workflow_id"],
            moved["status"],
            "pgbus",
            moved.get("error_class"),
        )
    for failed in result.get("failed", ()):
        error = failed.get("error") or {}
        what = (
            f"the {failed.get('repair')} repair of run {failed['workflow_id']}"
            f" ({failed.get('workflow_class')}, step {failed.get('step')})"
            if failed.get("workflow_id")
            else f"the {failed.get('repair')} cleanup"
        )
        report_error(
            SweepRepairFailed(
                f"workflow sweep: {what} failed: {error.get('message')} ({error.get('sqlstate')})"
            ),
            {"action": "workflow_sweep", **failed},
        )
    emit("pgbus.workflow.gauge", runs=result["runs"], stuck=result["stuck"])
    if result["stalled"] or result["resent"] or result["resolved"]:
        log.warning(
            "workflow sweep: %d stalled, %d lost steps sent again, %d fan-outs resolved"
            " without their callback",
            len(result["stalled"]),
            result["resent"],
            result["resolved"],
        )
    return result["deleted"]


def workflow_gauges_report(result: dict[str, Any]) -> int:
    """The gauges alone (pg_cron sweeps): they go out as instrumentation."""
    emit("pgbus.workflow.gauge", runs=result["runs"], stuck=result["stuck"])
    return 0


def workflow_gauges_duty() -> Duty:
    """When pg_cron runs the sweep (workflow_sweep_enabled False) the dispatcher still reports
    the gauges, read without sweeping."""
    return Duty(
        "workflow_gauges",
        settings().workflow_sweep_interval.total_seconds(),
        lambda s: (
            "SELECT pgbus.workflow_gauges(stall_threshold => %s, overdue_after => %s,"
            " waiting_threshold => %s)",
            (
                s.workflow_stall_threshold,
                s.workflow_overdue_after,
                s.workflow_waiting_visibility_threshold,
            ),
        ),
        report=workflow_gauges_report,
    )


def default_duties() -> list[Duty]:
    duties = [
        Duty(
            "prune_stale_processes",
            60,
            lambda s: ("SELECT pgbus.prune_stale_processes(%s)", (s.stale_process_threshold,)),
        ),
        Duty("cleanup_batches", 3600, lambda s: ("SELECT pgbus.cleanup_batches()", ())),
        Duty(
            "cleanup_processed_events",
            3600,
            lambda s: ("SELECT pgbus.cleanup_processed_events(%s)", (s.idempotency_ttl,)),
        ),
        Duty(
            "cleanup_job_stats",
            3600,
            lambda s: ("SELECT pgbus.cleanup_job_stats(%s)", (s.stats_retention,)),
        ),
        Duty(
            "cleanup_operator_actions",
            3600,
            lambda s: ("SELECT pgbus.cleanup_operator_actions()", ()),
        ),
        Duty(
            "cleanup_recurring_executions",
            3600,
            lambda s: (
                "SELECT pgbus.cleanup_recurring_executions(%s)",
                (s.recurring_execution_retention,),
            ),
        ),
        Duty(
            "cleanup_deploy_task_runs",
            3600,
            lambda s: ("SELECT pgbus.cleanup_deploy_task_runs(%s)", (s.deploy_task_run_retention,)),
        ),
        # The workflow insights' rollup of closed hours (idempotent; the insights read any hour
        # not rolled up yet live, so the interval only decides how much they read live).
        Duty(
            "workflow_insights_rollup",
            300,
            lambda s: ("SELECT pgbus.workflow_insights_rollup()", ()),
        ),
        Duty(
            "workflow_sweep",
            settings().workflow_sweep_interval.total_seconds(),
            lambda s: (
                "SELECT pgbus.workflow_sweep(stall_threshold => %s, stall_action => %s,"
                " retention => %s, overdue_after => %s, waiting_threshold => %s)",
                (
                    s.workflow_stall_threshold,
                    s.workflow_stall_action,
                    s.workflow_retention,
                    s.workflow_overdue_after,
                    s.workflow_waiting_visibility_threshold,
                ),
            ),
            report=workflow_sweep_report,
        ),
    ]
    if not settings().workflow_sweep_enabled:  # pg_cron (or another scheduler) sweeps
        duties = [d for d in duties if d.name != "workflow_sweep"] + [workflow_gauges_duty()]
    return duties


class Dispatcher:
    def __init__(self, duties: list[Duty] | None = None) -> None:
        self.duties = duties if duties is not None else default_duties()
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def tick(self) -> dict[str, int]:
        """Runs the duties that are due; returns {duty: rows removed}. A failing duty is
        reported and tried again at the next tick."""
        done: dict[str, int] = {}
        now = time.monotonic()
        for duty in self.duties:
            if duty.due_at > now:
                continue
            if self._stopping.is_set():
                break
            query, params = duty.statement(settings())
            try:
                with pool().connection(timeout=SHORT_WAIT) as c:
                    answer = c.execute(query, params).fetchone()[0]
            except psycopg.Error as exc:
                if is_connection_error(exc):
                    reachability.failed(exc, "dispatcher")
                    break  # (the other duties would only wait for the database too)
                report_error(exc, {"action": "dispatcher_maintenance", "task": duty.name})
                continue
            except Exception as exc:
                report_error(exc, {"action": "dispatcher_maintenance", "task": duty.name})
                continue
            reachability.ok()
            try:
                done[duty.name] = duty.report(answer)
            except Exception as exc:
                report_error(exc, {"action": "dispatcher_maintenance", "task": duty.name})
                done[duty.name] = 0
            duty.due_at = now + duty.every
            if done[duty.name]:
                log.info("%s: %d removed", duty.name, done[duty.name])
        return done

    def run(self) -> int:
        with connect(timeout=CONNECT_TIMEOUT) as c:  # (fails fast, with its cause, on one line)
            require_migration(c, "0002_jobs")
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        record = ProcessRecord("dispatcher", lambda: {"duties": [d.name for d in self.duties]})
        record.start()
        log.info("dispatcher started: %s", ", ".join(d.name for d in self.duties))
        interval = settings().dispatch_interval.total_seconds()
        try:
            while not self._stopping.is_set():
                if orphaned():
                    log.warning("dispatcher: %s", orphaned_reason())
                    break
                self.tick()
                self._stopping.wait(
                    min(interval, RECONNECT_DELAY) if reachability.down else interval
                )
        finally:
            record.stop()
        log.info("dispatcher stopped")
        return 0
