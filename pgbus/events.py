"""The event bus on PGMQ topics.

    @pgbus.subscribe("orders.*")
    class OrderMailer(pgbus.Handler):
        idempotent = True
        def handle(self, event):
            send_mail(event["order_id"])

    pgbus.publish("orders.created", {"order_id": 42})            # -> Published(event_id, 1)
    pgbus.publish("orders.created", {...}, conn=conn)            # part of the caller's transaction

`publish` copies the event into every queue bound by a matching pattern (`*` one segment, `#`
any number), through `pgmq.send_topic` inside `pgbus.publish`. Each subscription has a queue:
by default one per handler class, `<prefix>_ev_<handler>`. Consumer processes (`pgbus
consumer`, or the `event_consumers` setting under `pgbus start`) read those queues and run the
handlers; the bindings are made when a consumer starts and by `bind_all()`, idempotently.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import re
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from pgbus import queues
from pgbus.config import settings
from pgbus.errors import PgbusError
from pgbus.instrumentation import emit
from pgbus.jobs import connection, running_job

INVALID_PARAMETER = "22023"
# PGMQ's own rules (pgmq.validate_routing_key / validate_topic_pattern), checked here early so
# a bad subscription fails when its module is imported; SQL checks again at every call.
_KEY = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
# pgmq.validate_topic_pattern, rule by rule: these characters; no dot first, last or twice in a
# row; no "**", "##", "*#" or "#*". A wildcard may share a segment with letters ("orders*").
_PATTERN_CHARS = re.compile(r"[A-Za-z0-9._*#-]+")
_PATTERN_FORBIDDEN = re.compile(r"^\.|\.$|\.\.|\*\*|##|\*#|#\*")


class InvalidEvent(PgbusError):
    """An event pgbus refuses to publish (bad routing key, headers or delay)."""


class InvalidRoutingKey(InvalidEvent):
    """A routing key PGMQ does not accept: dot-separated words of letters, digits, '-', '_'."""


class InvalidTopicPattern(PgbusError):
    """A subscription pattern PGMQ does not accept."""


class InvalidEventBody(PgbusError):
    """A message in an event queue that is not an event (not a JSON object with an event_id)."""


@dataclasses.dataclass(frozen=True)
class Event:
    """One delivered event; `event["key"]` reads the payload."""

    event_id: str
    payload: dict[str, Any]
    routing_key: str
    published_at: datetime | None
    headers: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        return self.payload[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.payload.get(key, default)

    @classmethod
    def from_message(cls, message: Any, headers: Any = None) -> Event:
        if not isinstance(message, dict) or not isinstance(message.get("event_id"), str):
            raise InvalidEventBody(
                f"not an event: a {type(message).__name__} without an event_id"
                if not isinstance(message, dict)
                else "not an event: the object has no event_id"
            )
        payload = message.get("payload")
        published = message.get("published_at")
        return cls(
            event_id=message["event_id"],
            payload=payload if isinstance(payload, dict) else {"value": payload},
            routing_key=str(message.get("routing_key") or ""),
            published_at=datetime.fromisoformat(published) if isinstance(published, str) else None,
            headers=headers if isinstance(headers, dict) else None,
        )


@dataclasses.dataclass(frozen=True)
class Published:
    """What `publish` answers: the event's id and how many queues it went to."""

    event_id: UUID
    deliveries: int


class Handler:
    """Subclass and define `handle(event)`.

    `idempotent = True`: the handler claims `(event_id, handler)` in pgbus.processed_events in
    its own transaction before it runs, and completes the claim with its writes; an event it
    finished already is skipped, one whose run crashed runs again. `max_retries` overrides the
    setting for this handler's queue. `self.conn` is the transaction that also archives the
    event: writes made on it commit together with the event's completion.
    """

    idempotent: ClassVar[bool] = False
    max_retries: ClassVar[int | None] = None
    handler_name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.handler_name = (
            cls.__dict__.get("handler_name") or f"{cls.__module__}:{cls.__qualname__}"
        )

    def handle(self, event: Event) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define handle()")

    @property
    def conn(self) -> psycopg.Connection:
        job = running_job.get()
        if job is None:
            raise PgbusError("Handler.conn is only available while a consumer runs the handler")
        return job.conn


@dataclasses.dataclass(frozen=True)
class Subscription:
    pattern: str
    handler: type[Handler]
    queue: str  # the PGMQ queue

    def matches(self, routing_key: str) -> bool:
        return pattern_regex(self.pattern).fullmatch(routing_key) is not None


_lock = threading.Lock()
_subscriptions: list[Subscription] = []


def check_routing_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 255 or not _KEY.fullmatch(key):
        raise InvalidRoutingKey(
            f"invalid routing key {key!r}: use dot-separated words of letters, digits, '-' and '_'"
        )
    return key


def check_pattern(pattern: Any) -> str:
    """The pattern, when PGMQ accepts it (the rules of pgmq.validate_topic_pattern, no
    stricter): letters, digits, '.', '-', '_', '*' (one or more characters of one segment) and
    '#' (anything, dots included); no empty segment, no "**", "##", "*#" or "#*"."""
    ok = (
        isinstance(pattern, str)
        and 0 < len(pattern) <= 255
        and _PATTERN_CHARS.fullmatch(pattern) is not None
        and _PATTERN_FORBIDDEN.search(pattern) is None
    )
    if not ok:
        raise InvalidTopicPattern(
            f"invalid topic pattern {pattern!r}: dot-separated words of letters, digits, '-'"
            " and '_', with '*' (within one segment) and '#' (any number of segments)"
        )
    return pattern


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """The regex PGMQ compiles a pattern to (pgmq.topic_bindings.compiled_regex)."""
    body = re.escape(pattern).replace(r"\*", "[^.]+").replace(r"\#", ".*")
    return re.compile(body)


def event_queue(name: str) -> str:
    """The PGMQ queue of a logical event queue name (no priority levels)."""
    base = f"{settings().queue_prefix}_{queues.normalize(name)}"
    if len(base) > queues.MAX_PHYSICAL_NAME:
        raise queues.InvalidQueueName(
            f"event queue {base!r} is longer than {queues.MAX_PHYSICAL_NAME} characters"
        )
    return base


def default_queue_name(handler: type[Handler]) -> str:
    """ev_<snake_case class name>, shortened with a hash of the full name when too long."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", handler.__name__).lower()
    room = queues.MAX_PHYSICAL_NAME - len(settings().queue_prefix) - len("_ev_")
    if len(snake) > room:
        digest = hashlib.sha1(handler.handler_name.encode()).hexdigest()[:6]
        snake = f"{snake[: room - 7]}_{digest}"
    return f"ev_{snake}"


def _as_handler(target: Any) -> type[Handler]:
    if isinstance(target, type) and issubclass(target, Handler):
        return target
    if isinstance(target, type) and callable(getattr(target, "handle", None)):
        return type(target.__name__, (target, Handler), {"__module__": target.__module__})
    if callable(target):  # a function: handle(event)
        fn = target
        _check_takes_one_argument(fn)

        def handle(self: Handler, event: Event) -> None:
            fn(event)

        return type(
            fn.__name__,
            (Handler,),
            {"handle": handle, "__module__": fn.__module__, "__qualname__": fn.__qualname__},
        )
    raise TypeError(
        f"a handler is a Handler subclass, a class with handle() or a function: {target!r}"
    )


def _check_takes_one_argument(fn: Any) -> None:
    """A handler function is called with the event alone; one that needs two arguments is the
    instrumentation spelling fn(name, payload) (refused, with the call it meant)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call decide
        return
    try:
        sig.bind(object())
    except TypeError:
        raise TypeError(
            f"an event handler function takes the event as its one argument; {fn!r} does not."
            " To subscribe fn(name, payload) to instrumentation events, use"
            " pgbus.instrumentation.subscribe(pattern, fn)"
        ) from None


def subscribe(pattern: Any, handler: Any = None, queue: str | None = None) -> Any:
    """Subscribe an event handler to a topic pattern: a Handler subclass, a class with
    handle(event), or a function taking the event (it becomes a Handler class). Without a
    handler, a decorator of any of those. Returns the handler class.

    Instrumentation events are pgbus.instrumentation.subscribe's: a compiled regex, or a
    function that needs two arguments (the instrumentation spelling `fn(name, payload)`), is
    refused here with a TypeError saying so, never quietly subscribed to something else."""
    if isinstance(pattern, re.Pattern):
        raise TypeError(
            "pgbus.subscribe takes a topic pattern (str) for the event bus; a compiled regex"
            " subscribes to instrumentation events: use pgbus.instrumentation.subscribe"
        )
    check_pattern(pattern)

    def register(target: Any) -> type[Handler]:
        cls = _as_handler(target)
        sub = Subscription(pattern, cls, event_queue(queue or default_queue_name(cls)))
        with _lock:
            if sub not in _subscriptions:
                _subscriptions.append(sub)
        return cls

    return register(handler) if handler is not None else register


def subscriptions(topics: Iterable[str] | None = None) -> list[Subscription]:
    """Every subscription, or those a consumer of `topics` serves (see `serves`)."""
    with _lock:
        subs = list(_subscriptions)
    if topics is None:
        return subs
    wanted = list(topics)
    return [s for s in subs if any(serves(t, s.pattern) for t in wanted)]


def serves(topic: str, pattern: str) -> bool:
    """Whether a consumer given `topic` reads a subscription of `pattern`: '#' takes all; else
    the same pattern, or one `topic` matches as a key or prefix ('orders.#' takes 'orders.*')."""
    if topic in ("#", pattern):
        return True
    if topic.endswith(".#") and (pattern + ".").startswith(topic[:-1]):
        return True
    return pattern_regex(topic).fullmatch(pattern) is not None


def clear_subscriptions() -> None:
    """Forget every subscription (tests)."""
    with _lock:
        _subscriptions.clear()


def bind_all(conn: psycopg.Connection | None = None, topics: Iterable[str] | None = None) -> int:
    """Make the queues and bindings of the subscriptions (those of `topics`); idempotent.
    Answers how many bindings were new."""
    new = 0
    with connection(conn) as c:
        for s in subscriptions(topics):
            try:
                new += bool(
                    c.execute(
                        "SELECT pgbus.subscribe(pattern => %s, queue => %s)", (s.pattern, s.queue)
                    ).fetchone()[0]
                )
            except psycopg.Error as exc:
                if exc.sqlstate == INVALID_PARAMETER:
                    raise InvalidTopicPattern(_first_line(exc)) from None
                raise
    return new


def publish(
    routing_key: str,
    payload: Any,
    headers: dict[str, Any] | None = None,
    delay: float | timedelta = 0,
    conn: psycopg.Connection | None = None,
) -> Published:
    """Publish one event to every queue bound by a matching pattern.

    With `conn=` it is part of that transaction (nothing is visible before it commits, nothing
    at all on rollback); inside a running job or handler it joins that one's transaction."""
    check_routing_key(routing_key)
    if headers is not None and not isinstance(headers, dict):
        raise InvalidEvent(f"headers must be a dict, got {type(headers).__name__}")
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        raise InvalidEvent(f"delay must be zero or more seconds, got {delay!r}")
    started = time.monotonic()
    try:
        with connection(conn) as c:
            event_id, deliveries = c.execute(
                "SELECT event_id, deliveries FROM pgbus.publish(routing_key => %s, payload => %s, headers => %s, delay_seconds => %s)",
                (
                    routing_key,
                    Jsonb(payload),
                    Jsonb(headers) if headers is not None else None,
                    math.ceil(seconds),
                ),
            ).fetchone()
    except psycopg.Error as exc:
        if exc.sqlstate == INVALID_PARAMETER:
            raise InvalidEvent(_first_line(exc)) from None
        raise
    emit(
        "pgbus.event_published",
        routing_key=routing_key,
        event_id=str(event_id),
        deliveries=deliveries,
        duration=time.monotonic() - started,
    )
    return Published(event_id, deliveries)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
