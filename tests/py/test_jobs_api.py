"""Enqueueing jobs and opening batches, against a real database (no worker)."""

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import pgbus
from pgbus import batches, queues
from pgbus.jobs import UnknownJobClass, job_class
from pgbus.serialization import SerializationError
from tests.py.sample_jobs import OnComplete, OnDiscard, OnSuccess, Record, record_function


def messages(conn, queue="pgbus_default"):
    if conn.execute("SELECT to_regclass(%s)", (f"pgmq.q_{queue}",)).fetchone()[0] is None:
        return []
    return [r[0] for r in conn.execute(f"SELECT message FROM pgmq.q_{queue} ORDER BY msg_id")]


def test_perform_later_sends_an_envelope(conn):
    msg_id = Record.perform_later("k1")
    [m] = messages(conn)
    assert isinstance(msg_id, int)
    assert m["job_class"] == "tests.py.sample_jobs:Record"
    assert m["queue"] == "pgbus_default"
    assert m["args"] == ["k1"] and m["kwargs"] == {}
    assert {"job_id", "enqueued_at"} <= set(m)
    assert "batch_id" not in m and "scheduled_at" not in m


def test_set_queue_wait_and_priority(conn):
    Record.set(queue="Mail-Out", wait=timedelta(minutes=5)).perform_later("later")
    [m] = messages(conn, "pgbus_mail_out")
    assert m["scheduled_at"]
    vt = conn.execute("SELECT vt - now() FROM pgmq.q_pgbus_mail_out").fetchone()[0]
    assert timedelta(minutes=4) < vt <= timedelta(minutes=5, seconds=1)

    pgbus.configure(priority_levels=3)
    Record.set(priority=0).perform_later("urgent")
    Record.set(priority=9).perform_later("clamped")
    assert [m["args"] for m in messages(conn, "pgbus_default_p0")] == [["urgent"]]
    assert [m["args"] for m in messages(conn, "pgbus_default_p2")] == [["clamped"]]


def test_wait_until_must_be_aware():
    with pytest.raises(pgbus.PgbusError, match="timezone-aware"):
        Record.set(wait_until=datetime(2030, 1, 1))


def test_perform_all_later_is_one_statement(conn):
    ids = Record.perform_all_later([("a",), ("b",), Record.call("c")])
    assert len(ids) == 3
    assert [m["args"] for m in messages(conn)] == [["a"], ["b"], ["c"]]
    assert len({m["job_id"] for m in messages(conn)}) == 3


def test_function_jobs(conn):
    record_function.perform_later("f1")
    [m] = messages(conn, "pgbus_functions")
    assert m["job_class"] == "tests.py.sample_jobs:record_function"
    assert job_class(m["job_class"]) is record_function


def test_enqueue_joins_the_callers_transaction(db_url, conn):
    with psycopg.connect(db_url) as app:
        Record.perform_later("inside", conn=app)
        assert messages(conn) == []  # not visible before commit
        app.commit()
    assert [m["args"] for m in messages(conn)] == [["inside"]]

    with psycopg.connect(db_url) as app:
        Record.perform_later("rolled back", conn=app)
        app.rollback()
    assert [m["args"] for m in messages(conn)] == [["inside"]]


def test_bad_arguments_change_nothing(conn):
    with pytest.raises(SerializationError, match="argument 1 is a object"):
        Record.perform_later(object())
    assert messages(conn) == []


def test_queue_names():
    assert queues.normalize(" Mail.Out:eu-1 ") == "mail_out_eu_1"
    with pytest.raises(queues.InvalidQueueName, match="no letters or digits"):
        queues.normalize("--")
    with pytest.raises(queues.InvalidQueueName, match="longer than 40"):
        queues.physical("x" * 40)


def test_unknown_job_class_names_the_module():
    with pytest.raises(UnknownJobClass, match=r"pgbus start --import app.jobs"):
        job_class("app.jobs:Missing")


def test_concurrent_first_use_of_a_queue(db_url):
    import concurrent.futures

    def send(i):
        with psycopg.connect(db_url, autocommit=True) as c:
            return Record.set(queue="fresh").perform_later(str(i), conn=c)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(send, range(16)))
    assert len(set(ids)) == 16
    with psycopg.connect(db_url) as c:
        assert (
            c.execute("SELECT count(*) FROM pgmq.meta WHERE queue_name = 'pgbus_fresh'").fetchone()[
                0
            ]
            == 1
        )


def batch_row(conn, batch_id):
    return batches.find(batch_id, conn=conn)


def test_batch_counts_members_and_stays_open_until_commit(db_url, conn):
    with psycopg.connect(db_url) as app:
        with batches.batch(
            on_complete=OnComplete, description="three", properties={"name": "b1"}, conn=app
        ) as b:
            b.add(Record, "m1")
            b.add_all([Record.call("m2"), Record.set(queue="other").call("m3")])
        assert batch_row(conn, b.id) is None  # invisible until the caller commits
        app.commit()
    row = batch_row(conn, b.id)
    assert row["total_jobs"] == 3 and row["status"] == "processing"
    assert [m["batch_id"] for m in messages(conn)] == [str(b.id)] * 2
    assert [m["batch_id"] for m in messages(conn, "pgbus_other")] == [str(b.id)]


def test_batch_rolled_back_leaves_nothing(db_url, conn):
    with psycopg.connect(db_url) as app:
        with batches.batch(on_complete=OnComplete, properties={"name": "gone"}, conn=app) as b:
            b.add(Record, "m1")
        app.rollback()
    assert batch_row(conn, b.id) is None
    assert messages(conn) == []


def test_batch_block_that_raises_leaves_nothing(conn):
    with (
        pytest.raises(RuntimeError),
        batches.batch(on_complete=OnComplete, properties={"name": "x"}) as b,
    ):
        b.add(Record, "m1")
        raise RuntimeError("changed my mind")
    assert batch_row(conn, b.id) is None
    assert messages(conn) == []


def test_empty_batch_finishes_at_once(conn):
    when = datetime(2026, 1, 2, tzinfo=UTC)
    with batches.batch(
        on_complete=OnComplete,
        on_success=OnSuccess,
        on_discard=OnDiscard,
        properties={"name": "empty", "when": when},
    ) as b:
        pass
    row = batch_row(conn, b.id)
    assert row["status"] == "finished" and row["total_jobs"] == 0
    sent = messages(conn)
    assert [m["job_class"].split(":")[1] for m in sent] == ["OnComplete", "OnSuccess"]
    # Callbacks get the properties, with their Python types intact.
    from pgbus.serialization import load_arguments

    assert load_arguments(sent[0])[0] == ({"name": "empty", "when": when},)


def test_batch_validates_callbacks():
    with (
        pytest.raises(pgbus.PgbusError, match="on_success must be a Job class"),
        batches.batch(on_success="NotAJob"),
    ):
        pass
