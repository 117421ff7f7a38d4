"""In-process events: pgbus emits named events, anything may subscribe.

    sub = subscribe("pgbus.job_*", lambda name, payload: print(name, payload))
    sub.unsubscribe()

A pattern is an exact event name, a glob ("pgbus.job_*", "pgbus.*") or a compiled regex
(matched with .search). Subscribers run synchronously on the emitting thread, in subscription
order, each with its own shallow copy of the payload; one that raises is logged and skipped.

Events the job layer emits, with their payload keys:

    pgbus.executor.execute       queue, job_class, job_id, msg_id, read_ct, enqueued_at, duration
    pgbus.job_completed          queue, job_class, job_id, msg_id, duration
    pgbus.job_failed             queue, job_class, job_id, msg_id, read_ct, error, exception
    pgbus.job_dead_lettered      queue, job_class, job_id, msg_id, read_ct, error
    pgbus.client.send_message    queue, duration
    pgbus.client.send_batch      queue, size, duration
    pgbus.client.read_batch      queue, qty, count, duration

`duration` is in seconds; `error` is the exception's class name; `exception` the object itself.

Events timed by `instrument` (pgbus.executor.execute, pgbus.event_processed) also have a start:
`subscribe(pattern, finish_fn, start=start_fn)` calls `start_fn(name, payload)` on the
emitting thread before the block runs, then `finish_fn` after it, so a tracer can open a span
that is current for the whole execution (pgbus.otel does).
"""

from __future__ import annotations

import fnmatch
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Listener = Callable[[str, dict[str, Any]], Any]

log = logging.getLogger(__name__)

# Copy-on-write: emit() reads a snapshot without taking the lock, so emitting stays cheap and a
# subscriber may (un)subscribe while being called.
_lock = threading.Lock()
_subscriptions: tuple[Subscription, ...] = ()


class Subscription:
    """One subscriber; `unsubscribe()` stops its calls."""

    def __init__(
        self, pattern: str | re.Pattern[str], fn: Listener, start: Listener | None = None
    ) -> None:
        if not isinstance(pattern, str | re.Pattern):
            raise TypeError(f"pattern must be a str or a compiled regex, got {pattern!r}")
        self.pattern = pattern
        self.fn = fn
        self.start = start

    def matches(self, name: str) -> bool:
        if isinstance(self.pattern, re.Pattern):
            return self.pattern.search(name) is not None
        return fnmatch.fnmatchcase(name, self.pattern)

    def unsubscribe(self) -> None:
        global _subscriptions
        with _lock:
            _subscriptions = tuple(s for s in _subscriptions if s is not self)

    def __repr__(self) -> str:
        return f"Subscription({self.pattern!r}, {self.fn!r})"


def subscribe(
    pattern: str | re.Pattern[str], fn: Listener, *, start: Listener | None = None
) -> Subscription:
    """Call `fn(name, payload)` for every event whose name matches `pattern`, and
    `start(name, payload)` when a timed event (`instrument`) begins."""
    global _subscriptions
    sub = Subscription(pattern, fn, start)
    with _lock:
        _subscriptions = (*_subscriptions, sub)
    return sub


def has_subscribers(name: str) -> bool:
    """Whether emitting `name` would call anyone (so emitters can skip building payloads)."""
    return any(s.matches(name) for s in _subscriptions)


def emit(name: str, /, **payload: Any) -> None:
    """Call every subscriber matching `name`; never raises because of a subscriber."""
    for sub in _subscriptions:
        if not sub.matches(name):
            continue
        try:
            sub.fn(name, dict(payload))
        except Exception:
            log.warning("subscriber %r failed on event %s", sub.fn, name, exc_info=True)


def emit_start(name: str, /, **payload: Any) -> None:
    """The start of a timed event: calls the `start` listeners matching `name`."""
    for sub in _subscriptions:
        if sub.start is None or not sub.matches(name):
            continue
        try:
            sub.start(name, dict(payload))
        except Exception:
            log.warning("subscriber %r failed on the start of %s", sub.start, name, exc_info=True)


@contextmanager
def instrument(name: str, /, **payload: Any) -> Iterator[dict[str, Any]]:
    """Time the block and emit `name` with `duration` (and `exception`, `error` if it raised).

    Yields the payload so the block can add keys before the event goes out (an `exception` the
    block caught and handled itself, say). Start listeners are called first.
    """
    emit_start(name, **payload)
    start = time.monotonic()
    try:
        yield payload
    except BaseException as exc:
        payload["exception"] = exc
        payload["error"] = type(exc).__name__
        raise
    finally:
        payload["duration"] = time.monotonic() - start
        emit(name, **payload)
