"""Stopping and starting real processes whatever the database does: SIGTERM with the server
gone, with a hung step, with the database dropped; a bad URL; an outage and the server's
return."""

import signal
import time

import psycopg
import pytest

import pgbus
from tests.py.conftest import ADMIN_URL
from tests.py.sample_jobs import Hang, Record
from tests.py.sample_workflows import HangingStep
from tests.py.support import (
    FAST,
    count_effects,
    pgbus_process,
    private_server,
    run_pgbus,
    wait_until,
    worker_process,
)

pytestmark = pytest.mark.slow

DRAIN = 2  # seconds: PGBUS_DRAIN_TIMEOUT of the processes below
SOON = 5  # seconds: "a few" after the drain timeout
OUTAGE = 12  # seconds the server is away in the outage test
APP = (
    "--import",
    "tests.py.sample_jobs",
    "--import",
    "tests.py.sample_workflows",
    "--import",
    "tests.py.sample_events",
)


def started(kind: str, url: str, **env: str):
    """A real `pgbus <kind>` process against `url`, once it said it started."""
    env = {"PGBUS_DATABASE_URL": url, "PGBUS_DRAIN_TIMEOUT": str(DRAIN), **FAST, **env}
    p = worker_process(url, env=env) if kind == "worker" else pgbus_process(kind, *APP, env=env)
    p.wait_for_output(
        {
            "worker": "worker started",
            "dispatcher": "dispatcher started",
            "consumer": "consumer started",
            "scheduler": "scheduler started",
        }.get(kind, "started")
    )
    return p


def registered(url: str, n: int) -> bool:
    """Whether `n` processes have their row in pgbus.processes."""
    with psycopg.connect(url) as c:
        return c.execute("SELECT count(*) FROM pgbus.processes").fetchone()[0] >= n


def noticed_outage(*processes, each: int = 1) -> None:
    """Waits until every one of `processes` logged the outage (`each` times: a supervisor's
    children each log it once)."""
    for p in processes:
        wait_until(
            lambda p=p: p.output().count("database unreachable") >= each,
            15,
            what=f"the outage logged:\n{p.output()[-2000:]}",
        )


def stop_within(p, seconds: float) -> tuple[int, float]:
    """SIGTERM; (exit code, seconds it took), or an AssertionError when it took longer."""
    begun = time.monotonic()
    p.signal(signal.SIGTERM)
    try:
        code = p.wait(seconds)
    except Exception:
        raise AssertionError(
            f"still running {seconds}s after SIGTERM:\n{p.output()[-3000:]}"
        ) from None
    return code, time.monotonic() - begun


@pytest.mark.parametrize("kind", ["worker", "consumer", "dispatcher", "scheduler", "start"])
def test_sigterm_with_the_database_gone_stops_in_time(kind, procs):
    with private_server() as server:
        p = started(kind, server.url)
        procs.append(p)
        if kind == "start":
            wait_until(lambda: p.output().count("started ") >= 2, what="the children")
            # (the supervisor and its worker and dispatcher)
            wait_until(lambda: registered(server.url, 3), what="every process registered")
        server._pg("stop")
        noticed_outage(p, each=2 if kind == "start" else 1)
        code, _ = stop_within(p, DRAIN + SOON + (5 if kind == "start" else 0))
        assert code == 0, p.output()
        assert "Traceback" not in p.output()


def test_sigterm_with_a_hung_step_and_job_stops_in_time(db_url, users, procs):
    run = HangingStep.start()
    Hang.perform_later("hung")
    p = started("worker", db_url)
    procs.append(p)
    wait_until(
        lambda: (
            count_effects(users, "hang_started") == 1
            and count_effects(users, "started", "hung") == 1
        )
    )
    code, _ = stop_within(p, DRAIN + SOON)
    assert code == 2  # the drain timed out
    assert "2 jobs still running after the drain timeout" in p.output()
    assert run.status() in ("running", "ready", "paused")


def test_sigterm_after_the_database_was_dropped_stops_in_time(db_url, effects, procs):
    worker, consumer = started("worker", db_url), started("consumer", db_url)
    dispatcher = started("dispatcher", db_url)
    procs += [worker, consumer, dispatcher]
    name = db_url.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    noticed_outage(worker, consumer, dispatcher)
    for p in (worker, consumer, dispatcher):
        code, _ = stop_within(p, DRAIN + SOON)
        assert code == 0, p.output()
        assert "Traceback" not in p.output()
    assert "database unreachable" in worker.output()


@pytest.mark.parametrize("kind", ["worker", "consumer", "dispatcher", "scheduler", "start"])
@pytest.mark.parametrize(
    ("where", "cause"),
    [
        ("127.0.0.1:1/x", "Connection refused"),
        ("{server}/no_such_db", 'database "no_such_db" does not exist'),
    ],
)
def test_a_bad_database_url_fails_fast_with_its_cause_on_one_line(kind, where, cause):
    server = ADMIN_URL.split("://", 1)[1].rsplit("/", 1)[0]
    url = "postgresql://" + where.format(server=server)
    begun = time.monotonic()
    out = run_pgbus(kind, *APP, env={"PGBUS_DATABASE_URL": url}, timeout=30)
    took = time.monotonic() - begun
    assert out.returncode == 1
    assert took < 5, f"took {took:.1f}s"
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("pgbus: cannot reach the database at ") and lines[0].endswith(cause)


def test_work_resumes_within_two_seconds_of_the_servers_return(procs):
    with private_server() as server:
        worker = started("worker", server.url)
        consumer = started("consumer", server.url)
        dispatcher = started("dispatcher", server.url)
        procs += [worker, consumer, dispatcher]

        def done(key):
            with psycopg.connect(server.url) as c:
                return count_effects(c, "done", key) + count_effects(c, "order", key)

        def send(key):
            with psycopg.connect(server.url, autocommit=True) as c:
                Record.perform_later(key, conn=c)
                pgbus.publish("orders.created", {"order_id": key}, conn=c)

        send("before")
        wait_until(lambda: done("before") == 2)
        lines_before = {p: len(p.output().splitlines()) for p in procs}
        server._pg("stop")
        noticed_outage(worker, consumer, dispatcher)
        # The outage itself: longer than reconnection delays that kept doubling would reach
        # in that time (0.5 + 1 + 2 + 4 s), so a doubling delay would show.
        time.sleep(OUTAGE)
        server._pg("start")
        back = time.monotonic()
        send("after")
        wait_until(
            lambda: done("after") == 2, timeout=30, what="the job and event sent after the outage"
        )
        took = time.monotonic() - back
        assert took < 2.0, f"resumed {took:.1f}s after the server's return"
        for p in procs:  # (the dispatcher notices at its next tick)
            wait_until(
                lambda p=p: "database reachable again" in p.output(), 10, what="the return logged"
            )
        for p in procs:
            during = p.output().splitlines()[lines_before[p] :]
            assert "Traceback" not in p.output(), p.output()
            assert len(during) <= 4, "\n".join(during)
            assert any("database unreachable" in line for line in during), "\n".join(during)
            assert any("database reachable again" in line for line in during), "\n".join(during)


def test_a_dispatcher_whose_supervisor_is_gone_says_why(db_url):
    out = run_pgbus(
        "dispatcher", env={"PGBUS_DATABASE_URL": db_url, "PGBUS_SUPERVISOR_PID": "1"}, timeout=30
    )
    assert out.returncode == 0
    assert "its supervisor (pid 1) is gone: stopping" in out.stdout + out.stderr
