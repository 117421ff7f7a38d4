"""Every run-status change emits its event (workflow_paused / _cancelled / _finished) exactly
once, whoever moves the run: the sweep's repairs (a stall, a wait timeout, a lost fan-out
callback), the stall action at a redelivery, an operator."""

import time

import psycopg
import pytest

import pgbus
from pgbus.dispatcher import Dispatcher, default_duties
from pgbus.instrumentation import subscribe
from pgbus.workflow.testing import perform_next_step
from tests.py.sample_workflows import BriefGate, FanOutOnly, ThreeSteps
from tests.py.support import running_worker, wait_until


@pytest.fixture
def status_events():
    seen = []
    sub = subscribe(
        "pgbus.workflow_*",
        lambda name, payload: seen.append(
            (name.removeprefix("pgbus."), str(payload["workflow_id"]))
        ),
    )
    yield seen
    sub.unsubscribe()


def sweep(action: str = "pause") -> None:
    pgbus.configure(workflow_stall_action=action)
    Dispatcher([d for d in default_duties() if d.name == "workflow_sweep"]).tick()


def hung(conn: psycopg.Connection, *names: str) -> list[pgbus.workflow.WorkflowRun]:
    """Runs whose step began an hour ago on a worker that is gone."""
    runs = [ThreeSteps.start(n=n) for n in names]
    conn.execute("UPDATE pgmq.q_pgbus_workflows SET vt = now()")
    conn.execute("SELECT * FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 30, 10, 'gone:1', NULL)")
    conn.execute("UPDATE pgbus.workflow_steps SET started_at = now() - interval '1 hour'")
    return runs


@pytest.mark.parametrize(
    ("action", "event"), [("pause", "workflow_paused"), ("cancel", "workflow_cancelled")]
)
def test_a_stall_found_by_the_sweep_emits_the_runs_event_once(users, status_events, action, event):
    [run] = hung(users, "hung")
    sweep(action)
    sweep(action)
    assert status_events == [(event, str(run.workflow_id))]


def test_a_stall_of_a_run_an_operator_paused_emits_nothing_more(users, status_events):
    [run] = hung(users, "paused")
    run.pause(actor="ops")
    sweep()
    assert run.steps()[-1]["status"] == "stalled"
    assert status_events == [("workflow_paused", str(run.workflow_id))]  # the operator's only


def test_a_wait_timeout_found_by_the_sweep_emits_the_runs_event(users, status_events):
    run = BriefGate.start()
    assert perform_next_step(run) == "waiting"
    users.execute(
        "UPDATE pgbus.workflow_steps SET wait_deadline = now() - interval '1 second'"
        " WHERE workflow_id = %s",
        (run.workflow_id,),
    )
    sweep()
    assert run.status() == "paused"
    assert status_events == [("workflow_paused", str(run.workflow_id))]


def test_a_fan_out_the_sweep_resolves_emits_the_runs_event(users, status_events):
    finished, gone = FanOutOnly.start(members=1), FanOutOnly.start(members=1)
    for run in (finished, gone):
        assert perform_next_step(run) == "waiting"
    # One batch finished long ago but its callback never came; the other batch is gone.
    users.execute(
        "UPDATE pgbus.batches SET status = 'finished', finished_at = now() - interval '1 hour',"
        " completed_jobs = total_jobs"
        " WHERE batch_id = (SELECT batch_id FROM pgbus.workflow_steps WHERE workflow_id = %s"
        " AND batch_id IS NOT NULL)",
        (finished.workflow_id,),
    )
    users.execute(
        "DELETE FROM pgbus.batches WHERE batch_id = (SELECT batch_id FROM pgbus.workflow_steps"
        " WHERE workflow_id = %s AND batch_id IS NOT NULL)",
        (gone.workflow_id,),
    )
    sweep()
    assert (finished.status(), gone.status()) == ("finished", "paused")
    assert sorted(status_events) == sorted(
        [
            ("workflow_finished", str(finished.workflow_id)),
            ("workflow_paused", str(gone.workflow_id)),
        ]
    )


def test_a_repair_that_fails_is_reported_and_the_others_go_on(users, status_events):
    broken, fine = hung(users, "broken", "fine")
    broken_id = psycopg.sql.Literal(str(broken.workflow_id)).as_string(users)
    users.execute(
        "CREATE FUNCTION refuse_stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.status = 'stalled' AND NEW.workflow_id = {broken_id} THEN"
        " RAISE EXCEPTION 'no stalls here'; END IF; RETURN NEW; END $$"
    )
    users.execute(
        "CREATE TRIGGER refuse_stall BEFORE UPDATE ON pgbus.workflow_steps"
        " FOR EACH ROW EXECUTE FUNCTION refuse_stall()"
    )
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((exc, ctx))])
    sweep()
    assert (broken.status(), fine.status()) == ("running", "paused")
    assert status_events == [("workflow_paused", str(fine.workflow_id))]
    [(exc, ctx)] = reports
    assert isinstance(exc, pgbus.SweepRepairFailed)
    assert "no stalls here" in str(exc) and ctx["workflow_id"] == str(broken.workflow_id)
    [event] = [e for e in broken.events() if e.event == "repair_failed"]
    assert event.reason == "no stalls here" and event.details["repair"] == "stall"


def test_a_run_whose_rows_another_session_holds_does_not_hold_back_the_sweep(
    users, status_events, db_url
):
    """Its repair would wait for the lock: it fails for that run alone after the sweep's
    lock_wait, the other runs are repaired and committed, and the next sweep repairs it."""
    blocked, fine = hung(users, "blocked", "fine")
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((exc, ctx))])
    with psycopg.connect(db_url) as holder:  # (a transaction open on the attempt's row)
        holder.execute(
            "SELECT 1 FROM pgbus.workflow_steps s JOIN pgbus.workflows w"
            " ON s.step_id = w.current_step_id WHERE w.workflow_id = %s FOR UPDATE OF s",
            (blocked.workflow_id,),
        )
        begun = time.monotonic()
        sweep()
        took = time.monotonic() - begun
        assert (blocked.status(), fine.status()) == ("running", "paused")
        holder.rollback()
    assert took < 10, f"the sweep waited {took:.1f}s for the locked run"
    assert status_events == [("workflow_paused", str(fine.workflow_id))]
    [(exc, ctx)] = reports
    assert isinstance(exc, pgbus.SweepRepairFailed)
    assert ctx["workflow_id"] == str(blocked.workflow_id) and "55P03" in str(exc)
    sweep()
    assert blocked.status() == "paused"


def test_a_cleanup_that_fails_undoes_no_repair(users, status_events):
    """The sweep's cleanups (old runs, failures of step messages) fail on their own, after the
    repairs: those stay, and the failure is reported."""
    [run] = hung(users, "hung")
    users.execute(
        "CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " RAISE EXCEPTION 'no deletes here'; END $$"
    )
    users.execute(
        "CREATE TRIGGER refuse_delete BEFORE DELETE ON pgbus.workflows"
        " FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
    )
    old = ThreeSteps.start(n="old")
    old.cancel(actor="ops")
    users.execute(
        "UPDATE pgbus.workflows SET ended_at = now() - interval '1 year' WHERE workflow_id = %s",
        (old.workflow_id,),
    )
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((exc, ctx))])
    sweep()
    assert run.status() == "paused"
    assert ("workflow_paused", str(run.workflow_id)) in status_events
    [(exc, ctx)] = reports
    assert isinstance(exc, pgbus.SweepRepairFailed) and "no deletes here" in str(exc)
    assert ctx["repair"] == "old_runs"


def test_a_stall_at_redelivery_emits_the_runs_event_once(users, status_events):
    run = ThreeSteps.start(n="dead worker")
    users.execute("UPDATE pgmq.q_pgbus_workflows SET vt = now()")
    users.execute("SELECT * FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 1, 10, 'gone:1', NULL)")
    with running_worker(queues=["workflows"]):
        wait_until(lambda: run.status() == "paused", what="the stall at redelivery")
    assert status_events == [("workflow_paused", str(run.workflow_id))]


def test_expire_wait_emits_the_runs_event(users, status_events):
    from pgbus.workflow.testing import expire_wait

    run = BriefGate.start()
    assert perform_next_step(run) == "waiting"
    assert expire_wait(run) == "paused"
    assert status_events == [("workflow_paused", str(run.workflow_id))]
