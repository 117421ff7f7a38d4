"""The MCP tool pgbus_events through the real SDK client, in process, on a test's own database
with real subscriptions, events, a dead letter and an idempotent claim."""

from __future__ import annotations

import pytest
from psycopg.types.json import Jsonb

import pgbus
from pgbus import events
from tests.py import sample_events
from tests.py.mcp_support import SECRET, call, client, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def bus(conn):
    events.bind_all()
    pgbus.publish("orders.created", {"order_id": 1, "card": SECRET})
    msg_id = conn.execute("SELECT msg_id FROM pgmq.q_pgbus_ev_record_order").fetchone()[0]
    conn.execute(
        "SELECT pgbus.event_dead_letter('pgbus_ev_record_order', %s::bigint, %s)",
        (msg_id, Jsonb({"class": "ValueError", "message": SECRET})),
    )
    pgbus.publish("orders.created", {"order_id": 2, "card": SECRET})
    conn.execute(
        "SELECT pgbus.event_claim('00000000-0000-0000-0000-000000000009', 'app:Mailer'),"
        " pgbus.event_completed('00000000-0000-0000-0000-000000000009', 'app:Mailer')"
    )
    return conn


async def test_pgbus_events_shows_the_bus_redacted(db_url, bus):
    async with client(db_url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        out = await call(c, "pgbus_events")
    assert tools["pgbus_events"].annotations.read_only_hint is True
    assert SECRET not in text_of(out)
    subs = {(s["pattern"], s["queue"]): s["handlers"] for s in out["subscribers"]}
    assert subs[("orders.*", "pgbus_ev_record_order")] == [sample_events.RecordOrder.handler_name]
    assert ("refunds.#", "pgbus_ev_audit") in subs
    queues = {q["queue"]: q for q in out["queues"]}
    assert (
        queues["pgbus_ev_record_order"]["pending"],
        queues["pgbus_ev_record_order"]["dead"],
    ) == (1, 1)
    assert queues["pgbus_ev_audit"]["pending"] == 2
    dead = [d for d in out["dead"] if d["queue"] == "pgbus_ev_record_order_dlq"]
    assert [(d["routing_key"], d["error_class"], d["payload"]) for d in dead] == [
        ("orders.created", "ValueError", "[redacted]")
    ]
    assert all(p["payload"] == "[redacted]" for p in out["pending"])
    assert out["processed"]["claimed"] == 1 and out["processed"]["completed"] == 1
    assert out["processed"]["recent"][0]["handler"] == "app:Mailer"


async def test_payloads_show_only_when_both_gates_open(db_url, bus):
    async with client(db_url, allow_payloads=True) as c:
        opened = await call(c, "pgbus_events", include_payloads=True)
        closed = await call(c, "pgbus_events")
    async with client(db_url) as c:
        asked = await call(c, "pgbus_events", include_payloads=True, recent=1)
    assert SECRET in text_of(opened)
    assert SECRET not in text_of(closed) and SECRET not in text_of(asked)
    assert len(asked["pending"]) == 1
