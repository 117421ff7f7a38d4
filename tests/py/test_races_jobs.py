"""Races between real sessions on the job layer's SQL: exactly one winner, every time."""

import threading

import psycopg

from pgbus import batches
from tests.py.sample_jobs import OnComplete, OnSuccess, Record
from tests.py.support import QUEUE_FUNCTIONS, queue_statements_written


def race(db_url, statements):
    """Runs each (sql, params) on its own connection, released together; returns the results."""
    barrier = threading.Barrier(len(statements))
    results = [None] * len(statements)
    conns = [psycopg.connect(db_url, autocommit=True) for _ in statements]

    def run(i):
        sql, params = statements[i]
        barrier.wait()
        results[i] = conns[i].execute(sql, params).fetchone()[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(statements))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for c in conns:
        c.close()
    return results


def test_batch_callbacks_exactly_once_when_the_last_two_members_finish_together(db_url, conn):
    rounds = 40
    for n in range(rounds):
        with batches.batch(
            on_complete=OnComplete.set(queue="callbacks"),
            on_success=OnSuccess.set(queue="callbacks"),
            properties={"name": f"r{n}"},
        ) as b:
            b.add(Record, f"a{n}")
            b.add(Record, f"b{n}")
        ids = [r[0] for r in conn.execute("SELECT msg_id FROM pgmq.read('pgbus_default', 60, 2)")]
        assert len(ids) == 2
        finished = race(
            db_url, [("SELECT pgbus.job_succeeded('pgbus_default', %s::bigint)", (i,)) for i in ids]
        )
        assert finished == [True, True]
        row = batches.find(b.id, conn=conn)
        assert (row["completed_jobs"], row["status"]) == (2, "finished")
    callbacks = conn.execute(
        "SELECT message->>'job_class', count(*) FROM pgmq.q_pgbus_callbacks GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert callbacks == [(OnComplete.job_name, rounds), (OnSuccess.job_name, rounds)]


def test_double_completion_of_one_message_counts_once(db_url, conn):
    for n in range(20):
        with batches.batch(
            on_complete=OnComplete.set(queue="callbacks"), properties={"name": f"d{n}"}
        ) as b:
            b.add(Record, f"only{n}")
        [msg_id] = [
            r[0] for r in conn.execute("SELECT msg_id FROM pgmq.read('pgbus_default', 60, 1)")
        ]
        results = race(
            db_url, [("SELECT pgbus.job_succeeded('pgbus_default', %s::bigint)", (msg_id,))] * 2
        )
        assert sorted(results) == [False, True]
        assert batches.find(b.id, conn=conn)["completed_jobs"] == 1
        conn.execute("SELECT pgmq.purge_queue('pgbus_default')")


def test_success_racing_failure_leaves_a_consistent_record(db_url, conn):
    """Whichever locks the message first, it ends archived once with no failure left behind."""
    policy = '{"max_retries": 5, "backoff_base": 1, "backoff_max": 1, "jitter": 0}'
    for n in range(20):
        Record.perform_later(f"x{n}")
        [msg_id] = [
            r[0] for r in conn.execute("SELECT msg_id FROM pgmq.read('pgbus_default', 60, 1)")
        ]
        ok, failed = race(
            db_url,
            [
                ("SELECT pgbus.job_succeeded('pgbus_default', %s::bigint)", (msg_id,)),
                (
                    "SELECT pgbus.job_failed('pgbus_default', %s::bigint, '{}', %s::jsonb)",
                    (msg_id, policy),
                ),
            ],
        )
        archived = conn.execute(
            "SELECT count(*) FROM pgmq.a_pgbus_default WHERE msg_id = %s", (msg_id,)
        ).fetchone()[0]
        assert ok is True and failed in ("gone", "retry")
        assert archived == 1
        assert conn.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 0


def test_queues_created_at_once_each_get_their_own_statements(db_url, conn):
    """Each creation rewrites the queue functions; concurrent ones wait for each other instead
    of failing, and the last one written knows every queue."""
    names = [f"race_q{i}" for i in range(6)]
    created = race(db_url, [("SELECT pgbus.ensure_queue(%s)", (n,)) for n in names])
    assert created == [True] * 6
    for n in names:
        assert queue_statements_written(conn, n) == QUEUE_FUNCTIONS, n


def test_readers_at_once_never_take_one_message_twice(db_url, conn):
    conn.execute("SELECT pgbus.ensure_queue('race_reads')")
    sent = {
        r[0]
        for r in conn.execute(
            "SELECT pgbus.queue_send('race_reads', jsonb_build_object('n', i), clock_timestamp())"
            " FROM generate_series(1, 300) i"
        )
    }
    barrier = threading.Barrier(4)
    taken: list[list[int]] = [[] for _ in range(4)]

    def read(i: int) -> None:
        with psycopg.connect(db_url, autocommit=True) as c:
            barrier.wait()
            while rows := c.execute(
                "SELECT msg_id FROM pgbus.queue_read('race_reads', 60, 7)"
            ).fetchall():
                taken[i].extend(r[0] for r in rows)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = [m for ids in taken for m in ids]
    assert sorted(everything) == sorted(sent)
