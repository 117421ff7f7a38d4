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
