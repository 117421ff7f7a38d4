"""pgbus.otel with the real OpenTelemetry SDK and its in-memory exporter, through a real
Worker and Consumer (on threads of the test process) against a real PostgreSQL."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from psycopg.types.json import Jsonb

import pgbus
from pgbus import events, otel
from pgbus.instrumentation import emit, instrument
from tests.py.sample_workflows import ThreeSteps
from tests.py.support import count_effects, running_worker, wait_until
from tests.py.test_events import running_consumer

SEEN: list[tuple[str, int]] = []  # (the current span's name, its span id) inside user code


def current() -> None:
    span = trace.get_current_span()
    SEEN.append((getattr(span, "name", ""), span.get_span_context().span_id))


class Traced(pgbus.Job):
    def perform(self, key: str) -> None:
        current()
        with otel.install().tracer.start_as_current_span("inner"):
            pass
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('traced', %s)", (key,))
        current()  # the inner span ended: the job's is current again


class TracedBoom(pgbus.Job):
    max_retries = 0

    def perform(self) -> None:
        current()
        raise KeyError("boom")


@pgbus.subscribe("traced.#")
class TracedHandler(pgbus.Handler):
    def handle(self, event: pgbus.Event) -> None:
        current()
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('traced_event', 'e')")


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.uninstall()
    otel.install(tracer_provider=provider)
    SEEN.clear()
    yield exporter
    otel.uninstall()


def named(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_a_jobs_span_is_current_for_its_whole_execution(effects, spans):
    Traced.perform_later("k1")
    with running_worker():
        wait_until(lambda: named(spans, "Traced.perform"), what="the span")
    [span] = named(spans, "Traced.perform")
    assert [("Traced.perform", span.context.span_id)] * 2 == SEEN
    [inner] = named(spans, "inner")
    assert inner.parent.span_id == span.context.span_id
    a = span.attributes
    assert a["messaging.system"] == "pgmq" and a["messaging.destination.name"] == "pgbus_default"
    assert a["pgbus.job_class"] == Traced.job_name and a["pgbus.read_ct"] == 1
    assert a["messaging.message.id"].isdigit() and a["pgbus.queue_time_ms"] >= 0
    assert span.kind == trace.SpanKind.CONSUMER and span.status.status_code == StatusCode.UNSET
    # The completion committed inside the span: its write is there.
    assert count_effects(effects, "traced", "k1") == 1
    assert not span.events


def test_an_error_in_the_body_is_recorded_once(effects, spans):
    TracedBoom.perform_later()
    with running_worker():
        wait_until(lambda: named(spans, "TracedBoom.perform"), what="the span")
    [span] = named(spans, "TracedBoom.perform")
    assert span.status.status_code == StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in span.events] == ["KeyError"]
    assert [("TracedBoom.perform", span.context.span_id)] == SEEN
    assert len(spans.get_finished_spans()) == 1  # no second span for pgbus.job_failed


def test_an_unknown_class_and_bad_arguments_are_recorded_on_the_span(effects, spans):
    effects.execute("SELECT pgbus.ensure_queue('pgbus_default')")
    for message in (
        {"job_class": "gone.module:Vanished", "args": []},
        {"job_class": Traced.job_name, "args": [{"__pgbus__": "date", "v": "bad"}]},
    ):
        effects.execute("SELECT pgmq.send('pgbus_default', %s)", (Jsonb(message),))
    pgbus.configure(retry_backoff_base=60, retry_backoff_max=120)
    with running_worker():
        wait_until(lambda: len(spans.get_finished_spans()) == 2, what="two spans")
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert set(by_name) == {"Vanished.perform", "Traced.perform"}
    [unknown] = by_name["Vanished.perform"].events
    assert unknown.attributes["exception.type"].endswith("UnknownJobClass")
    assert len(by_name["Traced.perform"].events) == 1
    assert all(s.status.status_code == StatusCode.ERROR for s in by_name.values())
    assert SEEN == []  # no body ran


def test_a_handlers_span(effects, spans):
    events.bind_all()
    pgbus.publish("traced.one", {"x": 1})
    with running_consumer(["traced.#"]):
        wait_until(lambda: named(spans, "TracedHandler.handle"), what="the span")
    [span] = named(spans, "TracedHandler.handle")
    assert [("TracedHandler.handle", span.context.span_id)] == SEEN
    assert span.attributes["pgbus.routing_key"] == "traced.one"
    assert span.attributes["pgbus.handler"] == TracedHandler.handler_name
    assert span.attributes["messaging.destination.name"] == "pgbus_ev_traced_handler"


def test_a_workflow_steps_span(users, spans):
    ThreeSteps.start(n="w")
    with running_worker(["workflows"]):
        try:
            wait_until(lambda: len(named(spans, "ThreeSteps.three")) == 1, what="three steps")
        except AssertionError:
            raise AssertionError([s.name for s in spans.get_finished_spans()]) from None
    [one] = named(spans, "ThreeSteps.one")
    assert one.attributes["pgbus.step"] == "one" and one.attributes["pgbus.workflow_id"]
    assert one.attributes["pgbus.attempt"] == 1


def test_a_current_span_of_the_same_name_is_reused_and_an_outer_one_restored(spans):
    tracer = otel.install().tracer
    with tracer.start_as_current_span("Mine.perform") as mine:
        with pytest.raises(ValueError), instrument("pgbus.executor.execute", job_class="m:Mine"):
            raise ValueError("x")
        assert trace.get_current_span() is mine  # reused, still open: its owner ends it
        assert not named(spans, "Mine.perform")
    [span] = named(spans, "Mine.perform")
    assert [e.attributes["exception.type"] for e in span.events] == ["ValueError"]
    with tracer.start_as_current_span("outer") as outer:
        with instrument("pgbus.executor.execute", job_class="m:Nested"):
            assert trace.get_current_span().name == "Nested.perform"
        assert trace.get_current_span() is outer
    [nested] = named(spans, "Nested.perform")
    assert nested.parent.span_id == outer.get_span_context().span_id


def test_a_failure_outside_an_execution_gets_a_span_of_its_own(spans):
    emit(
        "pgbus.event_failed",
        queue="pgbus_ev_x",
        queue_name="ev_x",
        handler="app:Mailer",
        routing_key="a.b",
        msg_id=3,
        read_ct=1,
        error="DeadLetterMoveFailed",
        exception=RuntimeError("move failed"),
    )
    [span] = spans.get_finished_spans()
    assert span.name == "Mailer.handle" and span.status.status_code == StatusCode.ERROR
    assert span.attributes["pgbus.routing_key"] == "a.b"
    assert [e.attributes["exception.type"] for e in span.events] == ["RuntimeError"]


@pytest.mark.slow
def test_a_worker_process_installs_tracing_by_itself(db_url, effects, procs, tmp_path):
    import json

    from tests.py.sample_jobs import Poison, Record
    from tests.py.support import worker_process

    out = tmp_path / "spans.jsonl"
    Record.perform_later("in a process")
    Poison.perform_later("p")
    w = worker_process(
        db_url,
        "--import",
        "tests.py.sample_otel",
        env={"SAMPLE_OTEL_SPANS": str(out), "PGBUS_RETRY_BACKOFF_BASE": "60"},
    )
    procs.append(w)
    wait_until(lambda: out.exists() and len(out.read_text().splitlines()) >= 2, timeout=30)
    spans = {s["name"]: s for s in map(json.loads, out.read_text().splitlines())}
    assert spans["Record.perform"]["status"] == "UNSET"
    assert spans["Record.perform"]["attributes"]["pgbus.job_class"] == Record.job_name
    assert spans["Poison.perform"]["status"] == "ERROR"
    assert len(spans["Poison.perform"]["exceptions"]) == 1


def test_a_step_that_raised_records_its_exception(users, spans):
    from tests.py.sample_workflows import Flaky

    Flaky.start()
    with running_worker(["workflows"]):
        wait_until(lambda: named(spans, "Flaky.charge"), what="the step's span")
    [span] = named(spans, "Flaky.charge")
    assert span.status.status_code == StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in span.events] == ["TimeoutError"]


def test_an_interruption_is_recorded_on_the_span(spans):
    with (
        pytest.raises(KeyboardInterrupt),
        instrument("pgbus.executor.execute", job_class="m:Stopped"),
    ):
        raise KeyboardInterrupt
    [span] = named(spans, "Stopped.perform")
    assert [e.attributes["exception.type"] for e in span.events] == ["KeyboardInterrupt"]
    assert span.status.status_code == StatusCode.ERROR
    assert trace.get_current_span() is trace.INVALID_SPAN  # detached: nothing stays current
