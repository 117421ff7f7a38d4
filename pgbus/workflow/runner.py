"""Running one step attempt: the StepJob a worker runs for each step message.

The attempt was begun in SQL when the worker read the message (pgbus.read_jobs). Here Python
evaluates what only Python can (cancel_if, skip_if, the body and hooks, exception policies),
then `pgbus.workflow_end_step` records the outcome in the step's transaction, which the
worker commits. The body's own writes sit in a savepoint of that transaction: they commit with
the step's end, and a body that raises leaves none behind while its failure is still recorded.
An exception never escapes to the worker.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
import types
from contextlib import AbstractContextManager, suppress
from datetime import timedelta
from typing import Any

import psycopg
import psycopg.errors
from psycopg.types.json import Jsonb

from pgbus.config import settings
from pgbus.db import first_line, pool
from pgbus.errors import PgbusError
from pgbus.instrumentation import emit
from pgbus.jobs import Job, JobTransaction, current_transaction
from pgbus.reporting import error_record, report_error
from pgbus.workflow.base import StepVerb, Workflow, workflow_class
from pgbus.workflow.definition import (
    VERBS,
    ExceptionPolicy,
    FanOut,
    RemovedStep,
    Signal,
    StepSpec,
)
from pgbus.workflow.errors import InvalidPolicyDecision, StepBeginFailed, StepNotDefined
from pgbus.workflow.payloads import decode_payload, encode_payload
from pgbus.workflow.runs import emit_status

log = logging.getLogger("pgbus.workflow")

# The step running on this thread ({workflow_id, workflow_class, step, attempt}), for logs.
current_step: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "pgbus_current_step", default=None
)


class StepLogFilter(logging.Filter):
    """Adds the running step to log records: record.pgbus_step ({} outside a step). Add it to
    your handlers to see workflow, step and attempt on every line a step logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.pgbus_step = current_step.get() or {}
        return True


@dataclasses.dataclass
class Outcome:
    verb: str
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    exception: BaseException | None = None
    wait: float | None = None
    reason: str | None = None
    report: bool = True
    signal_id: int | None = None  # the signal the step took
    fan_out: list[dict[str, Any]] | None = None  # park: the batch's jobs
    seen_signal_id: int | None = None  # park at a gate: the newest pending signal it saw
    policy_failure: BaseException | None = None  # its exception policy's handler went wrong


class BodyTransaction:
    """The body's writes: a savepoint inside the step's transaction, taken on first use."""

    def __init__(self, outer: JobTransaction) -> None:
        self.outer = outer
        self._savepoint: AbstractContextManager[Any] | None = None

    @property
    def begun(self) -> bool:
        return self._savepoint is not None

    def connection(self) -> psycopg.Connection:
        conn = self.outer.connection()
        if self._savepoint is None:
            self._savepoint = conn.transaction()
            self._savepoint.__enter__()
        return conn

    def on_commit(self, hook: Any) -> None:
        self.outer.on_commit(hook)

    def close(self, exc: BaseException | None) -> None:
        if self._savepoint is not None:
            self._savepoint.__exit__(
                type(exc) if exc else None, exc, exc.__traceback__ if exc else None
            )


def decide(
    wf_cls: type[Workflow], spec: StepSpec | None, wf: Workflow | None, exc: Exception, attempt: int
) -> Outcome:
    """The exception policy's decision: the step's policies first, then the class's; none
    matching pauses the run."""
    policies: tuple[ExceptionPolicy, ...] = (spec.policies if spec else ()) + tuple(
        wf_cls.exception_policies
    )
    policy = next((p for p in policies if p.matches(exc)), None)
    outcome = Outcome(
        "pause", error=error_record(exc, settings().workflow_error_backtrace_lines), exception=exc
    )
    if policy is None:
        return outcome
    outcome.report = policy.report
    if policy.handler is not None:
        try:
            decision = policy.handler(wf, exc)
        except Exception as handler_exc:
            log.error("exception policy handler failed; the run pauses", exc_info=handler_exc)
            return policy_failed(outcome, handler_exc, "the exception policy's handler raised")
        verb, wait = decision if isinstance(decision, tuple) else (decision, None)
        if verb not in VERBS:
            problem = InvalidPolicyDecision(
                f"the exception policy's handler returned {decision!r}, not one of "
                f"{', '.join(VERBS)} (or (verb, wait)): the run pauses"
            )
            log.error("%s", problem)
            return policy_failed(outcome, problem, str(problem))
        outcome.verb, outcome.wait = verb, wait
        return outcome
    outcome.verb, outcome.wait = policy.action, policy.wait
    if (
        policy.action == "reattempt"
        and policy.max_reattempts is not None
        and attempt > policy.max_reattempts
    ):
        outcome.verb, outcome.wait = policy.terminal_action, None
    return outcome


def policy_failed(outcome: Outcome, problem: BaseException, what: str) -> Outcome:
    """The run pauses with the step's error, and what went wrong with its policy beside it
    (error["policy"]); both are reported, whatever the policy's `report` said."""
    record = error_record(problem, settings().workflow_error_backtrace_lines)
    outcome.error = {**(outcome.error or {}), "policy": {**record, "problem": what}}
    outcome.verb, outcome.wait, outcome.report = "pause", None, True
    outcome.policy_failure = problem
    return outcome


def gate(spec: StepSpec, context: dict[str, Any]) -> tuple[Signal | None, int | None]:
    """The signal a gate step takes (the one it took on an earlier attempt, else the oldest
    pending one its matcher accepts), and the newest pending signal it looked at."""
    seen = None
    for row in context.get("signals", ()):
        signal = Signal(
            row["signal_id"],
            row["name"],
            types.MappingProxyType(decode_payload(row["payload"])),
            row["idempotency_key"],
            row["created_at"],
        )
        if row["status"] == "claimed":
            return signal, seen
        seen = max(seen or 0, signal.signal_id)
        if spec.matcher.matches(signal):
            return signal, seen
    return None, seen


def run_body(wf_cls: type[Workflow], context: dict[str, Any], outer: JobTransaction) -> Outcome:
    spec = wf_cls.step_spec(context["step_name"])
    if not isinstance(spec, StepSpec):
        kind = "is removed" if isinstance(spec, RemovedStep) else "is not defined"
        exc = StepNotDefined(
            f"{wf_cls.workflow_name} step {context['step_name']} {kind} in this code"
        )
        return Outcome(
            "pause",
            error=error_record(exc, settings().workflow_error_backtrace_lines),
            exception=exc,
        )
    wf = wf_cls()
    body_tx = BodyTransaction(outer)
    wf._begin(context, body_tx)
    token = current_transaction.set(body_tx)
    failure: BaseException | None = None
    try:
        outcome = _run(wf, spec)
        failure = outcome.exception
    except StepVerb as verb:
        failure = verb if verb.verb in ("pause", "reattempt", "cancel") else None
        output = (
            encode_payload(wf._outputs, "the step's output") if verb.verb == "finished" else None
        )
        outcome = Outcome(verb.verb, output=output, wait=verb.wait, reason=verb.reason)
    except Exception as exc:
        failure = exc
        if outer.broken:
            # pgbus's own connection failed under the body: not the body's error, so no
            # exception policy hears of it (StepJob.perform runs the attempt again).
            outcome = Outcome("pause", exception=exc)
        else:
            outcome = decide(wf_cls, spec, wf, exc, int(context["attempt"]))
    finally:
        current_transaction.reset(token)
        body_tx.close(failure)
    if wf.received_signal is not None:  # taken whatever the step's end: it survives a pause
        outcome.signal_id = wf.received_signal.signal_id
    return outcome


def _run(wf: Workflow, spec: StepSpec) -> Outcome:
    """The step's checks, gate, hooks and body; verbs and exceptions propagate."""
    if wf.cancel_if():
        return Outcome("cancel", reason="cancel_if")
    if spec.skip_if is not None and spec.skip_if(wf):
        return Outcome("skip", reason="skip_if")
    if spec.signal_name is not None:
        wf.received_signal, seen = gate(spec, wf._context)
        if wf.received_signal is None and not wf.timed_out:
            return Outcome("rewait" if wf._context.get("waited") else "park", seen_signal_id=seen)
    wf.before_step()
    spec.run_hook("before_step", wf)
    result = spec.run(wf)
    spec.run_hook("after_step", wf)
    wf.after_step()
    if isinstance(result, FanOut):
        return Outcome("park", fan_out=result.jobs)
    return Outcome("complete", output=encode_payload(wf._outputs, "the step's output"))


class StepEndRefused(Exception):
    """workflow_end_step refused the end (stale, not current, its run moved): the step's
    transaction rolls back, with everything the body wrote."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(f"the step's end was refused: {result.get('code')}")
        self.result = result


class StepTimedOut(Exception):
    """The body returned (or failed) after the step's timeout: nothing it did commits."""


class StepInfrastructureFailure(Exception):
    """pgbus's own connection for the step failed while the body ran: not the body's fault."""


INFRA_BACKOFF_MAX = 2.0  # s: the longest pause between two tries while the database is away


def _with_retries(what: str, action: Any, give_up: Any = None) -> Any:
    """`action()` (a step's end, or handing its attempt back), tried again with backoff while
    the database is unreachable (a restart, an outage): for at most `workflow_stall_threshold`
    (past it the sweep stalls the attempt anyway), or until give_up() says so (the worker is
    stopping); the last error then escapes."""
    deadline = time.monotonic() + settings().workflow_stall_threshold.total_seconds()
    delay = 0.1
    while True:
        try:
            return action()
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline or (give_up is not None and give_up()):
                raise
            log.info("%s: the database is unreachable (%s); trying again", what, first_line(exc))
            time.sleep(delay)
            delay = min(delay * 2, INFRA_BACKOFF_MAX)
            with suppress(psycopg.Error):
                pool().check()


def _on_its_own(query: str, params: Any) -> Any:
    """One statement in a transaction of its own on a pooled connection (not the step's,
    which may be gone); its first row."""
    with pool().connection() as conn:
        return conn.execute(query, params).fetchone()


class StepJob(Job):
    """One attempt of one workflow step (the message pgbus.workflow_schedule_step sends).

    The body's writes commit only together with an accepted end of this begin of the attempt:
    a refused end (stale, its run moved), a body that returns after the step's timeout, or a
    lost connection rolls them back. A failure of pgbus's own connection (a server restart, no
    connection in the pool) is never the body's: the end is tried again, or the attempt goes
    back to scheduled and runs again; no exception policy is charged and no stall recorded.
    """

    job_name = "pgbus.workflow:StepJob"

    # The next delivery this thread runs (Job.reserve_next), taken when this step ends, so that
    # this end also marks a read-ahead step's body started (no transaction of its own).
    next_step: Any = None
    failure: Exception | None = None  # why perform raised, when it chose to
    # (A step's redeliveries are the stall logic's business: pgbus.workflow_begin_step.)
    dead_letters_redeliveries = False

    # -- the worker's hooks (pgbus.jobs.Job)

    @classmethod
    def on_read(cls, worker: Any, delivery: Any) -> bool:
        """What pgbus.read_jobs decided for the step when it read its message: a stall (the
        stall action applied), a message of a step this worker still runs (held), or a step
        ended without running (concluded): nothing to run."""
        context = delivery.context or {}
        if context.get("stalled"):
            stall_detected(context)
        elif context.get("held"):
            _held(worker, delivery)
        elif context.get("concluded"):
            concluded_at_begin(context)
        else:
            return False
        return True

    @classmethod
    def awaits_start(cls, delivery: Any) -> bool:
        """A step read ahead: its body is marked started (pgbus.workflow_steps_started) by a
        later read or by the end of the step its thread runs before it."""
        context = delivery.context or {}
        return "step_id" in context and not context.get("body_started", True)

    @classmethod
    def start_marks(cls, deliveries: list[Any]) -> tuple[str, dict[str, Any]]:
        return (
            "pgbus.workflow_steps_started(step_ids => %(ids)s::bigint[],"
            " begun_at => %(begun_at)s::timestamptz[])",
            {
                "ids": [d.context["step_id"] for d in deliveries],
                "begun_at": [d.context["begun_at"] for d in deliveries],
            },
        )

    @classmethod
    def start_key(cls, delivery: Any) -> Any:
        return (delivery.context or {}).get("step_id")

    @classmethod
    def on_start_marked(cls, delivery: Any, marked: bool) -> None:
        context = delivery.context or {}
        if marked:
            context["body_started"] = True
        else:
            log.info(
                "workflow %s step %s: its attempt moved on before the body started; not run",
                context.get("workflow_id"),
                context.get("step_name"),
            )

    @classmethod
    def release_unstarted(
        cls, conn: psycopg.Connection, deliveries: list[Any], worker: str
    ) -> None:
        """Begun when read, never run: back to scheduled, not left to look stalled."""
        steps = [d.context["step_id"] for d in deliveries if d.context and "step_id" in d.context]
        if steps:
            conn.execute(
                "SELECT pgbus.workflow_release_steps(step_ids => %s::bigint[], worker => %s)",
                (steps, worker),
            )

    releases_lost_reads = True

    @classmethod
    def release_lost(cls, conn: psycopg.Connection, held: list[Any], worker: str) -> int:
        """Attempts a read began for `worker` whose answer was lost (the worker holds no
        delivery of them) go back to scheduled, their messages visible at once: not left to
        come back after the visibility timeout as a dead worker's stall."""
        steps = [d.context["step_id"] for d in held if d.context and "step_id" in d.context]
        return conn.execute(
            "SELECT pgbus.workflow_release_lost_steps(worker => %s, held => %s::bigint[])",
            (worker, steps),
        ).fetchone()[0]

    # -- running the attempt

    def perform(self, workflow_id: str, step_id: int) -> None:
        context = self.read_context
        if context is None:
            raise PgbusError("a StepJob runs only when read through pgbus.read_jobs")
        if "begin_error" in context:
            raise StepBeginFailed(
                f"step {step_id} of {workflow_id} could not begin: "
                f"{context['begin_error']} ({context['sqlstate']})"
            )
        self.step_id, self.workflow_id = step_id, workflow_id
        self.begun_at = context.get("begun_at")
        started = time.monotonic()
        # Past its timeout, or past the stall threshold when it has none, the sweep stalls the
        # attempt: its transaction is ended then too (JobTransaction.deadline), and nothing it
        # did commits.
        timeout = context.get("timeout")
        limit = float(timeout) if timeout else settings().workflow_stall_threshold.total_seconds()
        deadline = started + limit
        step = {
            "workflow_id": workflow_id,
            "workflow_class": context["workflow_class"],
            "step": context["step_name"],
            "attempt": context["attempt"],
        }
        self.step = step
        if not context.get("body_started", True) and not self._mark_started():
            log.info(
                "workflow %s step %s: its attempt moved on before the body started; not run",
                workflow_id,
                step["step"],
            )
            self.acknowledged = True
            return
        self.transaction.deadline, self.transaction.server_deadline = deadline, bool(timeout)
        token = current_step.set(step)
        try:
            try:
                outcome = run_body(
                    workflow_class(context["workflow_class"]), context, self.transaction
                )
            except Exception as exc:  # an unknown class, a payload too large, a broken hook
                outcome = Outcome(
                    "pause",
                    error=error_record(exc, settings().workflow_error_backtrace_lines),
                    exception=exc,
                )
            # (The body's own exception, dealt with by the outcome: a tracer records it.)
            self.body_exception = outcome.exception
            if time.monotonic() > deadline:
                past = "its timeout" if timeout else "the stall threshold"
                self.failure = StepTimedOut(
                    f"step {step['step']} returned after {past} ({limit} s)"
                )
                raise self.failure
            if self.transaction.broken:
                self.failure = StepInfrastructureFailure(
                    f"pgbus's connection for step {step['step']} failed while it ran"
                )
                raise self.failure from outcome.exception
            self.next_step = self.reserve_next() if self.reserve_next is not None else None
            params: dict[str, Any] = {
                "step_id": step_id,
                "verb": outcome.verb,
                "output": Jsonb(outcome.output) if outcome.output is not None else None,
                "error": Jsonb(outcome.error) if outcome.error else None,
                "wait": timedelta(seconds=outcome.wait) if outcome.wait else None,
                "reason": outcome.reason,
                "signal_id": outcome.signal_id,
                "fan_out": Jsonb(outcome.fan_out) if outcome.fan_out is not None else None,
                "seen_signal_id": outcome.seen_signal_id,
                "begun_at": self.begun_at,
            }
            query = (
                "SELECT pgbus.workflow_end_step(step_id => %(step_id)s, verb => %(verb)s,"
                " output => %(output)s, error => %(error)s, wait => %(wait)s,"
                " reason => %(reason)s, signal_id => %(signal_id)s, fan_out => %(fan_out)s,"
                " seen_signal_id => %(seen_signal_id)s, begun_at => %(begun_at)s)"
            )
            nxt = self.next_step if self.next_step is not None else None
            # (Another step read ahead: its body is marked started by this same end.)
            marks = nxt is not None and nxt.job_name == StepJob.job_name and self.awaits_start(nxt)
            if marks:
                expression, own = self.start_marks([nxt])
                query += ", " + expression.replace("%(", "%(next_")
                params.update({f"next_{k}": v for k, v in own.items()})
            self._end = (query, params)
            # In the step's transaction when the body wrote in it; else on its own, which is
            # one round trip, tried again while the database is away (a second end of the same
            # begin is refused, and takes no signal and opens no batch).
            if self.transaction.begun:
                row = self.transaction.execute_once(query, params)
            else:
                row = _with_retries(
                    "a step's end",
                    lambda: self.transaction.execute_once(query, params),
                    self.give_up,
                )
            result = row[0]
            if marks:
                # (Marked once this end commits; if it rolls back, the next step marks itself.)
                marked = self.start_key(nxt) in (row[1] or [])
                self.transaction.on_commit(lambda: self.on_start_marked(nxt, marked))
            self.acknowledged = True
            if not result.get("ok"):
                if self.transaction.begun:
                    self.failure = StepEndRefused(result)
                    raise self.failure
                self._log_refused(result, rolled_back=False)
        finally:
            current_step.reset(token)
        duration = time.monotonic() - started
        self.transaction.on_commit(lambda: publish(step, outcome, result, duration))

    def _mark_started(self) -> bool:
        """A read-ahead attempt's body starts now (one statement of its own). False when the
        attempt is no longer this begin's."""
        marked = _with_retries(
            "marking a step started",
            lambda: _on_its_own(
                "SELECT pgbus.workflow_steps_started(step_ids => %s::bigint[],"
                " begun_at => %s::timestamptz[])",
                ([self.step_id], [self.begun_at]),
            ),
            self.give_up,
        )[0]
        return self.step_id in (marked or [])

    def _log_refused(self, result: dict[str, Any], rolled_back: bool) -> None:
        log.warning(
            "workflow %s step %s attempt %s: its end was refused (%s, run %s)%s",
            self.workflow_id,
            self.step["step"],
            self.step["attempt"],
            result.get("code"),
            result.get("status"),
            "; what its body wrote rolled back" if rolled_back else "",
        )

    def recover(self, exc: BaseException) -> bool:
        """After the step's transaction rolled back because of `exc`."""
        if not hasattr(self, "step"):
            return False
        # (Rolling back on a lost connection raises again: the first reason is the one. The
        # server cancelling the end because the step's time was up is its timeout.)
        exc = self.failure or exc
        deadline = self.transaction.deadline
        if (
            isinstance(exc, psycopg.errors.QueryCanceled)
            and deadline
            and time.monotonic() > deadline
        ):
            exc = StepTimedOut(f"step {self.step['step']} ran past its time limit")
        if isinstance(exc, StepEndRefused):
            self._log_refused(exc.result, rolled_back=True)
            # The refusal's own bookkeeping (archive the message, record the superseded end)
            # without the body's writes; refused again, harmlessly, when there is none to do.
            query, params = self._end
            try:
                _with_retries(
                    "a refused step's end",
                    lambda: _on_its_own(query, params),
                    self.give_up,
                )
            except psycopg.Error as db_exc:
                report_error(db_exc, {"action": "workflow_end_step", **self.step})
            return True
        if isinstance(exc, StepTimedOut):
            log.warning(
                "workflow %s step %s attempt %s: %s; what it did rolled back",
                self.workflow_id,
                self.step["step"],
                self.step["attempt"],
                exc,
            )
            action = settings().workflow_stall_action
            try:
                answer = _with_retries(
                    "timing out a step",
                    lambda: _on_its_own(
                        "SELECT pgbus.workflow_time_out_step_answer(step_id => %s,"
                        " begun_at => %s, action => %s)",
                        (self.step_id, self.begun_at, action),
                    ),
                    self.give_up,
                )[0]
                status = answer["status"]
            except psycopg.Error as db_exc:  # the sweep stalls it instead
                report_error(db_exc, {"action": "workflow_time_out_step", **self.step})
                return True
            if status is not None:
                emit(
                    "pgbus.workflow.stall_detected",
                    workflow_class=self.step["workflow_class"],
                    workflow_id=self.workflow_id,
                    step=self.step["step"],
                    detection="timeout",
                    action=action,
                )
            if status is not None and status != answer["was"]:  # the stall action moved the run
                emit_status(
                    self.step["workflow_class"],
                    self.workflow_id,
                    status,
                    "pgbus",
                    "pgbus.StepStalled",
                )
            return True
        if isinstance(exc, psycopg.Error) and not isinstance(exc, psycopg.OperationalError):
            # The end raised in SQL (a constraint the output broke, a trigger): recorded as
            # itself, on its own, not left to look like a dead worker's.
            error = error_record(exc, settings().workflow_error_backtrace_lines)
            error["sqlstate"] = exc.sqlstate
            log.error(
                "workflow %s step %s attempt %s: its end failed in SQL (%s); the run pauses",
                self.workflow_id,
                self.step["step"],
                self.step["attempt"],
                first_line(exc),
            )
            try:
                answer = _with_retries(
                    "recording a failed step end",
                    lambda: _on_its_own(
                        "SELECT pgbus.workflow_end_failed(step_id => %s, error => %s,"
                        " begun_at => %s)",
                        (self.step_id, Jsonb(error), self.begun_at),
                    ),
                    self.give_up,
                )[0]
            except psycopg.Error as db_exc:
                report_error(db_exc, {"action": "workflow_end_failed", **self.step})
                answer = {}
            report_error(exc, {"action": "workflow_end_step", **self.step})
            if answer.get("ok") and answer.get("was") != answer.get("status"):
                emit_status(
                    self.step["workflow_class"],
                    self.workflow_id,
                    answer["status"],
                    "step",
                    error["class"],
                )
            return True
        if isinstance(exc, (StepInfrastructureFailure, psycopg.OperationalError)):
            # The end may or may not have committed: hand the attempt back (nothing changes
            # when it did commit) and let its message come back at once.
            log.warning(
                "workflow %s step %s attempt %s: the database connection failed (%s);"
                " the attempt runs again",
                self.workflow_id,
                self.step["step"],
                self.step["attempt"],
                first_line(exc),
            )
            self.release()
            return True
        return False

    def release(self) -> None:
        """Back to scheduled (this begin only, if still current) and its message visible now."""

        def run() -> None:
            with pool().connection() as c, c.transaction():
                released = c.execute(
                    "SELECT pgbus.workflow_release_steps(step_ids => %s::bigint[], worker => %s)",
                    ([self.step_id], self.worker_identity),
                ).fetchone()[0]
                # (Not released: ended, or begun again elsewhere, whose message is not ours.)
                if released:
                    c.execute(
                        "SELECT count(*) FROM pgmq.set_vt(%s, %s::bigint[], 0)",
                        (self.queue_name, [self.msg_id]),
                    )

        try:
            _with_retries("handing a step back", run, self.give_up)
        except psycopg.Error as db_exc:  # its message comes back after the visibility timeout
            report_error(db_exc, {"action": "workflow_release_steps", **self.step})


def _held(worker: Any, delivery: Any) -> None:
    """A step message of ours came back (our visibility heartbeat lapsed, say while the
    database was away). Still running here: the read hid it again. Lost track of: its
    attempt goes back to scheduled and the message runs again."""
    if worker.holds(delivery):
        return
    context = delivery.context or {}
    try:
        with pool().connection() as c, c.transaction():
            c.execute(
                "SELECT pgbus.workflow_release_steps(step_ids => %s::bigint[], worker => %s)",
                ([context["step_id"]], worker.identity),
            )
            c.execute(
                "SELECT count(*) FROM pgmq.set_vt(%s, %s::bigint[], 0)",
                (delivery.queue, [delivery.msg_id]),
            )
    except psycopg.Error as exc:  # it comes back after the visibility timeout
        report_error(exc, {"action": "release_held_step", **delivery.log_context()})


def stall_detected(context: dict[str, Any]) -> None:
    """A workflow step delivered again while its attempt ran: its worker died. SQL applied
    the stall action when it read the message."""
    log.warning(
        "workflow %s step %s: its worker died; %s applied",
        context.get("workflow_id"),
        context.get("step_name"),
        context.get("action"),
    )
    emit(
        "pgbus.workflow.stall_detected",
        workflow_class=context.get("workflow_class"),
        workflow_id=context.get("workflow_id"),
        step=context.get("step_name"),
        detection="redelivery",
        action=context.get("action"),
    )
    # The run's own event when the stall action moved it (not when it was paused already).
    if context.get("status") != context.get("was", "running"):
        emit_status(
            str(context.get("workflow_class")),
            str(context.get("workflow_id")),
            str(context.get("status")),
            "pgbus",
            "pgbus.StepStalled",
        )


def concluded_at_begin(context: dict[str, Any]) -> None:
    """A step message that SQL ended when it was read, without running it: a step the
    definition no longer has (the run paused with StepNotDefined: reported) or a gravestone
    (skipped). The run's event goes out when its status changed."""
    error = context.get("error") or None
    if error is not None:
        log.warning(
            "workflow %s step %s: %s; the run is paused",
            context.get("workflow_id"),
            context.get("step_name"),
            error.get("message"),
        )
        report_error(
            StepNotDefined(error.get("message")),
            {
                "action": "workflow_begin_step",
                "workflow_id": context.get("workflow_id"),
                "workflow_class": context.get("workflow_class"),
                "step": context.get("step_name"),
                "attempt": context.get("attempt"),
            },
        )
    if context.get("status") != context.get("was"):
        emit_status(
            str(context.get("workflow_class")),
            str(context.get("workflow_id")),
            str(context.get("status")),
            "pgbus",
            (error or {}).get("class"),
        )


def publish(
    step: dict[str, Any], outcome: Outcome, result: dict[str, Any], duration: float
) -> None:
    """After the step's transaction committed: instrumentation and the error report."""
    cls = step["workflow_class"]
    if outcome.exception is not None and outcome.report:
        report_error(outcome.exception, {"action": "workflow_step", **step})
    if outcome.policy_failure is not None:
        report_error(outcome.policy_failure, {"action": "workflow_exception_policy", **step})
    emit(
        "pgbus.workflow.step",
        workflow_class=cls,
        step=step["step"],
        workflow_id=step["workflow_id"],
        attempt=step["attempt"],
        outcome=outcome.verb if outcome.error is None else "failed",
        duration=duration,
        accepted=result.get("ok", False),
    )
    if result.get("ok") and result.get("was") != result["status"]:  # (not when paused already)
        emit_status(
            cls, step["workflow_id"], result["status"], "step", (outcome.error or {}).get("class")
        )


class BatchFinishedJob(Job):
    """A fan-out batch's on_complete callback: resolves the step that waits on it."""

    job_name = "pgbus.workflow:BatchFinishedJob"

    def perform(self, properties: dict[str, Any]) -> None:
        result = self.conn.execute(
            "SELECT pgbus.workflow_fan_out_finished(step_id => %s)", (properties["step_id"],)
        ).fetchone()[0]
        if result["ok"]:
            self.transaction.on_commit(
                lambda: emit_status(
                    result["workflow_class"], properties["workflow_id"], result["status"], "pgbus"
                )
            )
