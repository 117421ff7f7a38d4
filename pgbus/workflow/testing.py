"""Running workflows inline in tests, through the same SQL as a worker.

    from pgbus.workflow.testing import perform_next_step, run_step_inline, speedrun_workflow

    run = SignupWorkflow.start(user)
    assert speedrun_workflow(run) == "finished"

Waits are skipped: the helpers run a scheduled step now, whatever its `wait`.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from psycopg.types.json import Jsonb

from pgbus.commit_hooks import run_hooks
from pgbus.config import settings
from pgbus.db import pool
from pgbus.errors import PgbusError
from pgbus.jobs import JobTransaction, current_transaction
from pgbus.workflow.runner import StepJob
from pgbus.workflow.runs import WorkflowRun


class NothingToRun(PgbusError):
    """The run has no scheduled step to run (it is paused, waiting, finished or cancelled)."""


def _scheduled_step(run: WorkflowRun) -> tuple[str, dict[str, Any]]:
    with pool().connection() as c:
        row = c.execute(
            "SELECT w.status, s.step_id, s.step_name, s.queue, s.msg_id FROM pgbus.workflows w"
            " LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id"
            " WHERE w.workflow_id = %s",
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
            "SELECT pgbus.workflow_begin_step(%s, %s, %s, 'inline', %s, %s)",
            (
                step["queue"],
                step["msg_id"],
                Jsonb(message[0]),
                settings().revision(),
                settings().workflow_stall_action,
            ),
        ).fetchone()[0]
    if context is not None and not context.get("stalled"):
        job = StepJob()
        job.step_context = context
        job.msg_id, job.read_ct = step["msg_id"], 1
        with ExitStack() as stack:
            job.transaction = JobTransaction(stack)
            token = current_transaction.set(job.transaction)
            try:
                job.perform(str(run.workflow_id), step["step_id"])
            finally:
                current_transaction.reset(token)
        run_hooks(job.transaction.commit_hooks)
    return run.status()


def run_step_inline(run: WorkflowRun, step_name: str) -> str:
    """Runs `step_name`, which must be the run's scheduled step."""
    status, step = _scheduled_step(run)
    if status != "ready" or step["step_name"] != step_name:
        raise NothingToRun(f"the run is {status} at step {step['step_name']}, not at {step_name}")
    return perform_next_step(run)


def speedrun_workflow(run: WorkflowRun, max_steps: int = 1000) -> str:
    """Runs scheduled steps one after the other until the run is no longer ready; returns its
    status (finished, cancelled or paused)."""
    for _ in range(max_steps):
        status = run.status()
        if status != "ready":
            return status
        perform_next_step(run)
    raise NothingToRun(f"still running after {max_steps} steps")
