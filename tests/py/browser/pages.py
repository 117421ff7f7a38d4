"""Every dashboard page the browser tests visit, with real ids taken from the seeded database."""

from __future__ import annotations

import psycopg


def page_paths(db_url: str) -> dict[str, str]:
    with psycopg.connect(db_url) as conn:
        job = conn.execute(
            "SELECT msg_id FROM pgmq.q_default WHERE message ->> 'job_class' = 'app.jobs:ChargeCard'"
            " ORDER BY msg_id DESC LIMIT 1"
        ).fetchone()[0]
        failed = conn.execute(
            "SELECT msg_id FROM pgbus.job_failures WHERE queue_name = 'default' ORDER BY msg_id LIMIT 1"
        ).fetchone()[0]
        dead = conn.execute(
            "SELECT msg_id FROM pgmq.q_default_dlq ORDER BY msg_id LIMIT 1"
        ).fetchone()[0]
        batch = conn.execute("SELECT batch_id FROM pgbus.batches LIMIT 1").fetchone()[0]
        paused_run, done_run = conn.execute(
            "SELECT (SELECT workflow_id FROM pgbus.workflows WHERE workflow_class = 'OrderFlow'"
            "        AND status = 'paused' LIMIT 1),"
            " (SELECT workflow_id FROM pgbus.workflows WHERE workflow_class = 'OrderFlow'"
            "        AND subject_id = 'done')"
        ).fetchone()
    return {
        "home": "/",
        "queues": "/queues",
        "queue": "/queues/default",
        "jobs": "/jobs",
        "jobs failed": "/jobs?status=failed",
        "job": f"/jobs/default/{job}",
        "failed job": f"/jobs/default/{failed}",
        "dead letters": "/dead-letters",
        "dead letter": f"/dead-letters/default_dlq/{dead}",
        "events": "/events",
        "batches": "/batches",
        "batch": f"/batches/{batch}",
        "processes": "/processes",
        "insights": "/insights",
        "recurring tasks": "/recurring",
        "recurring task": "/recurring/nightly_report",
        "deploy tasks": "/deploy-tasks",
        "deploy task": "/deploy-tasks/backfill_totals",
        "workflow insights": "/workflows/definitions",
        "workflow class insights": "/workflows/definitions/app.workflows.OrderFlow?window=7d",
        "workflows": "/workflows",
        "workflows, all": "/workflows?status=all",
        "workflow run (paused)": f"/workflows/{paused_run}",
        "workflow run (timeline)": f"/workflows/{done_run}",
        "workflows attention": "/workflows/attention",
    }
