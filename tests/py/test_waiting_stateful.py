"""Waiting steps as a state machine: signal gates, fan-out batches and wait timeouts, with
workers, signals, batch members, callbacks, operators and the sweep interleaved at random.

Hypothesis drives the SQL directly (one autocommit connection), as test_workflow_stateful does.
A run goes gate -> fan -> last: "gate" waits for the signal "go" (one workflow class per
on_timeout action), "fan" opens a batch of 0-3 dummy jobs (no wait_timeout: its wait has no
deadline), "last" is a plain step. A fake worker reads a step with pgbus.read_jobs and ends it
as the Python runner would (pgbus.workflow.runner.gate decides, and is checked against the
rule): at the gate it takes the claimed signal, else the oldest pending one its matcher accepts
(the matcher accepts a payload with "accept": true, so some signals are looked at and refused),
and parks ("park", or "rewait" once it waited) with seen_signal_id = the newest pending signal
it looked at; or it fails with an error (pause) or asks for a reattempt while holding the
signal it took; the fan step parks with its jobs. Workers die (the message comes back: a
stall), batch members finish (completed or dead-lettered), the batch's callback arrives once,
twice, late or never (the sweep repairs it once its batch finished long enough ago), signals
come with a fresh, repeated, blank or no key, operators say pause, resume, cancel, skip and
resume_at, time passes, waits expire (pgbus.workflow_expire_wait, or the deadline moved back
and the sweep).

Each action is checked against pgbus.workflow_transition and the SQL's documented refinements:
its answer, the exact audit events it adds (per run, per attempt), the attempts it creates,
the rows it must change and the runs it must leave alone. The invariants check every run after
every action, among them: no lost wake-up at a gate, no finished batch left unresolved after its
callback, one signal per key, pending -> claimed -> consumed, a consistent trail per attempt.
"""

from __future__ import annotations

import dataclasses
import types
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from pgbus.workflow.runner import gate as runner_gate

QUEUE = "pgbus_waiting_sm"
QTABLE = f"pgmq.q_{QUEUE}"
MEMBERS = "pgbus_waiting_sm_members"
STEP_JOB = "pgbus.workflow:StepJob"
CALLBACK_JOB = "pgbus.workflow:BatchFinishedJob"
WAIT_TIMEOUT = 3600
# One class per on_timeout action of the gate, each with an on_batch_failure for its fan step.
CLASSES = {
    "WaitPause": ("pause", "pause"),
    "WaitSkip": ("skip", "pause"),
    "WaitRun": ("run", "skip"),
    "WaitCancel": ("cancel", "cancel"),
}
STEPS = ("gate", "fan", "last")
NEXT_STEP = {"gate": "fan", "fan": "last", "last": None}
STATUSES = {"ready", "running", "waiting", "paused", "finished", "cancelled"}
ENDED = {"finished", "cancelled"}
OUTSIDE_VERBS = ("pause", "resume", "cancel", "skip", "resume_at")
# The operator's verb, drawn among the legal ones with cancel (which ends the run) weighted down.
OPERATOR_VERBS = ("pause", "resume", "resume", "skip", "resume_at", "cancel")
STALL_ACTIONS = ("pause", "reattempt", "cancel")
STEP_ENDS = {"step_completed", "step_skipped", "step_failed", "step_interrupted", "step_cancelled"}
NEW = "<the run's new attempt>"
ERROR = {"class": "Boom", "message": "the body raised"}

SNAPSHOT = f"""
    SELECT * FROM pgbus.workflows;
    SELECT * FROM pgbus.workflow_steps;
    SELECT msg_id, vt, read_ct, message FROM {QTABLE};
    SELECT event_id, workflow_id, event, step_id, actor, reason, details
    FROM pgbus.workflow_events ORDER BY event_id;
    SELECT * FROM pgbus.workflow_signals ORDER BY signal_id;
    SELECT * FROM pgbus.batches;
    SELECT clock_timestamp() AS clock
"""


def definition(on_timeout: str, on_batch_failure: str) -> list[dict[str, Any]]:
    return [
        {"name": "gate", "wait_for": "go", "wait_timeout": WAIT_TIMEOUT, "on_timeout": on_timeout},
        {"name": "fan", "fan_out": True, "on_batch_failure": on_batch_failure},
        {"name": "last"},
    ]


def attempt_status(verb: str, failed: bool) -> str:
    """pgbus.workflow_attempt_status."""
    if failed:
        return "failed"
    return {"complete": "completed", "resolve": "completed", "skip": "skipped"}.get(
        verb, "cancelled" if verb == "cancel" else "interrupted"
    )


def step_event(verb: str, failed: bool) -> str:
    return "step_failed" if failed else "step_" + attempt_status(verb, False)


def close(a: datetime, b: datetime, slack: float = 5.0) -> bool:
    return abs((a - b).total_seconds()) <= slack


@dataclasses.dataclass(frozen=True)
class Snapshot:
    runs: dict[UUID, dict[str, Any]]
    attempts: dict[int, dict[str, Any]]
    queue: dict[int, dict[str, Any]]
    events: list[dict[str, Any]]
    signals: dict[int, dict[str, Any]]
    batches: dict[UUID, dict[str, Any]]
    last_event: int
    clock: datetime

    def events_after(self, event_id: int) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event_id"] > event_id]

    def signals_of(self, wf: UUID) -> list[dict[str, Any]]:
        return [g for g in self.signals.values() if g["workflow_id"] == wf]

    def callbacks(self) -> dict[int, dict[str, Any]]:
        return {m: q for m, q in self.queue.items() if q["message"]["job_class"] == CALLBACK_JOB}

    def step_messages(self) -> dict[int, dict[str, Any]]:
        return {m: q for m, q in self.queue.items() if q["message"]["job_class"] == STEP_JOB}


@dataclasses.dataclass
class Outcome:
    """What an action led to for one run: its events, its new status, the step of its new
    attempt (if any)."""

    events: list[tuple[str, Any]]
    status: str
    new_step: str | None = None


class AcceptMatcher:
    """The gate's matcher, as a SignalMatcher("go", predicate) would be."""

    name = "go"

    def matches(self, signal: Any) -> bool:
        return signal.name == "go" and signal.payload.get("accept") is True


GATE_SPEC = types.SimpleNamespace(matcher=AcceptMatcher())


class WaitingMachine(RuleBasedStateMachine):
    conn: ClassVar[psycopg.Connection]
    transitions: ClassVar[dict[tuple[str, str, str], str | None]] = {}

    runs = Bundle("runs")
    held = Bundle("held")  # deliveries a fake worker began and holds (keys of self.deliveries)
    released = Bundle("released")  # (attempt, message) of deliveries ended, or whose worker died

    def __init__(self) -> None:
        super().__init__()
        self.conn.execute("TRUNCATE pgbus.workflows, pgbus.batches CASCADE")
        for q in (QUEUE, MEMBERS):
            self.conn.execute("SELECT pgmq.purge_queue(%s)", (q,))
            self.conn.execute(f"TRUNCATE pgmq.a_{q}")
        self.run_ids: list[UUID] = []
        self.class_of: dict[UUID, str] = {}
        # The deliveries workers hold: (attempt, the context it was given, its message). A
        # woken attempt is delivered again under the same step_id, hence a key of their own.
        self.deliveries: dict[int, tuple[int, dict[str, Any], int]] = {}
        # The gate's seen_signal_id when it last settled its wait (0: none, or resume's NULL).
        self.looked: dict[int, int] = {}
        self.delivered: set[UUID] = set()  # batches whose callback arrived
        self.lost: set[UUID] = set()  # batches whose callback message was lost
        self.keys: dict[UUID, list[str]] = defaultdict(list)  # the keys sent to each run
        self.ended: dict[UUID, tuple] = {}
        self.seen_events: dict[int, tuple] = {}
        self.counter = 0

    # -- reading the database --------------------------------------------------------------

    def one(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql, params).fetchone()[0]

    def snapshot(self) -> Snapshot:
        cur = self.conn.cursor(row_factory=dict_row)
        cur.execute(SNAPSHOT)
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall())
        runs, attempts, queue, events, signals, batches, [clock] = results
        return Snapshot(
            {r["workflow_id"]: r for r in runs},
            {r["step_id"]: r for r in attempts},
            {r["msg_id"]: r for r in queue},
            events,
            {g["signal_id"]: g for g in signals},
            {b["batch_id"]: b for b in batches},
            max((e["event_id"] for e in events), default=0),
            clock["clock"],
        )

    def transition(self, kind: str, verb: str, status: str) -> str | None:
        key = (kind, verb, status)
        if key not in self.transitions:
            self.transitions[key] = self.one("SELECT pgbus.workflow_transition(%s, %s, %s)", key)
        return self.transitions[key]

    def current(self, snap: Snapshot, wf: UUID) -> dict[str, Any]:
        return snap.attempts[snap.runs[wf]["current_step_id"]]

    def on_timeout(self, wf: UUID, step: str) -> str:
        return CLASSES[self.class_of[wf]][0] if step == "gate" else "pause"

    def on_batch_failure(self, wf: UUID) -> str:
        return CLASSES[self.class_of[wf]][1]

    # -- what the SQL must do ----------------------------------------------------------------

    def advance(self, step: str, events: list) -> Outcome:
        """pgbus.workflow_advance after `step`."""
        nxt = NEXT_STEP[step]
        if nxt is None:
            return Outcome([*events, ("finished", None)], "finished")
        return Outcome([*events, ("step_scheduled", NEW)], "ready", nxt)

    def resolve(self, wf: UUID, att: dict, batch: dict | None) -> Outcome:
        """pgbus.workflow_resolve of a waiting fan-out attempt of a waiting run, given its
        batch as it is (None: gone)."""
        sid = att["step_id"]
        if batch is None:  # outcome unknown: paused, whatever on_batch_failure says
            return Outcome([("step_failed", sid), ("paused", sid)], "paused")
        if batch["status"] != "finished":
            return Outcome([], "waiting")
        events = [("fan_out_finished", sid)]
        if batch["discarded_jobs"] == 0:
            return self.advance("fan", [*events, ("step_completed", sid)])
        action = self.on_batch_failure(wf)
        events.append(("step_failed", sid))
        if action == "pause":
            return Outcome([*events, ("paused", sid)], "paused")
        if action == "cancel":
            return Outcome([*events, ("cancelled", None)], "cancelled")
        return self.advance("fan", events)

    def time_out(self, wf: UUID, att: dict) -> Outcome:
        """pgbus.workflow_time_out of a waiting attempt of a waiting run."""
        sid = att["step_id"]
        action = self.on_timeout(wf, att["step_name"])
        events = [("wait_timed_out", sid)]
        if action == "run":
            return Outcome([*events, ("step_woken", sid)], "ready")
        if action == "pause":
            return Outcome([*events, ("step_failed", sid), ("paused", sid)], "paused")
        if action == "cancel":
            return Outcome([*events, ("step_cancelled", sid), ("cancelled", None)], "cancelled")
        return self.advance(att["step_name"], [*events, ("step_skipped", sid)])

    def pending_go(self, snap: Snapshot, wf: UUID) -> list[dict]:
        return [g for g in snap.signals_of(wf) if g["status"] == "pending" and g["name"] == "go"]

    def stall(self, run: dict, att: dict, action: str) -> Outcome:
        """pgbus.workflow_stall."""
        sid = att["step_id"]
        if run["status"] == "paused":
            return Outcome([("stall_detected", sid)], "paused")
        if action == "pause":
            return Outcome([("stall_detected", sid), ("paused", sid)], "paused")
        if action == "cancel":
            return Outcome([("stall_detected", sid), ("cancelled", None)], "cancelled")
        return Outcome(
            [("stall_detected", sid), ("step_scheduled", NEW)], "ready", att["step_name"]
        )

    # -- checking an action ----------------------------------------------------------------

    def verify(
        self, before: Snapshot, after: Snapshot, outcomes: dict[UUID, Outcome]
    ) -> dict[UUID, int]:
        """Exactly these events per run (none for the others), one new attempt per run whose
        outcome names a step, each run's new status; the runs not named are untouched.
        Returns the new attempts by run."""
        created = {k: a for k, a in after.attempts.items() if k not in before.attempts}
        new_by_run = {a["workflow_id"]: k for k, a in created.items()}
        assert len(new_by_run) == len(created), "two new attempts for one run"
        assert {a["workflow_id"]: a["step_name"] for a in created.values()} == {
            wf: o.new_step for wf, o in outcomes.items() if o.new_step
        }
        for sid, a in created.items():
            wf = a["workflow_id"]
            previous = [
                b["attempt"]
                for b in before.attempts.values()
                if b["workflow_id"] == wf and b["step_name"] == a["step_name"]
            ]
            assert a["attempt"] == max(previous, default=0) + 1
            assert a["status"] == "scheduled" and a["queue"] == QUEUE
            assert a["waiting_since"] is None and a["signal_id"] is None and not a["timed_out"]
            assert a["msg_id"] in after.queue
            assert after.queue[a["msg_id"]]["message"]["kwargs"] == {
                "workflow_id": str(wf),
                "step_id": sid,
            }
            run = after.runs[wf]
            assert run["current_step_id"] == sid and run["current_step"] == a["step_name"]
        got: dict[UUID, list[tuple[str, Any]]] = defaultdict(list)
        for e in after.events_after(before.last_event):
            got[e["workflow_id"]].append((e["event"], e["step_id"]))
        expected = {
            wf: [(name, new_by_run.get(wf) if step == NEW else step) for name, step in o.events]
            for wf, o in outcomes.items()
            if o.events
        }
        assert dict(got) == expected, (dict(got), expected)
        for wf, o in outcomes.items():
            assert after.runs[wf]["status"] == o.status, (wf, o)
        for wf, run in before.runs.items():
            if wf in outcomes:
                continue
            assert after.runs[wf] == run, f"{wf} changed"
            assert after.signals_of(wf) == before.signals_of(wf)
            mine = [k for k, a in before.attempts.items() if a["workflow_id"] == wf]
            assert all(after.attempts[k] == before.attempts[k] for k in mine)
        return new_by_run

    def check_woken(self, after: Snapshot, sid: int) -> None:
        att = after.attempts[sid]
        assert att["status"] == "scheduled" and att["waiting_since"] is not None
        assert att["msg_id"] in after.queue
        assert after.queue[att["msg_id"]]["message"]["kwargs"]["step_id"] == sid

    def check_paused_clock(self, before: Snapshot, after: Snapshot, sid: int) -> None:
        """A waiting attempt of a paused run keeps what was left of its wait, not a deadline."""
        att = after.attempts[sid]
        assert att["wait_deadline"] is None
        if att["step_name"] == "gate":
            assert att["wait_remaining"] is not None
            assert att["wait_remaining"] <= timedelta(seconds=WAIT_TIMEOUT)

    # -- the fake worker -------------------------------------------------------------------

    def read(self, msg_id: int, worker: str, stall_action: str) -> list[dict]:
        """pgbus.read_jobs with only message `msg_id` visible."""
        with self.conn.transaction():
            others = self.conn.execute(
                f"SELECT msg_id, vt FROM {QTABLE} WHERE vt <= clock_timestamp() AND msg_id <> %s",
                (msg_id,),
            ).fetchall()
            self.conn.execute(
                f"UPDATE {QTABLE} SET vt = now() + interval '1 day' WHERE msg_id = ANY(%s)",
                ([m for m, _ in others],),
            )
            self.conn.execute(f"UPDATE {QTABLE} SET vt = now() WHERE msg_id = %s", (msg_id,))
            rows = (
                self.conn.cursor(row_factory=dict_row)
                .execute(
                    "SELECT * FROM pgbus.read_jobs(ARRAY[%s], 3600, 1, %s, 'rev', %s)",
                    (QUEUE, worker, stall_action),
                )
                .fetchall()
            )
            for m, vt in others:
                self.conn.execute(f"UPDATE {QTABLE} SET vt = %s WHERE msg_id = %s", (vt, m))
        return rows

    def deliver(self, before: Snapshot, msg_id: int, rows: list, stall_action: str) -> int | None:
        """Checks one read of message `msg_id`; returns the delivery it began, if any."""
        after = self.snapshot()
        kwargs = before.queue[msg_id]["message"]["kwargs"]
        wf, sid = UUID(kwargs["workflow_id"]), int(kwargs["step_id"])
        run, att = before.runs.get(wf), before.attempts.get(sid)
        if (
            run is None
            or att is None
            or sid != run["current_step_id"]
            or att["status"] not in ("scheduled", "running")
            or (att["status"] == "scheduled" and run["status"] not in ("ready", "running"))
        ):  # stale: archived, nothing else
            assert rows == []
            self.verify(before, after, {})
            assert msg_id not in after.queue
            return None
        if att["status"] == "running" and run["status"] not in ("ready", "running", "paused"):
            # Its run ended while it ran (cancelled): the attempt ends with it, nothing else.
            assert rows == []
            self.verify(before, after, {wf: Outcome([], run["status"])})
            assert after.attempts[sid]["status"] == "superseded"
            assert msg_id not in after.queue
            return None
        if att["status"] == "running":  # delivered again while it ran: its worker died
            assert len(rows) == 1
            context = rows[0]["context"]
            out = self.stall(run, att, stall_action)
            self.verify(before, after, {wf: out})
            assert context["stalled"] is True and context["status"] == out.status
            stalled = after.attempts[sid]
            assert (stalled["status"], stalled["outcome"]) == ("stalled", stall_action)
            assert msg_id not in after.queue
            return None
        assert att["scheduled_at"] <= before.clock + timedelta(seconds=1)
        assert len(rows) == 1 and rows[0]["msg_id"] == msg_id
        context = rows[0]["context"]
        assert (context["step_id"], context["step_name"], context["workflow_id"]) == (
            sid,
            att["step_name"],
            str(wf),
        )
        self.verify(before, after, {wf: Outcome([("step_started", sid)], "running")})
        began = after.attempts[sid]
        assert began["status"] == "running" and began["started_at"] is not None
        if att["step_name"] == "gate":
            # The claimed signal of this step first, then the pending "go" ones, oldest first.
            mine = before.signals_of(wf)
            want = [g for g in mine if g["status"] == "claimed" and g["step_name"] == "gate"]
            want += [g for g in mine if g["status"] == "pending" and g["name"] == "go"]
            assert [
                (g["signal_id"], g["status"], g["name"], g["idempotency_key"], g["payload"])
                for g in context["signals"]
            ] == [
                (g["signal_id"], g["status"], g["name"], g["idempotency_key"], g["payload"])
                for g in want
            ]
            assert context["wait_for"] == "go"
            assert context["waited"] is (att["waiting_since"] is not None)
            assert context["timed_out"] is att["timed_out"]
        else:
            assert "signals" not in context
        self.counter += 1
        self.deliveries[self.counter] = (sid, context, msg_id)
        return self.counter

    def end(
        self,
        sid: int,
        verb: str,
        *,
        error: dict | None = None,
        signal_id: int | None = None,
        fan_out: list | None = None,
        seen: int | None = None,
    ) -> None:
        """pgbus.workflow_end_step by the attempt's worker, checked."""
        before = self.snapshot()
        att = before.attempts[sid]
        wf = att["workflow_id"]
        run = before.runs[wf]
        output = {"done": sid} if verb == "complete" else None
        answer = self.one(
            "SELECT pgbus.workflow_end_step(%s, %s, %s, %s, NULL, NULL, %s, %s, %s)",
            (
                sid,
                verb,
                Jsonb(output) if output else None,
                Jsonb(error) if error else None,
                signal_id,
                Jsonb(fan_out) if fan_out is not None else None,
                seen,
            ),
        )
        after = self.snapshot()
        ended = after.attempts[sid]
        assert att["msg_id"] not in after.queue  # archived in every case
        assert after.callbacks() == before.callbacks()
        if att["status"] != "running" or run["current_step_id"] != sid:
            assert answer == {"ok": False, "code": "stale", "status": run["status"]}
            self.verify(before, after, {})
            return
        to = self.transition("runner", verb, run["status"])
        failed = error is not None
        if to is None:  # refused: recorded (superseded), no signal taken, no batch opened
            assert answer == {"ok": False, "code": "not_allowed", "status": run["status"]}
            self.verify(
                before, after, {wf: Outcome([(step_event(verb, failed), sid)], run["status"])}
            )
            assert (ended["status"], ended["outcome"]) == ("superseded", verb)
            assert after.signals == before.signals and after.batches == before.batches
            return
        assert answer["ok"] is True, answer
        events: list[tuple[str, Any]] = []
        if signal_id is not None:
            taken = before.signals[signal_id]
            if taken["status"] == "pending":
                events.append(("signal_claimed", sid))
            else:
                assert (taken["status"], taken["step_name"]) == ("claimed", "gate")
        step = att["step_name"]
        batch = None
        if verb in ("park", "rewait"):
            if fan_out is not None:
                events.append(("fan_out_opened", sid))
            events.append(("step_waiting", sid))
            if run["status"] == "paused":
                out = Outcome(events, "paused")
            elif fan_out is not None:
                # Only the batch opened now can be finished already: when it is empty.
                batch = {"status": "finished" if not fan_out else "open", "discarded_jobs": 0}
                out = self.resolve(wf, att, batch)
                out.events[:0] = events
            else:
                # Woken at once by a signal newer than what it saw, or when its wait timed out
                # already (on_timeout run: the runner never parks then, a second end may).
                newer = [g for g in self.pending_go(before, wf) if g["signal_id"] > (seen or 0)]
                wakes = bool(newer) or att["timed_out"]
                out = Outcome(events + ([("step_woken", sid)] if wakes else []), "waiting")
                if wakes:
                    out.status = "ready"
            self.looked[sid] = seen or 0
        else:
            events.append((step_event(verb, failed), sid))
            if to == "paused":
                out = Outcome(
                    events + ([("paused", sid)] if run["status"] != "paused" else []), "paused"
                )
            elif to in ENDED:
                out = Outcome([*events, (to, None)], to)
            elif verb == "reattempt":
                out = Outcome([*events, ("step_scheduled", NEW)], "ready", step)
            else:  # complete, skip
                out = self.advance(step, events)
        self.verify(before, after, {wf: out})
        assert answer["status"] == out.status
        # Refinements of the table: complete leads to finished after the last step; a park
        # leads on to ready when what it waits for is there already.
        assert out.status == to or (
            (verb in ("complete", "skip") and out.status == "finished" and step == "last")
            or (verb in ("park", "rewait") and out.status == "ready")
        ), (verb, to, out.status)
        now = after.runs[wf]
        if out.status == "paused" and run["status"] == "running":
            assert now["pause_cause"] == ("error" if failed else "manual")
        if signal_id is not None:
            g = after.signals[signal_id]
            assert (g["step_name"], g["step_id"]) == ("gate", sid)
            assert ended["signal_id"] == signal_id
            done = ended["status"] in ("completed", "skipped")
            assert g["status"] == ("consumed" if done else "claimed")
            assert g["claimed_at"] is not None
            if before.signals[signal_id]["claimed_at"] is not None:
                assert g["claimed_at"] == before.signals[signal_id]["claimed_at"]
        else:
            assert after.signals == before.signals
        if verb not in ("park", "rewait"):
            assert ended["status"] == attempt_status(verb, failed) and ended["outcome"] == verb
            assert ended["error"] == error and ended["output"] == output
            return
        # Parked: at its gate, or on the batch it opened now.
        assert ended["waiting_since"] is not None
        if att["waiting_since"] is not None:
            assert ended["waiting_since"] == att["waiting_since"]
        if fan_out is not None:
            opened = set(after.batches) - set(before.batches)
            assert len(opened) == 1
            b = after.batches[opened.pop()]
            assert ended["batch_id"] == b["batch_id"] and ended["wait_for"] is None
            assert b["total_jobs"] == len(fan_out)
            assert b["description"] == f"{self.class_of[wf]}#fan {wf}"
            assert b["properties"] == {"workflow_id": str(wf), "step_id": sid}
            # Its callback resolves it; an empty one is resolved by the park, with no callback.
            callback = {"job_class": CALLBACK_JOB, "queue": QUEUE}
            assert b["on_complete"] == (callback if fan_out else None)
            assert b["status"] == ("finished" if not fan_out else "processing")
            assert ended["wait_deadline"] is None and ended["wait_remaining"] is None
        else:
            assert ended["wait_for"] == "go" and ended["batch_id"] is None
            assert after.batches == before.batches
            if run["status"] == "paused":
                self.check_paused_clock(before, after, sid)
            elif verb == "park":  # a fresh deadline
                deadline = after.clock + timedelta(seconds=WAIT_TIMEOUT)
                assert close(ended["wait_deadline"], deadline)
            else:  # rewait keeps its deadline
                assert ended["wait_deadline"] == att["wait_deadline"]
        if out.status == "ready" and out.new_step is None:
            self.check_woken(after, sid)
        elif out.status in ("waiting", "paused") and not out.new_step:
            assert ended["status"] == "waiting" and ended["outcome"] == verb

    # -- rules: runs and workers -------------------------------------------------------------

    def start(self, cls: str) -> UUID:
        before = self.snapshot()
        wf = self.one("SELECT workflow_id FROM pgbus.workflow_start(%s)", (cls,))
        after = self.snapshot()
        self.class_of[wf] = cls
        self.verify(
            before,
            after,
            {wf: Outcome([("started", None), ("step_scheduled", NEW)], "ready", "gate")},
        )
        self.run_ids.append(wf)
        return wf

    def start_at(self, cls: str, at: str) -> UUID:
        """A run started at its gate, or moved on at once by an operator (pause, then
        resume_at a later step)."""
        wf = self.start(cls)
        if at != "gate":
            self.command(wf, "pause", at)
            self.command(wf, "resume_at", at)
        return wf

    @initialize(
        target=runs,
        starts=st.lists(
            st.tuples(st.sampled_from(sorted(CLASSES)), st.sampled_from(["gate", "fan"])),
            min_size=1,
            max_size=2,
        ),
    )
    def start_runs(self, starts):
        return multiple(*(self.start_at(c, at) for c, at in starts))

    @precondition(lambda self: len(self.run_ids) < 4)
    @rule(
        target=runs,
        cls=st.sampled_from(sorted(CLASSES)),
        at=st.sampled_from(["gate", "gate", "fan", "fan", "last"]),
    )
    def start_another(self, cls, at):
        """Another run, at its gate or a later step."""
        return self.start_at(cls, at)

    def choose(self, wf: UUID, data, prefer) -> UUID:
        """Mostly a run that has not ended, more often one that `prefer(status, step)`
        picks, else `wf` (from the bundle: any run)."""
        where = dict(
            (r[0], r[1:])
            for r in self.conn.execute(
                "SELECT workflow_id, status, current_step FROM pgbus.workflows"
            )
        )
        ongoing = [w for w in self.run_ids if where[w][0] not in ENDED]
        preferred = [w for w in ongoing if prefer(*where[w])]
        which = data.draw(st.integers(0, 4), "which run")
        if which >= 2 and preferred:
            return data.draw(st.sampled_from(preferred), "preferred run")
        if which >= 1 and ongoing:
            return data.draw(st.sampled_from(ongoing), "ongoing run")
        return wf

    def runs_in(self, status_ok) -> list[UUID]:
        """The runs whose status passes, in the order they started (draws must not depend
        on the random ids)."""
        statuses = dict(self.conn.execute("SELECT workflow_id, status FROM pgbus.workflows"))
        return [wf for wf in self.run_ids if status_ok(statuses[wf])]

    def exists(self, where: str) -> bool:
        return self.one(f"SELECT EXISTS (SELECT 1 FROM {where})")

    def some_step_due(self) -> bool:
        return self.exists("pgbus.workflow_steps WHERE status = 'scheduled'")

    @precondition(some_step_due)
    @rule(target=held, data=st.data())
    def worker_reads(self, data):
        """A worker reads a step message and holds the attempt it began."""
        delivery = self.read_one(data)
        return multiple() if delivery is None else multiple(delivery)

    @precondition(some_step_due)
    @rule(
        target=released,
        data=st.data(),
        how=st.sampled_from(["runner", "runner", "runner", "runner", "fail", "reattempt"]),
        jobs=st.sampled_from([0, 1, 1, 2, 3]),
    )
    def worker_runs(self, data, how, jobs):
        """A worker reads a step message and runs the step to its end at once."""
        delivery = self.read_one(data)
        if delivery is None:
            return multiple()
        return multiple(self.finish(delivery, how, jobs, None))

    @precondition(some_step_due)
    @rule(target=released, data=st.data(), jobs=st.sampled_from([0, 1, 1, 2, 3]))
    def another_worker_runs(self, data, jobs):
        """The same, the way most steps go."""
        return self.worker_runs(data, "runner", jobs)

    def read_one(self, data) -> int | None:
        """A worker reads one step message: a due step's, or a stale one left visible."""
        before = self.snapshot()
        candidates = sorted(
            m
            for m, q in before.step_messages().items()
            if q["vt"] <= before.clock
            or before.attempts[int(q["message"]["kwargs"]["step_id"])]["status"] == "scheduled"
        )
        if not candidates:
            return None
        msg_id = data.draw(st.sampled_from(candidates), "msg_id")
        rows = self.read(msg_id, "w:1", "pause")
        return self.deliver(before, msg_id, rows, "pause")

    @rule(
        target=released,
        delivery=consumes(held),
        how=st.sampled_from(["runner", "runner", "runner", "runner", "fail", "reattempt"]),
        jobs=st.sampled_from([0, 1, 1, 2, 3]),
        operator_first=st.sampled_from([None, None, None, "pause", "cancel"]),
    )
    def worker_ends(self, delivery, how, jobs, operator_first):
        """The worker ends the step it holds; `operator_first`: an operator said this verb to
        the run just before."""
        return self.finish(delivery, how, jobs, operator_first)

    def finish(
        self, delivery: int, how: str, jobs: int, operator_first: str | None
    ) -> tuple[int, int]:
        """Ends attempt `sid` as the runner would (`how`: "runner", the body's own way;
        "fail": it raised and the policy paused; "reattempt": the policy asked for another
        attempt; both holding the signal the gate took). Returns (attempt, message)."""
        sid, context, msg_id = self.deliveries.pop(delivery)
        wf, step = self.conn.execute(
            "SELECT workflow_id, step_name FROM pgbus.workflow_steps WHERE step_id = %s", (sid,)
        ).fetchone()
        if operator_first is not None:
            self.command(wf, operator_first, "gate")
        if step == "gate":
            signal, seen = runner_gate(GATE_SPEC, context)
            # The runner's rule: the claimed signal, else the oldest pending one it accepts;
            # seen is the newest pending one it looked at.
            rows = context["signals"]
            claimed = [r for r in rows if r["status"] == "claimed"]
            assert len(claimed) <= 1, claimed
            looked = []
            want = claimed[0] if claimed else None
            if want is None:
                for r in rows:
                    looked.append(r["signal_id"])
                    if r["payload"].get("accept") is True:
                        want = r
                        break
            assert (signal.signal_id if signal else None) == (want["signal_id"] if want else None)
            assert seen == (max(looked) if looked else None)
            taken = signal.signal_id if signal else None
            if how == "fail":
                self.end(sid, "pause", error=ERROR, signal_id=taken)
            elif how == "reattempt":
                self.end(sid, "reattempt", error=ERROR, signal_id=taken)
            elif signal is None and not context["timed_out"]:
                self.end(sid, "rewait" if context["waited"] else "park", seen=seen)
            else:
                self.end(sid, "complete", signal_id=taken)
        elif step == "fan":
            if how == "runner":
                fan_out = [
                    {"queue": MEMBERS, "job_class": "tests.Dummy", "arguments": {"args": []}}
                ] * jobs
                self.end(sid, "park", fan_out=fan_out)
            else:
                self.end(sid, "pause" if how == "fail" else "reattempt", error=ERROR)
        else:
            if how == "runner":
                self.end(sid, "complete")
            else:
                self.end(sid, "pause" if how == "fail" else "reattempt", error=ERROR)
        return sid, msg_id

    @rule(ended=consumes(released), verb=st.sampled_from(["complete", "park", "pause"]))
    def worker_ends_late(self, ended, verb):
        """A worker given up for dead (or ending twice) says its verb after all. Left out:
        the end of a delivery whose attempt was woken and sent again since. workflow_end_step
        knows the attempt by step_id alone, which the new delivery shares: the late end would
        archive the new message (the run stays ready without one until the sweep resends
        it), or be taken for the end of the new delivery if that one is running.
        The attempt may still run (a worker that died while its run was cancelled is not a
        stall), so its late end is its real one."""
        sid, msg_id = ended
        step, now = self.conn.execute(
            "SELECT step_name, msg_id FROM pgbus.workflow_steps WHERE step_id = %s", (sid,)
        ).fetchone()
        if now != msg_id:
            return
        if verb == "park" and step == "fan":  # a fan-out step parks with its jobs
            self.end(
                sid, verb, fan_out=[{"queue": MEMBERS, "job_class": "tests.Dummy", "arguments": {}}]
            )
        else:
            self.end(sid, "complete" if verb == "park" and step == "last" else verb)

    @rule(target=released, delivery=consumes(held), action=st.sampled_from(STALL_ACTIONS))
    def worker_dies(self, delivery, action):
        """The worker's process is gone: its message becomes visible again and is read."""
        sid, _, msg_id = self.deliveries.pop(delivery)
        before = self.snapshot()
        if msg_id not in before.queue:  # its step ended meanwhile (an operator, the sweep)
            return sid, msg_id
        rows = self.read(msg_id, "w:2", action)
        self.deliver(before, msg_id, rows, action)
        return sid, msg_id

    # -- rules: batches and their callbacks ----------------------------------------------------

    @precondition(lambda self: self.exists("pgbus.batches WHERE status = 'processing'"))
    @rule(
        data=st.data(),
        outcome=st.sampled_from(["completed", "completed", "discarded"]),
        all_left=st.booleans(),
    )
    def member_done(self, data, outcome, all_left):
        """A member of a fan-out batch finished (or was dead-lettered); `all_left`: all the
        members left finished together (batch_member_done counts n)."""
        before = self.snapshot()
        open_ = sorted(
            (b for b in before.batches.values() if b["status"] == "processing"),
            key=lambda b: b["properties"]["step_id"],
        )
        if not open_:
            return
        b = data.draw(st.sampled_from(open_), "batch")
        left = b["total_jobs"] - b["completed_jobs"] - b["discarded_jobs"]
        n = left if all_left else 1
        finished = self.one(
            "SELECT pgbus.batch_member_done(%s, %s, %s)", (b["batch_id"], outcome, n)
        )
        after = self.snapshot()
        self.verify(before, after, {})
        now = after.batches[b["batch_id"]]
        done = n if outcome == "completed" else 0
        assert now["completed_jobs"] == b["completed_jobs"] + done
        assert now["discarded_jobs"] == b["discarded_jobs"] + n - done
        last = now["completed_jobs"] + now["discarded_jobs"] == now["total_jobs"]
        assert finished is last and (now["status"] == "finished") is last
        new = set(after.callbacks()) - set(before.callbacks())
        assert len(new) == last
        for m in new:
            assert after.queue[m]["message"]["args"] == [b["properties"]]

    @precondition(lambda self: self.exists("pgbus.batches WHERE status = 'processing'"))
    @rule(data=st.data(), outcome=st.sampled_from(["completed", "completed", "discarded"]))
    def batch_finishes(self, data, outcome):
        """All the members left of a batch finish together."""
        self.member_done(data, outcome, True)

    @precondition(
        lambda self: self.exists(f"{QTABLE} WHERE message ->> 'job_class' = '{CALLBACK_JOB}'")
    )
    @rule(data=st.data(), mode=st.sampled_from(["deliver", "deliver", "twice", "lose"]))
    def callback(self, data, mode):
        """A batch's on_complete callback (BatchFinishedJob) runs; "twice": its message stays
        (it will run again); "lose": its message is lost, the sweep must make up for it."""
        before = self.snapshot()
        callbacks = sorted(before.callbacks())
        if not callbacks:
            return
        msg_id = data.draw(st.sampled_from(callbacks), "callback")
        sid = before.queue[msg_id]["message"]["args"][0]["step_id"]
        att = before.attempts[sid]
        wf = att["workflow_id"]
        if mode == "lose":
            self.conn.execute("SELECT pgmq.delete(%s, %s::bigint)", (QUEUE, msg_id))
            self.lost.add(att["batch_id"])
            self.verify(before, self.snapshot(), {})
            return
        answer = self.one("SELECT pgbus.workflow_fan_out_finished(%s, 'pgbus')", (sid,))
        if mode == "deliver":
            self.conn.execute("SELECT pgmq.archive(%s, %s::bigint)", (QUEUE, msg_id))
        self.delivered.add(att["batch_id"])
        after = self.snapshot()
        run = before.runs[wf]
        if att["status"] != "waiting" or att["batch_id"] is None or run["current_step_id"] != sid:
            assert answer == {"ok": False, "code": "stale", "status": run["status"]}
            self.verify(before, after, {})
            return
        if self.transition("runner", "resolve", run["status"]) is None:
            assert answer == {"ok": False, "code": "not_allowed", "status": run["status"]}
            assert run["status"] == "paused"
            self.verify(before, after, {})
            return
        out = self.resolve(wf, att, before.batches.get(att["batch_id"]))
        assert out.events, "a callback came for a batch that has not finished"
        self.verify(before, after, {wf: out})
        assert answer == {
            "ok": True,
            "status": out.status,
            "workflow_class": self.class_of[wf],
            "step": "fan",
        }
        self.check_resolved(before, after, wf, att, out)

    def check_resolved(self, before: Snapshot, after: Snapshot, wf, att, out: Outcome) -> None:
        ended = after.attempts[att["step_id"]]
        batch = before.batches.get(att["batch_id"])
        if batch is None:
            assert (ended["status"], ended["error_class"]) == (
                "failed",
                "pgbus.workflow.FanOutBatchGone",
            )
            assert after.runs[wf]["pause_cause"] == "error"
        elif batch["discarded_jobs"] == 0:
            assert (ended["status"], ended["outcome"]) == ("completed", "resolve")
        else:
            assert ended["status"] == "failed"
            assert ended["outcome"] == self.on_batch_failure(wf)
            assert ended["error"] == {
                "class": "pgbus.workflow.FanOutFailed",
                "message": f"{batch['discarded_jobs']} of {batch['total_jobs']} jobs dead-lettered",
            }
            if out.status == "paused":
                assert after.runs[wf]["pause_cause"] == "error"

    @precondition(
        lambda self: self.exists(
            "pgbus.workflow_steps WHERE batch_id IS NOT NULL AND status = 'waiting'"
        )
    )
    @rule(data=st.data(), now=st.integers(0, 5))
    def batch_cleaned_up(self, data, now):
        """Now and then, the batch a fan-out step waits on is deleted (cleaned up): its
        outcome is unknown."""
        if now:
            return
        before = self.snapshot()
        waiting = [
            a["batch_id"]
            for _, a in sorted(before.attempts.items())
            if a["status"] == "waiting" and a["batch_id"] in before.batches
        ]
        if not waiting:
            return
        batch = data.draw(st.sampled_from(waiting), "batch")
        self.conn.execute("DELETE FROM pgbus.batches WHERE batch_id = %s", (batch,))
        self.verify(before, self.snapshot(), {})

    # -- rules: signals and operators --------------------------------------------------------

    @precondition(
        lambda self: self.exists(
            "pgbus.workflows WHERE current_step = 'gate' AND status NOT IN ('finished', 'cancelled')"
        )
    )
    @rule(data=st.data(), accept=st.sampled_from([True, True, True, False]))
    def go(self, data, accept):
        """The signal the gates wait for, with a fresh key, to a run at its gate."""
        wf = self.choose(self.run_ids[0], data, lambda status, step: step == "gate")
        self.signal(wf, "go", "fresh", accept, data)

    @rule(
        wf=runs,
        name=st.sampled_from(["go", "go", "go", "go", "other", "other", "  "]),
        key=st.sampled_from(["fresh", "fresh", "repeat", "blank", "none"]),
        accept=st.sampled_from([True, True, False]),
        data=st.data(),
    )
    def signal(self, wf, name, key, accept, data):
        """A signal for a run (mostly an ongoing one, more often one at its gate): a fresh
        idempotency key, one used before, a blank one, none."""
        wf = self.choose(wf, data, lambda status, step: step == "gate")
        params: dict[str, Any] = {"name": name, "payload": {"accept": accept}}
        if key == "fresh" or (key == "repeat" and not any(self.keys.values())):
            self.counter += 1
            params["idempotency_key"] = f"k{self.counter}"
            self.keys[wf].append(params["idempotency_key"])
        elif key == "repeat":
            # Mostly one this run was sent (a redelivery), else another run's.
            mine = self.keys[wf] if self.keys[wf] and data.draw(st.integers(0, 3), "mine?") else []
            used = mine or [k for w in self.run_ids for k in self.keys[w]]
            params["idempotency_key"] = data.draw(st.sampled_from(used), "key")
        elif key == "blank":
            params["idempotency_key"] = data.draw(st.sampled_from(["", "   "]), "blank key")
        before = self.snapshot()
        answer = self.one(
            "SELECT pgbus.workflow_command(%s, 'signal', 'op', 'why', %s)", (wf, Jsonb(params))
        )
        after = self.snapshot()
        run = before.runs[wf]
        status = run["status"]
        if self.transition("outside", "signal", status) is None:
            assert answer == {"ok": False, "code": "not_allowed", "status": status}
            self.verify(before, after, {})
            return
        if not name.strip():
            assert answer["ok"] is False and answer["code"] == "invalid", answer
            self.verify(before, after, {})
            return
        real_key = (params.get("idempotency_key") or "").strip() or None
        same = [g for g in before.signals_of(wf) if real_key and g["idempotency_key"] == real_key]
        if same:  # a redelivery: nothing stored, nothing said
            assert answer == {
                "ok": True,
                "status": status,
                "signal_id": same[0]["signal_id"],
                "duplicate_delivery": True,
                "woke": False,
            }
            self.verify(before, after, {})
            return
        cur = self.current(before, wf)
        sid = cur["step_id"]
        new = set(after.signals) - set(before.signals)
        assert len(new) == 1
        g = after.signals[new.pop()]
        assert (g["workflow_id"], g["name"], g["payload"], g["idempotency_key"]) == (
            wf,
            name,
            {"accept": accept},
            real_key,
        )
        assert (g["status"], g["step_name"], g["step_id"], g["claimed_at"]) == (
            "pending",
            None,
            None,
            None,
        )
        wakes = cur["status"] == "waiting" and cur["wait_for"] == name and status == "waiting"
        events = [("signal_received", sid)] + ([("step_woken", sid)] if wakes else [])
        self.verify(before, after, {wf: Outcome(events, "ready" if wakes else status)})
        assert answer == {
            "ok": True,
            "status": "ready" if wakes else status,
            "signal_id": g["signal_id"],
            "duplicate_delivery": False,
            "woke": wakes,
        }
        said = [e for e in after.events_after(before.last_event) if e["event"] == "signal_received"]
        assert said[0]["details"]["signal_id"] == g["signal_id"]
        if wakes:
            self.check_woken(after, sid)
            woke = after.events_after(before.last_event)[-1]
            assert woke["details"]["signal_id"] == g["signal_id"]

    @rule(
        wf=runs,
        pick=st.sampled_from(["legal", "legal", "legal", "any"]),
        data=st.data(),
        step=st.sampled_from(STEPS),
    )
    def operator(self, wf, pick, data, step):
        """An outside verb to a run (mostly an ongoing one, more often a waiting or paused
        one, or one at its gate): mostly one the table allows in the run's status, or any."""
        wf = self.choose(
            wf, data, lambda status, step: status in ("waiting", "paused") or step == "gate"
        )
        status = self.one("SELECT status FROM pgbus.workflows WHERE workflow_id = %s", (wf,))
        legal = [v for v in OPERATOR_VERBS if self.transition("outside", v, status)]
        verb = data.draw(
            st.sampled_from(legal if pick == "legal" and legal else OUTSIDE_VERBS), "verb"
        )
        self.command(wf, verb, step)

    @precondition(lambda self: self.exists("pgbus.workflows WHERE status = 'waiting'"))
    @rule(data=st.data())
    def operator_pauses_a_wait(self, data):
        """An operator pauses a waiting run (its wait's clock stops)."""
        waiting = self.runs_in(lambda s: s == "waiting")
        self.command(data.draw(st.sampled_from(waiting), "run"), "pause", "gate")

    @precondition(
        lambda self: self.exists(
            "pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id"
            " WHERE w.status = 'paused' AND s.status = 'waiting'"
        )
    )
    @rule(data=st.data())
    def operator_resumes(self, data):
        """An operator resumes a run paused while its step waited."""
        waited = dict(
            self.conn.execute(
                "SELECT w.workflow_id, s.status = 'waiting' FROM pgbus.workflows w"
                " JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id"
            )
        )
        paused = [w for w in self.runs_in(lambda s: s == "paused") if waited[w]]
        self.command(data.draw(st.sampled_from(paused), "run"), "resume", "gate")

    def command(self, wf: UUID, verb: str, step: str) -> None:
        """pgbus.workflow_command by an operator, checked."""
        before = self.snapshot()
        run = before.runs[wf]
        status = run["status"]
        cur = self.current(before, wf)
        sid = cur["step_id"]
        params = {"step": step} if verb == "resume_at" else {}
        answer = self.one(
            "SELECT pgbus.workflow_command(%s, %s, 'op', 'why', %s)", (wf, verb, Jsonb(params))
        )
        after = self.snapshot()
        to = self.transition("outside", verb, status)
        if to is None:  # refused: nothing changed
            assert answer == {"ok": False, "code": "not_allowed", "status": status}
            self.verify(before, after, {})
            return
        assert answer["ok"] is True, answer
        now = after.attempts[sid]
        woken = cur["status"] == "scheduled" and cur["waiting_since"] is not None
        if verb == "pause":
            out = Outcome([("paused", sid)], "paused")
        elif verb == "cancel":
            out = Outcome([("cancelled", None)], "cancelled")
        elif verb == "skip":
            out = self.advance(cur["step_name"], [("step_skipped", sid)])
        elif verb == "resume_at":
            out = Outcome([("resumed_at", sid), ("step_scheduled", NEW)], "ready", step)
        elif cur["status"] == "running":  # resume: the step carries on
            out = Outcome([("resumed", sid)], "running")
        elif cur["status"] == "waiting":  # resume: it waits again, and settles its wait
            if cur["batch_id"] is not None:
                out = self.resolve(wf, cur, before.batches.get(cur["batch_id"]))
            elif cur["timed_out"] or self.pending_go(before, wf):
                out = Outcome([("step_woken", sid)], "ready")
            else:
                out = Outcome([], "waiting")
            out.events[:0] = [("resumed", sid)]
            self.looked[sid] = 0
        elif cur["status"] in ("completed", "skipped"):  # its end, said while paused
            out = self.advance(cur["step_name"], [("resumed", sid)])
        else:  # failed, interrupted, stalled, superseded: the same step again
            out = Outcome([("resumed", sid), ("step_scheduled", NEW)], "ready", cur["step_name"])
        self.verify(before, after, {wf: out})
        assert answer["status"] == out.status, (answer, out)
        # The table's status, or a documented refinement (resume carries on with what the
        # run was doing; skip of the last step finishes).
        assert out.status == to or verb in ("resume", "skip"), (verb, to, out)
        said = next(e for e in after.events_after(before.last_event) if e["workflow_id"] == wf)
        assert (said["actor"], said["reason"]) == ("op", "why")
        if verb == "pause":
            assert after.runs[wf]["pause_cause"] == "manual"
            if woken:  # woken but not yet run: it waits again, its message gone
                assert now["status"] == "waiting" and cur["msg_id"] not in after.queue
                self.check_paused_clock(before, after, sid)
            elif cur["status"] == "scheduled":
                assert now["status"] == "superseded" and cur["msg_id"] not in after.queue
            elif cur["status"] == "waiting":
                assert now["status"] == "waiting"
                self.check_paused_clock(before, after, sid)
                if cur["wait_deadline"] is not None:
                    left = cur["wait_deadline"] - after.clock
                    assert abs((now["wait_remaining"] - left).total_seconds()) < 5
        elif verb == "cancel":
            if cur["status"] == "waiting":
                assert (now["status"], now["outcome"]) == ("cancelled", "cancel")
            elif cur["status"] == "scheduled":
                assert now["status"] == "superseded"
        elif verb == "resume_at" and cur["status"] in ("scheduled", "running", "waiting"):
            assert now["status"] == "superseded"
        elif verb == "skip":
            assert (now["status"], now["outcome"]) == ("skipped", "skip")
        elif verb == "resume" and cur["status"] == "waiting":
            if cur["batch_id"] is not None:
                if out.events[1:]:
                    self.check_resolved(before, after, wf, cur, out)
            elif cur["wait_remaining"] is not None:
                # Time spent paused does not count against the wait.
                assert close(now["wait_deadline"], after.clock + cur["wait_remaining"])
                assert now["wait_remaining"] is None
            if out.status == "ready" and out.new_step is None:
                self.check_woken(after, sid)

    @precondition(
        lambda self: self.exists(
            "pgbus.workflow_steps WHERE status = 'waiting' AND wait_deadline > clock_timestamp()"
            " + interval '31 minutes'"
        )
    )
    @rule(data=st.data())
    def time_passes(self, data):
        """Half an hour goes by for a waiting gate (its deadline and waiting_since move back)."""
        before = self.snapshot()
        waits = sorted(
            k
            for k, a in before.attempts.items()
            if a["status"] == "waiting"
            and a["wait_deadline"] is not None
            and a["wait_deadline"] > before.clock + timedelta(minutes=31)
        )
        sid = data.draw(st.sampled_from(waits), "waiting attempt")
        self.conn.execute(
            "UPDATE pgbus.workflow_steps SET wait_deadline = wait_deadline - interval '30 minutes',"
            " waiting_since = waiting_since - interval '30 minutes' WHERE step_id = %s",
            (sid,),
        )

    @precondition(lambda self: self.exists("pgbus.workflows WHERE status = 'waiting'"))
    @rule(wf=runs, data=st.data(), waiting=st.sampled_from([True, True, False]))
    def expire_wait(self, wf, data, waiting):
        """pgbus.workflow_expire_wait: the wait ends now, as its timeout would (mostly said
        to a run waiting at its gate: a fan-out step has no wait_timeout)."""
        before = self.snapshot()
        if waiting:
            step = dict(self.conn.execute("SELECT workflow_id, current_step FROM pgbus.workflows"))
            waits = [w for w in self.runs_in(lambda s: s == "waiting") if step[w] == "gate"]
            wf = data.draw(st.sampled_from(waits), "run") if waits else wf
        answer = self.one("SELECT pgbus.workflow_expire_wait(%s, 'op')", (wf,))
        after = self.snapshot()
        run = before.runs[wf]
        cur = self.current(before, wf)
        if run["status"] != "waiting" or cur["status"] != "waiting":
            assert answer == {"ok": False, "code": "not_allowed", "status": run["status"]}
            self.verify(before, after, {})
            return
        out = self.time_out(wf, cur)
        self.verify(before, after, {wf: out})
        assert answer == {"ok": True, "status": out.status}
        self.check_timed_out(before, after, wf, cur, out)

    def check_timed_out(self, before, after, wf, cur, out: Outcome) -> None:
        now = after.attempts[cur["step_id"]]
        action = self.on_timeout(wf, cur["step_name"])
        if action == "run":
            assert now["timed_out"] is True
            self.check_woken(after, cur["step_id"])
        elif action == "pause":
            assert (now["status"], now["error_class"]) == ("failed", "pgbus.workflow.WaitTimedOut")
            assert after.runs[wf]["pause_cause"] == "error"
        else:
            assert now["status"] == attempt_status(action, False)

    @precondition(
        lambda self: self.exists(
            "pgbus.workflows WHERE status IN ('waiting', 'running')"
            " OR (status = 'paused' AND current_step = 'gate')"
        )
    )
    @rule(
        data=st.data(),
        expire=st.booleans(),
        callbacks_old=st.booleans(),
        threshold=st.sampled_from([3600, 3600, 0]),
        action=st.sampled_from(STALL_ACTIONS),
    )
    def sweep(self, data, expire, callbacks_old, threshold, action):
        """The dispatcher's sweep, after (maybe) a wait deadline moved into the past and the
        finished batches made older than resend_after; a threshold of 0 stalls every running
        attempt."""
        snap = self.snapshot()
        if expire:
            due = sorted(
                a["step_id"]
                for a in snap.attempts.values()
                if a["status"] == "waiting" and a["wait_deadline"] is not None
            )
            if due:
                sid = data.draw(st.sampled_from(due), "deadline passed")
                self.conn.execute(
                    "UPDATE pgbus.workflow_steps SET wait_deadline = clock_timestamp()"
                    " - interval '1 second' WHERE step_id = %s",
                    (sid,),
                )
        if callbacks_old:
            self.conn.execute(
                "UPDATE pgbus.batches SET finished_at = finished_at - interval '2 minutes'"
                " WHERE status = 'finished'"
            )
        before = self.snapshot()
        answer = self.one(
            "SELECT pgbus.workflow_sweep(make_interval(secs => %s), %s, interval '30 days',"
            " interval '1 minute')",
            (threshold, action),
        )
        after = self.snapshot()
        outcomes: dict[UUID, Outcome] = {}
        stalled, timed_out, resolved = [], [], 0
        for wf, run in before.runs.items():
            cur = self.current(before, wf)
            if (
                threshold == 0
                and run["status"] in ("running", "paused")
                and cur["status"] == "running"
            ):
                outcomes[wf] = self.stall(run, cur, action)
                stalled.append(str(wf))
            elif (
                run["status"] == "waiting"
                and cur["status"] == "waiting"
                and cur["wait_deadline"] is not None
                and cur["wait_deadline"] < before.clock
            ):
                outcomes[wf] = self.time_out(wf, cur)
                timed_out.append(
                    {
                        "workflow_id": str(wf),
                        "workflow_class": self.class_of[wf],
                        "step": cur["step_name"],
                        "action": self.on_timeout(wf, cur["step_name"]),
                        "status": outcomes[wf].status,
                    }
                )
            elif run["status"] == "waiting" and cur["status"] == "waiting" and cur["batch_id"]:
                batch = before.batches.get(cur["batch_id"])
                if batch is None or (
                    batch["status"] == "finished"
                    and batch["finished_at"] < before.clock - timedelta(minutes=1)
                ):
                    out = self.resolve(wf, cur, batch)
                    out.events[:0] = [("fan_out_repaired", cur["step_id"])]
                    outcomes[wf] = out
                    resolved += 1
        self.verify(before, after, outcomes)
        assert sorted(s["workflow_id"] for s in answer["stalled"]) == sorted(stalled)
        answered = [
            {k: v for k, v in t.items() if k not in ("was", "error_class")}
            for t in answer["timed_out"]
        ]
        assert sorted(answered, key=str) == sorted(timed_out, key=str)
        assert (answer["resolved"], answer["resent"], answer["deleted"]) == (resolved, 0, 0)
        for t in timed_out:
            wf = UUID(t["workflow_id"])
            self.check_timed_out(before, after, wf, self.current(before, wf), outcomes[wf])

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def waiting_steps_hold_together(self):
        snap = self.snapshot()
        # The trail is append-only.
        now = {
            e["event_id"]: (e["workflow_id"], e["event"], e["step_id"], e["actor"])
            for e in snap.events
        }
        for event_id, seen in self.seen_events.items():
            assert now.get(event_id) == seen, f"event {event_id} changed or vanished"
        high = max(self.seen_events, default=0)
        assert all(i > high for i in now.keys() - self.seen_events.keys())
        self.seen_events = now
        assert set(snap.runs) == set(self.run_ids)

        by_attempt: dict[int, list[str]] = defaultdict(list)
        received: dict[UUID, list[int]] = defaultdict(list)
        for e in snap.events:
            if e["step_id"] is not None:
                by_attempt[e["step_id"]].append(e["event"])
            if e["event"] == "signal_received":
                received[e["workflow_id"]].append(e["details"]["signal_id"])
        attempts_of: dict[UUID, list[dict]] = defaultdict(list)
        for a in snap.attempts.values():
            attempts_of[a["workflow_id"]].append(a)
        callback_steps = {q["message"]["args"][0]["step_id"] for q in snap.callbacks().values()}

        for wf, run in snap.runs.items():
            status = run["status"]
            mine = snap.signals_of(wf)
            assert status in STATUSES
            assert (status == "paused") == (run["pause_cause"] is not None)
            assert (status in ENDED) == (run["ended_at"] is not None)
            # An ended run never changes, nor do its signals.
            frozen = (run, tuple(sorted(map(str, mine))))
            if wf in self.ended:
                assert frozen == self.ended[wf], f"{wf} changed after it ended"
            elif status in ENDED:
                self.ended[wf] = frozen
            cur = snap.attempts[run["current_step_id"]]
            assert cur["workflow_id"] == wf and cur["step_name"] == run["current_step"]
            live = [
                a for a in attempts_of[wf] if a["status"] in ("scheduled", "running", "waiting")
            ]
            assert [a["step_id"] for a in live] in ([], [cur["step_id"]]), live
            # The run's status and its current attempt agree.
            assert (status == "waiting") <= (cur["status"] == "waiting"), (status, cur)
            if cur["status"] == "waiting":
                assert status in ("waiting", "paused"), (status, cur)
            if status == "ready":
                assert cur["status"] == "scheduled" and cur["msg_id"] in snap.queue
                msg = snap.queue[cur["msg_id"]]
                assert msg["vt"] <= max(cur["scheduled_at"], snap.clock) + timedelta(seconds=1)
            if status == "running":
                assert cur["status"] == "running"
            if cur["status"] == "running":
                assert status in ("running", "paused", "cancelled"), (status, cur)
            if status in ("paused", "cancelled"):
                assert cur["status"] != "scheduled"
            if status == "finished":
                assert not live
            # Waiting attempts: a gate with its deadline (or what is left of it while paused),
            # a fan-out step on its batch, with no deadline (it has no wait_timeout).
            for a in attempts_of[wf]:
                if a["step_name"] == "fan":
                    assert a["wait_deadline"] is None and a["wait_remaining"] is None, a
                    assert a["signal_id"] is None and a["wait_for"] is None
                elif a["step_name"] == "last":
                    assert a["signal_id"] is None and a["waiting_since"] is None
                    assert a["batch_id"] is None and a["wait_deadline"] is None
                else:
                    assert a["batch_id"] is None
                    if a["status"] == "waiting":
                        assert a["wait_for"] == "go"
                        if status == "waiting":
                            assert a["wait_deadline"] is not None and a["wait_remaining"] is None
                        else:
                            assert a["wait_deadline"] is None and a["wait_remaining"] is not None
            if status == "waiting" and cur["step_name"] == "gate":
                # NO LOST WAKE-UP: every pending "go" was looked at and refused by the gate
                # when it last settled its wait (resume settles it having seen nothing).
                pending = self.pending_go(snap, wf)
                looked = self.looked.get(cur["step_id"], 0)
                assert all(g["signal_id"] <= looked for g in pending), (pending, looked)
                assert all(g["payload"]["accept"] is False for g in pending), pending
                assert not cur["timed_out"]
            if status == "waiting" and cur["step_name"] == "fan":
                batch = snap.batches.get(cur["batch_id"])
                if batch is not None and batch["status"] == "finished":
                    # Finished and unresolved only while its callback is still on its way
                    # (or lost: the sweep repairs it).
                    assert cur["batch_id"] not in self.delivered, batch
                    assert cur["step_id"] in callback_steps or cur["batch_id"] in self.lost
            # Signals: one per key, pending -> claimed (by the gate) -> consumed (when the gate
            # attempt that took it completed); the trail tells each stored one.
            keys = [g["idempotency_key"] for g in mine if g["idempotency_key"] is not None]
            assert len(keys) == len(set(keys)), keys
            assert all(k.strip() == k and k for k in keys)
            assert sorted(received[wf]) == sorted(g["signal_id"] for g in mine)
            holders = defaultdict(int)
            for g in mine:
                if g["status"] == "pending":
                    assert g["step_id"] is None and g["claimed_at"] is None
                    assert g["consumed_at"] is None
                    continue
                assert g["step_name"] == "gate" and g["claimed_at"] is not None
                holder = snap.attempts[g["step_id"]]
                holders[g["step_id"]] += 1
                assert holder["workflow_id"] == wf and holder["step_name"] == "gate"
                assert holder["signal_id"] == g["signal_id"]
                if g["status"] == "claimed":
                    assert g["consumed_at"] is None
                    assert holder["status"] not in ("completed", "skipped")
                else:
                    assert g["status"] == "consumed" and g["consumed_at"] is not None
                    assert holder["status"] in ("completed", "skipped"), holder
            assert all(n == 1 for n in holders.values()), holders  # one signal per attempt
            claimed = [g for g in mine if g["status"] == "claimed"]
            assert len(claimed) <= 1, claimed
            # Each attempt's trail: scheduled, started, then waiting / woken / ended in order.
            for a in attempts_of[wf]:
                self.check_trail(a, by_attempt[a["step_id"]])
        # Every step message is its attempt's, one per attempt.
        owners = [int(q["message"]["kwargs"]["step_id"]) for q in snap.step_messages().values()]
        assert len(owners) == len(set(owners))
        for m, q in snap.step_messages().items():
            assert snap.attempts[int(q["message"]["kwargs"]["step_id"])]["msg_id"] == m

    def check_trail(self, a: dict, kinds: list[str]) -> None:
        state = None
        for kind in kinds:
            if kind == "step_scheduled":
                assert state is None, kinds
                state = "scheduled"
            elif kind == "step_started":
                assert state == "scheduled", kinds
                state = "running"
            elif kind == "step_waiting":
                assert state == "running", kinds
                state = "waiting"
            elif kind == "step_woken":
                assert state == "waiting", kinds
                state = "scheduled"
            elif kind == "paused" and state == "scheduled" and "step_waiting" in kinds:
                state = "waiting"  # woken, then paused before it ran: it waits again
            elif kind in STEP_ENDS:
                assert state in ("running", "waiting"), kinds
                state = "ended"
            elif kind == "stall_detected":
                assert state == "running", kinds
                state = "ended"
            elif kind in ("fan_out_opened", "signal_claimed"):
                assert state == "running", kinds
            elif kind in ("wait_timed_out", "fan_out_finished", "fan_out_repaired"):
                assert state == "waiting", kinds
        allowed = {
            "scheduled": {"scheduled", "superseded"},
            "running": {"running", "superseded"},
            "waiting": {"waiting", "superseded", "cancelled"},
            "ended": {
                "completed",
                "skipped",
                "failed",
                "interrupted",
                "cancelled",
                "stalled",
                "superseded",
            },
        }[state]
        assert a["status"] in allowed, (a["status"], kinds)
        assert (a["waiting_since"] is not None) == ("step_waiting" in kinds), kinds


def register(conn: psycopg.Connection) -> None:
    for cls, (on_timeout, on_batch_failure) in CLASSES.items():
        conn.execute(
            "SELECT pgbus.workflow_register(%s, %s, 'd1', %s)",
            (cls, Jsonb(definition(on_timeout, on_batch_failure)), QUEUE),
        )
    conn.execute("SELECT pgbus.ensure_queue(%s)", (QUEUE,))
    conn.execute("SELECT pgbus.ensure_queue(%s)", (MEMBERS,))


def test_waiting_steps_follow_the_transition_table(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        register(conn)
        WaitingMachine.conn = conn
        try:
            run_state_machine_as_test(
                WaitingMachine,
                settings=settings(
                    max_examples=50,
                    stateful_step_count=30,
                    deadline=None,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        finally:
            del WaitingMachine.conn
