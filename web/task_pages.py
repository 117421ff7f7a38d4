"""The Recurring and Deploy tasks pages and their actions (Run now, Enable/Disable).

Reads go through `pgbus.data.DataSource` (one SQL function or view each), actions through
`Dashboard.act` (one SQL function each, recorded in pgbus.operator_actions)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pgbus.web.app import Lazy, not_found
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from pgbus.web.app import Dashboard


def _fleet(fleet: dict[str, Any]) -> dict[str, Any]:
    """The fleet status with its JSON timestamps as datetimes (for the `when` filter)."""
    for row in [*fleet.get("revisions", []), *fleet.get("processes", [])]:
        for k in ("last_started_at", "started_at", "last_heartbeat_at"):
            if isinstance(row.get(k), str):
                row[k] = datetime.fromisoformat(row[k])
    return fleet


TASK_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
TOGGLES = {"enable": True, "disable": False}


def key_param(value: str) -> str:
    if not TASK_KEY.fullmatch(value):
        raise not_found("No such task")
    return value


def routes(d: Dashboard, nav: tuple[tuple[str, str], ...]) -> list[Route]:
    def page(request: Request, template: str, section: str, fragments: dict[str, str], **ctx: Any):
        return d.render(request, template, fragments, nav=nav, section=section, **ctx)

    # -- recurring -----------------------------------------------------------------------

    def recurring(request: Request) -> Response:
        return page(
            request,
            "recurring.html",
            "recurring",
            {"recurring": "_recurring_table.html"},
            tasks=Lazy(d.data.recurring_tasks),
        )

    def recurring_task(request: Request) -> Response:
        key = key_param(request.path_params["key"])
        task = d.data.recurring_task(key)
        if task is None:
            raise not_found("No such recurring task")
        return page(
            request,
            "recurring_task.html",
            "recurring",
            {"task": "_recurring_task.html", "executions": "_recurring_executions.html"},
            task=task,
            executions=Lazy(lambda: d.data.recurring_executions(key, 25)),
        )

    async def recurring_action(request: Request) -> Response:
        key = key_param(request.path_params["key"])
        action = request.path_params["action"]
        back = request.url_for("recurring_task", key=key).path
        if action == "run":
            return await d.act(request, "recurring_task_run_now", back, {"task_key": key})
        if action in TOGGLES:
            return await d.act(
                request,
                "recurring_task_toggle",
                back,
                {"task_key": key, "enabled": TOGGLES[action]},
            )
        raise not_found("No such action")

    # -- deploy tasks --------------------------------------------------------------------

    def deploy_tasks(request: Request) -> Response:
        return page(
            request,
            "deploy_tasks.html",
            "deploy_tasks",
            {"rollover": "_rollover.html", "tasks": "_deploy_tasks_table.html"},
            fleet=Lazy(lambda: _fleet(d.data.fleet_status())),
            tasks=Lazy(d.data.deploy_tasks),
        )

    def deploy_task(request: Request) -> Response:
        key = key_param(request.path_params["key"])
        task = d.data.deploy_task(key)
        if task is None:
            raise not_found("No such deploy task")
        return page(
            request,
            "deploy_task.html",
            "deploy_tasks",
            {"task": "_deploy_task.html", "runs": "_deploy_task_runs.html"},
            task=task,
            fleet=Lazy(lambda: _fleet(d.data.fleet_status())),
            runs=Lazy(lambda: d.data.deploy_task_runs(key, 25)),
        )

    async def deploy_action(request: Request) -> Response:
        key = key_param(request.path_params["key"])
        action = request.path_params["action"]
        back = request.url_for("deploy_task", key=key).path
        if action in TOGGLES:
            return await d.act(
                request, "deploy_task_toggle", back, {"task_key": key, "enabled": TOGGLES[action]}
            )
        if action != "run":
            raise not_found("No such action")
        fields = await d.form(request)
        operator = "dashboard:" + str(getattr(request.state, "operator", "anonymous"))
        outcome = await run_in_threadpool(d.data.act, "deploy_task_run_now", operator, task_key=key)
        if outcome.get("ok"):
            from pgbus.scheduler import emit_deploy_enqueue

            emit_deploy_enqueue(outcome)
        return d.done(request, d.back(request, fields, back), outcome)

    return [
        Route("/recurring", recurring, name="recurring"),
        Route("/recurring/{key}", recurring_task, name="recurring_task"),
        Route(
            "/recurring/{key}/{action}", recurring_action, methods=["POST"], name="recurring_action"
        ),
        Route("/deploy-tasks", deploy_tasks, name="deploy_tasks"),
        Route("/deploy-tasks/{key}", deploy_task, name="deploy_task"),
        Route(
            "/deploy-tasks/{key}/{action}", deploy_action, methods=["POST"], name="deploy_action"
        ),
    ]
