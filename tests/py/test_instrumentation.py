import logging
import re
import threading
import time

import pytest

from pgbus.instrumentation import emit, has_subscribers, instrument, subscribe


@pytest.fixture
def record():
    """record(pattern) -> the list of (name, payload) events it matched; unsubscribed after."""
    subs = []

    def start(pattern):
        seen = []
        subs.append(subscribe(pattern, lambda name, payload: seen.append((name, payload))))
        return seen

    yield start
    for sub in subs:
        sub.unsubscribe()


def test_exact_names_globs_and_regexes_match(record):
    exact = record("pgbus.job_completed")
    jobs = record("pgbus.job_*")
    everything = record("pgbus.*")
    client = record(re.compile(r"\.client\."))

    emit("pgbus.job_completed", queue="default")
    emit("pgbus.job_failed", queue="default")
    emit("pgbus.client.send_message", queue="mail")
    emit("other.job_completed")

    assert exact == [("pgbus.job_completed", {"queue": "default"})]
    assert [name for name, _ in jobs] == ["pgbus.job_completed", "pgbus.job_failed"]
    assert [name for name, _ in everything] == [
        "pgbus.job_completed",
        "pgbus.job_failed",
        "pgbus.client.send_message",
    ]
    assert client == [("pgbus.client.send_message", {"queue": "mail"})]


def test_unsubscribe_stops_the_calls():
    seen = []
    sub = subscribe("pgbus.test.ping", lambda name, payload: seen.append(name))
    emit("pgbus.test.ping")
    sub.unsubscribe()
    emit("pgbus.test.ping")
    assert seen == ["pgbus.test.ping"]
    assert not has_subscribers("pgbus.test.ping")


def test_has_subscribers(record):
    assert not has_subscribers("pgbus.test.lonely")
    record("pgbus.test.*")
    assert has_subscribers("pgbus.test.lonely")


def test_a_raising_subscriber_is_logged_and_later_ones_still_run(caplog):
    calls = []

    def explode(name, payload):
        calls.append("explode")
        raise RuntimeError("subscriber bug")

    subs = [
        subscribe("pgbus.test.order", lambda n, p: calls.append("first")),
        subscribe("pgbus.test.order", explode),
        subscribe("pgbus.test.order", lambda n, p: calls.append("last")),
    ]
    try:
        with caplog.at_level(logging.WARNING, logger="pgbus.instrumentation"):
            emit("pgbus.test.order")
    finally:
        for sub in subs:
            sub.unsubscribe()

    assert calls == ["first", "explode", "last"]
    [warning] = caplog.records
    assert "pgbus.test.order" in warning.getMessage()
    assert "explode" in warning.getMessage()
    assert warning.exc_info[0] is RuntimeError


def test_each_subscriber_gets_its_own_copy_of_the_payload(record):
    def vandal(name, payload):
        payload["queue"] = "changed"
        payload["extra"] = True

    sub = subscribe("pgbus.test.copy", vandal)
    seen = record("pgbus.test.copy")
    try:
        with instrument("pgbus.test.copy", queue="default") as payload:
            pass
    finally:
        sub.unsubscribe()

    assert seen[0][1]["queue"] == "default"
    assert "extra" not in seen[0][1]
    assert "extra" not in payload


def test_a_payload_key_may_be_called_name(record):
    seen = record("pgbus.test.named")
    emit("pgbus.test.named", name="SendEmail")
    assert seen == [("pgbus.test.named", {"name": "SendEmail"})]


def test_instrument_times_the_block_and_emits_the_keys_it_added(record):
    seen = record("pgbus.test.block")
    before = time.monotonic()
    with instrument("pgbus.test.block", queue="default") as payload:
        payload["outcome"] = "done"
    elapsed = time.monotonic() - before

    [(name, event)] = seen
    assert name == "pgbus.test.block"
    assert event["queue"] == "default"
    assert event["outcome"] == "done"
    assert isinstance(event["duration"], float)
    assert 0 <= event["duration"] <= elapsed
    assert "exception" not in event


def test_instrument_records_the_exception_and_reraises_it(record):
    seen = record("pgbus.test.boom")
    error = ValueError("bad input")
    with pytest.raises(ValueError) as raised, instrument("pgbus.test.boom", queue="q"):
        raise error

    assert raised.value is error
    [(_, event)] = seen
    assert event["exception"] is error
    assert event["error"] == "ValueError"
    assert event["duration"] >= 0


def test_subscribing_from_many_threads_loses_nothing():
    def churn():
        for _ in range(200):
            subscribe("pgbus.test.threads", lambda n, p: None).unsubscribe()

    keeper = subscribe("pgbus.test.threads", lambda n, p: None)
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert has_subscribers("pgbus.test.threads")
    keeper.unsubscribe()
    assert not has_subscribers("pgbus.test.threads")


def test_instrument_calls_start_listeners_before_the_block():
    order = []
    sub = subscribe(
        "pgbus.test.timed",
        lambda name, payload: order.append(("finish", name, sorted(payload))),
        start=lambda name, payload: order.append(("start", name, sorted(payload))),
    )
    plain = subscribe("pgbus.test.*", lambda name, payload: order.append(("plain", name)))
    try:
        with instrument("pgbus.test.timed", queue="q"):
            order.append(("block",))
    finally:
        sub.unsubscribe()
        plain.unsubscribe()
    assert order == [
        ("start", "pgbus.test.timed", ["queue"]),
        ("block",),
        ("finish", "pgbus.test.timed", ["duration", "queue"]),
        ("plain", "pgbus.test.timed"),  # a listener without `start` hears only the finish
    ]


def test_a_raising_start_listener_is_logged_and_the_block_still_runs(caplog):
    def explode(name, payload):
        raise RuntimeError("start bug")

    sub = subscribe("pgbus.test.timed2", lambda n, p: None, start=explode)
    ran = []
    try:
        with caplog.at_level(logging.WARNING), instrument("pgbus.test.timed2"):
            ran.append(True)
    finally:
        sub.unsubscribe()
    assert ran == [True]
    assert "failed on the start of pgbus.test.timed2" in caplog.text
