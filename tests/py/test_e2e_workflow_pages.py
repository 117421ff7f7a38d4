"""The Workflows pages' actions racing a real `pgbus worker` process: two operators pressing
Pause and Cancel while the worker runs the run's step and ends it, a bulk cancel of an
attention group while the worker runs and finishes some of the group's runs, and a bulk resume
while another operator resumes some of the group and the worker finishes them. The worker is the
real process (tests/py/support.py's worker_process); the test only decides when a step body may
go on (an advisory lock the sample step waits for) and, for the bulk, when the bulk may reach
its first run (that run's row lock), so that each interleaving happens for certain."""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager

import psycopg
import pytest

from tests.py.sample_workflows import Flaky, HeldSteps, ThreeSteps
from tests.py.support import count_effects, wait_until, worker_process
from tests.py.web_support import client, flash_text, post

pytestmark = pytest.mark.slow


def left_in_queue(conn: psycopg.Connection, run: str) -> int:
    """The run's attempts' messages still in their queue (read or not): 0 once the worker has
    ended (or the engine has dropped) every attempt of the run."""
    total = 0
    for queue, ids in conn.execute(
        "SELECT queue, array_agg(msg_id) FROM pgbus.workflow_steps"
        " WHERE workflow_id = %s AND msg_id IS NOT NULL GROUP BY queue",
        (run,),
    ):
        total += conn.execute(
            f"SELECT count(*) FROM pgmq.q_{queue} WHERE msg_id = ANY(%s)", (ids,)
        ).fetchone()[0]
    return total


@contextmanager
def bulk_held_at(db_url: str, c, verb: str, group: dict[str, str], oldest: str):
    """Presses the attention page's bulk `verb` on `group` on a thread of its own while the test
    holds `oldest`'s row lock (the bulk goes oldest first); yields, once the bulk waits on that
    lock, a dict whose "r" is the press's response after the block. Leaving lets go of the lock
    and waits for the press."""
    gate = psycopg.connect(db_url)
    gate.execute("SELECT 1 FROM pgbus.workflows WHERE workflow_id = %s FOR UPDATE", (oldest,))
    out: dict = {}

    def press():
        out["r"] = post(c, f"/workflows/attention/{verb}", group, page="/workflows/attention")

    t = threading.Thread(target=press)
    t.start()
    try:
        with psycopg.connect(db_url, autocommit=True) as probe:
            wait_until(
                lambda: (
                    probe.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock' AND query LIKE '%workflow_attention_act%'"
                    ).fetchone()[0]
                    == 1
                ),
                what=f"the bulk {verb} waiting on the oldest run",
            )
        yield out
    finally:
        gate.rollback()
        gate.close()
        t.join(30)


def attempt_status(conn: psycopg.Connection, run: str, step: str) -> list[str]:
    return [
        s
        for (s,) in conn.execute(
            "SELECT status FROM pgbus.workflow_steps WHERE workflow_id = %s AND step_name = %s"
            " ORDER BY step_id",
            (run, step),
        )
    ]


def test_two_operators_press_while_a_worker_ends_the_step(db_url, effects, procs):
    """Pause and Cancel pressed at once while a real worker is in the step, whose body is let go
    at the same moment: whatever the order, Cancel wins in the end, Pause is told the truth,
    the step's writes exist exactly when its end was recorded, and nothing runs after the
    cancel."""
    gate = psycopg.connect(db_url, autocommit=True)
    gate.execute(
        "SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)",
        (HeldSteps.HOLD_LOCK, HeldSteps.AFTER_LOCK),
    )
    run = HeldSteps.start()
    wid = str(run.workflow_id)
    procs.append(worker_process(db_url))
    wait_until(
        lambda: count_effects(effects, "hold_started", wid) == 1 and run.status() == "running",
        timeout=30,
        what="the worker inside the step",
    )
    c1, c2 = client(db_url), client(db_url)
    page = f"/workflows/{wid}"
    tokens = [
        re.search(r'name="csrf_token" value="([0-9a-f]{64})"', c.get(page).text).group(1)
        for c in (c1, c2)
    ]
    answers: dict[str, int] = {}

    def press(name, c, token, verb):
        answers[name] = c.post(f"{page}/{verb}", data={"csrf_token": token}).status_code

    threads = [
        threading.Thread(target=press, args=("pause", c1, tokens[0], "pause")),
        threading.Thread(target=press, args=("cancel", c2, tokens[1], "cancel")),
    ]
    for t in threads:
        t.start()
    gate.execute("SELECT pg_advisory_unlock(%s)", (HeldSteps.HOLD_LOCK,))  # the body goes on
    for t in threads:
        t.join(30)
    assert answers == {"pause": 303, "cancel": 303}
    said_pause, said_cancel = dict(flash_text(c1, "/workflows")), dict(flash_text(c2, "/workflows"))
    assert said_cancel == {"ok": "Cancelled"}
    assert said_pause in ({"ok": "Paused"}, {"refused": "Not done: the run is cancelled now."})

    # The worker ends the step (recorded, or refused as stale) before the test goes on.
    wait_until(lambda: "running" not in attempt_status(effects, wid, "hold"), timeout=30)
    gate.execute("SELECT pg_advisory_unlock(%s)", (HeldSteps.AFTER_LOCK,))
    wait_until(lambda: left_in_queue(effects, wid) == 0, timeout=30, what="the worker done")

    assert run.status() == "cancelled"
    hold = attempt_status(effects, wid, "hold")
    assert len(hold) == 1 and hold[0] in ("completed", "superseded")
    # The body's writes committed exactly when its end was recorded (not when it was refused).
    assert count_effects(effects, "hold_done", wid) == (1 if hold == ["completed"] else 0)
    assert count_effects(effects, "after_done", wid) == 0  # nothing finished after the cancel
    events = [
        e
        for (e,) in effects.execute(
            "SELECT event FROM pgbus.workflow_events WHERE workflow_id = %s"
            " AND actor LIKE 'dashboard%%' ORDER BY event_id",
            (wid,),
        )
    ]
    assert events == (["paused", "cancelled"] if "ok" in said_pause else ["cancelled"])
    assert procs[0].popen.poll() is None and "Traceback" not in procs[0].output()
    gate.close()


def test_bulk_cancel_races_a_worker_that_finishes_some_of_the_group(db_url, effects, procs):
    """Six overdue runs form one attention group. The bulk Cancel reads the group, then waits for
    the oldest run (whose row lock the test holds); meanwhile a real worker runs and finishes the
    other five. Let go, the bulk cancels the oldest and reports the five as moved on."""
    runs = [ThreeSteps.start(n=f"bulk{i}") for i in range(6)]
    ids = [str(r.workflow_id) for r in runs]
    # Due 10, 9, ... 5 minutes ago: overdue, the first one oldest (the bulk goes oldest first).
    for i, wid in enumerate(ids):
        effects.execute(
            "UPDATE pgbus.workflow_steps SET scheduled_at = now() - make_interval(mins => %s)"
            " WHERE workflow_id = %s",
            (10 - i, wid),
        )
    c = client(db_url)
    groups = c.get("/workflows/attention").text
    assert ThreeSteps.workflow_name in groups and "Overdue" in groups
    group = {
        "workflow_class": ThreeSteps.workflow_name,
        "step_name": "one",
        "stuck_reason": "overdue",
        "error_class": "",
    }
    with bulk_held_at(db_url, c, "cancel", group, ids[0]) as out:
        procs.append(worker_process(db_url))
        wait_until(
            lambda: all(r.status() == "finished" for r in runs[1:]),
            timeout=60,
            what="the worker finished the five other runs",
        )
    assert out["r"].status_code == 303
    assert ("ok", "Cancelled 1; 5 had already moved on") in flash_text(c, "/workflows/attention")
    assert runs[0].status() == "cancelled"
    assert attempt_status(effects, ids[0], "one") == ["superseded"]
    # Each finished run's steps ran once; the cancelled one's never ran.
    for wid, r in zip(ids, runs, strict=True):
        expected = 0 if r is runs[0] else 1
        for kind in ("one", "two", "three"):
            assert count_effects(effects, kind, f"bulk{ids.index(wid)}") == expected
    assert procs[0].popen.poll() is None and "Traceback" not in procs[0].output()


def test_bulk_resume_races_a_worker_that_finishes_some_of_the_group(db_url, effects, procs):
    """A real worker pauses six runs on their failing step: one attention group. The bulk Resume
    reads the group, then waits for the oldest run (whose row lock the test holds); meanwhile
    another operator resumes the three newest and the worker, its step fixed, finishes them.
    Let go, the bulk resumes the three others and reports the three finished ones as moved on:
    every run is resumed once, by one of the two, and finishes once."""
    runs = {str(r.workflow_id): r for r in (Flaky.start() for _ in range(6))}
    procs.append(worker_process(db_url))
    wait_until(
        lambda: all(r.status() == "paused" for r in runs.values()),
        timeout=60,
        what="the worker paused the six runs on their error",
    )
    # The bulk's order: oldest first (pgbus.workflow_attention_act).
    order = [
        str(w)
        for (w,) in effects.execute(
            "SELECT workflow_id FROM pgbus.workflow_stuck(only_class => %s)"
            " WHERE reason = 'paused_error' ORDER BY since, workflow_id",
            (Flaky.workflow_name,),
        )
    ]
    assert sorted(order) == sorted(runs)
    c = client(db_url)
    groups = c.get("/workflows/attention").text
    assert f'aria-label="Resume {Flaky.workflow_name} charge paused on an error"' in groups
    group = {
        "workflow_class": Flaky.workflow_name,
        "step_name": "charge",
        "stuck_reason": "paused_error",
        "error_class": "TimeoutError",
    }
    with bulk_held_at(db_url, c, "resume", group, order[0]) as out:
        effects.execute("INSERT INTO effects (kind, key) VALUES ('fixed', 'now')")
        for wid in order[3:]:
            assert runs[wid].resume(actor="other", reason="fixed") == "ready"
        wait_until(
            lambda: all(runs[w].status() == "finished" for w in order[3:]),
            timeout=60,
            what="the worker finished the three runs the other operator resumed",
        )
    assert out["r"].status_code == 303
    assert ("ok", "Resumed 3; 3 had already moved on") in flash_text(c, "/workflows/attention")
    wait_until(
        lambda: all(r.status() == "finished" for r in runs.values()),
        timeout=60,
        what="the worker finished the three runs the bulk resumed",
    )
    for i, wid in enumerate(order):
        resumed = [
            actor
            for (actor,) in effects.execute(
                "SELECT actor FROM pgbus.workflow_events WHERE workflow_id = %s"
                " AND event = 'resumed'",
                (wid,),
            )
        ]
        # Once each: by the bulk (the three oldest) or by the other operator.
        assert len(resumed) == 1, (i, resumed)
        assert resumed[0].startswith("dashboard") if i < 3 else resumed == ["other"], (i, resumed)
        assert [(s["step_name"], s["status"]) for s in runs[wid].steps()] == [
            ("charge", "failed"),
            ("charge", "completed"),
            ("receipt", "completed"),
        ], i
        assert count_effects(effects, "charge_try", wid) == 1  # the failed try rolled back
    assert procs[0].popen.poll() is None
