"""A worker's OpenTelemetry set-up for the tests (`--import tests.py.sample_otel`): the real
SDK with its in-memory exporter; every finished span is also written as a JSON line to the
file SAMPLE_OTEL_SPANS names, for the test process to read."""

from __future__ import annotations

import json
import os

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()


class WriteFinished(SpanProcessor):
    def on_end(self, span) -> None:
        with open(os.environ["SAMPLE_OTEL_SPANS"], "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {
                        "name": span.name,
                        "attributes": dict(span.attributes),
                        "status": span.status.status_code.name,
                        "exceptions": [e.attributes.get("exception.type") for e in span.events],
                    }
                )
                + "\n"
            )


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
provider.add_span_processor(WriteFinished())
trace.set_tracer_provider(provider)
