"""A step's end and begin, as a real worker runs them: the run's event exactly once, an error
recorded and reported as itself."""

import psycopg
import pytest

import pgbus
from pgbus.instrumentation import subscribe
from tests.py.sample_workflows import Slow, ThreeSteps
from tests.py.support import count_effects, running_worker, wait_until


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


@pytest.fixture
def reports():
    seen = []
    pgbus.configure(error_reporters=[lambda exc, ctx: seen.append((exc, ctx))])
    return seen


def test_the_step_of_a_run_paused_while_it_ran_ends_without_a_second_event(users, status_events):
    run = Slow.start(seconds=1)
    with running_worker(queues=["workflows"]):
        wait_until(lambda: count_effects(users, "work_started") == 1, what="the step started")
        run.pause(actor="ops")
        wait_until(lambda: run.steps()[0]["status"] != "running", what="the step's end")
    assert run.status() == "paused" and run.steps()[0]["status"] == "completed"
    assert status_events == [("workflow_paused", str(run.workflow_id))]


def test_a_step_unknown_at_begin_pauses_its_run_with_its_event_and_a_report(
    users, status_events, reports
):
    run = ThreeSteps.start(n="lost")
    users.execute(
        "UPDATE pgbus.workflow_steps SET step_name = 'never_was' WHERE workflow_id = %s",
        (run.workflow_id,),
    )
    with running_worker(queues=["workflows"]):
        wait_until(lambda: run.status() == "paused", what="the run paused")
    assert run.steps()[0]["error_class"] == "pgbus.workflow.StepNotDefined"
    assert status_events == [("workflow_paused", str(run.workflow_id))]
    [(exc, ctx)] = reports
    assert isinstance(exc, pgbus.workflow.StepNotDefined) and "never_was" in str(exc)
    assert ctx["workflow_id"] == str(run.workflow_id)


def test_an_sql_error_in_a_steps_end_is_recorded_as_itself(users, status_events, reports):
    run = ThreeSteps.start(n="refused end")
    run_id = psycopg.sql.Literal(str(run.workflow_id)).as_string(users)
    users.execute(
        "CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.status = 'completed' AND NEW.workflow_id = {run_id} THEN"
        " RAISE EXCEPTION 'the ledger refuses this step' USING ERRCODE = 'check_violation';"
        " END IF; RETURN NEW; END $$"
    )
    users.execute(
        "CREATE TRIGGER refuse_end BEFORE UPDATE ON pgbus.workflow_steps"
        " FOR EACH ROW EXECUTE FUNCTION refuse_end()"
    )
    with running_worker(queues=["workflows"]):
        wait_until(lambda: run.status() == "paused", what="the run paused")
    [step] = run.steps()
    assert (step["status"], step["error_class"]) == ("failed", "psycopg.errors.CheckViolation")
    assert "the ledger refuses this step" in step["error"]["message"]
    assert count_effects(users, "one", "refused end") == 0  # the body's writes rolled back
    assert status_events == [("workflow_paused", str(run.workflow_id))]
    assert [type(exc).__name__ for exc, _ in reports] == ["CheckViolation"]
