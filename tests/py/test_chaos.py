"""Chaos: real PostgreSQL restarts and crashes, real kill -9s of workers, a hung step. Each
test has a cluster of its own (tests/py/throwaway_cluster.py), so restarting it disturbs
nothing else. What must hold: no step's writes commit twice, a server restart pauses no run,
a killed worker pauses only runs whose step body had really started, and a hung step past its
timeout holds no transaction open and commits nothing when it returns.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

import pgbus
from pgbus.db import close_pool
from tests.py.pg_proxy import PgProxy
from tests.py.support import Process, settled, statuses, wait_until, worker_process
from tests.py.throwaway_cluster import ThrowawayCluster

CHAOS = ("--import", "tests.py.chaos_workflows")


@pytest.fixture
def chaos_db() -> Iterator[tuple[ThrowawayCluster, str]]:
    """A cluster of the test's own (WAL writer slow, so that an asynchronous commit stays
    unflushed until something else commits), a migrated database, pgbus configured on it."""
    with ThrowawayCluster(settings={"wal_writer_delay": "10s"}) as cluster:
        url = cluster.create_database("chaos")
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(
                "CREATE TABLE effects (id bigserial PRIMARY KEY, kind text NOT NULL,"
                " key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
            c.execute(
                "CREATE TABLE body_starts (workflow_id uuid, step text, attempt int,"
                " at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        pgbus.configure(database_url=url)
        try:
            yield cluster, url
        finally:
            close_pool()
            pgbus.config.reset()


def start_runs(n: int, **arguments) -> list[str]:
    from tests.py.chaos_workflows import Chaos

    return [str(Chaos.start(**arguments).workflow_id) for _ in range(n)]


def duplicates(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute(
            "SELECT kind, key, count(*) FROM effects GROUP BY kind, key HAVING count(*) > 1"
        ).fetchall()


def paused_why(url: str) -> list[tuple]:
    """What a paused run's current step says, so that a failure names its cause."""
    with psycopg.connect(url) as c:
        return c.execute(
            "SELECT current_step, current_step_status, current_attempt, current_error_class,"
            " current_error_message FROM pgbus.workflow_runs_overview WHERE status = 'paused'"
        ).fetchall()


def chaos_worker(url: str, threads: int = 4, env: dict[str, str] | None = None) -> Process:
    return worker_process(
        url,
        "--queues",
        "workflows",
        "--threads",
        str(threads),
        *CHAOS,
        env={"PGBUS_VISIBILITY_TIMEOUT": "3", **(env or {})},
    )


def test_an_immediate_restart_under_load_pauses_nothing_and_commits_nothing_twice(chaos_db, procs):
    cluster, url = chaos_db
    runs = start_runs(300, work=0.02)
    procs.extend([chaos_worker(url), chaos_worker(url)])
    wait_until(lambda: statuses(url).get("finished", 0) >= 30, 60, what="some runs finished")
    cluster.restart(mode="immediate")
    assert statuses(url).get("finished", 0) < 250, "the restart came too late to matter"
    wait_until(lambda: settled(url, len(runs)), 120, interval=0.5, what="every run settled")
    s = statuses(url)
    assert s == {"finished": 300}, (s, paused_why(url), [p.output()[-3000:] for p in procs])
    assert duplicates(url) == []
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM effects").fetchone()[0] == 900
    for p in procs:  # a few clear lines each: no traceback, no SQL, no stall
        out = p.output()
        assert "Traceback" not in out and "StepStalled" not in out and "SELECT" not in out, out
        assert len(out.splitlines()) <= 12, out


def test_a_crash_right_after_a_read_does_not_let_the_step_commit_twice(chaos_db, procs):
    """The worker reads with asynchronous commit: an immediate restart right after the read
    loses the attempt's begin while the body runs. That body's end is refused (stale), and
    its writes must roll back: the step runs again and writes once."""
    cluster, url = chaos_db
    from tests.py.chaos_workflows import CrashAfterRead

    folder = Path(tempfile.mkdtemp(prefix="pgbus-crash-"))
    runs = [str(CrashAfterRead.start(folder=str(folder)).workflow_id) for _ in range(4)]
    # The WAL writer is held, so the read's asynchronous commit stays in shared memory until the
    # crash (as when the server dies within wal_writer_delay of a read); no other commits
    # (process heartbeats, visibility extensions) that would write it out meanwhile.
    with psycopg.connect(url) as c:
        walwriter = c.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'"
        ).fetchone()[0]
    os.kill(walwriter, signal.SIGSTOP)
    worker = chaos_worker(
        url, env={"PGBUS_HEARTBEAT_INTERVAL": "60", "PGBUS_VISIBILITY_TIMEOUT": "30"}
    )
    procs.append(worker)
    try:
        wait_until(
            lambda: len(list(folder.glob("started-*"))) >= 4, 30, interval=0.005, what="bodies"
        )
    finally:
        os.kill(walwriter, signal.SIGKILL)  # the server crashes: it restarts from the disk
    cluster.restart(mode="immediate")
    (folder / "go").touch()
    wait_until(lambda: settled(url, len(runs)), 90, interval=0.3, what="every run settled")
    assert statuses(url) == {"finished": 4}
    with psycopg.connect(url) as c:
        counts = dict(
            c.execute("SELECT kind, count(*) FROM effects GROUP BY kind ORDER BY kind").fetchall()
        )
    assert counts == {"first": 4, "second": 4}, counts
    # The crash did lose begins: some bodies ran twice, yet committed once.
    assert len(list(folder.glob("started-*"))) > 4
    assert "its end was refused" in worker.output()


def test_a_read_whose_answer_was_lost_hands_its_steps_back_at_once(chaos_db, procs):
    """A read commits on the server (beginning steps, their bodies marked started) and its
    connection is lost before the answer arrives, as when the server dies between the two.
    The worker never ran those steps: it hands them back before its next read, so that they
    run at once, rather than coming back after the visibility timeout looking like a dead
    worker's (twice read by another worker: a stall, the run paused)."""
    cluster, url = chaos_db
    runs = start_runs(4, work=0.02)
    with PgProxy(cluster.port) as proxy:
        # The first read that starts a body loses its answer; then this worker's reads are held
        # (as if the other worker got there first each time).
        proxy.lose_answer(b"read_jobs", b'"body_started": true')
        proxy.hold(b"read_jobs")
        cut = chaos_worker(proxy.url(url), threads=2, env={"PGBUS_VISIBILITY_TIMEOUT": "2"})
        procs.append(cut)
        assert proxy.lost.wait(30), cut.output()
        other = chaos_worker(url, threads=2, env={"PGBUS_VISIBILITY_TIMEOUT": "2"})
        procs.append(other)
        wait_until(lambda: settled(url, len(runs)), 60, interval=0.2, what="every run settled")
        with psycopg.connect(url) as c:
            events = dict(
                c.execute(
                    "SELECT event, count(*) FROM pgbus.workflow_events"
                    " WHERE event IN ('stall_detected', 'step_redelivered', 'step_released')"
                    " GROUP BY event"
                ).fetchall()
            )
        assert statuses(url) == {"finished": 4}, (paused_why(url), cut.output(), other.output())
        assert duplicates(url) == []
        assert "stall_detected" not in events and "step_redelivered" not in events, events
        assert events.get("step_released", 0) >= 2, events  # the two bodies it had started
        assert "handed back" in cut.output()


def test_kill_9s_under_load_pause_only_runs_whose_step_body_started(chaos_db, procs):
    """Read-ahead steps a killed worker never started simply run again; only a step whose
    body had started is a stall (the default action pauses its run). A body "had started"
    when it left its file, or was about to: marked started by pgbus just before the kill
    (between the mark and the body's first line there is only a little Python), or by a
    statement of the killed worker that was on its way at the kill (the server finishes it
    after the worker is gone, marking the steps its read starts: nobody can hand them back)."""
    _cluster, url = chaos_db
    starts = Path(tempfile.mkdtemp(prefix="pgbus-starts-"))
    runs = start_runs(150, work=0.02, starts_dir=str(starts))
    procs.append(chaos_worker(url))
    kills = []
    for _ in range(5):
        victim = chaos_worker(url)
        procs.append(victim)
        victim.wait_for_output("worker started", 20)
        time.sleep(0.6)
        with psycopg.connect(url) as c:  # (the kill falls between these two readings)
            before = c.execute("SELECT clock_timestamp()").fetchone()[0]
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
            after = c.execute("SELECT clock_timestamp()").fetchone()[0]
            kills.append((before, after, f"{socket.gethostname()}:{victim.pid}"))
    wait_until(lambda: settled(url, len(runs)), 120, interval=0.5, what="every run settled")
    assert duplicates(url) == []
    started = {p.name for p in starts.iterdir()}
    with psycopg.connect(url) as c:
        stalls = c.execute(
            "SELECT s.workflow_id, s.step_name, s.attempt, s.body_started_at, s.worker"
            " FROM pgbus.workflow_steps s WHERE s.status = 'stalled'"
        ).fetchall()
        paused_without_stall = c.execute(
            "SELECT count(*) FROM pgbus.workflows w JOIN pgbus.workflow_steps s"
            " ON s.step_id = w.current_step_id WHERE w.status = 'paused' AND s.status <> 'stalled'"
        ).fetchone()[0]
        s = statuses(url)
        # A finished run's steps each wrote exactly once (no duplicates, none missing).
        missing = c.execute(
            "SELECT count(*) FROM pgbus.workflows w, unnest(ARRAY['one', 'two', 'three']) k"
            " WHERE w.status = 'finished' AND NOT EXISTS"
            " (SELECT 1 FROM effects e WHERE e.kind = k AND e.key = w.workflow_id::text)"
        ).fetchone()[0]

    def about_to_start(marked_at, worker) -> bool:
        # (After the kill only by that worker's own statement, sent before it died.)
        return any(
            k0 - timedelta(milliseconds=150) <= marked_at and (marked_at <= k1 or worker == who)
            for k0, k1, who in kills
        )

    never_started = [
        row
        for row in stalls
        if f"{row[0]}.{row[1]}.{row[2]}" not in started and not about_to_start(row[3], row[4])
    ]
    if never_started:
        with psycopg.connect(url) as c:
            trail = c.execute(
                "SELECT s.step_name, s.attempt, s.worker, s.started_at::text,"
                " s.body_started_at::text, e.event, e.created_at::text, e.details::text"
                " FROM pgbus.workflow_events e LEFT JOIN pgbus.workflow_steps s USING (step_id)"
                " WHERE e.workflow_id = %s ORDER BY e.event_id",
                (never_started[0][0],),
            ).fetchall()
        raise AssertionError(
            "\n".join(
                [
                    f"never started: {never_started}",
                    f"kills: {[(str(k0), str(k1), who) for k0, k1, who in kills]}",
                ]
                + [str(t) for t in trail]
                + [p.output()[-3000:] for p in procs]
            )
        )
    assert paused_without_stall == 0
    assert s.get("finished", 0) + s.get("paused", 0) == len(runs), s
    assert missing == 0


def test_a_worker_cut_off_past_the_visibility_timeout_gets_its_step_back(chaos_db, procs):
    """A worker that cannot reach the database for longer than the visibility timeout (here:
    stopped with SIGSTOP) while a step's body runs is not taken for dead by the worker that
    reads the step's message meanwhile: that message waits one more visibility timeout for its
    worker (which is still registered), the worker takes it back and its end is accepted. A
    killed worker's step is still a stall, only one visibility timeout later."""
    _cluster, url = chaos_db
    starts = Path(tempfile.mkdtemp(prefix="pgbus-cutoff-"))
    start_runs(1, work=2, starts_dir=str(starts))
    cut_off = chaos_worker(url, threads=1)
    procs.append(cut_off)
    wait_until(lambda: any(starts.iterdir()), 20, interval=0.01, what="the first body started")
    os.killpg(cut_off.pid, signal.SIGSTOP)
    try:
        procs.append(chaos_worker(url, threads=1))

        def redelivered() -> int:
            with psycopg.connect(url) as c:
                return c.execute(
                    "SELECT count(*) FROM pgbus.workflow_events WHERE event = 'step_redelivered'"
                ).fetchone()[0]

        wait_until(redelivered, 20, interval=0.05, what="the other worker read the message")
    finally:
        os.killpg(cut_off.pid, signal.SIGCONT)
    wait_until(lambda: settled(url, 1), 60, interval=0.2, what="the run settled")
    with psycopg.connect(url) as c:
        stalls = c.execute(
            "SELECT count(*) FROM pgbus.workflow_steps WHERE status = 'stalled'"
        ).fetchone()[0]
        one = c.execute(
            "SELECT worker FROM pgbus.workflow_steps WHERE step_name = 'one'"
            " AND status = 'completed'"
        ).fetchall()
    assert statuses(url) == {"finished": 1}, [p.output()[-2000:] for p in procs]
    assert stalls == 0
    assert duplicates(url) == []
    assert len(one) == 1  # step one's first attempt completed: it did not run again
    assert len(list(starts.iterdir())) == 3  # each body ran once: step one was not run again


def test_a_worker_cut_off_twice_during_one_long_step_keeps_it(chaos_db, procs):
    """Two outages during one long step (here: its worker stopped with SIGSTOP twice, each time
    past the visibility timeout, while another worker reads the message): the worker was alive
    in between (it heartbeated), so the second time is no stall either; it ends its step."""
    _cluster, url = chaos_db
    from tests.py.chaos_workflows import WaitsForGo

    folder = Path(tempfile.mkdtemp(prefix="pgbus-twice-"))
    run = WaitsForGo.start(folder=str(folder))
    fast = {"PGBUS_VISIBILITY_TIMEOUT": "2"}
    cut_off = chaos_worker(url, threads=1, env=fast)
    procs.append(cut_off)
    wait_until(lambda: any(folder.glob("started-*")), 20, interval=0.01, what="the body started")
    procs.append(chaos_worker(url, threads=1, env=fast))

    def redelivered() -> int:
        with psycopg.connect(url) as c:
            return c.execute(
                "SELECT count(*) FROM pgbus.workflow_events WHERE event = 'step_redelivered'"
            ).fetchone()[0]

    def heartbeated_since_redelivery() -> bool:
        with psycopg.connect(url) as c:
            return c.execute(
                "SELECT p.last_heartbeat_at > (SELECT max(created_at) FROM pgbus.workflow_events"
                " WHERE event = 'step_redelivered') FROM pgbus.processes p WHERE p.pid = %s",
                (cut_off.pid,),
            ).fetchone()[0]

    for times in (1, 2):
        os.killpg(cut_off.pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda times=times: redelivered() >= times or statuses(url).get("paused"),
                20,
                interval=0.05,
                what="the message read by the other worker",
            )
        finally:
            os.killpg(cut_off.pid, signal.SIGCONT)
        assert statuses(url) == {"running": 1}, paused_why(url)
        wait_until(heartbeated_since_redelivery, 20, interval=0.05, what="a heartbeat since")
    (folder / "go").touch()
    wait_until(lambda: settled(url, 1), 60, interval=0.2, what="the run settled")
    with psycopg.connect(url) as c:
        stalls = c.execute(
            "SELECT count(*) FROM pgbus.workflow_steps WHERE status = 'stalled'"
        ).fetchone()[0]
        steps = c.execute(
            "SELECT status, worker FROM pgbus.workflow_steps WHERE workflow_id = %s",
            (run.workflow_id,),
        ).fetchall()
    assert statuses(url) == {"finished": 1}, (paused_why(url), [p.output()[-2000:] for p in procs])
    assert stalls == 0
    assert duplicates(url) == []
    assert redelivered() == 2
    assert len(steps) == 1 and steps[0][0] == "completed"  # ended by the worker that was cut off
    assert steps[0][1].endswith(f":{cut_off.pid}")


@pytest.mark.parametrize(
    "limit", ["timeout", "stall_threshold"], ids=["its_timeout", "the_stall_threshold"]
)
@pytest.mark.parametrize("in_sql", [False, True], ids=["hung_in_python", "hung_in_sql"])
def test_a_hung_step_past_its_timeout_holds_no_transaction_and_commits_nothing(
    chaos_db, procs, in_sql, limit
):
    """Its time is up after 2 s: the step's timeout, or the stall threshold without one (the
    sweep stalls an attempt past either)."""
    _cluster, url = chaos_db
    from tests.py.chaos_workflows import Hung, HungWithoutTimeout

    folder = Path(tempfile.mkdtemp(prefix="pgbus-hung-"))
    env = {"PGBUS_VISIBILITY_TIMEOUT": "30"}
    if limit == "timeout":
        run = Hung.start(folder=str(folder), seconds=6, in_sql=in_sql)
    else:
        run = HungWithoutTimeout.start(folder=str(folder), seconds=6, in_sql=in_sql)
        # (The worker's heartbeat, every third of the visibility timeout, ends it.)
        env.update(PGBUS_WORKFLOW_STALL_THRESHOLD="2", PGBUS_VISIBILITY_TIMEOUT="3")
    worker = chaos_worker(url, threads=1, env=env)
    procs.append(worker)
    wait_until(lambda: (folder / f"hanging-{run.workflow_id}").exists(), 20)
    hung_at = time.monotonic()

    def open_step_transactions() -> int:
        with psycopg.connect(url) as c:
            return c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
                " AND query NOT ILIKE '%%read_jobs%%' AND query NOT ILIKE '%%LISTEN%%'"
                " AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)"
            ).fetchone()[0]

    assert open_step_transactions() >= 1  # the hung body's transaction, while in time
    # Ended by the server shortly after the 2 s timeout, while the body still hangs (6 s).
    wait_until(lambda: open_step_transactions() == 0, 5, interval=0.1, what="transaction ended")
    assert time.monotonic() - hung_at < 5
    # Its late return commits nothing; the attempt is stalled (timeout), the run paused.
    try:
        wait_until(lambda: statuses(url).get("paused") == 1, 20, interval=0.2, what="run paused")
    except AssertionError:
        raise AssertionError(worker.output()) from None
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        attempt = c.execute(
            "SELECT status, error ->> 'class' FROM pgbus.workflow_steps WHERE workflow_id = %s",
            (run.workflow_id,),
        ).fetchone()
    assert attempt == ("stalled", "pgbus.StepStalled")
    if limit == "stall_threshold":
        assert "steps running past the stall threshold: 1; their transactions" in worker.output()
    time.sleep(0.5)
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM effects").fetchone()[0] == 0


def test_a_step_end_that_raises_in_sql_is_recorded_as_itself(chaos_db, procs):
    """Not a crash, but the same path: the end's transaction rolls back with the body's writes,
    and the failure is recorded as itself (the run paused with the SQL error), not left for the
    message to come back as a dead worker's stall."""
    _cluster, url = chaos_db
    from tests.py.chaos_workflows import EndFails

    with psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "CREATE FUNCTION no_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.output ? 'boom' THEN RAISE EXCEPTION 'no boom here'; END IF;"
            " RETURN NEW; END $$"
        )
        c.execute(
            "CREATE TRIGGER no_boom BEFORE UPDATE OF output ON pgbus.workflow_steps"
            " FOR EACH ROW EXECUTE FUNCTION no_boom()"
        )
    run = EndFails.start()
    worker = chaos_worker(url, threads=1)
    procs.append(worker)
    wait_until(lambda: statuses(url).get("paused") == 1, 20, interval=0.1, what="run paused")
    with psycopg.connect(url) as c:
        attempt = c.execute(
            "SELECT status, error ->> 'class', error ->> 'sqlstate', error ->> 'message'"
            " FROM pgbus.workflow_steps WHERE workflow_id = %s",
            (run.workflow_id,),
        ).fetchone()
        assert c.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM pgmq.q_pgbus_workflows").fetchone()[0] == 0
    assert attempt[:3] == ("failed", "psycopg.errors.RaiseException", "P0001"), attempt
    assert "no boom here" in attempt[3]
    assert "its end failed in SQL" in worker.output()


def test_a_step_whose_connection_is_lost_runs_again_without_its_exception_policy(
    chaos_db, procs, tmp_path
):
    """pgbus's own connection for the step fails while the body runs (its server process
    ended, as in a restart): an infrastructure failure. The attempt runs again; the exception
    policy that matches connection errors is never called, nothing is stalled or paused, and
    the first try's write is gone."""
    _cluster, url = chaos_db
    from tests.py.chaos_workflows import LosesItsConnection

    run = LosesItsConnection.start(folder=str(tmp_path))
    worker = chaos_worker(url, threads=1)
    procs.append(worker)
    wait_until(lambda: statuses(url).get("finished") == 1, 30, interval=0.1, what="run finished")
    with psycopg.connect(url) as c:
        effects = c.execute("SELECT kind, count(*) FROM effects GROUP BY kind").fetchall()
        attempts = c.execute(
            "SELECT attempt, status FROM pgbus.workflow_steps WHERE workflow_id = %s",
            (run.workflow_id,),
        ).fetchall()
    assert (tmp_path / "cut").exists(), "the connection was never cut"
    assert effects == [("cut", 1)], effects
    assert attempts == [(1, "completed")], attempts
    assert "the database connection failed" in worker.output()
    assert "Traceback" not in worker.output()
