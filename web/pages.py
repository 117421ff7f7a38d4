"""Every page and action route of the dashboard (paths relative to where it is mounted)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgbus.web import task_pages
from pgbus.web.app import (
    BadInput,
    Lazy,
    cursor_id,
    decode_cursor,
    encode_cursor,
    item_param,
    json_object,
    msg_id_param,
    not_found,
    queue_param,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pgbus.data import BULK_LIMIT, INSIGHT_PERIODS

if TYPE_CHECKING:
    from pgbus.web.app import Dashboard

NAV = (
    ("home", "Home"),
    ("queues", "Queues"),
    ("jobs", "Jobs"),
    ("dead_letters", "Dead letters"),
    ("batches", "Batches"),
    ("events", "Events"),
    ("workflows", "Workflows"),
    ("processes", "Processes"),
    ("insights", "Insights"),
    ("recurring", "Recurring"),
    ("deploy_tasks", "Deploy tasks"),
)


def routes(d: Dashboard) -> list[Route]:
    per_page = d.per_page

    def page(request: Request, template: str, section: str, fragments=None, **ctx: Any):
        return d.render(request, template, fragments, nav=NAV, section=section, **ctx)

    def keyset_page(rows: list[dict[str, Any]], at: str) -> dict[str, Any]:
        """One page of rows (fetched one over the page size) and the next page's cursor."""
        more = len(rows) > per_page
        rows = rows[:per_page]
        return {"rows": rows, "next": encode_cursor(rows[-1], at) if more else None}

    # -- home ----------------------------------------------------------------------------

    def home(request: Request) -> Response:
        overview = Lazy(d.data.overview)  # cards, queues and health count the queues once
        return page(
            request,
            "home.html",
            "home",
            {
                "cards": "_home_cards.html",
                "queues": "_queues_table.html",
                "processes": "_processes_table.html",
                "failures": "_failures_table.html",
                "health": "_health.html",
            },
            summary=Lazy(lambda: overview.get()["summary"]),
            queues=Lazy(lambda: overview.get()["queues"]),
            workflows=Lazy(d.data.workflow_home_card),
            processes=Lazy(d.data.processes),
            failures=Lazy(lambda: d.data.failed_jobs(page_size=5)),
            table_health=Lazy(lambda: d.data.table_health()[:10]),
            verdict=Lazy(lambda: overview.get()["verdict"]),
        )

    # -- queues --------------------------------------------------------------------------

    def queues(request: Request) -> Response:
        return page(
            request,
            "queues.html",
            "queues",
            {"queues": "_queues_table.html"},
            queues=Lazy(lambda: d.data.queues(reuse=True)),
        )

    def queue(request: Request) -> Response:
        name = queue_param(request.path_params["name"])
        q = d.data.queue(name)
        if q is None:
            raise not_found("No such queue")
        before = cursor_id(request.query_params.get("before"))

        def messages() -> dict[str, Any]:
            rows = d.data.queue_messages(name, before, per_page + 1)
            more = len(rows) > per_page
            rows = rows[:per_page]
            return {"rows": rows, "next": rows[-1]["msg_id"] if more else None}

        return page(
            request,
            "queue.html",
            "queues",
            {"summary": "_queue_summary.html", "messages": "_queue_messages.html"},
            queue=q,
            messages=Lazy(messages),
            before=before,
        )

    async def queue_action(request: Request) -> Response:
        name = queue_param(request.path_params["name"])
        action = request.path_params["action"]
        actions = {
            "pause": "queue_pause",
            "resume": "queue_resume",
            "purge": "queue_purge",
            "delete": "queue_delete",
        }
        if action not in actions:
            raise not_found("No such action")
        back = request.url_for("queue", name=name).path
        if action == "delete":
            back = request.url_for("queues").path

        def args(fields: dict[str, list[str]]) -> dict[str, Any]:
            out: dict[str, Any] = {"queue": name}
            if action == "pause":
                reason = (fields.get("reason") or [""])[0].strip()
                if len(reason) > 500:
                    raise BadInput("The reason is longer than 500 characters")
                out["reason"] = reason or None
            return out

        return await d.act(request, actions[action], back, args)

    async def message_action(request: Request) -> Response:
        name = queue_param(request.path_params["name"])
        msg_id = msg_id_param(request.path_params["msg_id"])
        action = {"retry": "message_retry", "discard": "message_discard"}.get(
            request.path_params["action"]
        )
        if action is None:
            raise not_found("No such action")
        return await d.act(
            request,
            action,
            request.url_for("queue", name=name).path,
            {"queue": name, "msg_id": msg_id},
        )

    # -- jobs ----------------------------------------------------------------------------

    def jobs(request: Request) -> Response:
        only = queue_param(request.query_params.get("queue"), required=False)
        if only is not None and only.endswith("_dlq"):
            raise not_found("No such queue")
        before = decode_cursor(request.query_params.get("before"))
        failed_before = decode_cursor(request.query_params.get("failed_before"))

        def enqueued() -> dict[str, Any]:
            rows = d.data.messages(
                dead_letters=False, queue=only, before=before, page_size=per_page + 1
            )
            return keyset_page(rows, "enqueued_at")

        def failed() -> dict[str, Any]:
            rows = d.data.failed_jobs(queue=only, before=failed_before, page_size=per_page + 1)
            return keyset_page(rows, "failed_at")

        return page(
            request,
            "jobs.html",
            "jobs",
            {"enqueued": "_jobs_enqueued.html", "failed": "_jobs_failed.html"},
            only_queue=only,
            queue_names=Lazy(lambda: [n for n in d.data.queue_names() if not n.endswith("_dlq")]),
            enqueued=Lazy(enqueued),
            failed=Lazy(failed),
        )

    def job(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        msg_id = msg_id_param(request.path_params["msg_id"])
        m = d.data.message(name, msg_id)
        if m is None:
            raise not_found(
                "No such message: it may have finished, been discarded or dead-lettered"
            )
        return page(request, "job.html", "jobs", None, job=m)

    async def job_action(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        msg_id = msg_id_param(request.path_params["msg_id"])
        action = {"retry": "message_retry", "discard": "message_discard"}.get(
            request.path_params["action"]
        )
        if action is None:
            raise not_found("No such action")
        return await d.act(
            request, action, request.url_for("jobs").path, {"queue": name, "msg_id": msg_id}
        )

    async def jobs_bulk(request: Request) -> Response:
        action = request.path_params["action"]
        back = request.url_for("jobs").path
        if action in ("retry-selected", "discard-selected"):
            return await d.act(
                request,
                "messages_retry" if action == "retry-selected" else "messages_discard",
                back,
                selected_items,
            )
        if action == "discard-enqueued":

            def args(fields: dict[str, list[str]]) -> dict[str, Any]:
                only = queue_param((fields.get("queue") or [""])[0], required=False)
                return {"queue": only, "limit": BULK_LIMIT}

            return await d.act(request, "jobs_discard_enqueued", back, args)
        raise not_found("No such action")

    # -- dead letters --------------------------------------------------------------------

    def dead_letters(request: Request) -> Response:
        only = queue_param(request.query_params.get("queue"), required=False)
        before = decode_cursor(request.query_params.get("before"))

        def messages() -> dict[str, Any]:
            rows = d.data.messages(
                dead_letters=True, queue=only, before=before, page_size=per_page + 1
            )
            return keyset_page(rows, "enqueued_at")

        return page(
            request,
            "dead_letters.html",
            "dead_letters",
            {"messages": "_dead_letters_table.html"},
            only_queue=only,
            messages=Lazy(messages),
        )

    def dead_letter(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        if not name.endswith("_dlq"):
            raise not_found("No such dead-letter queue")
        msg_id = msg_id_param(request.path_params["msg_id"])
        m = d.data.message(name, msg_id)
        if m is None:
            raise not_found("No such dead letter: it may have been retried or discarded")
        return page(request, "dead_letter.html", "dead_letters", None, message=m)

    async def dead_letter_action(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        if not name.endswith("_dlq"):
            raise not_found("No such dead-letter queue")
        msg_id = msg_id_param(request.path_params["msg_id"])
        action = {"retry": "dead_letter_retry", "discard": "message_discard"}.get(
            request.path_params["action"]
        )
        if action is None:
            raise not_found("No such action")
        return await d.act(
            request, action, request.url_for("dead_letters").path, {"queue": name, "msg_id": msg_id}
        )

    async def dead_letters_bulk(request: Request) -> Response:
        action = request.path_params["action"]
        back = request.url_for("dead_letters").path
        if action == "retry-selected":
            return await d.act(request, "dead_letters_retry", back, selected_items)
        if action == "discard-selected":
            return await d.act(request, "messages_discard", back, selected_dead_letters)
        if action == "retry-all":
            return await d.act(request, "dead_letters_retry_all", back, {"limit": BULK_LIMIT})
        if action == "discard-all":
            return await d.act(request, "dead_letters_discard_all", back, {"limit": BULK_LIMIT})
        raise not_found("No such action")

    # -- events --------------------------------------------------------------------------

    def events(request: Request) -> Response:
        overview = Lazy(lambda: with_handlers(d.data.events(per_page)))
        return page(
            request,
            "events.html",
            "events",
            {
                "subscribers": "_event_subscribers.html",
                "pending": "_event_pending.html",
                "dead": "_event_dead.html",
                "processed": "_event_processed.html",
            },
            overview=overview,
        )

    def event(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        msg_id = msg_id_param(request.path_params["msg_id"])
        m = d.data.message(name, msg_id)
        if m is None or not isinstance(m.get("message"), dict):
            raise not_found("No such event: it may have been handled, moved or discarded")
        targets = sorted(
            {s["queue"] for s in d.data.events(0)["subscribers"]} - {name.removesuffix("_dlq")}
        )
        return page(request, "event.html", "events", None, message=m, targets=targets)

    async def event_action(request: Request) -> Response:
        name = queue_param(request.path_params["queue"])
        msg_id = msg_id_param(request.path_params["msg_id"])
        action = request.path_params["action"]
        back = request.url_for("events").path
        target = {"queue": name, "msg_id": msg_id}
        if action == "replay":
            return await d.act(request, "event_replay", back, target)
        if action == "discard":
            return await d.act(request, "message_discard", back, target)
        if action == "retry" and name.endswith("_dlq"):
            return await d.act(request, "dead_letter_retry", back, target)
        if action == "mark-handled":
            return await d.act(
                request, "event_mark_handled", back, {**target, "handlers": handlers_of(name)}
            )
        if action == "reroute":
            return await d.act(
                request,
                "event_reroute",
                back,
                lambda f: {**target, "target": queue_param((f.get("target") or [""])[0])},
            )
        if action == "edit":
            return await d.act(
                request,
                "event_edit_payload",
                back,
                lambda f: {**target, "payload": payload_field(f)},
            )
        raise not_found("No such action")

    async def events_bulk(request: Request) -> Response:
        if request.path_params["action"] != "discard-selected":
            raise not_found("No such action")
        return await d.act(
            request, "messages_discard", request.url_for("events").path, selected_items
        )

    # -- batches, processes, insights ----------------------------------------------------

    def batches(request: Request) -> Response:
        return page(
            request,
            "batches.html",
            "batches",
            {"batches": "_batches_table.html"},
            batches=Lazy(lambda: d.data.batches(100)),
        )

    def batch(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        import uuid

        try:
            uuid.UUID(batch_id)
        except ValueError:
            raise not_found("No such batch") from None
        b = d.data.batch(batch_id)
        if b is None:
            raise not_found("No such batch")
        return page(request, "batch.html", "batches", {"batch": "_batch_detail.html"}, batch=b)

    def processes(request: Request) -> Response:
        return page(
            request,
            "processes.html",
            "processes",
            {"processes": "_processes_table.html"},
            processes=Lazy(d.data.processes),
        )

    def insights(request: Request) -> Response:
        period = request.query_params.get("period") or "1h"
        if period not in INSIGHT_PERIODS:
            raise BadInput("Unknown period: use one of " + ", ".join(INSIGHT_PERIODS))
        from pgbus.web.charts import job_charts

        data = d.data.job_insights(period)
        return page(
            request,
            "insights.html",
            "insights",
            {"insights": "_insights.html"},
            charts=True,
            period=period,
            periods=INSIGHT_PERIODS,
            insights=data,
            chart=job_charts(data),
        )

    return [
        Route("/", home, name="home"),
        Route("/queues", queues, name="queues"),
        Route("/queues/{name}", queue, name="queue"),
        Route(
            "/queues/{name}/messages/{msg_id}/{action}",
            message_action,
            methods=["POST"],
            name="queue_message_action",
        ),
        Route("/queues/{name}/{action}", queue_action, methods=["POST"], name="queue_action"),
        Route("/jobs", jobs, name="jobs"),
        Route("/jobs/bulk/{action}", jobs_bulk, methods=["POST"], name="jobs_bulk"),
        Route("/jobs/{queue}/{msg_id}", job, name="job"),
        Route("/jobs/{queue}/{msg_id}/{action}", job_action, methods=["POST"], name="job_action"),
        Route("/dead-letters", dead_letters, name="dead_letters"),
        Route(
            "/dead-letters/bulk/{action}",
            dead_letters_bulk,
            methods=["POST"],
            name="dead_letters_bulk",
        ),
        Route("/dead-letters/{queue}/{msg_id}", dead_letter, name="dead_letter"),
        Route(
            "/dead-letters/{queue}/{msg_id}/{action}",
            dead_letter_action,
            methods=["POST"],
            name="dead_letter_action",
        ),
        Route("/events", events, name="events"),
        Route("/events/bulk/{action}", events_bulk, methods=["POST"], name="events_bulk"),
        Route("/events/{queue}/{msg_id}", event, name="event"),
        Route(
            "/events/{queue}/{msg_id}/{action}",
            event_action,
            methods=["POST"],
            name="event_action",
        ),
        Route("/batches", batches, name="batches"),
        Route("/batches/{batch_id}", batch, name="batch"),
        Route("/processes", processes, name="processes"),
        Route("/insights", insights, name="insights"),
        *task_pages.routes(d, NAV),
    ]


def selected_items(fields: dict[str, list[str]]) -> dict[str, Any]:
    raw = fields.get("item") or []
    if not raw:
        raise BadInput("Nothing selected")
    if len(raw) > BULK_LIMIT:
        raise BadInput(f"At most {BULK_LIMIT} at once")
    return {"items": [item_param(v) for v in raw]}


def handlers_of(queue: str) -> list[str]:
    """The handler classes this process subscribed through `queue` (none when the dashboard
    did not import the app's handlers)."""
    from pgbus import events

    return sorted({s.handler.handler_name for s in events.subscriptions() if s.queue == queue})


def with_handlers(overview: dict[str, Any]) -> dict[str, Any]:
    for sub in overview["subscribers"]:
        sub["handlers"] = handlers_of(sub["queue"])
    return overview


def payload_field(fields: dict[str, list[str]]) -> Any:
    """The edited payload: JSON text of an object (SQL checks the object too)."""
    return json_object((fields.get("payload") or [""])[0])


def selected_dead_letters(fields: dict[str, list[str]]) -> dict[str, Any]:
    out = selected_items(fields)
    if not all(i["queue"].endswith("_dlq") for i in out["items"]):
        raise BadInput("Bad selection")
    return out
