"""A worker's read-ahead workflow steps: each step's body is marked started (so that a crash
counts only steps that had started as stalls) without a transaction of its own: by the read
that took it, by the previous step's end on the same thread, or by the next read when a thread
is free and only read-ahead steps are waiting."""

from __future__ import annotations

import threading

import pytest

from pgbus.workflow.runner import StepJob
from tests.py.sample_workflows import ThreeSteps
from tests.py.support import running_worker, wait_until


@pytest.fixture
def marks_on_their_own(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Step ids marked started by a statement of their own (StepJob._mark_started)."""
    calls: list[int] = []
    lock = threading.Lock()
    real = StepJob._mark_started

    def counting(self: StepJob) -> bool:
        with lock:
            calls.append(self.step_id)
        return real(self)

    monkeypatch.setattr(StepJob, "_mark_started", counting)
    return calls


def finished(conn, n: int) -> bool:
    return (
        conn.execute("SELECT count(*) FROM pgbus.workflows WHERE status = 'finished'").fetchone()[0]
        >= n
    )


@pytest.mark.parametrize("threads", [1, 4])
def test_a_busy_worker_marks_every_step_started_without_a_transaction_of_its_own(
    effects, marks_on_their_own, threads
):
    runs = 60
    for n in range(runs):
        ThreeSteps.start(n=n)
    with running_worker(queues=["workflows"], threads=threads):
        wait_until(lambda: finished(effects, runs), 60, what="every run finished")
    assert marks_on_their_own == []
    steps = effects.execute(
        "SELECT count(*), count(body_started_at), count(*) FILTER (WHERE status <> 'completed')"
        " FROM pgbus.workflow_steps"
    ).fetchone()
    assert steps == (3 * runs, 3 * runs, 0)
    assert effects.execute("SELECT count(*) FROM effects").fetchone()[0] == 3 * runs


def test_workers_in_one_process_hold_their_own_steps(effects):
    """Two workers in one process have identities of their own: one handing back the steps a
    lost read began for it (it holds none) leaves the other's running step alone, which then
    ends once."""
    from pgbus.worker import Worker
    from tests.py.sample_workflows import Slow

    run = Slow.start(seconds=2).workflow_id
    with running_worker(queues=["workflows"], threads=1) as busy:
        wait_until(
            lambda: effects.execute(
                "SELECT 1 FROM effects WHERE kind = 'work_started' AND key = %s", (str(run),)
            ).fetchone(),
            what="the step started",
        )
        other = Worker(["elsewhere"], threads=1)
        assert other.identity != busy.identity
        assert other.identity.split("#")[0] == busy.identity.split("#")[0]  # host:pid
        other._release_lost()  # as after a read whose answer was lost
        attempt = effects.execute(
            "SELECT status, worker FROM pgbus.workflow_steps WHERE workflow_id = %s", (run,)
        ).fetchall()
        assert attempt == [("running", busy.identity)]
        wait_until(lambda: finished(effects, 1), 30, what="the run finished")
    assert effects.execute(
        "SELECT count(*) FROM pgbus.workflow_steps WHERE workflow_id = %s", (run,)
    ).fetchone() == (1,)
    assert effects.execute(
        "SELECT count(*) FROM effects WHERE kind = 'work_done' AND key = %s", (str(run),)
    ).fetchone() == (1,)
