"""The MCP server: read tools over the dashboard's read layer, and (opt-in) workflow write
tools over the same SQL actions. It has no SQL of its own and no arbitrary-query tool."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pgbus.mcp.redact import shown
from pydantic import AfterValidator
from typing_extensions import TypedDict

from pgbus.config import settings
from pgbus.data import DataSource
from pgbus.serialization import NUL_REFUSAL

log = logging.getLogger("pgbus.mcp")

MAX_PER_PAGE = 100
TOTAL_CAP = 10_000
PERIODS = ("1h", "24h", "7d", "30d")
# What a client sees when a read fails for a reason of ours (the log has the error).
READ_FAILED = "pgbus could not answer that: see the server's log"


def _no_nul(value: Any) -> Any:
    if isinstance(value, str) and "\x00" in value:
        raise ValueError(f"the text {NUL_REFUSAL}")
    return value


# On every free-text parameter: a NUL character is refused as bad input, never sent to SQL.
NoNul = AfterValidator(_no_nul)

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

INSTRUCTIONS = """pgbus diagnostics: a job queue and durable workflows inside PostgreSQL (PGMQ).
Start with pgbus_health (OK / DEGRADED / STALLED and why), then drill in: pgbus_queues and
pgbus_queue_detail for backlog, pgbus_processes for workers and their heartbeats, pgbus_jobs /
pgbus_job_detail for enqueued messages, pgbus_dlq / pgbus_dlq_detail for dead letters,
pgbus_throughput / pgbus_stats for recent outcomes, pgbus_recurring and pgbus_deploy_tasks for
scheduled work, pgbus_workflows_attention, pgbus_workflows and pgbus_workflow for workflow
runs, and pgbus_workflow_definitions and pgbus_workflow_stats for each workflow class's figures
over a window (1h, 24h, 7d, 30d). Lists are paged: per_page at most 100, total capped at 10,000 with has_more.
The read tools change nothing and there is no raw-SQL tool. Message bodies, headers, job and
workflow arguments, step outputs, signal payloads and error text come back as "[redacted]"
unless the server allows payloads and the call passes include_payloads: true."""

WRITE_INSTRUCTIONS = """
Write tools are ON: pgbus_workflow_resume, pgbus_workflow_cancel, pgbus_workflow_skip_step,
pgbus_workflow_resume_at, pgbus_workflow_run_now and pgbus_workflow_signal act on one run per
call. Each needs a reason (recorded on the run's audit trail with your client's name); pass
expected_status (the status you read) so a run that moved on is left alone."""


class Page(TypedDict):
    page: int
    per_page: int
    total: int
    total_capped: bool
    has_more: bool


class HealthResult(TypedDict):
    status: str
    reasons: list[str]
    checked_at: str
    summary: dict[str, Any]


class QueuesResult(TypedDict):
    queues: list[dict[str, Any]]


class QueueDetailResult(TypedDict):
    queue: dict[str, Any]
    tables: list[dict[str, Any]]


class ProcessesResult(TypedDict):
    processes: list[dict[str, Any]]


class JobsResult(Page):
    queue: str | None
    jobs: list[dict[str, Any]]


class JobResult(TypedDict):
    job: dict[str, Any]


class DeadLettersResult(Page):
    queue: str | None
    messages: list[dict[str, Any]]


class DeadLetterResult(TypedDict):
    message: dict[str, Any]


class ThroughputResult(TypedDict):
    period: str
    bucket_seconds: int
    since: str
    throughput: list[dict[str, Any]]


class StatsResult(TypedDict):
    period: str
    since: str
    total: int
    status_counts: dict[str, int]
    latency_ms: dict[str, Any]
    duration_ms: dict[str, Any]


class RecurringResult(TypedDict):
    recurring_tasks: list[dict[str, Any]]
    total: int
    has_more: bool


class EventsResult(TypedDict):
    subscribers: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    processed: dict[str, Any]


class DeployTasksResult(TypedDict):
    fleet: dict[str, Any]
    deploy_tasks: list[dict[str, Any]]


F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """A tool body whose unexpected failure becomes a fixed tool error (logged here), so no
    exception text or traceback reaches the client."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception:
            log.exception("MCP tool %s failed", fn.__name__)
            raise ToolError(READ_FAILED) from None

    return call  # type: ignore[return-value]


def clamp_page(page: int, per_page: int) -> tuple[int, int]:
    """per_page within 1..100; page within 1..the last page the 10,000 cap reaches."""
    per_page = max(1, min(int(per_page), MAX_PER_PAGE))
    last = -(-TOTAL_CAP // per_page)
    return max(1, min(int(page), last)), per_page


def paged(rows: list[dict[str, Any]], page: int, per_page: int, total: int, capped: bool) -> Page:
    """`rows` is the page with at most one row more (which says there is more)."""
    offset = (page - 1) * per_page
    more = len(rows) > per_page and offset + per_page < TOTAL_CAP
    return {
        "page": page,
        "per_page": per_page,
        "total": min(total, TOTAL_CAP),
        "total_capped": capped or total > TOTAL_CAP,
        "has_more": more,
    }


class Tools:
    """The tools' bodies over one read layer; each answer is JSON-safe and redacted."""

    def __init__(self, data: DataSource, allow_payloads: bool) -> None:
        self.data = data
        self.allow_payloads = allow_payloads

    def show(self, value: Any, include_payloads: bool = False) -> Any:
        return shown(value, allowed=self.allow_payloads, requested=include_payloads)

    # -- health, queues, processes ----------------------------------------------------------

    def health(self) -> HealthResult:
        return self.show(self.data.health())

    def queues(self) -> QueuesResult:
        return {"queues": self.show(self.data.queues())}

    def queue_detail(self, name: str) -> QueueDetailResult:
        queue = self.data.queue(name)
        if queue is None:
            raise ToolError(f"Queue not found: {name[:200]}")
        tables = [t for t in self.data.table_health() if t["queue_name"] == name]
        return {"queue": self.show(queue), "tables": self.show(tables)}

    def processes(self) -> ProcessesResult:
        return {"processes": self.show(self.data.processes())}

    # -- messages ---------------------------------------------------------------------------

    def _page_of(self, dead_letters: bool, queue: str | None, offset: int, want: int) -> list:
        """Rows offset..offset+want of the newest-first list: a numbered page starts from the
        keyset cursor at its offset (pgbus.messages_cursor), so a deep page costs about what
        the first one does."""
        before = None
        if offset > 0:
            before = self.data.messages_cursor(dead_letters=dead_letters, queue=queue, skip=offset)
            if before is None:
                return []
        return self.data.messages(
            dead_letters=dead_letters, queue=queue, before=before, page_size=want
        )

    def _count(self, dead_letters: bool, queue: str | None) -> tuple[int, bool]:
        total, capped = 0, False
        for q in self.data.queues(count_limit=TOTAL_CAP):
            if bool(q["is_dlq"]) != dead_letters or (
                queue is not None and q["queue_name"] != queue
            ):
                continue
            total += int(q["depth"] or 0)
            capped = capped or bool(q["counts_capped"])
        return total, capped

    def _messages(
        self, dead_letters: bool, queue: str | None, page: int, per_page: int, include: bool
    ) -> tuple[list[dict[str, Any]], Page]:
        if queue is not None and self.data.queue(queue) is None:
            raise ToolError(f"Queue not found: {queue[:200]}")
        if queue is not None and dead_letters and not queue.endswith("_dlq"):
            raise ToolError(f"{queue[:200]} is not a dead-letter queue: use pgbus_jobs")
        if queue is not None and not dead_letters and queue.endswith("_dlq"):
            raise ToolError(f"{queue[:200]} is a dead-letter queue: use pgbus_dlq")
        page, per_page = clamp_page(page, per_page)
        rows = self._page_of(dead_letters, queue, (page - 1) * per_page, per_page + 1)
        total, capped = self._count(dead_letters, queue)
        info = paged(rows, page, per_page, total, capped)
        return self.show(rows[:per_page], include), info

    def jobs(self, queue: str | None, page: int, per_page: int, include: bool) -> JobsResult:
        rows, info = self._messages(False, queue, page, per_page, include)
        return {**info, "queue": queue, "jobs": rows}

    def job_detail(self, queue: str, msg_id: int, include: bool) -> JobResult:
        row = self.data.message(queue, msg_id) if self.data.queue(queue) else None
        if row is None:
            raise ToolError(f"Message {msg_id} not found in {queue[:200]}")
        return {"job": self.show(row, include)}

    def events(self, recent: int, include: bool) -> EventsResult:
        """The event bus, with each binding's handlers when this process subscribed them."""
        from pgbus import events

        overview = self.data.events(max(0, min(int(recent), 100)))
        handlers: dict[tuple[str, str], list[str]] = {}
        for s in events.subscriptions():
            handlers.setdefault((s.pattern, s.queue), []).append(s.handler.handler_name)
        for sub in overview["subscribers"]:
            sub["handlers"] = handlers.get((sub["pattern"], sub["queue"]), [])
        return self.show(overview, include)

    def dlq(self, queue: str | None, page: int, per_page: int, include: bool) -> DeadLettersResult:
        rows, info = self._messages(True, queue, page, per_page, include)
        return {**info, "queue": queue, "messages": rows}

    def dlq_detail(self, msg_id: int, queue: str | None, include: bool) -> DeadLetterResult:
        if queue is not None:
            if not queue.endswith("_dlq") or self.data.queue(queue) is None:
                raise ToolError(f"Dead-letter queue not found: {queue[:200]}")
            names = [queue]
        else:
            names = [n for n in self.data.queue_names() if n.endswith("_dlq")]
        found = [r for r in (self.data.message(n, msg_id) for n in names) if r is not None]
        if not found:
            raise ToolError(f"Dead letter {msg_id} not found")
        if len(found) > 1:
            where = ", ".join(r["queue_name"] for r in found)
            raise ToolError(f"Dead letter {msg_id} is ambiguous ({where}): pass queue")
        return {"message": self.show(found[0], include)}

    # -- outcomes ---------------------------------------------------------------------------

    def _insights(self, period: str) -> dict[str, Any]:
        if period not in PERIODS:
            raise ToolError(f"period is one of {', '.join(PERIODS)}")
        return self.show(self.data.job_insights(period))

    def throughput(self, period: str) -> ThroughputResult:
        i = self._insights(period)
        return {
            "period": i["period"],
            "bucket_seconds": i["bucket_seconds"],
            "since": i["since"],
            "throughput": i["buckets"],
        }

    def stats(self, period: str) -> StatsResult:
        i = self._insights(period)
        return {k: i[k] for k in StatsResult.__annotations__}  # type: ignore[return-value]

    # -- scheduled work ---------------------------------------------------------------------

    def recurring(self, page: int | None, per_page: int | None) -> RecurringResult:
        if page is not None or per_page is not None:
            page, per_page = clamp_page(page or 1, per_page or 25)
        return self.show(self.data.recurring_overview(page, per_page))

    def deploy_tasks(self) -> DeployTasksResult:
        return self.show(self.data.deploy_tasks_overview())


def write_tools_enabled() -> bool:
    return bool(getattr(settings(), "mcp_write_tools", False))


def build_server(
    data: DataSource | None = None,
    *,
    allow_payloads: bool = False,
    write_tools: bool | None = None,
) -> MCPServer:
    """The pgbus MCP server. `allow_payloads` opens the server's gate for payloads (a call
    must still pass include_payloads). `write_tools` defaults to the mcp_write_tools setting,
    read now: off, the write tools are never built."""
    from pgbus.mcp import tools_insights, tools_read, tools_workflow

    writes = write_tools_enabled() if write_tools is None else bool(write_tools)
    server = MCPServer(
        name="pgbus",
        title="pgbus diagnostics",
        version=_version(),
        instructions=INSTRUCTIONS + (WRITE_INSTRUCTIONS if writes else ""),
    )
    tools = Tools(data or DataSource(), allow_payloads)
    tools_read.register(server, tools)
    tools_workflow.register_reads(server, tools)
    tools_insights.register(server, tools)
    if writes:
        tools_workflow.register_writes(server, tools)
    return server


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pgbus")
    except Exception:
        return "0"
