"""Workflow runs as a state machine: random worker outcomes and operator verbs, interleaved.

Hypothesis drives the SQL directly (one autocommit connection): a fake worker reads step
messages with pgbus.read_jobs (which begins attempts), ends them with every runner verb (with
or without an error), dies while holding them (the message is delivered again), or ends them
late after it was given up for dead; an operator says every outside verb; the sweep stalls
running attempts. Each action is checked against the transition table (and the refinements
the SQL documents) and against the exact rows, messages and audit events it must produce; the
invariants check every run after every action.
"""

from __future__ import annotations

import dataclasses
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

QUEUE = "pgbus_stateful"
QTABLE = f"pgmq.q_{QUEUE}"
WORKFLOW = "StatefulWF"
STEPS = ("a", "b", "c")
NEXT_STEP = {"a": "b", "b": "c", "c": None}
STATUSES = {"ready", "running", "waiting", "paused", "finished", "cancelled"}
ENDED = {"finished", "cancelled"}
RUNNER_VERBS = ("complete", "skip", "reattempt", "pause", "cancel", "finished")
# The worker's verb, drawn with complete weighted up so that runs get to their end.
WORKER_VERBS = ("complete", "complete", "complete", *RUNNER_VERBS)
OUTSIDE_VERBS = ("pause", "cancel", "resume", "resume_at", "run_now", "reschedule", "rerun")
# What an operator says to a run just before its worker ends or dies (None: nothing).
OPERATOR_FIRST = (None, None, "pause", "pause", "cancel")
STALL_ACTIONS = ("pause", "reattempt", "cancel")
# Events that set a run's status; the others (step ends, stall_detected, rescheduling, rerun)
# leave it to the event that follows in the same transaction, or leave it as it is.
STATUS_EVENTS = {
    "started": "ready",
    "step_scheduled": "ready",
    "step_started": "running",
    "paused": "paused",
    "resumed": "running",  # carries on with the running attempt, unless the next event says else
    "finished": "finished",
    "cancelled": "cancelled",
}
# After a run ended: a rerun, and the refused end of the attempt that ran when it was cancelled.
AFTER_END = {
    "finished": {"rerun"},
    "cancelled": {
        "rerun",
        "step_completed",
        "step_skipped",
        "step_failed",
        "step_interrupted",
        "step_cancelled",
    },
}
NEW = "<the run's new attempt>"
SNAPSHOT = f"""
    SELECT * FROM pgbus.workflows;
    SELECT * FROM pgbus.workflow_steps;
    SELECT msg_id, vt, read_ct, message FROM {QTABLE};
    SELECT event_id, workflow_id, event, step_id, actor, reason, details
    FROM pgbus.workflow_events ORDER BY event_id;
    SELECT clock_timestamp() AS clock
"""


def attempt_status(verb: str, failed: bool) -> str:
    """pgbus.workflow_attempt_status."""
    if failed:
        return "failed"
    return {"complete": "completed", "finished": "completed", "skip": "skipped"}.get(
        verb, "cancelled" if verb == "cancel" else "interrupted"
    )


def honoured(attempt: dict[str, Any]) -> bool:
    """The attempt ended with complete or skip (with or without an error: a skip can be an
    exception policy's decision). Said while its run was paused, that end is "recorded and
    honoured, but nothing is scheduled until resume" (the transition table): resume then
    goes on after the step, as the verb would have on a running run."""
    return attempt["status"] in ("completed", "skipped", "failed") and attempt["outcome"] in (
        "complete",
        "skip",
    )


def step_event(verb: str, failed: bool) -> str:
    return "step_failed" if failed else "step_" + attempt_status(verb, False)


def changed(before: dict, after: dict) -> set:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@dataclasses.dataclass(frozen=True)
class Snapshot:
    runs: dict[UUID, dict[str, Any]]
    attempts: dict[int, dict[str, Any]]
    queue: dict[int, dict[str, Any]]
    events: list[dict[str, Any]]
    last_event: int
    clock: datetime

    def events_after(self, event_id: int) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event_id"] > event_id]


@dataclasses.dataclass
class Expect:
    """What an action may change: these rows and messages, exactly these events (per run),
    and one new attempt (of the given step) per run in new_attempts."""

    runs: set = dataclasses.field(default_factory=set)
    attempts: set = dataclasses.field(default_factory=set)
    msgs: set = dataclasses.field(default_factory=set)
    events: dict[UUID, list[tuple[str, Any]]] = dataclasses.field(default_factory=dict)
    new_attempts: dict[UUID, str] = dataclasses.field(default_factory=dict)


class WorkflowMachine(RuleBasedStateMachine):
    conn: ClassVar[psycopg.Connection]
    transitions: ClassVar[dict[tuple[str, str, str], str | None]] = {}  # the SQL's answers

    runs = Bundle("runs")
    held = Bundle("held")  # running attempts a fake worker holds
    released = Bundle("released")  # attempts whose worker ended them or was given up for dead

    def __init__(self) -> None:
        super().__init__()
        self.conn.execute("TRUNCATE pgbus.workflows CASCADE")
        self.conn.execute("SELECT pgmq.purge_queue(%s)", (QUEUE,))
        self.conn.execute(f"TRUNCATE pgmq.a_{QUEUE}")
        self.run_ids: list[UUID] = []
        self.statuses: dict[UUID, str] = {}  # as the invariants last saw them
        self.seen_events: dict[int, tuple] = {}
        self.ended: dict[UUID, str] = {}

    # -- reading the database --------------------------------------------------------------

    def one(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql, params).fetchone()[0]

    def snapshot(self) -> Snapshot:
        """Everything, in one round trip."""
        cur = self.conn.cursor(row_factory=dict_row)
        cur.execute(SNAPSHOT)
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall())
        runs, attempts, queue, events, [clock] = results
        # The run's error_class is derived (its current attempt's while it is ongoing, kept by
        # triggers): checked here on every snapshot, and left out of the rows an action is
        # expected to change.
        by_step = {a["step_id"]: a for a in attempts}
        for r in runs:
            current = by_step.get(r["current_step_id"])
            error_class = r.pop("error_class")
            if r["ended_at"] is None:
                assert error_class == (current and current["error_class"]), r
        return Snapshot(
            {r["workflow_id"]: r for r in runs},
            {r["step_id"]: r for r in attempts},
            {r["msg_id"]: r for r in queue},
            events,
            max((e["event_id"] for e in events), default=0),
            clock["clock"],
        )

    def transition(self, kind: str, verb: str, status: str) -> str | None:
        key = (kind, verb, status)
        if key not in self.transitions:
            self.transitions[key] = self.one("SELECT pgbus.workflow_transition(%s, %s, %s)", key)
        return self.transitions[key]

    def current(self, snap: Snapshot, run: UUID) -> dict[str, Any] | None:
        return snap.attempts.get(snap.runs[run]["current_step_id"])

    # -- checking an action ----------------------------------------------------------------

    def verify(self, before: Snapshot, after: Snapshot, exp: Expect) -> dict[UUID, int]:
        """Exactly the expected rows, messages and events changed; returns the new attempts."""
        assert changed(before.runs, after.runs) == exp.runs
        assert {k for k in before.attempts if before.attempts[k] != after.attempts.get(k)} == (
            exp.attempts
        )
        created = {k: a for k, a in after.attempts.items() if k not in before.attempts}
        new_by_run = {a["workflow_id"]: k for k, a in created.items()}
        assert len(new_by_run) == len(created), "two new attempts for one run"
        assert {a["workflow_id"]: a["step_name"] for a in created.values()} == exp.new_attempts
        for sid, a in created.items():
            run = after.runs[a["workflow_id"]]
            previous = [
                b["attempt"]
                for b in before.attempts.values()
                if b["workflow_id"] == a["workflow_id"] and b["step_name"] == a["step_name"]
            ]
            assert a["attempt"] == max(previous, default=0) + 1
            assert a["status"] == "scheduled" and a["queue"] == QUEUE
            assert a["msg_id"] in after.queue
            assert after.queue[a["msg_id"]]["message"]["kwargs"] == {
                "workflow_id": str(a["workflow_id"]),
                "step_id": sid,
            }
            assert run["status"] == "ready" and run["current_step_id"] == sid
            assert run["current_step"] == a["step_name"] and run["pause_cause"] is None
        assert changed(before.queue, after.queue) == exp.msgs | {
            a["msg_id"] for a in created.values()
        }
        got: dict[UUID, list[tuple[str, Any]]] = defaultdict(list)
        for e in after.events_after(before.last_event):
            got[e["workflow_id"]].append((e["event"], e["step_id"]))
        expected = {
            run: [(name, new_by_run.get(run) if step == NEW else step) for name, step in evs]
            for run, evs in exp.events.items()
            if evs
        }
        assert dict(got) == expected
        return new_by_run

    def refinement(self, verb: str, table_to: str, got: str, why: bool) -> None:
        """The status a verb led to is the table's, or one of the refinements the SQL
        documents (`why` says the refinement applies)."""
        assert got == table_to or why, (verb, table_to, got)

    # -- the fake worker -------------------------------------------------------------------

    def taken(self, before: Snapshot) -> int | None:
        """The message a read of one took: one of those that became visible first (several
        can share that moment), or None when nothing was visible."""
        due = [m for m in before.queue.values() if m["vt"] <= before.clock]
        if not due:
            return None
        first = min(m["vt"] for m in due)
        candidates = [m["msg_id"] for m in due if m["vt"] == first]
        untouched = {
            msg_id
            for msg_id, read_ct in self.conn.execute(
                f"SELECT msg_id, read_ct FROM {QTABLE} WHERE msg_id = ANY(%s)", (candidates,)
            )
            if read_ct == before.queue[msg_id]["read_ct"]
        }
        [msg_id] = set(candidates) - untouched
        return msg_id

    def deliver(self, before: Snapshot, msg_id: int | None, rows: list, stall_action: str):
        """Checks one read of message `msg_id` (None: nothing was visible) by read_jobs;
        returns the attempt it began, if any."""
        after = self.snapshot()
        exp = Expect()
        if msg_id is None:
            assert rows == []
            self.verify(before, after, exp)
            return None
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
            exp.msgs = {msg_id}
            self.verify(before, after, exp)
            assert msg_id not in after.queue
            return None
        if att["status"] == "running" and run["status"] not in ("ready", "running", "paused"):
            # Its run ended while it ran (cancelled): the attempt ends with it, nothing else.
            assert rows == []
            exp.msgs = {msg_id}
            exp.attempts = {sid}
            self.verify(before, after, exp)
            assert after.attempts[sid]["status"] == "superseded"
            assert msg_id not in after.queue
            return None
        if att["status"] == "running":  # delivered again while it ran: its worker died
            # (Every body read here started at once: a stall, also while the run is paused.)
            assert run["status"] in ("running", "paused")
            assert len(rows) == 1
            context = rows[0]["context"]
            status = self.expect_stall(exp, run, att, stall_action, archived=True)
            self.verify(before, after, exp)
            assert context["stalled"] is True
            assert (context["detection"], context["action"], context["status"]) == (
                "redelivery",
                stall_action,
                status,
            )
            assert (context["workflow_id"], context["step_name"]) == (str(wf), att["step_name"])
            self.check_stalled(after, run, att, stall_action, status)
            return None
        if att["scheduled_at"] > before.clock:  # rescheduled after it was sent: hidden again
            assert rows == []
            exp.msgs = {msg_id}
            self.verify(before, after, exp)
            assert after.queue[msg_id]["vt"] == att["scheduled_at"]
            return None
        assert len(rows) == 1 and rows[0]["msg_id"] == msg_id
        context = rows[0]["context"]
        assert (context["step_id"], context["step_name"], context["workflow_id"]) == (
            sid,
            att["step_name"],
            str(wf),
        )
        exp.runs, exp.attempts, exp.msgs = {wf}, {sid}, {msg_id}
        exp.events = {wf: [("step_started", sid)]}
        self.verify(before, after, exp)
        began = after.attempts[sid]
        assert began["status"] == "running" and began["started_at"] is not None
        assert (began["worker"], began["app_revision"]) == ("w:1", "rev")
        assert after.runs[wf]["status"] == "running"
        return sid

    def expect_stall(
        self, exp: Expect, run: dict, att: dict, action: str, *, archived: bool
    ) -> str:
        """pgbus.workflow_stall's effects on `exp`; returns the run's new status."""
        wf, sid = run["workflow_id"], att["step_id"]
        exp.attempts.add(sid)
        if archived:
            exp.msgs.add(att["msg_id"])
        if run["status"] == "paused":  # paused by an operator: resume decides
            exp.events[wf] = [("stall_detected", sid)]
            return "paused"
        exp.runs.add(wf)
        if action == "pause":
            exp.events[wf] = [("stall_detected", sid), ("paused", sid)]
            return "paused"
        if action == "cancel":
            exp.events[wf] = [("stall_detected", sid), ("cancelled", None)]
            return "cancelled"
        exp.events[wf] = [("stall_detected", sid), ("step_scheduled", NEW)]
        exp.new_attempts[wf] = att["step_name"]
        return "ready"

    def check_stalled(self, after: Snapshot, run: dict, att: dict, action: str, status: str):
        stalled = after.attempts[att["step_id"]]
        assert (stalled["status"], stalled["outcome"]) == ("stalled", action)
        assert stalled["error_class"] == "pgbus.StepStalled"
        now = after.runs[run["workflow_id"]]
        assert now["status"] == status
        if run["status"] == "running" and action == "pause":
            assert now["pause_cause"] == "stall"

    def end(self, sid: int, verb: str, failed: bool, wait: timedelta | None) -> None:
        """pgbus.workflow_end_step by the attempt's worker, checked."""
        # An error comes with the verb an exception policy chose, as the runner sends it.
        failed = failed and verb in ("pause", "reattempt", "cancel", "skip")
        before = self.snapshot()
        att = before.attempts[sid]
        wf = att["workflow_id"]
        run = before.runs[wf]
        output = {"done": sid} if verb in ("complete", "finished") else None
        error = {"class": "Boom", "message": "policy decided"} if failed else None
        answer = self.one(
            "SELECT pgbus.workflow_end_step(%s, %s, %s, %s, %s::interval)",
            (sid, verb, Jsonb(output) if output else None, Jsonb(error) if error else None, wait),
        )
        after = self.snapshot()
        exp = Expect()
        msg = {att["msg_id"]} & before.queue.keys()  # archived in every case
        exp.msgs = set(msg)
        if att["status"] != "running" or run["current_step_id"] != sid:
            assert answer == {"ok": False, "code": "stale", "status": run["status"]}
            self.verify(before, after, exp)
            return
        to = self.transition("runner", verb, run["status"])
        event = (step_event(verb, failed), sid)
        exp.attempts = {sid}
        ended = after.attempts[sid]
        if to is None:
            # Refused: recorded (the attempt is superseded, its end in the trail), not honoured.
            assert answer == {"ok": False, "code": "not_allowed", "status": run["status"]}
            exp.events = {wf: [event]}
            self.verify(before, after, exp)
            assert (ended["status"], ended["outcome"]) == ("superseded", verb)
            return
        assert answer["ok"] is True, answer
        assert ended["status"] == attempt_status(verb, failed) and ended["outcome"] == verb
        assert ended["output"] == output and ended["error"] == error
        assert ended["ended_at"] is not None
        step = att["step_name"]
        events = [event]
        if to == "paused":
            status = "paused"
            if run["status"] != "paused":
                exp.runs = {wf}
                events.append(("paused", sid))
        elif to in ENDED:
            status = to
            exp.runs = {wf}
            events.append((to, None))
        elif verb == "reattempt":
            status = "ready"
            exp.runs = {wf}
            exp.new_attempts = {wf: step}
            events.append(("step_scheduled", NEW))
        else:  # complete, skip: the next step, or the end of the run
            exp.runs = {wf}
            if NEXT_STEP[step]:
                status = "ready"
                exp.new_attempts = {wf: NEXT_STEP[step]}
                events.append(("step_scheduled", NEW))
            else:
                status = "finished"
                events.append(("finished", None))
        exp.events = {wf: events}
        new = self.verify(before, after, exp)
        now = after.runs[wf]
        assert answer["status"] == status == now["status"]
        self.refinement(
            verb,
            to,
            status,
            verb in ("complete", "skip") and status == "finished" and not NEXT_STEP[step],
        )
        if to == "paused" and run["status"] == "running":
            assert now["pause_cause"] == ("error" if failed else "manual")
        elif to == "paused":
            assert now["pause_cause"] == run["pause_cause"]
        if verb == "reattempt" and status == "ready" and wait and wait > timedelta(minutes=1):
            assert after.attempts[new[wf]]["scheduled_at"] > after.clock + wait / 2

    # -- rules ------------------------------------------------------------------------------

    def start(self) -> UUID:
        before = self.snapshot()
        wf = self.one("SELECT workflow_id FROM pgbus.workflow_start(%s)", (WORKFLOW,))
        after = self.snapshot()
        self.verify(
            before,
            after,
            Expect(
                runs={wf},
                events={wf: [("started", None), ("step_scheduled", NEW)]},
                new_attempts={wf: "a"},
            ),
        )
        self.run_ids.append(wf)
        return wf

    @initialize(target=runs, n=st.integers(1, 2))
    def start_runs(self, n):
        return multiple(*(self.start() for _ in range(n)))

    @precondition(lambda self: len(self.run_ids) < 3)
    @rule(target=runs)
    def start_another(self):
        return self.start()

    @rule(target=held)
    def worker_reads(self):
        self.conn.execute(
            f"UPDATE {QTABLE} q SET vt = now() FROM pgbus.workflow_steps s"
            " WHERE s.msg_id = q.msg_id AND s.status = 'scheduled'"
        )
        # One message per read, as deliver() checks a read: pgbus.read_jobs reads on past the
        # messages it leaves out (pgTAP runs_read_jobs_past_left_out covers that), so every
        # visible message but the first is hidden for the read and shown again after it.
        later = [
            m
            for (m,) in self.conn.execute(
                f"SELECT msg_id FROM {QTABLE} WHERE vt <= clock_timestamp() ORDER BY vt, msg_id"
                " OFFSET 1"
            )
        ]
        self.conn.execute(
            f"UPDATE {QTABLE} SET vt = vt + interval '1 day' WHERE msg_id = ANY(%s)", (later,)
        )
        before = self.snapshot()
        rows = (
            self.conn.cursor(row_factory=dict_row)
            .execute("SELECT * FROM pgbus.read_jobs(ARRAY[%s], 3600, 1, 'w:1', 'rev')", (QUEUE,))
            .fetchall()
        )
        began = self.deliver(before, self.taken(before), rows, "pause")
        self.conn.execute(
            f"UPDATE {QTABLE} SET vt = vt - interval '1 day' WHERE msg_id = ANY(%s)", (later,)
        )
        return multiple() if began is None else multiple(began)

    @rule(
        target=released,
        sid=consumes(held),
        verb=st.sampled_from(WORKER_VERBS),
        failed=st.booleans(),
        wait=st.sampled_from([None, timedelta(0), timedelta(hours=1)]),
        operator_first=st.sampled_from(OPERATOR_FIRST),
    )
    def worker_ends(self, sid, verb, failed, wait, operator_first):
        """The worker ends its step with a verb (an error: an exception policy decided it);
        `operator_first`: an operator said this verb to the run just before, while it ran."""
        self.operator_acts_first(sid, operator_first)
        self.end(sid, verb, failed, wait)
        return sid

    @rule(
        sid=consumes(released),
        verb=st.sampled_from(WORKER_VERBS),
        failed=st.booleans(),
        wait=st.sampled_from([None, timedelta(0)]),
    )
    def worker_ends_late(self, sid, verb, failed, wait):
        """A worker given up for dead (or ending twice) says its verb after all."""
        self.end(sid, verb, failed, wait)

    @rule(
        target=released,
        sid=consumes(held),
        action=st.sampled_from(STALL_ACTIONS),
        operator_first=st.sampled_from(OPERATOR_FIRST),
    )
    def worker_dies(self, sid, action, operator_first):
        """The worker's process is gone: its message becomes visible again and is read."""
        self.operator_acts_first(sid, operator_first)
        before = self.snapshot()
        msg_id = before.attempts[sid]["msg_id"]
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
                    "SELECT * FROM pgbus.read_jobs(ARRAY[%s], 3600, 1, 'w:2', 'rev', %s)",
                    (QUEUE, action),
                )
                .fetchall()
            )
            for m, vt in others:
                self.conn.execute(f"UPDATE {QTABLE} SET vt = %s WHERE msg_id = %s", (vt, m))
        self.deliver(before, msg_id if msg_id in before.queue else None, rows, action)
        return sid

    @rule(
        target=runs,
        wf=runs,
        pick=st.sampled_from(["legal", "legal", "any"]),
        data=st.data(),
        step=st.sampled_from([*STEPS, "zzz"]),
        at=st.sampled_from(["past", "future", "garbage"]),
    )
    def operator(self, wf, pick, data, step, at):
        """An outside verb: mostly one the table allows in the run's status, or any."""
        status = self.one("SELECT status FROM pgbus.workflows WHERE workflow_id = %s", (wf,))
        legal = [v for v in OUTSIDE_VERBS if self.transition("outside", v, status)]
        verb = data.draw(st.sampled_from(legal if pick == "legal" else OUTSIDE_VERBS), "verb")
        return multiple(*self.command(wf, verb, step, at))

    @precondition(lambda self: "paused" in self.statuses.values())
    @rule(
        data=st.data(),
        verb=st.sampled_from(["resume", "resume", "resume_at"]),
        step=st.sampled_from(STEPS),
    )
    def operator_resumes(self, data, verb, step):
        """An operator resumes a paused run (at its step, or at another)."""
        paused = [i for i, wf in enumerate(self.run_ids) if self.statuses.get(wf) == "paused"]
        i = data.draw(st.sampled_from(paused), "i, the run runs_i")
        self.command(self.run_ids[i], verb, step, "past")

    def operator_acts_first(self, sid: int, verb: str | None) -> None:
        if verb is not None:
            wf = self.one("SELECT workflow_id FROM pgbus.workflow_steps WHERE step_id = %s", (sid,))
            self.command(wf, verb, "a", "past")

    def command(self, wf: UUID, verb: str, step: str, at: str) -> list[UUID]:
        """pgbus.workflow_command by an operator, checked; returns the run a rerun started."""
        before = self.snapshot()
        run = before.runs[wf]
        status = run["status"]
        cur = self.current(before, wf)
        when = {
            "past": (before.clock - timedelta(hours=1)).isoformat(),
            "future": (before.clock + timedelta(hours=1)).isoformat(),
            "garbage": "not a time",
        }[at]
        params = {"resume_at": {"step": step}, "reschedule": {"at": when}}.get(verb, {})
        answer = self.one(
            "SELECT pgbus.workflow_command(%s, %s, 'op', 'why', %s)", (wf, verb, Jsonb(params))
        )
        after = self.snapshot()
        to = self.transition("outside", verb, status)
        exp = Expect()
        if to is None:  # refused: nothing changed
            assert answer == {"ok": False, "code": "not_allowed", "status": status}
            self.verify(before, after, exp)
            return []
        if (verb == "resume_at" and step == "zzz") or (verb == "reschedule" and at == "garbage"):
            assert answer["ok"] is False and answer["code"] == "invalid", answer
            assert answer["status"] == status
            self.verify(before, after, exp)
            return []
        assert answer["ok"] is True, answer
        if verb == "rerun":
            new = UUID(answer["workflow_id"])
            exp.runs = {new}
            exp.new_attempts = {new: "a"}
            exp.events = {new: [("started", None), ("step_scheduled", NEW)], wf: [("rerun", None)]}
            self.verify(before, after, exp)
            assert answer["status"] == status == to == after.runs[wf]["status"]
            assert after.runs[new]["rerun_of"] == wf
            self.run_ids.append(new)
            return [new]
        exp.runs = {wf}
        cur_id = cur["step_id"]
        scheduled = cur["status"] == "scheduled"
        if verb in ("pause", "cancel"):
            if scheduled:  # taken out of play, its message deleted
                exp.attempts, exp.msgs = {cur_id}, {cur["msg_id"]}
            new_status = "paused" if verb == "pause" else "cancelled"
            exp.events = {wf: [("paused", cur_id) if verb == "pause" else ("cancelled", None)]}
        elif verb == "resume":
            events = [("resumed", cur_id)]
            if cur["status"] == "running":  # paused while the step ran: it carries on
                new_status = "running"
            elif honoured(cur):  # the step's end, said while paused, honoured now
                nxt = NEXT_STEP[cur["step_name"]]
                new_status = "ready" if nxt else "finished"
                events.append(("step_scheduled", NEW) if nxt else ("finished", None))
                if nxt:
                    exp.new_attempts = {wf: nxt}
            else:  # paused with an error, interrupted, stalled, never ran: the same step again
                new_status = "ready"
                events.append(("step_scheduled", NEW))
                exp.new_attempts = {wf: run["current_step"]}
            exp.events = {wf: events}
        elif verb == "resume_at":
            new_status = "ready"
            if cur["status"] in ("scheduled", "running"):
                exp.attempts = {cur_id}
                if scheduled:
                    exp.msgs = {cur["msg_id"]}
            exp.events = {wf: [("resumed_at", cur_id), ("step_scheduled", NEW)]}
            exp.new_attempts = {wf: step}
        else:  # run_now, reschedule
            new_status = "ready"
            exp.runs = set()  # the run row stays as it is: its step moves
            exp.attempts, exp.msgs = {cur_id}, {cur["msg_id"]}
            exp.events = {wf: [("run_now" if verb == "run_now" else "rescheduled", cur_id)]}
        self.verify(before, after, exp)
        now = after.runs[wf]
        assert answer["status"] == new_status == now["status"]
        self.refinement(
            verb,
            to,
            new_status,
            verb == "resume"
            and (
                (new_status == "running" and cur["status"] == "running")
                or (new_status == "finished" and honoured(cur) and not NEXT_STEP[cur["step_name"]])
            ),
        )
        said = next(
            e for e in after.events_after(before.last_event) if e["workflow_id"] == wf
        )  # the verb's own event carries who and why
        assert (said["actor"], said["reason"]) == ("op", "why")
        if verb == "pause":
            assert now["pause_cause"] == "manual"
        if cur_id in exp.attempts and verb in ("pause", "cancel", "resume_at"):
            assert after.attempts[cur_id]["status"] == "superseded"
        if verb == "reschedule":
            assert after.attempts[cur_id]["scheduled_at"] == datetime.fromisoformat(when)
        return []

    @rule(threshold=st.sampled_from([0, 900]), action=st.sampled_from(STALL_ACTIONS))
    def sweep(self, threshold, action):
        """The dispatcher's sweep; a threshold of 0 stalls every running attempt."""
        before = self.snapshot()
        candidates = {}
        if threshold == 0:
            for wf, run in before.runs.items():
                cur = self.current(before, wf)
                if run["status"] in ("running", "paused") and cur and cur["status"] == "running":
                    candidates[wf] = cur
        answer = self.one(
            "SELECT pgbus.workflow_sweep(make_interval(secs => %s), %s, interval '30 days')",
            (threshold, action),
        )
        after = self.snapshot()
        assert sorted(s["workflow_id"] for s in answer["stalled"]) == sorted(
            str(wf) for wf in candidates
        )
        assert all(s["action"] == action for s in answer["stalled"])
        assert (answer["resent"], answer["deleted"]) == (0, 0)
        exp = Expect()
        statuses = {
            wf: self.expect_stall(exp, before.runs[wf], att, action, archived=False)
            for wf, att in candidates.items()
        }
        self.verify(before, after, exp)
        for wf, att in candidates.items():
            self.check_stalled(after, before.runs[wf], att, action, statuses[wf])
        ongoing = defaultdict(int)
        for run in after.runs.values():
            if run["status"] not in ENDED:
                ongoing[run["status"]] += 1
        assert {r["status"]: r["count"] for r in answer["runs"]} == ongoing

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def runs_attempts_and_trail_agree(self):
        snap = self.snapshot()
        events = snap.events
        # (5) The trail is append-only: nothing seen disappears or changes, new ids are higher.
        now = {
            e["event_id"]: (e["workflow_id"], e["event"], e["step_id"], e["actor"]) for e in events
        }
        for event_id, seen in self.seen_events.items():
            assert now.get(event_id) == seen, f"event {event_id} changed or vanished"
        high = max(self.seen_events, default=0)
        assert all(i > high for i in now.keys() - self.seen_events.keys())
        self.seen_events = now

        by_run: dict[UUID, list[dict]] = defaultdict(list)
        for e in events:
            by_run[e["workflow_id"]].append(e)
        attempts_of: dict[UUID, list[dict]] = defaultdict(list)
        for a in snap.attempts.values():
            attempts_of[a["workflow_id"]].append(a)
        assert set(snap.runs) == set(self.run_ids)

        self.statuses = {wf: run["status"] for wf, run in snap.runs.items()}
        for wf, run in snap.runs.items():
            status = run["status"]
            # (1), (2)
            assert status in STATUSES
            assert (status == "paused") == (run["pause_cause"] is not None)
            assert (status in ENDED) == (run["ended_at"] is not None)
            # (6) an ended run stays as it ended
            if wf in self.ended:
                assert status == self.ended[wf], f"{wf} left {self.ended[wf]} for {status}"
            elif status in ENDED:
                self.ended[wf] = status
            # (3) at most one live attempt: the current one
            cur = snap.attempts.get(run["current_step_id"])
            assert cur is not None and cur["workflow_id"] == wf
            assert cur["step_name"] == run["current_step"]
            live = [a for a in attempts_of[wf] if a["status"] in ("scheduled", "running")]
            assert len(live) <= 1, live
            for a in live:
                assert a["step_id"] == run["current_step_id"]
            if status == "ready":
                assert cur["status"] == "scheduled"
                assert cur["msg_id"] in snap.queue
                kwargs = snap.queue[cur["msg_id"]]["message"]["kwargs"]
                assert kwargs == {"workflow_id": str(wf), "step_id": cur["step_id"]}
            if status == "running":
                assert cur["status"] == "running"
            if status in ("paused", "cancelled"):
                assert cur["status"] != "scheduled"
            if status == "finished":
                assert not live
            # (4) the trail tells the same story
            trail = by_run[wf]
            names = [e["event"] for e in trail]
            assert names[:2] == ["started", "step_scheduled"], names
            told = None
            for name in names:
                told = STATUS_EVENTS.get(name, told)
            assert told == status, (status, names)
            if status in ENDED:
                last = max(i for i, n in enumerate(names) if n == status)
                assert set(names[last + 1 :]) <= AFTER_END[status], names
            if status == "paused":
                paused = [e for e in trail if e["event"] == "paused"][-1]
                cause = (
                    "stall"
                    if paused["actor"] == "pgbus"
                    else "error"
                    if paused["actor"] == "step" and paused["details"].get("error_class")
                    else "manual"
                )
                assert run["pause_cause"] == cause, (run["pause_cause"], paused)
            for a in attempts_of[wf]:
                mine = [e for e in trail if e["step_id"] == a["step_id"]]
                kinds = [e["event"] for e in mine]
                assert kinds.count("step_scheduled") == 1, kinds
                assert kinds.count("step_started") == (a["started_at"] is not None), kinds
                ends = [
                    e
                    for e in mine
                    if e["event"].startswith("step_")
                    and e["event"] not in ("step_scheduled", "step_started", "step_resent")
                ]
                stalls = kinds.count("stall_detected")
                if a["status"] in ("scheduled", "running"):
                    assert not ends and not stalls, kinds
                elif a["status"] == "stalled":
                    assert stalls == 1 and not ends, kinds
                elif a["status"] == "superseded":
                    # taken out of play (no end), or its end refused after the run moved on
                    assert not stalls and len(ends) == (a["outcome"] is not None), kinds
                    if ends:
                        assert ends[0]["details"]["verb"] == a["outcome"]
                else:
                    assert not stalls and len(ends) == 1, kinds
                    want = "step_failed" if a["error"] is not None else "step_" + a["status"]
                    assert ends[0]["event"] == want
                    assert ends[0]["details"]["verb"] == a["outcome"]
        # Every message is a step of one attempt, and an attempt has at most one message.
        owners = [int(m["message"]["kwargs"]["step_id"]) for m in snap.queue.values()]
        assert len(owners) == len(set(owners))
        for sid in owners:
            assert snap.attempts[sid]["msg_id"] in snap.queue


def test_workflow_runs_follow_the_transition_table(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "SELECT pgbus.workflow_register(%s, %s, 'd1', %s)",
            (WORKFLOW, Jsonb([{"name": s} for s in STEPS]), QUEUE),
        )
        conn.execute("SELECT pgbus.ensure_queue(%s)", (QUEUE,))
        WorkflowMachine.conn = conn
        try:
            run_state_machine_as_test(
                WorkflowMachine,
                settings=settings(
                    max_examples=30,
                    stateful_step_count=30,
                    deadline=None,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        finally:
            del WorkflowMachine.conn
