"""The event bus's Python API and its consumer, with a real Consumer on a thread of the test
process against a real PostgreSQL (see test_e2e_events.py for consumer processes)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgbus
from pgbus import events
from pgbus.consumer import Consumer
from pgbus.instrumentation import subscribe as listen
from tests.py.sample_events import AlwaysFails, AuditEverything, RecordOrder, SlowIdempotent
from tests.py.support import count_effects, wait_until


@contextmanager
def running_consumer(topics: list[str], threads: int = 2) -> Iterator[Consumer]:
    c = Consumer(topics, threads=threads)
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    try:
        yield c
    finally:
        c.stop()
        t.join(30)


@pytest.fixture
def seen() -> Iterator[list]:
    got: list = []
    sub = listen("pgbus.event*", lambda name, payload: got.append((name, payload)))
    yield got
    sub.unsubscribe()


def depth(conn, queue: str) -> int:
    return conn.execute(f"SELECT count(*) FROM pgmq.q_{queue}").fetchone()[0]


# -- publish and subscribe ---------------------------------------------------------------


def test_publish_goes_to_every_matching_subscription(effects):
    assert events.bind_all() >= 5
    assert events.bind_all() == 0  # idempotent
    out = pgbus.publish("orders.created", {"order_id": 7})
    assert out.deliveries == 2 and isinstance(out.event_id, uuid.UUID)
    assert depth(effects, "pgbus_ev_record_order") == 1 and depth(effects, "pgbus_ev_audit") == 1
    body = effects.execute("SELECT message FROM pgmq.q_pgbus_ev_record_order").fetchone()[0]
    assert body["event_id"] == str(out.event_id) and body["routing_key"] == "orders.created"
    assert body["payload"] == {"order_id": 7}
    assert pgbus.publish("orders.eu.created", {"order_id": 8}).deliveries == 1  # only '#'
    assert pgbus.publish("nobody.listens", {"x": 1}).deliveries == 0


def test_invalid_keys_patterns_and_arguments_are_refused_and_send_nothing(effects):
    events.bind_all()
    for key in ["", "orders..created", "orders.*", "a b", ".x", None, 5]:
        with pytest.raises(pgbus.InvalidRoutingKey):
            pgbus.publish(key, {"x": 1})
    with pytest.raises(pgbus.InvalidEvent):
        pgbus.publish("orders.created", {"x": 1}, delay=-1)
    with pytest.raises(pgbus.InvalidEvent):
        pgbus.publish("orders.created", {"x": 1}, headers=[1])
    for pattern in ["", "orders..x", "orders.**", "a b", "orders.*#"]:
        with pytest.raises(pgbus.InvalidTopicPattern):
            pgbus.subscribe(pattern, RecordOrder)
    assert depth(effects, "pgbus_ev_record_order") == 0


def test_sql_refuses_a_bad_key_with_a_named_error(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid routing key"):
        conn.execute("SELECT * FROM pgbus.publish('a..b', '{}')")


def test_publish_with_conn_is_part_of_the_callers_transaction(db_url, effects):
    events.bind_all()
    with psycopg.connect(db_url) as c:
        pgbus.publish("orders.created", {"order_id": 1}, conn=c)
        assert depth(effects, "pgbus_ev_record_order") == 0  # not before the commit
        c.commit()
    assert depth(effects, "pgbus_ev_record_order") == 1
    with psycopg.connect(db_url) as c:
        pgbus.publish("orders.created", {"order_id": 2}, conn=c)
        c.rollback()
    assert depth(effects, "pgbus_ev_record_order") == 1


def test_delay_and_headers(effects):
    events.bind_all()
    pgbus.publish(
        "orders.created", {"order_id": 3}, headers={"trace": "t1"}, delay=timedelta(hours=1)
    )
    vt, headers = effects.execute("SELECT vt, headers FROM pgmq.q_pgbus_ev_record_order").fetchone()
    assert vt > datetime.now(UTC) + timedelta(minutes=59) and headers == {"trace": "t1"}


def test_decorated_function_and_queue_names():
    subs = {(s.pattern, s.handler.__name__, s.queue) for s in events.subscriptions()}
    assert ("fn.called", "record_function_event", "pgbus_ev_record_function_event") in subs
    assert ("refunds.#", "AuditEverything", "pgbus_ev_audit") in subs
    assert {s.queue for s in events.subscriptions(["orders.#"])} == {
        "pgbus_ev_record_order",
        "pgbus_ev_audit",
    }
    assert {s.queue for s in events.subscriptions(["slow.#"])} == {"pgbus_ev_slow_idempotent"}


@contextmanager
def forgotten_afterwards() -> Iterator[None]:
    """Subscriptions a test adds are dropped after it (the sample modules' stay)."""
    before = events.subscriptions()
    try:
        yield
    finally:
        with events._lock:
            events._subscriptions[:] = before


def test_subscribe_with_a_plain_function_makes_an_event_handler_as_the_decorator_does():
    def on_order(event):
        return event

    with forgotten_afterwards():
        cls = pgbus.subscribe("orders.fn_called", on_order)
        assert isinstance(cls, type) and issubclass(cls, pgbus.Handler)
        subs = [s for s in events.subscriptions() if s.pattern == "orders.fn_called"]
        assert [(s.handler, s.queue) for s in subs] == [(cls, "pgbus_ev_on_order")]
        got = []
        probe = listen("orders.fn_called", lambda name, payload: got.append(name))
        try:
            from pgbus.instrumentation import emit

            emit("orders.fn_called")
        finally:
            probe.unsubscribe()
        assert got == ["orders.fn_called"]  # only the probe: no instrumentation subscription


def test_the_instrumentation_spelling_is_refused_with_the_call_it_meant():
    from pgbus import instrumentation

    before = instrumentation._subscriptions
    with forgotten_afterwards():
        subs = events.subscriptions()
        for call in (
            lambda: pgbus.subscribe("pgbus.test.ping", lambda name, payload: None),
            lambda: pgbus.subscribe("pgbus.test.ping")(lambda name, payload: None),
        ):
            with pytest.raises(TypeError, match=r"pgbus\.instrumentation\.subscribe"):
                call()
        import re

        with pytest.raises(TypeError, match=r"pgbus\.instrumentation\.subscribe"):
            pgbus.subscribe(re.compile(r"pgbus\..*"), lambda event: None)
        assert events.subscriptions() == subs
    assert instrumentation._subscriptions == before  # nothing subscribed quietly either
    # handlers with a default second argument, or *args, still take the event alone
    with forgotten_afterwards():
        pgbus.subscribe("orders.x", lambda event, extra=None: None)
        pgbus.subscribe("orders.y", lambda *args: None)


# PGMQ's pgmq.validate_topic_pattern decides; the local check agrees with it both ways.
PATTERNS = [
    "orders.*",
    "orders.#",
    "#",
    "*",
    "*.error",
    "#.error",
    "app.*.#",
    "a-b_c.D9",
    "foo*",
    "*foo",
    "a*b.c",
    "foo#",
    "a#b",
    "x.#.y",
    "",
    ".x",
    "x.",
    "x..y",
    "x.**",
    "x.##",
    "x.*#",
    "x.#*",
    "a b",
    "x!",
    "ä",
    "a/b",
    "x" * 255,
    "x" * 256,
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_local_pattern_check_is_pgmqs(conn, pattern):
    try:
        conn.execute("SELECT pgmq.validate_topic_pattern(%s)", (pattern,))
        pgmq_ok = True
    except psycopg.Error:
        pgmq_ok = False
    try:
        events.check_pattern(pattern)
        local_ok = True
    except pgbus.InvalidTopicPattern:
        local_ok = False
    assert local_ok == pgmq_ok


def test_a_wildcard_inside_a_segment_matches_as_pgmq_does(conn):
    conn.execute("SELECT pgmq.create('t_wild')")
    conn.execute("SELECT pgmq.bind_topic('foo*', 't_wild')")
    for key in ("food", "foo", "foo.d", "fo", "foodie"):
        sent = conn.execute("SELECT pgmq.send_topic(%s, '{}')", (key,)).fetchone()[0]
        local = events.Subscription("foo*", RecordOrder, "t_wild").matches(key)
        assert local == (sent == 1), key


# -- the consumer ------------------------------------------------------------------------


def test_consumer_runs_handlers_and_archives(effects, seen):
    events.bind_all()
    with running_consumer(["orders.#"]):
        for i in range(10):
            pgbus.publish("orders.created", {"order_id": i})
        wait_until(lambda: count_effects(effects, "order") == 10, what="10 orders")
        wait_until(
            lambda: (
                effects.execute("SELECT count(*) FROM pgmq.a_pgbus_ev_audit").fetchone()[0] == 10
            )
        )
    assert depth(effects, "pgbus_ev_record_order") == 0
    assert len([k for k, _ in AuditEverything.seen if k == "orders.created"]) >= 10
    processed = [p for n, p in seen if n == "pgbus.event_processed"]
    assert len(processed) == 20 and not any("exception" in p for p in processed)
    one = next(p for p in processed if p["queue"] == "pgbus_ev_record_order")
    assert one["handler"] == "tests.py.sample_events:RecordOrder"
    assert one["routing_key"] == "orders.created" and one["queue_name"] == "ev_record_order"
    stats = effects.execute(
        "SELECT job_class, status, count(*) FROM pgbus.job_stats GROUP BY 1, 2"
    ).fetchall()
    assert stats == [("event:orders.created", "success", 20)]
    row = effects.execute("SELECT kind, metadata ->> 'topics' FROM pgbus.processes").fetchall()
    assert row == []  # deregistered on stop


def test_a_failing_handler_retries_with_backoff_then_dead_letters(effects, seen):
    pgbus.configure(retry_backoff_base=0.05, retry_backoff_max=0.1)
    events.bind_all()
    out = pgbus.publish("poison.one", {"key": "p1"})
    with running_consumer(["poison.#"]):
        wait_until(
            lambda: (
                depth(effects, "pgbus_ev_always_fails") == 0
                and effects.execute(
                    "SELECT to_regclass('pgmq.q_pgbus_ev_always_fails_dlq')"
                ).fetchone()[0]
            ),
            what="dead letter",
        )
    assert count_effects(effects, "poison_attempt") == AlwaysFails.max_retries + 1
    dlq = effects.execute(
        "SELECT message ->> 'event_id', headers -> 'pgbus_dead_letter' -> 'error' ->> 'class'"
        " FROM pgmq.q_pgbus_ev_always_fails_dlq"
    ).fetchall()
    assert dlq == [(str(out.event_id), "ValueError")]
    assert effects.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 0
    failed = [p for n, p in seen if n == "pgbus.event_failed"]
    dead = [p for n, p in seen if n == "pgbus.event_dead_lettered"]
    assert len(failed) == 3 and len(dead) == 1
    assert {
        k: dead[0][k]
        for k in ("queue_name", "routing_key", "handler", "event_id", "read_ct", "error")
    } == {
        "queue_name": "ev_always_fails",
        "routing_key": "poison.one",
        "handler": "tests.py.sample_events:AlwaysFails",
        "event_id": str(out.event_id),
        "read_ct": 3,
        "error": "ValueError",
    }
    assert isinstance(dead[0]["msg_id"], int)
    stats = effects.execute(
        "SELECT status, count(*) FROM pgbus.job_stats GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert stats == [("dead_lettered", 1), ("failed", 2)]


def test_idempotent_handler_skips_an_event_it_finished(effects):
    events.bind_all()
    pgbus.publish("slow.go", {"key": "s1", "seconds": 0})
    body = effects.execute("SELECT message FROM pgmq.q_pgbus_ev_slow_idempotent").fetchone()[0]
    with running_consumer(["slow.#"]):
        wait_until(lambda: count_effects(effects, "handled") == 1, what="first run")
        # The same event delivered again (a replay, a duplicate): claimed and finished, skipped.
        effects.execute("SELECT pgmq.send('pgbus_ev_slow_idempotent', %s)", (Jsonb(body),))
        wait_until(
            lambda: (
                effects.execute("SELECT count(*) FROM pgmq.a_pgbus_ev_slow_idempotent").fetchone()[
                    0
                ]
                == 2
            )
        )
    assert count_effects(effects, "handled") == 1
    assert count_effects(effects, "started") == 1  # the second delivery never ran the body
    row = effects.execute(
        "SELECT handler, completed_at IS NOT NULL FROM pgbus.processed_events"
    ).fetchall()
    assert row == [(SlowIdempotent.handler_name, True)]


@pytest.mark.parametrize("body", [Jsonb([1, 2]), Jsonb("text"), Jsonb({"no": "event id"})])
def test_a_body_that_is_not_an_event_is_dead_lettered_at_once(effects, seen, body):
    events.bind_all()
    effects.execute("SELECT pgmq.send('pgbus_ev_record_order', %s)", (body,))
    with running_consumer(["orders.*"]):
        wait_until(
            lambda: (
                effects.execute(
                    "SELECT to_regclass('pgmq.q_pgbus_ev_record_order_dlq')"
                ).fetchone()[0]
                and depth(effects, "pgbus_ev_record_order_dlq") == 1
            ),
            what="dead letter",
        )
    assert depth(effects, "pgbus_ev_record_order") == 0
    dead = [p for n, p in seen if n == "pgbus.event_dead_lettered"]
    assert len(dead) == 1
    assert (dead[0]["routing_key"], dead[0]["handler"], dead[0]["event_id"], dead[0]["error"]) == (
        None,
        None,
        None,
        "InvalidEventBody",
    )
    assert count_effects(effects, "order") == 0
    assert effects.execute("SELECT status FROM pgbus.job_stats").fetchall() == [("dead_lettered",)]


def test_a_raising_instrumentation_subscriber_changes_nothing(effects, seen):
    pgbus.configure(retry_backoff_base=0.05, retry_backoff_max=0.1)
    events.bind_all()

    def explode(name, payload):
        raise RuntimeError("subscriber bug")

    sub = listen("pgbus.event_dead_lettered", explode)
    try:
        effects.execute("SELECT pgmq.send('pgbus_ev_record_order', '[1]')")
        with running_consumer(["orders.*"]):
            wait_until(
                lambda: (
                    effects.execute(
                        "SELECT to_regclass('pgmq.q_pgbus_ev_record_order_dlq')"
                    ).fetchone()[0]
                    and depth(effects, "pgbus_ev_record_order_dlq") == 1
                ),
                what="dead letter",
            )
    finally:
        sub.unsubscribe()
    assert effects.execute(
        "SELECT status, count(*) FROM pgbus.job_stats GROUP BY 1"
    ).fetchall() == [("dead_lettered", 1)]
    assert len([1 for n, _ in seen if n == "pgbus.event_dead_lettered"]) == 1


def test_runs_that_never_finished_are_dead_lettered_with_the_last_recorded_error(effects, seen):
    events.bind_all()
    out = pgbus.publish("orders.created", {"order_id": 5})
    q = "pgbus_ev_record_order"
    msg_id = effects.execute(f"SELECT msg_id FROM pgmq.q_{q}").fetchone()[0]
    effects.execute(
        "SELECT pgbus.job_failed(%s, %s::bigint, %s, %s)",
        (
            q,
            msg_id,
            Jsonb({"class": "KeyError", "message": "x"}),
            Jsonb({"max_retries": 99, "backoff_base": 0, "backoff_max": 0, "jitter": 0}),
        ),
    )
    # As if read 6 times by consumers that all died (max_retries 5 allows 6 runs).
    effects.execute(f"UPDATE pgmq.q_{q} SET read_ct = 6, vt = now()")
    with running_consumer(["orders.*"]):
        wait_until(lambda: depth(effects, q) == 0, what="dead letter")
    dead = [p for n, p in seen if n == "pgbus.event_dead_lettered"]
    assert [(d["event_id"], d["error"], d["read_ct"]) for d in dead] == [
        (str(out.event_id), "KeyError", 7)
    ]
    assert count_effects(effects, "order") == 0


def test_consumer_needs_a_subscription():
    with pytest.raises(pgbus.PgbusError, match="no subscription"):
        Consumer(["nothing.matches.this"])


def test_metrics_count_processed_and_dead_lettered_events(effects):
    from prometheus_client import CollectorRegistry

    from pgbus.metrics import MetricsSubscriber, PrometheusBackend

    backend = PrometheusBackend(CollectorRegistry())
    metrics = MetricsSubscriber(backend).install()
    try:
        events.bind_all()
        pgbus.publish("orders.created", {"order_id": 1})
        effects.execute("SELECT pgmq.send('pgbus_ev_record_order', '\"junk\"')")
        with running_consumer(["orders.*"]):
            wait_until(lambda: count_effects(effects, "order") == 1, what="the order")
            wait_until(lambda: depth(effects, "pgbus_ev_record_order") == 0, what="the junk")
    finally:
        metrics.uninstall()

    def sample(name, **labels):
        return backend.registry.get_sample_value(name, labels)

    handler = "tests.py.sample_events:RecordOrder"
    assert (
        sample(
            "pgbus_event_count_total",
            handler=handler,
            routing_key="orders.created",
            status="processed",
        )
        == 1
    )
    assert (
        sample("pgbus_event_count_total", handler="", routing_key="", status="dead_lettered") == 1
    )
    assert (
        sample("pgbus_event_duration_ms_count", handler=handler, routing_key="orders.created") == 1
    )
    # Job metrics are not touched by events.
    assert (
        sample(
            "pgbus_queue_job_count_total",
            queue="pgbus_ev_record_order",
            job_class="(none)",
            status="dead_lettered",
        )
        is None
    )


@pgbus.subscribe("shared.#", queue="ev_shared")
class SharedFails(pgbus.Handler):
    max_retries = 0

    def handle(self, event: pgbus.Event) -> None:
        raise LookupError("shared handler failed")


@pgbus.subscribe("shared.#", queue="ev_shared")
class SharedWorks(pgbus.Handler):
    def handle(self, event: pgbus.Event) -> None:
        pass


def test_the_handler_is_none_when_several_handlers_own_the_queue(effects, seen):
    events.bind_all()
    out = pgbus.publish("shared.thing", {"x": 1})
    with running_consumer(["shared.#"]):
        wait_until(lambda: depth(effects, "pgbus_ev_shared") == 0, what="dead letter")
    [dead] = [p for n, p in seen if n == "pgbus.event_dead_lettered"]
    assert (dead["handler"], dead["event_id"], dead["routing_key"], dead["error"]) == (
        None,
        str(out.event_id),
        "shared.thing",
        "LookupError",
    )
    assert depth(effects, "pgbus_ev_shared_dlq") == 1


def test_a_dead_letter_move_that_fails_emits_nothing(effects, seen):
    pgbus.configure(visibility_timeout=1)
    events.bind_all()
    q = "pgbus_ev_record_order"
    # The dead letter queue refuses every insert: the move fails inside PostgreSQL.
    effects.execute(f"SELECT pgbus.ensure_queue('{q}_dlq')")
    effects.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN RAISE EXCEPTION 'the dead letter queue is full'; END$$"
    )
    effects.execute(
        f"CREATE TRIGGER refuse BEFORE INSERT ON pgmq.q_{q}_dlq FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    effects.execute(f"SELECT pgmq.send('{q}', '[1]')")
    with running_consumer(["orders.*"]):
        wait_until(
            lambda: effects.execute(f"SELECT read_ct FROM pgmq.q_{q}").fetchone()[0] >= 2,
            what="a second try of the move",
        )
    assert not [n for n, _ in seen if n == "pgbus.event_dead_lettered"]
    assert depth(effects, q) == 1 and depth(effects, f"{q}_dlq") == 0  # the message stays
    assert effects.execute("SELECT count(*) FROM pgbus.job_stats").fetchone()[0] == 0
