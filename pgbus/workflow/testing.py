"""Running workflows inline in tests, through the same SQL as a worker.

    from pgbus.workflow.testing import perform_next_step, run_step_inline, speedrun_workflow

    run = SignupWorkflow.start(user)
    assert speedrun_workflow(run) == "finished"

Waits are skipped: the helpers run a scheduled step now, whatever its `wait`. A waiting step
(a signal gate, a fan-out) stops speedrun_workflow with StepWaiting; deliver_signal,
complete_fan_out and expire_wait move it on, through the same SQL as production.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from pgbus.commit_hooks import run_hooks
from pgbus.config import settings
from pgbus.db import pool
from pgbus.errors import PgbusError
from pgbus.jobs import Job, JobTransaction, current_transaction
from pgbus.workflow.runner import BatchFinishedJob, StepJob, concluded_at_begin
from pgbus.workflow.runs import WorkflowRun, emit_status


class NothingToRun(PgbusError):
    """The run has no scheduled step to run (it is paused, waiting, finished or cancelled)."""


class StepWaiting(PgbusError):
    """speedrun_workflow reached a waiting step; the message names what it waits for."""


def _scheduled_step(run: WorkflowRun) -> tuple[str, dict[str, Any]]:
    with pool().connection() as c:
        row = c.execute(
            "SELECT r.status, a.step_id, a.step_name, a.queue, a.msg_id"
            " FROM pgbus.workflow_runs_overview r"
            " LEFT JOIN pgbus.workflow_attempts a ON a.step_id = r.current_step_id"
            " WHERE r.workflow_id = %s",
            (run.workflow_id,),
        ).fetchone()
    if row is None:
        raise NothingToRun(f"no run {run.workflow_id}")
    status, step_id, step_name, queue, msg_id = row
    return status, {"step_id": step_id, "step_name": step_name, "queue": queue, "msg_id": msg_id}


def perform_next_step(run: WorkflowRun) -> str:
    """Runs the run's scheduled step now and returns the run's status afterwards."""
    status, step = _scheduled_step(run)
    if status != "ready":
        raise NothingToRun(f"the run is {status}: there is no scheduled step to run")
    with pool().connection() as c:
        c.execute(
            "UPDATE pgbus.workflow_steps SET scheduled_at = least(scheduled_at, now())"
            " WHERE step_id = %s",
            (step["step_id"],),
        )
        message = c.execute(
            f"SELECT message FROM pgmq.q_{step['queue']} WHERE msg_id = %s", (step["msg_id"],)
        ).fetchone()
        if message is None:
            raise NothingToRun(f"the message of step {step['step_name']} is gone")
        context = c.execute(
            "SELECT pgbus.workflow_begin_step(queue => %(queue)s, msg_id => %(msg_id)s,"
            " message => %(message)s, worker => 'inline', app_revision => %(revision)s,"
            " stall_action => %(stall_action)s)",
            {
                "queue": step["queue"],
                "msg_id": step["msg_id"],
                "message": Jsonb(message[0]),
                "revision": settings().revision(),
                "stall_action": settings().workflow_stall_action,
            },
        ).fetchone()[0]
    if context is not None and context.get("concluded"):
        concluded_at_begin(context)
    elif context is not None and not context.get("stalled"):
        job = StepJob()
        job.read_context = context
        job.msg_id, job.read_ct = step["msg_id"], 1
        _perform_inline(job, str(run.workflow_id), step["step_id"])
    return run.status()


def _perform_inline(job: Job, *args: Any) -> None:
    """Performs `job` in a transaction of its own, as a worker would, then its commit hooks."""
    with ExitStack() as stack:
        job.transaction = JobTransaction(stack)
        token = current_transaction.set(job.transaction)
        try:
            job.perform(*args)
        finally:
            current_transaction.reset(token)
    run_hooks(job.transaction.commit_hooks)


def run_step_inline(run: WorkflowRun, step_name: str) -> str:
    """Runs `step_name`, which must be the run's scheduled step."""
    status, step = _scheduled_step(run)
    if status != "ready" or step["step_name"] != step_name:
        raise NothingToRun(f"the run is {status} at step {step['step_name']}, not at {step_name}")
    return perform_next_step(run)


def speedrun_workflow(run: WorkflowRun, max_steps: int = 1000) -> str:
    """Runs scheduled steps one after the other until the run is no longer ready; returns its
    status (finished, cancelled or paused). Raises StepWaiting at a waiting step."""
    for _ in range(max_steps):
        status = run.status()
        if status == "waiting":
            raise StepWaiting(_waiting_for(run))
        if status != "ready":
            return status
        perform_next_step(run)
    raise NothingToRun(f"still running after {max_steps} steps")


def _waiting_step(run: WorkflowRun) -> dict[str, Any] | None:
    with pool().connection() as c:
        return (
            c.cursor(row_factory=dict_row)
            .execute(
                "SELECT a.step_id, a.step_name, a.wait_for, a.batch_id, b.description,"
                " b.total_jobs, b.completed_jobs + b.discarded_jobs AS done"
                " FROM pgbus.workflow_runs_overview r"
                " JOIN pgbus.workflow_attempts a ON a.step_id = r.current_step_id"
                " LEFT JOIN pgbus.batch_overview b ON b.batch_id = a.batch_id"
                " WHERE r.workflow_id = %s AND r.status = 'waiting' AND a.status = 'waiting'",
                (run.workflow_id,),
            )
            .fetchone()
        )


def _waiting_for(run: WorkflowRun) -> str:
    step = _waiting_step(run)
    if step is None:
        return f"run {run.workflow_id} is not waiting"
    if step["batch_id"] is not None:
        return (
            f"step {step['step_name']} waits for batch {step['description']}"
            f" ({step['done']} of {step['total_jobs']} jobs done)"
        )
    signal = "any signal" if step["wait_for"] == "*" else f"signal {step['wait_for']!r}"
    return f"step {step['step_name']} waits for {signal}"


def deliver_signal(
    run: WorkflowRun, name: str, payload: dict[str, Any] | None = None, **options: Any
) -> str:
    """Delivers a signal (as run.signal does; `options` are its keywords) and returns the
    run's status: 'ready' when it woke the waiting step, which the next perform_next_step or
    speedrun_workflow runs."""
    run.signal(name, payload, **options)
    return run.status()


def complete_fan_out(run: WorkflowRun, dead_lettered: int = 0) -> str:
    """Counts the waiting fan-out's remaining members as done (`dead_lettered` of them as
    dead-lettered), as if they ran, and delivers the batch's callback; returns the run's
    status. The members' own messages stay in their queues."""
    step = _waiting_step(run)
    if step is None or step["batch_id"] is None:
        raise NothingToRun(f"run {run.workflow_id} is not waiting on a fan-out batch")
    remaining = step["total_jobs"] - step["done"]
    if not 0 <= dead_lettered <= remaining:
        raise ValueError(f"dead_lettered is between 0 and the {remaining} members left")
    with pool().connection() as c:
        for outcome, n in (("completed", remaining - dead_lettered), ("discarded", dead_lettered)):
            if n:
                c.execute(
                    "SELECT pgbus.batch_member_done(batch => %s, outcome => %s, n => %s)",
                    (step["batch_id"], outcome, n),
                )
    _perform_inline(
        BatchFinishedJob(), {"workflow_id": str(run.workflow_id), "step_id": step["step_id"]}
    )
    return run.status()


def expire_wait(run: WorkflowRun) -> str:
    """Ends the waiting step's wait now, as its wait_timeout would, and returns the run's
    status ('ready' for on_timeout "run": the step runs next with timed_out true)."""
    with pool().connection() as c:
        result = c.execute("SELECT pgbus.workflow_expire_wait(%s)", (run.workflow_id,)).fetchone()[
            0
        ]
    if not result["ok"]:
        raise NothingToRun(f"run {run.workflow_id} is not waiting ({result.get('status')})")
    # (Committed: the pooled connection is in autocommit.) A timeout that paused, cancelled or
    # finished the run emits its event, as the sweep's does.
    emit_status(
        run.workflow_class,
        run.workflow_id,
        result["status"],
        "pgbus",
        "pgbus.workflow.WaitTimedOut" if result["status"] == "paused" else None,
    )
    return result["status"]
