"""Workflows end to end: real worker processes against a real PostgreSQL."""

import os
import signal

import psycopg
import psycopg.sql
import pytest

from tests.py.sample_workflows import SignupWorkflow, Slow, ThreeSteps, User
from tests.py.support import (
    count_effects,
    private_server,
    settled,
    statuses,
    wait_until,
    worker_process,
)

pytestmark = pytest.mark.slow


def test_signup_workflow_finishes_through_a_worker(db_url, users, procs):
    run = SignupWorkflow.start(User(1), plan="pro")
    procs.append(worker_process(db_url))
    wait_until(lambda: run.status() == "finished", timeout=20, what="finished")
    assert [s["step_name"] for s in run.steps()] == ["welcome", "reminder", "complete"]
    assert all(s["worker"] and s["worker"].endswith(f":{procs[0].pid}") for s in run.steps())


def test_a_thousand_runs_each_step_exactly_once(db_url, users, procs):
    runs = [ThreeSteps.start(n=str(i)) for i in range(1000)]
    procs += [worker_process(db_url, "--threads", "4"), worker_process(db_url, "--threads", "4")]

    def finished():
        return users.execute(
            "SELECT count(*) FROM pgbus.workflows WHERE status = 'finished'"
        ).fetchone()[0]

    wait_until(lambda: finished() == 1000, timeout=180, what="1000 runs finished")
    for kind in ("one", "two", "three"):
        assert users.execute(
            "SELECT count(*), count(DISTINCT key) FROM effects WHERE kind = %s", (kind,)
        ).fetchone() == (1000, 1000)
    assert (
        users.execute(
            "SELECT count(*) FROM pgbus.workflow_steps WHERE status <> 'completed'"
        ).fetchone()[0]
        == 0
    )
    assert len(runs) == 1000


def test_a_backlog_of_stale_step_messages_does_not_hold_back_a_due_step(db_url, users, procs):
    """500 step messages whose runs are gone sit ahead of a run's first step. The worker's
    reads pass over them (archiving them) to the due step, instead of taking a polling
    interval for every few of them (that was 250 s here: 2 per read, one read per second)."""
    run = ThreeSteps.start(n="behind")
    queue = users.execute(
        "SELECT queue FROM pgbus.workflow_steps WHERE workflow_id = %s", (run.workflow_id,)
    ).fetchone()[0]
    users.execute(
        "SELECT FROM pgbus.enqueue(%(q)s, pgbus.step_job_class(), ARRAY(SELECT jsonb_build_object("
        " 'kwargs', jsonb_build_object('workflow_id', gen_random_uuid(), 'step_id', -i))"
        " FROM generate_series(1, 500) i))",
        {"q": queue},
    )
    table = psycopg.sql.Identifier("q_" + queue)
    users.execute(
        psycopg.sql.SQL(
            "UPDATE pgmq.{} SET vt = now() - interval '1 hour'"
            " WHERE (message -> 'kwargs' ->> 'step_id')::bigint < 0"
        ).format(table)
    )
    procs.append(worker_process(db_url, "--threads", "1", env={"PGBUS_POLLING_INTERVAL": "1"}))
    wait_until(lambda: run.status() == "finished", timeout=15, what="the run behind them finished")
    left = psycopg.sql.SQL("SELECT count(*) FROM pgmq.{}").format(table)
    assert users.execute(left).fetchone()[0] == 0


def test_kill_9_mid_step_applies_the_stall_action(db_url, users, procs):
    env = {"PGBUS_VISIBILITY_TIMEOUT": "2"}
    paused = Slow.start(seconds=60)
    first = worker_process(db_url, env=env)
    procs.append(first)
    wait_until(lambda: count_effects(users, "work_started") == 1, what="the step started")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    procs.append(worker_process(db_url, env=env))
    wait_until(lambda: paused.status() == "paused", timeout=20, what="stall -> paused")
    row = paused.row()
    assert row["pause_cause"] == "stall"
    assert paused.steps()[0]["status"] == "stalled"
    assert (
        next(e for e in paused.events() if e.event == "stall_detected").details["detection"]
        == "redelivery"
    )
    assert count_effects(users, "work_done") == 0

    # With the reattempt action the step runs again and finishes.
    procs[-1].stop()
    reattempted = Slow.start(seconds=60)
    env = {**env, "PGBUS_WORKFLOW_STALL_ACTION": "reattempt"}
    killed = worker_process(db_url, env=env)
    procs.append(killed)
    wait_until(lambda: count_effects(users, "work_started") == 2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    procs.append(worker_process(db_url, env=env))
    wait_until(
        lambda: reattempted.status() == "finished", timeout=30, what="reattempted -> finished"
    )
    assert [s["status"] for s in reattempted.steps()] == ["stalled", "completed"]


def test_start_in_a_rolled_back_transaction_runs_nothing(db_url, users, procs):
    with psycopg.connect(db_url) as app:
        ThreeSteps.start(n="ghost", conn=app)
        app.rollback()
    marker = ThreeSteps.start(n="marker")
    procs.append(worker_process(db_url))
    wait_until(lambda: marker.status() == "finished", timeout=20)
    assert users.execute("SELECT count(*) FROM pgbus.workflows").fetchone()[0] == 1
    assert count_effects(users, "one", "ghost") == 0


def test_postgres_restart_mid_load(procs):
    """A private server restarted (`-m fast`) while two workers run 300 workflows: all finish,
    none paused on the way (the default stall action would pause a run whose step looked
    stalled), and every step's effect (written in the step's transaction) exists exactly
    once."""
    import pgbus
    from pgbus.db import close_pool

    with private_server() as server:
        pgbus.configure(database_url=server.url)
        try:
            for i in range(300):
                ThreeSteps.start(n=str(i))
            fast = {"PGBUS_VISIBILITY_TIMEOUT": "3"}
            procs += [
                worker_process(server.url, "--threads", "3", env=fast),
                worker_process(server.url, "--threads", "3", env=fast),
            ]

            wait_until(
                lambda: statuses(server.url).get("finished", 0) >= 30, timeout=60, what="progress"
            )
            server.restart()
            wait_until(lambda: settled(server.url, 300), timeout=180, what="all 300 runs settled")
            assert statuses(server.url) == {"finished": 300}
            with psycopg.connect(server.url) as c:
                assert (
                    c.execute(
                        "SELECT count(*) FROM pgbus.workflow_steps WHERE status <> 'completed'"
                    ).fetchone()[0]
                    == 0
                )
                for kind in ("one", "two", "three"):
                    assert c.execute(
                        "SELECT count(*), count(DISTINCT key) FROM effects WHERE kind = %s", (kind,)
                    ).fetchone() == (300, 300)
        finally:
            for p in procs:
                p.stop()
            procs.clear()
            close_pool()
            pgbus.config.reset()


def test_sigterm_hands_back_a_step_read_ahead_and_it_runs_later_without_a_stall(
    db_url, users, procs
):
    running = Slow.start(seconds=2)
    ahead = ThreeSteps.start(n="ahead")
    w = worker_process(db_url, "--threads", "1")  # holds two: one running, one read ahead
    procs.append(w)
    wait_until(lambda: count_effects(users, "work_started") == 1, what="the slow step started")
    wait_until(lambda: ahead.status() == "running", what="the other run's step read ahead")
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    assert "released 1 jobs that had not started" in w.output()
    # Its attempt never ran: back to scheduled, the run ready, its message visible now.
    assert ahead.status() == "ready"
    [attempt] = ahead.steps()
    assert (attempt["status"], attempt["started_at"], attempt["worker"]) == (
        "scheduled",
        None,
        None,
    )
    assert [e.event for e in ahead.events()][-1] == "step_released"
    assert running.status() == "finished"

    procs.append(worker_process(db_url))
    wait_until(
        lambda: ahead.status() == "finished", timeout=20, what="the handed-back run finishes"
    )
    assert "stall_detected" not in [e.event for e in ahead.events()]
    assert count_effects(users, "one", "ahead") == 1
