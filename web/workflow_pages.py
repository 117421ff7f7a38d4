"""The Workflows pages: the run list, one run with its timeline and actions, the runs that
need attention with bulk resume/cancel, and the actions (paths relative to the mount).

Every read and every action is one call of `pgbus.data.DataSource` (one SQL function); this
module parses the request, picks the words, and shapes the timeline's numbers for the chart.
"""

from __future__ import annotations

import contextvars
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from pgbus.web.app import BadInput, Lazy, format_when, json_object, not_found, number
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pgbus.config import settings
from pgbus.data import WORKFLOW_BULK_LIMIT

if TYPE_CHECKING:
    from pgbus.web.app import Dashboard

log = logging.getLogger("pgbus.web")

STATUSES = ("ongoing", "all", "ready", "running", "waiting", "paused", "finished", "cancelled")
# Each stuck reason (pgbus.workflow_stuck, pgbus.workflow_stuck_reasons) in the attention
# page's words; a bulk action's group must name one of them.
STUCK_REASONS = {
    "paused_error": "Paused on an error",
    "stalled": "Stalled",
    "paused_manual": "Paused by hand",
    "overdue": "Overdue",
    "waiting_overdue": "Waiting too long",
}
# The run status a stuck reason implies (a stalled run is paused by the stall action or still
# running: no one status): the group's link to its runs in the list adds it, and a group of
# ready or waiting runs, which resume refuses, is offered Cancel only (the sweep sends an
# overdue step again; a wait ends with its signal or timeout).
REASON_STATUS = {
    "paused_error": "paused",
    "paused_manual": "paused",
    "overdue": "ready",
    "waiting_overdue": "waiting",
}
MAX_TEXT = 255
MAX_REASON = 1000
COUNT_CAP = 10000
# The list's total is counted on a connection of its own while the page reads and renders its
# rows (the template renders the table before it shows the total): a filter whose count reads
# every ongoing run's row (the current step: no index may name it, since it changes with every
# step) costs the page that count or its rows, whichever is longer, instead of both.
_counting = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pgbus-web-count")
# Query parameter -> pgbus.workflow_list argument.
TEXT_FILTERS = {
    "workflow_class": "only_class",
    "step": "only_step",
    "error_class": "only_error_class",
    "subject_type": "only_subject_type",
    "subject_id": "only_subject_id",
}
TIME_FILTERS = {
    "created_from": "created_from",
    "created_to": "created_to",
    "ended_from": "ended_from",
    "ended_to": "ended_to",
}
VERBS = ("resume", "resume_at", "run_now", "skip", "signal", "pause", "cancel", "rerun")
DONE_WORDS = {
    "resume": "Resumed",
    "resume_at": "Resumed at the chosen step",
    "run_now": "Runs now",
    "skip": "Skipped the step",
    "signal": "Signal sent",
    "pause": "Paused",
    "cancel": "Cancelled",
    "rerun": "Rerun started",
}


# -- input ----------------------------------------------------------------------------------


def text_param(value: str | None, what: str) -> str | None:
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    if len(value) > MAX_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadInput(f"Bad {what}")
    return value


def time_param(value: str | None, what: str) -> datetime | None:
    if value is None or value.strip() == "":
        return None
    try:
        if len(value) > 40:
            raise ValueError
        at = datetime.fromisoformat(value.strip())
    except (ValueError, OverflowError):
        raise BadInput(f"Bad {what}: use a date and time such as 2026-12-01T09:30") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    if not 1 < at.year < 9999:
        raise BadInput(f"Bad {what}")
    return at


def uuid_param(value: str | None, what: str = "workflow id") -> str | None:
    if value is None or value.strip() == "":
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise BadInput(f"Bad {what}") from None


def run_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise not_found("No such workflow run") from None


def list_filters(query: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The list's filters from the query string: (pgbus.workflow_list arguments, the same
    filters as query parameters, to keep in every link)."""
    status = query.get("status") or "ongoing"
    if status not in STATUSES:
        raise BadInput("Unknown status: use one of " + ", ".join(STATUSES))
    args: dict[str, Any] = {"only_status": status}
    keep: dict[str, str] = {"status": status} if status != "ongoing" else {}
    for name, arg in TEXT_FILTERS.items():
        v = text_param(query.get(name), name.replace("_", " "))
        if v is not None:
            args[arg] = v
            keep[name] = v
    if ("only_subject_type" in args) != ("only_subject_id" in args):
        raise BadInput("A subject filter needs both its type and its id")
    run = uuid_param(query.get("workflow_id"))
    if run is not None:
        args["only_run"] = run
        keep["workflow_id"] = run
    for name, arg in TIME_FILTERS.items():
        at = time_param(query.get(name), name.replace("_", " "))
        if at is not None:
            args[arg] = at
            keep[name] = query.get(name).strip()
    for a, b in (("created_from", "created_to"), ("ended_from", "ended_to")):
        if a in args and b in args and args[a] > args[b]:
            raise BadInput(f"Bad range: {a.replace('_', ' ')} is after {b.replace('_', ' ')}")
    return args, keep


def decode_run_cursor(value: str | None) -> tuple[datetime, str] | None:
    if value in (None, ""):
        return None
    at, _, run = value.partition("~")
    try:
        if len(value) > 100:
            raise ValueError
        when = datetime.fromisoformat(at)
        if when.tzinfo is None:
            raise ValueError
        return when, str(uuid.UUID(run))
    except (ValueError, OverflowError):
        raise BadInput("Bad page cursor") from None


def reason_field(fields: dict[str, list[str]]) -> str | None:
    reason = (fields.get("reason") or [""])[0].strip()
    if len(reason) > MAX_REASON:
        raise BadInput(f"The reason is longer than {MAX_REASON:,} characters")
    return reason or None


# -- settings hooks -------------------------------------------------------------------------


def web_actor(request: Request) -> str:
    """ "dashboard:<name>" from the web_actor setting (else the signed-in operator); a blank or
    non-string name, or one that raised, records "dashboard" and says why in the log."""
    hook = settings().web_actor
    if hook is None:
        name: Any = getattr(request.state, "operator", None)
    else:
        try:
            name = hook(request)
        except Exception as exc:
            log.warning(
                "web_actor raised %s; recording the action as 'dashboard'", type(exc).__name__
            )
            return "dashboard"
    if not isinstance(name, str) or not name.strip():
        if hook is not None:
            log.warning(
                "web_actor returned %s; recording the action as 'dashboard'",
                type(name).__name__ if not isinstance(name, str) else "a blank name",
            )
        return "dashboard"
    return ("dashboard:" + name.strip())[:MAX_TEXT]


def safe_link(url: Any) -> str | None:
    """An http(s) URL or a same-site path; anything else (javascript:, data:, //host) is None."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        return None
    if any(ord(c) < 33 or ord(c) == 127 for c in url) or "\\" in url:
        return None
    if url.startswith("/"):
        return None if url.startswith("//") else url
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return url
    return None


def subject_url(subject_type: str | None, subject_id: str | None) -> str | None:
    hook = settings().workflow_subject_url
    if hook is None or subject_type is None:
        return None
    try:
        return safe_link(hook(subject_type, subject_id))
    except Exception as exc:
        log.warning(
            "workflow_subject_url raised %s; the subject is shown as text", type(exc).__name__
        )
        return None


# -- the timeline ---------------------------------------------------------------------------

# The timeline's series, in legend order, each one colour (the legend's markers are the bars'
# colours); an attempt's run is coloured by its outcome.
SEGMENTS = {
    "Waited": "#8c959f",
    "Queued": "#bf8700",
    "Ran: completed": "#1a7f37",
    "Ran: failed or stalled": "#cf222e",
    "Ran: skipped or running": "#0969da",
    "Ran: other": "#6e7781",
    "Waiting": "#8250df",
    "Paused": "#57606a",
}
RAN = {
    "completed": "Ran: completed",
    "failed": "Ran: failed or stalled",
    "stalled": "Ran: failed or stalled",
    "skipped": "Ran: skipped or running",
    "running": "Ran: skipped or running",
}


def _ms(at: str | None) -> int | None:
    if at is None:
        return None
    return int(datetime.fromisoformat(at).timestamp() * 1000)


def timeline(detail: dict[str, Any]) -> dict[str, Any]:
    """ApexCharts rangeBar options (one row per attempt, in order: waited, queued, ran,
    waiting; pauses on their own row) and the table with the same numbers."""
    now = _ms(detail["now"])
    segments: dict[str, list[dict[str, Any]]] = {name: [] for name in SEGMENTS}
    rows = []
    for a in detail["attempts"]:
        label = f"{a['step_name']} #{a['attempt']}"
        created, due = _ms(a["created_at"]), _ms(a["scheduled_at"])
        started, ended = _ms(a["started_at"]), _ms(a["ended_at"])
        if due and created and due > created:
            segments["Waited"].append({"x": label, "y": [created, due]})
        queued_to = started or (now if a["status"] == "scheduled" and due and due < now else None)
        if queued_to and due and queued_to > max(due, created or due):
            segments["Queued"].append({"x": label, "y": [max(due, created or due), queued_to]})
        if started:
            ran = RAN.get(a["status"], "Ran: other")
            segments[ran].append({"x": label, "y": [started, ended or now]})
        if a.get("waiting") is not None and a["waiting"] > 0:
            until = ended or now
            segments["Waiting"].append({"x": label, "y": [until - int(a["waiting"] * 1000), until]})
        rows.append(
            [
                label,
                a["status"],
                _seconds(a.get("waited")),
                _seconds(a.get("queued")),
                _seconds(a.get("ran")),
                _seconds(a.get("waiting")),
            ]
        )
    for p in detail["pauses"]:
        segments["Paused"].append({"x": "paused", "y": [_ms(p["from"]), _ms(p["to"]) or now]})
        rows.append(["paused", "paused", "", "", "", _seconds(p["seconds"])])
    shown = [name for name, data in segments.items() if data]
    return {
        "id": "timeline",
        "caption": "Each attempt's time waited (its step's wait), queued (due until a worker "
        "took it), ran (coloured by outcome: green completed, red failed or stalled, blue "
        "skipped or running) and waited for a signal or batch; pauses on their own row. "
        "Times in UTC. Drag to zoom.",
        "options": {
            "chart": {
                "id": "timeline",
                "type": "rangeBar",
                "height": max(
                    160, 48 * (len(detail["attempts"]) + (1 if detail["pauses"] else 0)) + 60
                ),
                "animations": {"enabled": False},
                "zoom": {"enabled": True, "type": "x"},
                "toolbar": {"show": True},
            },
            "plotOptions": {"bar": {"horizontal": True, "rangeBarGroupRows": True}},
            "series": [{"name": name, "data": segments[name]} for name in shown],
            "colors": [SEGMENTS[name] for name in shown],
            # The rows in the table's order (else ApexCharts orders them as the first series
            # that has each one names it).
            "labels": list(dict.fromkeys(r[0] for r in rows)),
            "xaxis": {"type": "datetime"},
            # (pgbus.js labels the time axis with clock times, to the millisecond when the
            # visible span is a few seconds: ApexCharts' own labels are raw numbers then.)
            "pgbus": {"clock_axis": True},
            "legend": {"show": True},
            "dataLabels": {"enabled": False},
        },
        "table": {
            "head": ["Attempt", "Outcome", "Waited", "Queued", "Ran", "Waiting / paused"],
            "rows": rows,
        },
    }


def _seconds(value: Any) -> str:
    if value is None:
        return ""
    s = float(value)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


# -- outcomes in words ----------------------------------------------------------------------


def outcome_words(verb: str, outcome: dict[str, Any], extra: str = "") -> dict[str, Any]:
    if outcome.get("ok"):
        if verb == "signal" and outcome.get("duplicate_delivery"):
            return {"ok": True, "message": "Signal already delivered"}
        return {"ok": True, "message": DONE_WORDS.get(verb, "Done") + extra}
    code = outcome.get("code")
    if code == "not_allowed":
        return {"ok": False, "message": f"Not done: the run is {outcome.get('status')} now."}
    if code == "not_found":
        return {"ok": False, "message": "Not done: no such run (it may have been deleted)."}
    message = outcome.get("message")
    if message and str(message).startswith("Not done"):
        return {"ok": False, "message": message}
    return {"ok": False, "message": "Not done: " + (message or "refused") + "."}


EVENT_WORDS = {
    "started": "Started",
    "paused": "Paused",
    "resumed": "Resumed",
    "resumed_at": "Resumed at",
    "cancelled": "Cancelled",
    "finished": "Finished",
    "rerun": "Rerun",
    "step_scheduled": "Scheduled",
    "step_started": "Started",
    "step_completed": "Completed",
    "step_failed": "Failed",
    "step_skipped": "Skipped",
    "step_waiting": "Waiting at",
    "step_woken": "Woken",
    "step_released": "Released",
    "step_resent": "Sent again",
    "stall_detected": "Stall detected on",
    "signal_received": "Signal received",
    "signal_claimed": "Signal taken",
    "wait_timed_out": "Wait timed out on",
    "fan_out_opened": "Fan-out opened on",
    "fan_out_finished": "Fan-out finished on",
    "fan_out_repaired": "Fan-out repaired on",
}


def event_words(e: dict[str, Any]) -> str:
    """One audit row in words: "Resumed by dashboard:alice: SMTP fixed"."""
    words = EVENT_WORDS.get(e["event"]) or e["event"].replace("_", " ").capitalize()
    details = e.get("details") or {}
    step = details.get("step") if isinstance(details, dict) else None
    step = step or e.get("step_name")
    if step:
        words += f" `{step}`"
    if isinstance(details, dict) and details.get("name") and e["event"].startswith("signal"):
        words += f" `{details['name']}`"
    if e.get("actor"):
        words += f" by {e['actor']}"
    if e.get("reason"):
        words += f": {e['reason']}"
    return words


# -- routes ---------------------------------------------------------------------------------


def routes(d: Dashboard) -> list[Route]:
    per_page = d.per_page

    def page(request: Request, template: str, fragments=None, **ctx: Any) -> Response:
        from pgbus.web.pages import NAV

        return d.render(
            request,
            template,
            fragments,
            nav=NAV,
            section="workflows",
            subject_url=subject_url,
            **ctx,
        )

    def workflows(request: Request) -> Response:
        args, keep = list_filters(request.query_params)
        before = decode_run_cursor(request.query_params.get("before"))

        def runs() -> dict[str, Any]:
            rows = d.data.workflow_runs(args, before, per_page + 1)
            more = len(rows) > per_page
            rows = rows[:per_page]
            nxt = None
            if more:
                last = rows[-1]
                nxt = f"{last['created_at'].isoformat()}~{last['workflow_id']}"
            return {"rows": rows, "next": nxt}

        counted = _counting.submit(
            contextvars.copy_context().run, d.data.workflow_runs_count, args, COUNT_CAP
        )
        return page(
            request,
            "workflows.html",
            {"runs": "_workflow_runs.html"},
            filters=keep,
            statuses=STATUSES,
            runs=Lazy(runs),
            total=Lazy(counted.result),
            classes=Lazy(d.data.workflow_classes),
            first_page=before is None,
        )

    def attention(request: Request) -> Response:
        only = text_param(request.query_params.get("workflow_class"), "workflow class")
        runs_path = d.route_path(request, "workflows")
        return page(
            request,
            "workflow_attention.html",
            {"groups": "_workflow_groups.html"},
            only_class=only,
            groups=Lazy(
                lambda: attention_rows(
                    d.data.workflow_attention(only), runs_path, WORKFLOW_BULK_LIMIT
                )
            ),
            bulk_max=WORKFLOW_BULK_LIMIT,
        )

    def workflow(request: Request) -> Response:
        wid = run_id(request.path_params["workflow_id"])
        detail = d.data.workflow(wid)
        if detail is None:
            raise not_found("No such workflow run: it may have been deleted after its retention")
        return page(
            request,
            "workflow.html",
            None,
            run=detail["run"],
            detail=detail,
            charts=True,
            chart=timeline(detail),
            signal_key=str(uuid.uuid4()),
            seconds=_seconds,
            event_words=event_words,
            max_payload=max_payload_size(detail),
        )

    async def workflow_action(request: Request) -> Response:
        wid = run_id(request.path_params["workflow_id"])
        verb = request.path_params["action"].replace("-", "_")
        if verb not in VERBS:
            raise not_found("No such action")
        fields = await d.form(request)
        reason = reason_field(fields)
        params: dict[str, Any] = {}
        extra = ""
        if verb == "resume_at":
            step = text_param((fields.get("step") or [""])[0], "step")
            if step is None:
                raise BadInput("Choose the step to resume at")
            params = {"step": step}
            extra = f" `{step}`"
        elif verb == "signal":
            name = text_param((fields.get("name") or [""])[0], "signal name")
            if name is None:
                raise BadInput("A signal needs a name")
            payload = json_object((fields.get("payload") or [""])[0].strip() or "{}")
            limit = settings().workflow_max_payload_size
            if limit is not None and len(json.dumps(payload).encode()) > limit:
                raise BadInput(f"The payload is larger than {limit:,} bytes", 413)
            key = text_param((fields.get("idempotency_key") or [""])[0], "idempotency key")
            params = {"name": name, "payload": payload}
            if key is not None:
                params["idempotency_key"] = key
            extra = f" `{name}`"
        actor = web_actor(request)
        outcome = await run_in_threadpool(d.data.workflow_command, wid, verb, actor, reason, params)
        back = request.url_for("workflow", workflow_id=wid).path
        if verb == "rerun" and outcome.get("ok") and outcome.get("workflow_id"):
            back = request.url_for("workflow", workflow_id=str(outcome["workflow_id"])).path
        else:
            back = d.back(request, fields, back)
        return d.done(request, back, outcome_words(verb, outcome, extra))

    async def attention_action(request: Request) -> Response:
        verb = request.path_params["action"]
        if verb not in ("resume", "cancel"):
            raise not_found("No such action")
        fields = await d.form(request)
        group = {
            "workflow_class": text_param((fields.get("workflow_class") or [""])[0], "class"),
            "step_name": text_param((fields.get("step_name") or [""])[0], "step"),
            "reason": (fields.get("stuck_reason") or [""])[0],
            "error_class": text_param((fields.get("error_class") or [""])[0], "error class"),
        }
        if group["workflow_class"] is None or group["reason"] not in STUCK_REASONS:
            raise BadInput("No such group")
        reason = reason_field(fields)
        actor = web_actor(request)
        outcome = await run_in_threadpool(d.data.workflow_attention_act, verb, group, actor, reason)
        if not outcome.get("ok"):
            outcome = {"ok": False, "message": "Not done: " + (outcome.get("message") or "refused")}
        return d.done(
            request, d.back(request, fields, request.url_for("workflows_attention").path), outcome
        )

    return [
        Route("/workflows", workflows, name="workflows"),
        Route("/workflows/attention", attention, name="workflows_attention"),
        Route(
            "/workflows/attention/{action}",
            attention_action,
            methods=["POST"],
            name="workflows_attention_action",
        ),
        Route("/workflows/{workflow_id}", workflow, name="workflow"),
        Route(
            "/workflows/{workflow_id}/{action}",
            workflow_action,
            methods=["POST"],
            name="workflow_action",
        ),
    ]


def attention_rows(
    groups: list[dict[str, Any]], runs_path: str, bulk_max: int
) -> list[dict[str, Any]]:
    """The attention table's rows: each group with its texts worked out once here rather than
    in the template (a row names its class seven times): the link to the group's runs, its
    reason in words, its count and times, and what its bulk forms ask to confirm and tell a
    screen reader."""
    rows = []
    for g in groups:
        reason = STUCK_REASONS.get(g["reason"], g["reason"])
        cls, step = g["workflow_class"], g["step_name"]
        rows.append(
            {
                **g,
                "href": list_url(
                    runs_path,
                    {},
                    status=REASON_STATUS.get(g["reason"]),
                    workflow_class=cls,
                    step=step,
                    error_class=g["error_class"],
                ),
                "reason_words": reason,
                "resumable": REASON_STATUS.get(g["reason"]) in (None, "paused"),
                "runs_text": number(g["runs"]),
                "first_seen_text": format_when(g["first_seen"]),
                "last_seen_text": format_when(g["last_seen"]),
                "confirm": f"up to {min(g['runs'], bulk_max)} {cls} runs ({reason.lower()} at {step or 'no step'})?",
                "described": f"{cls} {step or ''} {reason.lower()}",
            }
        )
    return rows


def max_payload_size(detail: dict[str, Any]) -> int:
    """The smaller of the database's limit and this process's own (when set)."""
    configured = settings().workflow_max_payload_size
    db = int(detail.get("max_payload_size") or 65536)
    return min(db, configured) if configured is not None else db


def list_url(base: str, keep: dict[str, str], **more: str | None) -> str:
    q = {**keep, **{k: v for k, v in more.items() if v}}
    return base + ("?" + urlencode(q) if q else "")
