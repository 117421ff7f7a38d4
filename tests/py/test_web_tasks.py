"""The dashboard's Recurring and Deploy tasks pages: their figures, fragments and actions."""

from __future__ import annotations

import pytest

import pgbus
from pgbus.scheduler import Scheduler
from pgbus.scheduling import parse_tasks
from tests.py.web_support import client, flash_text, post

PAGES = {
    "/recurring": ["recurring"],
    "/recurring/nightly": ["task", "executions"],
    "/deploy-tasks": ["rollover", "tasks"],
    "/deploy-tasks/backfill": ["task", "runs"],
}


@pytest.fixture
def tasks(conn):
    """Two recurring tasks (one fired once), and a deploy task fired on revision R1 by a
    fleet of one worker."""
    recurring = parse_tasks(
        "recurring",
        {
            "nightly": {
                "class": "tests.py.sample_jobs:Record",
                "args": ["n"],
                "schedule": "0 3 * * *",
                "time_zone": "Europe/Berlin",
                "description": "Nightly record",
            },
            "often": {"class": "tests.py.sample_jobs:Record", "args": ["o"], "every": "5m"},
        },
        "test",
    )
    deploy = parse_tasks(
        "deploy",
        {"backfill": {"class": "tests.py.sample_jobs:Record", "args": ["b"], "version": 3}},
        "test",
    )
    Scheduler(recurring=recurring, deploy=[]).prepare()
    conn.execute(
        "UPDATE pgbus.recurring_tasks SET schedule_from = now() - interval '2 days'"
        " WHERE key = 'nightly'"
    )
    conn.execute(
        "SELECT pgbus.recurring_fire('nightly', date_trunc('day', now()) - interval '21 hours')"
    )
    conn.execute("SELECT pgbus.process_register('worker', 'host-1', 11, 'R1')")
    pgbus.configure(app_revision="R1")
    sched = Scheduler(recurring=[], deploy=deploy)
    assert [r["task_key"] for r in sched.tick_deploy()] == ["backfill"]
    return conn


def test_every_page_and_fragment_renders(db_url, tasks):
    c = client(db_url)
    for page, regions in PAGES.items():
        r = c.get(page)
        assert r.status_code == 200, (page, r.text[:300])
        for region in regions:
            assert f'<section id="{region}" data-refresh="' in r.text, (page, region)
            f = c.get(f"{page}?fragment={region}")
            assert f.status_code == 200, (page, region)
            assert "<html" not in f.text and "<section" not in f.text
    nav = c.get("/").text
    assert 'href="/recurring"' in nav and 'href="/deploy-tasks"' in nav


def test_the_recurring_pages_show_schedule_next_last_and_executions(db_url, tasks):
    c = client(db_url)
    listing = c.get("/recurring").text
    assert "At 03:00 every day (Europe/Berlin)" in listing
    assert "Every 5 minutes" in listing
    assert "Nightly record" in listing
    detail = c.get("/recurring/nightly").text
    assert "0 3 * * *, Europe/Berlin" in detail
    assert '<a href="/jobs/pgbus_default/1">message 1</a> in pgbus_default' in detail
    assert "No execution yet." in c.get("/recurring/often").text
    assert c.get("/recurring/nobody").status_code == 404
    assert c.get("/recurring/bad%20key").status_code == 404


def test_recurring_actions_run_now_and_toggle(db_url, tasks):
    c = client(db_url)
    r = post(c, "/recurring/often/run", page="/recurring")
    assert r.status_code == 303
    assert r.headers["location"] == "/recurring/often"
    assert ("ok", "Recurring task often enqueued now (message 3 in pgbus_default)") in flash_text(
        c, "/recurring/often"
    )
    assert (
        tasks.execute(
            "SELECT count(*) FROM pgbus.recurring_executions WHERE task_key = 'often' AND manual"
        ).fetchone()[0]
        == 1
    )
    post(c, "/recurring/often/disable", page="/recurring")
    assert tasks.execute(
        "SELECT enabled FROM pgbus.recurring_tasks WHERE key = 'often'"
    ).fetchone() == (False,)
    assert "Enable" in c.get("/recurring/often").text
    post(c, "/recurring/often/enable", page="/recurring")
    assert tasks.execute(
        "SELECT enabled FROM pgbus.recurring_tasks WHERE key = 'often'"
    ).fetchone() == (True,)
    refused = post(c, "/recurring/nobody/run", page="/recurring")
    assert refused.status_code == 303
    assert ("refused", "Not done: there is no recurring task nobody") in flash_text(c, "/recurring")
    assert post(c, "/recurring/often/explode", page="/recurring").status_code == 404
    assert c.post("/recurring/often/run").status_code == 403  # no CSRF token
    actions = tasks.execute(
        "SELECT actor, action FROM pgbus.operator_actions ORDER BY id"
    ).fetchall()
    assert [a for _, a in actions] == [
        "recurring_task_run_now",
        "recurring_task_disable",
        "recurring_task_enable",
        "recurring_task_run_now",
    ]
    assert all(actor.startswith("dashboard:") for actor, _ in actions)


def test_the_deploy_tasks_page_shows_the_rollover_and_each_task(db_url, tasks):
    c = client(db_url)
    page = c.get("/deploy-tasks").text
    assert "Every live process runs revision <strong>R1</strong>" in page
    assert "version 3" in page and "enqueued" in page
    tasks.execute("SELECT pgbus.process_register('worker', 'host-2', 12, 'R2')")
    page = c.get("/deploy-tasks?fragment=rollover").text
    assert "The newest revision is <strong>R2</strong>" in page
    assert "1 of 2 live processes still run other revisions" in page
    assert "1 worker" in page
    detail = c.get("/deploy-tasks/backfill").text
    assert "version:3" in detail and "R1" in detail
    assert c.get("/deploy-tasks/nobody").status_code == 404


def test_deploy_actions_run_now_and_toggle(db_url, tasks):
    events = []
    sub = pgbus.instrumentation.subscribe(
        "pgbus.deploy_task.enqueue", lambda n, p: events.append(p)
    )
    try:
        c = client(db_url)
        r = post(c, "/deploy-tasks/backfill/run", page="/deploy-tasks")
        assert r.status_code == 303
        assert events and events[-1]["manual"] is True
        runs = tasks.execute(
            "SELECT arm, manual, app_revision FROM pgbus.deploy_task_runs ORDER BY id"
        ).fetchall()
        assert runs == [("version:3", False, "R1"), ("manual", True, "R1")]
        post(c, "/deploy-tasks/backfill/disable", page="/deploy-tasks")
        assert "disabled" in c.get("/deploy-tasks?fragment=tasks").text
        post(c, "/deploy-tasks/backfill/enable", page="/deploy-tasks")
        assert tasks.execute("SELECT enabled FROM pgbus.deploy_tasks").fetchone() == (True,)
        post(c, "/deploy-tasks/nobody/disable", page="/deploy-tasks")
        assert ("refused", "Not done: there is no deploy task nobody") in flash_text(
            c, "/deploy-tasks"
        )
    finally:
        sub.unsubscribe()
        pgbus.config.reset()
