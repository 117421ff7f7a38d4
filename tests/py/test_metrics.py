import logging
import socket

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry

from pgbus import metrics
from pgbus.config import configure, reset
from pgbus.instrumentation import emit, has_subscribers
from pgbus.metrics import MetricsSubscriber, PrometheusBackend, StatsdBackend

JOB = {"queue": "default", "job_class": "SendEmail", "job_id": "j1", "msg_id": 1}


@pytest.fixture(autouse=True)
def _clean():
    reset()
    yield
    metrics.uninstall()
    reset()


@pytest.fixture
def udp():
    """A real UDP socket standing in for the statsd agent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(2)
    yield sock
    sock.close()


@pytest.fixture
def statsd(udp):
    backend = StatsdBackend("127.0.0.1", udp.getsockname()[1])
    yield backend
    backend.close()


def received(sock) -> str:
    return sock.recv(4096).decode()


class ExplodingBackend:
    def increment(self, name, value=1, tags=None):
        raise RuntimeError("metrics down")

    gauge = histogram = increment


# --- Prometheus


def test_prometheus_exposes_counters_gauges_and_histograms():
    backend = PrometheusBackend(CollectorRegistry())
    tags = {"queue": "default", "job_class": "SendEmail"}
    backend.increment("pgbus_queue_job_count", 2, {**tags, "status": "processed"})
    backend.increment("pgbus_workflow_steps_total", 1, {"workflow": "Signup"})
    backend.gauge("pgbus_queue_depth", 7, {"queue": "default"})
    backend.histogram("pgbus_job_duration_ms", 120, tags)

    text = backend.exposition().decode()
    lines = text.splitlines()
    assert (
        'pgbus_queue_job_count_total{job_class="SendEmail",queue="default",status="processed"} 2.0'
        in lines
    )
    assert 'pgbus_workflow_steps_total{workflow="Signup"} 1.0' in lines
    assert "_total_total" not in text
    assert 'pgbus_queue_depth{queue="default"} 7.0' in lines
    # millisecond histograms get millisecond buckets
    assert (
        'pgbus_job_duration_ms_bucket{job_class="SendEmail",le="100.0",queue="default"} 0.0'
        in lines
    )
    assert (
        'pgbus_job_duration_ms_bucket{job_class="SendEmail",le="250.0",queue="default"} 1.0'
        in lines
    )
    assert 'pgbus_job_duration_ms_sum{job_class="SendEmail",queue="default"} 120.0' in lines


def test_prometheus_owns_a_fresh_registry_by_default():
    backend = PrometheusBackend()
    assert isinstance(backend.registry, CollectorRegistry)
    assert backend.registry is not prometheus_client.REGISTRY
    backend.gauge("pgbus_untagged", 3)
    assert "pgbus_untagged 3.0" in backend.exposition().decode().splitlines()


def test_prometheus_drops_calls_with_other_label_keys_or_kind(caplog):
    backend = PrometheusBackend(CollectorRegistry())
    backend.increment("pgbus_messages_sent", 1, {"queue": "default"})
    with caplog.at_level(logging.WARNING, logger="pgbus.metrics"):
        backend.increment("pgbus_messages_sent", 1, {"queue": "default", "extra": "x"})
        backend.increment("pgbus_messages_sent", 1)
        backend.gauge("pgbus_messages_sent", 5, {"queue": "default"})

    assert len(caplog.records) == 3
    assert all("pgbus_messages_sent" in r.getMessage() for r in caplog.records)
    value = backend.registry.get_sample_value("pgbus_messages_sent_total", {"queue": "default"})
    assert value == 1.0


# --- StatsD


def test_statsd_wire_format(statsd, udp):
    statsd.increment("pgbus_messages_sent", 3, {"queue": "default"})
    assert received(udp) == "pgbus_messages_sent:3|c|#queue:default"

    statsd.increment("pgbus_ticks")
    assert received(udp) == "pgbus_ticks:1|c"

    statsd.gauge("pgbus_queue_depth", 12.5, {"queue": "mail", "app": "shop"})
    assert received(udp) == "pgbus_queue_depth:12.5|g|#app:shop,queue:mail"

    statsd.histogram("pgbus_job_duration_ms", 42.5, {"queue": "default"})
    assert received(udp) == "pgbus_job_duration_ms:42.5|ms|#queue:default"


def test_statsd_sends_seconds_histograms_as_millisecond_timers(statsd, udp):
    statsd.histogram("pgbus_workflow_step_duration_seconds", 0.25, {"workflow": "Signup"})
    assert received(udp) == "pgbus_workflow_step_duration_ms:250|ms|#workflow:Signup"

    statsd.histogram("pgbus_lag_seconds", 0.0015)
    assert received(udp) == "pgbus_lag_ms:1.5|ms"


def test_statsd_swallows_socket_errors(udp):
    backend = StatsdBackend("127.0.0.1", udp.getsockname()[1])
    backend.close()
    backend.increment("pgbus_messages_sent")  # the closed socket raises OSError inside


# --- MetricsSubscriber


def test_subscriber_turns_events_into_prometheus_metrics():
    backend = PrometheusBackend(CollectorRegistry())
    subscriber = MetricsSubscriber(backend).install()
    subscriber.install()  # a second install must not double-count
    try:
        emit("pgbus.executor.execute", **JOB, read_ct=1, enqueued_at=None, duration=0.25)
        emit("pgbus.job_completed", **JOB, duration=0.25)
        emit("pgbus.job_completed", **JOB, duration=0.1)
        emit("pgbus.job_failed", **JOB, read_ct=1, error="ValueError", exception=ValueError())
        emit("pgbus.job_dead_lettered", **JOB, read_ct=6, error="ValueError")
        emit("pgbus.client.send_message", queue="default", duration=0.001)
        emit("pgbus.client.send_batch", queue="default", size=4, duration=0.002)
        emit("pgbus.client.read_batch", queue="default", qty=10, count=3, duration=0.003)
        emit("pgbus.client.read_batch", queue="default", qty=10, count=0, duration=0.003)
    finally:
        subscriber.uninstall()
    emit("pgbus.job_completed", **JOB, duration=0.1)  # after uninstall: not counted

    def sample(name, **labels):
        return backend.registry.get_sample_value(name, labels)

    job = {"queue": "default", "job_class": "SendEmail"}
    assert sample("pgbus_job_duration_ms_sum", **job) == 250.0
    assert sample("pgbus_job_duration_ms_count", **job) == 1.0
    assert sample("pgbus_queue_job_count_total", **job, status="processed") == 2.0
    assert sample("pgbus_queue_job_count_total", **job, status="failed") == 1.0
    assert sample("pgbus_queue_job_count_total", **job, status="dead_lettered") == 1.0
    assert sample("pgbus_messages_sent_total", queue="default") == 5.0
    assert sample("pgbus_messages_read_total", queue="default") == 3.0
    assert not has_subscribers("pgbus.job_completed")


def test_a_failing_backend_never_reaches_the_emitter(caplog):
    subscriber = MetricsSubscriber(ExplodingBackend()).install()
    try:
        with caplog.at_level(logging.WARNING, logger="pgbus"):
            emit("pgbus.job_completed", **JOB, duration=0.1)
    finally:
        subscriber.uninstall()

    [warning] = caplog.records
    assert "pgbus.job_completed" in warning.getMessage()
    assert warning.exc_info[0] is RuntimeError


# --- install_from_settings


def test_nothing_is_installed_without_a_backend_setting():
    assert metrics.install_from_settings() is None
    assert metrics.current_backend() is None


def test_install_from_settings_sends_statsd_packets(udp):
    configure(metrics_backend="statsd", statsd_host="127.0.0.1", statsd_port=udp.getsockname()[1])
    subscriber = metrics.install_from_settings()

    assert metrics.install_from_settings() is subscriber
    assert isinstance(metrics.current_backend(), StatsdBackend)
    emit("pgbus.client.read_batch", queue="default", qty=10, count=0, duration=0.01)
    emit("pgbus.executor.execute", **JOB, read_ct=1, enqueued_at=None, duration=0.25)
    # the idle read sent nothing, so the first packet is the job's
    assert received(udp) == "pgbus_job_duration_ms:250|ms|#job_class:SendEmail,queue:default"

    metrics.uninstall()
    assert metrics.current_backend() is None
    assert not has_subscribers("pgbus.executor.execute")


def test_install_from_settings_keeps_one_prometheus_backend():
    configure(metrics_backend="prometheus")
    subscriber = metrics.install_from_settings()

    backend = metrics.current_backend()
    assert isinstance(backend, PrometheusBackend)
    assert metrics.install_from_settings() is subscriber
    emit("pgbus.client.send_message", queue="default", duration=0.001)
    assert 'pgbus_messages_sent_total{queue="default"} 1.0' in backend.exposition().decode()
