"""A queue's insert notification between real sessions: a send never waits for another
sender's open transaction, a listener is still woken, and a session plans the trigger's
throttle lookup once (pgbus.queue_notify_listeners)."""

import re
import time

import psycopg
import pytest

QUEUE = "notify_waits"


def _send(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT pgbus.queue_send(%s, '{}', now())", (QUEUE,)).fetchone()[0]


@pytest.fixture
def queue(db_url):
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("SELECT pgbus.ensure_queue(%s)", (QUEUE,))
    return QUEUE


def test_a_send_does_not_wait_for_another_senders_open_transaction(db_url, queue):
    # An application transaction enqueues (and so notifies), then goes on working.
    with psycopg.connect(db_url) as app, psycopg.connect(db_url, autocommit=True) as other:
        _send(app)
        other.execute("SET lock_timeout = '2s'")
        started = time.monotonic()
        _send(other)  # with PGMQ's trigger: waits for `app`, then lock_timeout
        assert time.monotonic() - started < 1.0
        app.commit()
        assert other.execute(f"SELECT count(*) FROM pgmq.q_{queue}").fetchone()[0] == 2


def test_pgmqs_own_trigger_made_the_second_sender_wait(db_url, queue):
    # The same sessions on PGMQ's trigger: the behaviour pgbus's trigger removes.
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("SELECT pgmq.enable_notify_insert(%s, 250)", (queue,))
    with psycopg.connect(db_url) as app, psycopg.connect(db_url, autocommit=True) as other:
        _send(app)
        other.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            _send(other)
        app.rollback()


def test_a_listener_is_woken_by_a_send_and_again_once_the_interval_has_passed(db_url, queue):
    channel = f"pgmq.q_{queue}.INSERT"
    with (
        psycopg.connect(db_url, autocommit=True) as listener,
        psycopg.connect(db_url, autocommit=True) as sender,
    ):
        listener.execute(f'LISTEN "{channel}"')
        _send(sender)
        assert [n.channel for n in listener.notifies(timeout=5, stop_after=1)] == [channel]
        # The throttle interval (250 ms) has passed: moved back rather than waited for.
        sender.execute(
            "UPDATE pgmq.notify_insert_throttle"
            " SET last_notified_at = clock_timestamp() - interval '1 second' WHERE queue_name = %s",
            (queue,),
        )
        _send(sender)
        assert [n.channel for n in listener.notifies(timeout=5, stop_after=1)] == [channel]


def test_a_session_plans_the_throttle_lookup_once_not_on_every_send(db_url, queue):
    # After PostgreSQL's five custom plans, the session's sends reuse one generic plan: its
    # queue name is a parameter ($n) in the plan auto_explain shows, not a constant folded in.
    plans: list[str] = []
    with psycopg.connect(db_url, autocommit=True) as c:
        c.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
        c.execute("LOAD 'auto_explain'")
        c.execute("SET auto_explain.log_min_duration = 0")
        c.execute("SET auto_explain.log_nested_statements = on")
        c.execute("SET auto_explain.log_level = notice")
        for _ in range(8):
            _send(c)
    lookups = [p for p in plans if "FROM pgmq.notify_insert_throttle t" in p.split("\n", 2)[1]]
    assert len(lookups) == 8
    generic = [bool(re.search(r"queue_name\)::text = \$\d+", p)) for p in lookups]
    assert generic == [False] * 5 + [True] * 3
