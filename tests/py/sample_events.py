"""Event handlers the tests publish to and real consumer processes run
(`pgbus consumer --import tests.py.sample_events`). Effects go to the `effects` table: on the
handler's own connection they commit with the event's completion; `mark` survives anything.
"""

from __future__ import annotations

import json
import os
import time
from typing import ClassVar

import pgbus
from tests.py.sample_jobs import mark

# `pgbus start` in the tests: its consumers come from this variable (a JSON list).
if os.environ.get("SAMPLE_EVENT_CONSUMERS"):
    pgbus.configure(event_consumers=json.loads(os.environ["SAMPLE_EVENT_CONSUMERS"]))


@pgbus.subscribe("orders.*")
class RecordOrder(pgbus.Handler):
    """Records the order id in the handler's transaction."""

    def handle(self, event: pgbus.Event) -> None:
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('order', %s)", (str(event["order_id"]),)
        )


@pgbus.subscribe("orders.#", queue="ev_audit")
@pgbus.subscribe("refunds.#", queue="ev_audit")
class AuditEverything(pgbus.Handler):
    """Two patterns, one named queue; records the routing key, touching no database itself."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def handle(self, event: pgbus.Event) -> None:
        AuditEverything.seen.append((event.routing_key, event.event_id))


@pgbus.subscribe("slow.#")
class SlowIdempotent(pgbus.Handler):
    """Claims the event, marks its start; on its first delivery works for `seconds` (payload)
    inside its open transaction. Its write is in that transaction: a finished event is never
    handled again."""

    idempotent = True

    def handle(self, event: pgbus.Event) -> None:
        key = str(event["key"])
        mark("started", key)
        job = pgbus.current_job()
        if job is not None and job.read_ct == 1:
            # (Asleep here, not in pg_sleep: a killed consumer's session then ends at once and
            # releases its claim, instead of running its statement to the end first.)
            time.sleep(float(event.get("seconds", 30)))
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('handled', %s)", (key,))


@pgbus.subscribe("poison.#")
class AlwaysFails(pgbus.Handler):
    max_retries = 2

    def handle(self, event: pgbus.Event) -> None:
        mark("poison_attempt", str(event.get("key")))
        raise ValueError("this handler always fails")


@pgbus.subscribe("fn.called")
def record_function_event(event: pgbus.Event) -> None:
    """A function handler (the decorator makes it a Handler class)."""
    mark("fn", event.routing_key)


@pgbus.subscribe("sleepy.#")
class Sleepy(pgbus.Handler):
    """Marks start, sleeps `seconds` (payload) without the database, marks the end."""

    def handle(self, event: pgbus.Event) -> None:
        key = str(event["key"])
        mark("sleepy_started", key)
        time.sleep(float(event.get("seconds", 1)))
        mark("sleepy_done", key)
