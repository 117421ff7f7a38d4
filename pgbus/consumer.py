"""The event consumer: a worker whose queues are event subscriptions' and whose job runs the
handlers of the delivered event.

It is `pgbus.worker.Worker` with four things changed: the queues it reads (its topics'
subscriptions, bound when it starts), how a message is decoded (an `Event`), the job that
runs (the queue's handlers, in one transaction with the event's completion) and the events it
announces (`pgbus.event_processed`, `pgbus.event_failed`, `pgbus.event_dead_lettered`).
Everything else is the worker's: read-ahead, notify wake-ups, the visibility heartbeat, retries
with backoff then `<queue>_dlq`, the drain on SIGTERM, reconnection after a server restart.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import psycopg
from psycopg.types.json import Jsonb

from pgbus import events
from pgbus.config import settings
from pgbus.db import pool
from pgbus.errors import PgbusError, RetriesExhausted
from pgbus.events import Event, InvalidEventBody, Subscription
from pgbus.instrumentation import emit
from pgbus.jobs import Job
from pgbus.reporting import report_error
from pgbus.worker import Delivery, Worker

log = logging.getLogger("pgbus.consumer")


class EventJob(Job):
    """Runs one event through the handlers of its queue whose pattern matches its key."""

    job_name = "pgbus.events:EventJob"
    subscriptions: ClassVar[tuple[Subscription, ...]] = ()

    def perform(self, event: Event) -> None:
        ran: set[type[events.Handler]] = set()
        for sub in self.subscriptions:
            if sub.handler in ran or not sub.matches(event.routing_key):
                continue
            ran.add(sub.handler)
            handler = sub.handler()
            if not handler.idempotent:
                handler.handle(event)
                continue
            claim = (event.event_id, sub.handler.handler_name)
            if not self.conn.execute(
                "SELECT pgbus.event_claim(event_id => %s, handler => %s)", claim
            ).fetchone()[0]:
                log.info("event %s: %s finished it already", event.event_id, claim[1])
                continue
            handler.handle(event)
            self.conn.execute("SELECT pgbus.event_completed(event_id => %s, handler => %s)", claim)


class Consumer(Worker):
    kind = "consumer"
    required_migration = "0014_events"

    def __init__(self, topics: list[str], threads: int = 3) -> None:
        subs = events.subscriptions(topics)
        if not subs:
            raise PgbusError(
                f"no subscription serves the topics {topics!r}: import the modules that"
                " subscribe handlers (--import MODULE)"
            )
        super().__init__([], threads)
        self.topics = list(topics)
        by_queue: dict[str, list[Subscription]] = {}
        for s in subs:
            by_queue.setdefault(s.queue, []).append(s)
        self.read_queues = sorted(by_queue)
        self.jobs = {q: _event_job(q, tuple(ss)) for q, ss in by_queue.items()}
        # The handler named in a dead letter's event: only when one handler owns the queue.
        self.owners = {
            q: (next(iter(h)) if len(h := {s.handler.handler_name for s in ss}) == 1 else None)
            for q, ss in by_queue.items()
        }

    # -- the worker's hooks --------------------------------------------------------------

    def _prepare(self, conn: psycopg.Connection) -> None:
        events.bind_all(conn, self.topics)

    def _metadata(self) -> dict[str, Any]:
        return {**super()._metadata(), "topics": self.topics}

    def _read_query(self, qty: int, start_now: int) -> tuple[str, dict[str, Any]]:
        return (
            "SELECT queue, msg_id, read_ct, enqueued_at, message, context, headers"
            " FROM pgbus.read_events(queues => %(queues)s, vt_seconds => %(vt)s, qty => %(qty)s)",
            {"queues": self.read_queues, "vt": self.vt, "qty": qty},
        )

    def _execution_event(self, d: Delivery) -> tuple[str, dict[str, Any]]:
        return "pgbus.event_processed", {**self._context(d), "enqueued_at": d.enqueued_at}

    def _job_class(self, d: Delivery) -> type[Job]:
        return self.jobs[d.queue]

    def _arguments(self, d: Delivery) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (Event.from_message(d.message, d.headers),), {}

    def _completed(self, d: Delivery, started: float) -> None:
        with self._lock:
            self.processed += 1

    def _failed(self, d: Delivery, cls: type[Job] | None, exc: Exception, started: float) -> None:
        if isinstance(exc, InvalidEventBody):
            # No handler can ever read it: it goes to the dead letter queue at once.
            with self._lock:
                self.failed += 1
            report_error(exc, {"action": "read_event", **self._context(d)})
            self._dead_letter(d, {"class": type(exc).__name__, "message": str(exc)}, exc)
            return
        super()._failed(d, cls, exc, started)

    def _announce_failure(self, d: Delivery, exc: Exception, error: str, outcome: str) -> None:
        emit("pgbus.event_failed", **self._context(d), error=error, exception=exc)
        if outcome == "dead_lettered":
            emit("pgbus.event_dead_lettered", **self._context(d), error=error)

    def _dead_letter_unrun(self, d: Delivery) -> None:
        """Delivered more times than it may run: each earlier run died with its consumer."""
        error = {
            "class": RetriesExhausted.error_name,
            "message": f"delivered {d.read_ct} times without finishing (its consumer died each time)",
        }
        self._dead_letter(d, error, None)

    # -- events --------------------------------------------------------------------------

    def _dead_letter(self, d: Delivery, error: dict[str, Any], exc: Exception | None) -> None:
        """Moves the message to <queue>_dlq, then announces it; a move that fails announces
        nothing (the message stays, and comes back after the visibility timeout)."""
        try:
            with pool().connection() as c:
                moved, last_error = c.execute(
                    "SELECT moved, last_error FROM pgbus.event_dead_letter(queue => %s, msg_id => %s::bigint, error => %s, record_stats => %s)",
                    (d.queue, d.msg_id, Jsonb(error), settings().stats_enabled),
                ).fetchone()
        except psycopg.Error as db_exc:
            report_error(db_exc, {"action": "dead_letter_event", **self._context(d)})
            return
        if not moved:
            return
        if exc is not None:  # (this read's own failure: the last one)
            last_error = error["class"]
        emit("pgbus.event_dead_lettered", **self._context(d), error=last_error)

    def _context(self, d: Delivery) -> dict[str, Any]:
        """What every event of the consumer carries. A body that is not an event has no key,
        id or handler."""
        body = d.message if isinstance(d.message, dict) else None
        valid = body is not None and isinstance(body.get("event_id"), str)
        return {
            "queue": d.queue,
            "queue_name": logical_name(d.queue),
            "routing_key": body.get("routing_key") if valid else None,
            "handler": self.owners.get(d.queue) if valid else None,
            "event_id": body.get("event_id") if valid else None,
            "published_at": body.get("published_at") if valid else None,
            "msg_id": d.msg_id,
            "read_ct": d.read_ct,
        }


def _event_job(queue: str, subs: tuple[Subscription, ...]) -> type[EventJob]:
    """The job of one queue: its subscriptions, and the lowest max_retries a handler sets."""
    own = [s.handler.max_retries for s in subs if s.handler.max_retries is not None]
    return type(
        f"EventJob[{queue}]",
        (EventJob,),
        {
            "job_name": f"pgbus.events:{queue}",
            "subscriptions": subs,
            "max_retries": min(own) if own else None,
            "__module__": __name__,
        },
    )


def logical_name(queue: str) -> str:
    """The queue's name without the configured prefix."""
    prefix = settings().queue_prefix + "_"
    return queue[len(prefix) :] if queue.startswith(prefix) else queue
