"""Workflows in operation: the worker path's context, the sweep, metrics and instrumentation."""

import logging

from pgbus.dispatcher import Dispatcher, default_duties
from pgbus.instrumentation import subscribe
from pgbus.metrics import MetricsSubscriber, PrometheusBackend
from pgbus.workflow import StepLogFilter
from pgbus.workflow.testing import speedrun_workflow
from tests.py.sample_workflows import Flaky, Introspect, ThreeSteps
from tests.py.support import running_worker, wait_until


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []
        self.addFilter(StepLogFilter())

    def emit(self, record):
        self.records.append(record)


def test_step_logs_carry_the_step_and_the_job_knows_its_delivery(users):
    handler = Collect()
    logging.getLogger("tests.introspect").addHandler(handler)
    try:
        run = Introspect.start()
        with running_worker(queues=["workflows"]):
            wait_until(lambda: run.status() == "finished", what="finished")
    finally:
        logging.getLogger("tests.introspect").removeHandler(handler)
    [record] = handler.records
    assert record.pgbus_step == {
        "workflow_id": str(run.workflow_id),
        "workflow_class": Introspect.workflow_name,
        "step": "look",
        "attempt": 1,
    }
    step = run.steps()[0]
    assert step["output"] == {"msg_id": step["msg_id"], "read_ct": 1}


def sweep_duty():
    return Dispatcher([d for d in default_duties() if d.name == "workflow_sweep"])


def test_the_sweep_stalls_a_hung_step_and_reports_the_gauge(users):
    seen = []
    sub = subscribe("pgbus.workflow.*", lambda name, payload: seen.append((name, payload)))
    try:
        run = ThreeSteps.start(n="hung")
        users.execute("UPDATE pgmq.q_pgbus_workflows SET vt = now()")
        users.execute(
            "SELECT * FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 30, 1, 'gone:1', NULL)"
        )
        users.execute("UPDATE pgbus.workflow_steps SET started_at = now() - interval '1 hour'")
        ThreeSteps.start(n="healthy")
        done = sweep_duty().tick()
    finally:
        sub.unsubscribe()
    assert done == {"workflow_sweep": 0}
    assert run.status() == "paused" and run.row()["pause_cause"] == "stall"
    stall = next(p for n, p in seen if n == "pgbus.workflow.stall_detected")
    assert (stall["workflow_class"], stall["step"], stall["detection"]) == (
        ThreeSteps.workflow_name,
        "one",
        "sweep",
    )
    gauge = next(p for n, p in seen if n == "pgbus.workflow.gauge")
    assert {"workflow_class": ThreeSteps.workflow_name, "status": "paused", "count": 1} in gauge[
        "runs"
    ]
    assert {"workflow_class": ThreeSteps.workflow_name, "reason": "stalled", "count": 1} in gauge[
        "stuck"
    ]


def test_the_sweep_resends_a_lost_step_and_forgets_old_runs(users):
    lost = ThreeSteps.start(n="lost")
    users.execute("SELECT pgmq.purge_queue('pgbus_workflows')")
    users.execute("UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes'")
    old = ThreeSteps.start(n="old")
    old.cancel()
    users.execute(
        "UPDATE pgbus.workflows SET ended_at = now() - interval '31 days' WHERE workflow_id = %s",
        (old.workflow_id,),
    )
    assert sweep_duty().tick() == {"workflow_sweep": 1}
    assert old.status() is None
    assert [e.event for e in lost.events()][-1] == "step_resent"
    assert speedrun_workflow(lost) == "finished"


def test_workflow_metrics(users):
    backend = PrometheusBackend()
    subscriber = MetricsSubscriber(backend).install()
    try:
        speedrun_workflow(ThreeSteps.start(n="m"))
        speedrun_workflow(Flaky.start())
        sweep_duty().tick()
    finally:
        subscriber.uninstall()
    text = backend.exposition().decode()
    name = ThreeSteps.workflow_name
    assert (
        f'pgbus_workflow_steps_total{{outcome="complete",step="two",workflow_class="{name}"}} 1.0'
        in text
    )
    assert f'pgbus_workflows_finished_total{{workflow_class="{name}"}} 1.0' in text
    assert (
        f'pgbus_workflows_paused_total{{error_class="TimeoutError",workflow_class="{Flaky.workflow_name}"}} 1.0'
        in text
    )
    assert "pgbus_workflow_step_duration_seconds_count" in text
    assert (
        f'pgbus_workflows_stuck{{reason="paused_error",workflow_class="{Flaky.workflow_name}"}} 1.0'
        in text
    )
