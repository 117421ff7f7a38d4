"""The read tools: each one call of the read layer, its answer redacted unless both gates open."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pgbus.mcp.server import (
    READ_ONLY,
    DeadLetterResult,
    DeadLettersResult,
    DeployTasksResult,
    EventsResult,
    HealthResult,
    JobResult,
    JobsResult,
    NoNul,
    ProcessesResult,
    QueueDetailResult,
    QueuesResult,
    RecurringResult,
    StatsResult,
    ThroughputResult,
    Tools,
    guarded,
)
from pydantic import Field

QueueName = Annotated[
    str, Field(min_length=1, max_length=255, description="physical queue name"), NoNul
]
MsgId = Annotated[int, Field(ge=1, le=2**63 - 1, description="the message id")]
PageNo = Annotated[int, Field(description="page number, from 1 (clamped to the 10,000 cap)")]
PerPage = Annotated[int, Field(description="rows per page (clamped to 1..100)")]
Include = Annotated[
    bool,
    Field(description="show payloads, if the server allows them (else they stay [redacted])"),
]
Period = Annotated[str, Field(description="1h, 24h, 7d or 30d"), NoNul]
Recent = Annotated[int, Field(description="newest pending/dead events and claims shown (0..100)")]


def register(server: MCPServer, t: Tools) -> None:
    def tool(name: str, title: str, description: str):
        return server.tool(name=name, title=title, description=description, annotations=READ_ONLY)

    @tool(
        "pgbus_health",
        "Health verdict",
        "Start here: OK, DEGRADED or STALLED with the reasons and a summary (queues, backlog, "
        "workers, stalled and stale processes, dead letters, oldest open transaction).",
    )
    @guarded
    def pgbus_health() -> HealthResult:
        return t.health()

    @tool(
        "pgbus_queues",
        "Queues",
        "Every queue with depth, visible, scheduled, in-flight, unclaimed, oldest message age, "
        "max read count, paused and whether a worker drains it (counts above 1,000 estimated).",
    )
    @guarded
    def pgbus_queues() -> QueuesResult:
        return t.queues()

    @tool(
        "pgbus_events",
        "Event bus",
        "Subscribers (pattern, queue, handlers when known), each event queue's pending and dead "
        "counts, the newest pending and dead events (routing key, event id, read count, error "
        "class) and the idempotent handlers' processed-event claims. Payloads redacted.",
    )
    @guarded
    def pgbus_events(recent: Recent = 25, include_payloads: Include = False) -> EventsResult:
        return t.events(recent, include_payloads)

    @tool(
        "pgbus_queue_detail",
        "One queue",
        "One queue's figures with its pause and its tables' health (live/dead tuples, vacuum).",
    )
    @guarded
    def pgbus_queue_detail(name: QueueName) -> QueueDetailResult:
        return t.queue_detail(name)

    @tool(
        "pgbus_processes",
        "Processes",
        "Workers, dispatchers and schedulers with their heartbeat age and status "
        "(healthy, stalled, stale) and jobs per minute.",
    )
    @guarded
    def pgbus_processes() -> ProcessesResult:
        return t.processes()

    @tool(
        "pgbus_jobs",
        "Enqueued jobs",
        "Messages in one queue, or every non-dead-letter queue, newest first. Paged "
        "(per_page at most 100; total capped at 10,000 with has_more).",
    )
    @guarded
    def pgbus_jobs(
        queue: QueueName | None = None,
        page: PageNo = 1,
        per_page: PerPage = 25,
        include_payloads: Include = False,
    ) -> JobsResult:
        return t.jobs(queue, page, per_page, include_payloads)

    @tool(
        "pgbus_job_detail",
        "One job",
        "One message of a queue with its failure (error class, message, backtrace) if it failed.",
    )
    @guarded
    def pgbus_job_detail(
        queue: QueueName, msg_id: MsgId, include_payloads: Include = False
    ) -> JobResult:
        return t.job_detail(queue, msg_id, include_payloads)

    @tool(
        "pgbus_dlq",
        "Dead letters",
        "Dead-lettered messages over every _dlq queue (or one), newest first. Paged "
        "(per_page at most 100; total capped at 10,000 with has_more).",
    )
    @guarded
    def pgbus_dlq(
        queue: QueueName | None = None,
        page: PageNo = 1,
        per_page: PerPage = 25,
        include_payloads: Include = False,
    ) -> DeadLettersResult:
        return t.dlq(queue, page, per_page, include_payloads)

    @tool(
        "pgbus_dlq_detail",
        "One dead letter",
        "One dead-lettered message. Pass queue (its _dlq queue): without it every dead-letter "
        "queue is searched and an id found in more than one is refused as ambiguous.",
    )
    @guarded
    def pgbus_dlq_detail(
        msg_id: MsgId, queue: QueueName | None = None, include_payloads: Include = False
    ) -> DeadLetterResult:
        return t.dlq_detail(msg_id, queue, include_payloads)

    @tool(
        "pgbus_throughput",
        "Throughput",
        "Jobs per bucket (succeeded, failed, dead-lettered, latency p50/p95) over a period: "
        "1h (1-minute buckets), 24h, 7d or 30d.",
    )
    @guarded
    def pgbus_throughput(period: Period = "1h") -> ThroughputResult:
        return t.throughput(period)

    @tool(
        "pgbus_stats",
        "Job outcomes",
        "Status counts, enqueue latency and run duration percentiles over a period "
        "(1h, 24h, 7d or 30d).",
    )
    @guarded
    def pgbus_stats(period: Period = "1h") -> StatsResult:
        return t.stats(period)

    @tool(
        "pgbus_recurring",
        "Recurring tasks",
        "Recurring tasks with their schedule in words, next and last run. Every task, or one "
        "page when page or per_page is given (per_page at most 100, total capped at 10,000).",
    )
    @guarded
    def pgbus_recurring(
        page: PageNo | None = None, per_page: PerPage | None = None
    ) -> RecurringResult:
        return t.recurring(page, per_page)

    @tool(
        "pgbus_deploy_tasks",
        "Deploy tasks",
        "Deploy tasks with their state for the fleet's revision, their latest runs, and the "
        "rollover status of the fleet.",
    )
    @guarded
    def pgbus_deploy_tasks() -> DeployTasksResult:
        return t.deploy_tasks()
