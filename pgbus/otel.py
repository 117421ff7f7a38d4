"""OpenTelemetry tracing, the optional extra `pgbus[otel]`: one span per execution of a job,
an event's handlers or a workflow step, current for the whole execution.

    pgbus.otel.install()                       # the global tracer provider
    pgbus.otel.install(tracer_provider=tp)     # or one of your own

`pgbus worker`, `pgbus consumer` and `pgbus start` install it by themselves when the
`opentelemetry` package is importable (configure your provider and exporter in a module you
pass with --import).

The span opens on the start of `pgbus.executor.execute` / `pgbus.event_processed`, which the
worker emits before it decodes the message, and closes on their finish, after the completion
or the archive: `trace.get_current_span()` inside `perform` or `handle` is that span, and
anything user code starts becomes its child. It records the exception that ended the
execution once (an unknown job class, undecodable arguments, an error in the body, an
interruption). A failure announced outside any execution (`pgbus.job_failed` /
`pgbus.event_failed` with no pgbus span current) gets a span of its own with the same name and
attributes. A span of the same name already current is reused and left to its owner; a span
opened inside another restores the outer one when it ends.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from pgbus import instrumentation

EXECUTIONS = ("pgbus.executor.execute", "pgbus.event_processed")
FAILURES = ("pgbus.job_failed", "pgbus.event_failed")

_local = threading.local()  # this thread's open executions: a stack of (span, token, owned)


def _stack() -> list[tuple[Any, Any, bool]]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _short(name: str | None) -> str:
    """'app.jobs:SendReceipt' -> 'SendReceipt'; 'app.flows.Signup' -> 'Signup'."""
    text = str(name or "")
    return (text.rpartition(":") if ":" in text else text.rpartition("."))[2] or "(unknown)"


def span_name(event: str, p: dict[str, Any]) -> str:
    if event.startswith("pgbus.event_"):
        return (
            f"{_short(p.get('handler'))}.handle"
            if p.get("handler")
            else f"{p.get('queue_name')}.handle"
        )
    if p.get("workflow_class") and p.get("step"):
        return f"{_short(p['workflow_class'])}.{p['step']}"
    return f"{_short(p.get('job_class'))}.perform"


def attributes(event: str, p: dict[str, Any]) -> dict[str, Any]:
    """Messaging semantic conventions where they fit, pgbus.* for the rest (None dropped)."""
    out: dict[str, Any] = {
        "messaging.system": "pgmq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": p.get("queue"),
        "messaging.message.id": None if p.get("msg_id") is None else str(p["msg_id"]),
        "pgbus.read_ct": p.get("read_ct"),
        "pgbus.attempt": p.get("attempt") or p.get("read_ct"),
    }
    if event.startswith("pgbus.event_"):
        out.update(
            {
                "pgbus.handler": p.get("handler"),
                "pgbus.routing_key": p.get("routing_key"),
                "pgbus.event_id": p.get("event_id"),
                "messaging.message.conversation_id": p.get("event_id"),
            }
        )
    else:
        out.update(
            {
                "pgbus.job_class": p.get("job_class"),
                "pgbus.job_id": p.get("job_id"),
                "pgbus.workflow_class": p.get("workflow_class"),
                "pgbus.workflow_id": p.get("workflow_id"),
                "pgbus.step": p.get("step"),
            }
        )
    enqueued = p.get("enqueued_at")
    if isinstance(enqueued, datetime):
        waited = datetime.now(UTC) - enqueued
        out["pgbus.queue_time_ms"] = max(0, int(waited.total_seconds() * 1000))
    return {k: v for k, v in out.items() if v is not None}


class Tracing:
    """The installed subscriptions; `uninstall()` removes them."""

    def __init__(self, tracer_provider: Any = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("pgbus")
        self._subs: list[instrumentation.Subscription] = []

    def install(self) -> Tracing:
        if not self._subs:
            self._subs = [
                *(
                    instrumentation.subscribe(e, self._finish, start=self._start)
                    for e in EXECUTIONS
                ),
                *(instrumentation.subscribe(e, self._failure) for e in FAILURES),
            ]
        return self

    def uninstall(self) -> None:
        for sub in self._subs:
            sub.unsubscribe()
        self._subs = []

    def _start(self, event: str, p: dict[str, Any]) -> None:
        name = span_name(event, p)
        current = trace.get_current_span()
        if current.is_recording() and getattr(current, "name", None) == name:
            _stack().append((current, None, False))  # reused: its owner ends it
            return
        span = self.tracer.start_span(name, kind=SpanKind.CONSUMER, attributes=attributes(event, p))
        token = context.attach(trace.set_span_in_context(span))
        _stack().append((span, token, True))

    def _finish(self, event: str, p: dict[str, Any]) -> None:
        stack = _stack()
        if not stack:
            return
        span, token, owned = stack.pop()
        exc = p.get("exception")
        if isinstance(exc, BaseException):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        if owned:
            context.detach(token)
            span.end()

    def _failure(self, event: str, p: dict[str, Any]) -> None:
        """A failure announced outside an execution: a span of its own."""
        if _stack():
            return  # (the execution's span records it when it finishes)
        kind = (
            "pgbus.event_processed" if event == "pgbus.event_failed" else "pgbus.executor.execute"
        )
        span = self.tracer.start_span(
            span_name(kind, p), kind=SpanKind.CONSUMER, attributes=attributes(kind, p)
        )
        exc = p.get("exception")
        if isinstance(exc, BaseException):
            span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, str(p.get("error") or "error")))
        span.end()


_installed: Tracing | None = None
_install_lock = threading.Lock()


def install(tracer_provider: Any = None) -> Tracing:
    """Start tracing pgbus executions; a second call answers the installed one (uninstall()
    first to change the provider)."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = Tracing(tracer_provider).install()
        return _installed


def uninstall() -> None:
    global _installed
    with _install_lock:
        if _installed is not None:
            _installed.uninstall()
            _installed = None
