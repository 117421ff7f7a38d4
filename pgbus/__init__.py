"""pgbus: durable workflows and a job queue inside PostgreSQL, on PGMQ."""

from pgbus.batches import Batch, batch
from pgbus.config import Settings, configure, settings
from pgbus.errors import (
    ConfigurationError,
    DatabaseUnreachable,
    PgbusError,
    RetriesExhausted,
    SchemaNotReady,
    StepStalled,
    SweepRepairFailed,
)
from pgbus.events import (
    Event,
    Handler,
    InvalidEvent,
    InvalidRoutingKey,
    InvalidTopicPattern,
    Published,
    publish,
    subscribe,
)
from pgbus.jobs import Job, JobOptions, UnknownJobClass, current_job, job
from pgbus.queues import InvalidQueueName
from pgbus.serialization import SerializationError
from pgbus.workflow import SignalMatcher, Workflow, fan_out, on_exception, removed_step, step

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "ConfigurationError",
    "DatabaseUnreachable",
    "Event",
    "Handler",
    "InvalidEvent",
    "InvalidQueueName",
    "InvalidRoutingKey",
    "InvalidTopicPattern",
    "Job",
    "JobOptions",
    "PgbusError",
    "Published",
    "RetriesExhausted",
    "SchemaNotReady",
    "SerializationError",
    "Settings",
    "SignalMatcher",
    "StepStalled",
    "SweepRepairFailed",
    "UnknownJobClass",
    "Workflow",
    "batch",
    "configure",
    "current_job",
    "fan_out",
    "job",
    "on_exception",
    "publish",
    "removed_step",
    "settings",
    "step",
    "subscribe",
]
