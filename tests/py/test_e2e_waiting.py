"""Waiting steps end to end: real worker and dispatcher processes against a real PostgreSQL.
A fan-out of twenty jobs with a poison one, a signal gate, a wait timeout with a pause in the
middle, a lost batch callback and a deleted batch, both repaired by the dispatcher's sweep."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from pgbus import batches
from pgbus.workflow import WorkflowRefused
from tests.py.sample_workflows import BriefGate, Order
from tests.py.support import FAST, count_effects, pgbus_process, wait_until, worker_process

pytestmark = pytest.mark.slow

# Poison's retries come back at once; the dispatcher ticks every 0.1 s and sweeps every 0.2 s.
QUICK_RETRIES = {
    "PGBUS_RETRY_BACKOFF_BASE": "0.05",
    "PGBUS_RETRY_BACKOFF_MAX": "0.1",
    "PGBUS_RETRY_BACKOFF_JITTER": "0",
}
QUICK_SWEEP = {"PGBUS_DISPATCH_INTERVAL": "0.1", "PGBUS_WORKFLOW_SWEEP_INTERVAL": "0.2"}
CALLBACK_CLASS = "pgbus.workflow:BatchFinishedJob"


def dispatcher_process(db_url: str):
    return pgbus_process(
        "dispatcher",
        "--import",
        "tests.py.sample_jobs",
        "--import",
        "tests.py.sample_workflows",
        env={"PGBUS_DATABASE_URL": db_url, **FAST, **QUICK_SWEEP},
    )


def current(run) -> dict:
    row = run.row()
    return next(s for s in run.steps() if s["step_id"] == row["current_step_id"])


def waiting_at(run, step_name: str) -> bool:
    return run.status() == "waiting" and current(run)["step_name"] == step_name


def events_named(run, name: str) -> list:
    return [e for e in run.events() if e.event == name]


def effects_of(conn: psycopg.Connection, kind: str) -> list[str]:
    return [
        r[0] for r in conn.execute("SELECT key FROM effects WHERE kind = %s ORDER BY id", (kind,))
    ]


def db_now(conn: psycopg.Connection):
    return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def test_a_fan_out_of_twenty_with_a_poison_job_pauses_and_resume_opens_a_fresh_batch(
    db_url, users, procs
):
    run = Order.start(vendors=20, poison=[7])
    poison_key = f"{run.workflow_id}:7"
    procs.append(worker_process(db_url, "--threads", "4", env=QUICK_RETRIES))
    wait_until(
        lambda: run.status() == "paused",
        timeout=25,
        what="the poison job dead-lettered and on_batch_failure paused the run",
    )
    [first] = run.steps()
    assert (first["step_name"], first["status"], first["outcome"]) == (
        "notify_vendors",
        "failed",
        "pause",
    )
    assert first["error_class"] == "pgbus.workflow.FanOutFailed"
    assert first["error"]["message"] == "1 of 20 jobs dead-lettered"
    assert run.row()["pause_cause"] == "error"
    batch = batches.find(first["batch_id"])
    assert (batch["status"], batch["total_jobs"], batch["completed_jobs"]) == ("finished", 20, 19)
    assert batch["discarded_jobs"] == 1
    assert batch["description"] == f"{Order.workflow_name}#notify_vendors {run.workflow_id}"
    assert count_effects(users, "done") == 19
    assert count_effects(users, "attempt", poison_key) == 3  # the first run and two retries
    dead = users.execute("SELECT message -> 'args' FROM pgmq.q_pgbus_default_dlq").fetchall()
    assert dead == [([poison_key],)]
    [finished] = events_named(run, "fan_out_finished")
    assert (finished.details["jobs"], finished.details["dead_lettered"]) == (20, 1)
    paused = events_named(run, "paused")[-1]
    assert paused.details["error_class"] == "pgbus.workflow.FanOutFailed"

    # resume re-runs the whole body on a fresh batch (the poison is still poison).
    assert run.resume(actor="ops") == "ready"
    wait_until(
        lambda: len(run.steps()) == 2 and run.status() == "paused",
        timeout=25,
        what="the second fan-out ran and failed again",
    )
    second = run.steps()[1]
    assert second["attempt"] == 2 and second["batch_id"] not in (None, first["batch_id"])
    assert second["error"]["message"] == "1 of 20 jobs dead-lettered"
    assert batches.find(second["batch_id"])["total_jobs"] == 20
    assert effects_of(users, "fan_out_body") == [str(run.workflow_id)] * 2
    assert count_effects(users, "done") == 38
    assert len(events_named(run, "fan_out_opened")) == 2


def test_a_fan_out_of_twenty_then_a_signal_gate_finishes(db_url, users, procs):
    run = Order.start(vendors=20)
    procs.append(worker_process(db_url, "--threads", "4"))
    wait_until(
        lambda: waiting_at(run, "capture"),
        timeout=25,
        what="the fan-out resolved and the run waits at the payment gate",
    )
    fan_out = run.steps()[0]
    assert (fan_out["status"], fan_out["outcome"]) == ("completed", "resolve")
    assert count_effects(users, "done") == 20
    assert batches.find(fan_out["batch_id"])["completed_jobs"] == 20
    assert effects_of(users, "capture") == []

    delivery = run.signal(
        "payment_confirmed", {"amount": 120}, idempotency_key="pay_1", actor="psp"
    )
    assert delivery.woke and not delivery.duplicate_delivery
    wait_until(lambda: run.status() == "finished", timeout=20, what="the run finished")
    assert effects_of(users, "capture") == ["120"]
    assert count_effects(users, "shipped", str(run.workflow_id)) == 1
    [signal] = run.signals()
    assert (signal["status"], signal["step_name"]) == ("consumed", "capture")
    with pytest.raises(WorkflowRefused) as refused:  # a redelivery once the run ended
        run.signal("payment_confirmed", {"amount": 120}, idempotency_key="pay_1")
    assert refused.value.code == "not_allowed"
    # The gate's attempt parked, was woken and ran again: one attempt.
    assert [s["step_name"] for s in run.steps()] == ["notify_vendors", "capture", "ship"]


def test_time_spent_paused_does_not_count_against_the_wait(db_url, users, procs):
    """wait_timeout 3 s: parked, paused after 1 s for 3.5 s (longer than the whole timeout),
    resumed: still waiting, with the wait left at the pause as its new deadline from the
    resume; it times out only after that. (Every check brackets a moment between two reads of
    the database's clock, so none depends on how fast the machine is.)"""
    procs += [worker_process(db_url), dispatcher_process(db_url)]
    run = BriefGate.start()
    wait_until(lambda: waiting_at(run, "approve"), timeout=20, what="parked at the gate")
    parked = current(run)
    # The deadline is 3 s from a moment of the park, after the attempt started.
    parked_at = parked["wait_deadline"] - timedelta(seconds=3)
    assert parked["started_at"] <= parked_at <= parked["waiting_since"]
    wait_until(
        lambda: db_now(users) >= parked["waiting_since"] + timedelta(seconds=1),
        what="one second into the wait",
    )
    before_pause = db_now(users)
    assert run.pause(actor="ops") == "paused"
    after_pause = db_now(users)
    paused_at = events_named(run, "paused")[-1].created_at
    left = current(run)["wait_remaining"]  # the clock stopped: what was left at the pause
    assert parked["wait_deadline"] - after_pause <= left <= parked["wait_deadline"] - before_pause
    wait_until(
        lambda: db_now(users) >= paused_at + timedelta(seconds=3.5),
        timeout=10,
        what="3.5 s paused",
    )
    assert run.status() == "paused"  # the sweep leaves a paused run be
    assert events_named(run, "wait_timed_out") == []
    before_resume = db_now(users)
    assert run.resume(actor="ops") == "waiting"
    after_resume = db_now(users)
    step = current(run)
    assert run.status() == "waiting" and step["status"] == "waiting"
    assert before_resume <= step["wait_deadline"] - left <= after_resume
    assert step["wait_remaining"] is None

    wait_until(lambda: run.status() == "paused", timeout=15, what="the wait timed out")
    [timed_out] = events_named(run, "wait_timed_out")
    assert timed_out.actor == "pgbus" and timed_out.details["action"] == "pause"
    assert timed_out.created_at >= step["wait_deadline"]  # not a moment before the new deadline
    step = current(run)
    assert (step["status"], step["error_class"]) == ("failed", "pgbus.workflow.WaitTimedOut")
    assert run.row()["pause_cause"] == "error"
    assert effects_of(users, "approved") == []


def test_a_lost_batch_callback_is_repaired_by_the_sweep(db_url, users, procs):
    run = Order.start(vendors=3)
    steps_only = worker_process(db_url, "--queues", "workflows")
    procs.append(steps_only)
    wait_until(lambda: waiting_at(run, "notify_vendors"), timeout=20, what="waiting on the batch")
    steps_only.stop()
    batch_id = current(run)["batch_id"]
    procs.append(worker_process(db_url, "--queues", "default"))  # the members only
    wait_until(
        lambda: batches.find(batch_id)["status"] == "finished", timeout=20, what="batch finished"
    )
    assert count_effects(users, "done") == 3

    # The callback waits in the workflows queue, which nobody reads: it is lost.
    lost = users.execute(
        "DELETE FROM pgmq.q_pgbus_workflows WHERE message ->> 'job_class' = %s RETURNING message",
        (CALLBACK_CLASS,),
    ).fetchall()
    assert len(lost) == 1 and lost[0][0]["args"][0]["step_id"] == current(run)["step_id"]
    assert waiting_at(run, "notify_vendors")
    # The sweep repairs a batch finished more than resend_after (1 minute: the dispatcher
    # leaves it at its default) ago without its callback: date the finish back.
    users.execute(
        "UPDATE pgbus.batches SET finished_at = finished_at - interval '2 minutes'"
        " WHERE batch_id = %s",
        (batch_id,),
    )
    procs += [dispatcher_process(db_url), worker_process(db_url)]
    wait_until(
        lambda: waiting_at(run, "capture"),
        timeout=20,
        what="the sweep resolved the fan-out and the run reached the gate",
    )
    fan_out = run.steps()[0]
    assert (fan_out["status"], fan_out["outcome"]) == ("completed", "resolve")
    [repaired] = events_named(run, "fan_out_repaired")
    assert (repaired.actor, repaired.reason) == ("pgbus", "its batch callback was lost")
    assert events_named(run, "fan_out_finished")[0].actor == "pgbus"
    run.signal("payment_confirmed", {"amount": 8})
    wait_until(lambda: run.status() == "finished", timeout=20, what="the run finished")
    assert effects_of(users, "capture") == ["8"]


def test_a_deleted_batch_pauses_the_run_through_the_sweep(db_url, users, procs):
    run = Order.start(vendors=3)
    procs.append(worker_process(db_url, "--queues", "workflows"))  # the members never run
    wait_until(lambda: waiting_at(run, "notify_vendors"), timeout=20, what="waiting on the batch")
    batch_id = current(run)["batch_id"]
    assert users.execute("DELETE FROM pgbus.batches WHERE batch_id = %s", (batch_id,)).rowcount == 1
    procs.append(dispatcher_process(db_url))
    wait_until(lambda: run.status() == "paused", timeout=20, what="the sweep paused the run")
    [step] = run.steps()
    assert (step["status"], step["error_class"]) == ("failed", "pgbus.workflow.FanOutBatchGone")
    assert step["error"]["message"] == "the batch of notify_vendors is gone: its outcome is unknown"
    assert run.row()["pause_cause"] == "error"
    paused = events_named(run, "paused")[-1]
    assert (paused.actor, paused.reason) == ("pgbus", "fan-out batch gone")
    assert paused.details["error_class"] == "pgbus.workflow.FanOutBatchGone"
    assert count_effects(users, "done") == 0
