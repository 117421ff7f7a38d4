"""The workflow insights' rollup of closed hours under concurrency, against a real PostgreSQL:
the dispatcher's duty rolls hours up and the pages' answers stay the live ones; an hour is
closed only once no open transaction began before its end; a write that forgets an hour and a
rollup, in either order, leave the answers exact (the advisory lock orders them); and the
rollup refuses to run on a snapshot older than its statements."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from pgbus.dispatcher import Dispatcher, default_duties
from tests.py.support import wait_until

CLASS = "RollFlow"


def load(conn: psycopg.Connection) -> None:
    """30 runs of RollFlow (two steps) created 2 to 31 hours ago, a third of them cancelled at
    the second step, attempts with run times and pickups spread by the run's number, written
    directly (dated in the past)."""
    conn.execute(
        "INSERT INTO pgbus.workflow_definitions (workflow_class, steps, digest, queue)"
        ' VALUES (%s, \'[{"name": "a"}, {"name": "b"}]\', \'d1\', \'q\')',
        (CLASS,),
    )
    conn.execute(
        """
        WITH runs AS (
            INSERT INTO pgbus.workflows (workflow_class, status, current_step, definition_digest,
                                         created_at, updated_at, ended_at)
            SELECT %(cls)s, CASE WHEN i %% 3 = 0 THEN 'cancelled' ELSE 'finished' END, 'b', 'd1',
                   now() - i * interval '1 hour' - interval '1 hour',
                   now() - i * interval '1 hour', now() - i * interval '1 hour' + i * interval '1 second'
            FROM generate_series(1, 30) i
            RETURNING workflow_id, created_at, ended_at, status
        )
        INSERT INTO pgbus.workflow_steps (workflow_id, step_name, attempt, status, outcome, queue,
                                          scheduled_at, started_at, ended_at, app_revision,
                                          created_at, run_class, error)
        SELECT r.workflow_id, s.name, 1,
               CASE WHEN s.name = 'b' AND r.status = 'cancelled' THEN 'cancelled' ELSE 'completed' END,
               CASE WHEN s.name = 'b' AND r.status = 'cancelled' THEN 'cancel' ELSE 'complete' END, 'q',
               r.created_at + s.o * interval '10 minutes',
               r.created_at + s.o * interval '10 minutes' + (extract(epoch FROM r.ended_at) %% 7) * interval '1 second',
               r.created_at + s.o * interval '10 minutes' + (extract(epoch FROM r.ended_at) %% 13 + 8) * interval '1 second',
               'rev-' || (s.o + extract(hour FROM r.created_at)::int %% 2), r.created_at + s.o * interval '10 minutes',
               %(cls)s, CASE WHEN extract(epoch FROM r.ended_at)::bigint %% 5 = 0 THEN '{"class": "E"}'::jsonb END
        FROM runs r CROSS JOIN (VALUES ('a', 0), ('b', 1)) s(name, o)
        """,
        {"cls": CLASS},
    )


ANSWERS = (
    "SELECT jsonb_build_object("
    " 'page', pgbus.workflow_class_page(%(cls)s, %(w)s),"
    " 'list', (SELECT jsonb_agg(to_jsonb(o) ORDER BY o.workflow_class)"
    "          FROM pgbus.workflow_definitions_overview(%(w)s) o))"
)


def same_as_live(url: str) -> bool:
    """Whether every answer of the class page and the list, over 24 h and 7 d, is the live one
    (both read in one transaction: the same now())."""
    with psycopg.connect(url) as c:
        for window in ("24h", "7d"):
            rolled = c.execute(ANSWERS, {"cls": CLASS, "w": window}).fetchone()[0]
            c.execute("SET LOCAL pgbus.insights_rollup = off")
            live = c.execute(ANSWERS, {"cls": CLASS, "w": window}).fetchone()[0]
            c.execute("SET LOCAL pgbus.insights_rollup = on")
            if rolled != live:
                return False
        c.rollback()
    return True


def rolled(conn: psycopg.Connection, hours_ago: float) -> bool:
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pgbus.workflow_insights_hours"
        " WHERE hour = pgbus.workflow_insights_hour(now() - %s * interval '1 hour'))",
        (hours_ago,),
    ).fetchone()[0]


def blocked_on_lock(observer: psycopg.Connection, pid: int) -> None:
    wait_until(
        lambda: observer.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0],
        10,
        interval=0.01,
        what=f"session {pid} to wait for a lock",
    )


def past_attempt(c: psycopg.Connection, hours_ago: float) -> None:
    """A completed attempt of the oldest RollFlow run written with an end `hours_ago` ago."""
    c.execute(
        "INSERT INTO pgbus.workflow_steps (workflow_id, step_name, attempt, status, outcome, queue,"
        " scheduled_at, started_at, ended_at, created_at, run_class)"
        " SELECT workflow_id, 'a', 2, 'completed', 'complete', 'q',"
        "        now() - %(h)s * interval '1 hour' - interval '99 seconds',"
        "        now() - %(h)s * interval '1 hour' - interval '90 seconds',"
        "        now() - %(h)s * interval '1 hour', now() - %(h)s * interval '1 hour' - interval '99 seconds', %(cls)s"
        " FROM pgbus.workflows WHERE workflow_class = %(cls)s ORDER BY created_at LIMIT 1",
        {"h": hours_ago, "cls": CLASS},
    )


def test_the_dispatcher_duty_rolls_up_and_the_answers_stay_the_live_ones(conn, db_url):
    load(conn)
    assert same_as_live(db_url)
    done = Dispatcher([d for d in default_duties() if d.name == "workflow_insights_rollup"]).tick()
    # Every closed hour of the last 30 days and one hour, twice (by end; the funnel's by creation).
    assert done["workflow_insights_rollup"] >= 2 * 720
    assert rolled(conn, 5) and not rolled(conn, 0)
    assert (
        conn.execute(
            "SELECT sum(n) FROM pgbus.workflow_insights_attempt_hours WHERE run_class = %s",
            (CLASS,),
        ).fetchone()[0]
        == conn.execute(
            "SELECT count(*) FROM pgbus.workflow_steps WHERE run_class = %s"
            " AND ended_at < pgbus.workflow_insights_hour(now())",
            (CLASS,),
        ).fetchone()[0]
    )
    assert same_as_live(db_url)
    # A second tick has nothing to do until the next hour closes.
    assert conn.execute("SELECT pgbus.workflow_insights_rollup()").fetchone()[0] in (0, 2)


def test_an_hour_is_closed_only_once_no_transaction_that_began_before_its_end_is_open(conn, db_url):
    with psycopg.connect(db_url) as other:
        other.execute("SELECT 1")  # a transaction open from now on
        began = other.execute("SELECT now()").fetchone()[0]
        time.sleep(0.05)
        closed = conn.execute("SELECT pgbus.workflow_insights_closed()").fetchone()[0]
        assert closed == began  # not later: that transaction may still write rows dated from then
        other.commit()
    after = conn.execute("SELECT pgbus.workflow_insights_closed(), clock_timestamp()").fetchone()
    assert after[0] > began and after[0] <= after[1]


def test_a_write_that_forgets_an_hour_before_a_rollup_is_counted(conn, db_url):
    """The writer forgets the hour first (and holds the lock, shared, until it commits): the
    rollup waits, then rolls the hour up again with the new row."""
    load(conn)
    conn.execute("SELECT pgbus.workflow_insights_rollup()")
    assert rolled(conn, 5.5)
    with psycopg.connect(db_url) as writer, psycopg.connect(db_url, autocommit=True) as roller:
        past_attempt(writer, 5.5)  # uncommitted
        assert not rolled(writer, 5.5)
        pid = roller.execute("SELECT pg_backend_pid()").fetchone()[0]
        result: list[int] = []
        t = threading.Thread(
            target=lambda: result.append(
                roller.execute("SELECT pgbus.workflow_insights_rollup()").fetchone()[0]
            )
        )
        t.start()
        blocked_on_lock(conn, pid)
        writer.commit()
        t.join(10)
        assert result and result[0] >= 1
    assert rolled(conn, 5.5)
    assert same_as_live(db_url)


def test_a_rollup_before_a_write_that_forgets_its_hour_is_forgotten(conn, db_url):
    """The rollup holds the lock (exclusive) until it commits: the writer waits, then forgets
    the hour the rollup just did, so the answers read it live and count the new row."""
    load(conn)
    conn.execute("SELECT pgbus.workflow_insights_rollup()")
    conn.execute(
        "DELETE FROM pgbus.workflow_insights_hours"
        " WHERE hour = pgbus.workflow_insights_hour(now() - interval '5.5 hours')"
    )
    with psycopg.connect(db_url) as roller, psycopg.connect(db_url) as writer:
        assert roller.execute("SELECT pgbus.workflow_insights_rollup()").fetchone()[0] >= 1
        pid = writer.execute("SELECT pg_backend_pid()").fetchone()[0]
        errors: list[BaseException] = []

        def write() -> None:
            try:
                past_attempt(writer, 5.5)
                writer.commit()
            except BaseException as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=write)
        t.start()
        blocked_on_lock(conn, pid)
        roller.commit()
        t.join(10)
        assert not errors
    assert not rolled(conn, 5.5)
    assert same_as_live(db_url)


def test_the_rollup_refuses_an_older_snapshot(db_url):
    with psycopg.connect(db_url) as c:
        c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with pytest.raises(psycopg.errors.InvalidTransactionState):
            c.execute("SELECT pgbus.workflow_insights_rollup()")
