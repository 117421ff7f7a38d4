"""Recurring and deploy task declarations and schedules (pgbus.scheduling), and the scheduler
driven in this process against a real database: claims, catch-up, DST nights, refusals."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

import pgbus
from pgbus.config import configure, settings
from pgbus.errors import ConfigurationError
from pgbus.scheduler import Scheduler
from pgbus.scheduling import TaskDeclarationError, load_tasks, parse_schedule, parse_tasks
from tests.py.support import run_pgbus


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


# -------------------------------------------------------------------------------------------
# Schedules
# -------------------------------------------------------------------------------------------


def test_cron_and_every_schedules():
    cron = parse_schedule("*/15  * * * *")
    assert cron.text == "*/15 * * * *"
    assert cron.ticks(utc(2026, 1, 1, 12, 0), utc(2026, 1, 1, 13, 0)) == [
        utc(2026, 1, 1, 12, 15),
        utc(2026, 1, 1, 12, 30),
        utc(2026, 1, 1, 12, 45),
        utc(2026, 1, 1, 13, 0),
    ]
    assert cron.in_words() == "Every 15th minute of every hour"
    every = parse_schedule("every 5m")
    assert every.every == timedelta(minutes=5)
    assert every.ticks(utc(2026, 1, 1, 12, 0), utc(2026, 1, 1, 12, 12)) == [
        utc(2026, 1, 1, 12, 5),
        utc(2026, 1, 1, 12, 10),
    ]
    assert every.next_after(utc(2026, 1, 1, 12, 12)) == utc(2026, 1, 1, 12, 15)
    assert every.in_words() == "Every 5 minutes"
    assert parse_schedule("every 1h").in_words() == "Every hour"
    assert parse_schedule("30s").every == timedelta(seconds=30)
    assert parse_schedule("0 3 * * *", "Europe/Berlin").in_words() == (
        "At 03:00 every day (Europe/Berlin)"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("61 * * * *", "is not a valid cron line: Bad minute"),
        ("* * * *", "needs 5 fields"),
        ("every 0m", "at least 1m"),
        ("every 5 fortnights", "is not an interval"),
        ("", "must be a cron line"),
        (5, "must be a cron line"),
    ],
)
def test_bad_schedules_say_why(text, words):
    with pytest.raises(ValueError, match=words):
        parse_schedule(text)


def test_unknown_time_zone_is_refused():
    with pytest.raises(ValueError, match="'Mars/Olympus' is not a known time zone"):
        parse_schedule("0 3 * * *", "Mars/Olympus")
    with pytest.raises(ConfigurationError, match="scheduler_time_zone"):
        configure(scheduler_time_zone="Mars/Olympus")


def test_dst_spring_forward_in_berlin():
    """29 March 2026, 02:00 CET becomes 03:00 CEST: a daily 02:30 fires once, at 03:00 CEST;
    an hourly task fires 23 times that day."""
    daily = parse_schedule("30 2 * * *", "Europe/Berlin")
    assert daily.ticks(utc(2026, 3, 27, 12), utc(2026, 3, 30, 12)) == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # 02:30 does not exist: 03:00 CEST
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]
    hourly = parse_schedule("0 * * * *", "Europe/Berlin")
    day = hourly.ticks(utc(2026, 3, 28, 23) - timedelta(seconds=1), utc(2026, 3, 29, 21, 59))
    assert len(day) == 23
    assert utc(2026, 3, 29, 1) in day and len(set(day)) == 23


def test_dst_fall_back_in_berlin():
    """25 October 2026, 03:00 CEST becomes 02:00 CET: a daily 02:30 fires once (the first
    02:30); an hourly task fires 25 times that day, an hour apart."""
    daily = parse_schedule("30 2 * * *", "Europe/Berlin")
    assert daily.ticks(utc(2026, 10, 24, 12), utc(2026, 10, 26, 12)) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST, and not again at 02:30 CET
        utc(2026, 10, 26, 1, 30),  # 02:30 CET
    ]
    hourly = parse_schedule("0 * * * *", "Europe/Berlin")
    day = hourly.ticks(utc(2026, 10, 24, 22) - timedelta(seconds=1), utc(2026, 10, 25, 22, 59))
    assert len(day) == 25
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(day))


# -------------------------------------------------------------------------------------------
# Declarations
# -------------------------------------------------------------------------------------------

GOOD = {
    "nightly": {
        "class": "tests.py.sample_jobs:Record",
        "args": ["nightly"],
        "schedule": "0 3 * * *",
        "queue": "maintenance",
        "description": "Records a row",
    },
    "often": {"class": "tests.py.sample_jobs.Record", "args": "often", "every": "5m"},
    "flow": {
        "class": "tests.py.sample_workflows:ThreeSteps",
        "kwargs": {"n": "flow"},
        "every": "1h",
    },
}


def test_declarations_resolve_jobs_and_workflows():
    tasks = {t.key: t for t in parse_tasks("recurring", GOOD, "recurring.yml")}
    nightly = tasks["nightly"]
    assert nightly.target == "job"
    assert nightly.class_name == "tests.py.sample_jobs:Record"
    assert nightly.arguments == {"args": ["nightly"], "kwargs": {}}
    assert nightly.queue_name == "pgbus_maintenance"
    assert nightly.row()["human_schedule"] == "At 03:00 every day"
    assert tasks["often"].arguments == {"args": ["often"], "kwargs": {}}
    assert tasks["often"].queue_name == "pgbus_default"
    assert tasks["flow"].target == "workflow"
    assert tasks["flow"].arguments == {"n": "flow"}
    assert tasks["flow"].queue_name is None


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"class": "tests.py.sample_jobs:Record", "schedule": "61 * * * *"}, "Bad minute"),
        ({"class": "tests.py.sample_jobs:Record"}, "exactly one of schedule"),
        (
            {"class": "tests.py.sample_jobs:Record", "every": "5m", "schedule": "* * * * *"},
            "exactly one of schedule",
        ),
        ({"class": "tests.py.sample_jobs:Nope", "every": "5m"}, "has no 'Nope'"),
        ({"class": "no_such_module_x:Job", "every": "5m"}, "cannot import"),
        ({"class": "pgbus.config:Settings", "every": "5m"}, "neither a pgbus.Job"),
        ({"every": "5m"}, "needs a class"),
        (
            {"class": "tests.py.sample_jobs:Record", "every": "5m", "cron": "x"},
            "unknown option 'cron'",
        ),
        (
            {"class": "tests.py.sample_jobs:Record", "every": "5m", "enabled": "yes"},
            "enabled must be",
        ),
        ({"class": "tests.py.sample_jobs:Record", "every": "5m", "args": [object()]}, "argument 1"),
        (
            {"class": "tests.py.sample_workflows:ThreeSteps", "every": "5m", "args": [1]},
            "keyword arguments only",
        ),
        ("every 5m", "must be a mapping of options"),
    ],
)
def test_a_bad_entry_names_its_key_and_reason(entry, words):
    with pytest.raises(TaskDeclarationError, match=words) as caught:
        parse_tasks("recurring", {**GOOD, "broken": entry}, "recurring.yml")
    assert caught.value.key == "broken"
    assert str(caught.value).startswith("recurring.yml: task 'broken': ")


def test_deploy_declarations_need_a_version_or_every_deploy():
    ok = parse_tasks(
        "deploy",
        {
            "backfill": {"class": "tests.py.sample_jobs:Record", "args": ["b"], "version": 2},
            "warm": {"class": "tests.py.sample_jobs:Record", "args": ["w"], "every_deploy": True},
        },
        "deploy_tasks.yml",
    )
    assert [(t.key, t.version, t.every_deploy) for t in ok] == [
        ("backfill", "2", False),
        ("warm", None, True),
    ]
    for entry, words in [
        ({"class": "tests.py.sample_jobs:Record"}, "exactly one of version"),
        (
            {"class": "tests.py.sample_jobs:Record", "version": 1, "every_deploy": True},
            "exactly one",
        ),
        ({"class": "tests.py.sample_jobs:Record", "version": 1, "every": "5m"}, "unknown option"),
    ]:
        with pytest.raises(TaskDeclarationError, match=words):
            parse_tasks("deploy", {"bad": entry}, "deploy_tasks.yml")


def test_the_setting_is_checked_when_set_and_nothing_changes():
    before = settings()
    with pytest.raises(ConfigurationError, match=r"recurring_tasks\['broken'\].*Bad minute"):
        configure(
            recurring_tasks={
                "fine": {"class": "a.b:C", "every": "5m"},
                "broken": {"class": "a.b:C", "schedule": "61 * * * *"},
            }
        )
    assert settings() is before
    configure(recurring_tasks={"fine": {"class": "a.b:C", "every": "5m"}})
    assert settings().recurring_tasks == {"fine": {"class": "a.b:C", "every": "5m"}}
    pgbus.config.reset()


def test_bad_yaml_is_refused_with_the_file_and_line(tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text("nightly:\n  class: a.b:C\n  every: [5m\n")
    configure(recurring_tasks_file=str(path))
    try:
        with pytest.raises(
            TaskDeclarationError,
            match=r"recurring\.yml: is not valid YAML at line 4, column 1: expected ',' or ']'",
        ):
            load_tasks("recurring")
        path.write_text("- just\n- a list\n")
        with pytest.raises(TaskDeclarationError, match="must be a mapping of task keys"):
            load_tasks("recurring")
        configure(recurring_tasks_file=str(tmp_path / "missing.yml"))
        with pytest.raises(TaskDeclarationError, match=r"missing\.yml: does not exist"):
            load_tasks("recurring")
    finally:
        pgbus.config.reset()


def test_a_key_in_the_file_and_the_setting_is_refused(tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text("nightly:\n  class: tests.py.sample_jobs:Record\n  every: 5m\n")
    configure(
        recurring_tasks_file=str(path),
        recurring_tasks={"nightly": {"class": "tests.py.sample_jobs:Record", "every": "1h"}},
    )
    try:
        with pytest.raises(TaskDeclarationError, match=r"is declared in .*recurring\.yml too"):
            load_tasks("recurring")
    finally:
        pgbus.config.reset()


# -------------------------------------------------------------------------------------------
# The scheduler against the database (in this process)
# -------------------------------------------------------------------------------------------


def _executions(conn, key):
    return [
        r[0]
        for r in conn.execute(
            "SELECT run_at FROM pgbus.recurring_executions WHERE task_key = %s AND NOT manual"
            " ORDER BY run_at",
            (key,),
        )
    ]


def test_scheduler_fires_each_tick_once_and_catches_up_within_the_window(conn):
    configure(recurring_catch_up_window=timedelta(minutes=10))
    tasks = parse_tasks(
        "recurring",
        {"minutely": {"class": "tests.py.sample_jobs:Record", "args": ["m"], "every": "1m"}},
        "test",
    )
    sched = Scheduler(recurring=tasks, deploy=[])
    sched.prepare()
    conn.execute("UPDATE pgbus.recurring_tasks SET schedule_from = now() - interval '1 hour'")
    fired = sched.tick_recurring()
    # The window is 10 minutes: the ticks of the last 10 minutes (10, or 11 when one falls on
    # the window's edge), none before.
    assert len(fired) in (10, 11)
    runs = _executions(conn, "minutely")
    assert len(runs) == len(fired)
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(runs))
    # Again, and from a second scheduler that starts now: nothing more.
    assert sched.tick_recurring() == []
    other = Scheduler(recurring=tasks, deploy=[])
    other.prepare()
    assert other.tick_recurring() == []
    queued = conn.execute("SELECT count(*) FROM pgmq.q_pgbus_default").fetchone()[0]
    assert queued == len(runs)
    row = conn.execute(
        "SELECT next_run_at, last_run_at, human_schedule FROM pgbus.recurring_task_list"
    ).fetchone()
    assert row[1] == runs[-1]
    assert row[0] == runs[-1] + timedelta(minutes=1)
    assert row[2] == "Every minute"


@pytest.mark.parametrize(
    ("night", "expected"),
    [
        # spring forward: 02:30 does not exist, the tick is at 03:00 CEST
        (utc(2026, 3, 29), [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0)]),
        # fall back: 02:30 happens twice, the task fires once
        (utc(2026, 10, 25), [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30)]),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_dst_nights_in_berlin_fire_once_through_the_claims(conn, night, expected):
    """The scheduler walks a past DST night minute by minute (its clock stood in by `at`):
    the daily 02:30 Europe/Berlin task fires once a night, at the instants cron means."""
    configure(recurring_catch_up_window=timedelta(hours=1))
    tasks = parse_tasks(
        "recurring",
        {
            "half_past_two": {
                "class": "tests.py.sample_jobs:Record",
                "args": ["x"],
                "schedule": "30 2 * * *",
                "time_zone": "Europe/Berlin",
            },
            "hourly": {
                "class": "tests.py.sample_jobs:Record",
                "args": ["h"],
                "schedule": "0 * * * *",
                "time_zone": "Europe/Berlin",
            },
        },
        "test",
    )
    sched = Scheduler(recurring=tasks, deploy=[])
    sched.prepare()
    start = night - timedelta(days=1, hours=2)
    conn.execute("UPDATE pgbus.recurring_tasks SET schedule_from = %s", (start,))
    at = start
    while at <= night + timedelta(hours=4):
        sched.tick_recurring(at=at)
        at += timedelta(minutes=7)
    sched.tick_recurring(at=night + timedelta(hours=4))
    assert _executions(conn, "half_past_two") == expected
    hourly = _executions(conn, "hourly")
    # Every real hour from the schedule's start (included) to 04:00 UTC: 31 ticks whichever
    # way the clocks moved, none twice.
    assert len(hourly) == len(set(hourly)) == 31
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(hourly))


def test_scheduler_refuses_bad_declarations_and_writes_nothing(db_url, conn, tmp_path):
    path = tmp_path / "recurring.yml"
    path.write_text(
        "good:\n  class: tests.py.sample_jobs:Record\n  every: 5m\n"
        "bad:\n  class: tests.py.sample_jobs:Record\n  schedule: '*/5 * * *'\n"
    )
    out = run_pgbus(
        "scheduler",
        "--import",
        "tests.py.sample_jobs",
        env={"PGBUS_DATABASE_URL": db_url, "PGBUS_RECURRING_TASKS_FILE": str(path)},
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"pgbus: {path}: task 'bad': schedule '*/5 * * *' is not a cron line: it needs 5"
        " fields (minute hour day month weekday)"
    ]
    assert conn.execute("SELECT count(*) FROM pgbus.recurring_tasks").fetchone()[0] == 0
    path.write_text("good:\n  class: [unclosed\n")
    out = run_pgbus(
        "start",
        "--import",
        "tests.py.sample_jobs",
        env={"PGBUS_DATABASE_URL": db_url, "PGBUS_RECURRING_TASKS_FILE": str(path)},
    )
    assert out.returncode == 1
    assert "recurring.yml: is not valid YAML at line 3, column 1" in out.stderr
    assert "Traceback" not in out.stderr
    assert conn.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] == 0


def test_run_now_and_enable_from_python(conn):
    from pgbus import scheduling

    tasks = parse_tasks(
        "recurring",
        {
            "nightly": {
                "class": "tests.py.sample_jobs:Record",
                "args": ["n"],
                "schedule": "0 3 * * *",
            }
        },
        "test",
    )
    Scheduler(recurring=tasks, deploy=[]).prepare()
    assert scheduling.run_recurring_now("nightly")["ok"] is True
    assert scheduling.run_recurring_now("nobody") == {
        "ok": False,
        "code": "not_found",
        "task_key": "nobody",
    }
    assert scheduling.set_recurring_enabled("nightly", False)["enabled"] is False
    assert conn.execute("SELECT enabled FROM pgbus.recurring_tasks").fetchone()[0] is False


def test_revision_sources_in_order(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in ("PGBUS_REVISION", "DASH_VERSION", "KAMAL_VERSION"):
        monkeypatch.delenv(name, raising=False)
    assert settings().revision() is None
    (tmp_path / "REVISION").write_text("file-rev\n")
    assert settings().revision() == "file-rev"
    monkeypatch.setenv("KAMAL_VERSION", "kamal-rev")
    assert settings().revision() == "kamal-rev"
    monkeypatch.setenv("DASH_VERSION", "dash-rev")
    assert settings().revision() == "dash-rev"
    monkeypatch.setenv("PGBUS_REVISION", "pgbus-rev")
    assert settings().revision() == "pgbus-rev"
    configure(app_revision="setting-rev")
    try:
        assert settings().revision() == "setting-rev"
    finally:
        pgbus.config.reset()


def test_deploy_tick_fires_once_rolled_over_and_is_instrumented(conn):
    configure(app_revision="R1")
    events = []
    sub = pgbus.instrumentation.subscribe(
        "pgbus.deploy_task.*", lambda name, payload: events.append(payload)
    )
    try:
        tasks = parse_tasks(
            "deploy",
            {"backfill": {"class": "tests.py.sample_jobs:Record", "args": ["b"], "version": 1}},
            "test",
        )
        sched = Scheduler(recurring=[], deploy=tasks)
        assert sched.tick_deploy() == []  # no worker on R1 yet
        conn.execute("SELECT pgbus.process_register('worker', 'h', 1, 'R1')")
        fired = sched.tick_deploy()
        assert [(f["task_key"], f["arm"]) for f in fired] == [("backfill", "version:1")]
        assert sched.tick_deploy() == []
        assert events == [
            {
                "task_key": "backfill",
                "arm": "version:1",
                "version": "1",
                "app_revision": "R1",
                "class_name": "tests.py.sample_jobs:Record",
                "queue": "pgbus_default",
                "msg_id": fired[0]["msg_id"],
                "workflow_id": None,
                "manual": False,
            }
        ]
        from pgbus import scheduling

        assert scheduling.run_deploy_task_now("backfill")["manual"] is True
        assert events[-1]["manual"] is True and events[-1]["arm"] == "manual"
        assert [t["state"] for t in scheduling.deploy_tasks()] == ["enqueued"]
        assert scheduling.fleet_status()["rolled_over"] is True
        assert len(scheduling.deploy_task_runs("backfill")) == 2
    finally:
        sub.unsubscribe()
        pgbus.config.reset()


def test_db_status_names_the_missing_task_tables(db_url, conn):
    from pgbus import migrate

    assert migrate.status(db_url).missing_tables == []
    conn.execute("DROP TABLE pgbus.deploy_task_runs, pgbus.recurring_executions CASCADE")
    status = migrate.status(db_url)
    assert not status.up_to_date
    assert (
        "Recurring and deploy task tables missing (pgbus.recurring_executions,"
        " pgbus.deploy_task_runs): the scheduler cannot run"
    ) in status.lines()


def test_the_dispatcher_deletes_old_executions_and_runs(conn):
    from pgbus.dispatcher import Dispatcher

    conn.execute(
        "INSERT INTO pgbus.recurring_executions (task_key, run_at) VALUES"
        " ('a', now() - interval '8 days'), ('a', now() - interval '1 day')"
    )
    conn.execute(
        "INSERT INTO pgbus.deploy_task_runs (task_key, arm, enqueued_at) VALUES"
        " ('d', 'version:1', now() - interval '100 days'),"
        " ('d', 'version:2', now() - interval '95 days')"
    )
    done = Dispatcher().tick()
    assert done["cleanup_recurring_executions"] == 1
    assert done["cleanup_deploy_task_runs"] == 1  # version:2 is the newest claim: it stays


def test_overviews_for_the_dashboard_and_mcp(conn):
    from pgbus import scheduling

    tasks = parse_tasks(
        "recurring",
        {
            "a": {"class": "tests.py.sample_jobs:Record", "args": ["a"], "every": "1h"},
            "b": {"class": "tests.py.sample_jobs:Record", "args": ["b"], "schedule": "0 3 * * *"},
        },
        "test",
    )
    Scheduler(recurring=tasks, deploy=[]).prepare()
    everything = scheduling.recurring_overview()
    assert [t["key"] for t in everything["recurring_tasks"]] == ["a", "b"]
    assert everything["recurring_tasks"][1]["human_schedule"] == "At 03:00 every day"
    page = scheduling.recurring_overview(page=2, per_page=1)
    assert [t["key"] for t in page["recurring_tasks"]] == ["b"]
    assert (page["total"], page["has_more"]) == (2, False)
    overview = scheduling.deploy_tasks_overview()
    assert overview == {
        "fleet": {
            "revision": None,
            "rollover": None,
            "rolled_over": False,
            "revisions": [],
            "processes": [],
        },
        "deploy_tasks": [],
    }


def test_enqueue_events_become_metrics():
    from prometheus_client import CollectorRegistry

    from pgbus.instrumentation import emit
    from pgbus.metrics import MetricsSubscriber, PrometheusBackend

    backend = PrometheusBackend(CollectorRegistry())
    subscriber = MetricsSubscriber(backend).install()
    try:
        emit("pgbus.recurring.enqueue", task_key="nightly", class_name="app:Job", run_at=None)
        emit("pgbus.deploy_task.enqueue", task_key="backfill", class_name="app:Fix", arm="v")
    finally:
        subscriber.uninstall()
    sample = backend.registry.get_sample_value
    assert (
        sample("pgbus_recurring_enqueued_total", {"task": "nightly", "class_name": "app:Job"}) == 1
    )
    assert (
        sample("pgbus_deploy_task_enqueued_total", {"task": "backfill", "class_name": "app:Fix"})
        == 1
    )
