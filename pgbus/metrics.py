"""Metrics: instrumentation events turned into counters, gauges and histograms.

    pgbus.configure(metrics_backend="statsd", statsd_host="127.0.0.1", statsd_port=8125)
    install_from_settings()

Every backend has `increment(name, value, tags)`, `gauge(name, value, tags)` and
`histogram(name, value, tags)`. `MetricsSubscriber` maps events to those calls through
`HANDLERS`, the one table to extend when new events need metrics.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pgbus import instrumentation
from pgbus.config import settings
from pgbus.errors import ConfigurationError

try:
    import prometheus_client
except ImportError:  # an optional extra: only the prometheus backend needs it
    prometheus_client = None

log = logging.getLogger(__name__)

Tags = Mapping[str, Any]


class Backend(Protocol):
    def increment(self, name: str, value: float = 1, tags: Tags | None = None) -> None: ...
    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None: ...
    def histogram(self, name: str, value: float, tags: Tags | None = None) -> None: ...


class PrometheusBackend:
    """Metrics kept in a prometheus_client registry, for a scrape endpoint to expose.

    A metric's first use fixes its kind and label names (the sorted tag keys); a later call
    that disagrees is logged and dropped, because a metrics call must never break a job.
    """

    def __init__(self, registry: Any = None) -> None:
        if prometheus_client is None:
            raise ConfigurationError(
                "metrics_backend",
                "is 'prometheus' but prometheus_client is missing: pip install 'pgbus[metrics]'",
            )
        self.registry = registry if registry is not None else prometheus_client.CollectorRegistry()
        self._metrics: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self._lock = threading.Lock()

    def increment(self, name: str, value: float = 1, tags: Tags | None = None) -> None:
        # prometheus_client strips a trailing "_total" from the name and adds it back on exposition
        metric = self._series(prometheus_client.Counter, name, tags)
        if metric is not None:
            metric.inc(value)

    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None:
        metric = self._series(prometheus_client.Gauge, name, tags)
        if metric is not None:
            metric.set(value)

    def histogram(self, name: str, value: float, tags: Tags | None = None) -> None:
        metric = self._series(prometheus_client.Histogram, name, tags)
        if metric is not None:
            metric.observe(value)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return prometheus_client.generate_latest(self.registry)

    def _series(self, kind: type, name: str, tags: Tags | None) -> Any:
        tags = tags or {}
        labels = tuple(sorted(tags))
        with self._lock:
            if name not in self._metrics:
                self._metrics[name] = (self._create(kind, name, labels), labels)
            metric, fixed = self._metrics[name]
        if type(metric) is not kind or fixed != labels:
            log.warning(
                "dropped metric %s: it is a %s with labels %s, not a %s with labels %s",
                name,
                type(metric).__name__,
                fixed,
                kind.__name__,
                labels,
            )
            return None
        return metric.labels(**{k: str(v) for k, v in tags.items()}) if labels else metric

    def _create(self, kind: type, name: str, labels: tuple[str, ...]) -> Any:
        options: dict[str, Any] = {}
        if kind is prometheus_client.Histogram and name.endswith("_ms"):
            # the default buckets are for seconds: every millisecond value would land in +Inf
            options["buckets"] = [b * 1000 for b in prometheus_client.Histogram.DEFAULT_BUCKETS]
        return kind(name, name, labels, registry=self.registry, **options)


class StatsdBackend:
    """Metrics sent as UDP packets in the DogStatsD dialect, e.g. `name:1|c|#queue:default`.

    Send errors are logged at debug and dropped: UDP metrics are best effort by design.
    """

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.setblocking(False)  # a full send buffer must not stall a worker

    def increment(self, name: str, value: float = 1, tags: Tags | None = None) -> None:
        self._send(name, value, "c", tags)

    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None:
        self._send(name, value, "g", tags)

    def histogram(self, name: str, value: float, tags: Tags | None = None) -> None:
        if name.endswith("_seconds"):  # statsd timers are in milliseconds
            name, value = name.removesuffix("_seconds") + "_ms", value * 1000
        self._send(name, value, "ms", tags)

    def close(self) -> None:
        self._sock.close()

    def _send(self, name: str, value: float, kind: str, tags: Tags | None) -> None:
        number = f"{value:.6f}".rstrip("0").rstrip(".")
        packet = f"{name}:{number}|{kind}"
        if tags:
            packet += "|#" + ",".join(f"{k}:{v}" for k, v in sorted(tags.items()))
        try:
            self._sock.sendto(packet.encode(), self.address)
        except OSError:
            log.debug("statsd packet to %s:%s not sent: %s", *self.address, packet, exc_info=True)


Handler = Callable[[Backend, dict[str, Any]], None]


def _job_tags(p: dict[str, Any]) -> dict[str, Any]:
    return {"queue": p["queue"], "job_class": p["job_class"]}


def _job_count(status: str) -> Handler:
    def handle(backend: Backend, p: dict[str, Any]) -> None:
        backend.increment("pgbus_queue_job_count", 1, {**_job_tags(p), "status": status})

    return handle


def _message_count(metric: str, key: str | None) -> Handler:
    """Count messages per queue: 1 per event, or the payload's `key` (skipped when zero,
    so idle polling sends nothing)."""

    def handle(backend: Backend, p: dict[str, Any]) -> None:
        n = 1 if key is None else p[key]
        if n:
            backend.increment(metric, n, {"queue": p["queue"]})

    return handle


def _job_duration(backend: Backend, p: dict[str, Any]) -> None:
    backend.histogram("pgbus_job_duration_ms", p["duration"] * 1000, _job_tags(p))


def _event_tags(p: dict[str, Any]) -> dict[str, Any]:
    return {"handler": p.get("handler") or "", "routing_key": p.get("routing_key") or ""}


def _event_processed(backend: Backend, p: dict[str, Any]) -> None:
    """One execution of an event's handlers: its duration, and a count when it succeeded
    (a failed one is counted from pgbus.event_failed)."""
    backend.histogram("pgbus_event_duration_ms", p["duration"] * 1000, _event_tags(p))
    if "exception" not in p:
        backend.increment("pgbus_event_count", 1, {**_event_tags(p), "status": "processed"})


def _event_count(status: str) -> Handler:
    def handle(backend: Backend, p: dict[str, Any]) -> None:
        backend.increment("pgbus_event_count", 1, {**_event_tags(p), "status": status})

    return handle


def _workflow_step(backend: Backend, p: dict[str, Any]) -> None:
    tags = {"workflow_class": p["workflow_class"], "step": p["step"], "outcome": p["outcome"]}
    backend.histogram("pgbus_workflow_step_duration_seconds", p["duration"], tags)
    backend.increment("pgbus_workflow_steps_total", 1, tags)


def _workflow_count(metric: str, *keys: str) -> Handler:
    def handle(backend: Backend, p: dict[str, Any]) -> None:
        tags = {"workflow_class": p["workflow_class"]}
        tags.update({k: p[k] for k in keys if p.get(k) is not None})
        backend.increment(metric, 1, tags)

    return handle


def _workflow_gauge(backend: Backend, p: dict[str, Any]) -> None:
    for row in p["runs"]:
        backend.gauge(
            "pgbus_workflows",
            row["count"],
            {"workflow_class": row["workflow_class"], "status": row["status"]},
        )
    for row in p["stuck"]:
        backend.gauge(
            "pgbus_workflows_stuck",
            row["count"],
            {"workflow_class": row["workflow_class"], "reason": row["reason"]},
        )


def _task_enqueued(metric: str) -> Handler:
    def handle(backend: Backend, p: dict[str, Any]) -> None:
        backend.increment(metric, 1, {"task": p["task_key"], "class_name": p["class_name"]})

    return handle


HANDLERS: dict[str, Handler] = {
    "pgbus.recurring.enqueue": _task_enqueued("pgbus_recurring_enqueued"),
    "pgbus.deploy_task.enqueue": _task_enqueued("pgbus_deploy_task_enqueued"),
    "pgbus.workflow.step": _workflow_step,
    "pgbus.workflow_finished": _workflow_count("pgbus_workflows_finished_total"),
    "pgbus.workflow_cancelled": _workflow_count("pgbus_workflows_cancelled_total"),
    "pgbus.workflow_paused": _workflow_count("pgbus_workflows_paused_total", "error_class"),
    "pgbus.workflow.stall_detected": _workflow_count(
        "pgbus_workflow_stalls_total", "step", "detection"
    ),
    "pgbus.workflow.signal": _workflow_count("pgbus_workflow_signals_total", "name"),
    "pgbus.workflow.wait_timed_out": _workflow_count(
        "pgbus_workflow_wait_timeouts_total", "step", "action"
    ),
    "pgbus.workflow.gauge": _workflow_gauge,
    "pgbus.executor.execute": _job_duration,
    "pgbus.job_completed": _job_count("processed"),
    "pgbus.job_failed": _job_count("failed"),
    "pgbus.job_dead_lettered": _job_count("dead_lettered"),
    "pgbus.event_processed": _event_processed,
    "pgbus.event_failed": _event_count("failed"),
    "pgbus.event_dead_lettered": _event_count("dead_lettered"),
    "pgbus.client.send_message": _message_count("pgbus_messages_sent", None),
    "pgbus.client.send_batch": _message_count("pgbus_messages_sent", "size"),
    "pgbus.client.read_batch": _message_count("pgbus_messages_read", "count"),
}


class MetricsSubscriber:
    """Feeds a backend from instrumentation events, per `HANDLERS`."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._subscriptions: list[instrumentation.Subscription] = []

    def install(self) -> MetricsSubscriber:
        """Subscribe to every event in `HANDLERS`; a second call changes nothing."""
        if not self._subscriptions:
            self._subscriptions = [instrumentation.subscribe(e, self._handle) for e in HANDLERS]
        return self

    def uninstall(self) -> None:
        for sub in self._subscriptions:
            sub.unsubscribe()
        self._subscriptions = []

    def _handle(self, name: str, payload: dict[str, Any]) -> None:
        try:
            HANDLERS[name](self.backend, payload)
        except Exception:
            log.warning("metrics for event %s failed", name, exc_info=True)


_installed: MetricsSubscriber | None = None
_install_lock = threading.Lock()


def install_from_settings() -> MetricsSubscriber | None:
    """Start the backend named by `settings().metrics_backend`, once; None if there is none.

    Later calls return the same subscriber, even if the settings changed: `uninstall()` first.
    """
    global _installed
    with _install_lock:
        if _installed is None:
            s = settings()
            if s.metrics_backend == "prometheus":
                _installed = MetricsSubscriber(PrometheusBackend()).install()
            elif s.metrics_backend == "statsd":
                backend = StatsdBackend(s.statsd_host, s.statsd_port)
                _installed = MetricsSubscriber(backend).install()
        return _installed


def uninstall() -> None:
    """Stop what `install_from_settings()` started (tests and reconfiguration use this)."""
    global _installed
    with _install_lock:
        if _installed is not None:
            _installed.uninstall()
            if isinstance(_installed.backend, StatsdBackend):
                _installed.backend.close()
            _installed = None


def current_backend() -> Backend | None:
    """The backend `install_from_settings()` installed, e.g. for a /metrics endpoint."""
    return _installed.backend if _installed is not None else None
