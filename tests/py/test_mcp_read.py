"""The MCP read tools through the real SDK client, in process, on a test's own database."""

from __future__ import annotations

import pytest
from psycopg.types.json import Jsonb

from tests.py.mcp_support import SECRET, call, client, error, paused_run, text_of
from tests.py.web_support import dead_letter, enqueue, fail

pytestmark = pytest.mark.anyio

READ_TOOLS = {
    "pgbus_health",
    "pgbus_queues",
    "pgbus_queue_detail",
    "pgbus_processes",
    "pgbus_jobs",
    "pgbus_job_detail",
    "pgbus_dlq",
    "pgbus_dlq_detail",
    "pgbus_throughput",
    "pgbus_stats",
    "pgbus_recurring",
    "pgbus_deploy_tasks",
    "pgbus_workflow",
    "pgbus_workflows",
    "pgbus_workflows_attention",
    "pgbus_workflow_definitions",
    "pgbus_workflow_stats",
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def busy(conn):
    """A queue with waiting jobs (their arguments hold a secret), one failed, one dead letter."""
    ids = enqueue(conn, "pgbus_default", n=5, kwargs={"card": SECRET, "deep": {"x": [SECRET]}})
    fail(conn, "pgbus_default", ids[0])
    dead_letter(conn, "pgbus_default", ids[1])
    return ids


async def test_the_read_tools_are_listed_read_only_with_output_schemas(db_url):
    async with client(db_url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        init = c.session.initialize_result if hasattr(c.session, "initialize_result") else None
    assert set(tools) >= READ_TOOLS
    assert not any("write" in n or n.endswith(("_resume", "_cancel")) for n in tools)
    for name in READ_TOOLS:
        a = tools[name].annotations
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
            True,
            False,
            True,
            False,
        ), name
        assert tools[name].output_schema and tools[name].output_schema.get("required"), name
    del init


async def test_instructions_say_where_to_start_and_what_is_redacted(db_url):
    from tests.py.mcp_support import server

    text = server(db_url).instructions
    assert "pgbus_health" in text and "[redacted]" in text and "include_payloads" in text
    assert "Write tools are ON" not in text
    assert "Write tools are ON" in server(db_url, write_tools=True).instructions


async def test_health_queues_processes(db_url, conn, busy):
    conn.execute(
        "INSERT INTO pgbus.processes (kind, hostname, pid, metadata) VALUES ('worker', 'h', 1, '{}')"
    )
    async with client(db_url) as c:
        h = await call(c, "pgbus_health")
        assert h["status"] == "DEGRADED"  # a dead letter is waiting
        assert any("dead" in r.lower() for r in h["reasons"])
        q = {x["queue_name"]: x for x in (await call(c, "pgbus_queues"))["queues"]}
        assert q["pgbus_default"]["depth"] == 4 and q["pgbus_default_dlq"]["depth"] == 1
        d = await call(c, "pgbus_queue_detail", name="pgbus_default")
        assert d["queue"]["depth"] == 4 and {t["kind"] for t in d["tables"]} == {"queue", "archive"}
        assert "Queue not found" in await error(c, "pgbus_queue_detail", name="nope")
        p = (await call(c, "pgbus_processes"))["processes"]
        assert [(x["kind"], x["status"]) for x in p] == [("worker", "healthy")]


async def test_jobs_are_paged_capped_and_redacted(db_url, conn, busy):
    enqueue(conn, "pgbus_default", n=120)
    async with client(db_url) as c:
        first = await call(c, "pgbus_jobs", queue="pgbus_default", per_page=1000)
        assert first["per_page"] == 100 and len(first["jobs"]) == 100
        assert first["total"] == 124 and first["has_more"] and not first["total_capped"]
        second = await call(c, "pgbus_jobs", queue="pgbus_default", page=2, per_page=100)
        assert len(second["jobs"]) == 24 and not second["has_more"]
        ids = [j["msg_id"] for j in first["jobs"] + second["jobs"]]
        assert ids == sorted(ids, reverse=True) and len(set(ids)) == 124
        everything = await call(c, "pgbus_jobs")
        assert everything["queue"] is None and everything["total"] == 124
        assert (await call(c, "pgbus_jobs", per_page=0))["per_page"] == 1
        assert (await call(c, "pgbus_jobs", page=10**9, per_page=100))["page"] == 100
        assert SECRET not in text_of(first) + text_of(second)
        assert all(
            j["message"] == "[redacted]" and j["headers"] in ("[redacted]", None)
            for j in first["jobs"]
        )
        assert "is a dead-letter queue" in await error(c, "pgbus_jobs", queue="pgbus_default_dlq")


async def test_total_is_capped_at_ten_thousand(db_url, conn):
    conn.execute(
        "SELECT pgbus.ensure_queue('pgbus_default'),"
        " pgmq.send_batch('pgbus_default', array_fill('{}'::jsonb, ARRAY[10050]))"
    )
    async with client(db_url) as c:
        r = await call(c, "pgbus_jobs", queue="pgbus_default", per_page=100, page=100)
    assert r["total"] == 10_000 and r["total_capped"]
    assert len(r["jobs"]) == 100 and not r["has_more"]  # the last page the cap reaches


async def test_job_and_dead_letter_detail(db_url, conn, busy):
    async with client(db_url) as c:
        j = (await call(c, "pgbus_job_detail", queue="pgbus_default", msg_id=busy[0]))["job"]
        assert j["error_class"] == "ConnectionError"
        assert j["error_message"] == "[redacted]" and j["backtrace"] == "[redacted]"
        assert "not found" in await error(c, "pgbus_job_detail", queue="pgbus_default", msg_id=999)
        assert "not found" in await error(c, "pgbus_job_detail", queue="nope", msg_id=1)
        dl = await call(c, "pgbus_dlq")
        assert dl["total"] == 1 and len(dl["messages"]) == 1
        mid = dl["messages"][0]["msg_id"]
        m = (await call(c, "pgbus_dlq_detail", msg_id=mid))["message"]
        assert m["queue_name"] == "pgbus_default_dlq" and m["message"] == "[redacted]"
        m2 = await call(c, "pgbus_dlq_detail", msg_id=mid, queue="pgbus_default_dlq")
        assert m2["message"]["msg_id"] == mid
        assert "not found" in await error(c, "pgbus_dlq_detail", msg_id=mid + 100)
        assert "not found" in await error(c, "pgbus_dlq_detail", msg_id=mid, queue="pgbus_default")


async def test_an_id_in_two_dead_letter_queues_is_ambiguous(db_url, conn, busy):
    ids = enqueue(conn, "other", n=1)
    dead_letter(conn, "other", ids[0])
    a = conn.execute("SELECT max(msg_id) FROM pgmq.q_pgbus_default_dlq").fetchone()[0]
    b = conn.execute("SELECT max(msg_id) FROM pgmq.q_other_dlq").fetchone()[0]
    assert a == b == 1
    async with client(db_url) as c:
        assert "ambiguous" in await error(c, "pgbus_dlq_detail", msg_id=1)
        assert (await call(c, "pgbus_dlq", queue="other_dlq"))["total"] == 1


async def test_payloads_need_both_gates(db_url, conn, busy):
    run = paused_run(conn)
    calls = [
        ("pgbus_jobs", {"queue": "pgbus_default"}),
        ("pgbus_job_detail", {"queue": "pgbus_default", "msg_id": busy[0]}),
        ("pgbus_dlq", {}),
        ("pgbus_workflow", {"workflow_id": str(run)}),
    ]
    for allow in (False, True):
        async with client(db_url, allow_payloads=allow) as c:
            for tool, args in calls:
                closed = await call(c, tool, **args)
                assert SECRET not in text_of(closed), (tool, allow)
                opened = await call(c, tool, **args, include_payloads=True)
                assert (SECRET in text_of(opened)) is allow, (tool, allow)


async def test_throughput_and_stats(db_url, conn):
    conn.execute(
        "INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms)"
        " VALUES ('Mail', 'pgbus_default', 'success', 12, 3), ('Mail', 'pgbus_default', 'failed', 40, 5)"
    )
    async with client(db_url) as c:
        t = await call(c, "pgbus_throughput")
        assert t["period"] == "1h" and t["bucket_seconds"] == 60
        assert sum(b["success"] + b["failed"] for b in t["throughput"]) == 2
        s = await call(c, "pgbus_stats", period="24h")
        assert s["total"] == 2 and s["status_counts"]["failed"] == 1
        assert "period is one of" in await error(c, "pgbus_stats", period="2h")


async def test_recurring_and_deploy_tasks(db_url, conn):
    for i in range(3):
        conn.execute(
            "INSERT INTO pgbus.recurring_tasks (key, class_name, schedule, human_schedule,"
            " queue_name, arguments, next_run_at) VALUES (%s, 'Mail', '* * * * *', 'every minute',"
            " 'pgbus_default', %s, now())",
            (f"task{i}", Jsonb({"args": [SECRET], "kwargs": {}})),
        )
    async with client(db_url) as c:
        every = await call(c, "pgbus_recurring")
        assert [t["key"] for t in every["recurring_tasks"]] == ["task0", "task1", "task2"]
        assert SECRET not in text_of(every)
        page = await call(c, "pgbus_recurring", page=2, per_page=2)
        assert [t["key"] for t in page["recurring_tasks"]] == ["task2"] and page["total"] == 3
        d = await call(c, "pgbus_deploy_tasks")
        assert d["deploy_tasks"] == [] and "fleet" in d


async def test_workflow_detail(db_url, conn):
    run = paused_run(conn)
    async with client(db_url) as c:
        w = await call(c, "pgbus_workflow", workflow_id=str(run))
        assert w["run"]["status"] == "paused" and w["run"]["facts"]["error_class"] == "KeyError"
        assert w["run"]["facts"]["kind"] == "paused_error"
        assert "resume" in w["available_actions"] and w["steps"] == ["one", "two"]
        assert [a["status"] for a in w["attempts"]] == ["failed"]
        assert [e["event"] for e in w["events"]][-1] == "paused"
        assert w["arguments"] == "[redacted]"
        a = w["attempts"][0]
        assert a["error_class"] == "KeyError"
        assert a["error_message"] == a["backtrace"] == w["run"]["facts"]["error_message"]
        assert a["error_message"] == "[redacted]" and SECRET not in text_of(w)
        conn.execute(
            "SELECT pgbus.workflow_event(%s, 'repair_failed', NULL, 'pgbus', %s, '{}')",
            (run, f"duplicate key {SECRET}"),
        )
        w = await call(c, "pgbus_workflow", workflow_id=str(run))
        assert w["events"][-1]["event"] == "repair_failed" and SECRET not in text_of(w)
        assert w["events"][-1]["reason"] == "[redacted]"
        missing = "00000000-0000-0000-0000-000000000000"
        assert "not found" in await error(c, "pgbus_workflow", workflow_id=missing)
        r = await c.call_tool("pgbus_workflow", {"workflow_id": "not-a-uuid"})
        assert r.is_error and "Traceback" not in r.content[0].text


async def test_a_database_failure_is_a_fixed_tool_error(db_url):
    from mcp import Client
    from pgbus.mcp import build_server

    from pgbus.data import DataSource

    broken = DataSource("postgresql://postgres@127.0.0.1:1/none?connect_timeout=1")
    async with Client(build_server(broken)) as c:
        r = await c.call_tool("pgbus_queues", {})
    assert r.is_error and r.content[0].text.endswith(
        "pgbus could not answer that: see the server's log"
    )
    assert "Pool" not in r.content[0].text and "Traceback" not in r.content[0].text


async def test_workflows_list_filters_and_pages(db_url, conn):
    from tests.py.mcp_support import later_run, waiting_run

    paused = [paused_run(conn) for _ in range(3)]
    waiting = waiting_run(conn)
    later = later_run(conn)
    conn.execute("SELECT pgbus.workflow_command(%s, 'cancel', 'ops', 'x')", (later,))
    async with client(db_url) as c:
        ongoing = await call(c, "pgbus_workflows")
        assert ongoing["status"] == "ongoing" and ongoing["total"] == 4
        assert {r["workflow_id"] for r in ongoing["runs"]} == {str(x) for x in [*paused, waiting]}
        everything = await call(c, "pgbus_workflows", status="all")
        assert everything["total"] == 5
        ids = [r["workflow_id"] for r in everything["runs"]]
        assert ids[0] == str(later)  # newest first
        p = await call(
            c,
            "pgbus_workflows",
            status="paused",
            error_class="KeyError",
            step="one",
            workflow_class="McpPaused",
            per_page=2,
        )
        assert p["total"] == 3 and len(p["runs"]) == 2 and p["has_more"]
        p2 = await call(c, "pgbus_workflows", status="paused", per_page=2, page=2)
        assert len(p2["runs"]) == 1 and not p2["has_more"]
        assert {r["workflow_id"] for r in p["runs"] + p2["runs"]} == {str(x) for x in paused}
        assert (await call(c, "pgbus_workflows", status="cancelled"))["total"] == 1
        assert (await call(c, "pgbus_workflows", workflow_class="Nope"))["runs"] == []
        assert all(r["facts"]["error_message"] == "[redacted]" for r in p["runs"])
        assert all(r["facts"]["error_class"] == "KeyError" for r in p["runs"])
        assert SECRET not in text_of(everything)
        r = await c.call_tool("pgbus_workflows", {"status": "sleeping"})
        assert r.is_error


async def test_workflows_attention_groups_the_stuck_runs(db_url, conn):
    for _ in range(3):
        paused_run(conn)
    paused_run(conn, "McpOther")
    async with client(db_url) as c:
        a = await call(c, "pgbus_workflows_attention")
        assert a["stuck_runs"] == 4
        top = a["groups"][0]
        assert (
            top["workflow_class"],
            top["step_name"],
            top["reason"],
            top["error_class"],
            top["runs"],
        ) == ("McpPaused", "one", "paused_error", "KeyError", 3)
        assert top["first_seen"] <= top["last_seen"] and top["newest_error"] == "[redacted]"
        one = await call(c, "pgbus_workflows_attention", workflow_class="McpOther")
        assert [g["runs"] for g in one["groups"]] == [1]
        assert SECRET not in text_of(a)
