"""The MCP workflow read tools and the dashboard's Workflows pages answer from the same SQL
(pgbus.workflow_list, workflow_list_count, workflow_attention, workflow_detail): on the same
runs, the tool and the page show the same rows, totals, groups and run details."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from pgbus.mcp.redact import jsonable, redact

import pgbus
from pgbus.data import DataSource
from tests.py.mcp_support import call, client, text_of
from tests.py.test_web_workflow_pages import rows, runs  # noqa: F401 (a fixture)
from tests.py.web_support import client as web_client

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend():
    return "asyncio"


# Figures counted against the clock for what is still going on (seconds until due, running
# for, paused for, ...) move between two reads.
CLOCK_FACTS = (
    "due_seconds",
    "overdue_seconds",
    "running_seconds",
    "timeout_seconds",
    "seconds",
    "queued",
    "ran",
    "waiting",
)


def steady(value):
    """`value` without the clock-relative facts and the detail's reading time."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in CLOCK_FACTS and k != "now"}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def page_text(r) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", r.text)).split())


# (tool arguments, the page's query string, pgbus.workflow_list arguments)
FILTERS = [
    ({}, "", {"only_status": "ongoing"}),
    ({"status": "all"}, "status=all", {"only_status": "all"}),
    ({"status": "paused"}, "status=paused", {"only_status": "paused"}),
    ({"status": "cancelled"}, "status=cancelled", {"only_status": "cancelled"}),
    (
        {"workflow_class": "OrderFlow"},
        "workflow_class=OrderFlow",
        {"only_status": "ongoing", "only_class": "OrderFlow"},
    ),
    ({"step": "capture"}, "step=capture", {"only_status": "ongoing", "only_step": "capture"}),
    (
        {"error_class": "TimeoutError", "status": "all"},
        "error_class=TimeoutError&status=all",
        {"only_status": "all", "only_error_class": "TimeoutError"},
    ),
    (
        {"subject_type": "Order", "subject_id": "3", "status": "all"},
        "subject_type=Order&subject_id=3&status=all",
        {"only_status": "all", "only_subject_type": "Order", "only_subject_id": "3"},
    ),
    (
        {"status": "all", "created_from": "2000-01-01T00:00:00", "ended_to": "2999-01-01T00:00"},
        "status=all&created_from=2000-01-01T00:00&ended_to=2999-01-01T00:00",
        {
            "only_status": "all",
            "created_from": "2000-01-01T00:00:00+00:00",
            "ended_to": "2999-01-01T00:00:00+00:00",
        },
    ),
]


@pytest.mark.parametrize(("tool_args", "query", "sql_args"), FILTERS)
async def test_the_run_list_shows_what_the_page_shows(db_url, runs, tool_args, query, sql_args):  # noqa: F811
    web = web_client(db_url)
    r = web.get("/workflows" + (f"?{query}" if query else ""))
    assert r.status_code == 200, r.text[:300]
    on_page = rows(r)
    data = DataSource(db_url)
    try:
        async with client(db_url, allow_payloads=True) as c:
            tool = await call(c, "pgbus_workflows", **tool_args, per_page=100)
            opened = await call(
                c, "pgbus_workflows", **tool_args, per_page=100, include_payloads=True
            )
        listed = data.workflow_runs(sql_args, None, 101)
        counted = data.workflow_runs_count(sql_args, 10_000)
    finally:
        data.close()
    assert [x["workflow_id"] for x in tool["runs"]] == on_page
    assert tool["total"] == counted["count"] == len(on_page)
    assert f"{tool['total']} matching run" in page_text(r)
    # The same rows, every column and fact: shown whole when both gates open, redacted else.
    assert steady(opened["runs"]) == steady(jsonable(listed))
    assert steady(tool["runs"]) == steady(redact(listed))


async def test_paging_visits_the_same_runs_in_the_same_order_as_the_pages_cursor(db_url, runs):  # noqa: F811
    pgbus.configure(database_url=db_url, web_per_page=3)
    web = web_client(db_url)
    by_page, url, pages = [], "/workflows?status=all", 0
    while url:
        r = web.get(url)
        by_page += rows(r)
        pages += 1
        nxt = re.search(r'<a href="([^"]+)" rel="next">', r.text)
        url = html.unescape(nxt.group(1)) if nxt else None
    assert pages == 4
    by_tool, page = [], 1
    async with client(db_url) as c:
        while True:
            got = await call(c, "pgbus_workflows", status="all", per_page=3, page=page)
            by_tool += [x["workflow_id"] for x in got["runs"]]
            if not got["has_more"]:
                break
            page += 1
    assert by_tool == by_page and len(by_tool) == len(set(by_tool)) == 11


async def test_attention_groups_are_the_pages_groups(db_url, runs):  # noqa: F811
    web = web_client(db_url)
    r = web.get("/workflows/attention")
    data = DataSource(db_url)
    try:
        groups = data.workflow_attention()
    finally:
        data.close()
    async with client(db_url, allow_payloads=True) as c:
        tool = await call(c, "pgbus_workflows_attention")
        opened = await call(c, "pgbus_workflows_attention", include_payloads=True)
        only = await call(c, "pgbus_workflows_attention", workflow_class="Welcome")
    assert opened["groups"] == jsonable(groups) and tool["groups"] == redact(groups)
    assert tool["stuck_runs"] == sum(g["runs"] for g in groups) >= 6
    text = page_text(r)
    for g in tool["groups"]:
        assert g["workflow_class"] in text and str(g["runs"]) in text
    top = tool["groups"][0]
    assert (top["workflow_class"], top["step_name"], top["error_class"], top["runs"]) == (
        "OrderFlow",
        "capture",
        "TimeoutError",
        5,
    )
    assert top["newest_error"] == "[redacted]" and "gateway timed out" in text
    assert {g["workflow_class"] for g in only["groups"]} == {"Welcome"}


async def test_a_run_is_what_its_page_shows(db_url, runs):  # noqa: F811
    run = runs["paused"][0]
    web = web_client(db_url)
    r = web.get(f"/workflows/{run}")
    text = page_text(r)
    data = DataSource(db_url)
    try:
        detail = data.workflow(run)
    finally:
        data.close()
    async with client(db_url, allow_payloads=True) as c:
        tool = await call(c, "pgbus_workflow", workflow_id=run)
        opened = await call(c, "pgbus_workflow", workflow_id=run, include_payloads=True)
    expected = {k: v for k, v in detail.items() if k != "actions"}
    expected["available_actions"] = detail["actions"]
    assert steady(opened) == steady(jsonable(expected))
    assert steady(tool) == steady(redact(expected))
    assert "s3cret" in text_of(opened) and "s3cret" not in text_of(tool)
    assert tool["run"]["facts"]["kind"] == "paused_error" and "TimeoutError" in text
    assert tool["steps"] == ["capture", "receipt"]
    for verb in tool["available_actions"]:
        assert f"/workflows/{run}/{verb}" in r.text
    assert f"/workflows/{run}/cancel" in r.text and "cancel" in tool["available_actions"]
    assert [a["error_class"] for a in tool["attempts"]] == ["TimeoutError"]
    assert tool["attempts"][0]["causes"] == "[redacted]"


def test_the_mcp_server_has_no_sql_of_its_own():
    """Every read goes through pgbus.data (the dashboard's read layer): no statement in the
    server's modules."""
    for path in (ROOT / "mcp_server").glob("*.py"):
        source = path.read_text()
        for word in ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", ".execute(", "psycopg.connect"):
            assert word not in source, (path.name, word)
