"""The dashboard's Events page and its actions, through Starlette's client on a test's own
database with real subscriptions and events."""

from __future__ import annotations

import json

import pytest
from psycopg.types.json import Jsonb

import pgbus
from pgbus import events
from tests.py.sample_events import RecordOrder
from tests.py.web_support import client, flash_text, post

SECRET = "s3cr3t-value"


@pytest.fixture
def bus(conn):
    events.bind_all()
    pgbus.publish("orders.created", {"order_id": 1})
    pgbus.publish("refunds.issued", {"order_id": 2, "password": SECRET})
    dead = conn.execute("SELECT msg_id FROM pgmq.q_pgbus_ev_record_order").fetchone()[0]
    conn.execute(
        "SELECT pgbus.event_dead_letter('pgbus_ev_record_order', %s::bigint, %s)",
        (dead, Jsonb({"class": "ValueError", "message": "x"})),
    )
    pgbus.publish("orders.created", {"order_id": 3})
    return conn


def msg(conn, queue, order_id):
    return conn.execute(
        f"SELECT msg_id FROM pgmq.q_{queue} WHERE message -> 'payload' ->> 'order_id' = %s",
        (str(order_id),),
    ).fetchone()[0]


def test_the_events_page_shows_subscribers_pending_dead_and_processed(db_url, bus):
    c = client(db_url)
    c.raise_server_exceptions = True
    html = c.get("/events").text
    assert "orders.*" in html and "pgbus_ev_record_order" in html
    assert RecordOrder.handler_name in html
    assert "orders.created #" in html and "refunds.issued #" in html
    assert "ValueError" in html  # the dead event's error
    assert "Events" in c.get("/").text  # in the navigation
    detail = c.get(f"/events/pgbus_ev_audit/{msg(bus, 'pgbus_ev_audit', 2)}").text
    assert SECRET not in detail  # filtered, and not put in the edit box
    for fragment in ("subscribers", "pending", "dead", "processed"):
        assert c.get(f"/events?fragment={fragment}").status_code == 200
    assert c.get("/events/pgbus_ev_audit/999999").status_code == 404


def test_replay_mark_handled_and_discard(db_url, bus):
    c = client(db_url)
    q = "pgbus_ev_record_order"
    pending = msg(bus, q, 3)
    r = post(c, f"/events/{q}/{pending}/replay", page="/events")
    assert r.status_code == 303
    assert bus.execute(f"SELECT count(*) FROM pgmq.q_{q}").fetchone()[0] == 2
    assert any("Published again" in t for _, t in flash_text(c, "/events"))
    post(c, f"/events/{q}/{pending}/mark-handled", page="/events")
    assert (
        bus.execute(f"SELECT count(*) FROM pgmq.a_{q} WHERE msg_id = %s", (pending,)).fetchone()[0]
        == 1
    )
    assert bus.execute(
        "SELECT handler FROM pgbus.processed_events WHERE completed_at IS NOT NULL"
    ).fetchall() == [(RecordOrder.handler_name,)]
    post(c, f"/events/{q}/{pending}/discard", page="/events")
    assert any("no longer" in t for _, t in flash_text(c, "/events"))  # its real outcome


def test_edit_payload_is_validated_and_reroute_goes_to_a_subscriber(db_url, bus):
    c = client(db_url)
    q = "pgbus_ev_audit"
    m = msg(bus, q, 3)
    assert (
        post(c, f"/events/{q}/{m}/edit", {"payload": "not json"}, page="/events").status_code == 400
    )
    assert post(c, f"/events/{q}/{m}/edit", {"payload": "[1]"}, page="/events").status_code == 400
    for bad in ('{"n": Infinity}', '{"u": "\\u0000"}'):
        r = post(c, f"/events/{q}/{m}/edit", {"payload": bad}, page="/events")
        assert r.status_code == 400 and "Traceback" not in r.text, bad
    long = json.dumps({"order_id": 3, "note": "x" * 20_000})
    post(c, f"/events/{q}/{m}/edit", {"payload": long}, page="/events")
    assert (
        bus.execute(
            f"SELECT count(*) FROM pgmq.q_{q} WHERE length(message -> 'payload' ->> 'note') = 20000"
        ).fetchone()[0]
        == 1
    )
    m = bus.execute(
        f"SELECT msg_id FROM pgmq.q_{q} WHERE length(message -> 'payload' ->> 'note') = 20000"
    ).fetchone()[0]
    post(c, f"/events/{q}/{m}/edit", {"payload": json.dumps({"order_id": 33})}, page="/events")
    edited = bus.execute(
        f"SELECT msg_id FROM pgmq.q_{q} WHERE message -> 'payload' ->> 'order_id' = '33'"
    ).fetchone()
    assert edited is not None
    r = post(
        c, f"/events/{q}/{edited[0]}/reroute", {"target": "pgbus_ev_record_order"}, page="/events"
    )
    assert r.status_code == 303
    assert (
        bus.execute(
            "SELECT count(*) FROM pgmq.q_pgbus_ev_record_order WHERE message -> 'payload' ->> 'order_id' = '33'"
        ).fetchone()[0]
        == 1
    )
    post(c, f"/events/{q}/{msg(bus, q, 1)}/reroute", {"target": "pgbus_default"}, page="/events")
    assert any("no subscriber" in t for _, t in flash_text(c, "/events"))


def test_dead_event_retry_and_bulk_discard(db_url, bus):
    c = client(db_url)
    dead = bus.execute("SELECT msg_id FROM pgmq.q_pgbus_ev_record_order_dlq").fetchone()[0]
    post(c, f"/events/pgbus_ev_record_order_dlq/{dead}/retry", page="/events")
    assert bus.execute("SELECT count(*) FROM pgmq.q_pgbus_ev_record_order_dlq").fetchone()[0] == 0
    assert bus.execute("SELECT count(*) FROM pgmq.q_pgbus_ev_record_order").fetchone()[0] == 2
    items = [
        f"pgbus_ev_audit:{r[0]}" for r in bus.execute("SELECT msg_id FROM pgmq.q_pgbus_ev_audit")
    ]
    r = c.post(
        "/events/bulk/discard-selected",
        data={
            "csrf_token": __import__("tests.py.web_support", fromlist=["csrf"]).csrf(c, "/events"),
            "item": items,
        },
    )
    assert r.status_code == 303
    assert bus.execute("SELECT count(*) FROM pgmq.q_pgbus_ev_audit").fetchone()[0] == 0
    assert post(c, "/events/bulk/explode", page="/events").status_code == 404
    assert post(c, "/events/pgbus_ev_audit/1/explode", page="/events").status_code == 404
