"""End to end: real worker, dispatcher and supervisor processes against a real PostgreSQL."""

import os
import signal
import socket

import psycopg
import pytest

from pgbus import batches
from tests.py.sample_jobs import OnComplete, OnDiscard, OnSuccess, Poison, Record, SlowOnFirstRun
from tests.py.support import (
    FAST,
    count_effects,
    pgbus_process,
    private_server,
    wait_until,
    worker_process,
)

pytestmark = pytest.mark.slow


def test_a_thousand_jobs_over_two_workers_run_exactly_once(db_url, effects, procs):
    Record.perform_all_later([(f"k{i}",) for i in range(1000)])
    procs += [worker_process(db_url, "--threads", "4"), worker_process(db_url, "--threads", "4")]
    wait_until(lambda: count_effects(effects, "done") == 1000, timeout=120, what="1000 jobs")
    assert effects.execute(
        "SELECT count(DISTINCT key), count(*) FROM effects WHERE kind = 'done'"
    ).fetchone() == (1000, 1000)
    assert effects.execute("SELECT count(*) FROM pgmq.a_pgbus_default").fetchone()[0] == 1000
    # Both workers took part.
    pids = {p.pid for p in procs}
    assert all("worker started" in p.output() for p in procs), pids


def test_kill_9_mid_job_reruns_after_the_visibility_timeout(db_url, effects, procs):
    env = {"PGBUS_VISIBILITY_TIMEOUT": "2"}
    SlowOnFirstRun.perform_later("victim", 60)
    first = worker_process(db_url, env=env)
    procs.append(first)
    wait_until(lambda: count_effects(effects, "started", "victim") == 1, what="first run")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    procs.append(worker_process(db_url, env=env))
    wait_until(lambda: count_effects(effects, "done", "victim") == 1, timeout=30, what="rerun")
    assert count_effects(effects, "started", "victim") == 2
    assert effects.execute("SELECT read_ct FROM pgmq.a_pgbus_default").fetchone()[0] == 2
    # The killed run's open transaction wrote nothing.
    assert count_effects(effects, "done", "victim") == 1


def test_poison_job_dead_letters_through_a_real_worker(db_url, effects, procs):
    Poison.perform_later("p")
    procs.append(
        worker_process(
            db_url, env={"PGBUS_RETRY_BACKOFF_BASE": "0.05", "PGBUS_RETRY_BACKOFF_MAX": "0.1"}
        )
    )
    wait_until(
        lambda: effects.execute(
            "SELECT to_regclass('pgmq.q_pgbus_default_dlq') IS NOT NULL"
        ).fetchone()[0],
        timeout=20,
    )
    headers = wait_until(
        lambda: effects.execute("SELECT headers FROM pgmq.q_pgbus_default_dlq").fetchone()
    )[0]
    assert headers["pgbus_dead_letter"]["error"]["message"] == "poison p"
    assert count_effects(effects, "attempt", "p") == 3


def test_enqueue_in_a_rolled_back_transaction_runs_nothing(db_url, effects, procs):
    with psycopg.connect(db_url) as app:
        Record.perform_later("ghost", conn=app)
        app.rollback()
    Record.perform_later("marker")
    procs.append(worker_process(db_url))
    wait_until(lambda: count_effects(effects, "done", "marker") == 1)
    assert count_effects(effects, "done", "ghost") == 0


@pytest.mark.parametrize("committed", [True, False])
def test_batch_inside_a_transaction(db_url, effects, procs, committed):
    with psycopg.connect(db_url) as app:
        with batches.batch(
            on_complete=OnComplete,
            on_success=OnSuccess,
            on_discard=OnDiscard,
            properties={"name": "tx"},
            conn=app,
        ) as b:
            for i in range(5):
                b.add(Record, f"member{i}")
        app.commit() if committed else app.rollback()
    Record.perform_later("marker")
    procs.append(worker_process(db_url))
    wait_until(lambda: count_effects(effects, "done", "marker") == 1)
    if committed:
        wait_until(lambda: count_effects(effects, "on_success", "tx") == 1, what="on_success")
        wait_until(lambda: count_effects(effects, "on_complete", "tx") == 1, what="on_complete")
        assert count_effects(effects, "done") == 6
        assert batches.find(b.id, conn=effects)["status"] == "finished"
    else:
        assert count_effects(effects, "done") == 1
        assert batches.find(b.id, conn=effects) is None
    assert count_effects(effects, "on_discard") == 0


def test_batch_with_a_dead_lettered_member(db_url, effects, procs):
    with batches.batch(
        on_complete=OnComplete,
        on_success=OnSuccess,
        on_discard=OnDiscard,
        properties={"name": "mixed"},
    ) as b:
        b.add(Record, "fine")
        b.add(Poison, "bad")
    procs.append(
        worker_process(
            db_url, env={"PGBUS_RETRY_BACKOFF_BASE": "0.05", "PGBUS_RETRY_BACKOFF_MAX": "0.1"}
        )
    )
    wait_until(lambda: count_effects(effects, "on_discard", "mixed") == 1, timeout=20)
    wait_until(lambda: count_effects(effects, "on_complete", "mixed") == 1)
    row = batches.find(b.id, conn=effects)
    assert (row["completed_jobs"], row["discarded_jobs"], row["status"]) == (1, 1, "finished")
    assert count_effects(effects, "on_success") == 0


def test_sigterm_lets_the_running_job_finish(db_url, effects, procs):
    SlowOnFirstRun.perform_later("drain", 2)
    w = worker_process(db_url)
    procs.append(w)
    wait_until(lambda: count_effects(effects, "started", "drain") == 1)
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    assert count_effects(effects, "done", "drain") == 1
    assert "worker stopped: 1 jobs processed" in w.output()
    assert effects.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] == 0


def test_second_signal_exits_at_once(db_url, effects, procs):
    SlowOnFirstRun.perform_later("abandon", 60)
    w = worker_process(db_url)
    procs.append(w)
    wait_until(lambda: count_effects(effects, "started", "abandon") == 1)
    w.signal(signal.SIGTERM)
    w.wait_for_output("finishing running jobs")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 1
    assert count_effects(effects, "done", "abandon") == 0


def test_supervisor_runs_restarts_and_stops_its_children(db_url, effects, procs):
    sup = pgbus_process(
        "start", "--import", "tests.py.sample_jobs", env={"PGBUS_DATABASE_URL": db_url, **FAST}
    )
    procs.append(sup)

    def kinds():
        return sorted(r[0] for r in effects.execute("SELECT kind FROM pgbus.processes"))

    wait_until(
        lambda: kinds() == ["dispatcher", "supervisor", "worker"], timeout=20, what="processes"
    )
    Record.perform_later("via supervisor")
    wait_until(lambda: count_effects(effects, "done", "via supervisor") == 1)

    worker_pid = effects.execute(
        "SELECT pid FROM pgbus.processes WHERE kind = 'worker'"
    ).fetchone()[0]
    os.kill(worker_pid, signal.SIGKILL)
    wait_until(
        lambda: (
            effects.execute(
                "SELECT count(*) FROM pgbus.processes WHERE kind = 'worker' AND pid <> %s",
                (worker_pid,),
            ).fetchone()[0]
            == 1
        ),
        timeout=20,
        what="restarted worker",
    )
    Record.perform_later("after restart")
    wait_until(lambda: count_effects(effects, "done", "after restart") == 1)

    sup.signal(signal.SIGTERM)
    assert sup.wait(40) == 0
    # The killed worker's row stays until the dispatcher prunes it; the others deregistered.
    assert [r[0] for r in effects.execute("SELECT pid FROM pgbus.processes")] == [worker_pid]


def test_postgres_restart_while_two_workers_process_a_backlog(procs):
    """A private server, restarted under load: every job completes, none twice."""
    with private_server() as server:
        with psycopg.connect(server.url, autocommit=True) as c:
            Record.perform_all_later([(f"k{i}",) for i in range(3000)], conn=c)
        fast = {"PGBUS_VISIBILITY_TIMEOUT": "3"}
        procs += [
            worker_process(server.url, "--threads", "3", env=fast),
            worker_process(server.url, "--threads", "3", env=fast),
        ]

        def done():
            with psycopg.connect(server.url) as c:
                return count_effects(c, "done")

        # (Deadlines for a loaded machine: two workers' start-up and 3,000 jobs can take minutes.)
        wait_until(lambda: done() >= 300, timeout=120, what="some progress")
        server.restart()
        wait_until(lambda: done() == 3000, timeout=360, interval=0.5, what="all 3000 jobs")
        with psycopg.connect(server.url) as c:
            assert c.execute("SELECT count(DISTINCT key), count(*) FROM effects").fetchone() == (
                3000,
                3000,
            )
            assert c.execute("SELECT count(*) FROM pgmq.q_pgbus_default").fetchone()[0] == 0
        assert all(p.popen.poll() is None for p in procs), "workers survive the restart"
        for p in procs:
            p.stop()
        procs.clear()


def test_worker_process_sends_statsd_metrics(db_url, effects, procs):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(20)
        port = udp.getsockname()[1]
        procs.append(
            worker_process(
                db_url, env={"PGBUS_METRICS_BACKEND": "statsd", "PGBUS_STATSD_PORT": str(port)}
            )
        )
        Record.perform_later("measured")
        packets = []
        while not any(p.startswith("pgbus_queue_job_count:1|c") for p in packets):
            packets.append(udp.recv(4096).decode())
    assert (
        "pgbus_queue_job_count:1|c|#job_class:tests.py.sample_jobs:Record,queue:pgbus_default,status:processed"
        in packets
    )
    assert any(p.startswith("pgbus_job_duration_ms:") and p.split("|")[1] == "ms" for p in packets)


def test_sigterm_releases_jobs_read_ahead_but_not_started(db_url, effects, procs):
    SlowOnFirstRun.perform_later("running", 2)
    Record.perform_later("waiting")
    w = worker_process(db_url, "--threads", "1")  # holds two: one running, one read ahead
    procs.append(w)
    wait_until(lambda: count_effects(effects, "started", "running") == 1)
    wait_until(
        lambda: (
            effects.execute(
                "SELECT count(*) FROM pgmq.q_pgbus_default WHERE read_ct = 1"
            ).fetchone()[0]
            == 2
        )
    )
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    assert count_effects(effects, "done", "running") == 1
    assert count_effects(effects, "done", "waiting") == 0
    # Back in the queue, visible now for any other worker.
    assert effects.execute(
        "SELECT message->'args', vt <= now() FROM pgmq.q_pgbus_default"
    ).fetchall() == [(["waiting"], True)]
    assert "released 1 jobs that had not started" in w.output()
