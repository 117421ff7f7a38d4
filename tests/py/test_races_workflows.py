"""Races between real sessions on workflow transitions: the row lock serialises them, so one
wins and the other either refuses or applies to the state the winner left."""

import pytest

from tests.py.sample_workflows import ThreeSteps
from tests.py.test_races_jobs import race

ROUNDS = 25
COMMAND = "SELECT pgbus.workflow_command(%s, %s, 'racer', NULL)"


def read_step(conn):
    """Begin the run's scheduled step as a worker would; its attempt id."""
    conn.execute("UPDATE pgmq.q_pgbus_workflows SET vt = now()")
    rows = conn.execute(
        "SELECT context FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 30, 1, 'racer:1', 'r')"
    ).fetchall()
    assert len(rows) == 1
    return int(rows[0][0]["step_id"])


def live_messages(conn):
    return conn.execute("SELECT count(*) FROM pgmq.q_pgbus_workflows").fetchone()[0]


@pytest.fixture
def queue_ready(conn):
    conn.execute("SELECT pgbus.ensure_queue('pgbus_workflows')")
    return conn


def test_resume_against_cancel(db_url, queue_ready):
    conn = queue_ready
    outcomes = set()
    for _ in range(ROUNDS):
        run = ThreeSteps.start(n="r")
        run.pause()
        resumed, cancelled = race(
            db_url, [(COMMAND, (run.workflow_id, "resume")), (COMMAND, (run.workflow_id, "cancel"))]
        )
        assert cancelled["ok"] and run.status() == "cancelled"
        if resumed["ok"]:
            outcomes.add("resume first")
            events = [e.event for e in run.events()]
            assert events.index("resumed") < events.index("cancelled")
        else:
            outcomes.add("cancel first")
            assert (resumed["code"], resumed["status"]) == ("not_allowed", "cancelled")
        assert live_messages(conn) == 0  # no step left to run for a cancelled run
    assert outcomes  # which one won varies; each round is consistent


def test_pause_against_step_end(db_url, queue_ready):
    conn = queue_ready
    for _ in range(ROUNDS):
        run = ThreeSteps.start(n="p")
        step_id = read_step(conn)
        paused, ended = race(
            db_url,
            [
                (COMMAND, (run.workflow_id, "pause")),
                ("SELECT pgbus.workflow_end_step(%s, 'complete')", (step_id,)),
            ],
        )
        assert paused["ok"] and ended["ok"]
        assert run.status() == "paused" and live_messages(conn) == 0
        # Whichever came first, the completed step is kept and resume continues after it.
        assert run.steps()[0]["status"] == "completed"
        run.resume()
        assert run.row()["current_step"] == "two"
        run.cancel()


def test_double_delivery_of_one_step_job(db_url, queue_ready):
    """Its worker is slow and the message comes back: one of the two wins, never both."""
    conn = queue_ready
    winners = set()
    for _ in range(ROUNDS):
        run = ThreeSteps.start(n="d")
        step_id = read_step(conn)
        conn.execute(
            "UPDATE pgmq.q_pgbus_workflows SET vt = now()"
        )  # the visibility timeout passed
        ended, redelivered = race(
            db_url,
            [
                ("SELECT pgbus.workflow_end_step(%s, 'complete')", (step_id,)),
                (
                    "SELECT count(*) FROM pgbus.read_jobs(ARRAY['pgbus_workflows'], 30, 1, 'other:2', 'r')"
                    " WHERE context ->> 'stalled' = 'true'",
                    (),
                ),
            ],
        )
        if ended["ok"]:
            winners.add("the slow worker")
            assert redelivered == 0 and run.row()["current_step"] == "two"
        else:
            winners.add("the redelivery")
            assert ended["code"] == "stale" and redelivered == 1
            assert run.status() == "paused" and run.row()["pause_cause"] == "stall"
        assert run.steps()[0]["status"] in ("completed", "stalled")
        run.cancel()
        conn.execute("SELECT pgmq.purge_queue('pgbus_workflows')")
    assert winners


def test_two_ends_of_one_attempt(db_url, queue_ready):
    conn = queue_ready
    for _ in range(ROUNDS):
        run = ThreeSteps.start(n="e")
        step_id = read_step(conn)
        results = race(db_url, [("SELECT pgbus.workflow_end_step(%s, 'complete')", (step_id,))] * 2)
        assert sorted(r["ok"] for r in results) == [False, True]
        assert next(r for r in results if not r["ok"])["code"] == "stale"
        assert len([s for s in run.steps() if s["step_name"] == "two"]) == 1
        run.cancel()
