"""Random arguments to every MCP tool (write tools on) through the real SDK client: each call
answers a tool result or a schema error, never a crash or a traceback, and a refused write
changes nothing."""

from __future__ import annotations

import uuid

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from tests.py.mcp_support import events, paused_run, server, waiting_run
from tests.py.web_support import dead_letter, enqueue

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
LEAKS = ("Traceback", "psycopg", 'File "', "Exception", "sqlstate")


def test_random_arguments_to_every_tool(db_url, conn):
    ids = enqueue(conn, "pgbus_default", n=3)
    dead_letter(conn, "pgbus_default", ids[0])
    runs = [paused_run(conn), waiting_run(conn)]
    srv = server(db_url, write_tools=True, allow_payloads=True)

    async def tool_schemas():
        async with Client(srv) as c:
            return {t.name: t.input_schema for t in (await c.list_tools()).tools}

    schemas = anyio.run(tool_schemas)
    names = sorted(schemas)

    def value_for(prop: str):
        special = {
            "workflow_id": st.sampled_from([*map(str, runs), str(uuid.uuid4()), "x", ""]),
            "queue": st.sampled_from(["pgbus_default", "pgbus_default_dlq", "nope", "", "a" * 300]),
            "name": st.one_of(st.sampled_from(["pgbus_default", "paid"]), st.text(max_size=300)),
            "expected_status": st.sampled_from(["paused", "running", "waiting", "nope", None]),
            "status": st.sampled_from(["ongoing", "all", "paused", "sleeping"]),
            "period": st.sampled_from(["1h", "24h", "2h", ""]),
            "reason": st.one_of(st.text(max_size=20), st.just("   "), st.just("x" * 501)),
            "subject_type": st.sampled_from(["Order", "", " ", None]),
            "subject_id": st.sampled_from(["1", "", None]),
        }
        times = st.sampled_from(
            ["2026-01-01T00:00", "2026-12-01T09:30:00Z", "0001-01-01T00:00:00-14:00", "nope", None]
        )
        for when in ("created_from", "created_to", "ended_from", "ended_to"):
            special[when] = times
        return st.one_of(special.get(prop, json_values), json_values)

    @st.composite
    def calls(draw):
        tool = draw(st.sampled_from(names))
        props = list(schemas[tool].get("properties", {}))
        chosen = draw(st.lists(st.sampled_from(props), unique=True)) if props else []
        args = {p: draw(value_for(p)) for p in chosen}
        if draw(st.booleans()):
            args[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
        return tool, args

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(call=calls())
    def run(call):
        tool, args = call
        before = [events(conn, r) for r in runs]

        async def go():
            async with Client(srv) as c:
                return await c.call_tool(tool, args)

        result = anyio.run(go)
        text = " ".join(getattr(part, "text", "") for part in result.content)
        for leak in LEAKS:
            assert leak not in text, (tool, args, text)
        if not result.is_error:
            assert result.structured_content is not None, (tool, args)
        answer = result.structured_content or {}
        if result.is_error or answer.get("ok") is False:
            assert [events(conn, r) for r in runs] == before, (tool, args, answer)

    run()
