"""The opt-in MCP write tools through the real SDK client, in process: each verb, every
refusal, expected_status against a real second session, the actor's name, and the switch."""

from __future__ import annotations

import threading

import psycopg
import pytest
from mcp import Client

import pgbus
from pgbus.config import ConfigurationError
from tests.py.mcp_support import (
    SECRET,
    call,
    client,
    events,
    later_run,
    paused_run,
    server,
    status,
    text_of,
    waiting_run,
)

pytestmark = pytest.mark.anyio

WRITE_TOOLS = {
    "pgbus_workflow_resume",
    "pgbus_workflow_cancel",
    "pgbus_workflow_skip_step",
    "pgbus_workflow_resume_at",
    "pgbus_workflow_run_now",
    "pgbus_workflow_signal",
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def signal_paid(c: Client, run: object, payload: dict) -> dict:
    """pgbus_workflow_signal `paid` with `payload` to `run`: its structured answer."""
    return await call(
        c, "pgbus_workflow_signal", workflow_id=str(run), name="paid", payload=payload, reason="r"
    )


async def names(c: Client) -> set[str]:
    return {t.name for t in (await c.list_tools()).tools}


async def test_off_by_default_the_write_tools_do_not_exist(db_url):
    async with client(db_url) as off:
        listed_off = await names(off)
        r = await off.call_tool("pgbus_workflow_cancel", {"workflow_id": "x", "reason": "r"})
        assert r.is_error
    assert not WRITE_TOOLS & listed_off
    pgbus.configure(mcp_write_tools=True)
    async with client(db_url) as on:
        listed_on = await names(on)
    assert listed_on == listed_off | WRITE_TOOLS  # the read tools are the same either way


def test_the_setting_is_a_validated_boolean(db_url):
    with pytest.raises(ConfigurationError):
        pgbus.configure(mcp_write_tools="yes")
    from pgbus.config import from_environment

    assert from_environment({"PGBUS_MCP_WRITE_TOOLS": "true"}).mcp_write_tools is True
    assert from_environment({}).mcp_write_tools is False


async def test_annotations(db_url):
    async with client(db_url, write_tools=True) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    for name in WRITE_TOOLS:
        a = tools[name].annotations
        assert (a.read_only_hint, a.destructive_hint) == (False, True), name
        assert a.idempotent_hint is (name == "pgbus_workflow_cancel"), name
        assert tools[name].output_schema["required"] == ["ok", "reason", "workflow"]


async def test_resume_with_reason_and_actor(db_url, conn):
    run = paused_run(conn)
    async with client(db_url, write_tools=True) as c:
        r = await call(
            c,
            "pgbus_workflow_resume",
            workflow_id=str(run),
            reason="  fixed the bug  ",
            expected_status="paused",
        )
    assert r["ok"] and r["reason"] == "Resumed" and r["workflow"]["run"]["status"] == "ready"
    assert ("resumed", "mcp:test-agent", "fixed the bug") in events(conn, run)
    assert SECRET not in text_of(r)  # payloads always redacted in write answers


async def test_each_verb_acts(db_url, conn):
    paused, waiting, later = paused_run(conn), waiting_run(conn), later_run(conn)
    other_waiting = waiting_run(conn, "McpWaiting2")
    async with client(db_url, write_tools=True) as c:
        r = await call(
            c, "pgbus_workflow_resume_at", workflow_id=str(paused), step="two", reason="r"
        )
        assert r["ok"] and status(conn, paused) == "ready"
        r = await call(c, "pgbus_workflow_run_now", workflow_id=str(later), reason="hurry")
        assert r["ok"] and ("run_now", "mcp:test-agent", "hurry") in events(conn, later)
        r = await call(c, "pgbus_workflow_skip_step", workflow_id=str(waiting), reason="no need")
        assert r["ok"] and status(conn, waiting) == "ready"
        r = await call(
            c,
            "pgbus_workflow_signal",
            workflow_id=str(other_waiting),
            name="paid",
            payload={"amount": 5},
            idempotency_key="k1",
            reason="paid by hand",
        )
        assert r["ok"] and r["reason"] == "Signal delivered"
        again = await call(
            c,
            "pgbus_workflow_signal",
            workflow_id=str(other_waiting),
            name="paid",
            payload={"amount": 5},
            idempotency_key="k1",
            reason="retry",
        )
        assert again["ok"] and "Already delivered" in again["reason"]
        r = await call(c, "pgbus_workflow_cancel", workflow_id=str(later), reason="done")
        assert r["ok"] and status(conn, later) == "cancelled"
        r = await call(c, "pgbus_workflow_cancel", workflow_id=str(later), reason="done")
        assert not r["ok"] and r["code"] == "not_allowed" and r["status"] == "cancelled"


async def test_blank_idempotency_keys_are_no_key(db_url, conn):
    run = waiting_run(conn)
    async with client(db_url, write_tools=True) as c:
        for _ in range(2):
            r = await call(
                c,
                "pgbus_workflow_signal",
                workflow_id=str(run),
                name="other",
                idempotency_key="   ",
                reason="r",
            )
            assert r["ok"] and r["reason"] == "Signal delivered"
    n = conn.execute("SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = %s", (run,))
    assert n.fetchone()[0] == 2


async def test_refusals_change_nothing(db_url, conn):
    run = paused_run(conn)
    before = events(conn, run)
    async with client(db_url, write_tools=True) as c:
        r = await call(c, "pgbus_workflow_run_now", workflow_id=str(run), reason="r")
        assert not r["ok"] and r["code"] == "not_allowed" and r["status"] == "paused"
        assert r["available_actions"] == ["resume", "resume_at", "signal", "cancel"]
        assert "allows resume, resume_at, signal, cancel" in r["reason"]
        r = await call(c, "pgbus_workflow_skip_step", workflow_id=str(run), reason="r")
        assert not r["ok"] and r["code"] == "not_allowed"
        r = await call(
            c, "pgbus_workflow_cancel", workflow_id=str(run), reason="r", expected_status="running"
        )
        assert not r["ok"] and r["code"] == "status_changed" and r["status"] == "paused"
        assert r["workflow"]["run"]["status"] == "paused"
        missing = "00000000-0000-0000-0000-000000000001"
        r = await call(c, "pgbus_workflow_cancel", workflow_id=missing, reason="r")
        assert not r["ok"] and r["code"] == "not_found" and r["workflow"] is None
        r = await call(c, "pgbus_workflow_resume_at", workflow_id=str(run), step="nope", reason="r")
        assert not r["ok"] and r["code"] == "invalid"
        for bad in (
            {"reason": ""},
            {"reason": "   "},
            {"reason": "x" * 501},
            {},
            {"reason": "r", "expected_status": "sleeping"},
        ):
            res = await c.call_tool("pgbus_workflow_cancel", {"workflow_id": str(run), **bad})
            assert res.is_error, bad
        res = await c.call_tool(
            "pgbus_workflow_signal",
            {"workflow_id": str(run), "name": "n", "reason": "r", "payload": [1]},
        )
        assert res.is_error
    assert events(conn, run) == before and status(conn, run) == "paused"


async def test_a_signal_name_or_key_over_255_characters_is_refused_by_the_schema(db_url, conn):
    """The signal's name and idempotency key: 255 characters are taken, 256 are a tool error
    (the tool's schema) that delivers nothing."""
    run = waiting_run(conn)
    before = events(conn, run)

    def signals() -> list[tuple[int, int | None]]:
        return conn.execute(
            "SELECT length(name), length(idempotency_key) FROM pgbus.workflow_signals"
            " WHERE workflow_id = %s",
            (run,),
        ).fetchall()

    async with client(db_url, write_tools=True) as c:
        for args in (
            {"name": "n" * 256},
            {"name": "n" * 256, "idempotency_key": "k"},
            {"name": "n", "idempotency_key": "k" * 256},
        ):
            res = await c.call_tool(
                "pgbus_workflow_signal",
                {"workflow_id": str(run), "payload": {}, "reason": "r", **args},
            )
            assert res.is_error and res.structured_content is None, args
            assert "255" in res.content[0].text, args
        assert signals() == [] and events(conn, run) == before
        r = await call(
            c,
            "pgbus_workflow_signal",
            workflow_id=str(run),
            name="n" * 255,
            idempotency_key="k" * 255,
            payload={},
            reason="r",
        )
    assert r["ok"] and r["reason"] == "Signal delivered"
    assert signals() == [(255, 255)] and status(conn, run) == "waiting"


async def test_a_payload_over_the_limit_is_refused(db_url, conn):
    run = waiting_run(conn)
    conn.execute("SELECT pgbus.setting_set('workflow_max_payload_size', '300')")
    pgbus.configure(workflow_max_payload_size=300)
    async with client(db_url, write_tools=True) as c:
        r = await signal_paid(c, run, {"x": "y" * 1000})
    assert not r["ok"] and r["code"] == "too_large" and status(conn, run) == "waiting"


async def test_a_nul_character_is_bad_input_and_changes_nothing(db_url, conn):
    """PostgreSQL stores no NUL character: in a text argument it is a tool error that says so,
    in a payload a refusal (invalid); never "an unexpected error" with a traceback logged."""
    run = waiting_run(conn)
    before = events(conn, run)
    async with client(db_url, write_tools=True) as c:
        for args in (
            {"name": "pa\x00id", "reason": "r"},
            {"name": "paid", "reason": "r\x00"},
            {"name": "paid", "reason": "r", "idempotency_key": "k\x00"},
        ):
            res = await c.call_tool(
                "pgbus_workflow_signal", {"workflow_id": str(run), "payload": {}, **args}
            )
            assert res.is_error and "NUL character" in text_of(res), args
        for payload in ({"u": "a\x00b"}, {"k\x00": 1}, {"deep": [{"x": ["\x00"]}]}):
            r = await signal_paid(c, run, payload)
            assert not r["ok"] and r["code"] == "invalid", payload
        for tool, args in (
            ("pgbus_workflows", {"workflow_class": "A\x00"}),
            ("pgbus_queue_detail", {"name": "q\x00"}),
            ("pgbus_jobs", {"queue": "q\x00"}),
            ("pgbus_workflow_stats", {"workflow_class": "A\x00"}),
        ):
            res = await c.call_tool(tool, args)
            assert res.is_error and "NUL character" in text_of(res), tool
    assert events(conn, run) == before and status(conn, run) == "waiting"


async def test_a_server_of_its_own_database_checks_payloads_there(db_url, conn):
    """A server built on its own DataSource, in a process whose settings name no database:
    a payload above the smallest limit is delivered, and one above the database's limit is
    refused by the database (the limit is not read through the process's settings)."""
    from pgbus.db import close_pool

    run = waiting_run(conn)
    close_pool()
    pgbus.config.reset()
    async with client(db_url, write_tools=True) as c:
        r = await signal_paid(c, run, {"note": "y" * 400})
        assert r["ok"], r
        conn.execute("SELECT pgbus.setting_set('workflow_max_payload_size', '300')")
        other = waiting_run(conn, "OwnLimit")
        r = await signal_paid(c, other, {"note": "y" * 400})
    assert not r["ok"] and r["code"] == "too_large" and status(conn, other) == "waiting"


async def test_expected_status_races_a_second_session(db_url, conn):
    """Another session cancels the run and holds its row lock; the MCP call that expected it
    paused waits for the lock, then sees it moved on and does nothing."""
    run = paused_run(conn)
    other = psycopg.connect(db_url)
    other.execute("SELECT pgbus.workflow_command(%s, 'cancel', 'ops', 'elsewhere')", (run,))
    released = threading.Timer(0.5, other.commit)
    released.start()
    try:
        async with client(db_url, write_tools=True) as c:
            r = await call(
                c,
                "pgbus_workflow_resume",
                workflow_id=str(run),
                reason="r",
                expected_status="paused",
            )
    finally:
        released.join()
        other.close()
    assert not r["ok"] and r["code"] == "status_changed" and r["status"] == "cancelled"
    assert [e for e in events(conn, run) if e[1] and e[1].startswith("mcp")] == []


@pytest.mark.parametrize(
    ("name", "actor"),
    [
        ("claude-desktop", "mcp:claude-desktop"),
        (None, "mcp:mcp"),  # the SDK's client names itself "mcp" when not told otherwise
        ("evil\x00\x1b[31m\nname\u200b", "mcp:evil[31mname"),
        ("\x07\x08", "mcp"),
        ("a" * 300, "mcp:" + "a" * 100),
    ],
)
async def test_the_actor_names_the_client(db_url, conn, name, actor):
    run = paused_run(conn)
    async with client(db_url, name=name, write_tools=True) as c:
        assert (await call(c, "pgbus_workflow_cancel", workflow_id=str(run), reason="r"))["ok"]
    assert events(conn, run)[-1][:2] == ("cancelled", actor)


async def test_an_unexpected_failure_answers_a_fixed_reason(db_url, conn, caplog):
    run = paused_run(conn)
    srv = server(db_url, write_tools=True)
    conn.execute(
        "ALTER FUNCTION pgbus.workflow_command_expecting(uuid, text, text, text, jsonb, text)"
        " RENAME TO workflow_command_expecting_gone"
    )
    try:
        async with Client(srv) as c:
            r = await call(c, "pgbus_workflow_cancel", workflow_id=str(run), reason="r")
    finally:
        conn.execute(
            "ALTER FUNCTION pgbus.workflow_command_expecting_gone(uuid, text, text, text,"
            " jsonb, text) RENAME TO workflow_command_expecting"
        )
    assert r == {
        "ok": False,
        "reason": "Not done: an unexpected error (it is in the pgbus log)",
        "workflow": None,
        "code": "error",
    }
    assert "workflow_command_expecting" in caplog.text  # logged, never answered
    assert status(conn, run) == "paused"


# -- instrumentation: the same events as the Python API's verbs ---------------------------------


@pytest.fixture
def recorded():
    from pgbus.instrumentation import subscribe

    seen: list[tuple[str, dict]] = []
    sub = subscribe("pgbus.workflow*", lambda name, payload: seen.append((name, payload)))
    yield seen
    sub.unsubscribe()


def shape(seen: list[tuple[str, dict]]) -> list[tuple[str, list[str]]]:
    return [(n, sorted(p)) for n, p in seen if n != "pgbus.workflow.gauge"]


async def test_write_tools_emit_the_events_the_python_api_emits(db_url, conn, recorded):
    from pgbus.workflow.runs import WorkflowRun

    by_api = {"cancel": later_run(conn, "ApiLater"), "signal": waiting_run(conn, "ApiWait")}
    by_mcp = {"cancel": later_run(conn), "signal": waiting_run(conn)}
    skipped = waiting_run(conn, "McpSkip")
    WorkflowRun(by_api["cancel"], "ApiLater").cancel(actor="ops", reason="api")
    WorkflowRun(by_api["signal"], "ApiWait").signal("paid", {"n": 1}, actor="ops", reason="api")
    api_events = list(recorded)
    recorded.clear()
    async with client(db_url, write_tools=True) as c:
        await call(c, "pgbus_workflow_cancel", workflow_id=str(by_mcp["cancel"]), reason="mcp")
        await call(
            c,
            "pgbus_workflow_signal",
            workflow_id=str(by_mcp["signal"]),
            name="paid",
            payload={"n": 1},
            reason="mcp",
        )
        mcp_events = list(recorded)
        # a refusal and a duplicate-key answer: nothing done, nothing (new) emitted
        recorded.clear()
        r = await call(c, "pgbus_workflow_resume", workflow_id=str(by_mcp["cancel"]), reason="x")
        assert not r["ok"] and recorded == []
        await call(c, "pgbus_workflow_skip_step", workflow_id=str(skipped), reason="skip it")
    assert (
        shape(mcp_events)
        == shape(api_events)
        == [
            ("pgbus.workflow_cancelled", ["actor", "error_class", "workflow_class", "workflow_id"]),
            (
                "pgbus.workflow.signal",
                [
                    "actor",
                    "duplicate_delivery",
                    "name",
                    "signal_id",
                    "woke",
                    "workflow_class",
                    "workflow_id",
                ],
            ),
        ]
    )
    cancelled, signal = mcp_events[0][1], mcp_events[1][1]
    assert cancelled["workflow_class"] == "McpLater" and str(cancelled["workflow_id"]) == str(
        by_mcp["cancel"]
    )
    assert cancelled["actor"] == signal["actor"] == "mcp:test-agent"
    assert signal["name"] == "paid" and signal["woke"] and not signal["duplicate_delivery"]
    assert ("cancelled", "mcp:test-agent", "mcp") in events(conn, by_mcp["cancel"])
    assert ("signal_received", "mcp:test-agent", "mcp") in events(conn, by_mcp["signal"])
    # skip moves the waiting run on to its next step: no run-level event, as with the API
    assert status(conn, skipped) == "ready"
    assert [n for n, _ in recorded if n != "pgbus.workflow.gauge"] == []
    assert ("step_skipped", "mcp:test-agent", "skip it") in events(conn, skipped)
