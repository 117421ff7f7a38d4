"""The worker's behaviour, with a real Worker running on a thread of the test process."""

import dataclasses
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgbus
from pgbus.instrumentation import subscribe
from pgbus.jobs import end_overdue
from tests.py.sample_jobs import (
    EnqueueChild,
    EnqueueThenFail,
    FinishedElsewhere,
    Poison,
    Record,
    SlowOnFirstRun,
)
from tests.py.support import count_effects, running_worker, wait_until


@pytest.fixture
def events():
    seen = []
    sub = subscribe("pgbus.*", lambda name, payload: seen.append((name, payload)))
    yield seen
    sub.unsubscribe()


def queue_depth(conn, queue="pgbus_default"):
    return conn.execute(f"SELECT count(*) FROM pgmq.q_{queue}").fetchone()[0]


def archived(conn, queue="pgbus_default"):
    return conn.execute(f"SELECT count(*) FROM pgmq.a_{queue}").fetchone()[0]


def test_jobs_run_once_and_archive_with_their_writes(effects, events):
    Record.perform_all_later([(f"k{i}",) for i in range(20)])
    with running_worker(threads=4):
        wait_until(lambda: count_effects(effects, "done") == 20, what="20 jobs")
        wait_until(lambda: archived(effects) == 20)
    assert queue_depth(effects) == 0
    stats = effects.execute(
        "SELECT status, count(*), min(retry_count) FROM pgbus.job_stats GROUP BY status"
    ).fetchall()
    assert stats == [("success", 20, 0)]
    names = [n for n, _ in events]
    assert names.count("pgbus.job_completed") == 20
    assert names.count("pgbus.executor.execute") == 20
    done = next(p for n, p in events if n == "pgbus.job_completed")
    assert done["job_class"] == "tests.py.sample_jobs:Record" and done["queue"] == "pgbus_default"


def test_poison_job_retries_with_backoff_then_dead_letters(effects, events):
    pgbus.configure(retry_backoff_base=0.05, retry_backoff_max=0.2)
    Poison.perform_later("p1")
    with running_worker():
        wait_until(
            lambda: effects.execute(
                "SELECT to_regclass('pgmq.q_pgbus_default_dlq') IS NOT NULL"
                " AND (SELECT count(*) FROM pgmq.q_pgbus_default) = 0"
            ).fetchone()[0],
            what="DLQ",
        )
        wait_until(lambda: [n for n, _ in events].count("pgbus.job_dead_lettered") == 1)
    assert count_effects(effects, "attempt", "p1") == 3  # max_retries = 2: three runs
    [(message, headers)] = effects.execute(
        "SELECT message, headers FROM pgmq.q_pgbus_default_dlq"
    ).fetchall()
    assert message["args"] == ["p1"]
    dead = headers["pgbus_dead_letter"]
    assert dead["queue"] == "pgbus_default" and dead["read_ct"] == 3
    assert dead["error"]["class"] == "ValueError" and dead["error"]["message"] == "poison p1"
    assert any(
        "sample_jobs.py" in frame and "in perform" in frame for frame in dead["error"]["backtrace"]
    )
    assert not any("/pgbus/" in frame for frame in dead["error"]["backtrace"])
    assert effects.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 0
    names = [n for n, _ in events]
    assert names.count("pgbus.job_failed") == 3
    assert effects.execute("SELECT array_agg(status ORDER BY id) FROM pgbus.job_stats").fetchone()[
        0
    ] == ["failed", "failed", "dead_lettered"]


def test_failure_is_recorded_and_the_message_hidden(effects):
    pgbus.configure(retry_backoff_base=60, retry_backoff_max=120)
    Poison.perform_later("slowly")
    with running_worker():
        wait_until(
            lambda: effects.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 1
        )
    row = effects.execute(
        "SELECT f.error_class, f.error_message, f.read_ct, q.vt - now() > interval '40 seconds'"
        " FROM pgbus.job_failures f JOIN pgmq.q_pgbus_default q USING (msg_id)"
    ).fetchone()
    assert row == ("ValueError", "poison slowly", 1, True)


def test_unknown_class_and_bad_arguments_are_failed_attempts(effects):
    effects.execute("SELECT pgbus.ensure_queue('pgbus_default')")
    for message in (
        {"job_class": "gone.module:Vanished", "args": []},
        {"job_class": Record.job_name, "args": [{"__pgbus__": "date", "v": "bad"}]},
    ):
        effects.execute("SELECT pgmq.send('pgbus_default', %s)", (Jsonb(message),))
    pgbus.configure(retry_backoff_base=60, retry_backoff_max=120)
    with running_worker():
        wait_until(
            lambda: effects.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 2
        )
        Record.perform_later("still working")
        wait_until(lambda: count_effects(effects, "done", "still working") == 1)
    errors = effects.execute(
        "SELECT error_class, error_message FROM pgbus.job_failures ORDER BY msg_id"
    ).fetchall()
    assert errors[0] == (
        "pgbus.UnknownJobClass",
        "unknown job class 'gone.module:Vanished': import its module in the worker"
        " (pgbus start --import gone.module)",
    )
    assert errors[1][0] == "pgbus.SerializationError"
    assert "cannot decode" in errors[1][1]


def test_a_failed_job_leaves_no_writes_and_no_enqueues(effects):
    EnqueueThenFail.perform_later("x")
    with running_worker():
        wait_until(
            lambda: effects.execute(
                "SELECT to_regclass('pgmq.q_pgbus_default_dlq') IS NOT NULL"
            ).fetchone()[0]
        )
    assert queue_depth(effects) == 0  # the child enqueued inside the failed job never existed
    assert effects.execute("SELECT count(*) FROM pgmq.a_pgbus_default").fetchone()[0] == 0


def test_enqueues_inside_a_job_commit_with_it(effects):
    EnqueueChild.perform_later("parent")
    with running_worker():
        wait_until(lambda: count_effects(effects, "done", "child of parent") == 1)


def test_a_run_whose_message_finished_elsewhere_rolls_back(effects, events):
    FinishedElsewhere.perform_later("dup")
    with running_worker():
        wait_until(lambda: archived(effects) == 1)
        wait_until(lambda: any(n == "pgbus.executor.execute" for n, _ in events))
    assert count_effects(effects, "done", "dup") == 0
    assert "pgbus.job_completed" not in [n for n, _ in events]
    assert effects.execute("SELECT count(*) FROM pgbus.job_stats").fetchone()[0] == 0


def test_visibility_heartbeat_keeps_a_long_job_invisible(effects):
    pgbus.configure(visibility_timeout=1)
    SlowOnFirstRun.perform_later("long", 3.5)
    with running_worker(threads=2):
        wait_until(lambda: count_effects(effects, "done", "long") == 1, timeout=15)
    assert count_effects(effects, "started", "long") == 1  # never redelivered while running


def test_worker_refuses_an_unmigrated_database(empty_db_url):
    from pgbus.errors import SchemaNotReady
    from pgbus.worker import Worker

    pgbus.configure(database_url=empty_db_url)
    try:
        with pytest.raises(SchemaNotReady, match="0002_jobs"):
            Worker(["default"]).run()
    finally:
        from pgbus.db import close_pool

        close_pool()
        pgbus.config.reset()


def test_heartbeat_row_while_running(effects):
    with running_worker(threads=3):
        row = wait_until(
            lambda: effects.execute(
                "SELECT kind, pid, metadata FROM pgbus.processes WHERE kind = 'worker'"
            ).fetchone()
        )
    assert row[2]["threads"] == 3 and row[2]["queues"] == ["pgbus_default"]
    assert effects.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] == 0


def test_dead_letter_gate_for_runs_that_never_finished(effects, events):
    """Delivered more often than it may run (its workers kept dying): dead-lettered unrun."""
    Poison.perform_later("crashy")
    for _ in range(3):  # three reads that never finished (max_retries = 2 allows 3 runs)
        effects.execute("SELECT pgmq.read('pgbus_default', 0, 1)")
    with running_worker():
        wait_until(lambda: any(n == "pgbus.job_dead_lettered" for n, _ in events))
    assert count_effects(effects, "attempt") == 0
    headers = effects.execute("SELECT headers FROM pgmq.q_pgbus_default_dlq").fetchone()[0]
    assert headers["pgbus_dead_letter"]["error"]["class"] == "pgbus.RetriesExhausted"


def test_job_connection_is_the_transaction(db_url, effects):
    """perform_later(conn=) from an app connection inside a worker-free flow still commits once."""
    with psycopg.connect(db_url) as app:
        Record.perform_later("app", conn=app)
        app.commit()
    with running_worker():
        wait_until(lambda: count_effects(effects, "done", "app") == 1)


def test_jobs_without_database_work_are_acknowledged_in_bulk(effects, events):
    from tests.py.sample_jobs import record_function

    record_function.perform_all_later([(f"f{i}",) for i in range(30)])
    with running_worker(queues=["functions"], threads=4):
        wait_until(lambda: archived(effects, "pgbus_functions") == 30, what="30 acknowledged")
    assert count_effects(effects, "function") == 30
    assert queue_depth(effects, "pgbus_functions") == 0
    assert [n for n, _ in events].count("pgbus.job_completed") == 30
    stats = effects.execute(
        "SELECT count(*), bool_and(status = 'success') FROM pgbus.job_stats"
    ).fetchone()
    assert stats == (30, True)


def test_a_bulk_acknowledged_job_finished_elsewhere_is_not_counted(effects, events):
    """The acknowledger finds the message gone (another run archived it): no completion."""
    from tests.py.sample_jobs import ArchivesItselfWithoutTransaction

    ArchivesItselfWithoutTransaction.perform_later("solo")
    with running_worker():
        wait_until(lambda: archived(effects) == 1)
        wait_until(lambda: any(n == "pgbus.executor.execute" for n, _ in events))
        wait_until(
            lambda: (
                effects.execute(
                    "SELECT count(*) FROM pgbus.processes WHERE (metadata->>'in_flight')::int = 0"
                ).fetchone()[0]
                == 1
            ),
            timeout=15,
        )
    assert "pgbus.job_completed" not in [n for n, _ in events]
    assert effects.execute("SELECT count(*) FROM pgbus.job_stats").fetchone()[0] == 0


def test_a_step_that_cannot_begin_fails_alone(effects):
    """A broken step message fails like a job; the other messages of the queue still run."""
    pgbus.configure(retry_backoff_base=60, retry_backoff_max=120)
    effects.execute("SELECT pgbus.ensure_queue('pgbus_workflows')")
    effects.execute(
        "SELECT pgmq.send('pgbus_workflows', %s)",
        (
            Jsonb(
                {
                    "job_class": "pgbus.workflow:StepJob",
                    "kwargs": {"workflow_id": "not-a-uuid", "step_id": 1},
                }
            ),
        ),
    )
    Record.set(queue="workflows").perform_later("after the broken one")
    with running_worker(queues=["workflows"]):
        wait_until(lambda: count_effects(effects, "done", "after the broken one") == 1)
        failure = wait_until(
            lambda: effects.execute(
                "SELECT error_class, error_message FROM pgbus.job_failures"
            ).fetchone()
        )
    assert failure[0] == "pgbus.workflow.StepBeginFailed"
    assert "could not begin" in failure[1] and "22P02" in failure[1]


def test_an_overdue_transaction_is_ended_but_never_its_connections_next_one(db_url):
    """jobs.end_overdue ends the server process of a watched job transaction past its
    deadline, once, and only while that transaction is open: a connection that has gone on to
    a later transaction (pooled, reused) is left alone; an ended transaction is not watched."""
    from contextlib import ExitStack

    from pgbus import jobs

    pgbus.configure(database_url=db_url)

    def watched() -> tuple[ExitStack, jobs.JobTransaction, psycopg.Connection]:
        stack = ExitStack()
        tx = jobs.JobTransaction(stack)
        tx.deadline = time.monotonic() + 60
        conn = tx.connection()
        conn.execute("SELECT 1")
        return stack, tx, conn

    def past_deadline(tx: jobs.JobTransaction) -> None:
        jobs._watched[id(tx)] = dataclasses.replace(jobs._watched[id(tx)], deadline=0)

    def alive(pid: int) -> bool:
        with psycopg.connect(db_url) as c:
            return (
                c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()[0]
                == 1
            )

    with psycopg.connect(db_url, autocommit=True) as beats:
        hung_stack, hung_tx, hung = watched()
        done_stack, done_tx, done = watched()
        done_stack.close()  # ended in time: watched no more
        assert id(done_tx) not in jobs._watched and id(hung_tx) in jobs._watched
        assert end_overdue(beats) == 0  # not yet past its deadline
        past_deadline(hung_tx)
        assert end_overdue(beats) == 1
        assert end_overdue(beats) == 0  # answered once
        wait_until(lambda: not alive(hung.info.backend_pid), 5, what="the hung one ended")
        with pytest.raises(psycopg.OperationalError):  # its commit: nothing commits
            hung_stack.close()
        assert done.closed or alive(done.info.backend_pid)

        # A server process whose watched transaction ended, its connection in another one
        # begun since: the entry, seen too late, does not end it.
        with psycopg.connect(db_url) as reused:
            reused.execute("SELECT 1")  # (a transaction begun now)
            jobs._watched[-1] = jobs.WatchedTransaction(
                0, reused.info.backend_pid, datetime.now(UTC) - timedelta(seconds=1)
            )
            assert end_overdue(beats) == 1
            assert reused.execute("SELECT 1").fetchone() == (1,)
