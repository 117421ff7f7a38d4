"""After-commit instrumentation: an event goes out once, after the transaction that made its
transition commits; never for a transition rolled back, at any depth, on any later transaction
of the same connection."""

import psycopg
import pytest

from pgbus.instrumentation import subscribe
from pgbus.workflow.testing import perform_next_step
from tests.py.sample_workflows import Meddler, ThreeSteps


@pytest.fixture
def status_events():
    seen = []
    sub = subscribe(
        "pgbus.workflow_*",
        lambda name, payload: seen.append((name, str(payload["workflow_id"]))),
    )
    yield seen
    sub.unsubscribe()


def test_a_rolled_back_transaction_leaves_the_next_ones_events_alone(db_url, users, status_events):
    first, second, third = (ThreeSteps.start(n=str(i)) for i in range(3))
    with psycopg.connect(db_url) as app:
        first.pause(conn=app)
        app.rollback()
        second.pause(conn=app)
        assert status_events == []
        app.commit()
        third.cancel(conn=app)
        app.commit()
    assert status_events == [
        ("pgbus.workflow_paused", str(second.workflow_id)),
        ("pgbus.workflow_cancelled", str(third.workflow_id)),
    ]
    assert first.status() == "ready"


def test_a_rolled_back_savepoint_drops_only_its_own_events(db_url, users, status_events):
    first, second = ThreeSteps.start(n="a"), ThreeSteps.start(n="b")
    with psycopg.connect(db_url, autocommit=True) as app:
        with app.transaction():
            with pytest.raises(RuntimeError), app.transaction():
                first.pause(conn=app)  # the first deferral on this connection, rolled back
                raise RuntimeError("undo")
            second.pause(conn=app)
            assert status_events == []
        assert status_events == [("pgbus.workflow_paused", str(second.workflow_id))]
        # A released savepoint inside a transaction that rolls back emits nothing.
        with pytest.raises(RuntimeError), app.transaction():
            with app.transaction():
                first.cancel(conn=app)
            raise RuntimeError("undo all")
        first.pause(conn=app)  # autocommit: committed at once
    assert status_events == [
        ("pgbus.workflow_paused", str(second.workflow_id)),
        ("pgbus.workflow_paused", str(first.workflow_id)),
    ]


@pytest.mark.parametrize("verb", ["cancel", "pause", "signal"])
def test_a_step_that_acts_on_another_run_then_raises_emits_nothing_for_it(
    users, status_events, verb
):
    target = ThreeSteps.start(n="t")
    meddler = Meddler.start(target=str(target.workflow_id), verb=verb, fail=True)
    signals = []
    sub = subscribe("pgbus.workflow.signal", lambda name, payload: signals.append(payload))
    try:
        assert perform_next_step(meddler) == "paused"
    finally:
        sub.unsubscribe()
    assert target.status() == "ready"
    assert status_events == [("pgbus.workflow_paused", str(meddler.workflow_id))]
    assert signals == []


def test_a_step_that_acts_on_another_run_and_finishes_emits_it_once(users, status_events):
    target = ThreeSteps.start(n="t")
    meddler = Meddler.start(target=str(target.workflow_id), verb="cancel", fail=False)
    assert perform_next_step(meddler) == "finished"
    assert target.status() == "cancelled"
    assert sorted(status_events) == sorted(
        [
            ("pgbus.workflow_cancelled", str(target.workflow_id)),
            ("pgbus.workflow_finished", str(meddler.workflow_id)),
        ]
    )


def test_a_worker_emits_nothing_for_a_rolled_back_action_and_once_for_a_kept_one(
    users, status_events
):
    from tests.py.support import running_worker, wait_until

    target, kept = ThreeSteps.start(n="t1"), ThreeSteps.start(n="t2")
    for run in (target, kept):  # (so that the worker leaves them be)
        run.pause()
    status_events.clear()
    failing = Meddler.start(target=str(target.workflow_id), verb="cancel", fail=True)
    passing = Meddler.start(target=str(kept.workflow_id), verb="cancel", fail=False)
    with running_worker(queues=["workflows"]):
        wait_until(lambda: failing.status() == "paused" and passing.status() == "finished")
    assert sorted(status_events) == sorted(
        [
            ("pgbus.workflow_paused", str(failing.workflow_id)),  # its own failure, once
            ("pgbus.workflow_cancelled", str(kept.workflow_id)),  # the kept action, once
            ("pgbus.workflow_finished", str(passing.workflow_id)),
        ]
    )
    assert target.status() == "paused"  # the rolled-back cancel: no change, no event
