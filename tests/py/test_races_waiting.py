"""Races between real sessions on waiting steps: a step parking at its gate while a signal
comes (no lost wake-up), ten sessions delivering one keyed signal, a fan-out's last member and
its callback against an operator's cancel, and two operators at once on a waiting run.

Every session is a connection of its own. The run's row lock serialises them: whatever the
order, the run ends in one consistent state. The fixed interleavings hold one session's
transaction open until the other is seen waiting for the lock; the races release the sessions
together, round after round."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgbus.workflow.runner import gate
from pgbus.workflow.testing import perform_next_step
from tests.py.sample_workflows import FanOutOnly, Order
from tests.py.support import wait_until
from tests.py.test_races_jobs import race

ROUNDS = 20
COMMAND = "SELECT pgbus.workflow_command(%s, %s, 'racer', NULL)"
SIGNAL = "SELECT pgbus.workflow_command(%s, 'signal', 'racer', NULL, %s)"
PARK = "SELECT pgbus.workflow_end_step(%s, 'park', seen_signal_id => %s)"
TAKE = "SELECT pgbus.workflow_end_step(%s, 'complete', signal_id => %s)"
FAN_OUT_FINISHED = "SELECT pgbus.workflow_fan_out_finished(%s)"
CALLBACK_CLASS = "pgbus.workflow:BatchFinishedJob"


def payment(amount: int, key: str | None = None) -> Jsonb:
    return Jsonb(
        {"name": "payment_confirmed", "payload": {"amount": amount}, "idempotency_key": key}
    )


def names(run) -> list[str]:
    return [e.event for e in run.events()]


def current_attempt(run) -> dict[str, Any]:
    row = run.row()
    return next(s for s in run.steps() if s["step_id"] == row["current_step_id"])


def step_messages(conn) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT msg_id FROM pgmq.q_pgbus_workflows WHERE message ->> 'job_class' <> %s",
            (CALLBACK_CLASS,),
        )
    ]


def due_soon(conn, msg_id: int) -> bool:
    """The message exists and is visible now (or within a second: a worker passed it over)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pgmq.q_pgbus_workflows WHERE msg_id = %s"
        " AND vt <= clock_timestamp() + interval '1 second')",
        (msg_id,),
    ).fetchone()[0]


class Background:
    """One statement on a session of its own, run on a thread."""

    def __init__(self, db_url: str, sql: str, params: tuple) -> None:
        self.conn = psycopg.connect(db_url, autocommit=True)
        self.pid = self.conn.info.backend_pid
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(sql, params), daemon=True)
        self.thread.start()

    def _run(self, sql: str, params: tuple) -> None:
        try:
            self.result = self.conn.execute(sql, params).fetchone()[0]
        except BaseException as exc:  # handed to the test by join()
            self.error = exc

    def wait_blocked(self, observer: psycopg.Connection) -> None:
        wait_until(
            lambda: observer.execute(
                "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity"
                " WHERE pid = %s",
                (self.pid,),
            ).fetchone()[0],
            timeout=15,
            what=f"session {self.pid} waiting for the run's row lock",
        )
        assert self.thread.is_alive()

    def join(self) -> Any:
        self.thread.join(30)
        assert not self.thread.is_alive(), "the blocked statement never returned"
        self.conn.close()
        if self.error is not None:
            raise self.error
        return self.result


def race_calls(db_url: str, calls: list[Callable[[psycopg.Connection], Any]]) -> list[Any]:
    """Each call on a connection of its own, released together; their results (or errors)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    conns = [psycopg.connect(db_url, autocommit=True) for _ in calls]

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i](conns[i])
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a racer never returned"
    for c in conns:
        c.close()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


@pytest.fixture
def queue_ready(users: psycopg.Connection) -> psycopg.Connection:
    users.execute("SELECT pgbus.ensure_queue('pgbus_workflows')")
    return users


# -- a signal while the step parks ----------------------------------------------------------


def at_gate(conn: psycopg.Connection):
    """A run of Order whose (empty) fan-out is done and whose gate step `capture` is scheduled."""
    run = Order.start(vendors=0)
    assert perform_next_step(run) == "ready"
    assert current_attempt(run)["step_name"] == "capture"
    return run


def begin_gate(conn: psycopg.Connection) -> dict[str, Any]:
    """Begins the scheduled gate step as a worker does (pgbus.read_jobs); its context."""
    conn.execute("UPDATE pgmq.q_pgbus_workflows SET vt = now()")
    rows = conn.execute(
        "SELECT context FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 30, 1, 'racer:1', 'r')"
    ).fetchall()
    assert len(rows) == 1 and rows[0][0]["step_name"] == "capture", rows
    return rows[0][0]


def step_end(context: dict[str, Any]) -> tuple[str, tuple]:
    """What the runner's gate makes of the context: take a signal, or park having seen some."""
    signal, seen = gate(Order.step_spec("capture"), context)
    if signal is not None:
        return TAKE, (context["step_id"], signal.signal_id)
    return PARK, (context["step_id"], seen)


def check_no_lost_wake_up(conn: psycopg.Connection, run, label: str) -> str:
    """The run is woken (ready, its gate attempt scheduled with a message) or the step took the
    signal; never waiting with a pending payment_confirmed. Then the step runs and takes it."""
    row = run.row()
    [signal] = run.signals()
    assert not (row["status"] == "waiting" and signal["status"] == "pending"), (
        f"{label}: lost wake-up: the run waits while signal {signal['signal_id']} is pending"
    )
    attempt = current_attempt(run)
    if attempt["step_name"] == "capture":
        outcome = "woken"
        assert (row["status"], attempt["status"], signal["status"]) == (
            "ready",
            "scheduled",
            "pending",
        ), label
        assert attempt["msg_id"] is not None and due_soon(conn, attempt["msg_id"]), label
        assert step_messages(conn) == [attempt["msg_id"]], label
        assert names(run).count("step_woken") <= 1, label
        wait_until(
            lambda: (
                perform_next_step(run) == "ready" and current_attempt(run)["step_name"] == "ship"
            ),
            timeout=10,
            what="the woken gate step ran and took the signal",
        )
        [signal] = run.signals()
    else:
        outcome = "taken"
    capture = [s for s in run.steps() if s["step_name"] == "capture"]
    assert capture[-1]["status"] == "completed" and capture[-1]["signal_id"] == signal["signal_id"]
    assert signal["status"] == "consumed", label
    assert current_attempt(run)["step_name"] == "ship", label
    assert names(run).count("signal_claimed") == 1, label
    run.cancel()
    assert step_messages(conn) == []
    return outcome


def test_signal_before_the_park_takes_the_run_lock(db_url, queue_ready):
    """The step read the gate's context (no signal yet); the signal commits before its end."""
    conn = queue_ready
    run = at_gate(conn)
    context = begin_gate(conn)
    sql, params = step_end(context)
    assert sql == PARK and params == (context["step_id"], None)
    delivery = conn.execute(SIGNAL, (run.workflow_id, payment(1))).fetchone()[0]
    assert (delivery["ok"], delivery["woke"], delivery["status"]) == (True, False, "running")
    ended = conn.execute(sql, params).fetchone()[0]
    assert (ended["ok"], ended["status"]) == (True, "ready")  # the park saw it and woke at once
    woken = next(e for e in run.events() if e.event == "step_woken")
    assert woken.actor is None and woken.details["signal_id"] == delivery["signal_id"]
    assert check_no_lost_wake_up(conn, run, "before the park") == "woken"


def test_signal_holding_the_run_lock_while_the_park_waits(db_url, queue_ready):
    conn = queue_ready
    run = at_gate(conn)
    context = begin_gate(conn)
    sql, params = step_end(context)
    with psycopg.connect(db_url) as holder:
        delivery = holder.execute(SIGNAL, (run.workflow_id, payment(2))).fetchone()[0]
        assert delivery["woke"] is False
        parking = Background(db_url, sql, params)
        parking.wait_blocked(conn)
        holder.commit()
    ended = parking.join()
    assert (ended["ok"], ended["status"]) == (True, "ready")
    assert check_no_lost_wake_up(conn, run, "signal holds the lock") == "woken"


def test_park_holding_the_run_lock_while_the_signal_waits(db_url, queue_ready):
    """The step's end transaction is open, the park done but not committed: the signal waits
    for the lock, then finds the step waiting and wakes it."""
    conn = queue_ready
    run = at_gate(conn)
    context = begin_gate(conn)
    sql, params = step_end(context)
    with psycopg.connect(db_url) as holder:
        ended = holder.execute(sql, params).fetchone()[0]
        assert (ended["ok"], ended["status"]) == (True, "waiting")
        delivering = Background(db_url, SIGNAL, (run.workflow_id, payment(3)))
        delivering.wait_blocked(conn)
        holder.commit()
    delivery = delivering.join()
    assert (delivery["ok"], delivery["woke"], delivery["status"]) == (True, True, "ready")
    assert next(e for e in run.events() if e.event == "step_woken").actor == "racer"
    assert check_no_lost_wake_up(conn, run, "park holds the lock") == "woken"


def test_signal_after_the_park_committed(db_url, queue_ready):
    conn = queue_ready
    run = at_gate(conn)
    context = begin_gate(conn)
    sql, params = step_end(context)
    assert conn.execute(sql, params).fetchone()[0]["status"] == "waiting"
    delivery = conn.execute(SIGNAL, (run.workflow_id, payment(4))).fetchone()[0]
    assert (delivery["woke"], delivery["status"]) == (True, "ready")
    assert check_no_lost_wake_up(conn, run, "after the park") == "woken"


def test_signal_before_the_step_begins_is_taken(db_url, queue_ready):
    conn = queue_ready
    run = at_gate(conn)
    delivery = conn.execute(SIGNAL, (run.workflow_id, payment(5))).fetchone()[0]
    assert (delivery["woke"], delivery["status"]) == (False, "ready")
    sql, params = step_end(begin_gate(conn))
    assert (sql, params[1]) == (TAKE, delivery["signal_id"])
    assert conn.execute(sql, params).fetchone()[0]["status"] == "ready"
    assert check_no_lost_wake_up(conn, run, "before the begin") == "taken"


def test_a_worker_running_the_gate_step_races_a_signal(db_url, queue_ready):
    """The real runner (begin, gate, end) on one session and a signal on another, released
    together with a jitter: wherever the signal falls, nothing is lost."""
    conn = queue_ready
    outcomes: dict[str, int] = {}
    rng = random.Random(5)
    for n in range(ROUNDS):
        run = at_gate(conn)
        delay = rng.uniform(-0.03, 0.03)  # > 0: the signal later; < 0: the worker later

        def step(c, run=run, delay=delay):
            threading.Event().wait(max(-delay, 0))
            return perform_next_step(run)

        def deliver(c, run=run, n=n, delay=delay):
            threading.Event().wait(max(delay, 0))
            return c.execute(SIGNAL, (run.workflow_id, payment(n))).fetchone()[0]

        stepped, delivery = race_calls(db_url, [step, deliver])
        assert delivery["ok"] and not delivery["duplicate_delivery"]
        assert stepped in ("ready", "waiting", "running")
        woken = [e for e in run.events() if e.event == "step_woken"]
        kind = check_no_lost_wake_up(conn, run, f"round {n}")
        if kind == "woken":
            kind = (
                "passed over, then taken"
                if not woken
                else "woken by the park"
                if woken[0].actor is None
                else "woken by the signal"
            )
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert sum(outcomes.values()) == ROUNDS, outcomes


# -- one keyed signal from ten sessions -----------------------------------------------------


@pytest.mark.parametrize("status", ["waiting", "ready", "paused"])
def test_ten_sessions_deliver_the_same_keyed_signal(db_url, queue_ready, status):
    for n in range(5):
        run = at_gate(queue_ready)
        if status != "ready":
            assert perform_next_step(run) == "waiting"
        if status == "paused":
            run.pause()
        key = f"evt_{n}"
        results = race(db_url, [(SIGNAL, (run.workflow_id, payment(n, key)))] * 10)
        assert all(r["ok"] for r in results), results
        stored = [r for r in results if not r["duplicate_delivery"]]
        assert len(stored) == 1, results
        assert {r["signal_id"] for r in results} == {stored[0]["signal_id"]}
        assert [r["woke"] for r in results if r["duplicate_delivery"]] == [False] * 9
        assert stored[0]["woke"] is (status == "waiting")
        [signal] = run.signals()
        assert (signal["idempotency_key"], signal["payload"]) == (key, {"amount": n})
        events = names(run)
        assert events.count("signal_received") == 1
        assert events.count("step_woken") == (1 if status == "waiting" else 0)
        assert run.status() == ("paused" if status == "paused" else "ready")
        run.cancel()


# -- the fan-out's last member and its callback against a cancel ----------------------------


def fan_out_waiting(conn: psycopg.Connection):
    """A FanOutOnly run waiting on its batch of two, one member done: (run, attempt, the last
    member's message)."""
    run = FanOutOnly.start(members=2)
    assert perform_next_step(run) == "waiting"
    attempt = current_attempt(run)
    members = [
        r[0]
        for r in conn.execute(
            "SELECT msg_id FROM pgmq.q_pgbus_default WHERE (message ->> 'batch_id')::uuid = %s"
            " ORDER BY msg_id",
            (attempt["batch_id"],),
        )
    ]
    assert len(members) == 2
    assert conn.execute(
        "SELECT pgbus.job_succeeded('pgbus_default', %s)", (members[0],)
    ).fetchone()[0]
    return run, attempt, members[1]


def last_member_succeeds(conn: psycopg.Connection, msg_id: int) -> None:
    assert conn.execute("SELECT pgbus.job_succeeded('pgbus_default', %s)", (msg_id,)).fetchone()[0]


def check_one_ending(conn: psycopg.Connection, run, attempt, callback, cancel) -> str:
    """Finished through the step, or cancelled: never both, the attempt and events alike."""
    row = run.row()
    step = next(s for s in run.steps() if s["step_id"] == attempt["step_id"])
    events = names(run)
    batch = conn.execute(
        "SELECT status, completed_jobs, discarded_jobs FROM pgbus.batches WHERE batch_id = %s",
        (attempt["batch_id"],),
    ).fetchone()
    assert batch == ("finished", 2, 0)
    # The batch sent its callback once, whoever won; the test ran it by hand.
    gone = conn.execute(
        "DELETE FROM pgmq.q_pgbus_workflows WHERE message ->> 'job_class' = %s RETURNING msg_id",
        (CALLBACK_CLASS,),
    ).fetchall()
    assert len(gone) == 1
    assert step_messages(conn) == []
    assert len(run.steps()) == 1
    if row["status"] == "finished":
        assert (step["status"], step["outcome"]) == ("completed", "resolve")
        assert callback["ok"] and callback["status"] == "finished", callback
        assert (cancel["ok"], cancel["code"], cancel["status"]) == (
            False,
            "not_allowed",
            "finished",
        )
        assert events.count("fan_out_finished") == 1 and events.count("step_completed") == 1
        assert events.count("finished") == 1 and "cancelled" not in events
        return "finished"
    assert row["status"] == "cancelled", row
    assert (step["status"], step["outcome"]) == ("cancelled", "cancel")
    assert cancel["ok"] and cancel["status"] == "cancelled", cancel
    assert (callback["ok"], callback["code"], callback["status"]) == (False, "stale", "cancelled")
    assert events.count("cancelled") == 1
    assert not {"fan_out_finished", "step_completed", "finished"} & set(events), events
    return "cancelled"


def test_cancel_then_the_last_member_and_its_callback(db_url, queue_ready):
    conn = queue_ready
    run, attempt, last = fan_out_waiting(conn)
    cancel = conn.execute(COMMAND, (run.workflow_id, "cancel")).fetchone()[0]
    last_member_succeeds(conn, last)
    callback = conn.execute(FAN_OUT_FINISHED, (attempt["step_id"],)).fetchone()[0]
    assert check_one_ending(conn, run, attempt, callback, cancel) == "cancelled"


def test_the_last_member_and_its_callback_then_cancel(db_url, queue_ready):
    conn = queue_ready
    run, attempt, last = fan_out_waiting(conn)
    last_member_succeeds(conn, last)
    callback = conn.execute(FAN_OUT_FINISHED, (attempt["step_id"],)).fetchone()[0]
    cancel = conn.execute(COMMAND, (run.workflow_id, "cancel")).fetchone()[0]
    assert check_one_ending(conn, run, attempt, callback, cancel) == "finished"


def test_cancel_holding_the_run_lock_while_the_callback_waits(db_url, queue_ready):
    conn = queue_ready
    run, attempt, last = fan_out_waiting(conn)
    with psycopg.connect(db_url) as holder:
        cancel = holder.execute(COMMAND, (run.workflow_id, "cancel")).fetchone()[0]
        last_member_succeeds(conn, last)  # the batch row is not the run's: it goes through
        resolving = Background(db_url, FAN_OUT_FINISHED, (attempt["step_id"],))
        resolving.wait_blocked(conn)
        holder.commit()
    callback = resolving.join()
    assert check_one_ending(conn, run, attempt, callback, cancel) == "cancelled"


def test_callback_holding_the_run_lock_while_the_cancel_waits(db_url, queue_ready):
    conn = queue_ready
    run, attempt, last = fan_out_waiting(conn)
    last_member_succeeds(conn, last)
    with psycopg.connect(db_url) as holder:
        callback = holder.execute(FAN_OUT_FINISHED, (attempt["step_id"],)).fetchone()[0]
        cancelling = Background(db_url, COMMAND, (run.workflow_id, "cancel"))
        cancelling.wait_blocked(conn)
        holder.commit()
    cancel = cancelling.join()
    assert check_one_ending(conn, run, attempt, callback, cancel) == "finished"


def test_the_last_member_and_its_callback_race_a_cancel(db_url, queue_ready):
    conn = queue_ready
    endings: dict[str, int] = {}
    rng = random.Random(7)
    for _ in range(ROUNDS):
        run, attempt, last = fan_out_waiting(conn)
        delay = rng.uniform(-0.01, 0.05)  # > 0: the cancel later; < 0: the member later

        def finish(c, attempt=attempt, last=last, delay=delay):
            threading.Event().wait(max(-delay, 0))
            last_member_succeeds(c, last)
            return c.execute(FAN_OUT_FINISHED, (attempt["step_id"],)).fetchone()[0]

        def cancel(c, run=run, delay=delay):
            threading.Event().wait(max(delay, 0))
            return c.execute(COMMAND, (run.workflow_id, "cancel")).fetchone()[0]

        callback, cancelled = race_calls(db_url, [finish, cancel])
        ending = check_one_ending(conn, run, attempt, callback, cancelled)
        endings[ending] = endings.get(ending, 0) + 1
    assert sum(endings.values()) == ROUNDS, endings


# -- two operators on a waiting run ---------------------------------------------------------


def test_resume_against_signal_on_a_run_paused_while_waiting(db_url, queue_ready):
    conn = queue_ready
    orders = set()
    for n in range(ROUNDS):
        run = at_gate(conn)
        assert perform_next_step(run) == "waiting"
        run.pause()
        resumed, delivery = race(
            db_url,
            [(COMMAND, (run.workflow_id, "resume")), (SIGNAL, (run.workflow_id, payment(n)))],
        )
        assert resumed["ok"] and delivery["ok"] and not delivery["duplicate_delivery"]
        if delivery["woke"]:  # resumed first: waiting again, then the signal woke it
            orders.add("resume first")
            assert (resumed["status"], delivery["status"]) == ("waiting", "ready")
        else:  # taken while paused: resume found it and woke the step
            orders.add("signal first")
            assert (delivery["status"], resumed["status"]) == ("paused", "ready")
        events = names(run)
        assert events.count("step_woken") == 1 and events.count("resumed") == 1
        assert check_no_lost_wake_up(conn, run, f"round {n}") == "woken"
    assert orders


def test_skip_against_signal_on_a_waiting_run(db_url, queue_ready):
    conn = queue_ready
    orders = set()
    for n in range(ROUNDS):
        run = at_gate(conn)
        assert perform_next_step(run) == "waiting"
        gate_attempt = current_attempt(run)
        skipped, delivery = race(
            db_url,
            [(COMMAND, (run.workflow_id, "skip")), (SIGNAL, (run.workflow_id, payment(n)))],
        )
        assert delivery["ok"] and not delivery["duplicate_delivery"]
        [signal] = run.signals()
        assert signal["status"] == "pending"
        attempt = next(s for s in run.steps() if s["step_id"] == gate_attempt["step_id"])
        current = current_attempt(run)
        events = names(run)
        if skipped["ok"]:  # skipped first: the signal came to a run at its next step
            orders.add("skip first")
            assert delivery["woke"] is False
            assert (attempt["status"], attempt["outcome"]) == ("skipped", "skip")
            assert current["step_name"] == "ship" and "step_woken" not in events
        else:  # the signal woke the gate first: nothing waits, skip is refused
            orders.add("signal first")
            assert (skipped["code"], skipped["status"]) == ("not_allowed", "ready")
            assert delivery["woke"] is True
            assert current["step_id"] == gate_attempt["step_id"]
            assert current["status"] == "scheduled" and "step_skipped" not in events
            assert events.count("step_woken") == 1
        assert run.status() == "ready" and current["status"] == "scheduled"
        assert step_messages(conn) == [current["msg_id"]] and due_soon(conn, current["msg_id"])
        run.cancel()
    assert orders


# -- the dispatcher's sweep against a signal, and against a late callback -------------------

SWEEP = "SELECT pgbus.workflow_sweep()"


def test_the_sweep_timing_out_a_wait_races_its_signal(db_url, queue_ready):
    """Woken by the signal, or timed out (paused, WaitTimedOut) with the signal left pending:
    never both."""
    conn = queue_ready
    endings = set()
    rng = random.Random(11)
    for n in range(ROUNDS):
        run = at_gate(conn)
        assert perform_next_step(run) == "waiting"
        conn.execute(
            "UPDATE pgbus.workflow_steps SET wait_deadline = now() - interval '1 second'"
            " WHERE step_id = %s",
            (current_attempt(run)["step_id"],),
        )
        delay = rng.uniform(-0.02, 0.02)

        def sweep(c, delay=delay):
            threading.Event().wait(max(-delay, 0))
            return c.execute(SWEEP).fetchone()[0]

        def deliver(c, run=run, n=n, delay=delay):
            threading.Event().wait(max(delay, 0))
            return c.execute(SIGNAL, (run.workflow_id, payment(n))).fetchone()[0]

        swept, delivery = race_calls(db_url, [sweep, deliver])
        timed_out = [t for t in swept["timed_out"] if t["workflow_id"] == str(run.workflow_id)]
        events = names(run)
        [signal] = run.signals()
        attempt = current_attempt(run)
        assert not ("step_woken" in events and "wait_timed_out" in events), events
        if delivery["woke"]:
            endings.add("woken")
            assert timed_out == [] and "wait_timed_out" not in events
            assert check_no_lost_wake_up(conn, run, f"round {n}") == "woken"
            continue
        endings.add("timed out")
        assert [t["status"] for t in timed_out] == ["paused"], swept
        assert (delivery["status"], run.status(), signal["status"]) == (
            "paused",
            "paused",
            "pending",
        )
        assert (attempt["status"], attempt["error_class"]) == (
            "failed",
            "pgbus.workflow.WaitTimedOut",
        )
        assert events.count("wait_timed_out") == 1 and "step_woken" not in events
        assert step_messages(conn) == []
        run.cancel()
    assert endings


def test_the_sweep_repairing_a_fan_out_races_its_late_callback(db_url, queue_ready):
    """A batch finished long ago whose callback comes only now, while the sweep repairs it:
    the step resolves once, the run finishes once."""
    conn = queue_ready
    winners = set()
    for _ in range(ROUNDS):
        run, attempt, last = fan_out_waiting(conn)
        last_member_succeeds(conn, last)
        conn.execute(
            "UPDATE pgbus.batches SET finished_at = finished_at - interval '2 minutes'"
            " WHERE batch_id = %s",
            (attempt["batch_id"],),
        )
        swept, callback = race(db_url, [(SWEEP, ()), (FAN_OUT_FINISHED, (attempt["step_id"],))])
        events = names(run)
        assert run.status() == "finished"
        assert events.count("fan_out_finished") == 1 and events.count("finished") == 1
        assert events.count("step_completed") == 1
        [step] = run.steps()
        assert (step["status"], step["outcome"]) == ("completed", "resolve")
        if callback["ok"]:
            winners.add("callback")
            assert swept["resolved"] == 0 and "fan_out_repaired" not in events
        else:
            winners.add("sweep")
            assert (callback["code"], callback["status"]) == ("stale", "finished")
            assert swept["resolved"] == 1 and events.count("fan_out_repaired") == 1
        conn.execute(
            "DELETE FROM pgmq.q_pgbus_workflows WHERE message ->> 'job_class' = %s",
            (CALLBACK_CLASS,),
        )
        assert step_messages(conn) == []
    assert winners
