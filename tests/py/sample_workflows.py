"""Workflows the tests start and real workers run (`--import tests.py.sample_workflows`).

Steps record what they do in the `effects` table on the step's own connection (committed with
the step's end) or, with `mark`, on a separate connection (kept whatever happens).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pgbus
from pgbus.jobs import connection
from pgbus.workflow import on_exception, register_subject, removed_step, step
from tests.py.sample_jobs import Poison, Record, mark


@dataclasses.dataclass
class User:
    id: int
    onboarded: bool = False
    closed: bool = False


def load_user(user_id: str) -> User | None:
    with connection() as c:
        row = c.execute(
            "SELECT id, onboarded, closed FROM users WHERE id = %s", (int(user_id),)
        ).fetchone()
    return User(*row) if row else None


register_subject(User, load=load_user)


class SignupWorkflow(pgbus.Workflow):
    """The README's workflow, with short waits."""

    exception_policies = (
        on_exception(TimeoutError, action="reattempt", wait=0.1, max_reattempts=5),
    )

    def cancel_if(self):
        return self.subject is None or self.subject.closed

    @step
    def welcome(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('welcome', %s)", (str(self.subject.id),)
        )
        self.output(sent_to=self.subject.id, plan=self.arguments["plan"])

    @step(wait=timedelta(seconds=0.2), skip_if=lambda wf: wf.subject.onboarded)
    def reminder(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('reminder', %s)", (str(self.subject.id),)
        )

    @step(wait=0.2)
    def complete(self):
        self.conn.execute("UPDATE users SET onboarded = true WHERE id = %s", (self.subject.id,))


class ThreeSteps(pgbus.Workflow):
    """No-op steps that record each run of each step."""

    @step
    def one(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('one', %s)", (self.arguments["n"],)
        )

    @step
    def two(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('two', %s)", (self.arguments["n"],)
        )

    @step
    def three(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('three', %s)", (self.arguments["n"],)
        )


class Flaky(pgbus.Workflow):
    """Fails (and pauses) until the `fixed` effect exists; writes before failing are rolled back."""

    @step
    def charge(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('charge_try', %s)", (str(self.workflow_id),)
        )
        if not self.conn.execute("SELECT 1 FROM effects WHERE kind = 'fixed'").fetchone():
            try:
                raise ConnectionError("gateway unreachable")
            except ConnectionError as exc:
                raise TimeoutError("charge timed out") from exc
        self.output(charge_id="ch_1")

    @step
    def receipt(self):
        self.output(charge=self.output_of("charge"))


class Verbs(pgbus.Workflow):
    """Its first step says the verb named by the `verb` argument."""

    @step
    def decide(self):
        mark("decide", str(self.workflow_id))
        verb = self.arguments["verb"]
        if verb == "reattempt":
            if self.attempt == 1:
                self.reattempt(wait=0, reason="said reattempt")
            return
        if verb == "finished":
            self.output(early=True)
        getattr(self, verb)(reason=f"said {verb}")

    @step
    def after(self):
        mark("after", str(self.workflow_id))


class Policies(pgbus.Workflow):
    """Exception policies: reattempt twice then cancel; a matching policy; a handler."""

    exception_policies = (
        on_exception(KeyError, action="skip", report=False),
        on_exception(
            ValueError,
            matching="retry me",
            action="reattempt",
            max_reattempts=2,
            terminal_action="cancel",
        ),
        on_exception(ValueError, handler=lambda wf, exc: "skip"),
    )

    @step
    def risky(self):
        mark("risky", self.arguments["error"])
        if self.arguments["error"] == "key":
            raise KeyError("missing")
        raise ValueError(self.arguments["error"])

    @step
    def after(self):
        mark("after", self.arguments["error"])


class Hooks(pgbus.Workflow):
    def before_step(self):
        mark("before", self.step_name)

    def after_step(self):
        mark("after", self.step_name)

    @step
    def only(self):
        mark("body", self.step_name)
        self.output(key=self.step_idempotency_key, attempt_key=self.attempt_idempotency_key)


class WithGravestone(pgbus.Workflow):
    @step
    def first(self):
        mark("first", str(self.workflow_id))

    old = removed_step()

    @step
    def last(self):
        mark("last", str(self.workflow_id))


class Slow(pgbus.Workflow):
    """Its step works for `seconds` on its first attempt (to be killed), then finishes."""

    @step(timeout=timedelta(seconds=60))
    def work(self):
        mark("work_started", str(self.workflow_id))
        if self.attempt == 1:
            self.conn.execute("SELECT pg_sleep(%s)", (self.arguments["seconds"],))
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('work_done', %s)", (str(self.workflow_id),)
        )


class Introspect(pgbus.Workflow):
    """Logs from inside its step and records what the running job knows of itself."""

    @step
    def look(self):
        import logging

        logging.getLogger("tests.introspect").warning("inside the step")
        job = pgbus.current_job()
        self.output(msg_id=job.msg_id, read_ct=job.read_ct)


class Order(pgbus.Workflow):
    """Waiting steps: a fan-out to vendors (`vendors` jobs; the ones named in `poison` are
    dead-lettered), a payment gate with a wait timeout, then shipping."""

    @pgbus.fan_out(on_batch_failure="pause")
    def notify_vendors(self, b):
        mark("fan_out_body", str(self.workflow_id))
        poison = set(self.arguments.get("poison", ()))
        for i in range(self.arguments.get("vendors", 3)):
            key = f"{self.workflow_id}:{i}"
            b.add(Poison if i in poison else Record, key)

    @step(
        wait_for="payment_confirmed",
        wait_timeout=timedelta(seconds=60),
        on_timeout="pause",
    )
    def capture(self):
        mark("capture", str(self.received_signal.payload["amount"]))
        self.output(amount=self.received_signal.payload["amount"])

    @step
    def ship(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('shipped', %s)", (str(self.workflow_id),)
        )


class Gate(pgbus.Workflow):
    """A gate that takes only a complete shipment; when its wait times out, the step runs."""

    @step(
        wait_for=pgbus.SignalMatcher("shipped", lambda payload: payload.get("complete", False)),
        wait_timeout=timedelta(seconds=30),
        on_timeout="run",
    )
    def shipped(self):
        mark("shipped", "timed_out" if self.timed_out else str(self.received_signal.payload))
        if self.arguments.get("fail_once") and self.attempt == 1:
            raise RuntimeError("carrier API down")

    @step
    def done(self):
        mark("done", str(self.workflow_id))


class AnySignal:
    """A matcher with no name: any signal whose payload has `ok` true."""

    def matches(self, signal):
        return bool(signal.payload.get("ok"))


class Gates(pgbus.Workflow):
    """Two gates: one with a nameless matcher, one skipping on timeout."""

    @step(wait_for=AnySignal())
    def anything(self):
        mark("anything", self.received_signal.name)

    @step(wait_for="approve", wait_timeout=timedelta(hours=1), on_timeout="skip")
    def approval(self):
        mark("approved", str(self.workflow_id))

    @step
    def after(self):
        mark("after", str(self.workflow_id))


class EmptyFanOut(pgbus.Workflow):
    @pgbus.fan_out
    def nothing(self, b):
        if self.arguments.get("verb") == "skip":
            self.skip(reason="nothing to do")
        if self.arguments.get("raise"):
            b.add(Record, "never")
            raise ValueError("body failed after adding")

    @step
    def after(self):
        mark("after", str(self.workflow_id))


class BriefGate(pgbus.Workflow):
    """A gate whose wait times out after 3 s and pauses the run (end-to-end timing tests)."""

    @step(wait_for="go", wait_timeout=timedelta(seconds=3), on_timeout="pause")
    def approve(self):
        mark("approved", str(self.workflow_id))

    @step
    def after(self):
        mark("after", str(self.workflow_id))


class FanOutOnly(pgbus.Workflow):
    """One fan-out step of `members` Record jobs and nothing after: resolving it finishes the run."""

    @pgbus.fan_out
    def members(self, b):
        for i in range(self.arguments.get("members", 2)):
            b.add(Record, f"{self.workflow_id}:{i}")


class Meddler(pgbus.Workflow):
    """Acts on another run (`target`, a ThreeSteps run) with `verb`, then raises when `fail`:
    its action on the other run rolls back with the step's savepoint."""

    @step
    def meddle(self):
        other = pgbus.workflow.WorkflowRun(self.arguments["target"], ThreeSteps.workflow_name)
        if self.arguments["verb"] == "signal":
            other.signal("poke")
        else:
            getattr(other, self.arguments["verb"])(actor="meddler")
        if self.arguments["fail"]:
            raise RuntimeError("meddled, then failed")


class HangingStep(pgbus.Workflow):
    """Its step hangs in Python (a call that never returns)."""

    @step
    def hang(self):
        mark("hang_started", str(self.workflow_id))
        import time

        time.sleep(3600)


class HeldSteps(pgbus.Workflow):
    """Each step marks its start, then holds until the test lets go of its advisory lock
    (HOLD_LOCK for `hold`, AFTER_LOCK for `after`), then records that it finished in the step's
    own transaction (rolled back with a refused end)."""

    HOLD_LOCK = 730_101
    AFTER_LOCK = 730_102

    @step
    def hold(self):
        mark("hold_started", str(self.workflow_id))
        self.conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self.HOLD_LOCK,))
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('hold_done', %s)", (str(self.workflow_id),)
        )

    @step
    def after(self):
        mark("after_started", str(self.workflow_id))
        self.conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self.AFTER_LOCK,))
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('after_done', %s)", (str(self.workflow_id),)
        )
