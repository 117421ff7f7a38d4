"""Workflow insights tools: one row per workflow class, and one class's pipeline, throughput,
durations, funnel and per-revision figures, over a window. The same SQL as the dashboard's
Insights pages (pgbus.workflow_definitions_overview and pgbus.workflow_class_*, through
pgbus.data), so a tool and its page always agree."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pgbus.mcp.server import READ_ONLY, NoNul, Page, Tools, clamp_page, guarded, paged
from pydantic import Field, StringConstraints
from typing_extensions import TypedDict

Window = Annotated[
    Literal["1h", "24h", "7d", "30d"],
    Field(description="the window: 1h, 24h (the default), 7d or 30d; capped at workflow_retention"),
]
ClassName = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=255),
    Field(description="the workflow class, as pgbus_workflow_definitions lists it"),
    NoNul,
]
BLOCKS = ("steps", "throughput", "durations", "funnel", "revisions")
Block = Literal["steps", "throughput", "durations", "funnel", "revisions"]


class DefinitionsResult(Page):
    window: str
    since: str | None
    until: str | None
    definitions: list[dict[str, Any]]


class StatsResult(TypedDict):
    workflow_class: str
    window: str
    since: str
    until: str
    capped: bool
    bucket: str
    steps: dict[str, Any] | None
    throughput: dict[str, Any] | None
    durations: dict[str, Any] | None
    funnel: dict[str, Any] | None
    revisions: dict[str, Any] | None


WINDOW_KEYS = ("window", "since", "until", "capped", "bucket", "workflow_class")


def register(server: MCPServer, t: Tools) -> None:
    @server.tool(
        name="pgbus_workflow_definitions",
        title="Workflow classes over a window",
        description="One row per workflow class (every registered class and every class name "
        "still in the runs), as the dashboard's Insights by class page shows it: registered "
        "and its step count, ongoing, paused and stuck runs now, runs finished and cancelled "
        "in the window with the p50/p95 end-to-end duration (seconds), and ongoing runs on "
        "removed steps. Window 1h, 24h (default), 7d or 30d. Paged like the other lists "
        "(per_page at most 100). Drill into a class with pgbus_workflow_stats.",
        annotations=READ_ONLY,
    )
    @guarded
    def pgbus_workflow_definitions(
        window: Window = "24h", page: int = 1, per_page: int = 100
    ) -> DefinitionsResult:
        rows = t.data.workflow_definitions(window)
        page, per_page = clamp_page(page, per_page)
        offset = (page - 1) * per_page
        chunk = rows[offset : offset + per_page + 1]
        info = paged(chunk, page, per_page, len(rows), False)
        first = rows[0] if rows else {}
        shown = t.show([{k: v for k, v in r.items() if k not in ("since", "until")} for r in chunk])
        return {
            **info,
            "window": window,
            "since": t.show(first.get("since")),
            "until": t.show(first.get("until")),
            "definitions": shown[:per_page],
        }

    @server.tool(
        name="pgbus_workflow_stats",
        title="One workflow class's insights",
        description="One class over a window, as its dashboard Insights page shows it. steps: "
        "the pipeline in the definition's order (runs at each step now: ready, running, "
        "waiting, paused; of the attempts that ended in the window: run time and pickup "
        "p50/p95/p99 seconds, failure, reattempt and skip rates in percent, few_samples under "
        "20). throughput: runs started, finished, cancelled per bucket. durations: end-to-end "
        "p50/p95/p99 and a distribution. funnel: of the runs started in the window, how many "
        "reached each step and where they are now. revisions: the same figures for the last "
        "five app revisions, rose marking a failure rate up more than five points. Pass blocks "
        "to get only some of them.",
        annotations=READ_ONLY,
    )
    @guarded
    def pgbus_workflow_stats(
        workflow_class: ClassName,
        window: Window = "24h",
        blocks: Annotated[
            list[Block] | None,
            Field(description="which of steps, throughput, durations, funnel, revisions (all)"),
        ] = None,
    ) -> StatsResult:
        wanted = [b for b in BLOCKS if blocks is None or b in blocks]
        # Steps and revisions come from one read of the attempts, as the class's page asks.
        both = "steps" in wanted and "revisions" in wanted
        if len(wanted) == len(BLOCKS):
            # Every block: the class page's own call (pgbus.workflow_class_page), one round
            # trip that also says whether the class exists.
            whole = t.data.workflow_class_page(workflow_class, window)
            if whole is None:
                raise ToolError(f"Workflow class not found: {workflow_class[:200]}")
            answers = {
                "steps+revisions": whole["steps"],
                **{b: whole[b] for b in ("throughput", "durations", "funnel")},
            }
        else:
            # Some blocks: each its own call, as the page refreshes one region; they run side
            # by side on the data source's pool.
            if not t.data.workflow_class_exists(workflow_class):
                raise ToolError(f"Workflow class not found: {workflow_class[:200]}")
            calls = ["steps+revisions" if b == "steps" and both else b for b in wanted]
            calls = [c for c in calls if not (both and c == "revisions")]
            with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
                answers = dict(
                    zip(
                        calls,
                        pool.map(
                            lambda c: t.data.workflow_class_block(c, workflow_class, window),
                            calls,
                        ),
                        strict=True,
                    )
                )
        got: dict[str, dict[str, Any]] = {c: a for c, a in answers.items() if c in BLOCKS}
        if both:
            steps = answers["steps+revisions"]
            got["steps"] = {k: v for k, v in steps.items() if k != "revisions"}
            got["revisions"] = {
                k: v for k, v in steps.items() if k in WINDOW_KEYS or k == "revisions"
            }
        head = next(iter(got.values()), None) or t.data.workflow_class_block(
            "durations", workflow_class, window
        )
        result: dict[str, Any] = {
            "workflow_class": workflow_class,
            **{k: head.get(k) for k in WINDOW_KEYS if k != "workflow_class"},
        }
        for b in BLOCKS:
            result[b] = (
                {k: v for k, v in got[b].items() if k not in WINDOW_KEYS} if b in got else None
            )
        return t.show(result)
