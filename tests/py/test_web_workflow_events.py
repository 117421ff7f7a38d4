"""The dashboard's workflow actions emit the instrumentation the same verb emits through the
Python API and the MCP write tools (pgbus.workflow.runs.emit_command, reached through
pgbus.data.DataSource): once per run acted on, with actor dashboard:<name>, after the change
committed; nothing for a refusal or for input SQL rolled back."""

from __future__ import annotations

import json

import psycopg
import pytest

import pgbus
from pgbus.instrumentation import subscribe
from pgbus.workflow.runs import WorkflowRun
from tests.py.web_support import client, post
from tests.py.workflow_page_support import (
    end_step,
    paused_on_error,
    register,
    start,
    status,
    take_steps,
)

ACTOR = "dashboard:alice"


@pytest.fixture
def seen(db_url):
    """Every pgbus.workflow* event (the gauge aside), each with the run's status as another
    session reads it while the subscriber runs: committed, or the old status."""
    got: list[tuple[str, dict, str | None]] = []

    def record(name: str, payload: dict) -> None:
        if name == "pgbus.workflow.gauge":
            return
        with psycopg.connect(db_url, autocommit=True) as other:
            row = other.execute(
                "SELECT status FROM pgbus.workflows WHERE workflow_id = %s",
                (str(payload["workflow_id"]),),
            ).fetchone()
        got.append((name, payload, row[0] if row else None))

    sub = subscribe("pgbus.workflow*", record)
    yield got
    sub.unsubscribe()


def act(c, run: str, verb: str, data: dict | None = None):
    r = post(c, f"/workflows/{run}/{verb.replace('_', '-')}", data, page=f"/workflows/{run}")
    assert r.status_code == 303, r.text
    return r


def paused(conn, cls: str) -> str:
    return paused_on_error(conn, cls, 1)[0]


def later(conn, cls: str) -> str:
    register(conn, cls, [{"name": "welcome", "wait": 3600}])
    return start(conn, cls)


def gated(conn, cls: str) -> str:
    """A run of one step parked waiting for signal `paid`."""
    register(conn, cls, [{"name": "confirm", "wait_for": "paid"}])
    run = start(conn, cls)
    for s in take_steps(conn, cls):
        end_step(conn, s["step_id"], "park")
    return run


def finished(conn, cls: str) -> str:
    register(conn, cls, [{"name": "only"}])
    run = start(conn, cls)
    for s in take_steps(conn, cls):
        end_step(conn, s["step_id"], "complete")
    return run


# verb, the run it acts on, the form, the same verb through the Python API, its events
CASES = [
    ("cancel", paused, {}, lambda w: w.cancel(actor=ACTOR), ["pgbus.workflow_cancelled"]),
    ("pause", later, {}, lambda w: w.pause(actor=ACTOR), ["pgbus.workflow_paused"]),
    (
        "signal",
        gated,
        {"name": "paid", "payload": '{"n": 1}'},
        lambda w: w.signal("paid", {"n": 1}, actor=ACTOR),
        ["pgbus.workflow.signal"],
    ),
    # the run's one step skipped: the run finished (that event names no actor)
    ("skip", gated, {}, lambda w: w.skip(actor=ACTOR), ["pgbus.workflow_finished"]),
    # verbs the event catalog has no event for: the audit trail records them, nothing emitted
    ("resume", paused, {}, lambda w: w.resume(actor=ACTOR), []),
    ("resume_at", paused, {"step": "receipt"}, lambda w: w.resume_at("receipt", actor=ACTOR), []),
    ("run_now", later, {}, lambda w: w.run_now(actor=ACTOR), []),
    ("rerun", finished, {}, lambda w: w.rerun(actor=ACTOR), []),
]


@pytest.mark.parametrize(
    ("verb", "make", "form", "by_api", "names"), CASES, ids=[c[0] for c in CASES]
)
def test_each_action_emits_what_the_api_emits_once_after_commit(
    db_url, conn, seen, verb, make, form, by_api, names
):
    twin = make(conn, "Api" + verb.title().replace("_", ""))
    by_api(WorkflowRun.find(twin))
    api_events = [(n, sorted(p)) for n, p, _ in seen]
    seen.clear()

    run = make(conn, "Web" + verb.title().replace("_", ""))
    pgbus.configure(database_url=db_url, web_actor=lambda request: "alice")
    c = client(db_url)
    act(c, run, verb, {"reason": "on call", **form})
    assert [(n, sorted(p)) for n, p, _ in seen] == api_events
    assert [n for n, _, _ in seen] == names
    for name, payload, status_then in seen:
        assert payload["workflow_class"] == "Web" + verb.title().replace("_", "")
        assert str(payload["workflow_id"]) == run
        if name != "pgbus.workflow_finished":
            assert payload["actor"] == ACTOR
        # emitted after the commit: another session already saw the new status
        assert status_then == status(conn, run)
    if verb == "signal":
        assert seen[0][1]["name"] == "paid" and seen[0][1]["woke"]
    # the audit trail has the verb by the same actor, whatever was emitted
    assert (
        conn.execute(
            "SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id = %s AND actor = %s",
            (run, ACTOR),
        ).fetchone()[0]
        >= 1
    )


def test_a_refused_action_emits_nothing(db_url, conn, seen):
    run = finished(conn, "Done")
    c = client(db_url)
    for verb in ("cancel", "pause", "resume", "skip"):
        act(c, run, verb)
    waiting = gated(conn, "Gate")
    act(c, waiting, "resume")  # a waiting run is not paused: refused
    assert seen == []
    assert status(conn, run) == "finished" and status(conn, waiting) == "waiting"


def test_an_action_sql_rolled_back_emits_nothing(db_url, conn, seen):
    run = gated(conn, "Big")
    conn.execute("SELECT pgbus.setting_set('workflow_max_payload_size', '300')")
    c = client(db_url)
    act(c, run, "signal", {"name": "paid", "payload": json.dumps({"b": "x" * 400})})
    assert seen == []
    assert status(conn, run) == "waiting"
    assert (
        conn.execute(
            "SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = %s", (run,)
        ).fetchone()[0]
        == 0
    )


def group(cls: str) -> dict[str, str]:
    return {
        "workflow_class": cls,
        "step_name": "capture",
        "stuck_reason": "paused_error",
        "error_class": "TimeoutError",
    }


def test_bulk_cancel_emits_one_event_per_run_it_cancelled(db_url, conn, seen):
    runs = paused_on_error(conn, "Bulk", 4)
    # one moves on before the press (resumed elsewhere): not cancelled, no event for it
    conn.execute("SELECT pgbus.workflow_command(%s, 'resume', 'other')", (runs[0],))
    pgbus.configure(database_url=db_url, web_actor=lambda request: "alice")
    c = client(db_url)
    r = post(c, "/workflows/attention/cancel", group("Bulk"), page="/workflows/attention")
    assert r.status_code == 303
    assert sorted(str(p["workflow_id"]) for _, p, _ in seen) == sorted(runs[1:])
    for name, payload, status_then in seen:
        assert name == "pgbus.workflow_cancelled"
        assert payload["actor"] == ACTOR and payload["workflow_class"] == "Bulk"
        assert status_then == "cancelled"  # after the commit
    assert status(conn, runs[0]) == "ready"


def test_bulk_resume_emits_what_a_resume_emits_and_a_forged_group_nothing(db_url, conn, seen):
    runs = paused_on_error(conn, "BulkResume", 3)
    c = client(db_url)
    post(c, "/workflows/attention/resume", group("BulkResume"), page="/workflows/attention")
    assert all(status(conn, w) == "ready" for w in runs)
    assert seen == []  # a resume has no event of its own (as with the API and MCP)
    forged = {**group("BulkResume"), "stuck_reason": "bored"}
    r = post(c, "/workflows/attention/cancel", forged)
    assert r.status_code in (303, 400)
    assert seen == [] and all(status(conn, w) == "ready" for w in runs)


def test_a_subscriber_that_raises_leaves_the_action_done(db_url, conn, seen):
    run = paused(conn, "Raises")

    def boom(name, payload):
        raise RuntimeError("subscriber bug")

    sub = subscribe("pgbus.workflow_cancelled", boom)
    try:
        c = client(db_url)
        act(c, run, "cancel")
    finally:
        sub.unsubscribe()
    assert status(conn, run) == "cancelled"
    assert [n for n, _, _ in seen] == ["pgbus.workflow_cancelled"]
