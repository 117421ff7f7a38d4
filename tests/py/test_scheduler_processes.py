"""The scheduler as real processes: two racing for the same ticks, one killed and restarted,
and a rolling deploy (revision A, then B beside it, then A gone) for deploy tasks."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.py.support import FAST, pgbus_process, wait_until, worker_process

pytestmark = pytest.mark.slow

RECURRING = "ticker:\n  class: tests.py.sample_jobs:Record\n  args: [tick]\n  every: 1s\n"


def scheduler_process(db_url: str, env: dict[str, str]):
    return pgbus_process(
        "scheduler",
        "--import",
        "tests.py.sample_jobs",
        env={"PGBUS_DATABASE_URL": db_url, **FAST, "PGBUS_SCHEDULER_INTERVAL": "0.2", **env},
    )


def executions(conn) -> list:
    return [
        r[0]
        for r in conn.execute(
            "SELECT run_at FROM pgbus.recurring_executions WHERE task_key = 'ticker'"
            " ORDER BY run_at"
        )
    ]


def assert_each_tick_once(conn, runs: list) -> None:
    """Every second from the first tick to the last has one execution and one message."""
    seconds = int((runs[-1] - runs[0]).total_seconds())
    assert len(runs) == seconds + 1, "a tick was skipped"
    messages = conn.execute(
        "SELECT count(*), count(DISTINCT e.run_at) FROM pgmq.q_pgbus_default q"
        " JOIN pgbus.recurring_executions e ON e.msg_id = q.msg_id"
    ).fetchone()
    total = conn.execute("SELECT count(*) FROM pgmq.q_pgbus_default").fetchone()[0]
    assert messages == (len(runs), len(runs)), "a tick was sent twice, or without its claim"
    assert total == len(runs)


def test_two_schedulers_racing_for_100_ticks_fire_each_once(db_url, conn, procs, tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text(RECURRING)
    env = {"PGBUS_RECURRING_TASKS_FILE": str(path), "PGBUS_RECURRING_CATCH_UP_WINDOW": "200"}
    # Declare the task, then move its schedule's start 100 seconds back: both schedulers start
    # at once with 100 past ticks to catch up, then keep racing for the live ones.
    first = scheduler_process(db_url, env)
    procs.append(first)
    wait_until(lambda: executions(conn), 20, what="the task's first tick")
    first.stop()
    conn.execute("DELETE FROM pgbus.recurring_executions")
    conn.execute("SELECT pgmq.purge_queue('pgbus_default')")
    conn.execute(
        "UPDATE pgbus.recurring_tasks SET schedule_from = date_trunc('second', now())"
        " - interval '100 seconds'"
    )
    racers = [scheduler_process(db_url, env), scheduler_process(db_url, env)]
    procs.extend(racers)
    wait_until(lambda: len(executions(conn)) >= 106, 40, 0.2, what="106 ticks")
    for p in racers:
        p.stop()
    runs = executions(conn)
    assert len(runs) >= 106
    assert_each_tick_once(conn, runs)
    for p in racers:
        assert "Traceback" not in p.log.read_text()


def test_a_killed_scheduler_restarted_neither_repeats_nor_skips(db_url, conn, procs, tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text(RECURRING)
    env = {"PGBUS_RECURRING_TASKS_FILE": str(path), "PGBUS_RECURRING_CATCH_UP_WINDOW": "60"}
    first = scheduler_process(db_url, env)
    procs.append(first)
    wait_until(lambda: len(executions(conn)) >= 3, 20, what="three ticks")
    first.signal(signal.SIGKILL)
    first.wait(10)
    killed_at = executions(conn)[-1]
    wait_until(  # ticks pass while no scheduler runs
        lambda: conn.execute(
            "SELECT clock_timestamp() > %s + interval '3 seconds'", (killed_at,)
        ).fetchone()[0],
        30,
        interval=0.1,
        what="three ticks without a scheduler",
    )
    second = scheduler_process(db_url, env)
    procs.append(second)
    wait_until(
        lambda: len([r for r in executions(conn) if r > killed_at]) >= 6, 20, what="catch-up"
    )
    second.stop()
    runs = executions(conn)
    assert_each_tick_once(conn, runs)
    assert "recurring tasks: 1 declared (0 added, 0 changed, 0 removed)" in second.log.read_text()


DEPLOY_A = (
    "backfill:\n  class: tests.py.sample_jobs:Record\n  args: [backfill-v1]\n  version: 1\n"
    "warm:\n  class: tests.py.sample_jobs:Record\n  args: [warm]\n  every_deploy: true\n"
)
DEPLOY_B = DEPLOY_A.replace("backfill-v1]\n  version: 1", "backfill-v2]\n  version: 2")


def deploy_runs(conn) -> list[tuple[str, str, str]]:
    return conn.execute(
        "SELECT task_key, arm, app_revision FROM pgbus.deploy_task_runs ORDER BY id"
    ).fetchall()


def done(conn) -> list[str]:
    return sorted(r[0] for r in conn.execute("SELECT key FROM effects WHERE kind = 'done'"))


def named(db_url: str, name: str) -> str:
    """The URL with an application_name, so that the process's sessions can be told apart."""
    return f"{db_url}{'&' if '?' in db_url else '?'}application_name={name}"


def ticked_since(conn, names: list[str], since) -> bool:
    """Whether each named scheduler finished a deploy tick (pgbus.deploy_tasks_fire) after
    `since`, a database time."""
    last = dict(
        conn.execute(
            "SELECT application_name, max(state_change) FROM pg_stat_activity"
            " WHERE application_name = ANY(%s) AND state = 'idle'"
            " AND query LIKE '%%deploy_tasks_fire%%' GROUP BY 1",
            (names,),
        ).fetchall()
    )
    return all(last.get(n) is not None and last[n] > since for n in names)


def ticks(conn, names: list[str], rounds: int) -> None:
    """Until each named scheduler has ticked `rounds` more times (instead of a fixed sleep)."""
    for _ in range(rounds):
        since = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        wait_until(lambda since=since: ticked_since(conn, names, since), 60, what="ticks")


def test_rolling_deploy_fires_once_the_old_revision_is_gone(db_url, effects, procs, tmp_path: Path):
    conn = effects
    a_file, b_file = tmp_path / "deploy_a.yml", tmp_path / "deploy_b.yml"
    a_file.write_text(DEPLOY_A)
    b_file.write_text(DEPLOY_B)
    # Revision A: a worker and a scheduler. Its tasks fire once, on A, and A's worker runs them.
    a_env = {"PGBUS_REVISION": "A", "PGBUS_DEPLOY_TASKS_FILE": str(a_file)}
    a_worker = worker_process(db_url, env=a_env)
    a_sched = scheduler_process(db_url, a_env)
    procs.extend([a_worker, a_sched])
    wait_until(lambda: len(done(conn)) == 2, 90, what="revision A's deploy tasks")
    assert deploy_runs(conn) == [
        ("backfill", "version:1", "A"),
        ("warm", "revision:A", "A"),
    ]

    # Revision B starts beside A (a rolling deploy): B's scheduler sees A still running.
    b_env = {"PGBUS_REVISION": "B", "PGBUS_DEPLOY_TASKS_FILE": str(b_file)}
    b_worker = worker_process(db_url, env=b_env)
    b_names = ["sched-b1", "sched-b2"]
    b_scheds = [scheduler_process(named(db_url, n), b_env) for n in b_names]
    procs.extend([b_worker, *b_scheds])
    wait_until(
        lambda: (
            conn.execute(
                "SELECT count(*) FROM pgbus.processes WHERE app_revision = 'B'"
            ).fetchone()[0]
            == 3
        ),
        90,
        what="revision B's processes",
    )
    ticks(conn, b_names, 3)  # nothing may fire during the overlap
    assert len(deploy_runs(conn)) == 2
    states = conn.execute("SELECT key, state FROM pgbus.deploy_task_list() ORDER BY key").fetchall()
    assert states == [("backfill", "enqueued"), ("warm", "waiting_for_rollover")]
    assert conn.execute(
        "SELECT version FROM pgbus.deploy_tasks WHERE key = 'backfill'"
    ).fetchone() == ("1",), "B's declarations were written before the fleet rolled over"

    # A stops: the fleet has rolled over to B; B's tasks fire once (two B schedulers race).
    # (Each stops by itself, and deregisters: a killed one would hold the rollover back.)
    for p in (a_sched, a_worker):
        p.signal(signal.SIGTERM)
    for p in (a_sched, a_worker):
        assert p.wait(60) == 0, p.output()
    wait_until(lambda: len(done(conn)) == 4, 90, what="revision B's deploy tasks")
    ticks(conn, b_names, 2)  # more ticks: nothing fires again
    for p in [b_worker, *b_scheds]:
        p.stop()
    assert deploy_runs(conn) == [
        ("backfill", "version:1", "A"),
        ("warm", "revision:A", "A"),
        ("backfill", "version:2", "B"),
        ("warm", "revision:B", "B"),
    ]
    assert done(conn) == ["backfill-v1", "backfill-v2", "warm", "warm"]
    fired_logs = sum(p.log.read_text().count("enqueued for") for p in b_scheds)
    assert fired_logs == 2


def test_pgbus_start_runs_a_scheduler_when_tasks_are_declared(db_url, conn, procs, tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text(RECURRING)
    sup = pgbus_process(
        "start",
        "--import",
        "tests.py.sample_jobs",
        env={
            "PGBUS_DATABASE_URL": db_url,
            **FAST,
            "PGBUS_RECURRING_TASKS_FILE": str(path),
            "PGBUS_REVISION": "S1",
        },
    )
    procs.append(sup)
    wait_until(lambda: len(executions(conn)) >= 2, 30, what="ticks fired under pgbus start")
    kinds = conn.execute("SELECT kind, app_revision FROM pgbus.processes ORDER BY kind").fetchall()
    assert ("scheduler", "S1") in kinds and ("worker", "S1") in kinds
    sup.stop()
    assert conn.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] == 0
