"""End to end: real consumer processes (alone and under the supervisor) against a real
PostgreSQL: crashes, drains, a server restart."""

import json
import os
import signal

import psycopg
import pytest

import pgbus
from pgbus import events
from tests.py import sample_events  # noqa: F401  (its subscriptions, bound by the tests)
from tests.py.support import FAST, count_effects, pgbus_process, private_server, wait_until

pytestmark = pytest.mark.slow


def consumer_process(db_url, *extra, env=None):
    return pgbus_process(
        "consumer",
        "--import",
        "tests.py.sample_events",
        *extra,
        env={"PGBUS_DATABASE_URL": db_url, **FAST, **(env or {})},
    )


def archived(conn, queue):
    return conn.execute(f"SELECT count(*) FROM pgmq.a_{queue}").fetchone()[0]


def test_kill_9_mid_handler_runs_the_event_again_and_its_writes_happen_once(db_url, effects, procs):
    events.bind_all()
    pgbus.publish("slow.crash", {"key": "victim", "seconds": 60})
    env = {"PGBUS_VISIBILITY_TIMEOUT": "2"}
    first = consumer_process(db_url, "--topics", "slow.#", env=env)
    procs.append(first)
    wait_until(lambda: count_effects(effects, "started", "victim") == 1, what="first run")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    procs.append(consumer_process(db_url, "--topics", "slow.#", env=env))
    wait_until(lambda: count_effects(effects, "handled", "victim") == 1, timeout=30, what="rerun")
    wait_until(lambda: archived(effects, "pgbus_ev_slow_idempotent") == 1, what="archive")
    assert count_effects(effects, "started", "victim") == 2
    assert count_effects(effects, "handled", "victim") == 1
    assert effects.execute("SELECT read_ct FROM pgmq.a_pgbus_ev_slow_idempotent").fetchone()[0] == 2
    assert (
        effects.execute(
            "SELECT count(*) FROM pgbus.processed_events WHERE completed_at IS NOT NULL"
        ).fetchone()[0]
        == 1
    )


def test_sigterm_lets_running_handlers_finish(db_url, effects, procs):
    events.bind_all()
    pgbus.publish("sleepy.one", {"key": "s", "seconds": 2})
    c = consumer_process(db_url, "--topics", "sleepy.#")
    procs.append(c)
    wait_until(lambda: count_effects(effects, "sleepy_started") == 1, what="handler started")
    c.signal(signal.SIGTERM)
    assert c.wait(30) == 0, c.output()
    assert count_effects(effects, "sleepy_done") == 1
    assert archived(effects, "pgbus_ev_sleepy") == 1
    assert effects.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] == 0


def test_the_supervisor_runs_consumers_beside_workers(db_url, effects, procs):
    sup = pgbus_process(
        "start",
        "--import",
        "tests.py.sample_events",
        "--no-dispatcher",
        "--no-scheduler",
        env={
            "PGBUS_DATABASE_URL": db_url,
            **FAST,
            "SAMPLE_EVENT_CONSUMERS": json.dumps([{"topics": ["orders.*"], "threads": 2}]),
        },
    )
    procs.append(sup)

    def kinds():
        return sorted(r[0] for r in effects.execute("SELECT kind FROM pgbus.processes"))

    wait_until(
        lambda: kinds() == ["consumer", "supervisor", "worker"], timeout=30, what="processes"
    )
    topics = effects.execute(
        "SELECT metadata -> 'topics' FROM pgbus.processes WHERE kind = 'consumer'"
    ).fetchone()[0]
    assert topics == ["orders.*"]
    assert pgbus.publish("orders.created", {"order_id": 99}).deliveries >= 1
    wait_until(lambda: count_effects(effects, "order", "99") == 1, timeout=20, what="handled")
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert kinds() == []


def test_consumers_carry_on_through_a_postgresql_restart(procs):
    with private_server() as server:
        pgbus.configure(database_url=server.url)
        try:
            events.bind_all()
            c = consumer_process(
                server.url,
                "--topics",
                "orders.*",
                "--threads",
                "3",
                env={"PGBUS_VISIBILITY_TIMEOUT": "3"},
            )
            procs.append(c)
            with psycopg.connect(server.url, autocommit=True) as conn:
                for i in range(600):
                    pgbus.publish("orders.created", {"order_id": i}, conn=conn)

            def handled():
                with psycopg.connect(server.url) as conn:
                    return count_effects(conn, "order")

            wait_until(lambda: handled() >= 60, timeout=60, what="some progress")
            server.restart()
            wait_until(lambda: handled() == 600, timeout=180, what="all 600 events")
            with psycopg.connect(server.url) as conn:
                assert conn.execute(
                    "SELECT count(DISTINCT key), count(*) FROM effects WHERE kind = 'order'"
                ).fetchone() == (600, 600)
                assert (
                    conn.execute("SELECT count(*) FROM pgmq.q_pgbus_ev_record_order").fetchone()[0]
                    == 0
                )
            assert c.popen.poll() is None, "the consumer survives the restart"
            c.stop()
            procs.clear()
        finally:
            from pgbus.db import close_pool

            close_pool()
            pgbus.config.reset()


def test_db_migrate_with_imports_binds_the_subscriptions(db_url, conn):
    from tests.py.support import run_pgbus

    env = {"PGBUS_DATABASE_URL": db_url}
    first = run_pgbus("db", "migrate", "--import", "tests.py.sample_events", env=env)
    assert first.returncode == 0, first.stderr
    assert "Event subscriptions:" in first.stdout and " 0 new" not in first.stdout
    again = run_pgbus("db", "migrate", "--import", "tests.py.sample_events", env=env)
    assert again.returncode == 0 and ", 0 new" in again.stdout
    bound = {
        r[0]
        for r in conn.execute(
            "SELECT pattern FROM pgmq.topic_bindings WHERE queue_name = 'pgbus_ev_audit'"
        )
    }
    assert bound == {"orders.#", "refunds.#"}
    bad = run_pgbus("db", "migrate", "--import", "no.such.module", env=env)
    assert bad.returncode != 0 and "cannot import" in (bad.stdout + bad.stderr)
