"""Waiting steps through the Python API and the test helpers: signal gates, fan-outs, wait
timeouts, against the real database (steps run inline through the same SQL as a worker)."""

from __future__ import annotations

import psycopg
import pytest

import pgbus
from pgbus.instrumentation import subscribe
from pgbus.workflow import NoOngoingRun, WorkflowRefused
from pgbus.workflow.testing import (
    NothingToRun,
    StepWaiting,
    complete_fan_out,
    deliver_signal,
    expire_wait,
    perform_next_step,
    speedrun_workflow,
)
from tests.py.sample_workflows import EmptyFanOut, Gate, Gates, Order, User


@pytest.fixture
def events():
    seen: list[tuple[str, dict]] = []
    sub = subscribe("pgbus.workflow*", lambda name, payload: seen.append((name, payload)))
    yield seen
    sub.unsubscribe()


def effects_of(conn: psycopg.Connection, kind: str) -> list[str]:
    return [
        r[0] for r in conn.execute("SELECT key FROM effects WHERE kind = %s ORDER BY id", (kind,))
    ]


def attempts(run) -> list[tuple[str, str, str | None]]:
    return [(s["step_name"], s["status"], s["outcome"]) for s in run.steps()]


def event_names(run) -> list[str]:
    return [e.event for e in run.events()]


def test_a_signal_gate_parks_until_its_signal_and_the_body_reads_the_payload(users):
    run = Order.start(User(1), vendors=0)
    assert perform_next_step(run) == "ready"  # empty fan-out: resolved at once
    assert perform_next_step(run) == "waiting"
    with pytest.raises(StepWaiting, match="step capture waits for signal 'payment_confirmed'"):
        speedrun_workflow(run)
    assert (
        deliver_signal(run, "payment_confirmed", {"amount": 42}, idempotency_key="evt_1") == "ready"
    )
    assert speedrun_workflow(run) == "finished"
    assert effects_of(users, "capture") == ["42"]
    [signal] = run.signals()
    assert (signal["status"], signal["step_name"], signal["idempotency_key"]) == (
        "consumed",
        "capture",
        "evt_1",
    )
    names = event_names(run)
    assert names.index("step_waiting") < names.index("signal_received") < names.index("step_woken")
    assert names.index("signal_claimed") < names.index("finished")


def test_an_early_signal_is_buffered_and_taken_without_waiting(users):
    run = Order.start(User(1), vendors=0)
    delivery = run.signal("payment_confirmed", {"amount": 7}, actor="stripe", reason="webhook")
    assert (delivery.duplicate_delivery, delivery.woke, delivery.status) == (False, False, "ready")
    assert speedrun_workflow(run) == "finished"
    assert effects_of(users, "capture") == ["7"]
    received = next(e for e in run.events() if e.event == "signal_received")
    assert (received.actor, received.reason) == ("stripe", "webhook")


def test_a_key_seen_before_stores_nothing_and_a_blank_key_is_no_key(users):
    run = Order.start(User(1), vendors=0)
    first = run.signal("payment_confirmed", {"amount": 1}, idempotency_key="k")
    again = run.signal("payment_confirmed", {"amount": 2}, idempotency_key="k")
    assert (again.duplicate_delivery, again.signal_id) == (True, first.signal_id)
    keys = ("", "  ", "\t", "\n\r ", " \t\n")
    blank = [run.signal("payment_confirmed", {"amount": 3}, idempotency_key=k) for k in keys]
    assert [d.duplicate_delivery for d in blank] == [False] * len(keys)
    assert [s["idempotency_key"] for s in run.signals()] == ["k", *[None] * len(keys)]


@pytest.mark.parametrize("payload", [[], [("amount", 1)], "amount", 42, ("a", 1)])
def test_a_signal_payload_that_is_not_a_mapping_is_refused_and_stores_nothing(users, payload):
    from pgbus.workflow import InvalidSignalPayload

    run = Order.start(User(1), vendors=0)
    with pytest.raises(InvalidSignalPayload, match="a signal's payload is a mapping"):
        run.signal("payment_confirmed", payload)
    with pytest.raises(InvalidSignalPayload):
        Order.signal(User(1), "payment_confirmed", payload)
    assert run.signals() == []
    assert run.signal("payment_confirmed", None).duplicate_delivery is False


def test_signal_by_subject_and_missing(users):
    run = Order.start(User(2), vendors=0)
    delivery = Order.signal(User(2), "payment_confirmed", {"amount": 5})
    assert delivery is not None and delivery.signal_id == run.signals()[0]["signal_id"]
    with pytest.raises(NoOngoingRun, match="no ongoing run"):
        Order.signal(User(3), "payment_confirmed", {"amount": 5})
    assert Order.signal(User(3), "payment_confirmed", missing="ignore") is None
    with pytest.raises(ValueError, match="missing is"):
        Order.signal(User(2), "payment_confirmed", missing="maybe")


def test_a_signal_to_an_ended_run_is_refused_and_stores_nothing(users):
    run = Order.start(User(1), vendors=0)
    run.cancel()
    with pytest.raises(WorkflowRefused) as refused:
        run.signal("payment_confirmed", {"amount": 1}, idempotency_key="late")
    assert (refused.value.code, refused.value.status) == ("not_allowed", "cancelled")
    assert run.signals() == []


@pytest.mark.parametrize(
    ("name", "payload", "key"),
    [("", {}, None), ("x" * 256, {}, None), ("ok", {}, "k" * 256)],
)
def test_a_bad_signal_is_refused_by_name(users, name, payload, key):
    run = Order.start(User(1), vendors=0)
    with pytest.raises(WorkflowRefused) as refused:
        run.signal(name, payload, idempotency_key=key)
    assert refused.value.code == "invalid"
    assert run.signals() == []


def test_a_signal_payload_over_the_limit_is_refused(users):
    pgbus.configure(workflow_max_payload_size=256)
    run = Order.start(User(1), vendors=0)
    with pytest.raises(pgbus.workflow.PayloadTooLarge, match="signal's payload"):
        run.signal("payment_confirmed", {"blob": "x" * 300})
    assert run.signals() == []


def test_a_matcher_takes_only_what_it_matches_and_rewaits_otherwise(users):
    run = Gate.start(User(1))
    assert perform_next_step(run) == "waiting"
    assert deliver_signal(run, "shipped", {"complete": False}) == "ready"
    assert perform_next_step(run) == "waiting"  # woken, found nothing it takes: waits again
    assert [s["status"] for s in run.signals()] == ["pending"]
    assert deliver_signal(run, "other", {"complete": True}) == "waiting"  # another name
    assert deliver_signal(run, "shipped", {"complete": True}) == "ready"
    assert speedrun_workflow(run) == "finished"
    assert [s["status"] for s in run.signals()] == ["pending", "pending", "consumed"]
    assert "rewait" in [s["outcome"] for s in run.steps()] or "rewait" in [
        e.details.get("verb") for e in run.events() if e.event == "step_waiting"
    ]


def test_a_nameless_matcher_is_woken_by_any_signal(users):
    run = Gates.start(User(1))
    assert perform_next_step(run) == "waiting"
    assert deliver_signal(run, "ping", {"ok": False}) == "ready"
    assert perform_next_step(run) == "waiting"
    assert deliver_signal(run, "pong", {"ok": True}) == "ready"
    assert perform_next_step(run) == "ready"  # took it; the approval gate is next
    assert perform_next_step(run) == "waiting"
    assert effects_of(users, "anything") == ["pong"]


def test_a_claimed_signal_survives_a_failure_that_pauses(users):
    run = Gate.start(User(1), fail_once=True)
    run.signal("shipped", {"complete": True})
    assert perform_next_step(run) == "paused"
    [signal] = run.signals()
    assert signal["status"] == "claimed"
    assert run.resume() == "ready"
    assert speedrun_workflow(run) == "finished"
    assert [s["status"] for s in run.signals()] == ["consumed"]
    assert effects_of(users, "shipped") == ["{'complete': True}"] * 2


def test_wait_timeout_run_runs_the_body_with_timed_out(users):
    run = Gate.start(User(1))
    assert perform_next_step(run) == "waiting"
    assert expire_wait(run) == "ready"
    assert speedrun_workflow(run) == "finished"
    assert effects_of(users, "shipped") == ["timed_out"]
    assert "wait_timed_out" in event_names(run)


def test_wait_timeout_pause_records_wait_timed_out_and_a_late_signal_stays_pending(users):
    run = Order.start(User(1), vendors=0)
    perform_next_step(run)
    assert perform_next_step(run) == "waiting"
    assert expire_wait(run) == "paused"
    capture = run.steps()[-1]
    assert (capture["status"], capture["error_class"]) == ("failed", "pgbus.workflow.WaitTimedOut")
    assert run.row()["pause_cause"] == "error"
    run.signal("payment_confirmed", {"amount": 3})
    assert run.status() == "paused"
    assert [s["status"] for s in run.signals()] == ["pending"]
    assert run.resume() == "ready"  # the step runs again and takes it
    assert speedrun_workflow(run) == "finished"


def test_wait_timeout_skip_and_outside_skip(users):
    run = Gates.start(User(1))
    perform_next_step(run)
    deliver_signal(run, "x", {"ok": True})
    assert perform_next_step(run) == "ready"
    assert perform_next_step(run) == "waiting"
    assert expire_wait(run) == "ready"  # on_timeout skip: the next step
    assert speedrun_workflow(run) == "finished"
    assert ("approval", "skipped", "skip") in attempts(run)

    other = Gates.start(User(2))
    assert perform_next_step(other) == "waiting"
    assert other.skip(actor="alice", reason="not needed") == "ready"
    skipped = next(e for e in other.events() if e.event == "step_skipped")
    assert (skipped.actor, skipped.reason) == ("alice", "not needed")
    with pytest.raises(WorkflowRefused):
        other.skip()  # ready now: nothing waits


def test_paused_while_waiting_takes_the_signal_and_resume_wakes_it(users):
    run = Order.start(User(1), vendors=0)
    perform_next_step(run)
    perform_next_step(run)
    run.pause(actor="ops")
    delivery = run.signal("payment_confirmed", {"amount": 9})
    assert (delivery.woke, run.status()) == (False, "paused")
    assert run.resume() == "ready"  # waiting again, and the signal is there: woken
    assert speedrun_workflow(run) == "finished"


def test_resume_of_a_run_paused_while_waiting_waits_again(users):
    run = Order.start(User(1), vendors=0)
    perform_next_step(run)
    perform_next_step(run)
    run.pause()
    assert run.available_actions() == ["resume", "resume_at", "signal", "cancel"]
    assert run.resume() == "waiting"
    assert run.available_actions() == ["skip", "signal", "pause", "cancel"]


def test_fan_out_opens_one_batch_and_resolves_when_every_member_finished(users):
    run = Order.start(User(1), vendors=3)
    assert perform_next_step(run) == "waiting"
    with pytest.raises(
        StepWaiting, match=r"waits for batch .*Order#notify_vendors .* \(0 of 3 jobs done\)"
    ):
        speedrun_workflow(run)
    step = run.steps()[0]
    batch = pgbus.batches.find(step["batch_id"])
    assert batch["description"] == f"{Order.workflow_name}#notify_vendors {run.workflow_id}"
    assert (
        batch["total_jobs"] == 3
        and batch["on_complete"]["job_class"] == "pgbus.workflow:BatchFinishedJob"
    )
    assert complete_fan_out(run) == "ready"
    assert attempts(run)[0] == ("notify_vendors", "completed", "resolve")
    assert "fan_out_opened" in event_names(run) and "fan_out_finished" in event_names(run)


def test_fan_out_with_a_dead_lettered_member_applies_on_batch_failure(users):
    run = Order.start(User(1), vendors=3)
    perform_next_step(run)
    assert complete_fan_out(run, dead_lettered=1) == "paused"
    step = run.steps()[0]
    assert (step["status"], step["error_class"]) == ("failed", "pgbus.workflow.FanOutFailed")
    assert step["error"]["message"] == "1 of 3 jobs dead-lettered"
    assert run.resume() == "ready"  # the whole body again, on a fresh batch
    assert perform_next_step(run) == "waiting"
    first, second = run.steps()
    assert first["batch_id"] != second["batch_id"] and second["attempt"] == 2
    assert effects_of(users, "fan_out_body") == [str(run.workflow_id)] * 2


def test_an_empty_fan_out_resolves_at_once_and_a_verb_or_error_opens_no_batch(users):
    run = EmptyFanOut.start(User(1))
    assert perform_next_step(run) == "ready"
    assert speedrun_workflow(run) == "finished"

    skipped = EmptyFanOut.start(User(2), verb="skip")
    assert perform_next_step(skipped) == "ready"
    assert skipped.steps()[0]["batch_id"] is None

    failed = EmptyFanOut.start(User(3), **{"raise": True})
    assert perform_next_step(failed) == "paused"
    assert failed.steps()[0]["batch_id"] is None
    assert failed.steps()[0]["error_class"] == "ValueError"


def test_cancel_while_the_batch_runs_makes_its_callback_stale(users):
    run = Order.start(User(1), vendors=2)
    perform_next_step(run)
    assert run.cancel() == "cancelled"
    assert attempts(run)[0] == ("notify_vendors", "cancelled", "cancel")
    with pytest.raises(NothingToRun):
        complete_fan_out(run)


def test_a_workflow_with_waiting_steps_needs_the_migration(users, conn):
    conn.execute("DELETE FROM pgbus._yoyo_migration WHERE migration_id = '0005_waiting_steps'")
    from pgbus.workflow.base import _registered

    _registered.clear()
    with pytest.raises(pgbus.workflow.WaitingStepsUnmigrated, match="0005_waiting_steps"):
        Order.start(User(1))


def test_instrumentation_of_signals_and_wait_timeouts(users, events):
    run = Order.start(User(1), vendors=0)
    perform_next_step(run)
    perform_next_step(run)
    with psycopg.connect(pgbus.settings().dsn()) as c:  # in the caller's transaction
        run.signal("payment_confirmed", {"amount": 1}, conn=c, actor="app")
        assert not [n for n, _ in events if n == "pgbus.workflow.signal"]
        c.rollback()
    assert not [n for n, _ in events if n == "pgbus.workflow.signal"] and run.signals() == []
    run.signal("payment_confirmed", {"amount": 1}, actor="app")
    [(_, signal)] = [(n, p) for n, p in events if n == "pgbus.workflow.signal"]
    assert signal["name"] == "payment_confirmed" and signal["woke"] and signal["actor"] == "app"

    gate = Gate.start(User(2))
    perform_next_step(gate)
    with psycopg.connect(pgbus.settings().dsn(), autocommit=True) as c:
        c.execute(
            "UPDATE pgbus.workflow_steps SET wait_deadline = now() - interval '1 second'"
            " WHERE workflow_id = %s",
            (gate.workflow_id,),
        )
    from pgbus.dispatcher import default_duties

    sweep = next(d for d in default_duties() if d.name == "workflow_sweep")
    sql, args = sweep.statement(pgbus.settings())
    with psycopg.connect(pgbus.settings().dsn(), autocommit=True) as c:
        sweep.report(c.execute(sql, args).fetchone()[0])
    [timed_out] = [p for n, p in events if n == "pgbus.workflow.wait_timed_out"]
    assert (timed_out["step"], timed_out["action"], timed_out["status"]) == (
        "shipped",
        "run",
        "ready",
    )
    assert gate.status() == "ready"


def test_the_woken_step_goes_out_only_when_the_signals_transaction_commits(users, conn):
    run = Order.start(User(1), vendors=0)
    perform_next_step(run)
    assert perform_next_step(run) == "waiting"
    queue = run.steps()[-1]["queue"]

    def visible() -> int:
        return conn.execute(
            f"SELECT count(*) FROM pgmq.q_{queue} WHERE vt <= now()"
            " AND message ->> 'job_class' = 'pgbus.workflow:StepJob'"
        ).fetchone()[0]

    with psycopg.connect(pgbus.settings().dsn()) as c:
        assert run.signal("payment_confirmed", {"amount": 1}, conn=c).woke
        assert (visible(), run.status()) == (0, "waiting")  # seen from outside: nothing yet
        c.commit()
    assert (visible(), run.status()) == (1, "ready")
