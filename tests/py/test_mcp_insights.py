"""The MCP insights tools (pgbus_workflow_definitions, pgbus_workflow_stats) through the real SDK
client, against the same SQL as the dashboard's Insights pages: on the same runs the tool and
the page agree, and the tools page, refuse and annotate like the other read tools."""

from __future__ import annotations

import html
import re

import pytest
from pgbus.mcp.redact import jsonable

from pgbus.data import DataSource
from tests.py.mcp_support import call, client, error
from tests.py.test_web_insights import shop  # noqa: F401 (a fixture)
from tests.py.web_support import client as web_client

pytestmark = pytest.mark.anyio
WINDOW_KEYS = {"window", "since", "until", "capped", "bucket", "workflow_class"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def without(value, keys):
    """`value` without the keys whose values follow the clock (window bounds, bucket edges)."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without(v, keys) for v in value]
    return value


async def test_the_insights_tools_are_read_only_with_output_schemas(db_url):
    async with client(db_url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    for name in ("pgbus_workflow_definitions", "pgbus_workflow_stats"):
        a = tools[name].annotations
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
            True,
            False,
            True,
            False,
        )
        assert tools[name].output_schema.get("required"), name


@pytest.mark.parametrize("window", ["1h", "24h", "7d", "30d"])
async def test_definitions_are_the_pages_rows(db_url, shop, window):  # noqa: F811
    r = web_client(db_url).get(f"/workflows/definitions?window={window}")
    assert r.status_code == 200
    on_page = re.findall(r'<tr data-class="([^"]+)">', r.text)
    data = DataSource(db_url)
    try:
        rows = data.workflow_definitions(window)
    finally:
        data.close()
    async with client(db_url) as c:
        got = await call(c, "pgbus_workflow_definitions", window=window)
    assert [d["workflow_class"] for d in got["definitions"]] == on_page
    assert got["window"] == window and got["total"] == len(rows) and not got["has_more"]
    assert got["definitions"] == without(jsonable(rows), {"since", "until"})
    shop_row = next(d for d in got["definitions"] if d["workflow_class"] == "ShopFlow")
    assert (shop_row["ongoing"], shop_row["paused"], shop_row["stuck"]) == (3, 1, 1)
    assert (shop_row["finished"], shop_row["cancelled"]) == (2, 1)
    gone = next(d for d in got["definitions"] if d["workflow_class"] == "GoneFlow")
    assert gone["registered"] is False


async def test_definitions_page_and_cap(db_url, shop):  # noqa: F811
    async with client(db_url) as c:
        first = await call(c, "pgbus_workflow_definitions", per_page=1)
        second = await call(c, "pgbus_workflow_definitions", per_page=1, page=2)
        huge = await call(c, "pgbus_workflow_definitions", per_page=1000)
        r = await c.call_tool("pgbus_workflow_definitions", {"window": "2h"})
    assert first["per_page"] == 1 and first["has_more"] and len(first["definitions"]) == 1
    assert first["definitions"] != second["definitions"] and first["total"] == huge["total"]
    assert huge["per_page"] == 100
    assert r.is_error and "Traceback" not in r.content[0].text


async def test_stats_are_the_class_pages_blocks(db_url, shop):  # noqa: F811
    page = web_client(db_url).get("/workflows/definitions/ShopFlow?window=24h")
    assert page.status_code == 200
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())
    data = DataSource(db_url)
    try:
        blocks = {
            b: data.workflow_class_block(b, "ShopFlow", "24h")
            for b in ("steps", "throughput", "durations", "funnel", "revisions")
        }
    finally:
        data.close()
    async with client(db_url) as c:
        got = await call(c, "pgbus_workflow_stats", workflow_class="ShopFlow")
        some = await call(
            c, "pgbus_workflow_stats", workflow_class=" ShopFlow ", blocks=["funnel"], window="7d"
        )
    assert got["workflow_class"] == "ShopFlow" and got["window"] == "24h"
    assert got["bucket"] == blocks["steps"]["bucket"] and got["capped"] is False
    clock = {*WINDOW_KEYS, "from", "to"}
    for name, block in blocks.items():
        assert without(got[name], clock) == without(jsonable(block), clock), name
    steps = {s["step_name"]: s for s in got["steps"]["steps"]}
    assert list(steps) == ["charge", "ship"]
    assert (steps["ship"]["ready"], steps["ship"]["running"]) == (1, 1)
    assert steps["charge"]["paused"] == 1 and "charge" in words and "ship" in words
    assert sum(b["started"] for b in got["throughput"]["buckets"]) == 6
    assert got["durations"]["finished"] == 2
    assert some["window"] == "7d" and some["funnel"]["started"] == 6
    assert some["steps"] is None and some["throughput"] is None and some["revisions"] is None
    async with client(db_url) as c:
        none = await call(c, "pgbus_workflow_stats", workflow_class="ShopFlow", blocks=[])
        revs = await call(
            c, "pgbus_workflow_stats", workflow_class="ShopFlow", blocks=["revisions"]
        )
    assert none["bucket"] == "hour" and all(none[b] is None for b in blocks)
    assert revs["revisions"] == got["revisions"] and revs["steps"] is None


async def test_stats_refusals(db_url, shop):  # noqa: F811
    async with client(db_url) as c:
        assert "not found" in await error(c, "pgbus_workflow_stats", workflow_class="Nope")
        for bad in (
            {},
            {"workflow_class": ""},
            {"workflow_class": "ShopFlow", "window": "2d"},
            {"workflow_class": "ShopFlow", "blocks": ["nope"]},
        ):
            r = await c.call_tool("pgbus_workflow_stats", bad)
            assert r.is_error and "Traceback" not in r.content[0].text, bad
