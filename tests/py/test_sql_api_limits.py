"""Limits, policies, error names and step options: issue-level behaviour of the Python API on
top of the SQL rules (inline through the same SQL as a worker)."""

import importlib

import psycopg
import pytest

import pgbus
import pgbus.workflow.testing
from pgbus import on_exception, step
from pgbus.errors import PgbusError
from pgbus.workflow import (
    InvalidPolicyDecision,
    NoOngoingRun,
    PayloadTooLarge,
    StepNotDefined,
    WorkflowNotRegistered,
)
from pgbus.workflow.payloads import forget_database_limit
from pgbus.workflow.testing import speedrun_workflow


class BigOutput(pgbus.Workflow):
    workflow_name = "tests.limits.BigOutput"

    @step
    def produce(self):
        self.output(blob="x" * int(self.arguments["size"]))


class HandlerSaysNonsense(pgbus.Workflow):
    workflow_name = "tests.limits.HandlerSaysNonsense"
    exception_policies = (on_exception(KeyError, handler=lambda wf, exc: "retry-later"),)

    @step
    def boom(self):
        raise KeyError("missing")


def _raising_handler(wf, exc):
    raise RuntimeError("the handler itself broke")


class HandlerRaises(pgbus.Workflow):
    workflow_name = "tests.limits.HandlerRaises"
    exception_policies = (on_exception(KeyError, handler=_raising_handler, report=False),)

    @step
    def boom(self):
        raise KeyError("missing")


class StepHooks(pgbus.Workflow):
    workflow_name = "tests.limits.StepHooks"
    calls: list[str] = []  # noqa: RUF012 (a test's record)

    def before_step(self):
        self.calls.append(f"class before {self.step_name}")

    def after_step(self):
        self.calls.append(f"class after {self.step_name}")

    def audit(self):
        self.calls.append(f"audit {self.step_name}")

    @step(before_step=lambda wf: wf.calls.append("own before"), after_step="audit")
    def first(self):
        self.calls.append("body first")

    @step
    def second(self):
        self.calls.append("body second")


def test_terminal_action_reattempt_is_refused_when_the_policy_is_declared():
    with pytest.raises(ValueError, match="terminal_action is one of pause, cancel, skip"):
        on_exception(KeyError, action="reattempt", max_reattempts=2, terminal_action="reattempt")
    for terminal in ("pause", "cancel", "skip"):
        assert on_exception(KeyError, action="reattempt", terminal_action=terminal)


def test_a_handler_answering_an_unknown_verb_pauses_records_and_reports(users):
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((exc, ctx["action"]))])
    run = HandlerSaysNonsense.start()
    assert speedrun_workflow(run) == "paused"
    error = run.steps()[-1]["error"]
    assert error["class"] == "KeyError"
    assert error["policy"]["class"] == "pgbus.workflow.InvalidPolicyDecision"
    assert "'retry-later'" in error["policy"]["message"]
    kinds = {(type(exc), action) for exc, action in reports}
    assert kinds == {
        (KeyError, "workflow_step"),
        (InvalidPolicyDecision, "workflow_exception_policy"),
    }


def test_a_handler_that_raises_pauses_records_its_traceback_and_reports_it(users):
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((exc, ctx["action"]))])
    run = HandlerRaises.start()
    assert speedrun_workflow(run) == "paused"
    error = run.steps()[-1]["error"]
    assert error["policy"]["class"] == "RuntimeError"
    assert error["policy"]["problem"] == "the exception policy's handler raised"
    assert any("_raising_handler" in line for line in error["policy"]["backtrace"])
    # Both go to the reporters, report=False notwithstanding: the policy did not decide.
    assert [(type(exc), action) for exc, action in reports] == [
        (KeyError, "workflow_step"),
        (RuntimeError, "workflow_exception_policy"),
    ]


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def test_every_pgbus_error_has_one_name_it_is_importable_under():
    importlib.import_module("pgbus.workflow.testing")
    names = {}
    for cls in _all_subclasses(PgbusError):
        if not cls.__module__.startswith("pgbus"):
            continue
        module, _, attr = cls.error_name.rpartition(".")
        assert getattr(importlib.import_module(module), attr) is cls, cls.error_name
        assert names.setdefault(cls.error_name, cls) is cls
    # The names SQL records and the worker writes resolve to classes.
    assert pgbus.StepStalled.error_name == "pgbus.StepStalled"
    assert pgbus.RetriesExhausted.error_name == "pgbus.RetriesExhausted"
    assert StepNotDefined.error_name == "pgbus.workflow.StepNotDefined"
    assert pgbus.workflow.testing.StepWaiting.error_name == "pgbus.workflow.testing.StepWaiting"


def test_step_not_defined_is_recorded_under_one_name_by_sql_and_by_python(users, conn):
    from tests.py.sample_workflows import ThreeSteps

    # Python finds it: the registered definition has the step, this code does not.
    run = ThreeSteps.start(n="1")
    conn.execute(
        "UPDATE pgbus.workflow_steps SET step_name = 'gone' WHERE workflow_id = %s",
        (run.workflow_id,),
    )
    conn.execute(
        'UPDATE pgbus.workflow_definitions SET steps = steps || \'[{"name": "gone"}]\''
        " WHERE workflow_class = %s",
        (ThreeSteps.workflow_name,),
    )
    conn.execute(
        "UPDATE pgbus.workflows SET current_step = 'gone' WHERE workflow_id = %s",
        (run.workflow_id,),
    )
    assert speedrun_workflow(run) == "paused"
    by_python = run.steps()[-1]["error_class"]
    # SQL finds it: the definition lacks the step.
    other = ThreeSteps.start(n="2")
    conn.execute(
        "UPDATE pgbus.workflow_steps SET step_name = 'nowhere' WHERE workflow_id = %s",
        (other.workflow_id,),
    )
    conn.execute(
        "UPDATE pgbus.workflows SET current_step = 'nowhere' WHERE workflow_id = %s",
        (other.workflow_id,),
    )
    speedrun_workflow(other)
    by_sql = other.steps()[-1]["error_class"]
    assert by_python == by_sql == StepNotDefined.error_name


def test_payload_limit_lives_in_the_database_and_holds_for_every_writer(users, conn):
    conn.execute("SELECT pgbus.setting_set('workflow_max_payload_size', '1000')")
    forget_database_limit()
    with pytest.raises(PayloadTooLarge, match=r"more than workflow_max_payload_size \(1000\)"):
        BigOutput.start(size="x" * 1200)
    # A process whose cached limit is stale still meets SQL's: the same named error.
    pgbus.workflow.payloads._cache[pgbus.settings().dsn()] = (10**9, float("inf"))
    with pytest.raises(PayloadTooLarge, match=r"arguments: \d+ bytes, more than"):
        BigOutput.start(size="x" * 1200)
    forget_database_limit()
    assert users.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0] == 0
    # A step whose output is too large pauses its run with PayloadTooLarge.
    run = BigOutput.start(size=2000)
    assert speedrun_workflow(run) == "paused"
    assert run.steps()[-1]["error_class"] == PayloadTooLarge.error_name
    # A lower limit set in Python applies too.
    pgbus.configure(workflow_max_payload_size=300)
    with pytest.raises(PayloadTooLarge, match=r"\(300\)"):
        BigOutput.start(size="x" * 400)


def test_actor_and_reason_limits_raise_clearly(users):
    from tests.py.sample_workflows import ThreeSteps

    run = ThreeSteps.start(n="1")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="at most 255 characters"):
        run.pause(actor="a" * 256)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="at most 1000 characters"):
        run.pause(reason="r" * 1001)
    assert run.status() == "ready"


def test_signal_by_subject_goes_through_sql(users):
    from tests.py.sample_workflows import User

    class Gate(pgbus.Workflow):
        workflow_name = "tests.limits.Gate"

        @step(wait_for="paid")
        def gate(self):
            pass

    with pytest.raises(NoOngoingRun, match="no ongoing run for"):
        Gate.signal(User(1), "paid")
    assert Gate.signal(User(1), "paid", missing="ignore") is None
    Gate.start(User(1))
    delivery = Gate.signal(User(1), "paid", {"amount": 1}, idempotency_key="k")
    assert not delivery.duplicate_delivery
    assert Gate.signal(User(1), "paid", idempotency_key="k").duplicate_delivery


def test_an_unregistered_class_from_sql_is_a_named_error(conn):
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT * FROM pgbus.workflow_start('nobody.Registered')")
    assert raised.value.sqlstate == "PB404"
    assert WorkflowNotRegistered.error_name == "pgbus.workflow.WorkflowNotRegistered"


def test_per_step_hooks_run_inside_the_class_hooks(users):
    StepHooks.calls.clear()
    assert speedrun_workflow(StepHooks.start()) == "finished"
    assert StepHooks.calls == [
        "class before first",
        "own before",
        "body first",
        "audit first",
        "class after first",
        "class before second",
        "body second",
        "class after second",
    ]


def test_job_options_take_what_job_set_takes():
    with pytest.raises(
        ValueError, match="job_options takes queue, priority, wait; unknown: retries"
    ):
        step(lambda wf: None, job_options={"retries": 3})
    with pytest.raises(ValueError, match="priority is a whole number"):
        step(lambda wf: None, job_options={"priority": -1})
    with pytest.raises(pgbus.InvalidQueueName):
        step(lambda wf: None, job_options={"queue": "!!!"})
    with pytest.raises(ValueError, match="step_job_options takes"):

        class Bad(pgbus.Workflow):
            step_job_options = {"wat": 1}  # noqa: RUF012

    spec = step(lambda wf: None, wait=5, job_options={"wait": 10, "queue": "slow"})
    spec.name = "s"
    entry = spec.definition({})
    assert entry["wait"] == 15 and entry["queue"].endswith("slow")


def test_set_step_job_options_sets_every_steps_queue(users):
    class Routed(pgbus.Workflow):
        workflow_name = "tests.limits.Routed"

        @step
        def only(self):
            pass

    Routed.set_step_job_options(queue="routed", priority=0)
    run = Routed.start()
    assert run.steps()[0]["queue"] == pgbus.queues.physical("routed", 0)
    with pytest.raises(ValueError):
        Routed.set_step_job_options(colour="red")


def test_with_the_sweep_off_the_dispatcher_reports_the_gauges_without_sweeping(users):
    from pgbus.dispatcher import Dispatcher, default_duties
    from pgbus.instrumentation import subscribe
    from tests.py.sample_workflows import ThreeSteps

    assert "workflow_sweep" in [d.name for d in default_duties()]
    pgbus.configure(workflow_sweep_enabled=False)
    duties = default_duties()
    assert "workflow_sweep" not in [d.name for d in duties]
    assert "workflow_gauges" in [d.name for d in duties]
    run = ThreeSteps.start(n="hung")
    users.execute(
        "UPDATE pgbus.workflow_steps SET status = 'running', started_at = now() - interval '1 hour',"
        " scheduled_at = least(scheduled_at, now() - interval '1 hour')"  # (due before it began)
    )
    users.execute("UPDATE pgbus.workflows SET status = 'running'")
    seen = []
    sub = subscribe("pgbus.workflow.*", lambda name, payload: seen.append((name, payload)))
    try:
        assert Dispatcher(duties).tick()["workflow_gauges"] == 0
    finally:
        sub.unsubscribe()
    assert run.status() == "running"  # nothing swept: pg_cron's job
    [gauge] = [p for n, p in seen if n == "pgbus.workflow.gauge"]
    assert gauge["stuck"] == [
        {"workflow_class": ThreeSteps.workflow_name, "reason": "stalled", "count": 1}
    ]
    assert gauge["runs"] == [
        {"workflow_class": ThreeSteps.workflow_name, "status": "running", "count": 1}
    ]


def test_the_new_settings_read_from_the_environment():
    from pgbus.config import from_environment

    s = from_environment(
        {"PGBUS_WORKFLOW_MAX_PAYLOAD_SIZE": "1000", "PGBUS_WORKFLOW_SWEEP_ENABLED": "false"}
    )
    assert (s.workflow_max_payload_size, s.workflow_sweep_enabled) == (1000, False)
    assert from_environment({}).workflow_max_payload_size is None
    with pytest.raises(pgbus.ConfigurationError, match="workflow_max_payload_size"):
        from_environment({"PGBUS_WORKFLOW_MAX_PAYLOAD_SIZE": "12"})
