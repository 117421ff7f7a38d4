"""Workflow tools: the read tools (one run, the runs list, the runs needing attention) and the
opt-in write tools, one audited verb on one run per call."""

from __future__ import annotations

import logging
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired
from uuid import UUID

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pgbus.mcp.redact import REDACTED
from pgbus.mcp.server import (
    READ_ONLY,
    TOTAL_CAP,
    NoNul,
    Page,
    Tools,
    clamp_page,
    guarded,
    paged,
)
from pydantic import Field, StringConstraints
from typing_extensions import TypedDict

from pgbus.serialization import SerializationError
from pgbus.workflow.errors import InvalidSignalPayload, PayloadTooLarge
from pgbus.workflow.payloads import encode_signal_payload

log = logging.getLogger("pgbus.mcp")

RunStatus = Literal["ready", "running", "waiting", "paused", "finished", "cancelled"]
WorkflowId = Annotated[UUID, Field(description="the run's id (a UUID)")]
Reason = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=500),
    Field(description="why (1-500 characters), recorded on the run's audit trail"),
    NoNul,
]
Expected = Annotated[
    RunStatus | None,
    Field(description="the status you read: a run that moved on is left alone (ok: false)"),
]
Name255 = Annotated[str, StringConstraints(min_length=1, max_length=255), NoNul]
Include = Annotated[
    bool,
    Field(description="show payloads, if the server allows them (else they stay [redacted])"),
]

# Audit events whose reason is error text rather than an operator's words.
ERROR_TEXT_EVENTS = frozenset({"repair_failed"})
# What a client is told when an action failed for a reason of ours (the log has the error).
UNEXPECTED = "Not done: an unexpected error (it is in the pgbus log)"
ACTOR_NAME_MAX = 100


class WorkflowResult(TypedDict):
    run: dict[str, Any]
    arguments: Any
    available_actions: list[str]
    attempts: list[dict[str, Any]]
    pauses: list[dict[str, Any]]
    signals: list[dict[str, Any]]
    events: list[dict[str, Any]]
    batches: list[dict[str, Any]]
    steps: list[str]
    rerun_of: str | None
    reruns: list[dict[str, Any]]
    max_payload_size: int
    now: str


class WorkflowsResult(Page):
    status: str
    runs: list[dict[str, Any]]


class AttentionResult(TypedDict):
    groups: list[dict[str, Any]]
    stuck_runs: int


ListStatus = Annotated[
    Literal["ongoing", "all", "ready", "running", "waiting", "paused", "finished", "cancelled"],
    Field(description="ongoing (not finished or cancelled, the default), all, or one status"),
]
Filter = Annotated[str | None, StringConstraints(max_length=255), NoNul]
When = Annotated[
    datetime | None,
    Field(description="an ISO 8601 time such as 2026-12-01T09:30:00Z (no zone: UTC)"),
]


class ActionResult(TypedDict):
    ok: bool
    reason: str
    workflow: WorkflowResult | None
    available_actions: NotRequired[list[str]]
    code: NotRequired[str]
    status: NotRequired[str | None]


def workflow_detail(t: Tools, workflow_id: UUID, include: bool = False) -> WorkflowResult | None:
    """The run as its dashboard page shows it (pgbus.workflow_detail): its list row, arguments,
    attempts, pauses, signals, audit trail, fan-out batches, available actions, the definition's
    steps and reruns; redacted unless both gates open. None when there is no such run."""
    detail = t.data.workflow(str(workflow_id))
    if detail is None:
        return None
    detail = dict(detail)
    detail["available_actions"] = detail.pop("actions") or []
    shown = t.show(detail, include)
    if not (t.allow_payloads and include):
        for e in shown["events"]:
            # The sweep records a failed repair with the database's error text as its reason.
            if e.get("event") in ERROR_TEXT_EVENTS and e.get("reason") is not None:
                e["reason"] = REDACTED
    return shown


def list_filters(
    status: str,
    workflow_class: str | None,
    step: str | None,
    error_class: str | None,
    subject_type: str | None,
    subject_id: str | None,
    created_from: datetime | None,
    created_to: datetime | None,
    ended_from: datetime | None,
    ended_to: datetime | None,
) -> dict[str, Any]:
    """pgbus.workflow_list's arguments for the tool's filters (the dashboard's list has the
    same ones); a blank text filter is no filter, a time without a zone is UTC."""

    def text(v: str | None) -> str | None:
        return v.strip() if v is not None and v.strip() else None

    def at(v: datetime | None) -> datetime | None:
        return v.replace(tzinfo=UTC) if v is not None and v.tzinfo is None else v

    args = {
        "only_status": status,
        "only_class": text(workflow_class),
        "only_step": text(step),
        "only_error_class": text(error_class),
        "only_subject_type": text(subject_type),
        "only_subject_id": text(subject_id),
        "created_from": at(created_from),
        "created_to": at(created_to),
        "ended_from": at(ended_from),
        "ended_to": at(ended_to),
    }
    if (args["only_subject_type"] is None) != (args["only_subject_id"] is None):
        raise ToolError("A subject filter needs both subject_type and subject_id")
    for a, b in (("created_from", "created_to"), ("ended_from", "ended_to")):
        if args[a] is not None and args[b] is not None and args[a] > args[b]:
            raise ToolError(f"Bad range: {a} is after {b}")
    return {k: v for k, v in args.items() if v is not None}


def runs_from(t: Tools, filters: dict[str, Any], offset: int, want: int) -> list[dict[str, Any]]:
    """Rows offset..offset+want of the dashboard's run list (pgbus.workflow_list, newest
    first): a numbered page starts from the keyset cursor at its offset
    (pgbus.workflow_list_cursor), so a deep page costs about what the first one does."""
    before = None
    if offset > 0:
        before = t.data.workflow_runs_cursor(filters, offset)
        if before is None:
            return []
    return t.data.workflow_runs(filters, before, want)


def actor_for(ctx: Context | None) -> str:
    """`mcp:<client name>` (control characters stripped, at most 100 characters), or `mcp`
    when the transport does not know the client."""
    name = None
    try:
        params = ctx.session.client_params if ctx is not None else None
        name = params.client_info.name if params is not None else None
    except Exception:
        name = None
    if not isinstance(name, str):
        return "mcp"
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf")).strip()
    name = name[:ACTOR_NAME_MAX].strip()
    return f"mcp:{name}" if name else "mcp"


DONE = {
    "resume": "Resumed",
    "cancel": "Cancelled",
    "skip": "Skipped the step",
    "resume_at": "Resumed at the step",
    "run_now": "Sent the step now",
    "signal": "Signal delivered",
}


def refusal_reason(verb: str, answer: dict[str, Any]) -> str:
    code = answer.get("code")
    status = answer.get("status")
    if code == "not_found":
        return "Not done: there is no such run"
    if code == "status_changed":
        return f"Not done: the run is {status} now, not {answer.get('expected_status')}"
    if code == "not_allowed":
        allowed = answer.get("available_actions")
        if allowed is not None:
            shown = ", ".join(allowed) or "nothing"
            return f"Not done: a {status} run allows {shown}, not {verb}"
        return f"Not done: a {status} run does not allow {verb}"
    if code == "too_large":
        return "Not done: the payload is larger than workflow_max_payload_size"
    if code == "invalid":
        return "Not done: the input was refused"
    return f"Not done ({code})"


def act(
    t: Tools,
    ctx: Context | None,
    verb: str,
    workflow_id: UUID,
    reason: str,
    expected_status: str | None,
    params: dict[str, Any] | None = None,
) -> ActionResult:
    """One verb through pgbus.workflow_command_expecting; always an answer, never a raise."""
    actor = actor_for(ctx)
    try:
        # Refused input comes back as an answer; a verb that was done emits its
        # instrumentation there, after its commit (the dashboard's actions share the path).
        answer = t.data.workflow_command(
            str(workflow_id),
            verb,
            actor,
            reason,
            params or {},
            checked=True,
            expected_status=expected_status,
        )
        detail = workflow_detail(t, workflow_id)
    except Exception:
        log.exception("MCP %s on workflow %s failed", verb, workflow_id)
        return {"ok": False, "reason": UNEXPECTED, "workflow": None, "code": "error"}
    if answer.get("ok"):
        done = DONE[verb]
        if verb == "signal" and answer.get("duplicate_delivery"):
            done = "Already delivered (same idempotency key): nothing stored"
        return {"ok": True, "reason": done, "workflow": detail}
    result: ActionResult = {
        "ok": False,
        "reason": refusal_reason(verb, answer),
        "workflow": detail,
        "code": str(answer.get("code")),
    }
    if "status" in answer or detail is not None:
        result["status"] = answer.get("status") or (detail["run"]["status"] if detail else None)
    if "available_actions" in answer:
        result["available_actions"] = list(answer["available_actions"])
    return result


def refused_early(t: Tools, workflow_id: UUID, verb: str, code: str) -> ActionResult:
    """A call refused before it reached the run (its input): nothing was done."""
    try:
        detail = workflow_detail(t, workflow_id)
    except Exception:
        log.exception("MCP %s on workflow %s: reading the run failed", verb, workflow_id)
        return {"ok": False, "reason": UNEXPECTED, "workflow": None, "code": "error"}
    result: ActionResult = {
        "ok": False,
        "reason": refusal_reason(verb, {"code": code}),
        "workflow": detail,
        "code": code,
    }
    if detail is not None:
        result["status"] = detail["run"]["status"]
    return result


def register_reads(server: MCPServer, t: Tools) -> None:
    @server.tool(
        name="pgbus_workflows",
        title="Workflow runs",
        description="Workflow runs newest first, as the dashboard's Workflows list shows them: "
        "filtered by status (ongoing by default, all, or one status), workflow_class, step (the "
        "current step), error_class (the current step's), a subject (subject_type and "
        "subject_id together) and created/ended time ranges. Each row: status, pause cause, "
        "current step, and facts (what the run is doing: kind, step status, attempt, error "
        "class, due/overdue/running seconds, what it waits for, fan-out progress). Paged "
        "(per_page at most 100; total capped at 10,000 with has_more). Error text redacted "
        "unless payloads are allowed and include_payloads is set.",
        annotations=READ_ONLY,
    )
    @guarded
    def pgbus_workflows(
        status: ListStatus = "ongoing",
        workflow_class: Filter = None,
        step: Filter = None,
        error_class: Filter = None,
        subject_type: Filter = None,
        subject_id: Filter = None,
        created_from: When = None,
        created_to: When = None,
        ended_from: When = None,
        ended_to: When = None,
        page: int = 1,
        per_page: int = 25,
        include_payloads: Include = False,
    ) -> WorkflowsResult:
        filters = list_filters(
            status,
            workflow_class,
            step,
            error_class,
            subject_type,
            subject_id,
            created_from,
            created_to,
            ended_from,
            ended_to,
        )
        page, per_page = clamp_page(page, per_page)
        rows = runs_from(t, filters, (page - 1) * per_page, per_page + 1)
        count = t.data.workflow_runs_count(filters, TOTAL_CAP)
        info = paged(rows, page, per_page, int(count["count"]), bool(count["capped"]))
        return {**info, "status": status, "runs": t.show(rows[:per_page], include_payloads)}

    @server.tool(
        name="pgbus_workflows_attention",
        title="Workflow runs needing attention",
        description="Stuck workflow runs (paused by an error, a stall or an operator; running "
        "past the stall threshold; overdue; waiting past the visibility threshold), grouped as "
        "the dashboard's attention page groups them: by class, step, reason and error class, "
        "with how many runs, first/last seen and the newest error (redacted unless payloads "
        "are allowed and include_payloads is set). List a group's runs with pgbus_workflows "
        "(workflow_class, step, error_class).",
        annotations=READ_ONLY,
    )
    @guarded
    def pgbus_workflows_attention(
        workflow_class: Filter = None, include_payloads: Include = False
    ) -> AttentionResult:
        only = workflow_class.strip() if workflow_class and workflow_class.strip() else None
        groups = t.data.workflow_attention(only)
        return {
            "groups": t.show(groups, include_payloads),
            "stuck_runs": sum(int(g["runs"]) for g in groups),
        }

    @server.tool(
        name="pgbus_workflow",
        title="One workflow run",
        description="One run as its dashboard page shows it: its row (status, current step, "
        "facts), arguments, attempts (durations, worker, errors), pauses, signals, audit trail, "
        "fan-out batches, available_actions, the definition's steps and reruns. Arguments, "
        "outputs, signal payloads and error text are redacted unless payloads are allowed and "
        "include_payloads is set.",
        annotations=READ_ONLY,
    )
    @guarded
    def pgbus_workflow(
        workflow_id: WorkflowId, include_payloads: Include = False
    ) -> WorkflowResult:
        detail = workflow_detail(t, workflow_id, include_payloads)
        if detail is None:
            raise ToolError(f"Workflow run not found: {workflow_id}")
        return detail


WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
WRITE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
COMMON = (
    " Needs a reason (recorded on the audit trail with your client's name). Pass "
    "expected_status, the status you read: a run that moved on is left alone. Answers "
    "{ok, reason, workflow} with the run as it is after the call (payloads redacted); a "
    "refusal adds code and status, and available_actions when the verb is not allowed."
)


def register_writes(server: MCPServer, t: Tools) -> None:
    def tool(name: str, title: str, description: str, annotations: ToolAnnotations = WRITE):
        return server.tool(
            name=name, title=title, description=description + COMMON, annotations=annotations
        )

    @tool(
        "pgbus_workflow_resume",
        "Resume a run",
        "Resume a paused run (a failed step runs again; a completed one is followed by the next).",
    )
    def pgbus_workflow_resume(
        workflow_id: WorkflowId, reason: Reason, ctx: Context, expected_status: Expected = None
    ) -> ActionResult:
        return act(t, ctx, "resume", workflow_id, reason, expected_status)

    @tool("pgbus_workflow_cancel", "Cancel a run", "Cancel an ongoing run.", WRITE_IDEMPOTENT)
    def pgbus_workflow_cancel(
        workflow_id: WorkflowId, reason: Reason, ctx: Context, expected_status: Expected = None
    ) -> ActionResult:
        return act(t, ctx, "cancel", workflow_id, reason, expected_status)

    @tool(
        "pgbus_workflow_skip_step",
        "Skip the awaited step",
        "Skip the step a waiting run waits on; the run goes on with the next.",
    )
    def pgbus_workflow_skip_step(
        workflow_id: WorkflowId, reason: Reason, ctx: Context, expected_status: Expected = None
    ) -> ActionResult:
        return act(t, ctx, "skip", workflow_id, reason, expected_status)

    @tool("pgbus_workflow_resume_at", "Resume at a step", "Resume a paused run at a named step.")
    def pgbus_workflow_resume_at(
        workflow_id: WorkflowId,
        step: Name255,
        reason: Reason,
        ctx: Context,
        expected_status: Expected = None,
    ) -> ActionResult:
        return act(t, ctx, "resume_at", workflow_id, reason, expected_status, {"step": step})

    @tool(
        "pgbus_workflow_run_now",
        "Run the scheduled step now",
        "Send a ready run's scheduled step now instead of after its wait.",
    )
    def pgbus_workflow_run_now(
        workflow_id: WorkflowId, reason: Reason, ctx: Context, expected_status: Expected = None
    ) -> ActionResult:
        return act(t, ctx, "run_now", workflow_id, reason, expected_status)

    @tool(
        "pgbus_workflow_signal",
        "Send a signal",
        "Deliver signal `name` with a JSON object `payload` (at most workflow_max_payload_size) "
        "and an optional idempotency_key (pass one when the call may be retried; a blank key is "
        "no key). A retry dedups only while the run is ongoing. Name and key: at most 255 "
        "characters.",
    )
    def pgbus_workflow_signal(
        workflow_id: WorkflowId,
        name: Name255,
        reason: Reason,
        ctx: Context,
        payload: dict[str, Any] | None = None,
        idempotency_key: Annotated[str, StringConstraints(max_length=255), NoNul] | None = None,
        expected_status: Expected = None,
    ) -> ActionResult:
        try:
            # (The server's database refuses a payload over its own limit: PB413, too_large.)
            stored = encode_signal_payload(payload, read_database_limit=False)
        except PayloadTooLarge:
            return refused_early(t, workflow_id, "signal", "too_large")
        except (InvalidSignalPayload, SerializationError, TypeError, ValueError):
            return refused_early(t, workflow_id, "signal", "invalid")
        except Exception:
            log.exception("MCP signal on workflow %s failed", workflow_id)
            return {"ok": False, "reason": UNEXPECTED, "workflow": None, "code": "error"}
        key = idempotency_key if idempotency_key and idempotency_key.strip() else None
        params = {"name": name, "payload": stored, "idempotency_key": key}
        return act(t, ctx, "signal", workflow_id, reason, expected_status, params)
