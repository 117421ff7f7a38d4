"""Workflow insights by class: the list of classes (/workflows/definitions) and one class's page
(/workflows/definitions/<class>), over a window of 1h, 24h (default), 7d or 30d.

Every figure is one SQL function's (pgbus.workflow_definitions_overview and the
pgbus.workflow_class_* blocks, one call per block); this module picks the words, builds the
chart options and the links. Each count of runs that a Workflows list filter can express links
to that list with exactly those filters (the SQL's window is half-open like the list's).
A class name from the URL is only ever compared with names: it is never imported.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus
from zoneinfo import ZoneInfo

from pgbus.web.app import BadInput, Lazy, not_found, number
from pgbus.web.workflow_pages import _seconds, text_param
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pgbus.data import WORKFLOW_INSIGHT_WINDOWS

if TYPE_CHECKING:
    from pgbus.web.app import Dashboard

NOW_STATUSES = ("ready", "running", "waiting", "paused")
FUNNEL_STATUSES = (*NOW_STATUSES, "cancelled")
STATUS_WORDS = {
    "ready": "Scheduled",
    "running": "Running",
    "waiting": "Waiting",
    "paused": "Paused",
}


def window_param(request: Request) -> str:
    window = request.query_params.get("window") or "24h"
    if window not in WORKFLOW_INSIGHT_WINDOWS:
        raise BadInput("Unknown window: use one of " + ", ".join(WORKFLOW_INSIGHT_WINDOWS))
    return window


def loaded(workflow_class: str) -> bool:
    """Whether this process knows the class (a dictionary look-up: nothing is imported)."""
    from pgbus.workflow.base import _registry

    return workflow_class in _registry


def iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def percent(value: Any) -> str:
    return "—" if value is None else f"{float(value):.1f} %"


def secs(value: Any) -> str:
    return "—" if value is None else _seconds(value)


def bucket_label(at: str, bucket: str, zone: ZoneInfo | None) -> str:
    when = datetime.fromisoformat(at)
    if zone is not None:
        when = when.astimezone(zone)
    if bucket == "day":
        return when.strftime("%Y-%m-%d")
    if bucket == "hour":
        return when.strftime("%m-%d %H:%M")
    return when.strftime("%H:%M")


def count_cell(n: Any, href: Any) -> tuple[Any, str, Any]:
    """A count as a table cell shows it: (n, its text, the link when there is something to list)."""
    return (n, number(n), href if n else None)


def figures_texts(s: dict[str, Any]) -> dict[str, str]:
    """The texts of a group of attempts' figures (pgbus.workflow_step_figures), each formatted
    once here rather than by a call per value in the template."""
    rt, pu = s["run_time"], s["pickup"]
    return {
        "attempts": number(s["attempts"]),
        "run_time": f"{secs(rt['p50'])} / {secs(rt['p95'])} / {secs(rt['p99'])}",
        "pickup": f"{secs(pu['p50'])} / {secs(pu['p95'])} / {secs(pu['p99'])}",
        "pickup_p50_p95": f"{secs(pu['p50'])} / {secs(pu['p95'])}",
        "failure_rate": percent(s["failure_rate"]),
        "reattempt_rate": percent(s["reattempt_rate"]),
        "skip_rate": percent(s["skip_rate"]),
    }


def pipeline_rows(steps: dict[str, Any], link) -> list[dict[str, Any]]:
    """The pipeline's rows: each step with its runs now (linked to the list of exactly those runs)
    and its figures' texts."""
    until = steps["until"]
    rows = []
    for s in steps["steps"]:
        name = s["step_name"]
        row = figures_texts(s)
        row.update(
            step_name=name,
            position=s["position"],
            removed=s["removed"],
            few_samples=s["few_samples"],
            now=[
                count_cell(s[st], s[st] and link(status=st, step=name, created_to=until))
                for st in NOW_STATUSES
            ],
        )
        rows.append(row)
    return rows


def funnel_rows(funnel: dict[str, Any], link) -> list[dict[str, Any]]:
    """The funnel's rows: each step's "reached" and its runs there now (and cancelled there),
    each count linked to the list of exactly those runs."""
    since, until = funnel["since"], funnel["until"]
    return [
        {
            "step_name": s["step_name"],
            "reached": number(s["reached"]),
            "here": [
                count_cell(
                    s[st],
                    s[st]
                    and link(status=st, step=s["step_name"], created_from=since, created_to=until),
                )
                for st in FUNNEL_STATUSES
            ],
        }
        for s in funnel["steps"]
    ]


def revision_rows(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-revision tables: each revision's steps with their figures' texts."""
    out = []
    for r in revisions:
        steps = []
        for s in r["steps"]:
            row = figures_texts(s)
            row.update(
                step_name=s["step_name"],
                few_samples=s["few_samples"],
                rose=s["rose"],
                failure_rate_before=percent(s["failure_rate_before"]),
            )
            steps.append(row)
        out.append(
            {"app_revision": r["app_revision"], "attempts": number(r["attempts"]), "steps": steps}
        )
    return out


def throughput_chart(data: dict[str, Any], link) -> dict[str, Any]:
    zone = ZoneInfo(data["time_zone"]) if _known_zone(data["time_zone"]) else None
    buckets = data["buckets"]
    bucket = data["bucket"]
    labels = [bucket_label(b["from"], bucket, zone) for b in buckets]
    started = [b["started"] for b in buckets]
    finished = [b["finished"] for b in buckets]
    cancelled = [b["cancelled"] for b in buckets]
    rows = []
    for label, b in zip(labels, buckets, strict=True):
        s, f, c = b["started"], b["finished"], b["cancelled"]
        if not (s or f or c):
            continue
        rows.append(
            (
                label,
                (
                    count_cell(
                        s, s and link(status="all", created_from=b["from"], created_to=b["to"])
                    ),
                    count_cell(
                        f, f and link(status="finished", ended_from=b["from"], ended_to=b["to"])
                    ),
                    count_cell(
                        c, c and link(status="cancelled", ended_from=b["from"], ended_to=b["to"])
                    ),
                ),
            )
        )
    return {
        "id": "throughput",
        "caption": f"Runs started, finished and cancelled per {_bucket_words(bucket)} "
        f"over {data['window']} ({data['time_zone']})",
        "options": {
            "chart": {"type": "bar", "height": 260, "animations": {"enabled": False}},
            "series": [
                {"name": "Started", "data": started},
                {"name": "Finished", "data": finished},
                {"name": "Cancelled", "data": cancelled},
            ],
            "colors": ["#0969da", "#1a7f37", "#6e7781"],
            "xaxis": {"categories": labels, "tickAmount": 12},
            "dataLabels": {"enabled": False},
        },
        "table": {"head": ["Time", "Started", "Finished", "Cancelled"], "rows": rows},
        "empty": "No run started or ended in this window.",
    }


def durations_chart(data: dict[str, Any]) -> dict[str, Any]:
    bins = data["bins"]
    return {
        "id": "durations",
        "caption": f"End-to-end duration (started to finished) of the {data['finished']:,} runs "
        f"finished over {data['window']}",
        "options": {
            "chart": {"type": "bar", "height": 260, "animations": {"enabled": False}},
            "series": [{"name": "Runs", "data": [b["runs"] for b in bins]}],
            "colors": ["#1a7f37"],
            "xaxis": {"categories": [b["label"] for b in bins]},
            "dataLabels": {"enabled": False},
        },
        "table": {
            "head": ["Duration", "Runs"],
            "rows": [(b["label"], (count_cell(b["runs"], None),)) for b in bins if b["runs"]],
        },
        "empty": "No run finished in this window.",
    }


def _bucket_words(bucket: str) -> str:
    return {"day": "day", "hour": "hour"}.get(bucket, "5 minutes")


def _known_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
        return True
    except Exception:
        return False


def routes(d: Dashboard) -> list[Route]:
    def page(request: Request, template: str, fragments=None, **ctx: Any) -> Response:
        from pgbus.web.pages import NAV

        return d.render(
            request,
            template,
            fragments,
            nav=NAV,
            section="workflows",
            windows=WORKFLOW_INSIGHT_WINDOWS,
            percent=percent,
            secs=secs,
            statuses=NOW_STATUSES,
            status_words=STATUS_WORDS,
            **ctx,
        )

    def list_url(request: Request, **filters: Any) -> str:
        q = {k: iso(v) for k, v in filters.items() if v is not None}
        return d.route_path(request, "workflows") + "?" + _encode(q)

    def definitions(request: Request) -> Response:
        window = window_param(request)

        def rows() -> list[dict[str, Any]]:
            out = []
            for r in d.data.workflow_definitions(window):
                r = dict(r)
                r["loaded"] = loaded(r["workflow_class"])
                r["links"] = _overview_links(request, r)
                out.append(r)
            return out

        return page(
            request,
            "workflow_definitions.html",
            {"definitions": "_workflow_definitions.html"},
            window=window,
            rows=Lazy(rows),
        )

    def _overview_links(request: Request, r: dict[str, Any]) -> dict[str, Any]:
        cls = r["workflow_class"]
        return {
            "ongoing": list_url(
                request, status="ongoing", workflow_class=cls, created_to=r["until"]
            ),
            "paused": list_url(request, status="paused", workflow_class=cls, created_to=r["until"]),
            "finished": list_url(
                request,
                status="finished",
                workflow_class=cls,
                ended_from=r["since"],
                ended_to=r["until"],
            ),
            "cancelled": list_url(
                request,
                status="cancelled",
                workflow_class=cls,
                ended_from=r["since"],
                ended_to=r["until"],
            ),
            "stuck": d.route_path(request, "workflows_attention")
            + "?"
            + _encode({"workflow_class": cls}),
            "removed": [
                (
                    step,
                    list_url(
                        request,
                        status="ongoing",
                        workflow_class=cls,
                        step=step,
                        created_to=r["until"],
                    ),
                )
                for step in r["removed_steps"]
            ],
        }

    def definition(request: Request) -> Response:
        named = request.path_params["workflow_class"]
        try:
            cls = text_param(named, "workflow class")
        except BadInput:
            cls = None
        if cls is None or cls != named:  # (a name padded with spaces is another name)
            raise not_found("No such workflow class")
        window = window_param(request)
        region = request.query_params.get("fragment")
        if region is None:
            # The whole page: every block in one call.
            whole = d.data.workflow_class_page(cls, window)
            if whole is None:
                raise not_found("No such workflow class: no definition or run has this name")

            def block(name: str):
                key = "steps" if name == "steps+revisions" else name
                return Lazy(lambda: whole[key])
        else:
            # One region refreshing: only its block.
            if not d.data.workflow_class_exists(cls):
                raise not_found("No such workflow class: no definition or run has this name")

            def block(name: str):
                return Lazy(lambda: d.data.workflow_class_block(name, cls, window))

        # The Workflows list filtered to this class and more: list_url's answer, its first pair
        # quoted once for the page's ~100 links.
        prefix = d.route_path(request, "workflows") + "?" + _pair("workflow_class", cls)

        def link(**filters: Any) -> str:
            return prefix + "".join(
                "&" + _pair(k, iso(v)) for k, v in filters.items() if v is not None
            )

        steps, throughput, durations, funnel = (
            block("steps+revisions"),
            block("throughput"),
            block("durations"),
            block("funnel"),
        )
        return page(
            request,
            "workflow_definition.html",
            {
                "pipeline": "_workflow_pipeline.html",
                "charts": "_workflow_class_charts.html",
                "funnel": "_workflow_funnel.html",
                "revisions": "_workflow_revisions.html",
            },
            workflow_class=cls,
            loaded=loaded(cls),
            window=window,
            steps=steps,
            pipeline=Lazy(lambda: pipeline_rows(steps.get(), link)),
            funnel=funnel,
            funnel_rows=Lazy(lambda: funnel_rows(funnel.get(), link)),
            revisions=Lazy(lambda: revision_rows(steps["revisions"])),
            attention_url=d.route_path(request, "workflows_attention")
            + "?"
            + _encode({"workflow_class": cls}),
            link=link,
            charts=True,
            chart=Lazy(
                lambda: [throughput_chart(throughput.get(), link), durations_chart(durations.get())]
            ),
            durations=durations,
        )

    return [
        Route("/workflows/definitions", definitions, name="workflow_definitions"),
        # (A class name may hold "/".)
        Route(
            "/workflows/definitions/{workflow_class:path}", definition, name="workflow_definition"
        ),
    ]


@lru_cache(maxsize=4096)
def _pair(key: str, value: str) -> str:
    return quote_plus(key) + "=" + quote_plus(value)


def _encode(q: dict[str, str]) -> str:
    """urlencode(q), each key=value pair quoted once (a page repeats its window's bounds in
    about a hundred links)."""
    return "&".join(_pair(k, v) for k, v in q.items())
