"""The workflow API, inline through the same SQL as a worker (pgbus.workflow.testing)."""

import psycopg
import pytest

import pgbus
from pgbus.instrumentation import subscribe
from pgbus.workflow import AlreadyRunning, PayloadTooLarge, WorkflowRefused
from pgbus.workflow.testing import (
    NothingToRun,
    perform_next_step,
    run_step_inline,
    speedrun_workflow,
)
from tests.py.sample_workflows import (
    Flaky,
    Hooks,
    Policies,
    SignupWorkflow,
    ThreeSteps,
    User,
    Verbs,
    WithGravestone,
)
from tests.py.support import count_effects


@pytest.fixture
def events():
    seen = []
    sub = subscribe("pgbus.workflow*", lambda name, payload: seen.append((name, payload)))
    yield seen
    sub.unsubscribe()


def names(events):
    return [n for n, _ in events]


def test_signup_workflow_runs_to_the_end(users, events):
    run = SignupWorkflow.start(User(1), plan="pro")
    assert run.status() == "ready" and not run.duplicate_start
    assert speedrun_workflow(run) == "finished"
    assert count_effects(users, "welcome", "1") == 1 and count_effects(users, "reminder", "1") == 1
    assert users.execute("SELECT onboarded FROM users WHERE id = 1").fetchone()[0] is True
    assert [e.event for e in run.events()] == [
        "started",
        "step_scheduled",
        "step_started",
        "step_completed",
        "step_scheduled",
        "step_started",
        "step_completed",
        "step_scheduled",
        "step_started",
        "step_completed",
        "finished",
    ]
    welcome = run.steps()[0]
    assert welcome["output"] == {"sent_to": 1, "plan": "pro"} and welcome["worker"] == "inline"
    assert names(events).count("pgbus.workflow.step") == 3
    assert names(events)[-1] == "pgbus.workflow_finished"


def test_waits_delay_the_next_step(users):
    run = SignupWorkflow.start(User(1), plan="pro")
    perform_next_step(run)
    reminder = run.steps()[-1]
    assert reminder["step_name"] == "reminder"
    assert (reminder["scheduled_at"] - run.steps()[0]["ended_at"]).total_seconds() >= 0.2


def test_skip_if_and_cancel_if(users):
    users.execute("UPDATE users SET onboarded = true WHERE id = 2")
    run = SignupWorkflow.start(User(2), plan="basic")
    assert speedrun_workflow(run) == "finished"
    assert [s["status"] for s in run.steps()] == ["completed", "skipped", "completed"]
    assert count_effects(users, "reminder") == 0

    users.execute("UPDATE users SET closed = true WHERE id = 3")
    closed = SignupWorkflow.start(User(3), plan="basic")
    assert speedrun_workflow(closed) == "cancelled"
    assert count_effects(users, "welcome", "3") == 0


def test_subject_gone_is_none_and_cancels(users):
    run = SignupWorkflow.start(("User", "99"), plan="x")
    assert speedrun_workflow(run) == "cancelled"


def test_one_ongoing_run_per_subject(users):
    first = SignupWorkflow.start(User(1), plan="pro")
    with pytest.raises(AlreadyRunning, match="already has an ongoing run for User 1"):
        SignupWorkflow.start(User(1), plan="pro")
    first.cancel(actor="test")
    assert SignupWorkflow.start(User(1), plan="again").status() == "ready"
    # Subject-less runs are not limited.
    a, b = ThreeSteps.start(n="a"), ThreeSteps.start(n="b")
    assert a.workflow_id != b.workflow_id


def test_idempotency_key_returns_the_existing_run(users):
    first = ThreeSteps.start(n="x", idempotency_key="checkout-1")
    again = ThreeSteps.start(n="y", idempotency_key="checkout-1")
    assert again.workflow_id == first.workflow_id and again.duplicate_start
    assert not ThreeSteps.start(n="z", idempotency_key="  ").duplicate_start  # blank: no key


def test_start_joins_the_callers_transaction(db_url, users):
    with psycopg.connect(db_url) as app:
        run = ThreeSteps.start(n="rolled back", conn=app)
        app.rollback()
    assert run.status() is None
    assert users.execute("SELECT count(*) FROM pgbus.workflow_steps").fetchone()[0] == 0
    assert users.execute("SELECT to_regclass('pgmq.q_pgbus_workflows')").fetchone()[0] is None
    with psycopg.connect(db_url) as app:
        run = ThreeSteps.start(n="kept", conn=app)
        assert users.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0] == 0
        app.commit()
    assert run.status() == "ready"


def test_arguments_are_read_only_and_capped(users):
    pgbus.configure(workflow_max_payload_size=300)
    with pytest.raises(PayloadTooLarge, match=r"more than workflow_max_payload_size \(300\)"):
        ThreeSteps.start(n="x" * 400)
    assert users.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0] == 0


def test_failure_pauses_with_the_error_and_rolls_back_the_body(users, events):
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append((type(exc).__name__, ctx))])
    run = Flaky.start()
    assert speedrun_workflow(run) == "paused"
    row = run.row()
    assert (row["pause_cause"], row["current_step"]) == ("error", "charge")
    [attempt] = run.steps()
    assert attempt["status"] == "failed" and attempt["error_class"] == "TimeoutError"
    error = attempt["error"]
    assert error["message"] == "charge timed out"
    assert error["causes"] == [{"class": "ConnectionError", "message": "gateway unreachable"}]
    assert any("sample_workflows.py" in line for line in error["backtrace"])
    assert not any("/pgbus/" in line for line in error["backtrace"])
    assert ":" in error["worker"]
    assert count_effects(users, "charge_try") == 0  # the body's write rolled back
    assert reports == [
        (
            "TimeoutError",
            {
                "action": "workflow_step",
                "workflow_id": str(run.workflow_id),
                "workflow_class": Flaky.workflow_name,
                "step": "charge",
                "attempt": 1,
            },
        )
    ]
    paused = [p for n, p in events if n == "pgbus.workflow_paused"]
    assert paused[0]["error_class"] == "TimeoutError"

    users.execute("INSERT INTO effects (kind, key) VALUES ('fixed', 'now')")
    assert run.resume(actor="alice", reason="gateway back") == "ready"
    assert speedrun_workflow(run) == "finished"
    steps = run.steps()
    assert [(s["step_name"], s["attempt"], s["status"]) for s in steps] == [
        ("charge", 1, "failed"),
        ("charge", 2, "completed"),
        ("receipt", 1, "completed"),
    ]
    assert steps[2]["output"] == {"charge": {"charge_id": "ch_1"}}
    resumed = next(e for e in run.events() if e.event == "resumed")
    assert (resumed.actor, resumed.reason) == ("alice", "gateway back")


@pytest.mark.parametrize(
    ("verb", "status", "attempt_status"),
    [
        ("pause", "paused", "interrupted"),
        ("cancel", "cancelled", "cancelled"),
        ("skip", "finished", "skipped"),
        ("finished", "finished", "completed"),
    ],
)
def test_step_verbs(users, verb, status, attempt_status):
    run = Verbs.start(verb=verb)
    assert speedrun_workflow(run) == status
    first = run.steps()[0]
    assert (first["status"], first["outcome"]) == (attempt_status, verb)
    ran_after = count_effects(users, "after")
    assert ran_after == (1 if verb == "skip" else 0)
    if verb == "finished":
        assert first["output"] == {"early": True}
    if verb == "pause":
        assert run.row()["pause_cause"] == "manual"
        assert next(e for e in run.events() if e.event == "paused").reason == "said pause"


def test_reattempt_runs_the_step_again(users):
    run = Verbs.start(verb="reattempt")
    assert speedrun_workflow(run) == "finished"
    assert [(s["step_name"], s["attempt"], s["status"]) for s in run.steps()] == [
        ("decide", 1, "interrupted"),
        ("decide", 2, "completed"),
        ("after", 1, "completed"),
    ]


def test_policies_reattempt_then_terminal_action(users):
    run = Policies.start(error="retry me")
    assert speedrun_workflow(run) == "cancelled"
    assert [s["status"] for s in run.steps()] == ["failed", "failed", "failed"]  # 1 + 2 reattempts
    assert count_effects(users, "risky", "retry me") == 3


def test_policy_handler_and_unmatched_and_report_false(users):
    reports = []
    pgbus.configure(error_reporters=[lambda exc, ctx: reports.append(type(exc).__name__)])
    assert speedrun_workflow(Policies.start(error="other")) == "finished"  # handler says skip
    assert speedrun_workflow(Policies.start(error="key")) == "finished"  # skip, not reported
    assert reports == ["ValueError"]


def test_hooks_and_idempotency_keys(users):
    run = Hooks.start()
    assert speedrun_workflow(run) == "finished"
    kinds = [r[0] for r in users.execute("SELECT kind FROM effects ORDER BY id")]
    assert kinds == ["before", "body", "after"]
    output = run.steps()[0]["output"]
    assert output["key"] == f"{run.workflow_id}:only"
    assert output["attempt_key"] == f"{run.workflow_id}:only:1"


def test_removed_step_is_skipped_and_unknown_step_pauses(users):
    run = WithGravestone.start()
    assert speedrun_workflow(run) == "finished"
    assert [s["step_name"] for s in run.steps()] == ["first", "last"]

    # A live run still naming a step the code removed since: skipped.
    stranded = WithGravestone.start()
    users.execute(
        "UPDATE pgbus.workflow_steps SET step_name = 'old' WHERE workflow_id = %s",
        (stranded.workflow_id,),
    )
    users.execute(
        "UPDATE pgbus.workflows SET current_step = 'old' WHERE workflow_id = %s",
        (stranded.workflow_id,),
    )
    assert speedrun_workflow(stranded) == "finished"
    assert [s["status"] for s in stranded.steps()][:1] == ["skipped"]

    # A step no definition knows: the run pauses with StepNotDefined.
    lost = WithGravestone.start()
    users.execute(
        "UPDATE pgbus.workflow_steps SET step_name = 'never_was' WHERE workflow_id = %s",
        (lost.workflow_id,),
    )
    assert speedrun_workflow(lost) == "paused"
    assert lost.steps()[0]["error_class"] == "pgbus.workflow.StepNotDefined"


def test_outside_verbs_and_refusals(users, events):
    run = ThreeSteps.start(n="ops")
    assert run.available_actions() == ["reschedule", "signal", "pause", "cancel"]
    assert run.pause(actor="dashboard:alice", reason="maintenance") == "paused"
    assert run.available_actions() == ["resume", "resume_at", "signal", "cancel"]
    with pytest.raises(WorkflowRefused) as refused:
        run.pause()
    assert (refused.value.code, refused.value.status) == ("not_allowed", "paused")
    assert run.resume_at("three") == "ready"
    assert run.row()["current_step"] == "three"
    run.pause()
    with pytest.raises(WorkflowRefused, match="has no step 'nope'"):
        run.resume_at("nope")
    assert run.row()["current_step"] == "three"
    run.cancel(actor="bob")
    assert run.status() == "cancelled"
    assert "pgbus.workflow_cancelled" in names(events)
    rerun = run.rerun(actor="carol")
    assert rerun.status() == "ready"
    assert rerun.rerun_of().workflow_id == run.workflow_id
    assert [r.workflow_id for r in run.reruns()] == [rerun.workflow_id]
    assert next(e for e in run.events() if e.event == "rerun").details == {
        "workflow_id": str(rerun.workflow_id)
    }


def test_run_now_and_reschedule(users):
    from datetime import UTC, datetime, timedelta

    run = SignupWorkflow.start(User(1), plan="pro")
    perform_next_step(run)  # welcome; reminder waits 0.2 s
    later = datetime.now(UTC) + timedelta(hours=1)
    assert run.reschedule(later, actor="ops") == "ready"
    assert "run_now" in run.available_actions()
    vt = users.execute(
        "SELECT q.vt FROM pgmq.q_pgbus_workflows q JOIN pgbus.workflow_steps s"
        " ON s.msg_id = q.msg_id WHERE s.step_name = 'reminder'"
    ).fetchone()[0]
    assert abs((vt - later).total_seconds()) < 1
    assert run.run_now() == "ready"
    assert "run_now" not in run.available_actions()
    with pytest.raises(ValueError, match="timezone-aware"):
        run.reschedule(datetime(2030, 1, 1))


def test_not_found_and_helpers_refuse_what_cannot_run(users):
    from uuid import uuid4

    from pgbus.workflow import WorkflowRun

    ghost = WorkflowRun(uuid4(), ThreeSteps.workflow_name)
    with pytest.raises(WorkflowRefused) as refused:
        ghost.cancel()
    assert refused.value.code == "not_found"
    assert ThreeSteps.find(uuid4()) is None
    run = ThreeSteps.start(n="h")
    with pytest.raises(NothingToRun, match="at step one, not at two"):
        run_step_inline(run, "two")
    assert run_step_inline(run, "one") == "ready"
    run.pause()
    with pytest.raises(NothingToRun, match="the run is paused"):
        perform_next_step(run)


def test_events_only_after_commit(db_url, users, events):
    run = ThreeSteps.start(n="tx")
    with psycopg.connect(db_url) as app:
        run.pause(conn=app)
        assert "pgbus.workflow_paused" not in names(events)
        app.rollback()
    assert run.status() == "ready" and "pgbus.workflow_paused" not in names(events)
    with psycopg.connect(db_url) as app:
        run.pause(conn=app)
        assert "pgbus.workflow_paused" not in names(events)
        app.commit()
    assert names(events).count("pgbus.workflow_paused") == 1


def test_start_without_the_workflow_migration(empty_db_url):
    from pgbus.errors import SchemaNotReady

    pgbus.configure(database_url=empty_db_url)
    try:
        with pytest.raises(SchemaNotReady, match=r"0003_workflows.*pgbus db migrate"):
            ThreeSteps.start(n="x")
    finally:
        from pgbus.db import close_pool

        close_pool()
        pgbus.config.reset()
